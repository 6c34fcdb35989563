// Dense Hugging Face model directories (LlamaForCausalLM, Qwen3ForCausalLM, Gemma3ForCausalLM)
// against logits from transformers (float32, eager attention, on bf16-representable weights;
// scripts/make_hf_dense_golden.py, tests/golden/hf_dense/README.md). The same fixtures rewritten
// at test time as f32 and f16 safetensors must load to the same logits, and rewritten in the
// quantized producers' per-linear layouts must load to exactly what load-time --quantization
// makes of the bf16 weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "formats/checkpoint.h"
#include "formats/safetensors_writer.h"
#include "model/causal_lm.h"
#include "model/quantized_weights.h"
#include "support/golden_logits.h"
#include "support/single_sequence.h"
#include "support/source_dir.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

// Tolerance. transformers and ember compute in f32 on the same weights and differ only in
// summation order (blocked SIMD dot products, attention): the error is a few f32 ulps of the
// largest activations, ~1e-6 of the logit scale, grown a little through 1-3 layers. The bound,
// 1e-4 of the position's largest |logit|, is ~50x that noise, while every layout mistake this
// test exists for moves logits by 1e-2 to 1e1 of that scale: a missing +1 on Gemma's norms,
// interleaved instead of rotate-half RoPE, head_dim^-1/2 instead of query_pre_attn_scalar^-1/2,
// the local RoPE base on a global layer, a window off by one. Greedy tokens must match exactly
// (the script keeps every top-1/top-2 margin >= 0.05).
constexpr float kRelativeTolerance = 1e-4f;
// f16 weights are the bf16 ones exactly except where bf16 values fall below f16's normal range
// (|w| < 6.1e-5, rounded to f16 subnormals): a few ulps of the smallest weights.
constexpr float kF16RelativeTolerance = 1e-3f;

using Golden = test::GoldenLogits;
using test::ReadFloats;
using test::WorstRelativeError;

Golden LoadGolden(const std::string& name) {
  return test::LoadGoldenLogits(std::string(EMBER_SOURCE_DIR) + "/tests/golden/hf_dense/" + name);
}

Expected<std::vector<float>> PromptLogits(const std::string& dir, const Golden& g, const LoadOptions& options = {}) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<CausalLM> model, LoadModel(dir, options));
  const int64_t n = static_cast<int64_t>(g.prompt_ids.size());
  EMBER_ASSIGN_OR_RETURN(test::SingleSequence sequence, test::SingleSequence::Create(model.get(), n, kv::KvDtype::kF32));
  std::vector<float> logits;
  EMBER_RETURN_IF_ERROR(sequence.Append(g.prompt_ids.data(), n, /*all_logits=*/true, &logits));
  return logits;
}

// A scratch copy of a fixture directory: config.json and generation_config.json copied, the
// tensors rewritten by the caller.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name) : path_(fs::temp_directory_path() / ("ember_hf_dense_" + name)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void CopyConfig(const std::string& from, const fs::path& to) {
  for (const char* file : {"config.json", "generation_config.json"}) {
    if (fs::exists(fs::path(from) / file)) fs::copy_file(fs::path(from) / file, to / file);
  }
}

// Every tensor of `dir` as f32 values.
std::vector<std::pair<std::string, std::pair<Shape, std::vector<float>>>> ReadAsF32(const std::string& dir) {
  auto checkpoint = Checkpoint::OpenDirectory(dir);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status().ToString();
  std::vector<std::pair<std::string, std::pair<Shape, std::vector<float>>>> out;
  for (const std::string& name : (*checkpoint)->Names()) {
    const TensorView t = *(*checkpoint)->Get(name);
    EXPECT_EQ(t.dtype, DType::kBF16) << name;
    std::vector<float> values(t.NumElements());
    for (int64_t i = 0; i < t.NumElements(); ++i) values[i] = BF16ToF32(t.As<uint16_t>()[i]);
    out.push_back({name, {t.shape, std::move(values)}});
  }
  return out;
}

class HfDenseGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfDenseGoldenTest, PromptLogitsMatchTransformers) {
  const Golden g = LoadGolden(GetParam());
  auto logits = PromptLogits(g.dir, g);
  ASSERT_TRUE(logits.ok()) << logits.status().ToString();
  ASSERT_EQ(logits->size(), g.logits.size());
  const int64_t n = static_cast<int64_t>(g.prompt_ids.size());
  const float error = WorstRelativeError(logits->data(), g.logits.data(), n, g.vocab_size);
  EXPECT_LT(error, kRelativeTolerance);
  RecordProperty("worst_relative_error", std::to_string(error));
  std::printf("[ %s ] worst relative logit error over %lld positions: %.3g\n", GetParam().c_str(),
              static_cast<long long>(n), error);
}

