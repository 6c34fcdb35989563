// The amx level end to end: SmolLM2 (Q4_1, Q8_0) and Gemma 3 (Q4_K, Q5_0, Q6_K, Q8_0) prefill
// chunks long enough for the AMX tile GEMMs (m >= kAmxMinRows; the first for Q6_K's too) give the avx512 level's logits bit
// for bit, at 1 and 2 threads. logit_hashes_test.cc's prompts (13 + 7 tokens) stay below the
// tile threshold, so its amx keys equal the avx512 ones without exercising the tiles; this test
// does. Skipped without the amx level or the models (scripts/fetch_models.py).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/isa.h"
#include "core/thread_pool.h"
#include "model/causal_lm.h"
#include "quant/gguf_packed.h"
#include "support/isa_level_restorer.h"
#include "support/model_cache.h"
#include "support/single_sequence.h"

namespace ember {
namespace {

// All logits of a 40-token chunk, then a 24-token one over the cached KV.
std::vector<float> PrefillLogits(CausalLM* model) {
  const int64_t vocab = model->info().vocab_size;
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < 64; ++i) prompt.push_back(static_cast<int32_t>((3 + i * 7919) % vocab));
  static_assert(quant::kAmxMinRows <= 24 && quant::kAmxMinRowsQ6_K <= 40);
  Expected<test::SingleSequence> sequence = test::SingleSequence::Create(model, 64, kv::KvDtype::kF32);
  EXPECT_TRUE(sequence.ok()) << sequence.status().ToString();
  if (!sequence.ok()) return {};
  std::vector<float> logits, all;
  EXPECT_TRUE(sequence->Append(prompt.data(), 40, /*all_logits=*/true, &logits).ok());
  all = logits;
  EXPECT_TRUE(sequence->Append(prompt.data() + 40, 24, /*all_logits=*/true, &logits).ok());
  all.insert(all.end(), logits.begin(), logits.end());
  EXPECT_EQ(static_cast<int64_t>(all.size()), 64 * vocab);
  return all;
}

class AmxPrefillTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!IsaSupported(Isa::kAmx)) GTEST_SKIP() << "no amx level here: " << IsaUnavailableReason(Isa::kAmx);
    restorer_.emplace();
  }

 private:
  std::optional<test::IsaLevelRestorer> restorer_;
};

TEST_P(AmxPrefillTest, LogitsEqualTheAvx512Ones) {
  const std::string path = test::ModelCacheDir() + "/" + GetParam();
  if (!std::ifstream(path).good()) GTEST_SKIP() << path << " not fetched (scripts/fetch_models.py)";
  // Both levels read the same packed copy, made at load under amx.
  ASSERT_TRUE(SelectIsa("amx").ok());
  Expected<std::unique_ptr<CausalLM>> model = LoadModel(path, LoadOptions{});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ThreadPool::SetGlobalThreads(1);
  ASSERT_TRUE(SelectIsa("avx512").ok());
  const std::vector<float> want = PrefillLogits(model->get());
  ASSERT_FALSE(want.empty());
  ASSERT_TRUE(SelectIsa("amx").ok());
  for (const int threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    ThreadPool::SetGlobalThreads(threads);
    const std::vector<float> got = PrefillLogits(model->get());
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, AmxPrefillTest,
                         ::testing::Values("SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.substr(0, info.param.find_first_of("-."));
                         });

}  // namespace
}  // namespace ember
