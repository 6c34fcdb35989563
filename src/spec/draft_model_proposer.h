// vLLM's `draft_model` speculative method: a smaller ember CausalLM with the target's vocabulary
// drafts each request's next tokens greedily.
//
// The drafter keeps its own paged KV cache (its own KvStore and DraftKvBlocks) and, per request,
// the tokens whose K/V it holds. Between two calls a request grows by the accepted drafts and the
// target's own token, so the drafter's cache usually holds a prefix of the new tokens plus some
// rejected drafts: Propose keeps the longest common prefix, rewinds to it (later slots are simply
// overwritten) and computes the rest, then drafts. Per call and per batch of requests:
//   1. one forward over every request's catch-up tokens (its first call: the whole prompt and
//      output, i.e. the drafter's prefill; chunked over several forwards when it exceeds the
//      step limit), logits at each request's last token: argmax is draft token 1;
//   2. max_tokens - 1 single-token forwards over the requests that want more, each drafting the
//      next token.
// A request's drafts do not depend on what shares its batch or how its catch-up was chunked
// (the model's batch invariance), nor on what the drafter drafted before (rollback).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "kv/spec.h"
#include "model/causal_lm.h"
#include "model/kv_store.h"
#include "spec/draft_kv_blocks.h"
#include "spec/proposer.h"

namespace ember::spec {

struct DraftModelProposerOptions {
  // The most tokens drafted per request per call (ProposalInput::max_tokens is capped to it).
  int32_t num_speculative_tokens = 4;
  // Requests per drafter forward; a Propose call with more requests drafts them in several
  // batches. Sizes the workspace's logit rows.
  int64_t max_num_seqs = 16;
  // Longest request the drafter serves (prompt + output + drafts); 0: the drafter's context
  // length. Longer requests get no draft. Must not exceed the drafter's context length.
  int64_t max_model_len = 0;
  // Tokens per drafter forward (its workspace's step limit); a longer catch-up (a long new
  // prompt) is chunked over several forwards.
  int64_t max_num_batched_tokens = 2048;
  int64_t block_size = 16;
  // nullopt: the drafter's DefaultKvDtype().
  std::optional<kv::KvDtype> kv_dtype;
  // Bytes of the drafter's KV cache; 0: room for max_num_seqs requests of max_model_len, but no
  // more than kDefaultDraftKvBudget (or half the free host memory). Requests that find the pool
  // empty get no draft that call.
  int64_t kv_cache_memory_bytes = 0;
};

inline constexpr int64_t kDefaultDraftKvBudget = int64_t{1} << 30;

class DraftModelProposer final : public Proposer {
 public:
  std::string_view name() const override { return "draft_model"; }
  void Propose(std::span<const ProposalInput> inputs, std::span<Draft> drafts) override;
  void OnReleased(RequestId req, std::span<const int32_t> tokens, int64_t num_prompt_tokens, bool completed) override;
  double last_catch_up_seconds() const override { return catch_up_excess_seconds_; }
  bool catches_up() const override { return true; }
  bool cost_grows_with_draft_length() const override { return true; }

  const CausalLM& drafter() const { return *drafter_; }
  const kv::KvCacheConfig& kv_config() const { return kv_.config(); }
  int64_t num_free_blocks() const { return blocks_.num_free_blocks(); }
  // Requests whose K/V the drafter holds.
  int64_t num_tracked_requests() const { return static_cast<int64_t>(states_.size()); }

 private:
  friend Expected<std::unique_ptr<DraftModelProposer>> CreateDraftModelProposer(
      std::unique_ptr<CausalLM>, const ModelInfo&, const DraftModelProposerOptions&);

  struct RequestState {
    std::vector<int32_t> computed;  // the tokens whose K/V the drafter's cache holds, by position
    DraftBlockTables blocks;
  };
  // One request of the batch Propose is working on.
  struct Active {
    size_t input = 0;  // index into this batch's inputs / drafts
    RequestId req = 0;
    RequestState* state = nullptr;
    std::span<const int32_t> tokens;
    int32_t num_to_draft = 0;
    int32_t logits_row = -1;  // this forward's logits row of the request, -1: none
  };
  // A slice of one request's tokens scheduled into the forward being built.
  struct Scheduled {
    Active* active;
    std::span<const int32_t> tokens;  // at positions active->state->computed.size() onwards
    bool wants_logits;
  };

  DraftModelProposer(std::unique_ptr<CausalLM> drafter, KvStore kv, const DraftModelProposerOptions& options);

  // Drafts for at most max_num_seqs inputs.
  void ProposeBatch(std::span<const ProposalInput> inputs, std::span<Draft> drafts);
  // Rewinds the request to what it shares with `tokens` and gives it blocks for the whole call;
  // false when it gets no draft this call.
  bool Prepare(const ProposalInput& input, int32_t num_to_draft, RequestState& state);
  // Builds batch_ from `scheduled` and runs the drafter; on success appends each slice to its
  // request's computed tokens and sets logits rows.
  Status RunForward(std::span<Scheduled> scheduled);
  void AppendDraftToken(Active& active, Draft& draft) const;
  void Drop(RequestId req);

  std::unique_ptr<CausalLM> drafter_;
  KvStore kv_;
  DraftKvBlocks blocks_;
  DraftModelProposerOptions options_;
  std::unordered_map<RequestId, RequestState> states_;
  // The last Propose call's catch-up time beyond one forward (last_catch_up_seconds), and the
  // decayed mean seconds of a drafting forward, which prices that one forward when a call drafts
  // a single token.
  double catch_up_excess_seconds_ = 0.0;
  double draft_forward_seconds_ = 0.0;
  // Reused across forwards so a steady-state call allocates little.
  ForwardBatch batch_;
  ForwardOutput output_;
  std::vector<Active> actives_;
  std::vector<Scheduled> scheduled_;
};

// Checks that `drafter` can draft for a target described by `target` (same vocab_size) and that
// the options fit it, plans and allocates its KV cache and reserves its workspace for the
// largest step. Errors name the mismatch and what to change.
Expected<std::unique_ptr<DraftModelProposer>> CreateDraftModelProposer(std::unique_ptr<CausalLM> drafter,
                                                                       const ModelInfo& target,
                                                                       const DraftModelProposerOptions& options);

// Ties to the lowest id, as the runner's sampler (runner/sampler/sampler.h ArgMax); all-NaN: 0.
int32_t GreedyToken(std::span<const float> logits);
// softmax(logits)[token], computed stably (max subtracted).
float SoftmaxProbability(std::span<const float> logits, int32_t token);

}  // namespace ember::spec
