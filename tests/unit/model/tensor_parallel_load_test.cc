// Loaders take a tensor-parallel rank's shard (model/tensor_parallel.h): loaded with a
// communicator that says "rank r of n", a model holds its block of the heads (and KV heads), its
// block of the vocabulary and about 1/n of the weights. No collective runs here (nothing is
// forwarded); tests/e2e/test_tensor_parallel.py runs the ranks for real under mpirun.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "core/check.h"
#include "model/causal_lm.h"
#include "support/source_dir.h"

namespace ember {
namespace {

// Rank `rank` of `size`, for loading only: every collective is a bug here.
class RankForLoading final : public exec::Communicator {
 public:
  RankForLoading(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  void AllReduceSum(float*, int64_t) override { Fail(); }
  void ReduceScatterSum(const float*, int64_t, float*) override { Fail(); }
  void AllGather(const float*, int64_t, float*) override { Fail(); }
  void AllToAllV(const float*, std::span<const int64_t>, float*, std::span<const int64_t>, int64_t) override { Fail(); }
  void Broadcast(void*, int64_t, int) override { Fail(); }
  void Send(const void*, int64_t, int, int) override { Fail(); }
  void Recv(void*, int64_t, int, int) override { Fail(); }
  int64_t AllReduceMin(int64_t) override {
    Fail();
    return 0;
  }

 private:
  [[noreturn]] static void Fail() { EMBER_CHECK(false, "a collective while loading"); __builtin_unreachable(); }
  int rank_, size_;
};

std::unique_ptr<CausalLM> Load(const std::string& path, exec::Communicator* comm) {
  LoadOptions options;
  options.communicator = comm;
  auto model = LoadModel(path, options);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return model.ok() ? std::move(*model) : nullptr;
}

void ExpectShard(const std::string& path, int size, int64_t kv_heads_per_rank) {
  auto whole = Load(path, nullptr);
  ASSERT_NE(whole, nullptr);
  for (int rank = 0; rank < size; ++rank) {
    RankForLoading comm(rank, size);
    auto shard = Load(path, &comm);
    ASSERT_NE(shard, nullptr);
    EXPECT_EQ(shard->info().vocab_size, whole->info().vocab_size) << "the vocabulary the engine sees stays whole";
    EXPECT_EQ(shard->KvLayerSpecs().front().num_kv_heads, kv_heads_per_rank);
    EXPECT_EQ(shard->lm_head(), nullptr) << "a vocab-parallel head is not whole: drafters cannot share it";
    const double fraction = static_cast<double>(shard->weight_bytes().total) / whole->weight_bytes().total;
    // Norms, routers and latent projections stay whole, so a little over 1/size.
    EXPECT_GT(fraction, 0.9 / size) << path;
    EXPECT_LT(fraction, 1.3 / size) << path;
  }
}

TEST(TensorParallelLoad, MuseSparkHoldsItsHeadsExpertsAndVocabulary) {
  const std::string tiny_a = std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/tiny_a";
  ExpectShard(tiny_a, 2, 1);
  ExpectShard(tiny_a, 4, 1);  // 2 KV heads over 4 ranks: each held by two ranks
}

TEST(TensorParallelLoad, HfDenseHoldsItsHeads) {
  ExpectShard(std::string(EMBER_SOURCE_DIR) + "/tests/golden/hf_dense/llama", 2, 1);
}

TEST(TensorParallelLoad, GgufHoldsItsHeads) {
  const char* home = std::getenv("HOME");
  const std::string smollm = std::string(home ? home : "") + "/.cache/ember/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(smollm)) GTEST_SKIP() << smollm << " is not fetched (make models)";
  ExpectShard(smollm, 3, 1);
}

TEST(TensorParallelLoad, ImpossibleShapesAreRefused) {
  RankForLoading comm(0, 3);
  LoadOptions options;
  options.communicator = &comm;
  auto model = LoadModel(std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/tiny_b", options);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("does not divide the 256 MLP intermediate features"), std::string::npos)
      << model.status().message();
}


TEST(PipelineStage, ConsecutiveLayerBlocksLongerFirst) {
  PipelineStage stage;
  stage.num_stages = 4;
  std::vector<std::pair<int64_t, int64_t>> blocks;
  for (int i = 0; i < 4; ++i) {
    stage.index = i;
    auto s = stage.ForModel(30);
    ASSERT_TRUE(s.ok());
    blocks.emplace_back(s->layers.begin, s->layers.count);
  }
  EXPECT_EQ(blocks, (std::vector<std::pair<int64_t, int64_t>>{{0, 8}, {8, 8}, {16, 7}, {23, 7}}));
  stage.num_stages = 31;
  stage.index = 0;
  EXPECT_FALSE(stage.ForModel(30).ok());
  stage.num_stages = 1;
  auto whole = stage.ForModel(30);
  ASSERT_TRUE(whole.ok());
  EXPECT_TRUE(whole->holds(29));
}


TEST(TensorParallelLoad, LoadTimeQuantizedShardsHoldTheirShare) {
  // Each rank quantizes whole tensors (one process's scales) and keeps its block of the codes.
  const std::string path = std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/tiny_a";
  for (auto format : {quant::WeightFormat::kNvfp4, quant::WeightFormat::kMxfp4}) {
    LoadOptions options;
    options.quantization = format;
    auto whole = LoadModel(path, options);
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    RankForLoading comm(1, 2);
    options.communicator = &comm;
    auto shard = LoadModel(path, options);
    if (format == quant::WeightFormat::kMxfp4) {
      // tiny_a's 96 expert features give each of 2 ranks 48: not whole 32-wide MXFP4 blocks.
      ASSERT_FALSE(shard.ok());
      EXPECT_NE(shard.status().message().find("would cut its 32-wide scale blocks"), std::string::npos)
          << shard.status().message();
      continue;
    }
    ASSERT_TRUE(shard.ok()) << shard.status().ToString();
    const double fraction = static_cast<double>((*shard)->weight_bytes().total) / (*whole)->weight_bytes().total;
    EXPECT_GT(fraction, 0.45);
    EXPECT_LT(fraction, 0.65);
  }
}

}  // namespace
}  // namespace ember
