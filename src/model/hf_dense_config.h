// config.json of a Hugging Face dense decoder (LlamaForCausalLM, Qwen3ForCausalLM,
// Gemma3ForCausalLM, and the text decoder of Gemma3ForConditionalGeneration), read into what
// the forward pass needs. Defaults are those of the transformers config classes
// (LlamaConfig, Qwen3Config, Gemma3TextConfig), so a config.json written by save_pretrained and
// a hand-trimmed one read the same. Fields that change the forward pass in a way ember does not
// implement (attention or MLP biases, attention logit softcapping, RoPE scaling other than
// linear / llama3, Qwen3's sliding window) are errors naming the field; fields that do not
// change it are ignored, as transformers and vLLM ignore them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace ember {

enum class HfDenseFamily { kLlama, kQwen3, kGemma3 };

// How a RoPE table's inverse frequencies are derived from theta (transformers' rope_type).
struct HfRope {
  double theta = 10000.0;
  std::string type = "default";  // "default", "linear" or "llama3"
  double factor = 1.0;           // linear, llama3
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  int64_t original_max_position_embeddings = 8192;       // llama3

  // head_dim / 2 inverse frequencies, as transformers' ROPE_INIT_FUNCTIONS[type] computes them.
  std::vector<float> InverseFrequencies(int64_t head_dim) const;
};

struct HfDenseConfig {
  HfDenseFamily family = HfDenseFamily::kLlama;
  std::string model_type;  // "llama", "qwen3", "gemma3_text" ("gemma3" for the multimodal wrapper)
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  double rms_norm_eps = 1e-6;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  HfRope rope;        // full-attention layers (every layer of Llama and Qwen3)
  HfRope local_rope;  // Gemma 3's sliding layers (rope_local_base_freq)
  // Gemma 3: window (keys per query, itself included) and which layers slide.
  int64_t sliding_window = 0;
  std::vector<bool> sliding;  // one per layer
  double query_pre_attn_scalar = 0;  // Gemma 3: scores scale by its -1/2 power
  double final_logit_softcapping = 0;  // 0 = none
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;

  static Expected<HfDenseConfig> FromJson(const nlohmann::json& json, const std::string& where);
  // Reads dir/config.json and, for extra end-of-sequence ids, dir/generation_config.json (vLLM
  // stops on those too: Gemma 3 ends a turn with <end_of_turn>, listed only there).
  static Expected<HfDenseConfig> FromDirectory(const std::string& dir);
};

}  // namespace ember
