// GET /v1/models, POST /tokenize, POST /detokenize.
#include <fmt/format.h>

#include "server/http_util.h"
#include "server/protocol/requests.h"
#include "server/protocol/safe_text.h"
#include "server/routes/chat_prompt.h"
#include "server/routes/prepare.h"
#include "server/routes/routes.h"

namespace ember::server {

using json = nlohmann::ordered_json;

void HandleModels(ServingContext& context, const HttpRequest&, HttpResponse& res) {
  const std::string& name = context.config.served_model_name;
  SendJson(res, {{"object", "list"},
                 {"data", json::array({{{"id", name},
                                        {"object", "model"},
                                        {"created", context.model.created_unix},
                                        {"owned_by", "ember"},
                                        {"root", context.model.path},
                                        {"max_model_len", context.config.max_model_len}}})}});
}

// vLLM's /tokenize: a prompt, or a chat rendered exactly as /v1/chat/completions renders it (so
// a client sees the ids the model would see); token_strs are the ids' vocabulary strings, as
// transformers' convert_ids_to_tokens gives them.
void HandleTokenize(ServingContext& context, const HttpRequest& req, HttpResponse& res) {
  auto body = ParseJsonBody(req);
  if (auto* e = std::get_if<ApiError>(&body)) return SendError(res, *e);
  auto parsed = ParseTokenizeRequest(std::get<json>(body));
  if (auto* e = std::get_if<ApiError>(&parsed)) return SendError(res, *e);
  const TokenizeRequest& request = std::get<TokenizeRequest>(parsed);
  if (!request.model.empty() && request.model != context.config.served_model_name) {
    return SendError(res, NotFound(fmt::format("the model '{}' does not exist", SafeText(request.model)), "model"));
  }
  std::vector<int32_t> ids;
  if (request.chat) {
    auto rendered = RenderChatPrompt(context.model, *request.chat);
    if (auto* e = std::get_if<ApiError>(&rendered)) return SendError(res, *e);
    ids = TokenizeChatPrompt(context.model, std::get<std::string>(rendered), request.add_special_tokens);
    // The ids a chat request with these media would compute: placeholders expanded.
    auto media = ExpandChatMedia(context, *request.chat, /*use_audio_in_video=*/false, &ids);
    if (auto* e = std::get_if<ApiError>(&media)) return SendError(res, *e);
  } else {
    ids = context.model.tokenizer->Encode(request.prompt, request.add_special_tokens, /*parse_special=*/true);
  }
  json token_strs = nullptr;
  if (request.return_token_strs) {
    token_strs = json::array();
    for (int32_t id : ids) token_strs.push_back(context.model.tokenizer->TokenText(id));
  }
  SendJson(res, {{"count", ids.size()},
                 {"max_model_len", context.config.max_model_len},
                 {"tokens", ids},
                 {"token_strs", std::move(token_strs)}});
}

void HandleDetokenize(ServingContext& context, const HttpRequest& req, HttpResponse& res) {
  auto body = ParseJsonBody(req);
  if (auto* e = std::get_if<ApiError>(&body)) return SendError(res, *e);
  auto parsed = ParseDetokenizeRequest(std::get<json>(body));
  if (auto* e = std::get_if<ApiError>(&parsed)) return SendError(res, *e);
  const DetokenizeRequest& request = std::get<DetokenizeRequest>(parsed);
  if (!request.model.empty() && request.model != context.config.served_model_name) {
    return SendError(res, NotFound(fmt::format("the model '{}' does not exist", SafeText(request.model)), "model"));
  }
  for (int32_t id : request.tokens) {
    if (id >= context.model.vocab_size) {
      return SendError(res, BadRequest(fmt::format("token id {} is outside the vocabulary [0, {})", id,
                                                   context.model.vocab_size),
                                       "tokens"));
    }
  }
  SendJson(res, {{"prompt", context.model.tokenizer->Decode(request.tokens, /*skip_special=*/false)}});
}

}  // namespace ember::server
