#include "runner/model_runner.h"

#include <chrono>

#include "core/check.h"
#include "core/logging.h"
#include "runner/batch_builder.h"
#include "runner/sampler/logprobs.h"

namespace ember {

ModelRunner::ModelRunner(CausalLM* model, KvStore* kv, std::vector<int32_t> eos_token_ids)
    : model_(model),
      kv_(kv),
      states_(static_cast<int>(kv->config().groups.size())),
      sampler_(model->info().vocab_size, eos_token_ids),
      masks_(model->info().vocab_size, eos_token_ids),
      embedder_(std::make_unique<MultiModalEmbedder>(nullptr, 0)) {}

void ModelRunner::set_proposer(std::unique_ptr<spec::Proposer> proposer) { proposer_ = std::move(proposer); }

void ModelRunner::set_multimodal_encoder(const MultiModalEncoder* encoder, int64_t cache_bytes) {
  embedder_ = std::make_unique<MultiModalEmbedder>(encoder, cache_bytes);
}

ModelRunnerOutput ModelRunner::Execute(const SchedulerOutput& output) {
  ModelRunnerOutput result;
  result.step_id = output.step_id;
  states_.ForEachDropped(output, [&](const RunnerRequest& r, bool finished) {
    masks_.Drop(r.req);
    if (!proposer_) return;
    proposer_->OnReleased(r.req, r.tokens, r.num_prompt_tokens, finished);
    draft_distributions_.erase(r.req);
  });
  // The scheduler and runner disagreeing about requests is ember's bug, not the user's.
  const Status applied = states_.Apply(output);
  EMBER_CHECK(applied.ok(), "{}", applied.message());
  if (output.scheduled_reqs.empty()) return result;

  std::vector<RunnerRequest*> requests;
  requests.reserve(output.scheduled_reqs.size());
  for (RequestIndex req : output.scheduled_reqs) requests.push_back(states_.Find(req));
  const std::vector<const RunnerRequest*> inputs(requests.begin(), requests.end());
  BuiltBatch built =
      BuildForwardBatch(inputs, output.num_scheduled_tokens, output.scheduled_spec_tokens, kv_->config().block_size);
  const std::span<const int32_t> tap_layers = proposer_ ? proposer_->TargetHiddenStateLayers() : std::span<const int32_t>();
  built.batch.hidden_state_layers.assign(tap_layers.begin(), tap_layers.end());
  // The frontend preprocessed and sized every input with the encoder's own rules (and sends none
  // to a model without towers), so a failure here is ember's bug, as a bad token id would be.
  const Status embedded = embedder_->AddEmbeddings(inputs, built.batch, result.multimodal);
  EMBER_CHECK(embedded.ok(), "{}", embedded.message());

  // Grammar masks of constrained requests are computed while the forward pass runs.
  sampled_.assign(requests.size(), nullptr);
  for (size_t i = 0; i < requests.size(); ++i) {
    if (built.logits_row_of_request[i] >= 0) sampled_[i] = requests[i];
  }
  masks_.Start(sampled_);

  // Token ids and positions were validated at admission and bounded by max_model_len, so a
  // failure here is a bug too.
  const Expected<int> forward = step_forward_.Run(*model_, *kv_, inputs, output, built, &forward_);
  EMBER_CHECK(forward.ok(), "{}", forward.status().message());
  ++num_steps_;
  num_tokens_computed_ += built.batch.num_tokens();

  result.reqs = output.scheduled_reqs;
  result.sampled_token_ids.resize(requests.size());
  result.logprobs.resize(requests.size());
  SampleAndVerify(requests, output, built, &result);
  AddPromptLogprobs(inputs, built, &result);
  if (!tap_layers.empty()) {
    const auto share_start = std::chrono::steady_clock::now();
    ShareHiddenStates(requests, output, built, result);
    result.hidden_states_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - share_start).count();
  }
  if (proposer_ && !output.num_tokens_to_propose.empty()) Propose(requests, output, &result);
  return result;
}

int64_t ModelRunner::ExecuteWorkerStep(const SchedulerOutput& output, std::span<const RequestIndex> sampled_reqs,
                                       std::span<const std::vector<int32_t>> sampled_token_ids) {
  EMBER_CHECK(sampled_reqs.size() == sampled_token_ids.size(), "{} requests for {} sampled token lists",
              sampled_reqs.size(), sampled_token_ids.size());
  for (size_t i = 0; i < sampled_reqs.size(); ++i) {
    // A request rank 0 sampled for is one this rank computed the step before; it may have finished
    // since (then this step's output drops it right after).
    RunnerRequest* r = states_.Find(sampled_reqs[i]);
    EMBER_CHECK(r != nullptr, "worker: rank 0 sampled for request {}, which this rank does not hold", sampled_reqs[i]);
    r->tokens.insert(r->tokens.end(), sampled_token_ids[i].begin(), sampled_token_ids[i].end());
  }
  const Status applied = states_.Apply(output);
  EMBER_CHECK(applied.ok(), "{}", applied.message());
  if (output.scheduled_reqs.empty()) return 0;
  std::vector<const RunnerRequest*> inputs;
  inputs.reserve(output.scheduled_reqs.size());
  for (RequestIndex req : output.scheduled_reqs) inputs.push_back(states_.Find(req));
  const BuiltBatch built =
      BuildForwardBatch(inputs, output.num_scheduled_tokens, output.scheduled_spec_tokens, kv_->config().block_size);
  const Expected<int> forward = step_forward_.Run(*model_, *kv_, inputs, output, built, &forward_);
  EMBER_CHECK(forward.ok(), "{}", forward.status().message());
  ++num_steps_;
  num_tokens_computed_ += built.batch.num_tokens();
  return built.batch.num_tokens();
}

