#include "spec/dspark/block_attention.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace ember::spec::dspark {
namespace {

// Eight interleaved partial sums, then a fixed tree: the compiler keeps them in a vector register
// and the additions no longer wait on each other (a single running sum made the block attention
// a third of the drafter's time). The order depends on n only, so results stay deterministic
// and independent of the batch.
float Dot(const float* a, const float* b, int64_t n) {
  constexpr int kWays = 8;
  float part[kWays] = {};
  int64_t i = 0;
  for (; i + kWays <= n; i += kWays) {
    for (int w = 0; w < kWays; ++w) part[w] += a[i + w] * b[i + w];
  }
  for (int w = 0; i < n; ++i, ++w) part[w] += a[i] * b[i];
  return ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
}

}  // namespace

int64_t ContextBegin(const BlockAttentionShape& shape, int64_t anchor, int64_t t) {
  if (shape.window <= 0) return 0;
  return std::max<int64_t>(0, anchor + t - shape.window + 1);
}

int64_t MaxKeys(const BlockAttentionShape& shape, int64_t context_size) {
  const int64_t context = shape.window > 0 ? std::min(context_size, shape.window) : context_size;
  return context + shape.block_size;
}

void AttendBlockHead(const BlockAttentionShape& shape, const DSparkContext& context, int64_t layer, int64_t anchor,
                     int64_t head, const float* q, const float* k, const float* v, float* scores, float* out) {
  const int64_t hd = shape.head_dim;
  const int64_t q_stride = shape.num_heads * hd;
  const int64_t kv_stride = shape.num_kv_heads * hd;
  const int64_t kv_head = head / (shape.num_heads / shape.num_kv_heads);
  const int64_t kv_offset = kv_head * hd;
  for (int64_t t = 0; t < shape.block_size; ++t) {
    const float* qt = q + t * q_stride + head * hd;
    const int64_t begin = ContextBegin(shape, anchor, t);
    EMBER_CHECK(begin >= context.begin() && anchor == context.end(), "DSpark context [{}, {}) lacks [{}, {})",
                context.begin(), context.end(), begin, anchor);
    const int64_t num_context = anchor - begin;
    const int64_t num_block = shape.causal ? t + 1 : shape.block_size;
    const int64_t num_keys = num_context + num_block;
    float max_score = -INFINITY;
    for (int64_t j = 0; j < num_context; ++j) {
      scores[j] = Dot(qt, context.K(layer, begin + j) + kv_offset, hd) * shape.scale;
      max_score = std::max(max_score, scores[j]);
    }
    for (int64_t j = 0; j < num_block; ++j) {
      scores[num_context + j] = Dot(qt, k + j * kv_stride + kv_offset, hd) * shape.scale;
      max_score = std::max(max_score, scores[num_context + j]);
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < num_keys; ++j) {
      scores[j] = std::exp(scores[j] - max_score);
      sum += scores[j];
    }
    const float inv = 1.0f / sum;
    float* ot = out + t * q_stride + head * hd;
    std::fill_n(ot, hd, 0.0f);
    for (int64_t j = 0; j < num_keys; ++j) {
      const float* vj = j < num_context ? context.V(layer, begin + j) + kv_offset
                                        : v + (j - num_context) * kv_stride + kv_offset;
      const float p = scores[j] * inv;
      for (int64_t d = 0; d < hd; ++d) ot[d] += p * vj[d];
    }
  }
}

}  // namespace ember::spec::dspark
