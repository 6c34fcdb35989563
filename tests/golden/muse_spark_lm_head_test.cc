// Muse Spark's output head is always lm_head.weight. The reference (transformers 5.23.0,
// models/muse_spark/modeling_muse_spark.py) gives MuseSparkForConditionalGeneration its own
// lm_head and no _tied_weights_keys, so its tie_weights() ties nothing whatever config.json says
// about tie_word_embeddings. These tests edit copies of the tiny_a fixture
// (tests/golden/muse_spark/README.md) to check that ember does the same.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/causal_lm.h"
#include "support/single_sequence.h"
#include "support/source_dir.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

const std::string kFixture = std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/tiny_a";

// A fresh copy of the fixture, removed when the test ends.
class FixtureCopy {
 public:
  explicit FixtureCopy(const std::string& tag) {
    dir_ = (fs::path(::testing::TempDir()) / ("ember_muse_lm_head_" + tag)).string();
    fs::remove_all(dir_);
    fs::copy(kFixture, dir_);
  }
  ~FixtureCopy() { fs::remove_all(dir_); }
  const std::string& dir() const { return dir_; }

  nlohmann::json ReadConfig() const {
    std::ifstream in(dir_ + "/config.json");
    return nlohmann::json::parse(in);
  }
  void WriteConfig(const nlohmann::json& config) const {
    std::ofstream out(dir_ + "/config.json", std::ios::trunc);
    out << config.dump(2);
  }

 private:
  std::string dir_;
};

std::vector<int32_t> PromptIds() {
  std::ifstream in(kFixture + "/golden.json");
  return nlohmann::json::parse(in).at("prompt_ids").get<std::vector<int32_t>>();
}

// Every prompt position's logits from one pass.
std::vector<float> PromptLogits(CausalLM* model, const std::vector<int32_t>& prompt) {
  const auto n = static_cast<int64_t>(prompt.size());
  auto sequence = test::SingleSequence::Create(model, n, kv::KvDtype::kF32);
  EXPECT_TRUE(sequence.ok()) << sequence.status().ToString();
  if (!sequence.ok()) return {};
  std::vector<float> logits;
  const Status s = sequence->Append(prompt.data(), n, /*all_logits=*/true, &logits);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return logits;
}

// tie_word_embeddings=true (in text_config, where ember reads the text model's settings, and at
// the top level) must change nothing: same logits bit for bit, same parameter and byte counts.
TEST(MuseSparkLmHead, TieWordEmbeddingsIsIgnoredAsInTheReference) {
  auto untied = LoadModel(kFixture);
  ASSERT_TRUE(untied.ok()) << untied.status().ToString();

  FixtureCopy copy("tied");
  nlohmann::json config = copy.ReadConfig();
  config["tie_word_embeddings"] = true;
  config["text_config"]["tie_word_embeddings"] = true;
  copy.WriteConfig(config);
  auto tied = LoadModel(copy.dir());
  ASSERT_TRUE(tied.ok()) << tied.status().ToString();

  const std::vector<int32_t> prompt = PromptIds();
  const std::vector<float> expected = PromptLogits(untied->get(), prompt);
  const std::vector<float> got = PromptLogits(tied->get(), prompt);
  ASSERT_EQ(got.size(), expected.size());
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0)
      << "the logits differ: ember used embed_tokens as the output head instead of lm_head.weight";

  const ModelSummary a = (*untied)->Summary(), b = (*tied)->Summary();
  EXPECT_EQ(b.parameters_total, a.parameters_total);
  EXPECT_EQ(b.parameters_embedding, a.parameters_embedding);
  EXPECT_EQ((*tied)->weight_bytes().total, (*untied)->weight_bytes().total);
  EXPECT_EQ((*tied)->weight_bytes().per_token_decode, (*untied)->weight_bytes().per_token_decode);
}

// Without lm_head.weight there is no output head: loading fails and says which tensor is missing,
// even when the config asks for tied embeddings.
TEST(MuseSparkLmHead, MissingLmHeadIsALoadErrorNamingTheTensor) {
  FixtureCopy copy("missing");
  nlohmann::json config = copy.ReadConfig();
  config["text_config"]["tie_word_embeddings"] = true;
  copy.WriteConfig(config);
  // Rename the tensor in the safetensors header to another name of the same length, so the
  // header size and every data offset stay valid.
  const std::string path = copy.dir() + "/model.safetensors";
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::string from = "\"lm_head.weight\"", to = "\"output.weights\"";
  ASSERT_EQ(from.size(), to.size());
  const size_t at = bytes.find(from);
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, from.size(), to);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  auto model = LoadModel(copy.dir());
  ASSERT_FALSE(model.ok()) << "loaded a Muse Spark checkpoint without lm_head.weight";
  const std::string message = model.status().message();
  EXPECT_NE(message.find("'lm_head.weight'"), std::string::npos) << message;
  EXPECT_NE(message.find("tie_word_embeddings"), std::string::npos) << message;
}

}  // namespace
}  // namespace ember
