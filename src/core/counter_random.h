// Counter-based randomness for sampling. The uniform number behind a request's n-th output token
// is a pure function of (seed, n): no generator state lives between steps, so a seeded request
// draws the same numbers whatever else is in the batch, in what row order, on how many threads,
// and after preemption and resumption.
#pragma once

#include <cstdint>

namespace ember {

// SplitMix64's output function (Steele, Lea and Flood, 2014): a bijection on 64-bit words whose
// output bits each depend on every input bit.
uint64_t Mix64(uint64_t x);

// Uniform double in [0, 1) with 53 random bits for output token `token_index` of a request seeded
// with `seed`. It is SplitMix64 started from Mix64(seed) and advanced token_index + 1 steps.
double SamplingUniform(uint64_t seed, int64_t token_index);

}  // namespace ember
