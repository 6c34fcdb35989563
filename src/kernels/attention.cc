#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"

namespace ember::kernels {

void CausalAttention(const float* q, int64_t m, int64_t first_position, const float* keys, const float* values,
                     int64_t kv_row_stride, const AttentionShape& shape, float* out) {
  const int64_t d = shape.head_dim;
  const int64_t group = shape.num_heads / shape.num_kv_heads;
  const int64_t q_stride = shape.num_heads * d;
  ThreadPool::Global().ParallelFor(
      m * shape.num_heads,
      [&](int64_t begin, int64_t end) {
        std::vector<float> scores;
        for (int64_t item = begin; item < end; ++item) {
          const int64_t row = item / shape.num_heads;
          const int64_t head = item % shape.num_heads;
          const int64_t kv_head = head / group;
          const int64_t position = first_position + row;
          const int64_t first_key = shape.window > 0 ? std::max<int64_t>(0, position - shape.window + 1) : 0;
          const int64_t count = position - first_key + 1;
          const float* qh = q + row * q_stride + head * d;
          scores.resize(count);
          float max_score = -INFINITY;
          for (int64_t j = 0; j < count; ++j) {
            const float* kh = keys + (first_key + j) * kv_row_stride + kv_head * d;
            float dot = 0.0f;
            for (int64_t t = 0; t < d; ++t) dot += qh[t] * kh[t];
            scores[j] = dot * shape.scale;
            max_score = std::max(max_score, scores[j]);
          }
          float total = 0.0f;
          for (int64_t j = 0; j < count; ++j) {
            scores[j] = std::exp(scores[j] - max_score);
            total += scores[j];
          }
          const float inv_total = 1.0f / total;
          float* oh = out + row * q_stride + head * d;
          std::fill(oh, oh + d, 0.0f);
          for (int64_t j = 0; j < count; ++j) {
            const float* vh = values + (first_key + j) * kv_row_stride + kv_head * d;
            const float p = scores[j] * inv_total;
            for (int64_t t = 0; t < d; ++t) oh[t] += p * vh[t];
          }
        }
      },
      4);
}

}  // namespace ember::kernels
