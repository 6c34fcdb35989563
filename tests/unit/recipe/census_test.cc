// The checkpoint sizes of reference/muse_spark.md §2.3a, computed from the tensor census.
#include "recipe/census.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "formats/gguf.h"
#include "recipe/memory.h"
#include "recipe/model_source.h"

namespace ember::recipe {
namespace {

int64_t PresetBytes(const std::string& checkpoint) {
  auto model = DescribeModel(kMuseSparkOpenPreset);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  auto tensors = CensusFor(*model, checkpoint);
  EXPECT_TRUE(tensors.ok()) << tensors.status().ToString();
  return TotalBytes(*tensors);
}

// The seed's figures (seed 003: "roughly 1.64 TB of BF16 weights, about 509 GB for Quark MXFP4
// and about 533 GB for NVFP4"), to within 2%.
TEST(CensusTest, PresetReproducesTheSeedCheckpointSizes) {
  EXPECT_NEAR(PresetBytes("bf16") / 1.64e12, 1.0, 0.02);
  EXPECT_NEAR(PresetBytes("mxfp4") / 509e9, 1.0, 0.02);
  EXPECT_NEAR(PresetBytes("nvfp4") / 533e9, 1.0, 0.02);
  // BF16 matches the §1.2 census of the published files (1,644,333,393,864 bytes, which include
  // the safetensors headers) to within a megabyte.
  EXPECT_NEAR(static_cast<double>(PresetBytes("bf16")), 1644333393864.0, 1e6);
  // Finer than the 2% the issue asks: §2.3a derives 508.9 GB and 533.0 GB.
  EXPECT_NEAR(PresetBytes("mxfp4") / 1e9, 508.9, 0.1);
  EXPECT_NEAR(PresetBytes("nvfp4") / 1e9, 533.0, 0.1);
}

TEST(CensusTest, Nvfp4LayoutKeepsTheFirstAndLastExpertLayersInBf16) {
  auto model = DescribeModel(kMuseSparkOpenPreset);
  ASSERT_TRUE(model.ok());
  auto tensors = CensusFor(*model, "nvfp4");
  ASSERT_TRUE(tensors.ok());
  auto find = [&](const std::string& name) -> const TensorEntry* {
    for (const TensorEntry& t : *tensors) {
      if (t.name == name) return &t;
    }
    return nullptr;
  };
  const std::string p = "model.language_model.layers.";
  ASSERT_NE(find(p + "0.mlp.experts.gate_up_proj"), nullptr);
  EXPECT_EQ(find(p + "0.mlp.experts.gate_up_proj")->dtype, "bf16");
  EXPECT_EQ(find(p + "61.mlp.experts.down_proj")->dtype, "bf16");
  EXPECT_EQ(find(p + "0.mlp.experts.gate_up_proj_weight_scale"), nullptr);
  // §2.2: codes [256, 8192, 2048] u8, scales [256, 8192, 256] e4m3, global scales [256, 2] f32 x 2.
  const TensorEntry* codes = find(p + "1.mlp.experts.gate_up_proj");
  ASSERT_NE(codes, nullptr);
  EXPECT_EQ(codes->shape, (std::vector<int64_t>{256, 8192, 2048}));
  EXPECT_EQ(codes->bytes, int64_t{256} * 8192 * 2048);
  const TensorEntry* scales = find(p + "1.mlp.experts.gate_up_proj_weight_scale");
  ASSERT_NE(scales, nullptr);
  EXPECT_EQ(scales->shape, (std::vector<int64_t>{256, 8192, 256}));
  EXPECT_EQ(scales->dtype, "e4m3");
  EXPECT_EQ(find(p + "1.mlp.experts.gate_up_proj_scales_f32")->bytes, 256 * 4 * 4);
  // Routers stay F32, attention BF16.
  EXPECT_EQ(find(p + "30.mlp.gate.weight")->dtype, "f32");
  EXPECT_EQ(find(p + "30.self_attn.q_proj.weight")->bytes, int64_t{8192} * 8192 * 2);
}

TEST(CensusTest, MxFp4ScalesAreOneE8m0BytePer32) {
  auto model = DescribeModel(kMuseSparkOpenPreset);
  ASSERT_TRUE(model.ok());
  auto tensors = CensusFor(*model, "mxfp4");
  ASSERT_TRUE(tensors.ok());
  int64_t scale_bytes = 0, code_bytes = 0;
  for (const TensorEntry& t : *tensors) {
    if (t.dtype == "e8m0") scale_bytes += t.bytes;
    if (t.dtype == "e2m1x2") code_bytes += t.bytes;
  }
  // 4-bit codes are 2 elements per byte, one scale per 32 elements: scales = codes / 16.
  EXPECT_EQ(scale_bytes * 16, code_bytes);
}

TEST(CensusTest, HybridKvAtOneMillionTokensIsSlightlyMoreThanAQuarter) {
  auto model = DescribeModel(kMuseSparkOpenPreset);
  ASSERT_TRUE(model.ok());
  auto ratio = HybridKvRatio(model->kv_layers, kv::KvDtype::kBF16, 1 << 20);
  ASSERT_TRUE(ratio.ok());
  EXPECT_GT(*ratio, 0.25);
  EXPECT_LT(*ratio, 0.27);
}

// Muse Spark always has its own output head (transformers never ties it), so the census lists
// lm_head.weight whatever tie_word_embeddings says.
TEST(CensusTest, MuseSparkCensusListsLmHeadEvenWithTieWordEmbeddings) {
  auto config = MuseSparkConfig::FromJson({{"model_type", "muse_spark_text"},
                                           {"vocab_size", 64},
                                           {"hidden_size", 32},
                                           {"num_hidden_layers", 2},
                                           {"num_attention_heads", 4},
                                           {"num_key_value_heads", 2},
                                           {"num_local_experts", 4},
                                           {"num_experts_per_tok", 2},
                                           {"moe_hidden_size", 16},
                                           {"moe_intermediate_size", 16},
                                           {"tie_word_embeddings", true}},
                                          "config.json");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto format = FindFormat("bf16");
  ASSERT_TRUE(format.ok());
  auto tensors = MuseSparkCensus(*config, **format, 0);
  ASSERT_TRUE(tensors.ok()) << tensors.status().ToString();
  const auto lm_head = std::find_if(tensors->begin(), tensors->end(),
                                    [](const TensorEntry& t) { return t.name == "lm_head.weight"; });
  ASSERT_NE(lm_head, tensors->end());
  EXPECT_EQ(lm_head->bytes, 64 * 32 * 2);
  EXPECT_EQ(SumByComponent(*tensors)[static_cast<int>(Component::kLmHead)], 64 * 32 * 2);
}

TEST(CensusTest, UnknownFormatIsAClearError) {
  auto f = FindFormat("int3");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("nvfp4"), std::string::npos);
}

TEST(CensusTest, FormatsTableIsValidated) {
  EXPECT_FALSE(ParseFormats("{}").ok());
  EXPECT_FALSE(ParseFormats(R"({"formats": [{"name": "x"}]})").ok());
}

TEST(CensusTest, GgufCensusIsTheFilesTensorTable) {
  const char* home = std::getenv("HOME");
  const char* cache = std::getenv("EMBER_MODEL_CACHE");
  const std::filesystem::path dir = cache && *cache ? cache : std::string(home ? home : "/") + "/.cache/ember/models";
  const auto path = dir / "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "SmolLM2 not fetched (scripts/fetch_models.py)";
  auto file = GgufFile::Open(path.string());
  ASSERT_TRUE(file.ok());
  const std::vector<TensorEntry> tensors = GgufCensus(**file);
  ASSERT_EQ(tensors.size(), (*file)->tensors().size());
  int64_t stored = 0;
  for (const GgufTensor& t : (*file)->tensors()) stored += t.bytes;
  EXPECT_EQ(TotalBytes(tensors), stored);
  const ComponentBytes by = SumByComponent(tensors);
  EXPECT_GT(by[static_cast<int>(Component::kEmbeddings)], 0);
  EXPECT_GT(by[static_cast<int>(Component::kAttention)], 0);
  EXPECT_GT(by[static_cast<int>(Component::kDenseMlp)], 0);
  EXPECT_EQ(by[static_cast<int>(Component::kExperts)], 0);
}

}  // namespace
}  // namespace ember::recipe
