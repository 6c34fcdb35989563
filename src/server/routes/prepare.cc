#include "server/routes/prepare.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "server/protocol/safe_text.h"

namespace ember::server {

std::variant<int64_t, ApiError> AdmissionCost(const ServerConfig& config, size_t num_prompts, int32_t n) {
  if (n < 1 || n > config.max_n) {
    return BadRequest(fmt::format("'n' must be between 1 and {} (--max-n), got {}", config.max_n, n), "n");
  }
  if (static_cast<int64_t>(num_prompts) > config.max_prompts_per_request) {
    return BadRequest(fmt::format("the request has {} prompts; at most {} are allowed per request "
                                  "(--max-prompts-per-request): split it into several requests",
                                  num_prompts, config.max_prompts_per_request),
                      "prompt");
  }
  const int64_t cost = static_cast<int64_t>(num_prompts) * n;
  if (cost > config.max_waiting_requests) {
    return BadRequest(fmt::format("the request needs {} engine requests ({} prompts x n {}), more than the server "
                                  "ever holds (--max-waiting-requests {}): send fewer prompts or a smaller n",
                                  cost, num_prompts, n, config.max_waiting_requests),
                      num_prompts > 1 ? "prompt" : "n");
  }
  return cost;
}

std::variant<Admission::Slot, ApiError> Admit(ServingContext& context, const std::string& model, size_t num_prompts,
                                              int32_t n) {
  if (!model.empty() && model != context.config.served_model_name) {
    return NotFound(fmt::format("the model '{}' does not exist; this server serves '{}'", SafeText(model),
                                context.config.served_model_name),
                    "model");
  }
  auto cost = AdmissionCost(context.config, num_prompts, n);
  if (auto* e = std::get_if<ApiError>(&cost)) return *e;
  if (!context.engine->alive()) return ServiceUnavailable("the engine is not running; check the server log");
  const int64_t limit = context.config.max_waiting_requests;
  std::optional<Admission::Slot> slot = context.admission.TryAcquire(std::get<int64_t>(cost), limit);
  if (!slot) {
    return ServiceUnavailable(fmt::format("the server is overloaded ({} of {} engine requests in progress, "
                                          "--max-waiting-requests; this request needs {}); retry later",
                                          context.admission.in_progress(), limit, std::get<int64_t>(cost)));
  }
  return std::move(*slot);
}

std::variant<std::vector<ChoiceSpec>, ApiError> MakeChoices(const ServingContext& context, const CommonRequest& request,
                                                            const std::vector<std::vector<int32_t>>& prompts) {
  const int64_t max_len = context.config.max_model_len;
  const SamplingParams& sampling = request.sampling;  // n was checked by Admit
  std::shared_ptr<const TokenConstraint> constraint;
  if (request.constraint) {
    if (context.model.constraints == nullptr) {
      return BadRequest("structured outputs are not available on this server", request.constraint_field);
    }
    auto compiled = context.model.constraints->Compile(*request.constraint);
    if (!compiled.ok()) return BadRequest(std::string(compiled.status().message()), request.constraint_field);
    constraint = *compiled;
  }
  if (prompts.size() > 1 && (request.kv_transfer.do_remote_decode || request.kv_transfer.remote_prefill)) {
    return BadRequest("kv_transfer_params describe one prompt's KV: send one prompt per request",
                      "kv_transfer_params");
  }
  std::vector<ChoiceSpec> choices;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const int64_t prompt_len = static_cast<int64_t>(prompts[p].size());
    if (prompt_len == 0) return BadRequest("the prompt is empty", "prompt");
    for (int32_t id : prompts[p]) {
      if (id < 0 || id >= context.model.vocab_size) {
        return BadRequest(fmt::format("token id {} is outside the vocabulary [0, {})", id, context.model.vocab_size),
                          "prompt");
      }
    }
    if (prompt_len >= max_len) {
      return BadRequest(fmt::format("This model's maximum context length is {} tokens. However, your request has {} "
                                    "input tokens. Please reduce the length of the input.",
                                    max_len, prompt_len),
                        "messages");
    }
    SamplingParams s = sampling;
    if (!request.max_tokens_given) {
      s.max_tokens = static_cast<int32_t>(std::min<int64_t>(s.max_tokens, max_len - prompt_len));
    } else if (prompt_len + s.max_tokens > max_len) {
      return BadRequest(fmt::format("This model's maximum context length is {} tokens. However, you requested {} "
                                    "tokens ({} in the input, {} in the completion). Please reduce the length of the "
                                    "input or of max_tokens.",
                                    max_len, prompt_len + s.max_tokens, prompt_len, s.max_tokens),
                        "max_tokens");
    }
    s.n = 1;
    s.constraint = constraint;
    // End-of-turn tokens stop generation like EOS does (and are masked like it under min_tokens).
    if (!s.ignore_eos) {
      for (int32_t id : context.model.extra_stop_token_ids) s.stop_token_ids.push_back(id);
    }
    if (Status st = s.Validate(context.model.vocab_size); !st.ok()) return FromStatus(st);
    for (int32_t i = 0; i < sampling.n; ++i) {
      ChoiceSpec c;
      c.prompt_token_ids = prompts[p];
      c.sampling = s;
      // Choices of one seeded request differ from each other but repeat across calls.
      if (s.seed) c.sampling.seed = *s.seed + static_cast<uint64_t>(i);
      c.priority = request.priority;
      c.cache_salt_key = request.cache_salt.empty() ? 0 : std::hash<std::string>{}(request.cache_salt) | 1;
      c.prompt_index = static_cast<int>(p);
      c.kv_transfer = request.kv_transfer;
      if (request.kv_transfer.remote_prefill) {
        // With prefix caching the other choices start after the first computed its prompt
        // (GenerationJob::Start) and take its blocks, pulled ones included, from the cache: only
        // the first pulls. Without it every choice pulls the same held KV.
        if (context.config.enable_prefix_caching && i > 0) c.kv_transfer.remote_prefill.reset();
        c.kv_transfer.num_pulls = context.config.enable_prefix_caching ? 1 : sampling.n;
      }
      choices.push_back(std::move(c));
    }
  }
  return choices;
}

}  // namespace ember::server
