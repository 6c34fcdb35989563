// DSparkWeights: every tensor of a DSpark drafter checkpoint, bound to Linear matrices and f32
// gains, checked strictly against its DSparkConfig (checkpoint_layout.md lists the names and
// shapes). The drafter's embedding and lm_head are the target's (shared and frozen), so a
// checkpoint need not carry them; when it does (DeepSpec's released drafters ship frozen copies)
// they are used instead, as vLLM and SGLang do, after a shape check.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/linear.h"
#include "spec/dspark/dspark_config.h"

namespace ember {
class WeightSource;
}

namespace ember::spec::dspark {

struct DSparkLayerWeights {
  std::vector<float> input_norm;           // [H]
  std::vector<float> post_attention_norm;  // [H]
  std::vector<float> q_norm, k_norm;       // [head_dim]
  Linear q, k, v, o;                       // [nH*hd, H], [nKV*hd, H] x2, [H, nH*hd]
  Linear gate, up, down;                   // [I, H], [I, H], [H, I]
};

struct DSparkWeights {
  Linear fc;                       // [H, taps * target_hidden]
  std::vector<float> hidden_norm;  // [H]: norms the projected context features
  std::vector<float> final_norm;   // [H]
  std::vector<DSparkLayerWeights> layers;
  // Markov head (markov_rank > 0): W1 embeds the previous token, W2 maps it to a vocab bias.
  Linear markov_w1;  // [V, r]
  Linear markov_w2;  // [V, r]
  // Gated Markov head: e' = sigmoid(gate_proj([h; W1[x]])) * W1[x] before W2.
  Linear markov_gate;                    // [r, H + r]
  std::vector<float> markov_gate_bias;   // [r]
  // Confidence head: c = sigmoid(w · [h; W1[x]] + b) ([h] alone without the Markov input).
  std::vector<float> confidence_weight;  // [H (+ r)]
  float confidence_bias = 0.0f;
  // Shipped copies of the target's embedding and lm_head [V, H]; empty when absent (then the
  // target's are shared).
  Linear embed_tokens;
  Linear lm_head;

  std::shared_ptr<const void> keep_alive;  // the mapped checkpoint the Linear views point into
};

// Binds every tensor `config` implies from `source`; a missing tensor, a wrong shape or dtype is
// an error naming the tensor. `where` names the checkpoint in errors.
Expected<DSparkWeights> BindDSparkWeights(const DSparkConfig& config, WeightSource& source);
// Opens `<dir>` (model.safetensors or an index) and binds it.
Expected<DSparkWeights> LoadDSparkWeights(const std::string& dir, const DSparkConfig& config);

}  // namespace ember::spec::dspark
