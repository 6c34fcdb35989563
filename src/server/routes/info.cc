// GET /v1/models, POST /tokenize, POST /detokenize.
#include <fmt/format.h>

#include "server/http_util.h"
#include "server/protocol/field_reader.h"
#include "server/protocol/safe_text.h"
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

void HandleTokenize(ServingContext& context, const HttpRequest& req, HttpResponse& res) {
  auto body = ParseJsonBody(req);
  if (auto* e = std::get_if<ApiError>(&body)) return SendError(res, *e);
  const json& b = std::get<json>(body);
  FieldReader r(b);
  std::string model, prompt;
  bool add_special = true;
  r.String("model", &model);
  r.String("prompt", &prompt);
  r.Bool("add_special_tokens", &add_special);
  if (!r.Has("prompt")) r.Fail(BadRequest("'prompt' is required (a string)", "prompt"));
  if (r.error()) return SendError(res, *r.error());
  if (!model.empty() && model != context.config.served_model_name) {
    return SendError(res, NotFound(fmt::format("the model '{}' does not exist", SafeText(model)), "model"));
  }
  const std::vector<int32_t> ids = context.model.tokenizer->Encode(prompt, add_special, /*parse_special=*/true);
  SendJson(res, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", context.config.max_model_len}});
}

void HandleDetokenize(ServingContext& context, const HttpRequest& req, HttpResponse& res) {
  auto body = ParseJsonBody(req);
  if (auto* e = std::get_if<ApiError>(&body)) return SendError(res, *e);
  const json& b = std::get<json>(body);
  FieldReader r(b);
  std::string model;
  std::vector<int32_t> tokens;
  r.String("model", &model);
  r.IntArray("tokens", &tokens);
  if (!r.Has("tokens")) r.Fail(BadRequest("'tokens' is required (an array of token ids)", "tokens"));
  if (r.error()) return SendError(res, *r.error());
  for (int32_t id : tokens) {
    if (id < 0 || id >= context.model.vocab_size) {
      return SendError(res, BadRequest(fmt::format("token id {} is outside the vocabulary [0, {})", id,
                                                   context.model.vocab_size),
                                       "tokens"));
    }
  }
  SendJson(res, {{"prompt", context.model.tokenizer->Decode(tokens, /*skip_special=*/false)}});
}

}  // namespace ember::server
