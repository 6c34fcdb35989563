// The attention sub-layer shared by every architecture: projections, optional QK norms, RoPE,
// paged KV write, causal (optionally sliding-window) GQA attention, optional per-head output
// norm and sigmoid output gate, output projection. Architectures differ only in options.
#pragma once

#include <cstdint>
#include <vector>

#include "model/blocks/step_context.h"
#include "model/linear.h"

namespace ember {

enum class QkNorm {
  kNone,        // Llama
  kWeightless,  // Muse Spark: per-head RMSNorm without gain
  kGain,        // Gemma 3: per-head RMSNorm with a [head_dim] gain
};

enum class RopeLayout {
  kNone,         // NoPE layer
  kRotateHalf,   // pairs (j, j + d/2): Hugging Face layout, GGUF NEOX models (Gemma)
  kInterleaved,  // pairs (2j, 2j + 1): GGUF llama-family layout after the converter's permutation
};

struct AttentionWeights {
  Linear q, k, v, o;
  Linear gate;                      // optional: sigmoid output gate (Muse Spark)
  std::vector<float> q_norm_gain;   // [head_dim] for QkNorm::kGain
  std::vector<float> k_norm_gain;
};

struct AttentionOptions {
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  QkNorm qk_norm = QkNorm::kNone;
  float qk_norm_eps = 1e-6f;
  float q_multiplier = 1.0f;    // extra scale on q after its norm (Muse Spark's qk_scale_factor)
  float softmax_scale = 1.0f;   // multiplies q·k
  RopeLayout rope = RopeLayout::kNone;
  std::vector<float> inv_freq;  // head_dim / 2 entries when rope != kNone
  int64_t window = -1;          // keys per query including itself; -1 = full attention
  bool output_norm = false;     // weightless per-head RMSNorm of the attention output
  float output_norm_eps = 1e-6f;
};

// out [num_tokens, o.out_features()] = attention over x [num_tokens, q.in_features()] for the
// step's tokens: writes this layer's K/V to the slots of its KV group, then runs paged attention
// over each request's block table of that group. q, k, v and the gate are column-parallel (a
// rank holds a block of heads) and o row-parallel (model/parallel_linear.h). Its buffers come
// from step.workspace and are given back before it returns.
void RunAttention(const AttentionWeights& w, const AttentionOptions& options, int64_t layer, const float* x,
                  const StepContext& step, float* out);
// The most workspace RunAttention takes for `tokens` tokens.
int64_t AttentionWorkspaceBytes(const AttentionWeights& w, const AttentionOptions& options, int64_t tokens);

}  // namespace ember
