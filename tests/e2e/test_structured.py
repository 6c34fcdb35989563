"""Structured outputs end to end on the real SmolLM2 and Gemma 3: a suite of JSON schemas (objects,
arrays, enums, nested $refs, string formats, bounded numbers, additionalProperties false), each
asked for streaming and not, greedy and sampled; every output must validate with the `jsonschema`
package (a validator written elsewhere). Regex outputs must match Python's `re`, choices be one of
the choices, a grammar's outputs match the equivalent regex. Forced tool calls parse and follow the
function's schema; a call cut short by max_tokens keeps its text with finish_reason "length"."""
import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from serving import GEMMA, SMOLLM, Server

jsonschema = pytest.importorskip("jsonschema")

SCHEMAS = {
    "object": {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 24}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
                       "student": {"type": "boolean"}},
        "required": ["name", "age", "student"], "additionalProperties": False},
    "array": {
        "type": "array", "minItems": 1, "maxItems": 3,
        "items": {"type": "object", "properties": {"item": {"type": "string", "maxLength": 16},
                                                   "qty": {"type": "integer", "minimum": 1, "maximum": 9}},
                  "required": ["item", "qty"], "additionalProperties": False}},
    "enums": {
        "type": "object",
        "properties": {"color": {"enum": ["red", "green", "blue"]}, "size": {"type": "string", "enum": ["S", "M", "L"]},
                       "count": {"const": 3}},
        "required": ["color", "size", "count"], "additionalProperties": False},
    "nested_refs": {
        "$defs": {"address": {"type": "object",
                              "properties": {"city": {"type": "string", "maxLength": 20},
                                             "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                              "required": ["city", "zip"], "additionalProperties": False},
                  "person": {"type": "object",
                             "properties": {"name": {"type": "string", "maxLength": 20},
                                            "home": {"$ref": "#/$defs/address"}},
                             "required": ["name", "home"], "additionalProperties": False}},
        "type": "object", "properties": {"owner": {"$ref": "#/$defs/person"}, "tenants": {
            "type": "array", "items": {"$ref": "#/$defs/person"}, "maxItems": 2}},
        "required": ["owner", "tenants"], "additionalProperties": False},
    "formats": {
        "type": "object",
        "properties": {"day": {"type": "string", "format": "date"}, "ip": {"type": "string", "format": "ipv4"},
                       "id": {"type": "string", "format": "uuid"}},
        "required": ["day", "ip", "id"], "additionalProperties": False},
    "numbers": {
        "type": "object",
        "properties": {"score": {"type": "integer", "exclusiveMinimum": -3, "maximum": 3},
                       "big": {"type": "integer", "minimum": 1000, "maximum": 1999},
                       "ratio": {"type": "number", "minimum": 0, "maximum": 1}},
        "required": ["score", "big", "ratio"], "additionalProperties": False},
    "optional_closed": {
        "type": "object",
        "properties": {"title": {"type": "string", "maxLength": 12}, "done": {"type": "boolean"},
                       "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}},
        "required": ["title"], "additionalProperties": False},
    "any_of": {
        "type": "object",
        "properties": {"value": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 50}, {"type": "null"},
                                           {"type": "string", "maxLength": 8}]}},
        "required": ["value"], "additionalProperties": False},
}

MODELS = {"smollm": SMOLLM, "gemma": GEMMA}


@pytest.fixture(scope="module", params=sorted(MODELS))
def server(request, ember_bin):
    path = MODELS[request.param]
    if not path.exists():
        pytest.skip(f"{path.name} not fetched (scripts/fetch_models.py)")
    s = Server(ember_bin, "--max-num-seqs", "8", "--tool-call-parser", "hermes" if request.param == "smollm" else "auto",
               model=path, name=request.param)
    s.name = request.param
    yield s
    assert s.stop() == 0, s.log()


def chat(server, body, stream):
    """Text and finish_reason of one completion, streamed (SSE chunks joined) or not. SmolLM2 gets
    /v1/chat/completions; the base Gemma 3 GGUF has no chat template, so it gets /v1/completions
    with the user's message as the prompt."""
    body = {"model": server.name, **body, "stream": stream}
    route, key = "/v1/chat/completions", "content"
    if server.name == "gemma":
        body["prompt"] = body.pop("messages")[-1]["content"] + "\n"
        route, key = "/v1/completions", "text"
    if not stream:
        status, out = server.json("POST", route, body)
        assert status == 200, out
        choice = out["choices"][0]
        return choice["message"]["content"] if key == "content" else choice["text"], choice["finish_reason"]
    status, payload = server.request("POST", route, body)
    assert status == 200, payload
    content, reason = "", None
    for line in payload.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            choice = json.loads(line[6:])["choices"][0]
            content += (choice["delta"].get("content") if key == "content" else choice.get("text")) or ""
            reason = choice["finish_reason"] or reason
    return content, reason


CASES = [(name, stream, temperature) for name in SCHEMAS for stream in (False, True) for temperature in (0.0, 1.0)]


def test_json_schema_outputs_validate(server):
    checker = jsonschema.FormatChecker()

    def run(case):
        name, stream, temperature = case
        body = {"messages": [{"role": "user", "content": f"Give an example {name.replace('_', ' ')} as JSON."}],
                "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": SCHEMAS[name]}},
                "temperature": temperature, "seed": 11, "max_tokens": 400}
        return case, chat(server, body, stream)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(run, CASES))
    for (name, stream, temperature), (content, reason) in results:
        where = f"{server.name} {name} stream={stream} T={temperature}: {content!r}"
        assert reason == "stop", where
        jsonschema.validate(json.loads(content), SCHEMAS[name], format_checker=checker)


