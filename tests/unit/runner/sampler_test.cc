// The Sampler end to end: greedy, min_tokens masks, the sampled distribution, reproducibility of
// seeded rows, logprobs.
#include "runner/sampler/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/thread_pool.h"
#include "core/counter_random.h"
#include "sampler_reference.h"

namespace ember {
namespace {

using testing::ChiSquare;
using testing::RandomLogits;
using testing::ReferenceFilteredProbs;
using testing::ReferenceLogSoftmax;

SamplerRow Row(const SamplingParams& params, uint64_t seed, int64_t token_index,
               std::span<const int32_t> output = {}, std::span<const int32_t> prompt = {}) {
  SamplerRow row;
  row.params = &params;
  row.seed = seed;
  row.token_index = token_index;
  row.output_token_ids = output;
  row.prompt_token_ids = prompt;
  return row;
}

// Samples one row from a copy of `logits`.
SampledToken SampleOne(const Sampler& sampler, std::vector<float> logits, const SamplerRow& row) {
  return sampler.Sample(logits, std::span<const SamplerRow>(&row, 1))[0];
}

TEST(SamplerTest, GreedyIsArgmaxWithTiesToTheLowestId) {
  Sampler sampler(5, {});
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  EXPECT_EQ(SampleOne(sampler, {1, 3, 2, 3, 0}, Row(greedy, 0, 0)).token_id, 1);
  EXPECT_EQ(SampleOne(sampler, {-5, -3, -2, -4, -2}, Row(greedy, 0, 0)).token_id, 2);
  greedy.temperature = 1e-30f;  // 1 / T overflows: treated as greedy
  for (uint64_t seed = 0; seed < 20; ++seed) {
    EXPECT_EQ(SampleOne(sampler, {1, 3, 2, 2.9999f, 0}, Row(greedy, seed, 0)).token_id, 1);
  }
  // Filters never change the argmax; penalties do.
  greedy.top_k = 2;
  greedy.top_p = 0.1f;
  greedy.min_p = 0.5f;
  EXPECT_EQ(SampleOne(sampler, {1, 3, 2, 3, 0}, Row(greedy, 9, 4)).token_id, 1);
  greedy.repetition_penalty = 2.0f;
  const std::vector<int32_t> output = {1, 3};
  EXPECT_EQ(SampleOne(sampler, {1, 3, 2, 3, 0}, Row(greedy, 0, 2, output)).token_id, 2);
}

TEST(SamplerTest, MinTokensMasksEosAndStopTokens) {
  const int32_t eos = 3;
  const int32_t stop = 5;
  Sampler sampler(8, {eos});
  SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 2;
  p.stop_token_ids = {stop};
  const std::vector<float> logits = {0, 1, 2, 9, 0, 8, 7, 0};
  EXPECT_EQ(SampleOne(sampler, logits, Row(p, 0, 0)).token_id, 6);
  EXPECT_EQ(SampleOne(sampler, logits, Row(p, 0, 1)).token_id, 6);
  EXPECT_EQ(SampleOne(sampler, logits, Row(p, 0, 2)).token_id, eos);  // min_tokens reached
  p.ignore_eos = true;  // EOS does not end the request, so it is not masked; stop tokens still are
  EXPECT_EQ(SampleOne(sampler, logits, Row(p, 0, 0)).token_id, eos);
  std::vector<float> no_eos = logits;
  no_eos[eos] = 0;
  EXPECT_EQ(SampleOne(sampler, no_eos, Row(p, 0, 0)).token_id, 6);
  // Random rows never draw a masked token; logprobs still describe the raw logits.
  p.ignore_eos = false;
  p.temperature = 1.0f;
  p.logprobs = 2;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    const SampledToken t = SampleOne(sampler, logits, Row(p, seed, 1));
    ASSERT_NE(t.token_id, eos);
    ASSERT_NE(t.token_id, stop);
    ASSERT_EQ(t.logprobs->top_ids, (std::vector<int32_t>{eos, stop}));
  }
}

// Draws `draws` tokens with one seed and consecutive token indices.
std::vector<int64_t> Histogram(const Sampler& sampler, const std::vector<float>& logits, const SamplingParams& p,
                               int64_t draws) {
  std::vector<int64_t> counts(logits.size(), 0);
  std::vector<float> row(logits.size());
  for (int64_t i = 0; i < draws; ++i) {
    row = logits;
    const SamplerRow r = Row(p, 1234, i);
    ++counts[static_cast<size_t>(sampler.Sample(row, std::span<const SamplerRow>(&r, 1))[0].token_id)];
  }
  return counts;
}

TEST(SamplerTest, EmpiricalFrequenciesMatchTheFilteredSoftmax) {
  const std::vector<float> logits = {1.0f, 0.2f, -0.5f, 2.0f, 1.5f, 0.0f, -1.0f, 0.8f, 1.9f, -2.0f, 0.5f, 1.1f};
  Sampler sampler(static_cast<int64_t>(logits.size()), {});
  const int64_t draws = 40000;
  struct Case {
    float temperature;
    int top_k;
    float top_p;
    float min_p;
  };
  for (const Case& c : {Case{1.0f, 0, 1.0f, 0.0f}, Case{0.6f, 0, 1.0f, 0.0f}, Case{0.7f, 8, 1.0f, 0.0f},
                        Case{1.3f, 0, 0.85f, 0.0f}, Case{0.8f, 0, 1.0f, 0.15f}, Case{0.5f, 10, 0.95f, 0.05f}}) {
    SCOPED_TRACE(::testing::Message() << "T " << c.temperature << " k " << c.top_k << " p " << c.top_p << " min_p "
                                      << c.min_p);
    SamplingParams p;
    p.temperature = c.temperature;
    p.top_k = c.top_k;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    const std::vector<int64_t> counts = Histogram(sampler, logits, p, draws);
    const std::vector<double> want = ReferenceFilteredProbs(logits, c.temperature, c.top_k, c.top_p, c.min_p);
    int bins = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (want[i] == 0.0) {
        EXPECT_EQ(counts[i], 0) << "filtered token " << i << " was drawn";
      }
      bins += want[i] > 0.0;
    }
    // Mean + 7 standard deviations of chi-square with bins - 1 degrees of freedom: a correct
    // sampler stays far below it (and the draws are deterministic).
    const double df = bins - 1;
    const double bound = df + 7.0 * std::sqrt(2.0 * df);
    EXPECT_LT(ChiSquare(counts, want, draws), bound);
    // The bound has power: the same counts against the distribution without temperature (or
    // with it applied twice) fail it.
    const double wrong_temperature = c.temperature == 1.0f ? 0.7 : 1.0;
    const std::vector<double> wrong = ReferenceFilteredProbs(logits, wrong_temperature, c.top_k, c.top_p, c.min_p);
    EXPECT_GT(ChiSquare(counts, wrong, draws), 10 * bound);
  }
}

