"""Hostile clients against a live `ember serve` (loopback, bounded in count and time): malformed
paths and bytes, deep nesting, overflowing numbers, invalid UTF-8, wrong methods and types, giant
prompt lists, web pages (Host, Origin, Content-Type), unbounded generations, and the front door's
connections: pipelining, oversized heads and bodies, chunked and compressed bombs, slow and idle
clients, 10,000 idle connections, clients that leave mid-request, signals under load. Each gets
its status code and an OpenAI error body, and afterwards the server is alive, /health is 200 and
nothing runs or waits."""
import json
import resource
import select
import shutil
import signal
import socket
import subprocess
import time

import pytest

from serving import SMOLLM, Server

HELLO = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def server(ember_bin):
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (scripts/fetch_models.py)")
    s = Server(ember_bin, "--max-num-seqs", "4", "--default-max-tokens", "5", "--allowed-origins",
               "http://localhost:3000,http://127.0.0.1:5173")
    yield s
    s.assert_idle_and_healthy()
    assert s.stop() == 0, s.log()


def error_of(body):
    """The OpenAI error object of a reply, which must be valid UTF-8 JSON."""
    error = json.loads(body.decode("utf-8") if isinstance(body, bytes) else body)["error"]
    assert error["message"]
    return error


def post(path, body: bytes, content_type=b"application/json"):
    return (b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: " + content_type +
            b"\r\nConnection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


@pytest.mark.parametrize("path", [b"/\xff\xfe", b"/v1/\xc3", b"/%FF%FE", b"/v1/%C3%28", b"/%1B%5B2J%00",
                                  pytest.param(b"/" + b"%ff" * 2000, id="2000-bytes")])
def test_paths_that_are_not_utf8_get_404(server, path):
    status, _, body = server.raw(b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert status == 404
    message = error_of(body)["message"]
    assert "\x1b" not in message and len(message) < 200
    server.assert_idle_and_healthy()


@pytest.mark.parametrize("depth", [129, 100_000])
@pytest.mark.parametrize("closed", [True, False])
def test_deep_nesting_is_a_400(server, depth, closed):
    nested = b"[" * depth + (b"]" * depth if closed else b"")
    status, _, body = server.raw(post(b"/v1/completions", b'{"model": "smollm", "prompt": ' + nested +
                                      (b"}" if closed else b"")))
    assert status == 400
    error = error_of(body)
    assert "deeper than 128" in error["message"] and error["param"] == "prompt"
    status, _, body = server.raw(post(b"/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x", '
                                      b'"extra": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}]}"))
    assert status == 400 and error_of(body)["param"] == "messages"


@pytest.mark.parametrize("route,body,param", [
    (b"/v1/completions", b'{"model": "smollm", "prompt": "hi", "temperature": 1e999}', "temperature"),
    (b"/v1/completions", b'{"model": "smollm", "prompt": "hi", "max_tokens": -1e400}', "max_tokens"),
    (b"/v1/completions", b'{"model": "smollm", "prompt": "hi", "max_tokens": 99999999999999999999999}', "max_tokens"),
    (b"/v1/completions", b'{"model": "smollm", "prompt": "hi", "seed": 1e308}', "seed"),
    (b"/v1/completions", b'{"model": "smollm", "prompt": "caf\xe9 \xff"}', "prompt"),
    (b"/v1/completions", b'{"model": "smollm", "prompt": "\\ud800"}', "prompt"),
    (b"/v1/completions", b'{"model": "smollm\xc0\xaf", "prompt": "hi"}', "model"),
    (b"/v1/chat/completions", b'{"messages": [{"role": "user", "content": "\xed\xa0\x80"}]}', "messages"),
    (b"/v1/chat/completions", b'{"messages": [{"role": "\x1b[2J", "content": "x"}]}', "messages"),
    (b"/tokenize", b'{"prompt": "\xf8\x88\x80\x80\x80"}', "prompt"),
])
def test_overflow_and_invalid_utf8_name_the_field(server, route, body, param):
    status, _, reply = server.raw(post(route, body))
    assert status == 400, reply
    error = error_of(reply)
    assert error["param"] == param, error
    assert "\x1b" not in error["message"]


@pytest.mark.parametrize("body,param", [
    ({"messages": HELLO, "response_format": {"type": 5}}, "response_format"),
    ({"messages": [{"role": "user", "content": [{"type": 1, "text": "a"}]}]}, "messages"),
    ({"messages": HELLO, "tools": [{"type": "function", "function": {"name": "f", "parameters": 5}}]}, "tools"),
    ({"messages": HELLO, "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": 3}},
     "tool_choice"),
    ({"messages": HELLO, "model": "x" * 100_000}, "model"),
])
def test_wrong_types_and_huge_names_are_400s_not_500s(server, body, param):
    status, payload = server.request("POST", "/v1/chat/completions", body)
    assert status in (400, 404), payload
    error = error_of(payload)
    assert error["param"] == param and len(error["message"]) < 500


@pytest.mark.parametrize("method,path,allow", [
    ("GET", "/v1/completions", "POST"), ("PUT", "/v1/chat/completions", "POST"), ("DELETE", "/v1/models", "GET"),
    ("POST", "/health", "GET"), ("POST", "/metrics", "GET"), ("PATCH", "/tokenize", "POST"),
])
def test_wrong_methods_on_known_routes_get_405(server, method, path, allow):
    status, headers, body = server.raw(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n"
                                       "Connection: close\r\n\r\n{}".encode())
    assert status == 405 and headers.get("allow") == allow
    assert allow in error_of(body)["message"]
    assert server.raw(b"GET /v1/nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")[0] == 404


def test_garbage_instead_of_http(server):
    for junk in (b"\x00\x01\x02\r\n\r\n", b"GET\r\n\r\n", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" * 50 + b"\r\n\r\n"):
        status, _, _ = server.raw(junk)
        assert status in (0, 400)
    server.assert_idle_and_healthy()


def test_admission_counts_prompts_times_n(ember_bin):
    """--max-waiting-requests counts engine requests (prompts x n): one request cannot take the
    queue, a request over a cap is a 400 at once, and one that does not fit now is a 503 at once."""
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (scripts/fetch_models.py)")
    s = Server(ember_bin, "--max-num-seqs", "8", "--max-waiting-requests", "8", "--max-prompts-per-request", "4",
               "--max-n", "4")
    try:
        def completions(prompt, **extra):
            started = time.time()
            status, payload = s.request("POST", "/v1/completions", {"model": "smollm", "prompt": prompt,
                                                                    "max_tokens": 2, **extra})
            return status, json.loads(payload), time.time() - started

        status, body, took = completions(["hi"] * 5000)
        assert status == 400 and body["error"]["param"] == "prompt" and took < 5
        assert "--max-prompts-per-request" in body["error"]["message"]
        status, body, _ = completions(["hi"] * 4, n=3)  # 12 engine requests > 8: never fits
        assert status == 400 and "--max-waiting-requests" in body["error"]["message"]
        status, body, _ = completions("hi", n=5)
        assert status == 400 and body["error"]["param"] == "n"
        assert completions(["a", "b"], n=2)[0] == 200

        # A stream of 4 prompts x n 2 holds all 8 slots: a single prompt is refused at once.
        stream = socket.create_connection(("127.0.0.1", s.port), timeout=60)
        hold = json.dumps({"model": "smollm", "prompt": ["a", "b", "c", "d"], "n": 2, "max_tokens": 400,
                           "ignore_eos": True, "stream": True}).encode()
        stream.sendall(post(b"/v1/completions", hold))
        received = b""
        while b"data: " not in received:
            chunk = stream.recv(4096)
            assert chunk, received  # answered and closed instead of streaming
            received += chunk
        status, body, took = completions("hi")
        assert status == 503 and took < 5, body
        assert "this request needs 1" in body["error"]["message"]
        stream.close()  # the disconnect aborts all eight
        s.assert_idle_and_healthy()
        assert completions("hi")[0] == 200
    finally:
        assert s.stop() == 0


def test_chat_and_completions_without_max_tokens_are_bounded(server):
    status, body = server.json("POST", "/v1/chat/completions", {"messages": HELLO, "ignore_eos": True})
    assert status == 200 and body["usage"]["completion_tokens"] == 5  # --default-max-tokens 5
    assert body["choices"][0]["finish_reason"] == "length"
    status, body = server.json("POST", "/v1/completions", {"prompt": "Once upon a time", "ignore_eos": True})
    assert status == 200 and body["usage"]["completion_tokens"] == 16  # OpenAI's default for completions
    # Cut to the context that is left (max-model-len 512), not refused.
    status, body = server.json("POST", "/v1/completions", {"prompt": [1] * 505, "ignore_eos": True})
    assert status == 200 and body["usage"]["completion_tokens"] == 7


def raw_request(method, path, headers, body=b""):
    lines = [f"{method} {path} HTTP/1.1", *[f"{k}: {v}" for k, v in headers.items()], "Connection: close",
             f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


COMPLETION = json.dumps({"prompt": "hi", "max_tokens": 1}).encode()


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8000", "127.0.0.1.nip.io", "0.0.0.0"])
def test_rebound_host_names_are_refused_on_loopback(server, host):
    headers = {"Host": host, "Content-Type": "application/json"}
    status, _, body = server.raw(raw_request("POST", "/v1/completions", headers, COMPLETION))
    assert status == 403 and "DNS" in error_of(body)["message"]
    assert server.raw(raw_request("GET", "/v1/models", {"Host": host}))[0] == 403


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "app.localhost"])
def test_loopback_host_names_are_served(server, host):
    headers = {"Host": f"{host}:{server.port}", "Content-Type": "application/json"}
    assert server.raw(raw_request("POST", "/v1/completions", headers, COMPLETION))[0] == 200


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://localhost:3001"])
def test_web_pages_of_other_origins_are_refused(server, origin):
    for content_type in ("application/json", "text/plain"):
        headers = {"Host": "127.0.0.1", "Origin": origin, "Content-Type": content_type}
        status, headers_back, body = server.raw(raw_request("POST", "/v1/chat/completions", headers,
                                                            json.dumps({"messages": HELLO}).encode()))
        assert status == 403 and "--allowed-origins" in error_of(body)["message"]
        assert "access-control-allow-origin" not in headers_back
    status, _, _ = server.raw(raw_request("OPTIONS", "/v1/chat/completions", {"Host": "127.0.0.1", "Origin": origin,
                                                                              "Access-Control-Request-Method": "POST"}))
    assert status == 403


def test_allowed_origins_get_cors_answers(server):
    origin = "http://localhost:3000"
    status, headers, _ = server.raw(raw_request("OPTIONS", "/v1/chat/completions", {
        "Host": "127.0.0.1", "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, authorization"}))
    assert status == 204 and headers["access-control-allow-origin"] == origin
    assert headers["access-control-allow-methods"] == "POST"
    assert "content-type" in headers["access-control-allow-headers"].lower()
    status, headers, body = server.raw(raw_request("POST", "/v1/completions", {
        "Host": "127.0.0.1", "Origin": origin, "Content-Type": "application/json"}, COMPLETION))
    assert status == 200 and headers["access-control-allow-origin"] == origin, body


@pytest.mark.parametrize("content_type", ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x"])
def test_posts_that_are_not_json_get_415(server, content_type):
    status, _, body = server.raw(post(b"/v1/completions", COMPLETION, content_type.encode()))
    assert status == 415 and "application/json" in error_of(body)["message"]


def test_curl_works_and_plain_curl_data_is_told_what_to_add(server):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    url = f"http://127.0.0.1:{server.port}/v1/completions"
    good = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", url, "-H", "Content-Type: application/json", "-d",
                           COMPLETION.decode()], capture_output=True, text=True, timeout=60)
    assert good.stdout.rsplit("\n", 1)[1] == "200"
    plain = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", url, "-d", COMPLETION.decode()],
                           capture_output=True, text=True, timeout=60)
    body, code = plain.stdout.rsplit("\n", 1)
    assert code == "415" and "-H 'Content-Type: application/json'" in error_of(body)["message"]


def test_api_key_is_checked_whole(ember_bin):
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (scripts/fetch_models.py)")
    s = Server(ember_bin, "--api-key", "sekrit-key")
    try:
        for header in ("Bearer sekrit-ke", "Bearer sekrit-key2", "Bearer ", "sekrit-key", "Bearer SEKRIT-KEY"):
            assert s.request("GET", "/v1/models", headers={"Authorization": header})[0] == 401, header
        assert s.request("GET", "/v1/models", headers={"Authorization": "Bearer sekrit-key"})[0] == 200
        # A web page cannot use the key-less path around it either.
        assert s.request("GET", "/v1/models", headers={"Authorization": "Bearer sekrit-key",
                                                       "Origin": "https://evil.example"})[0] == 403
        s.assert_idle_and_healthy()
    finally:
        assert s.stop() == 0


# --- The front door's connections (src/http): limits while reading, timeouts, pipelining,
# --- connection floods, disconnects, signals.

def read_response(sock, buffered=b""):
    """Reads one HTTP response (Content-Length, chunked, or until close) from `sock`; returns
    (status, headers, body, bytes left over for the next response)."""
    data = buffered
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before a response head: {data[:200]!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    status = int(lines[0].split()[1])
    if status < 200 or status in (204, 304):
        return status, headers, b"", rest  # no body

    def more():
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed mid-body")
        return chunk

    if "content-length" in headers:
        length = int(headers["content-length"])
        while len(rest) < length:
            rest += more()
        return status, headers, rest[:length], rest[length:]
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            while b"\r\n" not in rest:
                rest += more()
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line, 16)
            while len(rest) < size + 2:
                rest += more()
            body += rest[:size]
            rest = rest[size + 2:]
            if size == 0:
                return status, headers, body, rest
    body = rest
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return status, headers, body, b""
        body += chunk


def closed_by_server(sock, within):
    """True when the server closes `sock` (EOF or reset) within `within` seconds."""
    sock.settimeout(within)
    try:
        while sock.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_pipelined_requests_are_answered_in_order(server):
    tokenize = json.dumps({"prompt": "hello"}).encode()
    requests = (b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" +
                b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
                str(len(tokenize)).encode() + b"\r\n\r\n" + tokenize +
                b"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" +
                b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(requests)  # one write: four requests
        left = b""
        status, _, body, left = read_response(sock, left)
        assert status == 200 and json.loads(body)["data"][0]["id"] == "smollm"
        status, _, body, left = read_response(sock, left)
        assert status == 200 and json.loads(body)["count"] >= 1
        status, _, body, left = read_response(sock, left)
        assert status == 404 and "/nowhere" in error_of(body)["message"]
        status, headers, _, left = read_response(sock, left)
        assert status == 200 and headers.get("connection") == "close"
        assert closed_by_server(sock, 5)


def test_keep_alive_serves_many_requests_on_one_connection(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        for _ in range(20):
            sock.sendall(b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            status, _, body, left = read_response(sock)
            assert status == 200 and left == b"" and json.loads(body)["version"]


def test_oversized_heads_get_431_and_long_targets_414(server):
    big = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n"
    status, _, body = server.raw(big)
    assert status == 431 and "exceed" in error_of(body)["message"]
    many = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(200)) + b"\r\n"
    status, _, body = server.raw(many)
    assert status == 431 and "header fields" in error_of(body)["message"]
    status, _, _ = server.raw(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert status == 414


def test_a_declared_oversized_body_is_refused_before_it_is_sent(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        # The head alone: the 413 must come without a single body byte.
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100000000\r\n\r\n")
        started = time.time()
        status, _, body, _ = read_response(sock)
        assert status == 413 and time.time() - started < 2
        assert "8388608" in error_of(body)["message"]


def test_a_chunked_bomb_is_cut_at_the_body_limit(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        piece = b"10000\r\n" + b"[" * 0x10000 + b"\r\n"  # 64 KiB chunks, never ending
        sent = 0
        answered = False
        while sent < 64 << 20:  # the client stops at 64 MiB whatever happens
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += 0x10000
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                answered = True
                break
        assert answered or sent < 64 << 20
        status, _, body, _ = read_response(sock)
        assert status == 413, body
        assert sent < 32 << 20  # refused near the limit (8 MiB, plus the sockets' buffers), not at the end
    server.assert_idle_and_healthy()


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br"])
def test_compressed_bodies_get_415(server, coding):
    status, _, body = server.raw(raw_request("POST", "/v1/completions", {
        "Host": "127.0.0.1", "Content-Type": "application/json", "Content-Encoding": coding}, b"\x1f\x8b\x08\x00"))
    assert status == 415 and "Content-Encoding" in error_of(body)["message"]


def test_expect_100_continue(server):
    body = json.dumps({"prompt": "hi"}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Expect: 100-continue\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        status, _, _, left = read_response(sock)
        assert status == 100
        sock.sendall(body)
        status, _, reply, _ = read_response(sock, left)
        assert status == 200 and json.loads(reply)["count"] >= 1


@pytest.fixture(scope="module")
def impatient(ember_bin):
    """A server with one-second header and body timeouts and room for 10,000 idle connections."""
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (scripts/fetch_models.py)")
    s = Server(ember_bin, "--max-num-seqs", "4", "--header-timeout", "1", "--body-timeout", "1")
    yield s
    s.assert_idle_and_healthy()
    assert s.stop() == 0, s.log()


def test_slow_and_idle_clients_are_dropped(impatient):
    idle = socket.create_connection(("127.0.0.1", impatient.port))
    slow_head = socket.create_connection(("127.0.0.1", impatient.port))
    slow_body = socket.create_connection(("127.0.0.1", impatient.port))
    slow_body.sendall(b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000\r\n\r\n{")
    started = time.time()
    # Slowloris: a byte of header every 0.2 s, forever; dropped when the header timeout passes.
    slow_head.settimeout(0.2)
    dropped = False
    for i in range(40):
        try:
            slow_head.sendall(b"GET /health HTTP/1.1\r\n"[i % 10:i % 10 + 1] if i < 10 else b"X")
            if slow_head.recv(1) == b"":
                dropped = True
                break
        except socket.timeout:
            continue
        except (BrokenPipeError, ConnectionResetError):
            dropped = True
            break
    assert dropped and time.time() - started < 3
    assert closed_by_server(idle, 3) and closed_by_server(slow_body, 3)
    assert time.time() - started < 4
    for s in (idle, slow_head, slow_body):
        s.close()
    assert impatient.request("GET", "/health")[0] == 200


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def completion_latency(server):
    started = time.time()
    status, payload = server.request("POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 4,
                                                                 "ignore_eos": True})
    assert status == 200, payload
    return time.time() - started


def test_ten_thousand_idle_connections_do_not_starve_clients(ember_bin):
    """10,000 idle connections held open (no thread each) while ordinary requests keep their
    latency; one more past --max-connections gets a clean 503; memory is flat across two rounds."""
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (scripts/fetch_models.py)")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    flood = 10_000
    if hard != resource.RLIM_INFINITY and hard < flood + 200:
        pytest.skip(f"the descriptor limit ({hard}) is below {flood + 200}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, flood + 200), hard))
    s = Server(ember_bin, "--max-num-seqs", "4", "--max-connections", str(flood + 4), "--header-timeout", "120")
    try:
        baseline = sorted(completion_latency(s) for _ in range(5))[2]
        rss = []
        for _ in range(2):
            held = []
            for _ in range(flood):
                held.append(socket.create_connection(("127.0.0.1", s.port), timeout=10))
            # The server accepts them all (its connection count reaches the flood).
            deadline = time.time() + 20
            latencies = []
            while time.time() < deadline and len(latencies) < 5:
                latencies.append(completion_latency(s))
            assert len(latencies) == 5
            assert sorted(latencies)[2] < 3 * baseline + 0.5, (baseline, latencies)
            # Past --max-connections: a 503 in OpenAI's shape, at once.
            extra = [socket.create_connection(("127.0.0.1", s.port), timeout=10) for _ in range(8)]
            try:
                status, headers, body, _ = read_response(extra[-1])
                assert status == 503 and "--max-connections" in error_of(body)["message"]
            finally:
                for sock in extra:
                    sock.close()
            rss.append(rss_kib(s.proc.pid))
            for sock in held:
                sock.close()
            # Every idle connection gone, the server serves as before.
            deadline = time.time() + 20
            while time.time() < deadline:
                try:
                    if s.request("GET", "/health")[0] == 200:
                        break
                except OSError:
                    time.sleep(0.1)
        assert rss[1] - rss[0] < 32 * 1024, rss  # KiB: flat across rounds
        s.assert_idle_and_healthy()
    finally:
        assert s.stop() == 0, s.log()


def start_stream(port, max_tokens, stream=True):
    body = json.dumps({"model": "smollm", "prompt": "Once upon a time", "max_tokens": max_tokens,
                       "ignore_eos": True, "stream": stream}).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return sock


def wait_running(server, want, within):
    deadline = time.time() + within
    while time.time() < deadline:
        if server.metric("ember:num_requests_running") == want:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_that_goes_away_aborts_its_request(server, stream):
    sock = start_stream(server.port, 480, stream)
    if stream:
        received = b""
        while b"data: " not in received:
            chunk = sock.recv(4096)
            assert chunk, received
            received += chunk
    assert wait_running(server, 1, 10)
    sock.close()
    gone = time.time()
    assert wait_running(server, 0, 2), "the request kept running after its client left"
    deadline = time.time() + 2
    while time.time() < deadline and server.metric("ember:kv_cache_usage_perc") > 0:
        time.sleep(0.05)
    assert server.metric("ember:kv_cache_usage_perc") == 0
    assert time.time() - gone < 4
    server.assert_idle_and_healthy()


def read_sse(sock):
    """Reads a streamed response to its end: (status, the data payloads)."""
    status, _, body, _ = read_response(sock)
    events = [line[len("data: "):] for line in body.decode().split("\n") if line.startswith("data: ")]
    return status, events


def test_sigterm_lets_streams_finish_then_exits_0(ember_bin):
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (scripts/fetch_models.py)")
    s = Server(ember_bin, "--max-num-seqs", "4", "--shutdown-timeout", "30")
    streams = [start_stream(s.port, 150) for _ in range(3)]
    assert wait_running(s, 3, 10)
    s.proc.send_signal(signal.SIGTERM)
    for sock in streams:
        status, events = read_sse(sock)
        assert status == 200 and events[-1] == "[DONE]"
        assert json.loads(events[-2])["choices"][0]["finish_reason"] == "length"
        sock.close()
    assert s.proc.wait(timeout=30) == 0, s.log()


def test_sigterm_past_the_shutdown_timeout_ends_streams_cleanly(ember_bin):
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (scripts/fetch_models.py)")
    s = Server(ember_bin, "--max-num-seqs", "4", "--shutdown-timeout", "1")
    streams = [start_stream(s.port, 480) for _ in range(3)]
    assert wait_running(s, 3, 10)
    signalled = time.time()
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    with pytest.raises(OSError):  # no longer accepting
        socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
    for sock in streams:
        status, events = read_sse(sock)
        assert status == 200 and events[-1] == "[DONE]"
        assert json.loads(events[-2])["choices"][0]["finish_reason"] == "abort"
        sock.close()
    assert s.proc.wait(timeout=10) == 0, s.log()
    assert time.time() - signalled < 8


def test_a_second_signal_exits_at_once(ember_bin):
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (scripts/fetch_models.py)")
    s = Server(ember_bin, "--max-num-seqs", "4", "--shutdown-timeout", "60")
    streams = [start_stream(s.port, 480) for _ in range(2)]
    assert wait_running(s, 2, 10)
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert s.proc.poll() is None  # still finishing its streams
    s.proc.send_signal(signal.SIGINT)
    started = time.time()
    assert s.proc.wait(timeout=5) != 0
    assert time.time() - started < 2
    for sock in streams:
        sock.close()
