// Lossless in distribution: sampled requests under speculative decoding draw their tokens from the
// target's distribution. Verification samples each drafted position with the request's own
// counter-based draw and keeps the draft while the draw equals it: for a one-hot draft that is
// the standard rejection rule (accept x with probability min(1, p(x) / 1) = p(x); on rejection
// the token comes from p restricted to the other tokens, the normalised residual). This test
// checks it statistically, independent of that argument: thousands of seeded requests with and
// without speculation, on disjoint seeds, and a two-sample chi-square test per drafted position.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "model/causal_lm.h"
#include "runner/local_engine.h"
#include "core/counter_random.h"
#include "spec/draft_model_loader.h"
#include "support/source_dir.h"
#include "unit/runner/local_engine_support.h"
#include "unit/spec/dspark_random_drafter.h"

namespace ember {
namespace {

const std::string kTinyA = std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/tiny_a";

#ifdef EMBER_SANITIZED
constexpr bool kSanitized = true;  // the sanitizer suites check the same paths at a fraction of the draws
#else
constexpr bool kSanitized = false;
#endif
constexpr int kRequests = kSanitized ? 150 : 1500;
constexpr int kTokens = 4;  // token 0 has no draft; tokens 1..3 come through verification

// A proposer that samples its drafts: the tiny model drafting for itself greedily gives a guess g
// per position; the draft token is drawn from q = 0.7 * one-hot(g) + 0.3 * uniform, and q is
// returned with it, so verification takes the standard min(1, p/q) path.
class SamplingProposer final : public spec::Proposer {
 public:
  SamplingProposer(std::unique_ptr<spec::Proposer> greedy, int64_t vocab) : greedy_(std::move(greedy)), vocab_(vocab) {}
  std::string_view name() const override { return "sampling"; }
  void Propose(std::span<const spec::ProposalInput> inputs, std::span<spec::Draft> drafts) override {
    greedy_->Propose(inputs, drafts);
    for (spec::Draft& d : drafts) {
      d.confidences.clear();
      d.probabilities.assign(d.tokens.size() * vocab_, 0.3f / static_cast<float>(vocab_));
      for (size_t j = 0; j < d.tokens.size(); ++j) {
        d.probabilities[j * vocab_ + d.tokens[j]] += 0.7f;
        const double u = SamplingUniform(0xD2AF7 + calls_, static_cast<int64_t>(j));
        if (u >= 0.7) d.tokens[j] = static_cast<int32_t>((u - 0.7) / 0.3 * static_cast<double>(vocab_)) % vocab_;
      }
      ++calls_;
    }
  }
  void OnReleased(spec::RequestId req, std::span<const int32_t> tokens, int64_t num_prompt, bool completed) override {
    greedy_->OnReleased(req, tokens, num_prompt, completed);
  }