TEST(SamplerTest, SeededRowsIgnoreBatchCompositionOrderAndThreads) {
  const int64_t vocab = 3000;
  Sampler sampler(vocab, {7});
  const std::vector<float> logits = RandomLogits(vocab, 2.0, 5);
  SamplingParams mine;
  mine.top_p = 0.95f;
  mine.repetition_penalty = 1.2f;
  SamplingParams other;
  other.temperature = 0.8f;
  other.top_k = 20;
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<int32_t> output = {1, 2, 3};
  ThreadPool pool(2);

  std::vector<int32_t> alone;
  for (int64_t index = 0; index < 40; ++index) {
    alone.push_back(SampleOne(sampler, logits, Row(mine, 42, index, output)).token_id);
  }
  for (int64_t index = 0; index < 40; ++index) {
    // Our row at position `index % 4` among three others, on two threads.
    std::vector<SamplerRow> rows = {Row(other, 1, index), Row(greedy, 2, 0), Row(other, 3, 100 + index)};
    rows.insert(rows.begin() + index % 4, Row(mine, 42, index, output));
    std::vector<float> batch;
    for (size_t r = 0; r < rows.size(); ++r) batch.insert(batch.end(), logits.begin(), logits.end());
    const std::vector<SampledToken> got = sampler.Sample(batch, rows, index % 2 ? &pool : nullptr);
    EXPECT_EQ(got[static_cast<size_t>(index % 4)].token_id, alone[static_cast<size_t>(index)]) << index;
  }
  // Another seed gives another sequence; so does another token index.
  std::vector<int32_t> other_seed;
  int same_as_shifted = 0;
  for (int64_t index = 0; index < 40; ++index) {
    other_seed.push_back(SampleOne(sampler, logits, Row(mine, 43, index, output)).token_id);
    same_as_shifted += index > 0 && alone[static_cast<size_t>(index)] == other_seed[static_cast<size_t>(index - 1)];
  }
  EXPECT_NE(other_seed, alone);
  EXPECT_LT(same_as_shifted, 20);  // seed 43 is not seed 42 shifted by one step
}

