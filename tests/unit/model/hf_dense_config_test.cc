// config.json of the dense HF architectures: the transformers defaults, both RoPE config forms
// (transformers 5 rope_parameters, older rope_theta / rope_scaling / rope_local_base_freq), the
// Gemma 3 layer pattern, and clear refusals of what ember does not run.
#include "model/hf_dense_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "model/causal_lm.h"

namespace ember {
namespace {

using nlohmann::json;

json Base(const std::string& model_type) {
  return json{{"model_type", model_type}, {"vocab_size", 100}, {"hidden_size", 32}, {"num_hidden_layers", 6},
              {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"intermediate_size", 64}};
}

TEST(HfDenseConfigTest, LlamaDefaults) {
  auto c = HfDenseConfig::FromJson(Base("llama"), "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->family, HfDenseFamily::kLlama);
  EXPECT_EQ(c->head_dim, 8);  // hidden / heads
  EXPECT_EQ(c->rope.theta, 10000.0);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->sliding, std::vector<bool>(6, false));
}

TEST(HfDenseConfigTest, Gemma3LegacyAndTransformers5RopeFormsAgree) {
  json legacy = Base("gemma3_text");
  legacy["rope_theta"] = 1000000.0;
  legacy["rope_local_base_freq"] = 10000.0;
  legacy["sliding_window"] = 512;
  json v5 = Base("gemma3_text");
  v5["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1000000.0}}},
                           {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
  v5["sliding_window"] = 512;
  v5["layer_types"] = {"sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
                       "sliding_attention", "full_attention"};
  for (const json& j : {legacy, v5}) {
    auto c = HfDenseConfig::FromJson(j, "config.json");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->rope.theta, 1000000.0);
    EXPECT_EQ(c->local_rope.theta, 10000.0);
    // sliding_window_pattern 6 by default: layer 5 is global.
    EXPECT_EQ(c->sliding, (std::vector<bool>{true, true, true, true, true, false}));
    EXPECT_EQ(c->head_dim, 256);  // Gemma3TextConfig's default
    EXPECT_EQ(c->query_pre_attn_scalar, 256);
    EXPECT_TRUE(c->tie_word_embeddings);
  }
}

TEST(HfDenseConfigTest, Llama3RopeScalingKeepsHighFrequenciesAndDividesLowOnes) {
  json j = Base("llama");
  j["head_dim"] = 64;
  j["rope_theta"] = 500000.0;
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  auto c = HfDenseConfig::FromJson(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  HfRope plain = c->rope;
  plain.type = "default";
  const std::vector<float> scaled = c->rope.InverseFrequencies(64), base = plain.InverseFrequencies(64);
  EXPECT_EQ(scaled[0], base[0]);                       // wavelength 2 pi: untouched
  EXPECT_FLOAT_EQ(scaled[31], base[31] / 8.0f);         // longest wavelength: divided by the factor
  for (size_t i = 0; i < scaled.size(); ++i) EXPECT_LE(scaled[i], base[i]);
}

TEST(HfDenseConfigTest, RefusesWhatItDoesNotRun) {
  const std::pair<const char*, json> cases[] = {
      {"attention_bias", json{{"attention_bias", true}}},
      {"mlp_bias", json{{"mlp_bias", true}}},
      {"yarn", json{{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}}}},
      {"hidden_act", json{{"hidden_act", "gelu"}}},
  };
  for (const auto& [what, patch] : cases) {
    json j = Base("llama");
    j.update(patch);
    auto c = HfDenseConfig::FromJson(j, "config.json");
    ASSERT_FALSE(c.ok()) << what;
    EXPECT_NE(c.status().message().find("config.json"), std::string::npos) << c.status().ToString();
  }
  json qwen = Base("qwen3");
  qwen["use_sliding_window"] = true;
  EXPECT_FALSE(HfDenseConfig::FromJson(qwen, "config.json").ok());
  json missing = Base("llama");
  missing.erase("hidden_size");
  auto c = HfDenseConfig::FromJson(missing, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("hidden_size"), std::string::npos) << c.status().ToString();
}

TEST(HfDenseConfigTest, UnknownModelTypeIsRefusedNamingWhatEmberRuns) {
  const auto dir = std::filesystem::temp_directory_path() / "ember_hf_dense_unknown";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"architectures": ["MambaForCausalLM"], "model_type": "mamba"})";
  auto model = LoadModel(dir.string());
  ASSERT_FALSE(model.ok());
  const std::string message = model.status().message();
  EXPECT_NE(message.find("mamba"), std::string::npos) << message;
  EXPECT_NE(message.find("llama"), std::string::npos) << message;
  EXPECT_NE(message.find("gemma3_text"), std::string::npos) << message;
  std::filesystem::remove_all(dir);
}

TEST(HfDenseConfigTest, GenerationConfigAddsEndOfSequenceIds) {
  const auto dir = std::filesystem::temp_directory_path() / "ember_hf_dense_eos";
  std::filesystem::create_directories(dir);
  json j = Base("gemma3_text");
  j["eos_token_id"] = 1;
  std::ofstream(dir / "config.json") << j.dump();
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [1, 106], "bos_token_id": 2})";
  auto c = HfDenseConfig::FromDirectory(dir.string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{1, 106}));
  EXPECT_EQ(c->bos_token_id, 2);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ember
