#include "model/blocks/attention_block.h"

#include <algorithm>
#include <numeric>

#include "kernels/attention.h"
#include "kernels/ops.h"

namespace ember {
namespace {

void ApplyQkNorm(QkNorm kind, float* x, int64_t heads_total, int64_t d, float eps, const std::vector<float>& gain) {
  switch (kind) {
    case QkNorm::kNone: return;
    case QkNorm::kWeightless: kernels::RmsNorm(x, heads_total, d, eps, x); return;
    case QkNorm::kGain: kernels::RmsNormGain(x, heads_total, d, eps, gain.data(), x); return;
  }
}

void ApplyRope(RopeLayout layout, float* x, int64_t count, int64_t heads, int64_t d, const int64_t* positions,
               const float* inv_freq) {
  switch (layout) {
    case RopeLayout::kNone: return;
    case RopeLayout::kRotateHalf: kernels::RopeRotateHalf(x, count, heads, d, positions, inv_freq); return;
    case RopeLayout::kInterleaved: kernels::RopeInterleaved(x, count, heads, d, positions, inv_freq); return;
  }
}

}  // namespace

void RunAttention(const AttentionWeights& w, const AttentionOptions& o, int64_t layer, const float* x,
                  int64_t count, KvCache& cache, float* out) {
  const int64_t d = o.head_dim;
  const int64_t q_width = o.num_heads * d;
  const int64_t kv_width = o.num_kv_heads * d;
  const int64_t first_position = cache.num_tokens();

  std::vector<float> q(count * q_width), k(count * kv_width), v(count * kv_width);
  w.q.Apply(x, count, q.data());
  w.k.Apply(x, count, k.data());
  w.v.Apply(x, count, v.data());
  ApplyQkNorm(o.qk_norm, q.data(), count * o.num_heads, d, o.qk_norm_eps, w.q_norm_gain);
  ApplyQkNorm(o.qk_norm, k.data(), count * o.num_kv_heads, d, o.qk_norm_eps, w.k_norm_gain);
  if (o.q_multiplier != 1.0f) {
    for (float& value : q) value *= o.q_multiplier;
  }
  if (o.rope != RopeLayout::kNone) {
    std::vector<int64_t> positions(count);
    std::iota(positions.begin(), positions.end(), first_position);
    ApplyRope(o.rope, q.data(), count, o.num_heads, d, positions.data(), o.inv_freq.data());
    ApplyRope(o.rope, k.data(), count, o.num_kv_heads, d, positions.data(), o.inv_freq.data());
  }
  std::copy(k.begin(), k.end(), cache.Keys(layer) + first_position * kv_width);
  std::copy(v.begin(), v.end(), cache.Values(layer) + first_position * kv_width);

  kernels::AttentionShape shape;
  shape.num_heads = o.num_heads;
  shape.num_kv_heads = o.num_kv_heads;
  shape.head_dim = d;
  shape.scale = o.softmax_scale;
  shape.window = o.window;
  std::vector<float> attended(count * q_width);
  kernels::CausalAttention(q.data(), count, first_position, cache.Keys(layer), cache.Values(layer), kv_width,
                           shape, attended.data());

  if (o.output_norm) kernels::RmsNorm(attended.data(), count * o.num_heads, d, o.output_norm_eps, attended.data());
  if (!w.gate.empty()) {
    std::vector<float> gate(count * q_width);
    w.gate.Apply(x, count, gate.data());
    kernels::SigmoidInPlace(gate.data(), count * q_width);
    for (int64_t i = 0; i < count * q_width; ++i) attended[i] *= gate[i];
  }
  w.o.Apply(attended.data(), count, out);
}

}  // namespace ember
