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

void PagedAttentionHead(const PagedKvView& kv, const PagedHeadTask& t) {
  const int64_t d = kv.head_dim;
  const int64_t count = t.last_key - t.first_key + 1;
  auto row_of = [&](int64_t position) {
    const int64_t slot = int64_t{t.block_row[position / kv.block_size]} * kv.block_size + position % kv.block_size;
    return slot * kv.num_kv_heads + t.kv_head;
  };
  float max_score = -INFINITY;
  for (int64_t j = 0; j < count; ++j) {
    const int64_t row = row_of(t.first_key + j);
    float dot = 0.0f;
    for (int64_t i = 0; i < d; ++i) dot += t.q[i] * Element(kv, kv.keys, kv.key_scales, row, i);
    t.scores[j] = dot * t.scale;
    max_score = std::max(max_score, t.scores[j]);
  }
  float total = 0.0f;
  for (int64_t j = 0; j < count; ++j) {
    t.scores[j] = std::exp(t.scores[j] - max_score);
    total += t.scores[j];
  }
  const float inv_total = 1.0f / total;
  std::fill(t.out, t.out + d, 0.0f);
  for (int64_t j = 0; j < count; ++j) {
    const int64_t row = row_of(t.first_key + j);
    const float p = t.scores[j] * inv_total;
    for (int64_t i = 0; i < d; ++i) t.out[i] += p * Element(kv, kv.values, kv.value_scales, row, i);
  }
}

}  // namespace ember::kernels::ref