TEST_P(HfDenseGoldenTest, GreedyContinuationWithKvCacheMatchesTransformers) {
  const Golden g = LoadGolden(GetParam());
  auto model = LoadModel(g.dir);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const int64_t n = static_cast<int64_t>(g.prompt_ids.size());
  auto sequence = test::SingleSequence::Create(model->get(), n + static_cast<int64_t>(g.greedy_ids.size()),
                                               kv::KvDtype::kF32);
  ASSERT_TRUE(sequence.ok()) << sequence.status().ToString();
  std::vector<float> logits;
  ASSERT_TRUE(sequence->Append(g.prompt_ids.data(), n, false, &logits).ok());
  std::vector<int32_t> generated;
  float worst = 0.0f;
  for (size_t step = 0; step < g.greedy_ids.size(); ++step) {
    const float error =
        WorstRelativeError(logits.data(), g.greedy_logits.data() + step * g.vocab_size, 1, g.vocab_size);
    worst = std::max(worst, error);
    EXPECT_LT(error, kRelativeTolerance) << "step " << step;
    generated.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    // Feed the reference's token so one early divergence does not hide later comparisons.
    ASSERT_TRUE(sequence->Append(&g.greedy_ids[step], 1, false, &logits).ok());
  }
  EXPECT_EQ(generated, g.greedy_ids);
  std::printf("[ %s ] worst relative logit error over %zu cached decode steps: %.3g\n", GetParam().c_str(),
              g.greedy_ids.size(), worst);
}

// The bf16 file rewritten as f32 and as f16 loads to the same logits (f32: the same values;
// f16: the same values but for f16 subnormals).
TEST_P(HfDenseGoldenTest, F32AndF16CheckpointsMatchTransformers) {
  const Golden g = LoadGolden(GetParam());
  const auto tensors = ReadAsF32(g.dir);
  for (DType dtype : {DType::kF32, DType::kF16}) {
    ScratchDir dir(GetParam() + "_" + std::string(DTypeName(dtype)));
    CopyConfig(g.dir, dir.path());
    std::vector<std::vector<uint16_t>> halves;
    std::vector<SafetensorsEntry> entries;
    halves.reserve(tensors.size());
    for (const auto& [name, value] : tensors) {
      const auto& [shape, floats] = value;
      if (dtype == DType::kF32) {
        entries.push_back({name, dtype, shape, floats.data()});
        continue;
      }
      std::vector<uint16_t>& h = halves.emplace_back(floats.size());
      for (size_t i = 0; i < floats.size(); ++i) h[i] = F32ToF16(floats[i]);
      entries.push_back({name, dtype, shape, h.data()});
    }
    ASSERT_TRUE(WriteSafetensors((dir.path() / "model.safetensors").string(), entries).ok());
    auto logits = PromptLogits(dir.str(), g);
    ASSERT_TRUE(logits.ok()) << logits.status().ToString();
    const float error = WorstRelativeError(logits->data(), g.logits.data(),
                                           static_cast<int64_t>(g.prompt_ids.size()), g.vocab_size);
    EXPECT_LT(error, dtype == DType::kF32 ? kRelativeTolerance : kF16RelativeTolerance) << DTypeName(dtype);
    std::printf("[ %s ] %s checkpoint: worst relative logit error %.3g\n", GetParam().c_str(), DTypeName(dtype).data(),
                error);
  }
}

// Gemma3ForConditionalGeneration (gemma-3-4b and larger) wraps the same text decoder: config.json
// model_type gemma3 with the decoder's fields in text_config, tensors under model.language_model.
// (transformers 5) or language_model.model. (transformers 4), beside a vision tower the text
// decoder does not run. The gemma3 fixture rewritten that way gives the same logits.
TEST(HfDenseGoldenMultimodalTest, Gemma3ConditionalGenerationTextDecoderMatchesTransformers) {
  const Golden g = LoadGolden("gemma3");
  const auto tensors = ReadAsF32(g.dir);
  std::ifstream in(g.dir + "/config.json");
  const nlohmann::json text_config = nlohmann::json::parse(in);
  nlohmann::json config = {{"architectures", {"Gemma3ForConditionalGeneration"}}, {"model_type", "gemma3"},
                           {"text_config", text_config}, {"vision_config", {{"model_type", "siglip_vision_model"}}},
                           {"image_token_index", 255}};
  config["text_config"]["model_type"] = "gemma3_text";
  const std::vector<float> vision(16, 0.5f);
  for (const char* prefix : {"model.language_model.", "language_model.model."}) {
    ScratchDir dir(std::string("mm_") + prefix);
    std::ofstream(dir.path() / "config.json") << config.dump(2);
    std::vector<SafetensorsEntry> entries;
    for (const auto& [name, value] : tensors) {
      EXPECT_EQ(name.rfind("model.", 0), 0u) << name;
      entries.push_back({prefix + name.substr(6), DType::kF32, value.first, value.second.data()});
    }
    entries.push_back({"model.vision_tower.vision_model.post_layernorm.weight", DType::kF32, Shape{16}, vision.data()});
    ASSERT_TRUE(WriteSafetensors((dir.path() / "model.safetensors").string(), entries).ok());
    auto logits = PromptLogits(dir.str(), g);
    ASSERT_TRUE(logits.ok()) << prefix << ": " << logits.status().ToString();
    const float error = WorstRelativeError(logits->data(), g.logits.data(),
                                           static_cast<int64_t>(g.prompt_ids.size()), g.vocab_size);
    EXPECT_LT(error, kRelativeTolerance) << prefix;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfDenseGoldenTest, ::testing::Values("llama", "llama3_rope", "qwen3", "gemma3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ember
