// Writes a random DSpark drafter directory (config.json + model.safetensors in the checkpoint
// layout) for a target of a given shape: for tests that need a drafter fitting a real ember target
// (the engine-level lossless tests) or a checkpoint to break on purpose (the loader's errors).
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>
#include <string>
#include <vector>

#include "core/check.h"
#include "formats/safetensors_writer.h"

namespace ember::spec::dspark::test {

struct RandomDrafterSpec {
  int64_t hidden = 64;
  int64_t vocab = 512;
  int64_t target_layers = 6;
  std::vector<int32_t> taps = {1, 3, 5};
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t head_dim = 16;
  int64_t intermediate = 96;
  int32_t block_size = 5;
  int32_t mask_token = 1;
  int64_t markov_rank = 8;
  std::string markov_type = "vanilla";
  bool confidence_head = true;
  int64_t sliding_window = 0;  // > 0: layer 0 windowed
  bool window_all_layers = false;  // with sliding_window: every layer windowed
  uint32_t seed = 1;
};

inline nlohmann::json RandomDrafterConfig(const RandomDrafterSpec& s) {
  nlohmann::json c = {
      {"architectures", {"Qwen3DSparkModel"}},
      {"model_type", "qwen3"},
      {"hidden_size", s.hidden},
      {"num_hidden_layers", s.layers},
      {"num_attention_heads", s.heads},
      {"num_key_value_heads", s.kv_heads},
      {"head_dim", s.head_dim},
      {"intermediate_size", s.intermediate},
      {"hidden_act", "silu"},
      {"rms_norm_eps", 1e-6},
      {"rope_theta", 10000.0},
      {"vocab_size", s.vocab},
      {"block_size", s.block_size},
      {"target_layer_ids", s.taps},
      {"num_target_layers", s.target_layers},
      {"mask_token_id", s.mask_token},
      {"markov_rank", s.markov_rank},
      {"markov_head_type", s.markov_type},
      {"enable_confidence_head", s.confidence_head},
      {"confidence_head_with_markov", s.confidence_head && s.markov_rank > 0},
      {"is_causal", false},
  };
  std::vector<std::string> types(s.layers, "full_attention");
  if (s.sliding_window > 0) {
    for (int64_t l = 0; l < (s.window_all_layers ? s.layers : 1); ++l) types[l] = "sliding_attention";
    c["sliding_window"] = s.sliding_window;
  }
  c["layer_types"] = types;
  return c;
}

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

inline std::vector<TensorSpec> RandomDrafterTensors(const RandomDrafterSpec& s) {
  const int64_t h = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim, r = s.markov_rank;
  std::vector<TensorSpec> t = {{"fc.weight", {h, static_cast<int64_t>(s.taps.size()) * h}},
                               {"hidden_norm.weight", {h}},
                               {"norm.weight", {h}}};
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    for (const TensorSpec& x : std::vector<TensorSpec>{{"input_layernorm.weight", {h}},
                                                       {"post_attention_layernorm.weight", {h}},
                                                       {"self_attn.q_proj.weight", {q, h}},
                                                       {"self_attn.k_proj.weight", {kv, h}},
                                                       {"self_attn.v_proj.weight", {kv, h}},
                                                       {"self_attn.o_proj.weight", {h, q}},
                                                       {"self_attn.q_norm.weight", {s.head_dim}},
                                                       {"self_attn.k_norm.weight", {s.head_dim}},
                                                       {"mlp.gate_proj.weight", {s.intermediate, h}},
                                                       {"mlp.up_proj.weight", {s.intermediate, h}},
                                                       {"mlp.down_proj.weight", {h, s.intermediate}}}) {
      t.push_back({p + x.name, x.shape});
    }
  }
  if (r > 0) {
    t.push_back({"markov_head.markov_w1.weight", {s.vocab, r}});
    t.push_back({"markov_head.markov_w2.weight", {s.vocab, r}});
    if (s.markov_type == "gated") {
      t.push_back({"markov_head.gate_proj.weight", {r, h + r}});
      t.push_back({"markov_head.gate_proj.bias", {r}});
    }
  }
  if (s.confidence_head) {
    t.push_back({"confidence_head.proj.weight", {1, h + r}});
    t.push_back({"confidence_head.proj.bias", {1}});
  }
  return t;
}

// Writes `tensors` with random f32 values (norm gains near 1) and `config` into `dir`.
inline void WriteRandomDrafter(const std::string& dir, const nlohmann::json& config,
                               const std::vector<TensorSpec>& tensors, uint32_t seed) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << config.dump(2);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> data;
  std::vector<SafetensorsEntry> entries;
  for (const TensorSpec& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    std::vector<float> values(n);
    const bool gain = t.name.find("norm.weight") != std::string::npos;
    const float scale = 1.0f / std::sqrt(static_cast<float>(t.shape.back()));
    for (float& v : values) v = gain ? 1.0f + 0.1f * normal(rng) : scale * normal(rng);
    data.push_back(std::move(values));
    entries.push_back({t.name, DType::kF32, Shape(t.shape), data.back().data()});
  }
  const Status written = WriteSafetensors(dir + "/model.safetensors", entries);
  EMBER_CHECK(written.ok(), "{}", written.ToString());
}

inline void WriteRandomDrafter(const std::string& dir, const RandomDrafterSpec& s) {
  WriteRandomDrafter(dir, RandomDrafterConfig(s), RandomDrafterTensors(s), s.seed);
}

// A fresh directory under the test temp dir, removed when it goes out of scope.
struct TempDir {
  explicit TempDir(const std::string& name) {
    const char* base = std::getenv("TEST_TMPDIR");
    const std::filesystem::path root = base && *base ? std::filesystem::path(base) : std::filesystem::temp_directory_path();
    path = (root / ("ember_dspark_" + name + "_" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path;
};

}  // namespace ember::spec::dspark::test
