#include "model/blocks/mlp_block.h"

#include "core/op_trace.h"
#include "kernels/ops.h"
#include "model/parallel_linear.h"

namespace ember {

int64_t MlpWorkspaceBytes(const MlpWeights& w, int64_t tokens) {
  return 2 * Workspace::BytesFor<float>(tokens * w.gate.out_features());
}

void RunMlp(const MlpWeights& w, GatedActivation activation, const float* x, int64_t count, const StepContext& step,
            float* out) {
  ScopedOp op("mlp");
  Workspace::Scope scope(step.workspace);
  const int64_t inter = w.gate.out_features();
  float* gate = step.workspace.Take<float>(count * inter);
  float* up = step.workspace.Take<float>(count * inter);
  const Linear* gate_up[] = {&w.gate, &w.up};
  float* gate_up_out[] = {gate, up};
  ColumnParallelApplyShared(gate_up, x, count, gate_up_out);
  // Elementwise, so writing the activation over the gate gives the bits of a separate buffer.
  if (activation == GatedActivation::kSilu) {
    kernels::SwiGlu(gate, up, count, inter, gate);
  } else {
    kernels::GeGluTanh(gate, up, count, inter, gate);
  }
  RowParallelApply(w.down, gate, count, out, step.comm);
}

}  // namespace ember
