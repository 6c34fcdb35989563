// Muse Spark text-decoder configuration, parsed from a Hugging Face config.json
// (reference/muse_spark.md §1.1; transformers' MuseSparkTextConfig).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ember {

enum class AttentionKind { kFull, kSliding };
enum class MlpKind { kSparse, kDense };

struct MuseSparkConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;               // H, the residual stream width
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;       // query heads
  int64_t num_key_value_heads = 0;       // KV heads (GQA)
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;         // width of dense ("dense" mlp_layer_types) SwiGLU layers
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-5;            // pre-norms, QK norms, attention-output norm, embedding and final norm
  double post_norm_eps = 1e-8;           // post-attention, post-FFN and post-expert norms
  double rope_theta = 500000.0;          // rope_parameters.rope_theta
  int64_t sliding_window = 0;            // keys per query INCLUDING the query itself
  double final_logit_softcapping = 0.0;  // 0 = no cap
  double qk_scale_factor = 1.0;          // softmax scale = qk_scale_factor / sqrt(head_dim)
  double output_multiplier = 1.0;        // scales router logits and final logits
  double residual_gate_temperature = 1.0;
  // Latent MoE.
  int64_t num_local_experts = 0;         // E
  int64_t num_experts_per_tok = 0;       // top-k
  int64_t moe_hidden_size = 0;           // Hm, the expert ("latent") width
  int64_t moe_intermediate_size = 0;     // I, each expert's SwiGLU width
  double routed_scaling_factor = 1.0;
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;
  int64_t pad_token_id = -1;

  // Per layer (size num_hidden_layers).
  std::vector<AttentionKind> layer_types;
  std::vector<double> layer_rope_theta;  // 0 = NoPE
  std::vector<MlpKind> mlp_layer_types;

  // Which tensor-name prefix the checkpoint uses for the text model: "model.language_model."
  // for MuseSparkForConditionalGeneration checkpoints, "model." for text-only exports.
  std::string tensor_prefix = "model.language_model.";

  bool IsSliding(int64_t layer) const { return layer_types[layer] == AttentionKind::kSliding; }
  // The number of keys layer `layer` attends to at most (sliding window, or unbounded = -1).
  int64_t WindowOf(int64_t layer) const { return IsSliding(layer) ? sliding_window : -1; }

  // Parses config.json contents. Accepts the multimodal MuseSparkConfig (text_config nested;
  // vision/audio towers are recognised and ignored) and a bare MuseSparkTextConfig.
  static Expected<MuseSparkConfig> FromJson(const nlohmann::json& json, const std::string& where);
  static Expected<MuseSparkConfig> FromFile(const std::string& path);
  // The 816B released model (reference/muse_spark.md §1.1); for planning and tests.
  static MuseSparkConfig MuseSparkOpen();
  // The released model's per-layer pattern for num_hidden_layers layers: full attention and NoPE
  // on every 4th layer counted back from the last, sliding window + RoPE elsewhere, all sparse.
  void SetDefaultLayerPattern();
  Status Validate() const;
};

// Parameter census derived from a config (no checkpoint needed).
struct ParameterCounts {
  int64_t embedding = 0;       // embed_tokens
  int64_t lm_head = 0;         // never tied to embed_tokens (see ParseTextConfig)
  int64_t attention = 0;       // q, k, v, gate, o over all layers
  int64_t norms_and_gates = 0; // every norm gain and residual gate
  int64_t router = 0;          // router weights + correction biases
  int64_t latent_projections = 0;  // pre/post expert projections and norms
  int64_t experts = 0;         // all routed experts
  int64_t dense_mlp = 0;       // dense SwiGLU layers
  int64_t active_experts = 0;  // top-k experts' share, per token

  int64_t Total() const {
    return embedding + lm_head + attention + norms_and_gates + router + latent_projections + experts + dense_mlp;
  }
  // Parameters that touch each token, excluding the embedding table and lm_head (how "A42B" is counted).
  int64_t ActivePerTokenExcludingEmbeddings() const {
    return attention + norms_and_gates + router + latent_projections + active_experts + dense_mlp;
  }
};

ParameterCounts CountParameters(const MuseSparkConfig& config);

}  // namespace ember
