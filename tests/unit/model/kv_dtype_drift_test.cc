// What storing K/V in f16, bf16 or fp8 costs on the real reference models (skipped when
// scripts/fetch_models.py has not fetched them): the next-token distributions of a short English
// prompt against f32 KV, as mean KL(f32 || reduced) and the worst |logit| change. These Q4 models
// quantize activations to 8 bits before every matmul, so any perturbation, even a different f32
// summation order in attention, flips some of those roundings: the "floor" line (f32 KV with the
// generic instead of the active kernel variant) shows that noise level, and f16/bf16/fp8 KV land
// close to it. The bounds are ~3-4x the measured values, far below what a misplaced row or a
// wrong fp8 scale does (KL of order 1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/isa.h"
#include "model/causal_lm.h"
#include "support/single_sequence.h"
#include "tokenizer/model_tokenizer.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

// Same rule as scripts/fetch_models.py: $EMBER_MODEL_CACHE, else ~/.cache/ember/models.
fs::path ModelPath(const std::string& name) {
  if (const char* cache = std::getenv("EMBER_MODEL_CACHE"); cache && *cache) return fs::path(cache) / name;
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : "/") / ".cache" / "ember" / "models" / name;
}

struct Drift {
  double mean_kl = 0;
  double max_logit_diff = 0;
};

Drift Compare(const std::vector<float>& ref, const std::vector<float>& ours, int64_t rows, int64_t vocab) {
  Drift drift;
  auto log_total = [vocab](const float* x) {
    double mx = x[0], total = 0;
    for (int64_t v = 1; v < vocab; ++v) mx = std::max<double>(mx, x[v]);
    for (int64_t v = 0; v < vocab; ++v) total += std::exp(x[v] - mx);
    return mx + std::log(total);
  };
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = ref.data() + r * vocab;
    const float* q = ours.data() + r * vocab;
    const double lp = log_total(p), lq = log_total(q);
    double kl = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      kl += std::exp(p[v] - lp) * ((p[v] - lp) - (q[v] - lq));
      drift.max_logit_diff = std::max<double>(drift.max_logit_diff, std::fabs(p[v] - q[v]));
    }
    drift.mean_kl += kl / rows;
  }
  return drift;
}

class KvDtypeDriftTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KvDtypeDriftTest, ReducedPrecisionKvStaysCloseToF32) {
  const fs::path path = ModelPath(GetParam());
  if (!fs::exists(path)) GTEST_SKIP() << path << " not fetched (scripts/fetch_models.py)";
  auto model = LoadModel(path.string());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto tokenizer = LoadModelTokenizer(path.string());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  const std::vector<int32_t> ids = (*tokenizer)->Encode(
      "The old lighthouse keeper climbed the spiral stairs every evening to watch the boats come home.",
      /*add_special=*/true, /*parse_special=*/false);
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t vocab = (*model)->info().vocab_size;
  auto run = [&](kv::KvDtype dtype) {
    auto sequence = test::SingleSequence::Create(model->get(), n, dtype);
    EXPECT_TRUE(sequence.ok());
    std::vector<float> logits;
    EXPECT_TRUE(sequence->Append(ids.data(), n, /*all_logits=*/true, &logits).ok());
    return logits;
  };
  const std::vector<float> f32 = run(kv::KvDtype::kF32);
  const std::string active(IsaName(ActiveIsa()));
  ASSERT_TRUE(SelectIsa("generic").ok());
  const Drift floor = Compare(f32, run(kv::KvDtype::kF32), n, vocab);
  ASSERT_TRUE(SelectIsa(active).ok());
  std::printf("[ %s ] floor (f32 KV, generic vs %s kernels): mean KL %.3g, max |logit diff| %.3g\n",
              GetParam().c_str(), active.c_str(), floor.mean_kl, floor.max_logit_diff);
  struct Bound {
    kv::KvDtype dtype;
    double max_kl;
  };
  for (const Bound& b : {Bound{kv::KvDtype::kF16, 2e-2}, Bound{kv::KvDtype::kBF16, 2e-2},
                         Bound{kv::KvDtype::kFp8E4M3, 3e-2}}) {
    const Drift drift = Compare(f32, run(b.dtype), n, vocab);
    std::printf("[ %s ] %s KV vs f32 KV over %lld positions: mean KL %.3g, max |logit diff| %.3g\n",
                GetParam().c_str(), std::string(kv::KvDtypeName(b.dtype)).c_str(), static_cast<long long>(n),
                drift.mean_kl, drift.max_logit_diff);
    EXPECT_LT(drift.mean_kl, b.max_kl) << kv::KvDtypeName(b.dtype);
  }
}

INSTANTIATE_TEST_SUITE_P(RealModels, KvDtypeDriftTest,
                         ::testing::Values("SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"),
                         [](const auto& info) { return info.param.substr(0, info.param.find('-')); });

}  // namespace
}  // namespace ember