TEST(SamplerTest, UniformNumbersAreInRangeAndBalanced) {
  double sum = 0.0;
  int below_tenth = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double u = SamplingUniform(static_cast<uint64_t>(i % 7), i / 7);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    below_tenth += u < 0.1;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  EXPECT_NEAR(below_tenth, n / 10, 500);
  EXPECT_EQ(SamplingUniform(5, 17), SamplingUniform(5, 17));
  EXPECT_NE(SamplingUniform(5, 17), SamplingUniform(6, 17));
}

TEST(SamplerTest, LogprobsAreTheRawLogSoftmax) {
  const int64_t vocab = 5000;
  Sampler sampler(vocab, {0});
  std::vector<float> logits = RandomLogits(static_cast<size_t>(vocab), 3.0, 21);
  logits[17] = logits[4321] = 12.0f;  // tied best pair: the lower id comes first
  const std::vector<double> want = ReferenceLogSoftmax(logits);
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  for (int32_t i = 0; i < vocab; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });

  const std::vector<int32_t> output = {17, 17, 5};
  for (bool greedy : {true, false}) {
    SamplingParams p;
    p.temperature = greedy ? 0.0f : 1.0f;
    p.logprobs = 20;
    p.repetition_penalty = 1.5f;  // changes the logits sampled from, not the logprobs reported
    p.presence_penalty = 1.0f;
    p.min_tokens = 5;             // masks EOS (token 0) as well
    const SampledToken t = SampleOne(sampler, logits, Row(p, 99, 3, output));
    ASSERT_TRUE(t.logprobs.has_value());
    EXPECT_NEAR(t.logprobs->logprob, want[static_cast<size_t>(t.token_id)], 1e-5);
    ASSERT_EQ(t.logprobs->top_ids.size(), 20u);
    for (size_t i = 0; i < 20; ++i) {
      EXPECT_EQ(t.logprobs->top_ids[i], order[i]) << i;
      EXPECT_NEAR(t.logprobs->top_logprobs[i], want[static_cast<size_t>(order[i])], 1e-5) << i;
    }
    if (greedy) {
      EXPECT_EQ(t.token_id, 4321);  // 17 was penalised
    }
  }
  SamplingParams only_chosen;
  only_chosen.logprobs = 0;
  const SampledToken t = SampleOne(sampler, logits, Row(only_chosen, 1, 0));
  EXPECT_TRUE(t.logprobs->top_ids.empty());
  EXPECT_NEAR(t.logprobs->logprob, want[static_cast<size_t>(t.token_id)], 1e-5);
  EXPECT_FALSE(SampleOne(sampler, logits, Row(SamplingParams(), 1, 0)).logprobs.has_value());
}

TEST(SamplerTest, EverythingMaskedFallsBackToTheLowestId) {
  Sampler sampler(3, {0});
  SamplingParams p;
  p.min_tokens = 1;
  p.stop_token_ids = {1, 2};
  EXPECT_EQ(SampleOne(sampler, {1, 2, 3}, Row(p, 0, 0)).token_id, 0);
}

}  // namespace
}  // namespace ember
