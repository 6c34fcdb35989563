#include "runner/model_runner.h"

#include "core/check.h"
#include "core/logging.h"
#include "runner/batch_builder.h"
#include "runner/sampler/logprobs.h"

namespace ember {

ModelRunner::ModelRunner(CausalLM* model, KvStore* kv, std::vector<int32_t> eos_token_ids)
    : model_(model),
      kv_(kv),
      states_(static_cast<int>(kv->config().groups.size())),
      sampler_(model->info().vocab_size, std::move(eos_token_ids)) {}

ModelRunnerOutput ModelRunner::Execute(const SchedulerOutput& output) {
  ModelRunnerOutput result;
  result.step_id = output.step_id;
  // The scheduler and runner disagreeing about requests is ember's bug, not the user's.
  const Status applied = states_.Apply(output);
  EMBER_CHECK(applied.ok(), "{}", applied.message());
  if (output.scheduled_reqs.empty()) return result;

  std::vector<const RunnerRequest*> requests;
  requests.reserve(output.scheduled_reqs.size());
  for (RequestIndex req : output.scheduled_reqs) requests.push_back(states_.Find(req));
  const BuiltBatch built = BuildForwardBatch(requests, output.num_scheduled_tokens, kv_->config().block_size);

  // Token ids and positions were validated at admission and bounded by max_model_len, so a
  // failure here is a bug too.
  const Status forward = model_->Forward(built.batch, *kv_, &forward_);
  EMBER_CHECK(forward.ok(), "{}", forward.message());
  ++num_steps_;
  num_tokens_computed_ += built.batch.num_tokens();

  std::vector<SamplerRow> rows;
  std::vector<size_t> row_request;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (built.logits_row_of_request[i] < 0) continue;
    const RunnerRequest& r = *requests[i];
    SamplerRow row;
    row.params = &r.sampling;
    row.prompt_token_ids = r.prompt_token_ids;
    row.output_token_ids = r.output_token_ids;
    row.seed = r.seed;
    row.token_index = static_cast<int64_t>(r.output_token_ids.size());
    rows.push_back(row);
    row_request.push_back(i);
  }
  const int64_t vocab = model_->info().vocab_size;
  std::vector<SampledToken> sampled =
      sampler_.Sample(std::span<float>(forward_.logits.data(), rows.size() * vocab), rows, &ThreadPool::Global());

  result.reqs = output.scheduled_reqs;
  result.sampled_token_ids.resize(requests.size());
  result.logprobs.resize(requests.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    const size_t i = row_request[k];
    RunnerRequest* r = states_.Find(output.scheduled_reqs[i]);
    r->output_token_ids.push_back(sampled[k].token_id);
    result.sampled_token_ids[i].push_back(sampled[k].token_id);
    if (sampled[k].logprobs) result.logprobs[i].push_back(std::move(*sampled[k].logprobs));
  }
  AddPromptLogprobs(requests, built, &result);
  return result;
}

void ModelRunner::AddPromptLogprobs(const std::vector<const RunnerRequest*>& requests, const BuiltBatch& built,
                                    ModelRunnerOutput* result) const {
  const int64_t vocab = model_->info().vocab_size;
  for (size_t i = 0; i < requests.size(); ++i) {
    const BuiltBatch::PromptRows rows = built.prompt_rows_of_request[i];
    if (rows.count == 0) continue;
    const RunnerRequest& r = *requests[i];
    // Row j is position num_computed_tokens + j, which scores the prompt token after it.
    const auto next = std::span<const int32_t>(r.prompt_token_ids).subspan(r.num_computed_tokens + 1, rows.count);
    const std::span<const float> logits(forward_.logits.data() + rows.first_row * vocab, rows.count * vocab);
    result->prompt_logprobs.resize(requests.size());
    result->prompt_logprobs[i] = ComputeRowLogprobs(logits, next, *r.sampling.prompt_logprobs, &ThreadPool::Global());
  }
}

}  // namespace ember
