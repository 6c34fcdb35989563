"""Hostile clients against a live `ember serve` (loopback, bounded in count and time): malformed
paths and bytes, deep nesting, overflowing numbers, invalid UTF-8, wrong methods and types, giant
prompt lists. Each
gets its status code and an OpenAI error body, and afterwards the server is alive, /health is 200
and nothing runs or waits."""
import json
import socket
import time

import pytest

from serving import SMOLLM, Server

HELLO = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def server(ember_bin):
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (scripts/fetch_models.py)")
    s = Server(ember_bin, "--max-num-seqs", "4")
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
            received += stream.recv(4096)
        status, body, took = completions("hi")
        assert status == 503 and took < 5, body
        assert "this request needs 1" in body["error"]["message"]
        stream.close()  # the disconnect aborts all eight
        s.assert_idle_and_healthy()
        assert completions("hi")[0] == 200
    finally:
        assert s.stop() == 0
