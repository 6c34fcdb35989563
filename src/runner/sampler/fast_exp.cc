#include "runner/sampler/fast_exp.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "core/cpu_features.h"

namespace ember {

namespace {

// Branch-free, with the range test on the bit pattern: GCC will not vectorize a float compare
// under the default -ftrapping-math, but does an integer one.
inline float ExpInline(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  // ln 2 split in a part with few mantissa bits (n * kLn2Hi is exact) and the remainder.
  constexpr float kLn2Hi = 0.693145751953125f;
  constexpr float kLn2Lo = 1.428606765330187045e-6f;
  // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer without a libm call.
  constexpr float kRound = 12582912.0f;
  constexpr float kLowest = -87.3f;  // exp(kLowest) is still a normal float
  constexpr uint32_t kLowestBits = std::bit_cast<uint32_t>(kLowest);
  // Negative floats order like their bit patterns as unsigned integers, and every non-negative
  // one is below them: `below` is all ones for x < kLowest, -inf included.
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t below = -static_cast<uint32_t>(bits > kLowestBits);
  const float clamped = std::bit_cast<float>((bits & ~below) | (kLowestBits & below));
  const float n = (clamped * kLog2e + kRound) - kRound;
  const float r = (clamped - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float two_n = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(p * two_n) & ~below);
}

// The same loop with 8 floats per instruction on AVX2 hosts. AVX2 without FMA: every multiply
// and add rounds as in the baseline loop, so both give the same bits and a seeded request draws
// the same tokens on any host.
__attribute__((target("avx2"))) void ExpShiftedAvx2(const float* in, int64_t n, float shift, float scale,
                                                    float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = ExpInline((in[i] - shift) * scale);
}

void ExpShiftedBaseline(const float* in, int64_t n, float shift, float scale, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = ExpInline((in[i] - shift) * scale);
}

}  // namespace

float FastExp(float x) { return ExpInline(x); }

void ExpShifted(std::span<const float> in, float shift, float scale, float* out) {
  static const bool avx2 = HostCpuFeatures().avx2;
  const int64_t n = static_cast<int64_t>(in.size());
  if (avx2) {
    ExpShiftedAvx2(in.data(), n, shift, scale, out);
  } else {
    ExpShiftedBaseline(in.data(), n, shift, scale, out);
  }
}

double SumExpShifted(std::span<const float> in, float shift, float scale) {
  constexpr size_t kChunk = 1024;
  float chunk[kChunk];
  double total = 0.0;
  for (size_t begin = 0; begin < in.size(); begin += kChunk) {
    const size_t n = std::min(kChunk, in.size() - begin);
    ExpShifted(in.subspan(begin, n), shift, scale, chunk);
    total += LaneSum(chunk, static_cast<int64_t>(n));
  }
  return total;
}

float MaxValue(std::span<const float> values) {
  const int32_t best = MaxOrderKey(values.data(), values.size());
  return std::bit_cast<float>(best ^ ((best >> 31) & 0x7fffffff));  // FloatOrderKey is an involution
}

double LaneSum(const float* values, int64_t n) {
  constexpr int kLanes = 8;
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] += values[i + j];
  }
  for (int j = 0; i < n; ++i, ++j) lanes[j] += values[i];
  double total = 0.0;
  for (double lane : lanes) total += lane;
  return total;
}

}  // namespace ember
