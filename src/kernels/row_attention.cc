#include "kernels/row_attention.h"

#include "kernels/matmul.h"

namespace ember::kernels {

int64_t RowAttentionScratch(int64_t num_keys) { return (num_keys + 15) / 16 * 16; }

void RowAttention(const float* q, int64_t head_dim, float scale, const KeyValueRows* runs, int64_t num_runs,
                  float* scores, float* out) {
  ActiveVariant().row_attention(q, head_dim, scale, runs, num_runs, scores, out);
}

}  // namespace ember::kernels