void ModelRunner::ExecuteWithoutTokens() {
  const Status forward = model_->ForwardWithoutTokens(&forward_);
  EMBER_CHECK(forward.ok(), "{}", forward.message());
}

void ModelRunner::SampleAndVerify(const std::vector<RunnerRequest*>& requests, const SchedulerOutput& output,
                                  const BuiltBatch& built, ModelRunnerOutput* result) {
  // A request verifying a draft gets one row per draft token plus one; row j samples the token
  // after the known tokens and drafts 0..j-1, exactly as plain decoding would sample it if those
  // drafts had been emitted. So the drafts are appended to the request's tokens for the rows'
  // history and cut back after sampling.
  std::vector<SamplerRow>& rows = rows_;
  std::vector<DraftToVerify>& checks = checks_;
  rows.clear();
  checks.clear();
  static const std::vector<int32_t> kNoDraft;
  const int64_t vocab = model_->info().vocab_size;
  first_row_.assign(requests.size(), -1);
  for (size_t i = 0; i < requests.size(); ++i) {
    if (built.logits_row_of_request[i] < 0) continue;
    RunnerRequest& r = *requests[i];
    const std::vector<int32_t>& draft = output.scheduled_spec_tokens.empty() ? kNoDraft : output.scheduled_spec_tokens[i];
    // Constrained requests are never proposed for (Propose), so they never verify drafts.
    EMBER_CHECK(r.sampling.constraint == nullptr || draft.empty(), "request {} is constrained and has a draft", r.req);
    first_row_[i] = static_cast<int64_t>(rows.size());
    // The distributions the proposer drew these drafts from, if it said (kept from its Propose).
    const auto q = draft_distributions_.find(r.req);
    const bool has_q = !draft.empty() && q != draft_distributions_.end() &&
                       static_cast<int64_t>(q->second.size()) >= static_cast<int64_t>(draft.size()) * vocab;
    const int64_t num_output = r.num_output_tokens();
    r.tokens.insert(r.tokens.end(), draft.begin(), draft.end());
    for (size_t j = 0; j <= draft.size(); ++j) {
      SamplerRow row;
      row.params = &r.sampling;
      row.prompt_token_ids = r.prompt_token_ids();
      row.output_token_ids = std::span<const int32_t>(r.tokens).subspan(r.num_prompt_tokens, num_output + j);
      row.seed = r.seed;
      row.token_index = num_output + static_cast<int64_t>(j);
      rows.push_back(row);
      DraftToVerify check;
      if (j < draft.size()) {
        check.token_id = draft[j];
        if (has_q) check.probabilities = std::span<const float>(q->second).subspan(j * vocab, vocab);
      }
      checks.push_back(check);
    }
  }
  const std::span<float> logits(forward_.logits.data(), rows.size() * vocab);
  masks_.Apply(requests, first_row_, logits);
  std::vector<VerifiedToken> verified = sampler_.Verify(logits, rows, checks, &ThreadPool::Global());

  size_t next_row = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (built.logits_row_of_request[i] < 0) continue;
    RunnerRequest& r = *requests[i];
    const std::vector<int32_t>& draft = output.scheduled_spec_tokens.empty() ? kNoDraft : output.scheduled_spec_tokens[i];
    r.tokens.resize(r.tokens.size() - draft.size());
    // The accepted drafts, then the first rejected row's token (or the bonus row's).
    size_t accepted = 0;
    while (accepted < draft.size() && verified[next_row + accepted].accepted) ++accepted;
    for (size_t j = 0; j <= accepted; ++j) {
      SampledToken& token = verified[next_row + j].token;
      r.tokens.push_back(token.token_id);
      result->sampled_token_ids[i].push_back(token.token_id);
      if (token.logprobs) result->logprobs[i].push_back(std::move(*token.logprobs));
    }
    if (r.sampling.constraint != nullptr) masks_.Accept(r, result->sampled_token_ids[i]);
    if (!draft.empty() && proposer_) {
      proposer_->OnVerified(r.req, static_cast<int32_t>(draft.size()), static_cast<int32_t>(accepted));
    }
    draft_distributions_.erase(r.req);  // used, or the request did not speculate this step
    next_row += draft.size() + 1;
  }
}

