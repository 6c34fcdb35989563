// Each sampler transform against the brute-force reference in sampler_reference.h.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "runner/sampler/penalties.h"
#include "runner/sampler/top_k_top_p.h"
#include "sampler_reference.h"

namespace ember {
namespace {

using testing::RandomLogits;
using testing::ReferenceFilteredProbs;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Kept set and probabilities of FilterDistribution, as a dense vector.
std::vector<double> FilteredProbs(const std::vector<float>& logits, float temperature, int top_k, float top_p,
                                  float min_p, bool* all_tokens = nullptr) {
  FilterScratch scratch;
  FilteredDistribution dist;
  EXPECT_TRUE(FilterDistribution(logits, temperature, top_k, top_p, min_p, &scratch, &dist));
  std::vector<double> probs(logits.size(), 0.0);
  int32_t previous = -1;
  for (int64_t i = 0; i < dist.size(); ++i) {
    EXPECT_GT(dist.id(i), previous) << "ids must be increasing";
    previous = dist.id(i);
    probs[static_cast<size_t>(dist.id(i))] = dist.weights[static_cast<size_t>(i)] / dist.total;
  }
  if (all_tokens != nullptr) *all_tokens = dist.all_tokens;
  return probs;
}

void ExpectSameDistribution(const std::vector<double>& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i] > 0.0, want[i] > 0.0) << what << ": token " << i << " kept differently";
    ASSERT_NEAR(got[i], want[i], 1e-6 + 1e-5 * want[i]) << what << ": token " << i;
  }
}

struct FilterCase {
  float temperature;
  int top_k;
  float top_p;
  float min_p;
};

TEST(FilterDistributionTest, MatchesBruteForceOnRandomRows) {
  const FilterCase cases[] = {
      {1.0f, 0, 1.0f, 0.0f},    {0.7f, 0, 1.0f, 0.0f},    {2.5f, 0, 1.0f, 0.0f},   {1.0f, 1, 1.0f, 0.0f},
      {1.0f, 5, 1.0f, 0.0f},    {0.8f, 50, 1.0f, 0.0f},   {1.0f, 0, 0.9f, 0.0f},   {0.6f, 0, 0.5f, 0.0f},
      {1.3f, 0, 0.99f, 0.0f},   {1.0f, 0, 0.999f, 0.0f},  {1.0f, 0, 1.0f, 0.05f},  {0.5f, 0, 1.0f, 0.3f},
      {1.0f, 40, 0.8f, 0.0f},   {0.9f, 40, 0.95f, 0.02f}, {1.0f, 0, 0.7f, 0.01f},  {1.2f, 0, 0.95f, 0.2f},
      {1.0f, 3000, 0.9f, 0.0f}, {0.05f, 0, 0.9f, 0.0f},
  };
  // Peaked (scale 6) rows take the first top-p cut; flat ones (scale 0.05 / 0.5) fall through to
  // the lower cuts.
  for (size_t vocab : {7u, 100u, 5000u}) {
    for (double scale : {0.05, 0.5, 6.0}) {
      const std::vector<float> logits = RandomLogits(vocab, scale, static_cast<uint32_t>(vocab * 10 + scale * 100));
      for (const FilterCase& c : cases) {
        SCOPED_TRACE(::testing::Message() << "vocab " << vocab << " scale " << scale << " T " << c.temperature
                                          << " k " << c.top_k << " p " << c.top_p << " min_p " << c.min_p);
        ExpectSameDistribution(FilteredProbs(logits, c.temperature, c.top_k, c.top_p, c.min_p),
                               ReferenceFilteredProbs(logits, c.temperature, c.top_k, c.top_p, c.min_p), "random");
      }
    }
  }
}

