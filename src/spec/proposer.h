// Speculative decoding's proposer seam (reference/next_capabilities.md §1, serving_engines.md §3.2):
// after a step samples a request's next token, a proposer guesses up to k tokens that follow, and
// the next step has the target model score all of them at once (the runner's verification keeps
// the longest prefix the target agrees with). A proposer only guesses: it never changes what is
// emitted, so a bad guess costs time, never correctness.
//
// Drafts are deterministic (one-hot) to verification unless the proposer says what distribution
// it drew them from (`Draft::probabilities`); either way verification is lossless. `confidences`
// are for scheduling (how many drafted tokens are worth verifying), not for the acceptance rule.
//
// Called from the engine thread only (the runner's step), one batch of requests per call, so a
// proposer that runs a model can batch them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "kv/block_hash.h"

namespace ember::spec {

using RequestId = uint64_t;  // the engine's RequestIndex

struct ProposalInput {
  RequestId req = 0;
  // Every known token of the request: prompt then output, the token just sampled last. Valid for
  // the duration of the call only.
  std::span<const int32_t> tokens;
  int64_t num_prompt_tokens = 0;
  int32_t max_tokens = 0;  // propose at most this many (>= 1)
  // The request's sampling temperature (0: greedy) and resolved seed. A proposer that samples its
  // drafts draws them on its own counter-based stream from the seed (core/counter_random.h), so a
  // seeded request stays reproducible, and returns the distributions (Draft::probabilities).
  float temperature = 0.0f;
  uint64_t seed = 0;
};

struct Draft {
  std::vector<int32_t> tokens;     // at most ProposalInput::max_tokens; empty = no guess
  // Empty, or one value in [0, 1] per token: how likely the proposer thinks the target agrees
  // (a drafter's probability of its token, a lookup's match frequency).
  std::vector<float> confidences;
  // Empty, or [tokens.size(), vocab_size]: the distribution each token was drawn from, for
  // proposers that sample (verification then uses the standard min(1, p/q) rule); empty means the
  // tokens are deterministic guesses, verified one-hot.
  std::vector<float> probabilities;

  void Clear() {
    tokens.clear();
    confidences.clear();
    probabilities.clear();
  }
};

// The target's hidden states for one request's positions verified this step, for proposers that
// draft from them (DSpark, EAGLE-style heads). Rows are batch rows of the step; row i is position
// first_position + i; Row(t, i) is the residual stream leaving target layer layers[t].
struct TargetHiddenStates {
  std::span<const int32_t> layers;   // Proposer::TargetHiddenStateLayers()
  std::span<const float> data;       // [layers.size(), num_batch_rows, hidden_size]
  int64_t num_batch_rows = 0;
  int64_t hidden_size = 0;
  int64_t first_row = 0;             // the request's first verified row in the batch
  int64_t num_rows = 0;              // verified positions: a prefill chunk, or 1 + accepted drafts
  int64_t first_position = 0;
  int64_t num_prompt_tokens = 0;     // positions below it are the prompt's
  // The request's tokens (prompt then output) through at least first_position + num_rows, and
  // its prefix-cache keys (salt, multimodal content): what a proposer that caches per-prefix
  // state keys it by (positions before first_position may have come from the target's prefix
  // cache). Both valid during the call only.
  std::span<const int32_t> tokens;
  kv::BlockKeys block_keys;

  std::span<const float> Row(size_t tap, int64_t i) const {
    return data.subspan(static_cast<size_t>((static_cast<int64_t>(tap) * num_batch_rows + first_row + i) * hidden_size),
                        static_cast<size_t>(hidden_size));
  }
};

class Proposer {
 public:
  virtual ~Proposer() = default;

  // Target layers whose hidden states this proposer reads (ForwardBatch::hidden_state_layers,
  // increasing); empty for proposers that read tokens only.
  virtual std::span<const int32_t> TargetHiddenStateLayers() const { return {}; }

  // Each step, before Propose: the hidden states of every position of `req` that this step
  // verified (prompt chunks included, rejected drafts excluded), in position order across steps.
  // Called only when TargetHiddenStateLayers() is not empty. A preempted request starts again
  // from position 0 after OnReleased.
  virtual void ObserveTargetHiddenStates(RequestId req, const TargetHiddenStates& states) {
    (void)req, (void)states;
  }

  // After the step's ObserveTargetHiddenStates calls, before Propose: a proposer that batches
  // its work over the step's requests (DSpark projects every reported row in one matmul) does it
  // here.
  virtual void FinishObservations() {}

  // The method name of the speculative config ("ngram", "suffix", "draft_model").
  virtual std::string_view name() const = 0;

  // True when Draft::confidences are calibrated probabilities that the target keeps each token
  // (given the ones before), like DSpark's temperature-scaled confidence head: the scheduler then
  // plans verification from them. Otherwise they are only reported, and the scheduler plans from
  // the acceptance it measures (a lookup's match frequency or a drafter's own softmax says little
  // about the target).
  virtual bool confidences_calibrated() const { return false; }

  // drafts[i] answers inputs[i] (the caller sizes `drafts` and clears each entry first).
  virtual void Propose(std::span<const ProposalInput> inputs, std::span<Draft> drafts) = 0;

  // Seconds of the last Propose call spent catching up beyond what a proposer whose state was
  // current would have spent: a drafter model computing a new request's whole prompt, or the
  // tokens of steps it did not draft in. Adaptive speculation plans with the per-step cost
  // without these one-off costs (a plan that charged a prompt's catch-up to every step would
  // conclude drafting never pays, and stop drafting, and so never learn otherwise).
  virtual double last_catch_up_seconds() const { return 0.0; }

  // The proposer's time grows with the draft's length: a drafter model runs one forward per draft
  // position, so a 2-token draft costs about 2/5 of a 5-token one. Adaptive speculation then
  // charges the drafting per position of the longest draft it verifies rather than per step; a
  // lookup or a block drafter (one pass for the whole block) costs about the same at any length.
  virtual bool cost_grows_with_draft_length() const { return false; }

  // Drafting for a request first computes every token of it this proposer has not seen (a drafter
  // model's prefill of a new prompt): adaptive speculation then catches a request up only where
  // speculation is expected to repay it (engine/drafter_catch_up.h).
  virtual bool catches_up() const { return false; }

  // The step that verified `req`'s previous draft kept `num_accepted` of its `num_drafted` tokens.
  virtual void OnVerified(RequestId req, int32_t num_drafted, int32_t num_accepted) {
    (void)req, (void)num_drafted, (void)num_accepted;
  }

  // The request left the runner: finished (`completed`, with its final tokens: prompt then
  // output) or preempted / aborted (`completed` false). A proposer drops its per-request state; a
  // proposer that learns across requests (suffix) may keep the completed output.
  virtual void OnReleased(RequestId req, std::span<const int32_t> tokens, int64_t num_prompt_tokens, bool completed) {
    (void)req, (void)tokens, (void)num_prompt_tokens, (void)completed;
  }
};

}  // namespace ember::spec
