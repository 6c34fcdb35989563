// The interface every architecture implements, and the registry that finds one for a model
// directory. Architectures live in model/arch/, one self-registering file each; nothing here
// switches over architecture names.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/kv_cache.h"

namespace ember {

struct ModelInfo {
  std::string architecture;  // "muse_spark", ...
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;
};

// Bytes of weights by role, for memory plans and the decode roofline.
struct WeightBytes {
  int64_t total = 0;             // every tensor the model holds
  int64_t per_token_decode = 0;  // weights one decode token streams at batch 1 (dense + top-k experts + lm_head)
};

// What `ember inspect` prints: the shape of the model and its parameter census.
struct ModelSummary {
  std::string architecture;
  int64_t num_layers = 0;
  std::string layer_pattern;  // one letter per layer: S = sliding window, F = full attention
  int64_t hidden_size = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0, vocab_size = 0;
  int64_t sliding_window = 0, max_position_embeddings = 0;
  int64_t num_experts = 0, experts_per_token = 0;
  int64_t parameters_total = 0;
  int64_t parameters_active = 0;  // per token, excluding the embedding table and lm_head
  int64_t parameters_embedding = 0;  // embedding table + lm_head
  WeightBytes bytes;
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual const ModelInfo& info() const = 0;
  virtual WeightBytes weight_bytes() const = 0;
  virtual ModelSummary Summary() const = 0;
  // A fresh, empty cache for one sequence.
  virtual KvCache NewCache() const = 0;

  // Runs `count` tokens of one sequence at positions cache.num_tokens() .. +count-1, appending
  // their K/V to the cache. Writes vocab_size logits per row into `logits`: for every token when
  // all_logits, else for the last one only.
  virtual Status Forward(const int32_t* tokens, int64_t count, KvCache& cache, bool all_logits,
                         std::vector<float>* logits) = 0;
};

// A model directory's config.json model_type selects the factory.
using ModelFactory = std::function<Expected<std::unique_ptr<CausalLM>>(const std::string& model_dir)>;

// Registers `factory` for config.json model_type `model_type`. Used by static registrars.
bool RegisterArchitecture(const std::string& model_type, ModelFactory factory);
std::vector<std::string> RegisteredArchitectures();

// Loads a Hugging Face-style model directory (config.json + safetensors).
Expected<std::unique_ptr<CausalLM>> LoadModel(const std::string& model_dir);

}  // namespace ember
