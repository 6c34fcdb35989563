// Bad DSpark drafters are refused at startup with a message naming what is wrong: a drafter
// trained for another target (hidden size, vocabulary, taps beyond the target's layers, depth),
// a missing, misshapen or unexpected tensor, config values ember cannot compute, and options that
// do not fit the block. Good ones load against a real ember target (the Muse Spark tiny fixture),
// borrowing its embedding, lm_head and final norm.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "dspark_fixture.h"
#include "dspark_random_drafter.h"
#include "model/causal_lm.h"
#include "spec/dspark/dspark_loader.h"
#include "support/source_dir.h"

namespace ember::spec::dspark {
namespace {

using test::RandomDrafterSpec;

const std::string kTinyA = std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/tiny_a";

// A drafter shaped for tiny_a (hidden 128, vocab 512, 6 layers), tapping its last layer too.
RandomDrafterSpec ForTinyA() {
  RandomDrafterSpec s;
  s.hidden = 128;
  s.vocab = 512;
  s.target_layers = 6;
  s.taps = {1, 3, 5};
  s.sliding_window = 6;
  return s;
}

void ExpectError(const Status& status, const std::string& needle, const std::string& what) {
  ASSERT_FALSE(status.ok()) << what;
  EXPECT_NE(status.message().find(needle), std::string::npos) << what << " -> " << status.message();
}

std::unique_ptr<CausalLM> LoadTinyA() {
  auto model = LoadModel(kTinyA);
  EMBER_CHECK(model.ok(), "{}", model.status().ToString());
  return std::move(*model);
}

TEST(DSparkCheckpoint, LoadsAgainstARealTarget) {
  const test::TempDir tmp("good");
    const std::string& dir = tmp.path;
  test::WriteRandomDrafter(dir, ForTinyA());
  auto target = LoadTinyA();
  DSparkProposerOptions o;
  o.num_speculative_tokens = 5;
  auto proposer = LoadDSparkProposer(dir, *target, o);
  ASSERT_TRUE(proposer.ok()) << proposer.status().ToString();
  EXPECT_EQ(std::vector<int32_t>((*proposer)->TargetHiddenStateLayers().begin(),
                                 (*proposer)->TargetHiddenStateLayers().end()),
            (std::vector<int32_t>{1, 3, 5}));
  EXPECT_EQ((*proposer)->drafter().config().layer_window, (std::vector<int64_t>{6, -1}));
  // What the block's rows are embedded with: the table row, without the weightless RMSNorm Muse
  // Spark's embedding module applies for its own layer 0 (transformers' DFlash generator sets it
  // aside), so the row is not of RMS 1.
  std::vector<float> row(128);
  ASSERT_TRUE(target->DrafterEmbedToken(17, row.data()).ok());
  double sum = 0;
  for (float x : row) sum += static_cast<double>(x) * x;
  const double rms = std::sqrt(sum / 128);
  EXPECT_GT(std::abs(rms - 1.0), 0.05) << "the row looks normed: " << rms;
  EXPECT_FALSE(target->DrafterEmbedToken(512, row.data()).ok());
}

// The drafter must be the target's: everything it reads or shares is the target's shape.
TEST(DSparkCheckpoint, DrafterForAnotherTargetIsRefused) {
  auto target = LoadTinyA();
  // The tiny fixture drafter: hidden 64 against tiny_a's 128.
  auto fixture = LoadDSparkProposer(test::FixtureDir("tiny"), *target, {});
  ExpectError(fixture.status(), "hidden_size is 64 but the target's is 128", "hidden");

  struct Case {
    const char* name;
    void (*change)(RandomDrafterSpec&);
    const char* needle;
  };
  const Case cases[] = {
      {"vocab", [](RandomDrafterSpec& s) { s.vocab = 600; }, "vocab_size is 600 but the target's is 512"},
      {"tap", [](RandomDrafterSpec& s) { s.taps = {1, 3, 6}; },
       "target_layer_ids has layer 6 but the target has 6 layers"},
      {"depth", [](RandomDrafterSpec& s) { s.target_layers = 8; }, "num_target_layers"},
      {"embedding tap", [](RandomDrafterSpec& s) { s.taps = {-1, 2}; }, "-1 (the embedding output)"},
  };
  for (const Case& c : cases) {
    RandomDrafterSpec s = ForTinyA();
    c.change(s);
    const test::TempDir tmp(std::string("fit_") + std::to_string(&c - cases));
    const std::string& dir = tmp.path;
    test::WriteRandomDrafter(dir, s);
    ExpectError(LoadDSparkProposer(dir, *target, {}).status(), c.needle, c.name);
  }

  // num_speculative_tokens beyond the block (block_size 5 drafts at most 5).
  const test::TempDir tmp("k");
    const std::string& dir = tmp.path;
  test::WriteRandomDrafter(dir, ForTinyA());
  DSparkProposerOptions o;
  o.num_speculative_tokens = 6;
  ExpectError(LoadDSparkProposer(dir, *target, o).status(), "num_speculative_tokens is 6: it must be in [1, 5]", "k");
}

// Strict binding: every tensor the config implies, with its shape, and nothing else.
TEST(DSparkCheckpoint, MissingMisshapenOrUnexpectedTensorsAreNamed) {
  const RandomDrafterSpec s = ForTinyA();
  auto config = test::RandomDrafterConfig(s);
  struct Case {
    const char* name;
    void (*change)(std::vector<test::TensorSpec>&);
    const char* needle;
  };
  const Case cases[] = {
      {"missing",
       [](std::vector<test::TensorSpec>& t) {
         std::erase_if(t, [](const test::TensorSpec& x) { return x.name == "layers.1.mlp.down_proj.weight"; });
       },
       "layers.1.mlp.down_proj.weight"},
      {"missing head",
       [](std::vector<test::TensorSpec>& t) {
         std::erase_if(t, [](const test::TensorSpec& x) { return x.name == "markov_head.markov_w2.weight"; });
       },
       "markov_head.markov_w2.weight"},
      {"shape",
       [](std::vector<test::TensorSpec>& t) {
         for (auto& x : t) {
           if (x.name == "layers.0.self_attn.k_proj.weight") x.shape[0] += 16;
         }
       },
       "layers.0.self_attn.k_proj.weight"},
      {"fc width",
       [](std::vector<test::TensorSpec>& t) {
         for (auto& x : t) {
           if (x.name == "fc.weight") x.shape[1] = 2 * 128;
         }
       },
       "fc.weight"},
      {"unexpected", [](std::vector<test::TensorSpec>& t) { t.push_back({"layers.0.self_attn.q_proj.bias", {128}}); },
       "layers.0.self_attn.q_proj.bias"},
  };
  for (const Case& c : cases) {
    std::vector<test::TensorSpec> tensors = test::RandomDrafterTensors(s);
    c.change(tensors);
    const test::TempDir tmp(std::string("tensors_") + std::to_string(&c - cases));
    const std::string& dir = tmp.path;
    test::WriteRandomDrafter(dir, config, tensors, 3);
    auto parsed = LoadDSparkConfig(dir);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    ExpectError(LoadDSparkWeights(dir, *parsed).status(), c.needle, c.name);
  }
}

// Config values ember does not compute are refused by name rather than drafted wrongly.
TEST(DSparkCheckpoint, UnsupportedConfigsAreNamed) {
  const nlohmann::json base = test::RandomDrafterConfig(ForTinyA());
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* needle;
  };
  const Case cases[] = {
      {"mask_token_id", 512, "mask_token_id 512 is outside the vocabulary"},
      {"markov_head_type", "rnn", "markov_head_type \"rnn\""},
      {"sample_from_anchor", false, "sample_from_anchor"},
      {"attention_bias", true, "attention_bias"},
      {"hidden_act", "gelu", "hidden_act"},
      {"target_layer_ids", {3, 1}, "strictly increasing"},
      {"sliding_window", nullptr, "sliding_window"},
      {"draft_vocab_size", 100, "draft_vocab_size"},
      {"block_size", 0, "block_size"},
      {"num_key_value_heads", 3, "num_key_value_heads"},
      {"architectures", {"LlamaForCausalLM"}, "DSpark"},
      {"rope_parameters", {{"rope_type", "yarn"}}, "rope_type"},
  };
  for (const Case& c : cases) {
    nlohmann::json config = base;
    config[c.key] = c.value;
    ExpectError(ParseDSparkConfig(config.dump(), "cfg").status(), c.needle, c.key);
  }
  // Calibration: one positive temperature per block position.
  const test::TempDir tmp("calibration");
    const std::string& dir = tmp.path;
  test::WriteRandomDrafter(dir, ForTinyA());
  std::ofstream(dir + "/calibration.json") << R"({"confidence_temperatures": [1.0, 2.0]})";
  ExpectError(LoadDSparkConfig(dir).status(), "confidence_temperatures", "short calibration");
  std::ofstream(dir + "/calibration.json") << R"({"confidence_temperatures": [1.0, 2.0, 0.0, 1.0, 1.0]})";
  ExpectError(LoadDSparkConfig(dir).status(), "positive", "zero temperature");
  std::filesystem::remove(dir + "/calibration.json");
  // The draft vocabulary: distinct ids within the vocabulary (512), most frequent first.
  std::ofstream(dir + "/draft_vocab.json") << R"({"token_ids": [3, 1, 2]})";
  auto loaded = LoadDSparkConfig(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->draft_vocab, (std::vector<int32_t>{3, 1, 2}));
  EXPECT_EQ(DefaultDraftVocabSize(*loaded), 3) << "without counts: every id listed";
  EXPECT_FALSE(DraftVocabCoverage(*loaded, 2).has_value()) << "without counts";
  // With counts, the default is the fewest ids covering 95% of them.
  std::ofstream(dir + "/draft_vocab.json") << R"({"token_ids": [3, 1, 2, 7], "counts": [80, 15, 4, 1]})";
  loaded = LoadDSparkConfig(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->draft_vocab_counts, (std::vector<int64_t>{80, 15, 4, 1}));
  EXPECT_EQ(DefaultDraftVocabSize(*loaded), 2) << "80 + 15 of 100";
  EXPECT_DOUBLE_EQ(DraftVocabCoverage(*loaded, 2).value_or(-1), 0.95);
  EXPECT_DOUBLE_EQ(DraftVocabCoverage(*loaded, 4).value_or(-1), 1.0);
  std::ofstream(dir + "/draft_vocab.json") << R"({"token_ids": [3, 1, 2, 7], "counts": [80, 14, 5, 1]})";
  EXPECT_EQ(DefaultDraftVocabSize(*LoadDSparkConfig(dir)), 3) << "94 of 100 is short of 95%";
  std::ofstream(dir + "/draft_vocab.json") << R"({"token_ids": [3, 1], "counts": [80]})";
  ExpectError(LoadDSparkConfig(dir).status(), "as many counts", "fewer counts than ids");
  std::ofstream(dir + "/draft_vocab.json") << R"({"token_ids": [3, 1], "counts": [80, -1]})";
  ExpectError(LoadDSparkConfig(dir).status(), "non-negative", "a negative count");
  std::ofstream(dir + "/draft_vocab.json") << R"({"token_ids": [3, 1, 3]})";
  ExpectError(LoadDSparkConfig(dir).status(), "twice", "a repeated id");
  std::ofstream(dir + "/draft_vocab.json") << R"({"token_ids": [3, 512]})";
  ExpectError(LoadDSparkConfig(dir).status(), "not in the vocabulary", "an id past the vocabulary");
  std::ofstream(dir + "/draft_vocab.json") << R"({"token_ids": []})";
  ExpectError(LoadDSparkConfig(dir).status(), "token_ids", "an empty list");
}

// The shared head must be the config's shape; a last-layer tap needs the target's final norm.
TEST(DSparkCheckpoint, SharedTargetWeightsAreChecked) {
  test::Fixture f("tiny");
  auto config = LoadDSparkConfig(f.dir);
  ASSERT_TRUE(config.ok());
  std::vector<float> narrow(512 * 32, 0.0f);
  const Linear small = Linear::Dense(TensorView{DType::kF32, Shape{512, 32}, narrow.data()});
  auto weights = LoadDSparkWeights(f.dir, *config);
  ASSERT_TRUE(weights.ok());
  ExpectError(DSparkDrafter::Create(*config, std::move(*weights), SharedTargetWeights::FromTable(&f.embed, &small)).status(), "lm_head",
              "narrow lm_head");
  ExpectError(DSparkDrafter::Create(*config, {}, SharedTargetWeights::FromTable(nullptr, &f.lm_head)).status(), "token embedding", "no embedding");

  // Taps [0, 2, 5] of a 6-layer target: 5 is the last layer, whose tap is final-normed.
  const DSparkTargetInfo target{"fake", 64, 512, 6};
  ExpectError(DSparkProposer::Create(std::move(f.drafter), target, nullptr, {}).status(), "final norm",
              "no final norm");
}

}  // namespace
}  // namespace ember::spec::dspark
