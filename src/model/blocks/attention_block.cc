#include "model/blocks/attention_block.h"

#include <algorithm>

#include "core/op_trace.h"
#include "kernels/paged_attention.h"
#include "kernels/ops.h"
#include "model/parallel_linear.h"

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

AttentionStep::AttentionStep(const ForwardBatch& b, KvStore& store, exec::Communicator& c)
    : batch(b), kv(store), comm(c), positions(b.positions.begin(), b.positions.end()) {}

void RunAttention(const AttentionWeights& w, const AttentionOptions& o, int64_t layer, const float* x,
                  const AttentionStep& step, float* out) {
  const int64_t d = o.head_dim;
  const int64_t q_width = o.num_heads * d;
  const int64_t kv_width = o.num_kv_heads * d;
  const int64_t count = step.batch.num_tokens();

  std::vector<float> q(count * q_width), k(count * kv_width), v(count * kv_width);
  ScopedOp op("attention.qkv_proj", layer);
  ColumnParallelApply(w.q, x, count, q.data());
  ColumnParallelApply(w.k, x, count, k.data());
  ColumnParallelApply(w.v, x, count, v.data());
  ApplyQkNorm(o.qk_norm, q.data(), count * o.num_heads, d, o.qk_norm_eps, w.q_norm_gain);
  ApplyQkNorm(o.qk_norm, k.data(), count * o.num_kv_heads, d, o.qk_norm_eps, w.k_norm_gain);
  if (o.q_multiplier != 1.0f) kernels::ScaleInPlace(q.data(), count * q_width, o.q_multiplier);
  if (o.rope != RopeLayout::kNone) {
    ApplyRope(o.rope, q.data(), count, o.num_heads, d, step.positions.data(), o.inv_freq.data());
    ApplyRope(o.rope, k.data(), count, o.num_kv_heads, d, step.positions.data(), o.inv_freq.data());
  }
  ScopedOp paged_op("attention.paged");
  const KvGroupTable& table = step.batch.groups[step.kv.config().group_of_layer[layer]];
  step.kv.Write(layer, k.data(), v.data(), count, table.slot_mapping.data());

  kernels::AttentionShape shape;
  shape.num_heads = o.num_heads;
  shape.num_kv_heads = o.num_kv_heads;
  shape.head_dim = d;
  shape.scale = o.softmax_scale;
  shape.window = o.window;
  kernels::PagedBatch paged;
  paged.num_reqs = step.batch.num_reqs();
  paged.query_start_loc = step.batch.query_start_loc.data();
  paged.positions = step.batch.positions.data();
  paged.seq_lens = step.batch.seq_lens.data();
  paged.block_table = table.block_table.data();
  paged.max_blocks_per_req = table.max_blocks_per_req;
  std::vector<float> attended(count * q_width);
  kernels::PagedAttention(q.data(), count, paged, step.kv.View(layer), shape, attended.data());

  if (o.output_norm) kernels::RmsNorm(attended.data(), count * o.num_heads, d, o.output_norm_eps, attended.data());
  if (!w.gate.empty()) {
    std::vector<float> gate(count * q_width);
    ColumnParallelApply(w.gate, x, count, gate.data());
    kernels::SigmoidInPlace(gate.data(), count * q_width);
    for (int64_t i = 0; i < count * q_width; ++i) attended[i] *= gate[i];
  }
  ScopedOp o_op("attention.o_proj");
  RowParallelApply(w.o, attended.data(), count, out, step.comm);
}

}  // namespace ember
