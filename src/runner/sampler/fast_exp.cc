#include "runner/sampler/fast_exp.h"

#include <algorithm>
#include <bit>
#include <limits>

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

}  // namespace

float FastExp(float x) { return ExpInline(x); }

void ExpShifted(std::span<const float> in, float shift, float scale, float* out) {
  const float* src = in.data();
  const int64_t n = static_cast<int64_t>(in.size());
  for (int64_t i = 0; i < n; ++i) out[i] = ExpInline((src[i] - shift) * scale);
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
  constexpr int kLanes = 8;
  float lanes[kLanes];
  for (float& lane : lanes) lane = -std::numeric_limits<float>::infinity();
  const size_t n = values.size();
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] = values[i + j] > lanes[j] ? values[i + j] : lanes[j];
  }
  for (; i < n; ++i) lanes[0] = values[i] > lanes[0] ? values[i] : lanes[0];
  float best = lanes[0];
  for (float lane : lanes) best = lane > best ? lane : best;
  return best;
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