def test_json_object_and_guided_json_on_completions(server):
    text, reason = chat(server, {"messages": [{"role": "user", "content": "Describe a cat as a JSON object."}],
                                 "response_format": {"type": "json_object"}, "temperature": 0, "max_tokens": 300}, False)
    if reason == "stop":
        assert isinstance(json.loads(text), dict), text
    else:  # cut by max_tokens: still the start of an object
        assert text.startswith("{"), text
    schema = SCHEMAS["enums"]
    status, out = server.json("POST", "/v1/completions", {
        "model": server.name, "prompt": "A T-shirt: ", "guided_json": schema, "temperature": 1.0, "seed": 5,
        "max_tokens": 100, "n": 3})
    assert status == 200, out
    for choice in out["choices"]:
        assert choice["finish_reason"] == "stop", choice
        jsonschema.validate(json.loads(choice["text"]), schema)


@pytest.mark.parametrize("stream", [False, True])
def test_regex_choice_and_grammar(server, stream):
    cases = [
        ({"structured_outputs": {"regex": r"[A-Z][a-z]{2,8} [0-9]{1,3}(\.[0-9])?"}},
         lambda t: re.fullmatch(r"[A-Z][a-z]{2,8} [0-9]{1,3}(\.[0-9])?", t)),
        ({"guided_regex": r"(yes|no), because [a-z ]{5,30}\."}, lambda t: re.fullmatch(r"(yes|no), because [a-z ]{5,30}\.", t)),
        ({"structured_outputs": {"choice": ["Paris", "London", "Berlin or Rome"]}},
         lambda t: t in ("Paris", "London", "Berlin or Rome")),
        ({"guided_choice": ["positive", "negative"]}, lambda t: t in ("positive", "negative")),
        ({"structured_outputs": {"grammar": 'root ::= "[" num ("," num){0,3} "]"\nnum ::= [1-9] [0-9]{0,2}'}},
         lambda t: re.fullmatch(r"\[[1-9][0-9]{0,2}(,[1-9][0-9]{0,2}){0,3}\]", t)),
        ({"guided_grammar": 'root ::= greeting " " name "!"\ngreeting ::= "Hello" | "Hi"\nname ::= [A-Z] [a-z]{1,10}'},
         lambda t: re.fullmatch(r"(Hello|Hi) [A-Z][a-z]{1,10}!", t)),
    ]
    for extra, check in cases:
        for temperature in (0.0, 1.0):
            body = {"messages": [{"role": "user", "content": "Answer: what is the capital of France?"}],
                    "temperature": temperature, "seed": 3, "max_tokens": 64, **extra}
            content, reason = chat(server, body, stream)
            assert reason == "stop" and check(content), f"{server.name} {extra} T={temperature}: {content!r}"


@pytest.mark.parametrize("extra,param,words", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": True}}}},
     "response_format", "uniqueItems"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "strange"}}}},
     "response_format", "json_schema"),
    ({"guided_json": {"type": "object", "properties": {"a": {"not": {"type": "string"}}}}}, "guided_json", "'not'"),
    ({"structured_outputs": {"regex": "(unclosed"}}, "structured_outputs.regex", "regex"),
    ({"structured_outputs": {"grammar": "root ::= missing_rule"}}, "structured_outputs.grammar", "grammar"),
    ({"guided_regex": "a", "guided_choice": ["b"]}, "guided_choice", "only one"),
])
def test_invalid_constraints_are_400s_naming_them(server, extra, param, words):
    status, out = server.json("POST", "/v1/completions", {"model": server.name, "prompt": "hi", **extra})
    assert status == 400, out
    assert out["error"]["param"] == param, out
    assert words in out["error"]["message"], out


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                         "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "add", "description": "Adds two integers", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer", "minimum": -1000, "maximum": 1000},
                                         "b": {"type": "integer", "minimum": -1000, "maximum": 1000}},
        "required": ["a", "b"], "additionalProperties": False}}},
]


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "add"}}])
@pytest.mark.parametrize("stream", [False, True])
def test_forced_tool_calls_follow_the_schema(server, tool_choice, stream):
    if server.name != "smollm":
        pytest.skip("forced calls need a tool-call format (Hermes); Gemma 3's template has none")
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    for temperature in (0.0, 1.0):
        body = {"model": server.name, "messages": [{"role": "user", "content": "What is 2 plus 40? And the weather in Oslo?"}],
                "tools": TOOLS, "tool_choice": tool_choice, "temperature": temperature, "seed": 9, "max_tokens": 200,
                "stream": stream}
        if stream:
            status, payload = server.request("POST", "/v1/chat/completions", body)
            assert status == 200, payload
            calls, reason = [], None
            for line in payload.splitlines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    choice = json.loads(line[6:])["choices"][0]
                    calls += choice["delta"].get("tool_calls") or []
                    reason = choice["finish_reason"] or reason
        else:
            status, out = server.json("POST", "/v1/chat/completions", body)
            assert status == 200, out
            calls, reason = out["choices"][0]["message"]["tool_calls"], out["choices"][0]["finish_reason"]
        assert reason == "tool_calls" and len(calls) == 1, (reason, calls)
        name = calls[0]["function"]["name"]
        if isinstance(tool_choice, dict):
            assert name == "add"
        jsonschema.validate(json.loads(calls[0]["function"]["arguments"]), schemas[name])


def test_forced_call_cut_short_keeps_its_text(server):
    if server.name != "smollm":
        pytest.skip("forced calls need a tool-call format (Hermes)")
    for stream in (False, True):
        body = {"model": server.name, "messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": TOOLS,
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "temperature": 0,
                "max_tokens": 4}
        content, reason = chat(server, body, stream)
        assert reason == "length", (content, reason)
        assert content and content.startswith("<tool_call>") and '"get_weather"' in content, content
