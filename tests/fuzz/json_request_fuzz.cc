// Request bodies: JSON parsing (bounded depth, located errors) and the OpenAI request parsers.
// Properties checked beyond "no crash, no sanitizer report": nothing throws, and every error
// reply is written as strict JSON (an error message quoting invalid UTF-8 would throw here).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/protocol/json_body.h"
#include "server/protocol/requests.h"

namespace {

using ember::server::ApiError;
using json = nlohmann::ordered_json;

template <typename T>
void Check(const std::variant<T, ApiError>& parsed) {
  if (const ApiError* e = std::get_if<ApiError>(&parsed)) (void)e->ToJson().dump();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto body = ember::server::ParseJsonObject(text);
  Check(body);
  if (const json* object = std::get_if<json>(&body)) {
    Check(ember::server::ParseCompletionRequest(*object));
    const auto chat = ember::server::ParseChatCompletionRequest(*object);
    Check(chat);
    // What the chat route does next with the messages (the template engine walks them the same
    // way): recursive, and safe only because the depth is bounded.
    if (const auto* request = std::get_if<ember::server::ChatCompletionRequest>(&chat)) {
      (void)request->chat.messages.dump(-1, ' ', false, json::error_handler_t::replace);
      (void)request->chat.tools.dump(-1, ' ', false, json::error_handler_t::replace);
    }
    // /tokenize takes the same conversations (or a prompt).
    const auto tokenize = ember::server::ParseTokenizeRequest(*object);
    Check(tokenize);
    if (const auto* request = std::get_if<ember::server::TokenizeRequest>(&tokenize); request && request->chat) {
      (void)request->chat->messages.dump(-1, ' ', false, json::error_handler_t::replace);
    }
  }
  return 0;
}