TEST(FilterDistributionTest, TiesAreKeptTogether) {
  const std::vector<float> logits = {2.0f, 1.0f, 2.0f, 0.0f, 2.0f, 1.0f};
  // top_k = 1 keeps every token tied with the largest logit.
  std::vector<double> p = FilteredProbs(logits, 1.0f, 1, 1.0f, 0.0f);
  EXPECT_EQ(p, (std::vector<double>{1.0 / 3, 0, 1.0 / 3, 0, 1.0 / 3, 0}));
  // top_k = 4 reaches into the tied 1.0s: both are kept.
  p = FilteredProbs(logits, 1.0f, 4, 1.0f, 0.0f);
  for (size_t i : {0u, 1u, 2u, 4u, 5u}) EXPECT_GT(p[i], 0.0) << i;
  EXPECT_EQ(p[3], 0.0);
  // top_p reached inside a run of ties keeps the whole run.
  p = FilteredProbs(logits, 1.0f, 0, 0.4f, 0.0f);
  EXPECT_EQ(p, (std::vector<double>{1.0 / 3, 0, 1.0 / 3, 0, 1.0 / 3, 0}));
  ExpectSameDistribution(p, ReferenceFilteredProbs(logits, 1.0, 0, 0.4, 0.0), "ties");
  // min_p = 1 keeps exactly the maxima.
  EXPECT_EQ(FilteredProbs(logits, 1.0f, 0, 1.0f, 1.0f), (std::vector<double>{1.0 / 3, 0, 1.0 / 3, 0, 1.0 / 3, 0}));
  // +0 and -0 are equal logits, also to the chunked scans that compare integer keys.
  std::vector<float> zeros(100, -1.0f);
  zeros[40] = 0.0f;
  zeros[70] = -0.0f;
  for (int k : {1, 2}) {
    p = FilteredProbs(zeros, 1.0f, k, 1.0f, 0.0f);
    EXPECT_EQ(p[40], 0.5) << k;
    EXPECT_EQ(p[70], 0.5) << k;
  }
  std::swap(zeros[40], zeros[70]);
  EXPECT_EQ(FilteredProbs(zeros, 1.0f, 1, 1.0f, 0.0f)[40], 0.5);
  // Integer logits (many ties) against the reference.
  std::vector<float> coarse(3000);
  for (size_t i = 0; i < coarse.size(); ++i) coarse[i] = static_cast<float>((i * 7919) % 5);
  for (const FilterCase& c : {FilterCase{1.0f, 1, 1.0f, 0.0f}, FilterCase{1.0f, 700, 1.0f, 0.0f},
                              FilterCase{0.7f, 0, 0.5f, 0.0f}, FilterCase{1.0f, 0, 0.9f, 0.1f},
                              FilterCase{0.3f, 1000, 0.6f, 0.0f}}) {
    ExpectSameDistribution(FilteredProbs(coarse, c.temperature, c.top_k, c.top_p, c.min_p),
                           ReferenceFilteredProbs(coarse, c.temperature, c.top_k, c.top_p, c.min_p), "coarse");
  }
}

TEST(FilterDistributionTest, BoundaryValues) {
  const std::vector<float> logits = RandomLogits(2000, 1.0, 3);
  // Nothing to filter: the dense path, every token kept.
  bool all_tokens = false;
  std::vector<double> p = FilteredProbs(logits, 1.0f, 0, 1.0f, 0.0f, &all_tokens);
  EXPECT_TRUE(all_tokens);
  for (double v : p) EXPECT_GT(v, 0.0);
  // top_k -1 and top_k >= vocabulary are off.
  EXPECT_EQ(FilteredProbs(logits, 1.0f, -1, 1.0f, 0.0f), p);
  EXPECT_EQ(FilteredProbs(logits, 1.0f, 2000, 1.0f, 0.0f), p);
  // A tiny top_p keeps the argmax alone.
  const size_t argmax = static_cast<size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  p = FilteredProbs(logits, 1.0f, 0, 1e-7f, 0.0f);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(p[i], i == argmax ? 1.0 : 0.0) << i;
  // Masked tokens are never kept by a filter and weigh nothing otherwise.
  std::vector<float> masked = logits;
  masked[argmax] = kNegInf;
  masked[5] = kNegInf;
  p = FilteredProbs(masked, 1.0f, 0, 0.9f, 0.0f);
  EXPECT_EQ(p[argmax], 0.0);
  EXPECT_EQ(p[5], 0.0);
  p = FilteredProbs(masked, 1.0f, 0, 1.0f, 0.0f);
  EXPECT_EQ(p[argmax], 0.0);
  // Everything masked: no distribution.
  FilterScratch scratch;
  FilteredDistribution dist;
  EXPECT_FALSE(FilterDistribution(std::vector<float>(10, kNegInf), 1.0f, 0, 0.9f, 0.0f, &scratch, &dist));
}

TEST(FilterDistributionTest, TemperatureScalesLogits) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f};
  for (float t : {0.25f, 1.0f, 3.0f}) {
    const std::vector<double> p = FilteredProbs(logits, t, 0, 1.0f, 0.0f);
    double sum = 0.0;
    for (float l : logits) sum += std::exp(l / t);
    for (size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(p[i], std::exp(logits[i] / t) / sum, 2e-6) << t;
  }
}

