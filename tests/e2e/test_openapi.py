"""schemathesis against a live `ember serve`: every operation in its /openapi.json is called with
generated requests, valid and invalid, and every answer must be one the document describes: no
5xx, a documented status code, content type, headers and body schema. The request schemas are
written from the parsers' own field tables (src/server/protocol/request_fields.h), so what is
generated as valid is what the parser reads.

The server runs with an API key (declared in the document as the bearer scheme) and a small
context, n and prompt count, so that no generated request generates for long."""
import collections

import pytest

from serving import SMOLLM, Server

schemathesis = pytest.importorskip("schemathesis")
hypothesis = pytest.importorskip("hypothesis")
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance, response_headers_conformance, response_schema_conformance, status_code_conformance)

API_KEY = "sk-schemathesis"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance]


@pytest.fixture(scope="module")
def server(ember_bin):
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (scripts/fetch_models.py)")
    s = Server(ember_bin, "--api-key", API_KEY, "--max-num-seqs", "8", "--max-n", "2", "--max-prompts-per-request",
               "3", "--default-max-tokens", "8", max_model_len=48)
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def api_schema(server):
    return schemathesis.openapi.from_url(f"http://127.0.0.1:{server.port}/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@hypothesis.settings(max_examples=40, deadline=None, suppress_health_check=list(hypothesis.HealthCheck),
                     derandomize=True)
def test_every_answer_is_documented(case):
    response = case.call_and_validate(headers={"Authorization": f"Bearer {API_KEY}"}, checks=CHECKS, timeout=60)
    STATUSES[case.operation.label][response.status_code] += 1
    if case.operation.label == "POST /tokenize" and isinstance(case.body, dict) and case.body.get("messages"):
        STATUSES["POST /tokenize (messages)"][response.status_code] += 1


STATUSES = collections.defaultdict(collections.Counter)  # operation -> status -> calls, from the test above


def test_generated_requests_reached_every_operation_and_generated():
    """The run above was not vacuous: every operation was called many times, and valid requests
    got through to generation (200) as well as being refused (400)."""
    print({op: dict(statuses) for op, statuses in STATUSES.items()})
    for op in ("POST /v1/completions", "POST /v1/chat/completions", "POST /tokenize", "POST /detokenize"):
        assert sum(STATUSES[op].values()) >= 30, (op, STATUSES[op])
        assert STATUSES[op][200] > 0 and STATUSES[op][400] > 0, (op, STATUSES[op])
    # /tokenize's chat shape (the oneOf's second branch) was generated and rendered too.
    assert STATUSES["POST /tokenize (messages)"][200] > 0, STATUSES["POST /tokenize (messages)"]
    for op in ("GET /v1/models", "GET /health", "GET /version", "GET /metrics"):
        assert STATUSES[op][200] > 0, (op, STATUSES[op])


def test_document_declares_the_key_and_the_request_fields(server):
    status, doc = server.json("GET", "/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.1")
    assert doc["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": doc["components"]["securitySchemes"]["bearer"]["description"]}
    chat = doc["paths"]["/v1/chat/completions"]["post"]
    assert chat["security"] == [{"bearer": []}]  # this server has a key
    assert "security" not in doc["paths"]["/health"]["get"]
    assert {"401", "400", "413", "415", "503"} <= set(chat["responses"])
    fields = doc["components"]["schemas"]["ChatCompletionRequest"]["properties"]
    assert fields["temperature"]["minimum"] == 0 and fields["n"]["minimum"] == 1
    assert fields["max_tokens"]["minimum"] == 1 and "messages" in doc["components"]["schemas"][
        "ChatCompletionRequest"]["required"]
    # /tokenize: vLLM's two shapes, the chat one with the chat request's conversation fields.
    prompt, chat_shape = doc["components"]["schemas"]["TokenizeRequest"]["oneOf"]
    assert prompt["required"] == ["prompt"] and chat_shape["required"] == ["messages"]
    assert chat_shape["properties"]["messages"] == fields["messages"]
    assert {"add_generation_prompt", "continue_final_message", "tools", "chat_template_kwargs",
            "add_special_tokens", "return_token_strs"} <= set(chat_shape["properties"])
    tokenized = doc["components"]["schemas"]["Tokenized"]
    assert tokenized["required"] == ["count", "max_model_len", "tokens", "token_strs"]
    assert {"type": "null"} in tokenized["properties"]["token_strs"]["anyOf"]
