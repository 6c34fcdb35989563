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

int64_t AttentionWorkspaceBytes(const AttentionWeights& w, const AttentionOptions& o, int64_t tokens) {
  const int64_t q_width = o.num_heads * o.head_dim;
  const int64_t kv_width = o.num_kv_heads * o.head_dim;
  const int64_t q_buffers = w.gate.empty() ? 2 : 3;  // q, attended, and the gate's
  return q_buffers * Workspace::BytesFor<float>(tokens * q_width) + 2 * Workspace::BytesFor<float>(tokens * kv_width);
}

void RunAttention(const AttentionWeights& w, const AttentionOptions& o, int64_t layer, const float* x,
                  const StepContext& step, float* out) {
  const int64_t d = o.head_dim;
  const int64_t q_width = o.num_heads * d;
  const int64_t kv_width = o.num_kv_heads * d;
  const int64_t count = step.batch.num_tokens();

  Workspace::Scope scope(step.workspace);
  float* q = step.workspace.Take<float>(count * q_width);
  float* k = step.workspace.Take<float>(count * kv_width);
  float* v = step.workspace.Take<float>(count * kv_width);
  ScopedOp op("attention.qkv_proj", layer);
  const Linear* qkv[] = {&w.q, &w.k, &w.v};
  float* qkv_out[] = {q, k, v};
  ColumnParallelApplyShared(qkv, x, count, qkv_out);
  ApplyQkNorm(o.qk_norm, q, count * o.num_heads, d, o.qk_norm_eps, w.q_norm_gain);
  ApplyQkNorm(o.qk_norm, k, count * o.num_kv_heads, d, o.qk_norm_eps, w.k_norm_gain);
  if (o.q_multiplier != 1.0f) kernels::ScaleInPlace(q, count * q_width, o.q_multiplier);
  if (o.rope != RopeLayout::kNone) {
    ApplyRope(o.rope, q, count, o.num_heads, d, step.positions, o.inv_freq.data());
    ApplyRope(o.rope, k, count, o.num_kv_heads, d, step.positions, o.inv_freq.data());
  }
  ScopedOp paged_op("attention.paged");
  const KvGroupTable& table = step.batch.groups[step.kv.config().group_of_layer[layer]];
  step.kv.Write(layer, k, v, count, table.slot_mapping.data());

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
  float* attended = step.workspace.Take<float>(count * q_width);
  kernels::PagedAttention(q, count, paged, step.kv.View(layer), shape, attended);

  if (o.output_norm) kernels::RmsNorm(attended, count * o.num_heads, d, o.output_norm_eps, attended);
  if (!w.gate.empty()) {
    float* gate = step.workspace.Take<float>(count * q_width);
    ColumnParallelApply(w.gate, x, count, gate);
    kernels::SigmoidInPlace(gate, count * q_width);
    kernels::MulInPlace(attended, gate, count * q_width);
  }
  ScopedOp o_op("attention.o_proj");
  RowParallelApply(w.o, attended, count, out, step.comm);
}

}  // namespace ember
