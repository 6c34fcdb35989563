// Brute-force references for the sampler tests: full sorts and explicit loops in double, written
// from the definitions and sharing no code with src/runner/sampler.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace ember::testing {

// Probability of every token after temperature, top-k, top-p and min-p (0 for removed tokens).
inline std::vector<double> ReferenceFilteredProbs(const std::vector<float>& logits, double temperature, int top_k,
                                                  double top_p, double min_p) {
  const size_t n = logits.size();
  std::vector<bool> kept(n, true);
  if (top_k > 0 && static_cast<size_t>(top_k) < n) {
    std::vector<float> sorted = logits;
    std::sort(sorted.begin(), sorted.end(), [](float a, float b) { return a > b; });
    const float kth = sorted[static_cast<size_t>(top_k) - 1];
    for (size_t i = 0; i < n; ++i) kept[i] = logits[i] >= kth;
  }
  auto softmax_over_kept = [&]() {
    double max = -std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < n; ++i) {
      if (kept[i]) max = std::max(max, static_cast<double>(logits[i]));
    }
    std::vector<double> p(n, 0.0);
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) {
      if (kept[i]) sum += p[i] = std::exp((logits[i] - max) / temperature);
    }
    for (double& v : p) v /= sum;
    return p;
  };
  std::vector<double> probs = softmax_over_kept();
  if (top_p < 1.0) {
    std::vector<double> sorted = probs;
    std::sort(sorted.begin(), sorted.end(), [](double a, double b) { return a > b; });
    double cumulative = 0.0;
    double boundary = 0.0;
    for (double p : sorted) {
      cumulative += p;
      if (cumulative >= top_p) {
        boundary = p;
        break;
      }
    }
    for (size_t i = 0; i < n; ++i) kept[i] = kept[i] && probs[i] >= boundary;
    probs = softmax_over_kept();
  }
  if (min_p > 0.0) {
    const double max_prob = *std::max_element(probs.begin(), probs.end());
    for (size_t i = 0; i < n; ++i) kept[i] = kept[i] && probs[i] >= min_p * max_prob;
    probs = softmax_over_kept();
  }
  return probs;
}

inline std::vector<double> ReferenceLogSoftmax(const std::vector<float>& logits) {
  double max = -std::numeric_limits<double>::infinity();
  for (float l : logits) max = std::max(max, static_cast<double>(l));
  double sum = 0.0;
  for (float l : logits) sum += std::exp(l - max);
  std::vector<double> out;
  for (float l : logits) out.push_back(l - max - std::log(sum));
  return out;
}

inline std::vector<float> RandomLogits(size_t n, double scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<float> logits(n);
  for (float& l : logits) l = static_cast<float>(normal(rng));
  return logits;
}

// Pearson's chi-square of observed counts against expected probabilities (bins with p > 0).
inline double ChiSquare(const std::vector<int64_t>& counts, const std::vector<double>& probs, int64_t draws) {
  double chi2 = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] <= 0.0) continue;
    const double expected = probs[i] * static_cast<double>(draws);
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi2;
}

}  // namespace ember::testing
