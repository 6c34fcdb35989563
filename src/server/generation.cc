#include "server/generation.h"

#include <fmt/format.h>

namespace ember::server {

GenerationJob::GenerationJob(ServingContext* context, std::vector<ChoiceSpec> choices, std::string request_id,
                             Admission::Slot slot)
    : context_(context),
      request_id_(std::move(request_id)),
      stream_(std::make_shared<RequestStream>()),
      slot_(std::move(slot)) {
  int max_prompt = 0;
  for (ChoiceSpec& spec : choices) {
    Choice c;
    c.spec = std::move(spec);
    max_prompt = std::max(max_prompt, c.spec.prompt_index);
    c.text = std::make_unique<TextStream>(context_->model.tokenizer, c.spec.sampling,
                                          /*skip_special_tokens=*/!context_->model.output_parser ||
                                              !context_->model.output_parser->needs_special_tokens());
    choices_.push_back(std::move(c));
  }
  prompt_counted_.assign(max_prompt + 1, false);
}

GenerationJob::~GenerationJob() { AbortAll(); }

void GenerationJob::Submit(size_t i) {
  Choice& c = choices_[i];
  RequestInput input;
  input.external_id = fmt::format("{}-{}", request_id_, i);
  input.prompt_token_ids = c.spec.prompt_token_ids;
  input.sampling = c.spec.sampling;
  input.priority = c.spec.priority;
  input.cache_salt_key = c.spec.cache_salt_key;
  input.kv_transfer = c.spec.kv_transfer;
  input.mm_features = c.spec.mm_features;
  input.eos_token_id = context_->model.eos_token_id;
  c.req = context_->engine->Submit(std::move(input), stream_);
  c.submitted = true;
}

void GenerationJob::Start() {
  std::vector<bool> leader_seen(prompt_counted_.size(), false);
  for (size_t i = 0; i < choices_.size(); ++i) {
    const int p = choices_[i].spec.prompt_index;
    const bool defer = context_->config.enable_prefix_caching && leader_seen[p];
    leader_seen[p] = true;
    if (!defer) Submit(i);
  }
}

void GenerationJob::SubmitDeferredSiblings(int prompt_index) {
  for (size_t i = 0; i < choices_.size(); ++i) {
    if (!choices_[i].submitted && choices_[i].spec.prompt_index == prompt_index) Submit(i);
  }
}

std::optional<ChoiceDelta> GenerationJob::Next() {
  while (!done()) {
    RequestOutput event;
    if (!stream_->Pop(&event, std::chrono::milliseconds(0))) return std::nullopt;
    size_t i = 0;
    while (i < choices_.size() && !(choices_[i].submitted && !choices_[i].finished && choices_[i].req == event.req)) ++i;
    if (i == choices_.size()) continue;  // a late event of a choice already finished by a stop string
    Choice& c = choices_[i];
    // The leader's first event means its prompt is computed and its full blocks are cached.
    if (!event.new_token_ids.empty() || event.finished) SubmitDeferredSiblings(c.spec.prompt_index);
    ChoiceDelta out;
    out.choice = static_cast<int>(i);
    out.delta = c.text->Consume(event);
    // vLLM's stop_reason names a stop string or a stop token the client asked for; EOS is null.
    if (out.delta.stop_token && *out.delta.stop_token == context_->model.eos_token_id) out.delta.stop_token.reset();
    usage_.completion_tokens += static_cast<int64_t>(event.new_token_ids.size());
    if (event.kv_transfer_params && !kv_transfer_params_) kv_transfer_params_ = event.kv_transfer_params;
    if (out.delta.stop_string_hit) context_->engine->Abort(c.req);
    if (out.delta.finished) {
      c.finished = true;
      ++num_finished_;
      if (!prompt_counted_[c.spec.prompt_index]) {
        prompt_counted_[c.spec.prompt_index] = true;
        usage_.prompt_tokens += static_cast<int64_t>(c.spec.prompt_token_ids.size());
      }
      usage_.cached_tokens += event.num_cached_tokens;
    }
    return out;
  }
  return std::nullopt;
}

void GenerationJob::AbortAll() {
  for (Choice& c : choices_) {
    if (c.submitted && !c.finished && c.req != AsyncEngine::kNoRequest) context_->engine->Abort(c.req);
  }
}

ApiError GenerationError(const AsyncEngine& engine, const std::string& error) {
  return engine.alive() ? BadRequest(error) : ServiceUnavailable(error);
}

}  // namespace ember::server
