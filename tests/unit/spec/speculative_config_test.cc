#include "spec/speculative_config.h"

#include <gtest/gtest.h>

namespace ember::spec {
namespace {

TEST(SpeculativeConfig, ParsesVllmShape) {
  auto c = ParseSpeculativeConfig(
      R"({"method":"ngram","num_speculative_tokens":5,"prompt_lookup_max":4,"prompt_lookup_min":2})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->method, Method::kNgram);
  EXPECT_EQ(c->num_speculative_tokens, 5);
  EXPECT_EQ(c->prompt_lookup_min, 2);
  EXPECT_EQ(c->prompt_lookup_max, 4);
  EXPECT_TRUE(c->adaptive);

  auto s = ParseSpeculativeConfig(R"({"method":"suffix","num_speculative_tokens":8,
      "suffix_decoding_max_tree_depth":32,"suffix_decoding_min_token_prob":0.2})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->method, Method::kSuffix);
  EXPECT_EQ(s->suffix_max_tree_depth, 32);
  EXPECT_FLOAT_EQ(s->suffix_min_token_prob, 0.2f);

  auto d = ParseSpeculativeConfig(R"({"method":"draft_model","model":"/m/draft.gguf","num_speculative_tokens":3,
      "adaptive":false})");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->model, "/m/draft.gguf");
  EXPECT_FALSE(d->adaptive);
}

// vLLM's dspark flags (its serving command for Inferact's DSpark drafters, less the block
// verification ember does not have).
TEST(SpeculativeConfig, ParsesDSpark) {
  auto c = ParseSpeculativeConfig(R"({"method":"dspark","model":"/m/dspark","num_speculative_tokens":7,
      "draft_sample_method":"probabilistic","enable_adaptive_verification":false,"draft_confidence_threshold":0.25,
      "rejection_sample_method":"standard","draft_vocab_size":4096,"quantization":"q8_0"})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->method, Method::kDSpark);
  EXPECT_EQ(MethodName(c->method), "dspark");
  EXPECT_EQ(c->model, "/m/dspark");
  EXPECT_EQ(c->num_speculative_tokens, 7);
  EXPECT_EQ(c->draft_sample_method, DraftSampleMethod::kProbabilistic);
  EXPECT_FALSE(c->adaptive);
  EXPECT_FLOAT_EQ(c->draft_confidence_threshold, 0.25f);
  EXPECT_EQ(c->draft_vocab_size, 4096);
  EXPECT_EQ(c->quantization, "q8_0");

  // Defaults: greedy, adaptive (ember's default for every method), no threshold.
  auto d = ParseSpeculativeConfig(R"({"method":"dspark","model":"/m/dspark","num_speculative_tokens":5})");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->draft_sample_method, DraftSampleMethod::kGreedy);
  EXPECT_TRUE(d->adaptive);
  EXPECT_EQ(d->draft_confidence_threshold, 0.0f);
  EXPECT_EQ(d->draft_vocab_size, -1) << "the drafter's default draft vocabulary (DefaultDraftVocabSize)";
  EXPECT_EQ(d->quantization, "q8_0") << "the drafter's matmuls in Q8_0 unless told \"none\"";
  auto e = ParseSpeculativeConfig(R"({"method":"dspark","model":"/m/dspark","num_speculative_tokens":5,
      "quantization":"none"})");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->quantization, "none");
}

// Each bad config is an error naming the field at fault.
TEST(SpeculativeConfig, BadConfigsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"not json", "not a JSON object"},
      {"[1,2]", "not a JSON object"},
      {R"({"num_speculative_tokens":3})", "method"},
      {R"({"method":"eagle","num_speculative_tokens":3})", "method"},
      {R"({"method":"ngram"})", "num_speculative_tokens"},
      {R"({"method":"ngram","num_speculative_tokens":0})", "num_speculative_tokens"},
      {R"({"method":"ngram","num_speculative_tokens":17})", "num_speculative_tokens"},
      {R"({"method":"ngram","num_speculative_tokens":"5"})", "num_speculative_tokens"},
      {R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_min":5,"prompt_lookup_max":2})",
       "prompt_lookup_min"},
      {R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":0})", "prompt_lookup_max"},
      {R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_mx":3})", "prompt_lookup_mx"},
      {R"({"method":"ngram","num_speculative_tokens":3,"suffix_decoding_max_tree_depth":3})",
       "suffix_decoding_max_tree_depth"},
      {R"({"method":"suffix","num_speculative_tokens":3,"suffix_decoding_min_token_prob":1.5})",
       "suffix_decoding_min_token_prob"},
      {R"({"method":"draft_model","num_speculative_tokens":3})", "model"},
      {R"({"method":"draft_model","num_speculative_tokens":3,"model":""})", "model"},
      {R"({"method":"dspark","num_speculative_tokens":7})", "model"},
      {R"({"method":"dspark","model":"/d","num_speculative_tokens":7,"draft_sample_method":"topk"})",
       "draft_sample_method"},
      {R"({"method":"dspark","model":"/d","num_speculative_tokens":7,"enable_adaptive_verification":"yes"})",
       "enable_adaptive_verification"},
      {R"({"method":"dspark","model":"/d","num_speculative_tokens":7,"adaptive":false,
          "enable_adaptive_verification":true})", "enable_adaptive_verification"},
      {R"({"method":"dspark","model":"/d","num_speculative_tokens":7,"draft_confidence_threshold":1.5})",
       "draft_confidence_threshold"},
      {R"({"method":"dspark","model":"/d","num_speculative_tokens":7,"draft_vocab_size":-2})", "draft_vocab_size"},
      {R"({"method":"dspark","model":"/d","num_speculative_tokens":7,"quantization":"fp8"})", "quantization"},
      {R"({"method":"dspark","model":"/d","num_speculative_tokens":7,"rejection_sample_method":"block"})",
       "rejection_sample_method"},
      {R"({"method":"dspark","model":"/d","num_speculative_tokens":7,"prompt_lookup_max":3})", "prompt_lookup_max"},
      {R"({"method":"ngram","num_speculative_tokens":3,"draft_sample_method":"greedy"})", "draft_sample_method"},
  };
  for (const auto& [json, field] : cases) {
    auto c = ParseSpeculativeConfig(json);
    ASSERT_FALSE(c.ok()) << json;
    EXPECT_NE(c.status().message().find(field), std::string::npos) << json << " -> " << c.status().message();
  }
}

}  // namespace
}  // namespace ember::spec
