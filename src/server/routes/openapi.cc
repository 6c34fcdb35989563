// GET /openapi.json: what the server offers, for client generators, humans and schemathesis
// (tests/e2e/test_openapi.py). The request bodies are written from the parsers' own field tables
// (protocol/request_fields.h), so they cannot drift from what the parsers accept; the response
// bodies follow the routes' JSON and the error statuses the server answers.
#include <algorithm>
#include <functional>

#include "server/protocol/requests.h"
#include "server/routes/routes.h"

namespace ember::server {

using json = nlohmann::ordered_json;

namespace {

json Ref(const std::string& name) { return {{"$ref", "#/components/schemas/" + name}}; }
json Type(const char* type) { return {{"type", type}}; }
json Nullable(json schema) { return {{"anyOf", json::array({std::move(schema), Type("null")})}}; }
json ArrayOf(json items) { return {{"type", "array"}, {"items", std::move(items)}}; }
json Object(json properties, std::vector<std::string> required) {
  json o = {{"type", "object"}, {"properties", std::move(properties)}};
  if (!required.empty()) o["required"] = std::move(required);
  return o;
}
std::vector<std::string> Keys(const json& properties) {
  std::vector<std::string> keys;
  for (const auto& [key, _] : properties.items()) keys.push_back(key);
  return keys;
}
// An object whose every listed property is always present.
json Record(json properties) {
  auto keys = Keys(properties);
  return Object(std::move(properties), std::move(keys));
}

json FinishReason() { return {{"enum", {"stop", "length", "abort", "error", "tool_calls"}}}; }
// The matched stop string, the stop token's id, or null.
json StopReason() { return {{"type", {"string", "integer", "null"}}}; }

json UsageSchema() {
  json usage = Record({{"prompt_tokens", Type("integer")},
                       {"completion_tokens", Type("integer")},
                       {"total_tokens", Type("integer")}});
  usage["properties"]["prompt_tokens_details"] = Record({{"cached_tokens", Type("integer")}});
  return usage;
}

json CompletionLogprobsSchema() {
  // A logprob of -inf is written as null.
  const json logprob = {{"type", {"number", "null"}}};
  return Record({{"tokens", ArrayOf(Type("string"))},
                 {"token_logprobs", ArrayOf(logprob)},
                 {"top_logprobs", ArrayOf({{"type", "object"}, {"additionalProperties", logprob}})},
                 {"text_offset", ArrayOf(Type("integer"))}});
}

json ChatLogprobsSchema() {
  const json logprob = {{"type", {"number", "null"}}};
  const json bytes = ArrayOf({{"type", "integer"}, {"minimum", 0}, {"maximum", 255}});
  const json top = Record({{"token", Type("string")}, {"logprob", logprob}, {"bytes", bytes}});
  return Record({{"content", ArrayOf(Record({{"token", Type("string")},
                                              {"logprob", logprob},
                                              {"bytes", bytes},
                                              {"top_logprobs", ArrayOf(top)}}))}});
}

json ToolCallSchema() {
  return Record({{"id", Type("string")},
                 {"type", {{"const", "function"}}},
                 {"function", Record({{"name", Type("string")}, {"arguments", Type("string")}})}});
}

json CompletionSchema() {
  return Record({{"id", Type("string")},
                 {"object", {{"const", "text_completion"}}},
                 {"created", Type("integer")},
                 {"model", Type("string")},
                 {"choices", ArrayOf(Record({{"index", Type("integer")},
                                             {"text", Type("string")},
                                             {"logprobs", Nullable(CompletionLogprobsSchema())},
                                             {"finish_reason", FinishReason()},
                                             {"stop_reason", StopReason()}}))},
                 {"usage", Ref("Usage")}});
}

json ChatCompletionSchema() {
  json message = Object({{"role", {{"const", "assistant"}}},
                         {"content", {{"type", {"string", "null"}}}},
                         {"reasoning_content", Type("string")},
                         {"tool_calls", ArrayOf(ToolCallSchema())}},
                        {"role", "content"});
  return Record({{"id", Type("string")},
                 {"object", {{"const", "chat.completion"}}},
                 {"created", Type("integer")},
                 {"model", Type("string")},
                 {"choices", ArrayOf(Record({{"index", Type("integer")},
                                             {"message", std::move(message)},
                                             {"logprobs", Nullable(ChatLogprobsSchema())},
                                             {"finish_reason", FinishReason()},
                                             {"stop_reason", StopReason()}}))},
                 {"usage", Ref("Usage")}});
}

// The chunks of a stream ("data: <chunk>"): usage is null but in the last one with
// stream_options.include_usage.
json CompletionChunkSchema() {
  json chunk = Record({{"id", Type("string")},
                       {"object", {{"const", "text_completion"}}},
                       {"created", Type("integer")},
                       {"model", Type("string")},
                       {"choices", ArrayOf(Object({{"index", Type("integer")},
                                                   {"text", Type("string")},
                                                   {"logprobs", Nullable(CompletionLogprobsSchema())},
                                                   {"finish_reason", Nullable(FinishReason())},
                                                   {"stop_reason", StopReason()}},
                                                  {"index", "text", "logprobs", "finish_reason"}))}});
  chunk["properties"]["usage"] = Nullable(Ref("Usage"));
  return chunk;
}

json ChatCompletionChunkSchema() {
  json tool_call = ToolCallSchema();
  tool_call["properties"]["index"] = Type("integer");
  tool_call["required"].push_back("index");
  const json delta = Object({{"role", {{"const", "assistant"}}},
                             {"content", Type("string")},
                             {"reasoning_content", Type("string")},
                             {"tool_calls", ArrayOf(tool_call)}},
                            {});
  json chunk = Record({{"id", Type("string")},
                       {"object", {{"const", "chat.completion.chunk"}}},
                       {"created", Type("integer")},
                       {"model", Type("string")},
                       {"choices", ArrayOf(Record({{"index", Type("integer")},
                                                   {"delta", delta},
                                                   {"logprobs", Nullable(ChatLogprobsSchema())},
                                                   {"finish_reason", Nullable(FinishReason())}}))}});
  chunk["properties"]["usage"] = Nullable(Ref("Usage"));
  return chunk;
}

json ErrorSchema() {
  return Record({{"error", Record({{"message", Type("string")},
                                   {"type", Type("string")},
                                   {"param", {{"type", {"string", "null"}}}},
                                   {"code", {{"type", {"string", "null"}}}}})}});
}

// The checks this server adds to the parser's, at admission (routes/prepare.cc, info.cc): n up to
// --max-n, max_tokens and min_tokens below the context, token ids in the vocabulary (when known).
void AddServerLimits(const ServerConfig& config, int64_t vocab_size, json* schema) {
  json& p = (*schema)["properties"];
  auto cap = [](json* s, int64_t max) {
    if (s->is_object() && s->contains("maximum")) (*s)["maximum"] = std::min((*s)["maximum"].get<int64_t>(), max);
  };
  if (p.contains("n")) cap(&p["n"], config.max_n);
  for (const char* f : {"max_tokens", "max_completion_tokens", "min_tokens"}) {
    if (p.contains(f)) cap(&p[f], config.max_model_len - 1);
  }
  if (vocab_size <= 0) return;
  for (const char* f : {"stop_token_ids", "tokens"}) {
    if (p.contains(f)) cap(&p[f]["items"], vocab_size - 1);
  }
  if (p.contains("prompt")) {  // its token-id arrays, at any depth of its anyOf
    std::function<void(json&)> walk = [&](json& s) {
      if (s.is_object() && s.value("type", json()) == "integer") cap(&s, vocab_size - 1);
      if (s.is_object() || s.is_array()) {
        for (auto& child : s) walk(child);
      }
    };
    walk(p["prompt"]);
  }
}

json ComponentSchemas(const ServerConfig& config, int64_t vocab_size) {
  json completion = CompletionRequestSchema(config.default_sampling);
  SamplingParams chat_defaults = config.default_sampling;
  chat_defaults.max_tokens = config.default_max_tokens;
  json chat = ChatCompletionRequestSchema(chat_defaults);
  json detokenize = DetokenizeRequestSchema();
  for (json* s : {&completion, &chat, &detokenize}) AddServerLimits(config, vocab_size, s);
  return {{"CompletionRequest", std::move(completion)},
          {"ChatCompletionRequest", std::move(chat)},
          {"TokenizeRequest", TokenizeRequestSchema()},
          {"DetokenizeRequest", std::move(detokenize)},
          {"Completion", CompletionSchema()},
          {"ChatCompletion", ChatCompletionSchema()},
          {"CompletionChunk", CompletionChunkSchema()},
          {"ChatCompletionChunk", ChatCompletionChunkSchema()},
          {"Usage", UsageSchema()},
          {"ModelList", Record({{"object", {{"const", "list"}}},
                                {"data", ArrayOf(Record({{"id", Type("string")},
                                                         {"object", {{"const", "model"}}},
                                                         {"created", Type("integer")},
                                                         {"owned_by", Type("string")},
                                                         {"root", Type("string")},
                                                         {"max_model_len", Type("integer")}}))}})},
          // token_strs: null unless return_token_strs.
          {"Tokenized", Record({{"count", Type("integer")},
                                {"max_model_len", Type("integer")},
                                {"tokens", ArrayOf(Type("integer"))},
                                {"token_strs", Nullable(ArrayOf(Type("string")))}})},
          {"Detokenized", Record({{"prompt", Type("string")}})},
          {"Version", Record({{"version", Type("string")}})},
          {"Error", ErrorSchema()}};
}

json JsonContent(const std::string& schema) { return {{"application/json", {{"schema", Ref(schema)}}}}; }

json ErrorResponse(const std::string& description) {
  return {{"description", description + " (an OpenAI error object)"}, {"content", JsonContent("Error")}};
}

struct Route {
  std::string path, method, summary;
  std::string request;   // the request body's schema; empty: none
  json ok;               // the 200 response
  bool names_model = false;  // 404 for another model's name
};

json Operation(const Route& route, const ServerConfig& config) {
  const bool v1 = route.path.rfind("/v1", 0) == 0;
  json responses = {{"200", route.ok}};
  responses["400"] = ErrorResponse("an invalid request: the field is named in error.param");
  if (v1) responses["401"] = ErrorResponse("a missing or wrong API key (a server started with --api-key)");
  responses["403"] = ErrorResponse("a Host that is not loopback on a loopback server, or an Origin not in "
                                   "--allowed-origins");
  if (route.names_model) responses["404"] = ErrorResponse("another model than the served one");
  responses["405"] = ErrorResponse("another method than the route's");
  responses["405"]["headers"] = {{"Allow", {{"description", "the route's methods"}, {"required", true},
                                            {"schema", Type("string")}}}};
  responses["413"] = ErrorResponse("a body larger than --max-request-body");
  responses["414"] = ErrorResponse("a request target longer than 8 KiB");
  responses["415"] = ErrorResponse("a POST that is not JSON, or a compressed body (Content-Encoding)");
  responses["431"] = ErrorResponse("request headers over 16 KiB or 100 fields");
  responses["500"] = ErrorResponse("a bug: the server log has the details");
  responses["501"] = ErrorResponse("a Transfer-Encoding other than chunked");
  responses["503"] = ErrorResponse(route.request.empty() || !v1
                                       ? "over --max-connections, or the engine is not serving"
                                       : "the engine is down, or the request's prompts x n do not fit under "
                                         "--max-waiting-requests now, or over --max-connections");
  json op = {{"summary", route.summary}, {"operationId", route.method + route.path}, {"responses", responses}};
  if (!route.request.empty()) {
    op["requestBody"] = {{"required", true}, {"content", JsonContent(route.request)}};
  }
  if (v1) {
    // Every /v1 route checks the key when the server has one; without one, none is needed.
    op["security"] = config.api_key.empty() ? json::array({{{"bearer", json::array()}}, json::object()})
                                            : json::array({{{"bearer", json::array()}}});
  }
  return op;
}

json Ok(const std::string& description, json content = nullptr) {
  json r = {{"description", description}};
  if (!content.is_null()) r["content"] = std::move(content);
  return r;
}

// Before OpenAPI 3.2 the schema of text/event-stream is one event's: {data, event, id, retry}.
// Each data is a chunk as JSON (an error object when the stream fails) or the final [DONE].
json Generation(const std::string& schema, const std::string& chunk) {
  const json data = {{"anyOf", json::array({{{"const", "[DONE]"}},
                                            {{"type", "string"},
                                             {"contentMediaType", "application/json"},
                                             {"contentSchema", {{"anyOf", json::array({Ref(chunk), Ref("Error")})}}}}})}};
  const json event = Object({{"data", data}, {"event", Type("string")}}, {"data"});
  return Ok("the result, or with stream: true server-sent events (data: <chunk JSON>, ending with data: [DONE])",
            {{"application/json", {{"schema", Ref(schema)}}}, {"text/event-stream", {{"schema", event}}}});
}

}  // namespace

json OpenApiDocument(const ServerConfig& config, int64_t vocab_size) {
  const std::vector<Route> routes = {
      {"/v1/completions", "post", "Text completion (OpenAI Completions API)", "CompletionRequest",
       Generation("Completion", "CompletionChunk"), true},
      {"/v1/chat/completions", "post", "Chat completion with tools (OpenAI Chat API)", "ChatCompletionRequest",
       Generation("ChatCompletion", "ChatCompletionChunk"), true},
      {"/v1/models", "get", "The served model", "", Ok("the model list", JsonContent("ModelList"))},
      {"/tokenize", "post", "Token ids of a prompt, or of messages rendered with the chat template (vLLM's tokenize)",
       "TokenizeRequest", Ok("the token ids", JsonContent("Tokenized")), true},
      {"/detokenize", "post", "Text of token ids", "DetokenizeRequest", Ok("the text", JsonContent("Detokenized")),
       true},
      {"/health", "get", "200 when serving; 503 while loading, after the engine died or while a step hangs", "",
       Ok("serving (no body)")},
      {"/version", "get", "Server version", "", Ok("the version", JsonContent("Version"))},
      {"/metrics", "get", "Prometheus metrics", "",
       Ok("the Prometheus text format", {{"text/plain", {{"schema", Type("string")}}}})},
      {"/openapi.json", "get", "This document", "", Ok("OpenAPI 3.1", {{"application/json", {{"schema", Type("object")}}}})},
  };
  json paths = json::object();
  for (const Route& route : routes) paths[route.path][route.method] = Operation(route, config);
  return {{"openapi", "3.1.0"},
          {"info", {{"title", "ember"}, {"version", "0.1.0"},
                    {"description", "An OpenAI-compatible server. Fields null or absent take their default; "
                                    "unknown fields are ignored."}}},
          {"paths", std::move(paths)},
          {"components",
           {{"schemas", ComponentSchemas(config, vocab_size)},
            {"securitySchemes",
             {{"bearer", {{"type", "http"}, {"scheme", "bearer"},
                          {"description", "the server's --api-key, as 'Authorization: Bearer <key>'"}}}}}}}};
}

}  // namespace ember::server
