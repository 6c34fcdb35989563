// Softmax attention of queries over key/value rows held in plain memory (not a paged cache):
// the DSpark drafter's block attention (spec/dspark/block_attention.h), whose keys are a
// request's context rows followed by the block's own rows.
//
// out[0, head_dim) = (sum_j e^(s_j - max s) v_j) / (sum_j e^(s_j - max s)), s_j = scale * q . k_j,
// over the keys of `runs` in order, f32 throughout. Each variant fixes its own operation order
// (dot products in lane-wise partial sums reduced by a fixed tree, the variant's softmax exp),
// which depends on head_dim and the key count only: the output depends on this query and its
// keys and never on what else is attended, so callers stay batch invariant.
#pragma once

#include <cstdint>

namespace ember::kernels {

// `count` key rows and value rows, row j at keys + j * stride and values + j * stride.
struct KeyValueRows {
  const float* keys = nullptr;
  const float* values = nullptr;
  int64_t count = 0;
  int64_t stride = 0;  // floats from one row to the next
};

// `num_queries` queries over the same keys: query i at q + i * q_stride, its output at
// out + i * out_stride. At least one key in all. `scores`: scratch of
// num_queries * RowAttentionScratch(total keys) floats. Each query's output has the bits it has
// when attended alone (num_queries 1): queries in one call only share loads of the values.
void RowAttention(const float* q, int64_t q_stride, int64_t num_queries, int64_t head_dim, float scale,
                  const KeyValueRows* runs, int64_t num_runs, float* scores, float* out, int64_t out_stride);
// Scratch floats for `num_keys` keys: the count rounded up to whole vectors of the widest variant.
// (Out of line: ISA-flagged variant files include this header, and an inline function's copy
// compiled there could be the one the linker keeps for the whole program.)
int64_t RowAttentionScratch(int64_t num_keys);

}  // namespace ember::kernels
