// Scheduler -> runner contract for one engine step (reference/codebases.md §9.1). Plain values, no
// pointers into scheduler memory, ragged data as flat arrays: it could cross a process boundary
// unchanged. New requests are sent once; afterwards only the diff.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/multimodal_feature.h"
#include "engine/sampling_params.h"
#include "kv/kv_cache_manager.h"

namespace ember {

using RequestIndex = uint64_t;  // engine-assigned, unique for the engine's lifetime

struct NewRequestData {  // first schedule of a request, or its resumption after preemption
  RequestIndex req = 0;
  std::vector<int32_t> prompt_token_ids;
  std::vector<int32_t> output_token_ids;  // non-empty when resuming a preempted request
  SamplingParams sampling;          // seed always set: the client's, or one the engine drew
  int32_t eos_token_id = -1;         // the request's EOS (ends it unless ignore_eos); -1 for none
  kv::KvBlocks block_ids;            // every block the request holds, per group
  int64_t num_computed_tokens = 0;   // prefix-cache hit length (block aligned)
  uint64_t cache_salt_key = 0;       // prefix-cache isolation (Request::cache_salt_key): a proposer
                                     // that caches per-prefix state keys it by this too
  // The prompt's multimodal inputs: the runner encodes each (or takes it from its encoder cache)
  // and feeds the features at the placeholder positions. In-process only: parallel ranks refuse
  // them (parallel/step_codec.cc).
  std::vector<MultiModalFeature> mm_features;
};

struct CachedRequestData {  // a request the runner already knows: only what changed
  RequestIndex req = 0;
  kv::KvBlocks new_block_ids;        // appended to the runner's block lists, per group
  int64_t num_computed_tokens = 0;
  // Empty, or per group the length to cut the runner's block list to before appending
  // new_block_ids: rejected draft tokens gave their blocks back.
  std::vector<int32_t> num_kept_blocks;
};

struct SchedulerOutput {
  uint64_t step_id = 0;
  std::vector<NewRequestData> new_reqs;
  std::vector<CachedRequestData> cached_reqs;
  // Batch order (= the runner's row order) and tokens to compute per request this step.
  std::vector<RequestIndex> scheduled_reqs;
  std::vector<int32_t> num_scheduled_tokens;
  int64_t total_num_scheduled_tokens = 0;
  // Speculative decoding, parallel to scheduled_reqs (both empty when no request speculates):
  // the draft tokens to verify after the request's last known token (their count is included in
  // num_scheduled_tokens), and how many tokens the runner's proposer should draft for the step
  // after this one (0: none).
  std::vector<std::vector<int32_t>> scheduled_spec_tokens;
  std::vector<int32_t> num_tokens_to_propose;
  std::vector<RequestIndex> finished_reqs;   // the runner drops their state
  std::vector<RequestIndex> preempted_reqs;  // likewise; they come back as new_reqs

  bool empty() const { return scheduled_reqs.empty(); }
};

// Multimodal work of one step (runner/multimodal): inputs encoded, inputs taken from the encoder
// cache, placeholder rows filled, and the towers' time; summed by the scheduler into its stats.
struct MultiModalStepStats {
  int64_t items_encoded = 0;
  int64_t cache_hits = 0;
  int64_t embeddings = 0;
  double encode_seconds = 0.0;
  void Add(const MultiModalStepStats& o) {
    items_encoded += o.items_encoded, cache_hits += o.cache_hits, embeddings += o.embeddings;
    encode_seconds += o.encode_seconds;
  }
};

// Runner -> scheduler: what the step produced (§9.2).
struct TokenLogprobs {
  float logprob = 0.0f;              // of the sampled token
  std::vector<int32_t> top_ids;      // top-k alternatives, best first
  std::vector<float> top_logprobs;
};

struct ModelRunnerOutput {
  uint64_t step_id = 0;                     // the SchedulerOutput it answers
  std::vector<RequestIndex> reqs;           // same order as scheduled_reqs
  // Per request: 0 tokens after a partial prefill, 1 after a decode or the end of a prefill, and
  // after verifying k draft tokens 1 + the number accepted (the accepted drafts, then the
  // target's own next token).
  std::vector<std::vector<int32_t>> sampled_token_ids;
  std::vector<std::vector<TokenLogprobs>> logprobs;  // parallel to sampled_token_ids when requested
  // Per request with prompt_logprobs (else empty): entry j is the logprob of the prompt token at
  // position first + j + 1, where first is the request's num_computed_tokens before this step,
  // for every scheduled position that has a next prompt token.
  std::vector<std::vector<TokenLogprobs>> prompt_logprobs;
  // Per request when a proposer ran (else empty): draft tokens following the sampled ones, for
  // the scheduler to verify in a later step, and the proposer's calibrated confidence in each
  // (empty unless Proposer::confidences_calibrated()).
  std::vector<std::vector<int32_t>> draft_token_ids;
  std::vector<std::vector<float>> draft_confidences;
  double propose_seconds = 0.0;  // the proposer's wall time this step (adaptive speculation's cost)
  // Of which one-off catch-up (spec::Proposer::last_catch_up_seconds): left out of the per-step
  // cost the plan uses, kept in the step time the guard measures.
  double propose_catch_up_seconds = 0.0;
  // The proposer's intake of the target's hidden states this step (Proposer::
  // ObserveTargetHiddenStates: DSpark's context upkeep), paid whether or not anyone drafts.
  double hidden_states_seconds = 0.0;
  double execute_seconds = 0.0;  // the whole Execute, proposer included (EngineCore measures it)
  MultiModalStepStats multimodal;
};

}  // namespace ember
