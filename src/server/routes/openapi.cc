// GET /openapi.json: what the server offers, for client generators and humans.
#include "server/routes/routes.h"

namespace ember::server {

using json = nlohmann::ordered_json;

namespace {
json Operation(const std::string& summary, bool has_body, bool streams) {
  json op = {{"summary", summary},
             {"responses",
              {{"200", {{"description", streams ? "JSON, or text/event-stream when stream is true" : "JSON"}}},
               {"400", {{"description", "invalid request (OpenAI error object)"}}},
               {"401", {{"description", "missing or wrong API key (when --api-key is set)"}}},
               {"403", {{"description", "a Host that is not loopback on a loopback server, or an Origin not in "
                                        "--allowed-origins"}}},
               {"405", {{"description", "another method than the route's (see the Allow header)"}}}}}};
  if (has_body) {
    op["responses"]["413"] = {{"description", "the body is larger than --max-request-body"}};
    op["responses"]["415"] = {{"description", "a Content-Type that is not JSON"}};
    op["responses"]["503"] = {{"description", "the engine is down, or prompts x n do not fit under "
                                              "--max-waiting-requests now"}};
    op["requestBody"] = {{"required", true}, {"content", {{"application/json", {{"schema", {{"type", "object"}}}}}}}};
  }
  return op;
}
}  // namespace

json OpenApiDocument() {
  return {{"openapi", "3.0.3"},
          {"info", {{"title", "ember"}, {"version", "0.1.0"}}},
          {"paths",
           {{"/v1/completions", {{"post", Operation("Text completion (OpenAI Completions API)", true, true)}}},
            {"/v1/chat/completions", {{"post", Operation("Chat completion with tools (OpenAI Chat API)", true, true)}}},
            {"/v1/models", {{"get", Operation("The served model", false, false)}}},
            {"/tokenize", {{"post", Operation("Token ids of a prompt, or of messages rendered with the chat template "
                                              "(vLLM's tokenize)", true, false)}}},
            {"/detokenize", {{"post", Operation("Text of token ids", true, false)}}},
            {"/health", {{"get", Operation("200 when serving, 503 while loading or after the engine died", false, false)}}},
            {"/version", {{"get", Operation("Server version", false, false)}}},
            {"/metrics", {{"get", Operation("Prometheus metrics", false, false)}}}}}};
}

}  // namespace ember::server
