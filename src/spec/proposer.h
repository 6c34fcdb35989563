// Speculative decoding's proposer seam (reference/next_capabilities.md §1, serving_engines.md §3.2):
// after a step samples a request's next token, a proposer guesses up to k tokens that follow, and
// the next step has the target model score all of them at once (the runner's verification keeps
// the longest prefix the target agrees with). A proposer only guesses: it never changes what is
// emitted, so a bad guess costs time, never correctness.
//
// Drafts are treated as deterministic (one-hot) by verification, which makes it lossless for any
// proposer, however it chose its tokens; `confidences` are for scheduling (how many drafted tokens
// are worth verifying), not for the acceptance rule.
//
// Called from the engine thread only (the runner's step), one batch of requests per call, so a
// proposer that runs a model can batch them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace ember::spec {

using RequestId = uint64_t;  // the engine's RequestIndex

struct ProposalInput {
  RequestId req = 0;
  // Every known token of the request: prompt then output, the token just sampled last. Valid for
  // the duration of the call only.
  std::span<const int32_t> tokens;
  int64_t num_prompt_tokens = 0;
  int32_t max_tokens = 0;  // propose at most this many (>= 1)
};

struct Draft {
  std::vector<int32_t> tokens;     // at most ProposalInput::max_tokens; empty = no guess
  // Empty, or one value in [0, 1] per token: how likely the proposer thinks the target agrees
  // (a drafter's probability of its token, a lookup's match frequency).
  std::vector<float> confidences;

  void Clear() {
    tokens.clear();
    confidences.clear();
  }
};

class Proposer {
 public:
  virtual ~Proposer() = default;

  // The method name of the speculative config ("ngram", "suffix", "draft_model").
  virtual std::string_view name() const = 0;

  // drafts[i] answers inputs[i] (the caller sizes `drafts` and clears each entry first).
  virtual void Propose(std::span<const ProposalInput> inputs, std::span<Draft> drafts) = 0;

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