 private:
  std::unique_ptr<spec::Proposer> greedy_;
  int64_t vocab_;
  uint64_t calls_ = 0;
};

// counts[position][token] over kRequests requests with seeds first_seed, first_seed + 1, ...
// `sampling_drafts`: replace the configured proposer by SamplingProposer.
std::vector<std::map<int32_t, int>> Sample(const std::string& speculative_config, uint64_t first_seed,
                                           SpecDecodeCounters* spec, bool sampling_drafts = false,
                                           float temperature = 0.6f) {
  EngineOptions o;
  o.kv_cache_dtype = "f32";
  o.max_model_len = 64;
  o.max_num_seqs = 64;
  o.max_num_batched_tokens = 512;
  o.kv_cache_memory_bytes = 64 << 20;
  o.speculative_config = speculative_config;
  std::unique_ptr<LocalEngine> engine = test::MakeEngine(kTinyA, o);
  if (engine == nullptr) return {};
  if (sampling_drafts) {
    spec::DraftModelProposerOptions d;
    d.num_speculative_tokens = 3;
    d.max_num_seqs = o.max_num_seqs;
    d.max_model_len = o.max_model_len;
    auto greedy = spec::LoadDraftModelProposer(kTinyA, kTinyA, engine->model().info(), d);
    EXPECT_TRUE(greedy.ok()) << greedy.status().message();
    engine->runner().set_proposer(
        std::make_unique<SamplingProposer>(std::move(*greedy), engine->model().info().vocab_size));
  }
  EngineCore& core = engine->core();
  for (int i = 0; i < kRequests; ++i) {
    RequestInput in;
    in.prompt_token_ids = {17, 301, 44, 17, 301, 44, 17, 301};
    in.sampling.max_tokens = kTokens;
    in.sampling.temperature = temperature;  // 0.6: peaked enough that the drafter's argmax is often drawn
    in.sampling.seed = first_seed + i;
    in.sampling.ignore_eos = true;
    EXPECT_TRUE(core.AddRequest(i, std::move(in)).ok());
  }
  std::vector<std::vector<int32_t>> outputs(kRequests);
  while (core.HasUnfinished()) {
    for (const RequestOutput& out : core.Step()) {
      outputs[out.req].insert(outputs[out.req].end(), out.new_token_ids.begin(), out.new_token_ids.end());
    }
  }
  std::vector<std::map<int32_t, int>> counts(kTokens);
  for (const auto& tokens : outputs) {
    EXPECT_EQ(tokens.size(), static_cast<size_t>(kTokens));
    for (int p = 0; p < kTokens && p < static_cast<int>(tokens.size()); ++p) ++counts[p][tokens[p]];
  }
  if (spec) *spec = core.Stats().spec_decode;
  return counts;
}

// Upper critical value of chi-square with `df` degrees of freedom at tail probability 1e-3
// (Wilson-Hilferty; z = 3.09).
double ChiSquareCritical(int df) {
  const double z = 3.0902, k = static_cast<double>(df);
  const double t = 1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k));
  return k * t * t * t;
}

// Two-sample chi-square for equal sample sizes over categories with at least 10 draws in all
// (rarer tokens pooled into one category).
void ExpectSameDistribution(const std::map<int32_t, int>& a, const std::map<int32_t, int>& b, int position) {
  std::map<int32_t, std::pair<int, int>> joint;
  for (const auto& [t, n] : a) joint[t].first += n;
  for (const auto& [t, n] : b) joint[t].second += n;
  std::vector<std::pair<int, int>> cells;
  std::pair<int, int> rare{0, 0};
  for (const auto& [t, n] : joint) {
    if (n.first + n.second >= 10) {
      cells.push_back(n);
    } else {
      rare.first += n.first;
      rare.second += n.second;
    }
  }
  if (rare.first + rare.second > 0) cells.push_back(rare);
  ASSERT_GE(cells.size(), 3u) << "position " << position << ": too few outcomes for a meaningful test";
  double statistic = 0;
  for (const auto& [x, y] : cells) statistic += static_cast<double>((x - y) * (x - y)) / (x + y);
  const int df = static_cast<int>(cells.size()) - 1;
  EXPECT_LT(statistic, ChiSquareCritical(df)) << "position " << position << ": chi-square " << statistic << " on "
                                              << df << " degrees of freedom";
  ::testing::Test::RecordProperty("chi_square_position_" + std::to_string(position), std::to_string(statistic) + " df " + std::to_string(df));
}

TEST(SpecDecodeDistribution, SampledTokensFollowTheTargetDistribution) {
  if (kSanitized) GTEST_SKIP() << "statistics need the release suite's 1500 draws per side";
  const auto plain = Sample("", 1, nullptr);
  SpecDecodeCounters spec;
  const auto speculative = Sample(R"({"method":"draft_model","num_speculative_tokens":3,"adaptive":false,"model":")" +
                                      kTinyA + R"("})",
                                  1000000, &spec);
  // The test means something only if drafts were both accepted and rejected often.
  EXPECT_GT(spec.num_accepted_tokens, spec.num_draft_tokens / 10);
  EXPECT_LT(spec.num_accepted_tokens, spec.num_draft_tokens * 9 / 10);
  RecordProperty("accepted", static_cast<int>(spec.num_accepted_tokens));
  RecordProperty("drafted", static_cast<int>(spec.num_draft_tokens));
  for (int p = 0; p < kTokens; ++p) ExpectSameDistribution(plain[p], speculative[p], p);
}

