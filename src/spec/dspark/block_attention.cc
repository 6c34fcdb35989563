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
  return shape.block_size * kernels::RowAttentionScratch(context + shape.block_size);
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
  // Slot t's keys: context positions from `begin` (its window, within what a context that
  // restarted after a gap holds: DSparkContext::CanDraftAt) to the anchor, then the block's first
  // t + 1 slots (causal) or all of them.
  auto keys_of = [&](int64_t t, kernels::KeyValueRows runs[2]) {
    const int64_t begin = std::max(context.begin(), ContextBegin(shape, anchor, t));
    EMBER_CHECK(anchor == context.end() && begin < anchor, "DSpark context [{}, {}) for a block at {}",
                context.begin(), context.end(), anchor);
    const int64_t num_block = shape.causal ? t + 1 : shape.block_size;
    runs[0] = {context.K(layer, begin) + kv_offset, context.V(layer, begin) + kv_offset, anchor - begin, kv_stride};
    runs[1] = {k + kv_offset, v + kv_offset, num_block, kv_stride};
  };
  // Slots with the same keys (every slot of a bidirectional block whose window, if any, reaches
  // past the context's start) are attended in one call, which shares the value loads; a slot's
  // output is the same either way (kernels/row_attention.h).
  for (int64_t t = 0; t < num_queries;) {
    kernels::KeyValueRows runs[2];
    keys_of(t, runs);
    int64_t same = 1;
    while (t + same < num_queries) {
      kernels::KeyValueRows next[2];
      keys_of(t + same, next);
      if (next[0].keys != runs[0].keys || next[0].count != runs[0].count || next[1].count != runs[1].count) break;
      ++same;
    }
    kernels::RowAttention(q + t * q_stride + head * hd, q_stride, same, hd, shape.scale, runs, 2, scores,
                          out + t * q_stride + head * hd, q_stride);
    t += same;
  }
}

}  // namespace ember::spec::dspark