void ModelRunner::ShareHiddenStates(const std::vector<RunnerRequest*>& requests, const SchedulerOutput& output,
                                    const BuiltBatch& built, const ModelRunnerOutput& result) {
  spec::TargetHiddenStates states;
  states.layers = proposer_->TargetHiddenStateLayers();
  states.data = forward_.hidden_states;
  states.num_batch_rows = built.batch.num_tokens();
  states.hidden_size = model_->info().hidden_size;
  for (size_t i = 0; i < requests.size(); ++i) {
    const size_t drafted = output.scheduled_spec_tokens.empty() ? 0 : output.scheduled_spec_tokens[i].size();
    const size_t emitted = result.sampled_token_ids[i].size();
    // The scheduled rows minus the rejected drafts: every emitted token but the last was a row.
    states.num_rows = output.num_scheduled_tokens[i] - static_cast<int64_t>(drafted) +
                      (emitted > 0 ? static_cast<int64_t>(emitted) - 1 : 0);
    states.first_row = built.batch.query_start_loc[i];
    // The diff's num_computed_tokens: where this step's rows start.
    states.first_position = requests[i]->num_computed_tokens;
    states.num_prompt_tokens = requests[i]->num_prompt_tokens;
    states.tokens = requests[i]->tokens;
    states.block_keys = kv::BlockKeys(requests[i]->cache_salt_key, requests[i]->block_content);
    proposer_->ObserveTargetHiddenStates(requests[i]->req, states);
  }
  proposer_->FinishObservations();
}

void ModelRunner::Propose(const std::vector<RunnerRequest*>& requests, const SchedulerOutput& output,
                          ModelRunnerOutput* result) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<spec::ProposalInput> inputs;
  std::vector<size_t> input_request;
  for (size_t i = 0; i < requests.size(); ++i) {
    const int32_t want = output.num_tokens_to_propose[i];
    if (want <= 0 || result->sampled_token_ids[i].empty()) continue;
    const RunnerRequest& r = *requests[i];
    // Structured outputs do not speculate: a draft would have to be checked against the grammar
    // token by token and the matcher rolled back on rejection; plain decoding keeps them exact.
    if (r.sampling.constraint != nullptr) continue;
    inputs.push_back({.req = r.req,
                      .tokens = r.tokens,
                      .num_prompt_tokens = r.num_prompt_tokens,
                      .max_tokens = want,
                      .temperature = r.sampling.temperature,
                      .seed = r.seed});
    input_request.push_back(i);
  }
  if (inputs.empty()) return;
  drafts_.resize(inputs.size());
  for (spec::Draft& d : drafts_) d.Clear();
  proposer_->Propose(inputs, std::span<spec::Draft>(drafts_.data(), inputs.size()));
  result->draft_token_ids.resize(requests.size());
  result->draft_confidences.resize(requests.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    spec::Draft& d = drafts_[k];
    EMBER_CHECK(static_cast<int32_t>(d.tokens.size()) <= inputs[k].max_tokens, "proposer {} drafted {} of {} tokens",
                proposer_->name(), d.tokens.size(), inputs[k].max_tokens);
    result->draft_token_ids[input_request[k]] = d.tokens;
    if (proposer_->confidences_calibrated()) result->draft_confidences[input_request[k]] = d.confidences;
    if (!d.probabilities.empty()) {
      const int64_t vocab = model_->info().vocab_size;
      EMBER_CHECK(static_cast<int64_t>(d.probabilities.size()) == static_cast<int64_t>(d.tokens.size()) * vocab,
                  "proposer {} gave {} probabilities for {} tokens of a {}-token vocabulary", proposer_->name(),
                  d.probabilities.size(), d.tokens.size(), vocab);
      draft_distributions_[inputs[k].req] = std::move(d.probabilities);
    }
  }
  result->propose_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result->propose_catch_up_seconds = std::min(result->propose_seconds, proposer_->last_catch_up_seconds());
}

void ModelRunner::AddPromptLogprobs(const std::vector<const RunnerRequest*>& requests, const BuiltBatch& built,
                                    ModelRunnerOutput* result) const {
  const int64_t vocab = model_->info().vocab_size;
  for (size_t i = 0; i < requests.size(); ++i) {
    const BuiltBatch::PromptRows rows = built.prompt_rows_of_request[i];
    if (rows.count == 0) continue;
    const RunnerRequest& r = *requests[i];
    // Row j is position num_computed_tokens + j, which scores the prompt token after it.
    const auto next = r.prompt_token_ids().subspan(r.num_computed_tokens + 1, rows.count);
    const std::span<const float> logits(forward_.logits.data() + rows.first_row * vocab, rows.count * vocab);
    result->prompt_logprobs.resize(requests.size());
    result->prompt_logprobs[i] = ComputeRowLogprobs(logits, next, *r.sampling.prompt_logprobs, &ThreadPool::Global());
  }
}

}  // namespace ember
