// The sampler: one token per row of logits, per the row's SamplingParams.
//
// Per row, in this order (vLLM's):
//   1. repetition penalty over prompt and output tokens, then presence/frequency over output
//      tokens (penalties.h);
//   2. while fewer than min_tokens tokens are out: EOS (unless ignore_eos) and stop_token_ids
//      masked to -inf;
//   3. greedy (SamplingParams::greedy(): temperature below 1e-5): the largest logit, ties to the
//      lowest id; otherwise temperature, top-k, top-p, min-p (top_k_top_p.h) and an inverse-CDF
//      draw in token-id order with the uniform number SamplingUniform(seed, token_index)
//      (random.h);
//   4. when params.logprobs is set: logprobs of the raw logits (logprobs.h).
// Rows are independent and every random number is a function of the row's (seed, token_index), so
// a row's token does not depend on the other rows, their order or the number of threads.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "engine/sampling_params.h"
#include "engine/scheduler_output.h"

namespace ember {

struct SamplerRow {
  const SamplingParams* params = nullptr;   // validated against this vocabulary
  std::span<const int32_t> prompt_token_ids;
  std::span<const int32_t> output_token_ids;  // generated before this token
  // The request's seed: params.seed when the client gave one, else one the engine drew. Each of
  // the n sequences of a request needs its own.
  uint64_t seed = 0;
  // Position in the output of the token being sampled: output_token_ids.size() in plain decoding,
  // more for the later positions of a speculative verification step.
  int64_t token_index = 0;
};

struct SampledToken {
  int32_t token_id = 0;
  std::optional<TokenLogprobs> logprobs;  // when params.logprobs is set
};

// One drafted token to verify against a row, with the distribution the drafter drew it from.
struct DraftToVerify {
  int32_t token_id = -1;                 // -1: no draft at this row (a bonus row, a plain decode)
  // [vocab_size], the drafter's q (sums to 1); empty for a deterministic draft (one-hot).
  std::span<const float> probabilities;
};

struct VerifiedToken {
  bool accepted = false;
  SampledToken token;  // the draft token when accepted, else a draw from the residual
};

class Sampler {
 public:
  // `eos_token_ids`: the ids that end generation (masked during min_tokens unless ignore_eos).
  Sampler(int64_t vocab_size, std::vector<int32_t> eos_token_ids);

  // `logits` is [rows.size(), vocab_size] row-major; penalties and masks are applied in place.
  // Rows run in parallel on `pool` when given.
  std::vector<SampledToken> Sample(std::span<float> logits, std::span<const SamplerRow> rows,
                                   ThreadPool* pool = nullptr) const;

  // Samples every row and verifies its draft (runner/README.md, "Verifying drafts"). A one-hot
  // draft, or none, is coupled to plain sampling: the row's token is exactly what Sample gives and
  // the draft is accepted when it equals it, so the output is bitwise that of decoding without
  // speculation. A draft with its distribution q uses the standard rule (Leviathan et al. 2023;
  // Chen et al. 2023): p being the row's distribution after every transform, accept x with
  // probability min(1, p(x) / q(x)), otherwise emit a draw from normalise(max(p - q, 0))
  // (runner/sampler/verify.h); greedy rows accept exactly the argmax. Rows are independent: the
  // caller keeps drafts up to the first rejection.
  std::vector<VerifiedToken> Verify(std::span<float> logits, std::span<const SamplerRow> rows,
                                    std::span<const DraftToVerify> drafts, ThreadPool* pool = nullptr) const;

  int64_t vocab_size() const { return vocab_size_; }

 private:
  // Penalties and masks in place; returns the raw logits to compute logprobs from.
  std::span<const float> PrepareRow(std::span<float> logits, const SamplerRow& row) const;
  SampledToken SampleRow(std::span<float> logits, const SamplerRow& row) const;
  VerifiedToken VerifyRow(std::span<float> logits, const SamplerRow& row, const DraftToVerify& draft) const;

  int64_t vocab_size_;
  std::vector<int32_t> eos_token_ids_;
};

// Index of the largest value, the lowest index among ties (0 when all are -inf).
int32_t ArgMax(std::span<const float> values);

}  // namespace ember
