// The standard speculative-sampling rule for one drafted token (Leviathan, Kalman and Matias,
// "Fast Inference from Transformers via Speculative Decoding", 2023; Chen et al., "Accelerating
// Large Language Model Decoding with Speculative Sampling", 2023): a token x drawn from the
// drafter's q is kept with probability min(1, p(x) / q(x)); otherwise the emitted token is drawn
// from the residual normalise(max(p - q, 0)). The emitted token is then distributed exactly as p.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runner/sampler/top_k_top_p.h"

namespace ember {

struct VerifyDecision {
  bool accepted = false;
  int32_t token_id = 0;
};

// `target` is p after every transform (FilterDistribution); `q` is the drafter's distribution over
// the whole vocabulary. Both draws are counter-based, from (seed, token_index) on their own
// streams, so a seeded request verifies the same way whatever the batch. `residual` is scratch.
VerifyDecision VerifyAgainstDistribution(const FilteredDistribution& target, int32_t draft_token,
                                         std::span<const float> q, uint64_t seed, int64_t token_index,
                                         std::vector<double>* residual);

}  // namespace ember
