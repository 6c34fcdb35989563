// Whole-row passes over logits: exp, max and sums. std::exp is a scalar libm call per element;
// rows of 262,144 logits need loops the compiler vectorizes (SSE2 everywhere, AVX2 for the exp
// loop where the host has it, with identical results). exp uses range reduction
// e^x = 2^n * e^r, |r| <= ln2 / 2, and the degree-7 Taylor polynomial of e^r (truncation error
// below 6e-9 relative): within 2 float ulps of exp. Inputs below -87.3, -inf included, give
// exactly 0, so a masked token weighs nothing.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

namespace ember {

// An integer whose signed order is the order of the (non-NaN) floats, except that -0 < +0:
// flipping the magnitude bits of negative floats. Integer compares vectorize where float ones do
// not (GCC keeps float compares scalar under the default -ftrapping-math).
inline int32_t FloatOrderKey(float x) {
  const int32_t bits = std::bit_cast<int32_t>(x);
  return bits ^ ((bits >> 31) & 0x7fffffff);
}

// The largest FloatOrderKey of values[0, n): inline so that scans with a fixed chunk length get a
// fully vectorized loop.
inline int32_t MaxOrderKey(const float* values, size_t n) {
  int32_t best = FloatOrderKey(-__builtin_inff());
  for (size_t i = 0; i < n; ++i) {
    const int32_t k = FloatOrderKey(values[i]);
    best = k > best ? k : best;
  }
  return best;
}

// exp(x) for x <= 88 (larger inputs are a caller bug; logits are shifted by their maximum).
float FastExp(float x);

// out[i] = FastExp((in[i] - shift) * scale); `out` may alias `in`.
void ExpShifted(std::span<const float> in, float shift, float scale, float* out);

// sum_i FastExp((in[i] - shift) * scale) in double, without storing the exps.
double SumExpShifted(std::span<const float> in, float shift, float scale);

// The largest value (-inf for none). NaN logits are a model bug: a NaN may be returned.
float MaxValue(std::span<const float> values);

// Sum of `n` floats in double, in a fixed order of 8 interleaved partial sums (so it is
// vectorized and the same bits every time).
double LaneSum(const float* values, int64_t n);

}  // namespace ember