// Drafts drawn from a distribution q go through the standard min(1, p/q) rule and its residual:
// the emitted tokens still follow the target distribution.
TEST(SpecDecodeDistribution, SampledDraftsWithTheirDistributionFollowTheTarget) {
  if (kSanitized) GTEST_SKIP() << "statistics need the release suite's 1500 draws per side";
  const auto plain = Sample("", 1, nullptr);
  SpecDecodeCounters spec;
  const auto speculative = Sample(R"({"method":"draft_model","num_speculative_tokens":3,"adaptive":false,"model":")" +
                                      kTinyA + R"("})",
                                  2000000, &spec, /*sampling_drafts=*/true);
  EXPECT_GT(spec.num_accepted_tokens, spec.num_draft_tokens / 10);
  EXPECT_LT(spec.num_accepted_tokens, spec.num_draft_tokens * 9 / 10);
  RecordProperty("accepted", static_cast<int>(spec.num_accepted_tokens));
  RecordProperty("drafted", static_cast<int>(spec.num_draft_tokens));
  for (int p = 0; p < kTokens; ++p) ExpectSameDistribution(plain[p], speculative[p], p);
}

// DSpark with draft_sample_method "probabilistic": each draft token drawn from the drafter's
// softmax(l_k / T) at the request's temperature, on the drafter's own seeded stream, its Markov
// head conditioned on the drawn token, and verified with min(1, p/q) against those distributions.
TEST(SpecDecodeDistribution, DSparkProbabilisticDraftsFollowTheTarget) {
  if (kSanitized) GTEST_SKIP() << "statistics need the release suite's 1500 draws per side";
  spec::dspark::test::TempDir tmp("dspark_probabilistic");
  spec::dspark::test::RandomDrafterSpec s;
  s.hidden = 128;
  s.vocab = 512;
  s.target_layers = 6;
  s.taps = {1, 3, 5};
  s.block_size = 3;
  spec::dspark::test::WriteRandomDrafter(tmp.path, s);
  // A random drafter's q has little in common with the target's p; at 1.5 rather than 0.6 a few
  // of its draws are still accepted.
  constexpr float kTemperature = 1.5f;
  const auto plain = Sample("", 1, nullptr, false, kTemperature);
  SpecDecodeCounters spec;
  const auto speculative = Sample(R"({"method":"dspark","num_speculative_tokens":3,"adaptive":false,)"
                                  R"("draft_sample_method":"probabilistic","model":")" + tmp.path + R"("})",
                                  3000000, &spec, false, kTemperature);
  // A random drafter agrees with the target rarely (about 0.2% of draft tokens here), so this
  // checks mostly the residual path with DSpark's own q; the acceptance path of the same rule is
  // SampledDraftsWithTheirDistributionFollowTheTarget's, and DSpark's draws against its q are
  // tests/unit/spec/dspark_drafter_test.cc's.
  EXPECT_GT(spec.num_draft_tokens, kRequests) << "DSpark drafted too little for the test to mean anything";
  EXPECT_GT(spec.num_accepted_tokens, 0);
  EXPECT_LT(spec.num_accepted_tokens, spec.num_draft_tokens * 9 / 10);
  RecordProperty("accepted", static_cast<int>(spec.num_accepted_tokens));
  RecordProperty("drafted", static_cast<int>(spec.num_draft_tokens));
  for (int p = 0; p < kTokens; ++p) ExpectSameDistribution(plain[p], speculative[p], p);
}

// The same seeds with and without speculation give the same tokens (the draws are coupled).
TEST(SpecDecodeDistribution, SeededRequestsAreReproducibleUnderSpeculation) {
  const auto plain = Sample("", 7, nullptr);
  const auto speculative = Sample(R"({"method":"draft_model","num_speculative_tokens":3,"adaptive":false,"model":")" +
                                      kTinyA + R"("})",
                                  7, nullptr);
  EXPECT_EQ(plain, speculative);
}

}  // namespace
}  // namespace ember
