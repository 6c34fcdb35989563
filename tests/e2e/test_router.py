"""`ember router` against fake prefill and decode instances (Python HTTP servers on loopback that
record what they were sent): the two-phase flow and its bodies, SSE passthrough as it is produced,
n > 1, the API key, the fallback when prefill fails, the 502 when decode is down, decode dying
mid-stream, a client leaving mid-stream, /health and /metrics. No model: the router only speaks
HTTP, so the whole file runs in seconds."""
import http.client
import json
import pathlib
import re
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from serving import free_port

KV = {"remote_engine_id": "prefill-0", "remote_block_ids": [4, 5, 6], "remote_host": "127.0.0.1",
      "remote_port": 5600, "num_bytes": 4096}


class FakeInstance:
    """One fake instance. `mode` picks its behaviour; `bodies` records (path, JSON body, headers)."""

    def __init__(self, role, mode="ok"):
        self.role = role
        self.mode = mode
        self.bodies = []
        self.release = threading.Event()  # a "gated" stream waits on it after its first event
        self.client_closed = threading.Event()  # a "slow" stream's writes failed: the router hung up
        self.sent_all_at = None  # when a stream's last event was written
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == "/health":
                    return self.send_json(200 if fake.mode != "unhealthy" else 503, {})
                if self.path == "/v1/models":
                    return self.send_json(200, {"object": "list", "data": [{"id": f"fake-{fake.role}"}]})
                self.send_json(404, {"error": {"message": "no route"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.bodies.append((self.path, body, dict(self.headers)))
                if fake.role == "prefill":
                    return self.prefill(body)
                self.decode(body)

            def prefill(self, body):
                if fake.mode == "hang":
                    # Never answers; notes when the router closes the connection.
                    deadline = time.time() + 10
                    while time.time() < deadline:
                        readable, _, _ = select.select([self.connection], [], [], 0.05)
                        if readable and self.connection.recv(1, socket.MSG_PEEK) == b"":
                            fake.client_closed.set()
                            break
                    self.close_connection = True
                    return
                if fake.mode == "error":
                    return self.send_json(500, {"error": {"message": "prefill broke"}})
                answer = {"id": "cmpl-p", "choices": [{"index": 0, "text": "x", "finish_reason": "length"}]}
                if fake.mode != "no_kv":
                    answer["kv_transfer_params"] = KV
                self.send_json(200, answer)

            def decode(self, body):
                if fake.mode == "bad_request":
                    return self.send_json(400, {"error": {"message": "max_tokens is too large", "type": "invalid_request_error"}})
                n = body.get("n", 1)
                if not body.get("stream"):
                    choices = [{"index": i, "text": f"hello {i}", "finish_reason": "stop"} for i in range(n)]
                    return self.send_json(200, {"id": "cmpl-d", "object": "text_completion", "choices": choices})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                events = {"slow": 400, "big": 4096}.get(fake.mode, 4)
                pad = "x" * 4000 if fake.mode == "big" else ""
                try:
                    for k in range(events):
                        for i in range(n):
                            self.chunk(f'data: {{"choices": [{{"index": {i}, "text": "t{k}{pad}"}}]}}\n\n')
                        if k == 0 and fake.mode == "gated":
                            fake.release.wait(10)
                        if k == 1 and fake.mode == "die":
                            # Half an event, then the connection drops without the last chunk.
                            self.chunk('data: {"choi')
                            self.wfile.flush()
                            self.connection.shutdown(socket.SHUT_RDWR)
                            self.close_connection = True
                            return
                        if fake.mode == "slow":
                            time.sleep(0.05)
                    fake.sent_all_at = time.time()
                    self.chunk("data: [DONE]\n\n")
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    fake.client_closed.set()
                    self.close_connection = True

            def chunk(self, text):
                data = text.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def send_json(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def dead_url():
    """A loopback URL nothing listens on (connections are refused)."""
    return f"http://127.0.0.1:{free_port()}"


class Router:
    def __init__(self, ember_bin, prefill, decode, *args, request_timeout=10):
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [str(ember_bin), "router", "--prefill", ",".join(prefill), "--decode", ",".join(decode), "--port", "0",
             "--connect-timeout-s", "2", "--request-timeout-s", str(request_timeout), *map(str, args)],
            stdout=subprocess.DEVNULL, stderr=self.log, text=True)
        deadline = time.time() + 15
        while time.time() < deadline:
            text = pathlib.Path(self.log.name).read_text()
            match = re.search(r"routing on http://127\.0\.0\.1:(\d+)", text)
            if match:
                self.port = int(match.group(1))
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"ember router exited: {text}")
            time.sleep(0.05)
        raise AssertionError("ember router did not start: " + pathlib.Path(self.log.name).read_text())

    def logs(self):
        return pathlib.Path(self.log.name).read_text()

    def connect(self, timeout=15):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def post(self, path, body, headers=None):
        conn = self.connect()
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        data = resp.read().decode()
        conn.close()
        return resp.status, resp.getheader("Content-Type"), data

    def get(self, path, headers=None):
        conn = self.connect()
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read().decode()
        conn.close()
        return resp.status, data

    def metric(self, line_prefix):
        _, text = self.get("/metrics")
        for line in text.splitlines():
            if line.startswith(line_prefix + " "):
                return float(line.rsplit(" ", 1)[1])
        raise KeyError(line_prefix)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise
        self.log.close()
        pathlib.Path(self.log.name).unlink()
        return self.proc.returncode


@pytest.fixture
def fakes():
    prefill, decode = FakeInstance("prefill"), FakeInstance("decode")
    yield prefill, decode
    decode.release.set()
    prefill.stop()
    decode.stop()


@pytest.fixture
def start_router(ember_bin):
    routers = []

    def start(prefill, decode, *args, **kwargs):
        router = Router(ember_bin, prefill, decode, *args, **kwargs)
        routers.append(router)
        return router

    yield start
    for router in routers:
        assert router.stop() == 0, router.logs()


def sse_events(text):
    return [line[len("data: "):] for line in text.split("\n") if line.startswith("data: ")]


def test_two_phase_completion(fakes, start_router):
    prefill, decode = fakes
    router = start_router([prefill.url], [decode.url], "--upstream-api-key", "up-key")
    original = {"model": "m", "prompt": "hello there", "max_tokens": 20, "temperature": 0, "stop": ["\n"],
                "min_tokens": 2}
    status, content_type, data = router.post("/v1/completions", original)
    assert status == 200, data
    assert content_type.startswith("application/json")
    assert json.loads(data)["choices"][0]["text"] == "hello 0"
    [(p_path, p_body, p_headers)] = prefill.bodies
    assert p_path == "/v1/completions"
    expected = dict(original, max_tokens=1, stream=False, n=1,
                    kv_transfer_params={"do_remote_decode": True, "do_remote_prefill": False})
    del expected["min_tokens"]
    assert p_body == expected
    assert "max_completion_tokens" not in p_body
    [(d_path, d_body, d_headers)] = decode.bodies
    assert d_path == "/v1/completions"
    assert d_body == dict(original, kv_transfer_params=KV)
    assert list(d_body)[:-1] == list(original)  # the client's field order, the handle appended
    # Both phases carry the upstream key and one request id.
    assert p_headers["Authorization"] == d_headers["Authorization"] == "Bearer up-key"
    assert p_headers["X-Request-Id"] == d_headers["X-Request-Id"]
    assert router.metric('ember_router:requests_total{phase="prefill",outcome="ok"}') == 1
    assert router.metric('ember_router:requests_total{phase="decode",outcome="ok"}') == 1
    assert router.metric("ember_router:kv_transfer_bytes_total") == 4096
    assert router.metric("ember_router:fallbacks_total") == 0
    assert router.metric("ember_router:prefill_seconds_count") == 1
    assert router.metric("ember_router:decode_first_byte_seconds_count") == 1
    assert router.metric("ember_router:decode_seconds_count") == 1
    assert router.metric('ember_router:upstream_in_flight{phase="decode",url="%s"}' % decode.url) == 0


def test_chat_stream_is_relayed_as_it_arrives(fakes, start_router):
    prefill, decode = fakes
    decode.mode = "gated"
    router = start_router([prefill.url], [decode.url])
    original = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                "stream_options": {"include_usage": True}, "max_completion_tokens": 30}
    conn = router.connect()
    asked = time.time()
    conn.request("POST", "/v1/chat/completions", body=json.dumps(original), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.getheader("Content-Type").startswith("text/event-stream")
    # The first event arrives while the decode instance still holds the rest back (for 10 s).
    first = resp.readline().decode()
    assert time.time() - asked < 3, "the stream was held back until the decode instance finished"
    assert first.startswith("data: ") and '"t0"' in first, first
    assert not decode.release.is_set()
    decode.release.set()
    rest = resp.read().decode()
    conn.close()
    events = sse_events(first + rest)
    assert events[-1] == "[DONE]"
    assert [json.loads(e)["choices"][0]["text"] for e in events[:-1]] == ["t0", "t1", "t2", "t3"]
    [(_, p_body, _)] = prefill.bodies
    assert p_body["max_tokens"] == 1 and p_body["max_completion_tokens"] == 1
    assert p_body["stream"] is False and "stream_options" not in p_body
    [(_, d_body, _)] = decode.bodies
    assert d_body == dict(original, kv_transfer_params=KV)


def test_n_greater_than_one(fakes, start_router):
    prefill, decode = fakes
    router = start_router([prefill.url], [decode.url])
    status, _, data = router.post("/v1/completions", {"prompt": "a", "n": 3, "stream": True})
    assert status == 200
    events = sse_events(data)
    assert sorted({json.loads(e)["choices"][0]["index"] for e in events[:-1]}) == [0, 1, 2]
    assert prefill.bodies[0][1]["n"] == 1
    assert decode.bodies[0][1]["n"] == 3
    status, _, data = router.post("/v1/completions", {"prompt": "a", "n": 2})
    assert status == 200 and len(json.loads(data)["choices"]) == 2


def test_api_key_and_bad_requests(fakes, start_router):
    prefill, decode = fakes
    router = start_router([prefill.url], [decode.url], "--api-key", "sk-router")
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        status, _, data = router.post("/v1/completions", {"prompt": "a"}, headers)
        assert status == 401
        assert json.loads(data)["error"]["type"] == "authentication_error"
    status, _ = router.get("/v1/models")
    assert status == 401
    assert prefill.bodies == [] and decode.bodies == []
    auth = {"Authorization": "Bearer sk-router"}
    status, _, data = router.post("/v1/completions", {"prompt": "a"}, auth)
    assert status == 200, data
    status, data = router.get("/v1/models", auth)
    assert status == 200 and json.loads(data)["data"][0]["id"] == "fake-decode"
    # Not JSON, not an object: 400 in OpenAI's shape, nothing sent upstream.
    conn = router.connect()
    conn.request("POST", "/v1/completions", body="{nope", headers={"Content-Type": "application/json", **auth})
    resp = conn.getresponse()
    assert resp.status == 400 and "not valid JSON" in json.loads(resp.read())["error"]["message"]
    conn.close()
    status, _, data = router.post("/v1/completions", [1, 2], auth)
    assert status == 400 and "JSON object" in json.loads(data)["error"]["message"]
    status, _ = router.get("/v1/nothing", auth)
    assert status == 404
    assert len(decode.bodies) == 1
    # /health and /metrics need no key.
    assert router.get("/health")[0] == 200


def test_prefill_down_falls_back(fakes, start_router):
    _, decode = fakes
    down = dead_url()
    router = start_router([down], [decode.url])
    for _ in range(3):
        status, _, data = router.post("/v1/completions", {"prompt": "a", "kv_transfer_params": {"x": 1}})
        assert status == 200, data
    assert all("kv_transfer_params" not in body for _, body, _ in decode.bodies)
    assert [body for _, body, _ in decode.bodies] == [{"prompt": "a"}] * 3
    assert router.metric("ember_router:fallbacks_total") == 3
    # The first request found it down; the others skipped it (back-off): one failed phase 1.
    assert router.metric('ember_router:requests_total{phase="prefill",outcome="failed"}') == 1
    # Warned once, naming the instance and what happens.
    assert router.logs().count(f"prefill instance {down} refused the connection") == 1


def test_prefill_errors_fall_back(fakes, start_router):
    prefill, decode = fakes
    router = start_router([prefill.url], [decode.url])
    prefill.mode = "error"
    status, _, data = router.post("/v1/completions", {"prompt": "a", "stream": True})
    assert status == 200 and sse_events(data)[-1] == "[DONE]"
    prefill.mode = "no_kv"
    status, _, _ = router.post("/v1/completions", {"prompt": "a"})
    assert status == 200
    assert [b for _, b, _ in decode.bodies] == [{"prompt": "a", "stream": True}, {"prompt": "a"}]
    assert router.metric("ember_router:fallbacks_total") == 2
    assert router.metric('ember_router:requests_total{phase="prefill",outcome="upstream_error"}') == 1
    assert router.metric('ember_router:requests_total{phase="prefill",outcome="failed"}') == 1


def test_decode_down_is_a_502(fakes, start_router):
    prefill, _ = fakes
    down = dead_url()
    router = start_router([prefill.url], [down])
    for stream in (False, True):
        status, content_type, data = router.post("/v1/completions", {"prompt": "a", "stream": stream})
        assert status == 502, data
        assert content_type.startswith("application/json")
        error = json.loads(data)["error"]
        assert error["message"] == f"decode instance {down} refused the connection"
        assert error["type"] == "upstream_error"
    assert router.metric('ember_router:requests_total{phase="decode",outcome="failed"}') == 2


def test_decode_error_status_passes_through(fakes, start_router):
    prefill, decode = fakes
    decode.mode = "bad_request"
    router = start_router([prefill.url], [decode.url])
    for stream in (False, True):
        status, _, data = router.post("/v1/completions", {"prompt": "a", "stream": stream})
        assert status == 400
        assert json.loads(data)["error"]["message"] == "max_tokens is too large"
    assert router.metric('ember_router:requests_total{phase="decode",outcome="upstream_error"}') == 2


def test_decode_dying_mid_stream_ends_with_an_error_event(fakes, start_router):
    prefill, decode = fakes
    decode.mode = "die"
    router = start_router([prefill.url], [decode.url])
    status, _, data = router.post("/v1/completions", {"prompt": "a", "stream": True})
    assert status == 200
    events = sse_events(data)
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert error["message"] == f"decode instance {decode.url} closed the connection mid-response"
    # The events before the failure came through whole; the cut one is ended before the error.
    assert [json.loads(e)["choices"][0]["text"] for e in events[:2]] == ["t0", "t1"]
    assert "\n\ndata: {\"error\"" in data


def test_client_leaving_mid_stream_closes_the_upstream(fakes, start_router):
    prefill, decode = fakes
    decode.mode = "slow"
    router = start_router([prefill.url], [decode.url])
    sock = socket.create_connection(("127.0.0.1", router.port), timeout=10)
    body = json.dumps({"prompt": "a", "stream": True}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    received = b""
    while b"data: " not in received:
        received += sock.recv(4096)
    sock.close()
    left = time.time()
    assert decode.client_closed.wait(5), "the decode instance kept streaming to a client that left"
    assert time.time() - left < 5
    deadline = time.time() + 5
    while router.metric('ember_router:requests_total{phase="decode",outcome="client_gone"}') != 1:
        assert time.time() < deadline
        time.sleep(0.05)
    assert router.metric('ember_router:upstream_in_flight{phase="decode",url="%s"}' % decode.url) == 0


def test_client_leaving_during_prefill_closes_the_upstream(fakes, start_router):
    prefill, decode = fakes
    prefill.mode = "hang"
    router = start_router([prefill.url], [decode.url])
    sock = socket.create_connection(("127.0.0.1", router.port), timeout=10)
    body = json.dumps({"prompt": "a"}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    deadline = time.time() + 5
    while not prefill.bodies:
        assert time.time() < deadline
        time.sleep(0.02)
    sock.close()
    assert prefill.client_closed.wait(5), "the prefill instance kept a request whose client left"
    deadline = time.time() + 5
    while router.metric('ember_router:requests_total{phase="prefill",outcome="client_gone"}') != 1:
        assert time.time() < deadline
        time.sleep(0.05)
    assert decode.bodies == []  # no fallback for a client that is gone
    assert router.metric("ember_router:fallbacks_total") == 0


def test_a_silent_prefill_instance_times_out_into_the_fallback(fakes, start_router):
    prefill, decode = fakes
    prefill.mode = "hang"
    router = start_router([prefill.url], [decode.url], request_timeout=1)
    asked = time.time()
    status, _, data = router.post("/v1/completions", {"prompt": "a"})
    assert status == 200, data
    assert 0.9 < time.time() - asked < 5
    assert prefill.client_closed.wait(3)  # the timed-out exchange was closed
    assert [b for _, b, _ in decode.bodies] == [{"prompt": "a"}]
    assert f"prefill instance {prefill.url} sent no response within 1 s" in router.logs()
    assert router.metric('ember_router:requests_total{phase="prefill",outcome="failed"}') == 1


def test_a_slow_client_gets_the_whole_big_stream(fakes, start_router):
    prefill, decode = fakes
    decode.mode = "big"  # 16 MiB of events, sent as fast as the router takes them
    router = start_router([prefill.url], [decode.url])
    sock = socket.create_connection(("127.0.0.1", router.port), timeout=10)
    body = json.dumps({"prompt": "a", "stream": True}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    time.sleep(1)  # not reading: the router pauses the instance instead of buffering all of it
    reading_from = time.time()
    received = bytearray()
    while True:
        piece = sock.recv(65536)
        if not piece:
            break
        received += piece
    sock.close()
    head, _, chunked = bytes(received).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    pieces, at = [], 0
    while True:  # undo the chunked framing
        line_end = chunked.index(b"\r\n", at)
        size = int(chunked[at:line_end], 16)
        if size == 0:
            break
        pieces.append(chunked[line_end + 2:line_end + 2 + size])
        at = line_end + 4 + size
    events = sse_events(b"".join(pieces).decode())
    # The instance could not finish before the client read: held back, not buffered whole.
    assert decode.sent_all_at > reading_from
    assert len(events) == 4097 and events[-1] == "[DONE]"
    assert [json.loads(e)["choices"][0]["text"][:6] for e in events[:3]] == ["t0" + "x" * 4, "t1" + "x" * 4, "t2" + "x" * 4]
    assert json.loads(events[-2])["choices"][0]["text"].startswith("t4095x")


def test_max_concurrency(fakes, start_router):
    prefill, decode = fakes
    decode.mode = "gated"
    router = start_router([prefill.url], [decode.url], "--max-concurrency", "1")
    conn = router.connect()
    conn.request("POST", "/v1/completions", body=json.dumps({"prompt": "a", "stream": True}),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.readline().startswith(b"data: ")
    status, _, data = router.post("/v1/completions", {"prompt": "b"})
    assert status == 503 and "--max-concurrency" in json.loads(data)["error"]["message"]
    assert router.metric("ember_router:rejected_requests_total") == 1
    decode.release.set()
    assert sse_events(resp.read().decode())[-1] == "[DONE]"
    conn.close()
    deadline = time.time() + 5
    while router.post("/v1/completions", {"prompt": "c"})[0] != 200:  # the place is given back
        assert time.time() < deadline
        time.sleep(0.05)


def test_balancing_over_several_instances(ember_bin, start_router):
    fakes = [FakeInstance("prefill"), FakeInstance("prefill"), FakeInstance("decode"), FakeInstance("decode")]
    try:
        p0, p1, d0, d1 = fakes
        router = start_router([p0.url, p1.url], [d0.url, d1.url])
        # One at a time: every instance is idle, so ties go in turn.
        for _ in range(6):
            assert router.post("/v1/completions", {"prompt": "a"})[0] == 200
        assert [len(f.bodies) for f in fakes] == [3, 3, 3, 3]
        # Many at once, streamed: all answered whole, nothing left in flight.
        results = []

        def one(i):
            status, _, data = router.post("/v1/completions", {"prompt": f"p{i}", "stream": True})
            results.append((status, sse_events(data)[-1]))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert results == [(200, "[DONE]")] * 32
        assert len(d0.bodies) + len(d1.bodies) == 38 and min(len(d0.bodies), len(d1.bodies)) >= 8
        for f in fakes:
            side = f.role
            assert router.metric('ember_router:upstream_in_flight{phase="%s",url="%s"}' % (side, f.url)) == 0
        assert router.metric('ember_router:requests_total{phase="decode",outcome="ok"}') == 38
    finally:
        for f in fakes:
            f.stop()


def test_health(fakes, start_router, ember_bin):
    prefill, decode = fakes
    router = start_router([prefill.url], [decode.url])
    status, data = router.get("/health")
    assert status == 200 and json.loads(data)["status"] == "ok"
    down = dead_url()
    router2 = start_router([prefill.url], [down])
    status, data = router2.get("/health")
    assert status == 503
    body = json.loads(data)
    assert "no decode instance answers" in body["error"]["message"]
    assert body["decode"] == {down: "down"} and body["prefill"] == {prefill.url: "ok"}
    router3 = start_router([down, prefill.url], [decode.url])  # one prefill of two is enough
    assert router3.get("/health")[0] == 200
    prefill.mode = "unhealthy"
    router4 = start_router([prefill.url], [decode.url])
    status, data = router4.get("/health")
    assert status == 503 and "no prefill instance answers" in json.loads(data)["error"]["message"]


def test_bad_flags_say_what_to_do(ember_bin):
    result = subprocess.run([str(ember_bin), "router", "--prefill", "localhost:1", "--decode", "http://127.0.0.1:2"],
                            capture_output=True, text=True, timeout=10)
    assert result.returncode != 0
    assert "--prefill must look like http://HOST:PORT" in result.stderr
