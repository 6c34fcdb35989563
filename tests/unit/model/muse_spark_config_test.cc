#include "model/muse_spark_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ember {
namespace {

using ::testing::HasSubstr;

nlohmann::json TinyTextConfig() {
  return {
      {"model_type", "muse_spark_text"},
      {"vocab_size", 64},
      {"hidden_size", 32},
      {"num_hidden_layers", 6},
      {"num_attention_heads", 4},
      {"num_key_value_heads", 2},
      {"head_dim", 8},
      {"sliding_window", 4},
      {"num_local_experts", 8},
      {"num_experts_per_tok", 2},
      {"moe_hidden_size", 16},
      {"moe_intermediate_size", 24},
      {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
      {"initializer_range", 0.02},
  };
}

TEST(MuseSparkConfigTest, DefaultsFollowTheReference) {
  auto config = MuseSparkConfig::FromJson(TinyTextConfig(), "config.json");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  // transformers' default pattern: full attention every 4th layer counted from the last.
  const std::vector<AttentionKind> expected = {AttentionKind::kSliding, AttentionKind::kFull,
                                               AttentionKind::kSliding, AttentionKind::kSliding,
                                               AttentionKind::kSliding, AttentionKind::kFull};
  EXPECT_EQ(config->layer_types, expected);
  EXPECT_EQ(config->layer_rope_theta, (std::vector<double>{10000, 0, 10000, 10000, 10000, 0}));
  EXPECT_DOUBLE_EQ(config->qk_scale_factor, 5.4730064863875);
  EXPECT_DOUBLE_EQ(config->output_multiplier, 0.1767766952966369);
  EXPECT_DOUBLE_EQ(config->final_logit_softcapping, 20.0);
  EXPECT_DOUBLE_EQ(config->post_norm_eps, 1e-8);
  EXPECT_DOUBLE_EQ(config->residual_gate_temperature, 0.3);
  EXPECT_EQ(config->tensor_prefix, "model.");
  EXPECT_EQ(config->WindowOf(0), 4);
  EXPECT_EQ(config->WindowOf(1), -1);
}

TEST(MuseSparkConfigTest, NestedMultimodalConfigUsesLanguageModelPrefix) {
  nlohmann::json text = TinyTextConfig();
  nlohmann::json top = {{"model_type", "muse_spark"},
                        {"architectures", {"MuseSparkForConditionalGeneration"}},
                        {"text_config", text},
                        {"vision_config", {{"hidden_size", 8}}},
                        {"image_token_id", 5}};
  auto config = MuseSparkConfig::FromJson(top, "config.json");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->tensor_prefix, "model.language_model.");
}

TEST(MuseSparkConfigTest, UnknownFieldIsRejectedByName) {
  nlohmann::json json = TinyTextConfig();
  json["attention_sink_tokens"] = 4;
  auto config = MuseSparkConfig::FromJson(json, "config.json");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("attention_sink_tokens"));
}

TEST(MuseSparkConfigTest, WrongTypeNamesTheField) {
  nlohmann::json json = TinyTextConfig();
  json["hidden_size"] = "32";
  auto config = MuseSparkConfig::FromJson(json, "config.json");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("hidden_size"));
  EXPECT_THAT(config.status().message(), HasSubstr("integer"));
}

TEST(MuseSparkConfigTest, MissingRequiredField) {
  nlohmann::json json = TinyTextConfig();
  json.erase("num_local_experts");
  auto config = MuseSparkConfig::FromJson(json, "config.json");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("num_local_experts"));
}