TEST(KthLargestTest, HeapAndSelectionAgreeWithSort) {
  std::vector<float> scratch;
  for (size_t n : {1u, 10u, 1000u}) {
    std::vector<float> values = RandomLogits(n, 1.0, static_cast<uint32_t>(n));
    values[0] = values[n - 1];  // a tie
    std::vector<float> sorted = values;
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    for (size_t k = 1; k <= n; k += std::max<size_t>(1, n / 37)) {
      EXPECT_EQ(KthLargest(values, static_cast<int64_t>(k), &scratch), sorted[k - 1]) << n << " " << k;
    }
    EXPECT_EQ(KthLargest(values, static_cast<int64_t>(n), &scratch), sorted[n - 1]);
  }
}

TEST(TopPBoundaryTest, MatchesASortedScan) {
  for (size_t n : {1u, 50u, 5000u}) {
    std::vector<float> weights = RandomLogits(n, 1.0, static_cast<uint32_t>(n + 1));
    for (float& w : weights) w = std::exp(std::round(w * 4.0f) / 4.0f);  // coarse values: many ties
    std::vector<float> sorted = weights;
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    double total = 0.0;
    for (float w : sorted) total += w;
    for (double fraction : {1e-9, 0.1, 0.5, 0.9, 0.999, 2.0}) {
      const double target = fraction * total;
      float want = -1.0f;
      double cumulative = 0.0;
      for (float w : sorted) {
        cumulative += w;
        if (cumulative >= target) {
          want = w;
          break;
        }
      }
      std::vector<float> scratch = weights;
      EXPECT_EQ(TopPBoundary(scratch, target), want) << n << " " << fraction;
    }
  }
}

TEST(SampleFromDistributionTest, InverseCdfInTokenIdOrderAcrossBlocks) {
  // Dense 5,000 tokens (five blocks), and the same row through top-k (a list of ids).
  const std::vector<float> logits = RandomLogits(5000, 1.5, 8);
  FilterScratch scratch;
  for (int top_k : {0, 3000}) {
    FilteredDistribution dist;
    ASSERT_TRUE(FilterDistribution(logits, 1.0f, top_k, 1.0f, 0.0f, &scratch, &dist));
    for (double u : {0.0, 1e-9, 0.013, 0.25, 0.5, 0.77, 0.999, 1.0 - 1e-16}) {
      double cumulative = 0.0;
      int32_t want = -1;
      for (int64_t i = 0; i < dist.size(); ++i) {
        cumulative += dist.weights[static_cast<size_t>(i)];
        if (cumulative > u * dist.total) {
          want = dist.id(i);
          break;
        }
      }
      if (want < 0) want = dist.id(dist.size() - 1);
      EXPECT_EQ(SampleFromDistribution(dist, u), want) << "top_k " << top_k << " u " << u;
    }
  }
}

TEST(PenaltiesTest, MatchTheFormulas) {
  const size_t vocab = 50;
  const std::vector<float> logits = RandomLogits(vocab, 2.0, 11);
  const std::vector<int32_t> prompt = {1, 2, 3, 3, 7, 40, 2};
  const std::vector<int32_t> output = {3, 9, 9, 9, 12, 40, 12, 0};
  std::vector<uint8_t> seen(vocab, 0);
  std::vector<int32_t> counts(vocab, 0);
  for (float rep : {1.3f, 0.7f}) {
    for (auto [presence, frequency] : {std::pair{0.5f, 0.0f}, std::pair{0.0f, 0.4f}, std::pair{-1.5f, 1.2f}}) {
      std::vector<float> got = logits;
      ApplyRepetitionPenalty(rep, prompt, output, got, &seen);
      ApplyPresenceFrequencyPenalties(presence, frequency, output, got, &counts);
      for (size_t t = 0; t < vocab; ++t) {
        float want = logits[t];
        const bool in_prompt = std::find(prompt.begin(), prompt.end(), static_cast<int32_t>(t)) != prompt.end();
        const int count = static_cast<int>(std::count(output.begin(), output.end(), static_cast<int32_t>(t)));
        if (in_prompt || count > 0) want = want > 0 ? want / rep : want * rep;
        if (count > 0) want -= frequency * static_cast<float>(count) + presence;
        EXPECT_FLOAT_EQ(got[t], want) << "token " << t << " rep " << rep;
      }
      // The scratch is left clean for the next row.
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 0), static_cast<int64_t>(vocab));
      EXPECT_EQ(std::count(counts.begin(), counts.end(), 0), static_cast<int64_t>(vocab));
    }
  }
}

TEST(PenaltiesTest, MaskTokens) {
  std::vector<float> logits = {1, 2, 3, 4};
  MaskTokens(std::vector<int32_t>{3, 1, 3}, logits);
  EXPECT_EQ(logits, (std::vector<float>{1, kNegInf, 3, kNegInf}));
}

}  // namespace
}  // namespace ember
