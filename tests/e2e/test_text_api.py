"""What the model saw, end to end: /tokenize with `messages` against transformers'
apply_chat_template ids (tests/unit/tokenizer/testdata/chat_template_ids.json, made by
scripts/make_chat_ids_fixtures.py), token strings, chat `echo` as vLLM does it, and Gemma 3's
trimming template continuing a final message. SmolLM2 uses its GGUF's template; the Gemma 3 GGUF
has none, so it is served with the committed gemma3.jinja (--chat-template)."""
import json
import pathlib

import pytest

from serving import GEMMA, SMOLLM, Server

ROOT = pathlib.Path(__file__).resolve().parents[2]
TESTDATA = ROOT / "tests/unit/tokenizer/testdata"
FIXTURES = json.loads((TESTDATA / "chat_template_ids.json").read_text(encoding="utf-8"))["cases"]
MODELS = {"smollm2": (SMOLLM, []), "gemma3": (GEMMA, ["--chat-template", TESTDATA / "templates/gemma3.jinja"])}


@pytest.fixture(scope="module", params=sorted(MODELS))
def server(request, ember_bin):
    path, args = MODELS[request.param]
    if not path.exists():
        pytest.skip(f"{path.name} not fetched (scripts/fetch_models.py)")
    s = Server(ember_bin, "--max-num-seqs", "4", *args, model=path, name=request.param)
    s.name = request.param
    yield s
    assert s.stop() == 0, s.log()


def test_tokenize_messages_equals_apply_chat_template(server):
    cases = [c for c in FIXTURES if c["template"] == server.name]
    assert len(cases) > 30
    for c in cases:
        status, out = server.json("POST", "/tokenize", {"model": server.name, **c["request"]})
        if "error" in c:
            assert status == 400, (c["case"], out)
            continue
        assert status == 200, (c["case"], out)
        assert out["tokens"] == c["ids"], c["case"]
        assert out["count"] == len(c["ids"]) and out["max_model_len"] == 512 and out["token_strs"] is None


def test_tokenize_token_strs_and_chat_prompt_agree(server):
    messages = [{"role": "user", "content": "Name a colour."}]
    status, out = server.json("POST", "/tokenize", {"messages": messages, "return_token_strs": True})
    assert status == 200, out
    assert len(out["token_strs"]) == out["count"] == len(out["tokens"])
    status, text = server.json("POST", "/detokenize", {"tokens": out["tokens"]})
    assert status == 200
    # The vocabulary strings spell the prompt (byte-level "Ġ" / SentencePiece "▁" for spaces).
    spelled = "".join(out["token_strs"]).replace("\u0120", " ").replace("\u010a", "\n").replace("\u2581", " ")
    assert spelled == text["prompt"]
    # A chat request's prompt is exactly these ids.
    status, chat = server.json("POST", "/v1/chat/completions",
                               {"messages": messages, "max_tokens": 1, "temperature": 0})
    assert status == 200, chat
    assert chat["usage"]["prompt_tokens"] == out["count"]
    # add_special_tokens puts BOS in front of the template's own.
    status, with_bos = server.json("POST", "/tokenize", {"messages": messages, "add_special_tokens": True})
    assert status == 200
    assert len(with_bos["tokens"]) in (out["count"], out["count"] + 1)


def chat(server, body, stream):
    body = {"model": server.name, "max_tokens": 6, "temperature": 0, **body, "stream": stream}
    if not stream:
        status, out = server.json("POST", "/v1/chat/completions", body)
        assert status == 200, out
        return out["choices"][0]["message"]["content"]
    status, payload = server.request("POST", "/v1/chat/completions", body)
    assert status == 200, payload
    content = ""
    for line in payload.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for choice in json.loads(line[6:])["choices"]:
                content += choice["delta"].get("content") or ""
    return content


@pytest.mark.parametrize("stream", [False, True])
def test_echo_as_vllm(server, stream):
    prefix = "The capital of France is"
    continued = {"messages": [{"role": "user", "content": "What is the capital of France?"},
                              {"role": "assistant", "content": prefix}],
                 "add_generation_prompt": False, "continue_final_message": True}
    plain = chat(server, continued, stream)
    echoed = chat(server, {**continued, "echo": True}, stream)
    assert echoed == prefix + plain
    # With a generation prompt the reply is the assistant's and the final message the user's: nothing to echo.
    question = {"messages": [{"role": "user", "content": "Say hi."}]}
    assert chat(server, {**question, "echo": True}, stream) == chat(server, question, stream)
    # Without one, the role generated is the final message's own, so it is echoed (content parts joined by "\n").
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Say"}, {"type": "text", "text": "hi"}]}],
             "add_generation_prompt": False}
    assert chat(server, {**parts, "echo": True}, stream) == "Say\nhi" + chat(server, parts, stream)


def test_continue_final_message_through_a_trimming_template(server):
    # Gemma 3's template trims content: the trailing space is gone from the render, and transformers
    # (and now ember) continue right after the trimmed text instead of refusing.
    body = {"messages": [{"role": "user", "content": "Count: one, two,"},
                         {"role": "assistant", "content": "three, "}],
            "add_generation_prompt": False, "continue_final_message": True}
    status, out = server.json("POST", "/tokenize", {**body, "return_token_strs": True})
    assert status == 200, out
    status, text = server.json("POST", "/detokenize", {"tokens": out["tokens"]})
    assert text["prompt"].endswith("three," if server.name == "gemma3" else "three, ")
    assert isinstance(chat(server, body, False), str)
    # A final message without content (a tool call) cannot be continued: a 400 naming the field.
    status, err = server.json("POST", "/tokenize", {
        "messages": [{"role": "user", "content": "x"},
                     {"role": "assistant", "tool_calls": [{"id": "1", "type": "function",
                                                           "function": {"name": "f", "arguments": "{}"}}]}],
        "add_generation_prompt": False, "continue_final_message": True})
    assert status == 400 and err["error"]["param"] == "continue_final_message", err