TEST(MuseSparkConfigTest, InconsistentFieldsAreRejected) {
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"num_key_value_heads", 3, "multiple of num_key_value_heads"},
      {"num_experts_per_tok", 9, "num_experts_per_tok"},
      {"layer_types", {"sliding_attention", "full_attention"}, "num_hidden_layers"},
      {"layer_types", {"sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
                       "local", "full_attention"}, "'local'"},
      {"layer_rope_theta", {1.0, -1.0, 1.0, 1.0, 1.0, 0.0}, "layer_rope_theta"},
      {"mlp_layer_types", {"sparse", "sparse", "sparse", "sparse", "sparse", "moe"}, "'moe'"},
      {"head_dim", 7, "head_dim"},
      {"hidden_act", "gelu", "hidden_act"},
      {"attention_bias", true, "attention_bias"},
      {"num_shared_experts", 1, "num_shared_experts"},
      {"sliding_window", 0, "sliding_window"},
      {"final_logit_softcapping", -1.0, "final_logit_softcapping"},
  };
  for (const Case& c : cases) {
    nlohmann::json json = TinyTextConfig();
    json[c.key] = c.value;
    auto config = MuseSparkConfig::FromJson(json, "config.json");
    ASSERT_FALSE(config.ok()) << c.key;
    EXPECT_THAT(config.status().message(), HasSubstr(c.expect)) << c.key;
  }
}

TEST(MuseSparkConfigTest, RejectsUnsupportedRopeTypeAndWrongModelType) {
  nlohmann::json json = TinyTextConfig();
  json["rope_parameters"]["rope_type"] = "yarn";
  auto config = MuseSparkConfig::FromJson(json, "config.json");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kUnimplemented);
  json = TinyTextConfig();
  json["model_type"] = "llama";
  EXPECT_FALSE(MuseSparkConfig::FromJson(json, "config.json").ok());
  EXPECT_FALSE(MuseSparkConfig::FromJson(nlohmann::json::array(), "config.json").ok());
}

TEST(MuseSparkConfigTest, MissingFileSaysWhatToDo) {
  auto config = MuseSparkConfig::FromFile("/nonexistent/config.json");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(config.status().message(), HasSubstr("/nonexistent/config.json"));
}

// transformers' MuseSparkForConditionalGeneration never ties lm_head to embed_tokens (it has no
// _tied_weights_keys), so tie_word_embeddings=true still counts a separate output head.
TEST(MuseSparkConfigTest, TieWordEmbeddingsStillCountsTheLmHead) {
  nlohmann::json text = TinyTextConfig();
  text["tie_word_embeddings"] = true;
  auto config = MuseSparkConfig::FromJson(text, "config.json");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const ParameterCounts p = CountParameters(*config);
  EXPECT_EQ(p.embedding, 64 * 32);
  EXPECT_EQ(p.lm_head, 64 * 32);
}

// The released model's census (reference/muse_spark.md §1.2, derived figures).
TEST(MuseSparkConfigTest, MuseSparkOpenParameterCensus) {
  const MuseSparkConfig config = MuseSparkConfig::MuseSparkOpen();
  ASSERT_TRUE(config.Validate().ok());
  const ParameterCounts p = CountParameters(config);
  EXPECT_EQ(p.experts, 798863917056);
  EXPECT_EQ(p.attention + p.latent_projections - 62 * 2 * 4096, 17683185664);  // q,k,v,gate,o,pre,post
  // Router weights + correction biases: exactly the checkpoint's 130,039,296 F32 elements.
  EXPECT_EQ(p.router, 130039296);
  EXPECT_EQ(p.embedding + p.lm_head, 3310354432);
  // Text total ~819.99e9; the checkpoint's 821.9e9 BF16 elements add ~2.05e9 of vision/audio towers.
  EXPECT_NEAR(p.Total() / 1e9, 819.99, 0.01);
  // "A42B": ~42.8e9 active per token excluding embedding and lm_head.
  EXPECT_NEAR(p.ActivePerTokenExcludingEmbeddings() / 1e9, 42.8, 0.1);
  int full = 0;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) full += !config.IsSliding(l);
  EXPECT_EQ(full, 16);
  EXPECT_FALSE(config.IsSliding(1));
  EXPECT_FALSE(config.IsSliding(61));
  EXPECT_TRUE(config.IsSliding(58));
}

}  // namespace
}  // namespace ember
