#include "kernels/row_attention.h"

#include "kernels/matmul.h"

namespace ember::kernels {

int64_t RowAttentionScratch(int64_t num_keys) { return (num_keys + 15) / 16 * 16; }

void RowAttention(const float* q, int64_t q_stride, int64_t num_queries, int64_t head_dim, float scale,
                  const KeyValueRows* runs, int64_t num_runs, float* scores, float* out, int64_t out_stride) {
  ActiveVariant().row_attention(q, q_stride, num_queries, head_dim, scale, runs, num_runs, scores, out, out_stride);
}

}  // namespace ember::kernels
