#include <algorithm>
#include <cmath>

#include "kernels/ref/ref.h"
#include "kernels/row_attention.h"

namespace ember::kernels::ref {

namespace {

void OneRow(const float* q, int64_t d, float scale, const KeyValueRows* runs, int64_t num_runs, float* scores,
            float* out) {
  int64_t n = 0;
  float max_score = -INFINITY;
  for (int64_t r = 0; r < num_runs; ++r) {
    for (int64_t j = 0; j < runs[r].count; ++j, ++n) {
      const float* k = runs[r].keys + j * runs[r].stride;
      float s = 0.0f;
      for (int64_t i = 0; i < d; ++i) s += q[i] * k[i];
      scores[n] = s * scale;
      max_score = std::max(max_score, scores[n]);
    }
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  std::fill_n(out, d, 0.0f);
  int64_t key = 0;
  for (int64_t r = 0; r < num_runs; ++r) {
    for (int64_t j = 0; j < runs[r].count; ++j, ++key) {
      const float* v = runs[r].values + j * runs[r].stride;
      for (int64_t i = 0; i < d; ++i) out[i] += scores[key] * v[i];
    }
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < d; ++i) out[i] *= inv;
}

}  // namespace

void RowAttention(const float* q, int64_t q_stride, int64_t num_queries, int64_t d, float scale,
                  const KeyValueRows* runs, int64_t num_runs, float* scores, float* out, int64_t out_stride) {
  int64_t num_keys = 0;
  for (int64_t r = 0; r < num_runs; ++r) num_keys += runs[r].count;
  for (int64_t i = 0; i < num_queries; ++i) {
    OneRow(q + i * q_stride, d, scale, runs, num_runs, scores + i * RowAttentionScratch(num_keys), out + i * out_stride);
  }
}

}  // namespace ember::kernels::ref
