// The engine's Executor for a model on this machine: applies each SchedulerOutput diff to the
// persistent request states, builds the ForwardBatch, runs the model over the paged KV store and
// samples one token for every request whose known tokens are all computed (verifying its draft
// tokens when it has some), plus the prompt logprobs of requests that ask for them, then asks
// the proposer (speculative decoding) for the next drafts. Orchestration only: batching lives in batch_builder,
// sampling in sampler/, the math in the model (vLLM V2's rule that the runner holds only what is
// common to every model).
#pragma once

#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/executor.h"
#include "model/causal_lm.h"
#include "model/kv_store.h"
#include "runner/batch_builder.h"
#include "runner/constraint_masks.h"
#include "runner/multimodal/embedder.h"
#include "runner/request_state.h"
#include "runner/sampler/sampler.h"
#include "runner/step_forward.h"
#include "spec/proposer.h"

namespace ember {

class ModelRunner : public Executor {
 public:
  // `model` and `kv` outlive the runner; `eos_token_ids` are masked while min_tokens is unmet.
  ModelRunner(CausalLM* model, KvStore* kv, std::vector<int32_t> eos_token_ids);

  ModelRunnerOutput Execute(const SchedulerOutput& output) override;
  // Counted by the model into the runner's forward output since the runner started: real steps
  // only (startup measurements run the model on outputs of their own).
  void ReadExpertLoad(exec::ExpertLoad* out) const override { out->CopyFrom(forward_.expert_load); }
  // Disaggregation: spans of this process's KV store (the whole request's KV lives here).
  Expected<KvExportSpans> ExportKvSpans(std::span<const std::vector<int32_t>> block_tables,
                                        int64_t num_tokens) const override {
    return kv_->ExportSpans(block_tables, num_tokens);
  }
  Expected<KvImportSpans> ImportKvSpans(std::span<const std::vector<int32_t>> block_tables, int64_t num_tokens,
                                        int64_t first_token) override {
    return kv_->ImportSpansFor(block_tables, num_tokens, first_token);
  }

  // A tensor-parallel worker rank's step (src/parallel): rank 0 samples, so a worker first appends
  // the tokens rank 0 sampled in the previous step (`sampled_reqs[i]` got `sampled_token_ids[i]`)
  // to its request states, applies `output` and runs the same forward pass as rank 0 (the
  // collectives inside must match), then drops the logits. Returns how many tokens it computed.
  int64_t ExecuteWorkerStep(const SchedulerOutput& output, std::span<const RequestIndex> sampled_reqs,
                            std::span<const std::vector<int32_t>> sampled_token_ids);

  // A data-parallel rank in a step where it has no tokens and another rank has (DEP): the
  // model's expert-parallel exchanges with 0 tokens (CausalLM::ForwardWithoutTokens), so the
  // other ranks' collectives meet. Call it after Execute of the rank's (token-less) output.
  void ExecuteWithoutTokens();

  // Multimodal inputs: the towers that encode them (null: none; it outlives the runner) and the
  // encoder cache's budget in bytes.
  void set_multimodal_encoder(const MultiModalEncoder* encoder, int64_t cache_bytes);

  // Speculative decoding: drafts for the requests the scheduler asks for (num_tokens_to_propose).
  void set_proposer(std::unique_ptr<spec::Proposer> proposer);
  spec::Proposer* proposer() { return proposer_.get(); }

  // Steps run and tokens computed, for benchmarks and tests.
  int64_t num_steps() const { return num_steps_; }
  int64_t num_tokens_computed() const { return num_tokens_computed_; }

 private:
  // Samples every sampled row; for a request verifying a draft, keeps the drafts verification
  // accepts, up to the first it does not, then that row's token (Sampler::Verify: coupled to plain
  // sampling for one-hot drafts, the standard min(1, p/q) rule for drafts with distributions).
  void SampleAndVerify(const std::vector<RunnerRequest*>& requests, const SchedulerOutput& output,
                       const BuiltBatch& built, ModelRunnerOutput* result);
  // Hands the proposer the target hidden states of every position this step verified.
  void ShareHiddenStates(const std::vector<RunnerRequest*>& requests, const SchedulerOutput& output,
                         const BuiltBatch& built, const ModelRunnerOutput& result);
  // Asks the proposer for the next drafts into result->draft_token_ids.
  void Propose(const std::vector<RunnerRequest*>& requests, const SchedulerOutput& output, ModelRunnerOutput* result);
  // Scores the prompt rows of requests with prompt_logprobs (after the sampled rows in the
  // step's logits) into result->prompt_logprobs.
  void AddPromptLogprobs(const std::vector<const RunnerRequest*>& requests, const BuiltBatch& built,
                         ModelRunnerOutput* result) const;

  CausalLM* model_;
  KvStore* kv_;
  RequestStates states_;
  Sampler sampler_;
  ConstraintMasks masks_;  // structured outputs: per-request grammar matchers and their masks
  ForwardOutput forward_;  // reused across steps
  StepForward step_forward_;  // one batch, or micro-batches through pipeline stages
  std::unique_ptr<spec::Proposer> proposer_;
  std::unique_ptr<MultiModalEmbedder> embedder_;  // always set; without an encoder it takes no media
  std::vector<SamplerRow> rows_;      // reused across steps
  std::vector<DraftToVerify> checks_; // reused across steps
  std::vector<RunnerRequest*> sampled_;  // per scheduled request: itself when it samples this step, else null
  std::vector<int64_t> first_row_;       // per scheduled request: its first sampled row, -1 for none
  // Per request, the distributions its last draft was drawn from (proposers that sample), until
  // the next step verifies it.
  std::unordered_map<RequestIndex, std::vector<float>> draft_distributions_;
  std::vector<spec::Draft> drafts_;   // reused across steps
  int64_t num_steps_ = 0;
  int64_t num_tokens_computed_ = 0;
};

}  // namespace ember
