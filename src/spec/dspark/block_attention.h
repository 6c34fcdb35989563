// The attention of one DSpark block: the block's queries over the request's context K/V (the
// drafter's own, from the target's hidden states) and over the block's own K/V (DeepSpec's
// create_dspark_attention_mask with vLLM's per-layer window; at inference only one block exists,
// so its keys are the context and itself). checkpoint_layout.md "Mask" is the rule:
//
// Block slot t (0-based; position anchor + t) sees context positions j with
// ContextBegin(anchor, t) <= j < anchor (the window: (anchor + t) - j < window) that the context
// holds (one that restarted after a gap starts later: DSparkContext::CanDraftAt), and block slots
// j <= t on a causal layer, every slot otherwise. Each query is attended by kernels::RowAttention
// (the active kernel variant's; f32, softmax with the maximum subtracted) over its context rows
// then the block's rows; slots with the same keys go in one call, which gives each the bits it
// has alone.
#pragma once

#include <cstdint>

#include "spec/dspark/context_store.h"

namespace ember::spec::dspark {

struct BlockAttentionShape {
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 0;
  int64_t window = -1;  // keys per query including itself; -1: the whole context
  bool causal = false;  // within the block
  float scale = 1.0f;   // multiplies q·k (head_dim^-0.5)
};

// The first context position block position `t` at `anchor` may read (sliding window: keys in
// (query position - window, query position]).
int64_t ContextBegin(const BlockAttentionShape& shape, int64_t anchor, int64_t t);
// Floats of AttendBlockHead's `scores` scratch with `context_size` context positions (room for
// every slot's scores at the most keys one query reads, rounded up as kernels::RowAttention wants).
int64_t ScoresScratch(const BlockAttentionShape& shape, int64_t context_size);

// One query head `head` of one block, for its first `num_queries` slots (block_size: all; the
// drafter's last layer asks only for the slots whose logits are wanted): out rows [num_queries,
// num_heads * head_dim] (only this head's columns written); q [num_queries, num_heads * head_dim]
// after norm and RoPE; k, v [block_size, num_kv_heads * head_dim] the block's own, every slot (k
// after norm and RoPE). `scores` holds ScoresScratch floats. The context must end at `anchor` and
// hold at least one position. A slot's output does not depend on num_queries.
void AttendBlockHead(const BlockAttentionShape& shape, const DSparkContext& context, int64_t layer, int64_t anchor,
                     int64_t head, const float* q, const float* k, const float* v, float* scores, float* out,
                     int64_t num_queries);

}  // namespace ember::spec::dspark
