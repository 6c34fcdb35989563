// Structured outputs in the runner: one TokenMatcher per constrained request, its next-token mask
// computed on a helper thread while the forward pass runs (the mask for step t depends only on
// the tokens accepted up to step t - 1, which are known before the forward starts; one thread,
// started with the first constrained request and kept, so a step pays no thread start), applied to
// the request's logits row before sampling, so that penalties, sampling and logprobs all see the
// masked logits (as vLLM applies its grammar bitmask before its sampler), and advanced with each
// emitted token. Requests without a constraint cost nothing: no matcher, no mask, no thread.
#pragma once

#include <cstdint>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/token_constraint.h"
#include "runner/request_state.h"

namespace ember {

class ConstraintMasks {
 public:
  explicit ConstraintMasks(int64_t vocab_size, std::vector<int32_t> eos_token_ids);
  ~ConstraintMasks();

  // Starts computing the masks of `requests` (those with a constraint and a sampled row this
  // step) on a helper thread. Each must sample exactly one row: constrained requests never
  // speculate.
  void Start(std::span<RunnerRequest* const> requests);
  // Waits for Start's masks and writes -inf into the logits of every token a request's grammar
  // does not allow. `row_of_request[i]` is request i's row in `logits` ([rows, vocab]), -1 for none.
  void Apply(std::span<RunnerRequest* const> requests, std::span<const int64_t> row_of_request,
             std::span<float> logits);
  // Advances request `r`'s matcher past the tokens it emitted this step.
  void Accept(const RunnerRequest& r, std::span<const int32_t> tokens);
  // Forgets a finished or preempted request (a resumed one replays its output into a new matcher).
  void Drop(RequestIndex req);

  size_t num_matchers() const { return matchers_.size(); }

 private:
  struct State {
    std::unique_ptr<TokenMatcher> matcher;
    std::vector<uint32_t> bitmask;
    bool masked_this_step = false;
    bool broken = false;  // a token outside the grammar was accepted (see Accept); no more masks
  };
  State* Find(const RunnerRequest& r);
  void Wait();  // until the helper has filled pending_'s masks; rethrows its failure
  void HelperLoop();

  int64_t vocab_size_;
  std::vector<int32_t> eos_token_ids_;
  std::unordered_map<RequestIndex, State> matchers_;
  std::vector<State*> pending_;  // masks being computed by the helper thread

  // The helper thread and its hand-over: Start sets busy_ and wakes it; it fills every mask of
  // pending_, clears busy_ and wakes Wait.
  std::thread helper_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool busy_ = false;
  bool stopping_ = false;
  std::exception_ptr failure_;
};

// Sets logits[t] = -inf for every token t whose bit is clear in `bitmask` (bit t % 32 of word t / 32).
void ApplyTokenBitmask(std::span<const uint32_t> bitmask, std::span<float> logits);

}  // namespace ember
