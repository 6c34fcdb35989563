#include <algorithm>
#include <cmath>

#include "kernels/paged_attention.h"
#include "kernels/ref/ref.h"

namespace ember::kernels::ref {
namespace {

// Element i of row `row` (a (slot, kv head) pair) widened to f32, scaled for fp8.
float Element(const PagedKvView& kv, const void* base, const float* scales, int64_t row, int64_t i) {
  const int64_t index = row * kv.head_dim + i;
  switch (kv.dtype) {
    case DType::kF32: return static_cast<const float*>(base)[index];
    case DType::kF16: return F16ToF32(static_cast<const uint16_t*>(base)[index]);
    case DType::kBF16: return BF16ToF32(static_cast<const uint16_t*>(base)[index]);
    case DType::kF8E4M3: return F8E4M3ToF32(static_cast<const uint8_t*>(base)[index]) * scales[row];
    default: return NAN;
  }
}

}  // namespace

void PagedAttentionTile(const PagedKvView& kv, const PagedTileTask& t) {
  const int64_t d = kv.head_dim;
  auto row_of = [&](int64_t position) {
    const int64_t slot = int64_t{t.block_row[position / kv.block_size]} * kv.block_size + position % kv.block_size;
    return slot * kv.num_kv_heads + t.kv_head;
  };
  for (int64_t i = 0; i < t.num_rows * t.num_heads; ++i) {
    const int64_t row = i / t.num_heads;
    const int64_t position = t.first_position + row;
    const float* q = t.q + row * t.q_row_stride + (i % t.num_heads) * d;
    const int64_t first = std::max(t.key_begin, t.window > 0 ? position - t.window + 1 : int64_t{0});
    const int64_t last = std::min(position, t.key_end - 1);
    float* o = t.o + i * t.stride;
    t.m[i] = -INFINITY;
    t.l[i] = 0.0f;
    if (first > last) continue;
    // Scores and their max, then the weights and the sums, keys in position order.
    float scores[kPagedSegmentKeys];
    float max_score = -INFINITY;
    for (int64_t j = first; j <= last; ++j) {
      const int64_t r = row_of(j);
      float dot = 0.0f;
      for (int64_t e = 0; e < d; ++e) dot += q[e] * Element(kv, kv.keys, kv.key_scales, r, e);
      scores[j - first] = dot * t.scale;
      max_score = std::max(max_score, scores[j - first]);
    }
    float total = 0.0f;
    std::fill(o, o + d, 0.0f);
    for (int64_t j = first; j <= last; ++j) {
      const float p = std::exp(scores[j - first] - max_score);
      total += p;
      const int64_t r = row_of(j);
      for (int64_t e = 0; e < d; ++e) o[e] += p * Element(kv, kv.values, kv.value_scales, r, e);
    }
    t.m[i] = max_score;
    t.l[i] = total;
  }
}

void SoftmaxExp(const float* x, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = std::exp(x[i]);
}

}  // namespace ember::kernels::ref
