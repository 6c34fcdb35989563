"""Hostile clients against a live `ember serve` (loopback, bounded in count and time): malformed
paths and bytes, deep nesting, overflowing numbers, invalid UTF-8, wrong methods and types, giant
prompt lists, web pages (Host, Origin, Content-Type) and unbounded generations. Each
gets its status code and an OpenAI error body, and afterwards the server is alive, /health is 200
and nothing runs or waits."""
import json
import shutil
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
    assert s.stop() == 0, s.proc.stderr.read()


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
