// Causal grouped-query attention over a position-indexed KV store, with an optional sliding
// window per layer.
#pragma once

#include <cstdint>

namespace ember::kernels {

struct AttentionShape {
  int64_t num_heads = 0;     // query heads
  int64_t num_kv_heads = 0;  // query head h reads KV head h / (num_heads / num_kv_heads)
  int64_t head_dim = 0;
  float scale = 1.0f;        // multiplies q·k before the softmax
  int64_t window = -1;       // keys per query including itself; -1 = unbounded (full attention)
};

// q: [m, num_heads*head_dim] for query positions first_position .. first_position+m-1.
// keys/values: rows indexed by absolute position (row p at p*kv_row_stride floats), holding at
// least positions [first_visible, first_position+m) where first_visible is the first key the
// earliest query may see. out: [m, num_heads*head_dim].
// Query at position i sees keys j with j <= i and, with a window W, j > i - W. Softmax in f32.
// Threaded over (query, head) pairs; results do not depend on the thread count.
void CausalAttention(const float* q, int64_t m, int64_t first_position, const float* keys, const float* values,
                     int64_t kv_row_stride, const AttentionShape& shape, float* out);

}  // namespace ember::kernels
