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

class Sampler {
 public:
  // `eos_token_ids`: the ids that end generation (masked during min_tokens unless ignore_eos).
  Sampler(int64_t vocab_size, std::vector<int32_t> eos_token_ids);

  // `logits` is [rows.size(), vocab_size] row-major; penalties and masks are applied in place.
  // Rows run in parallel on `pool` when given.
  std::vector<SampledToken> Sample(std::span<float> logits, std::span<const SamplerRow> rows,
                                   ThreadPool* pool = nullptr) const;

  int64_t vocab_size() const { return vocab_size_; }

 private:
  SampledToken SampleRow(std::span<float> logits, const SamplerRow& row) const;

  int64_t vocab_size_;
  std::vector<int32_t> eos_token_ids_;
};

// Index of the largest value, the lowest index among ties (0 when all are -inf).
int32_t ArgMax(std::span<const float> values);

}  // namespace ember
