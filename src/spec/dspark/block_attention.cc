#include "spec/dspark/block_attention.h"

#include <algorithm>

#include "core/check.h"
#include "kernels/row_attention.h"

namespace ember::spec::dspark {

int64_t ContextBegin(const BlockAttentionShape& shape, int64_t anchor, int64_t t) {
  if (shape.window <= 0) return 0;
  return std::max<int64_t>(0, anchor + t - shape.window + 1);
}

int64_t ScoresScratch(const BlockAttentionShape& shape, int64_t context_size) {
  const int64_t context = shape.window > 0 ? std::min(context_size, shape.window) : context_size;
  return kernels::RowAttentionScratch(context + shape.block_size);
}

void AttendBlockHead(const BlockAttentionShape& shape, const DSparkContext& context, int64_t layer, int64_t anchor,
                     int64_t head, const float* q, const float* k, const float* v, float* scores, float* out,
                     int64_t num_queries) {
  EMBER_CHECK(num_queries >= 0 && num_queries <= shape.block_size);
  const int64_t hd = shape.head_dim;
  const int64_t q_stride = shape.num_heads * hd;
  const int64_t kv_stride = shape.num_kv_heads * hd;
  const int64_t kv_head = head / (shape.num_heads / shape.num_kv_heads);
  const int64_t kv_offset = kv_head * hd;
  for (int64_t t = 0; t < num_queries; ++t) {
    const float* qt = q + t * q_stride + head * hd;
    // A context that restarted after a gap holds less than the window names: the block reads what
    // it holds (DSparkContext::CanDraftAt).
    const int64_t begin = std::max(context.begin(), ContextBegin(shape, anchor, t));
    EMBER_CHECK(anchor == context.end() && begin < anchor, "DSpark context [{}, {}) for a block at {}",
                context.begin(), context.end(), anchor);
    const int64_t num_context = anchor - begin;
    const int64_t num_block = shape.causal ? t + 1 : shape.block_size;
    const kernels::KeyValueRows runs[] = {
        {context.K(layer, begin) + kv_offset, context.V(layer, begin) + kv_offset, num_context, kv_stride},
        {k + kv_offset, v + kv_offset, num_block, kv_stride}};
    kernels::RowAttention(qt, hd, shape.scale, runs, 2, scores, out + t * q_stride + head * hd);
  }
}

}  // namespace ember::spec::dspark
