// The gated MLP every dense layer uses: out = down(act(gate(x)) * up(x)). gate and up are
// column-parallel and down row-parallel (model/parallel_linear.h): a tensor-parallel rank holds a
// block of the intermediate width and the step's communicator sums the partial outputs.
#pragma once

#include <cstdint>

#include "model/blocks/step_context.h"
#include "model/linear.h"

namespace ember {

enum class GatedActivation {
  kSilu,      // SwiGLU (Llama, Muse Spark)
  kGeluTanh,  // GeGLU with the tanh GELU (Gemma)
};

struct MlpWeights {
  Linear gate, up, down;  // [I, H], [I, H], [H, I]

  bool empty() const { return down.empty(); }
  int64_t bytes() const { return gate.bytes() + up.bytes() + down.bytes(); }
  int64_t repacked_bytes() const { return gate.repacked_bytes() + up.repacked_bytes() + down.repacked_bytes(); }
  int64_t parameters() const {
    return gate.out_features() * gate.in_features() + up.out_features() * up.in_features() +
           down.out_features() * down.in_features();
  }
};

// out [count, H] = MLP(x [count, H]) with the step's workspace and communicator.
void RunMlp(const MlpWeights& w, GatedActivation activation, const float* x, int64_t count, const StepContext& step,
            float* out);
// The most workspace RunMlp takes for `tokens` tokens.
int64_t MlpWorkspaceBytes(const MlpWeights& w, int64_t tokens);

}  // namespace ember
