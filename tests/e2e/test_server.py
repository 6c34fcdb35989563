"""`ember serve` end to end: a live server on loopback, the official openai client, raw HTTP for
the error paths, disconnects, overload and shutdown."""
import json
import socket
import subprocess
import threading
import time

import pytest

from serving import SMOLLM, Server, free_port


@pytest.fixture(scope="module")
def server(ember_bin):
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (scripts/fetch_models.py)")
    s = Server(ember_bin, "--max-num-seqs", "8", "--tool-call-parser", "hermes")
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def client(server):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="unused")


def test_greedy_completion_matches_offline_generate(server, client, ember_bin):
    prompt = "The capital of France is"
    out = client.completions.create(model="smollm", prompt=prompt, max_tokens=12, temperature=0)
    offline = subprocess.run([str(ember_bin), "generate", "--model", str(SMOLLM), "--prompt", prompt, "--max-tokens",
                              "12", "--json"], capture_output=True, text=True, timeout=120, check=True)
    assert out.choices[0].text == json.loads(offline.stdout)["text"]
    assert out.usage.completion_tokens == 12 and out.choices[0].finish_reason == "length"
    assert out.usage.prompt_tokens == server.json("POST", "/tokenize", {"prompt": prompt})[1]["count"]


def test_chat_streaming_equals_non_streaming(client):
    messages = [{"role": "user", "content": "What is 2+2? Answer with one number."}]
    full = client.chat.completions.create(model="smollm", messages=messages, max_tokens=24, temperature=0)
    text = full.choices[0].message.content
    assert "4" in text and full.choices[0].finish_reason in ("stop", "length")
    chunks = list(client.chat.completions.create(model="smollm", messages=messages, max_tokens=24, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    assert [c for c in chunks if c.choices][-1].choices[0].finish_reason == full.choices[0].finish_reason


def test_seeded_sampling_repeats_and_n_choices(client):
    kwargs = dict(model="smollm", prompt="Once upon a time", max_tokens=16, temperature=0.9, top_p=0.95, seed=7, n=3)
    a = client.completions.create(**kwargs)
    b = client.completions.create(**kwargs)
    assert [c.text for c in a.choices] == [c.text for c in b.choices]
    assert len({c.text for c in a.choices}) > 1
    assert a.usage.prompt_tokens == b.usage.prompt_tokens  # counted once per prompt, not per choice


def test_stop_strings_logprobs_and_token_prompts(client):
    out = client.completions.create(model="smollm", prompt="1, 2, 3, 4,", max_tokens=20, temperature=0, stop=[" 7"],
                                    logprobs=2)
    choice = out.choices[0]
    assert " 7" not in choice.text and choice.finish_reason == "stop"
    assert len(choice.logprobs.tokens) == len(choice.logprobs.token_logprobs) > 0
    assert all(len(t) <= 2 for t in choice.logprobs.top_logprobs)
    by_ids = client.completions.create(model="smollm", prompt=[1, 2, 3], max_tokens=3, temperature=0)
    assert by_ids.usage.prompt_tokens == 3


WEATHER_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
WEATHER_MESSAGES = [
    {"role": "system", "content": 'To call a tool, write <tool_call>{"name": "get_weather", "arguments": '
                                  '{"city": "Paris"}}</tool_call>'},
    {"role": "user", "content": "What is the weather in Paris?"}]


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_forced_tool_calls_streaming_and_not(client, tool_choice):
    # SmolLM2 does not call tools by itself; a forced choice starts the Hermes call for it, and the
    # server must parse what follows into a call in both response shapes.
    kwargs = dict(model="smollm", messages=WEATHER_MESSAGES, tools=WEATHER_TOOLS, tool_choice=tool_choice,
                  temperature=0, max_tokens=48)
    full = client.chat.completions.create(**kwargs)
    choice = full.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert not choice.message.content
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments), dict)

    chunks = list(client.chat.completions.create(**kwargs, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert not "".join(d.content or "" for d in deltas)
    streamed = [tc for d in deltas for tc in (d.tool_calls or [])]
    assert len(streamed) == 1 and streamed[0].index == 0 and streamed[0].id.startswith("call_")
    assert streamed[0].function.name == "get_weather"
    assert json.loads(streamed[0].function.arguments) == json.loads(call.function.arguments)
    assert [c for c in chunks if c.choices][-1].choices[0].finish_reason == "tool_calls"


def test_tool_choice_none_and_bad_tool_choice(server, client):
    out = client.chat.completions.create(model="smollm", messages=WEATHER_MESSAGES, tools=WEATHER_TOOLS,
                                         tool_choice="none", temperature=0, max_tokens=8)
    assert not out.choices[0].message.tool_calls and out.choices[0].finish_reason != "tool_calls"
    status, body = server.json("POST", "/v1/chat/completions", {
        "model": "smollm", "messages": WEATHER_MESSAGES, "tools": WEATHER_TOOLS,
        "tool_choice": {"type": "function", "function": {"name": "no_such_tool"}}})
    assert status == 400 and body["error"]["param"] == "tool_choice"


def test_tool_call_turn_renders_on_a_template_without_tools(server):
    """The OpenAI tool flow sends back the assistant's calls with content null (or absent, or
    tool_calls null); SmolLM2's template knows no tool calls and concatenates content, which
    answered a template error until a missing content became "" (found by schemathesis)."""
    calls = [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]
    for assistant in ({"role": "assistant", "content": None, "tool_calls": calls},
                      {"role": "assistant", "tool_calls": calls}, {"role": "assistant", "tool_calls": None}):
        messages = [{"role": "user", "content": "Weather in Paris?"}, assistant,
                    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
        status, reply = server.json("POST", "/v1/chat/completions", {"messages": messages, "max_tokens": 2})
        assert status == 200, (assistant, reply)


def test_info_routes(server):
    status, models = server.json("GET", "/v1/models")
    assert status == 200 and models["data"][0]["id"] == "smollm" and models["data"][0]["max_model_len"] == 512
    status, tokens = server.json("POST", "/tokenize", {"prompt": "hello world"})
    assert status == 200 and tokens["count"] == len(tokens["tokens"])
    status, text = server.json("POST", "/detokenize", {"tokens": tokens["tokens"]})
    assert status == 200 and text["prompt"].endswith("hello world")
    assert server.json("GET", "/version")[0] == 200
    status, spec = server.json("GET", "/openapi.json")
    assert status == 200 and "/v1/chat/completions" in spec["paths"]
    _, metrics = server.request("GET", "/metrics")
    for name in ("ember:num_requests_running", "ember:kv_cache_usage_perc", "ember:prefix_cache_queries_total",
                 "ember:time_to_first_token_seconds_bucket", "ember:generation_tokens_total"):
        assert name in metrics, name
    assert 'model_name="smollm"' in metrics


@pytest.mark.parametrize("body,status,param", [
    ('{"model": "smollm", "prompt": ', 400, None),
    ('[1, 2]', 400, None),
    ('{"model": "smollm", "prompt": "hi", "temperature": "hot"}', 400, "temperature"),
    ('{"model": "smollm", "prompt": "hi", "max_tokens": -1}', 400, "max_tokens"),
    ('{"model": "smollm", "prompt": "hi", "n": 1000}', 400, "n"),
    ('{"model": "smollm", "prompt": "hi", "top_p": 0}', 400, None),
    ('{"model": "smollm", "prompt": "hi", "max_tokens": 600}', 400, "max_tokens"),
    ('{"model": "other", "prompt": "hi"}', 404, "model"),
    ('{"model": "smollm", "prompt": [99999999]}', 400, "prompt"),
    ('{"model": "smollm", "prompt": "hi", "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": true}}}}', 400, "response_format"),
])
def test_bad_requests_get_openai_errors(server, body, status, param):
    got, payload = server.request("POST", "/v1/completions", raw=body)
    assert got == status, payload
    error = json.loads(payload)["error"]
    assert error["message"]
    if param:
        assert error["param"] == param


def test_overlong_prompt_and_oversized_body(server):
    status, payload = server.request("POST", "/v1/completions", {"model": "smollm", "prompt": "word " * 2000})
    assert status == 400 and "maximum context length is 512" in json.loads(payload)["error"]["message"]
    status, payload = server.request("POST", "/v1/completions", raw='{"prompt": "' + "x" * (9 << 20) + '"}')
    assert status == 413
    status, _ = server.request("POST", "/v1/nothing-here", {})
    assert status == 404


def test_client_disconnect_mid_stream_frees_the_request(server):
    sock = socket.create_connection(("127.0.0.1", server.port))
    body = json.dumps({"model": "smollm", "prompt": "Tell me a long story", "max_tokens": 400, "stream": True,
                       "temperature": 0, "ignore_eos": True})
    sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
    received = b""
    while received.count(b"data: ") < 3:
        chunk = sock.recv(4096)
        assert chunk, received  # the server answered and closed instead of streaming
        received += chunk
    sock.close()
    deadline = time.time() + 30
    while time.time() < deadline:
        if server.metric("ember:num_requests_running") == 0 and server.metric("ember:kv_cache_usage_perc") == 0:
            break
        time.sleep(0.2)
    assert server.metric("ember:num_requests_running") == 0
    assert server.metric("ember:kv_cache_usage_perc") == 0
    assert server.metric("ember:generation_tokens_total") < 400 * 4  # it did not run to the end


def test_api_key_overload_and_clean_shutdown(ember_bin):
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (scripts/fetch_models.py)")
    s = Server(ember_bin, "--api-key", "sekrit", "--max-waiting-requests", "2", "--max-num-seqs", "1")
    try:
        body = {"model": "smollm", "prompt": "hi", "max_tokens": 2}
        assert s.request("POST", "/v1/completions", body)[0] == 401
        assert s.request("GET", "/v1/models", headers={"Authorization": "Bearer wrong"})[0] == 401
        auth = {"Authorization": "Bearer sekrit"}
        assert s.request("POST", "/v1/completions", body, auth)[0] == 200
        assert s.request("GET", "/health")[0] == 200  # not a /v1 route
        # More concurrent requests than the queue allows: some are refused at once with 503.
        statuses = []
        def call():
            statuses.append(s.request("POST", "/v1/completions",
                                      {"model": "smollm", "prompt": "hi", "max_tokens": 64, "ignore_eos": True},
                                      auth)[0])
        threads = [threading.Thread(target=call) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert 503 in statuses and 200 in statuses and set(statuses) <= {200, 503}
    finally:
        assert s.stop() == 0
    assert "server stopped" in s.log()


def test_64_concurrent_streaming_clients_all_complete(server, client):
    results = [None] * 64

    def stream(i):
        chunks = client.completions.create(model="smollm", prompt=f"Count to {i}:", max_tokens=6, temperature=0,
                                           stream=True, extra_body={"ignore_eos": True})
        results[i] = "".join(c.choices[0].text for c in chunks if c.choices)

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert all(r is not None and r for r in results)
    assert server.metric("ember:num_requests_running") == 0


def test_speculative_server_matches_plain_server_with_stop_strings(server, ember_bin):
    """--speculative-config: the same text and finish reasons as without it, stop strings inside
    accepted drafts included; the spec_decode metrics count the drafts; a bad config fails at
    startup naming the field."""
    spec = Server(ember_bin, "--max-num-seqs", "8", "--speculative-config",
                  '{"method":"ngram","num_speculative_tokens":5,"adaptive":false}')
    try:
        code = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n"
        prompt = f"Copy this code exactly.\n\n{code}\nCopy:\n{code}\nCopy:\n"
        for stop in (None, ["return a - b"], ["sub("], ["\n\n"]):
            body = {"model": "smollm", "prompt": prompt, "max_tokens": 40, "temperature": 0}
            if stop:
                body["stop"] = stop
            want = server.json("POST", "/v1/completions", body)[1]["choices"][0]
            got = spec.json("POST", "/v1/completions", body)[1]["choices"][0]
            assert (got["text"], got["finish_reason"]) == (want["text"], want["finish_reason"]), stop
        assert spec.metric("ember:spec_decode_num_drafts_total") > 0
        assert 0 < spec.metric("ember:spec_decode_num_accepted_tokens_total") <= \
            spec.metric("ember:spec_decode_num_draft_tokens_total")
    finally:
        assert spec.stop() == 0
    assert "speculative decoding: ngram" in spec.log()
    bad = subprocess.run([str(ember_bin), "serve", str(SMOLLM), "--port", str(free_port()), "--speculative-config",
                          '{"method":"ngram","num_speculative_tokens":0}'], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "num_speculative_tokens" in bad.stderr
