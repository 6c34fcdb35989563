#include "runner/sampler/top_k_top_p.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>

#include "core/check.h"

namespace ember {
namespace {

// Below vocabulary / kHeapFactor a heap of k values beats nth_element over a copy.
constexpr int64_t kHeapFactor = 16;

// The weight at which the cumulative weight, in decreasing order, first reaches `target`, or -1
// when all of `candidates` together stay below it. `candidates` must hold every token above some
// cut for the answer to be the true top-p boundary.
float TopPBoundary(std::span<const float> candidates, double target, std::vector<float>* sorted) {
  sorted->assign(candidates.begin(), candidates.end());
  std::sort(sorted->begin(), sorted->end(), std::greater<float>());
  double cumulative = 0.0;
  for (float w : *sorted) {
    cumulative += w;
    if (cumulative >= target) return w;
  }
  return -1.0f;
}

double SumInOrder(std::span<const float> weights) {
  double total = 0.0;
  for (float w : weights) total += w;
  return total;
}

}  // namespace

float KthLargest(std::span<const float> values, int64_t k, std::vector<float>* scratch) {
  const int64_t n = static_cast<int64_t>(values.size());
  EMBER_CHECK(k >= 1 && k <= n, "k {} outside [1, {}]", k, n);
  if (k * kHeapFactor <= n) {
    // Min-heap of the k largest so far: most values lose a single comparison with its top.
    std::priority_queue<float, std::vector<float>, std::greater<float>> heap(
        std::greater<float>(), std::vector<float>(values.begin(), values.begin() + k));
    for (int64_t i = k; i < n; ++i) {
      if (values[static_cast<size_t>(i)] > heap.top()) {
        heap.pop();
        heap.push(values[static_cast<size_t>(i)]);
      }
    }
    return heap.top();
  }
  scratch->assign(values.begin(), values.end());
  std::nth_element(scratch->begin(), scratch->begin() + (k - 1), scratch->end(), std::greater<float>());
  return (*scratch)[static_cast<size_t>(k - 1)];
}

bool FilterDistribution(std::span<const float> logits, float temperature, int32_t top_k, float top_p, float min_p,
                        FilterScratch* scratch, FilteredDistribution* out) {
  EMBER_CHECK(temperature > 0.0f);
  const int64_t vocab = static_cast<int64_t>(logits.size());
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float l : logits) max_logit = l > max_logit ? l : max_logit;
  if (!(max_logit > -std::numeric_limits<float>::infinity())) return false;

  const float inv_temperature = 1.0f / temperature;
  // (l - max) / T rather than l / T - max / T: exact at the maximum (weight 1) and no overflow
  // for tiny temperatures.
  auto weight = [&](float l) { return std::exp((l - max_logit) * inv_temperature); };
  const bool use_top_k = top_k > 0 && top_k < vocab;
  const bool use_top_p = top_p < 1.0f;
  out->all_tokens = false;
  out->ids.clear();
  out->weights.clear();

  if (!use_top_k && !use_top_p && !(min_p > 0.0f)) {
    out->all_tokens = true;
    out->weights.resize(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i) out->weights[static_cast<size_t>(i)] = weight(logits[static_cast<size_t>(i)]);
    out->total = SumInOrder(out->weights);
    return true;
  }

  // min-p in weight units: the largest weight is 1.
  float threshold = min_p;
  if (use_top_k) {
    const float kth = KthLargest(logits, top_k, &scratch->sorted);
    for (int64_t i = 0; i < vocab; ++i) {
      const float l = logits[static_cast<size_t>(i)];
      if (l >= kth) {
        out->ids.push_back(static_cast<int32_t>(i));
        out->weights.push_back(weight(l));
      }
    }
    if (use_top_p) {
      // The survivors are the whole renormalised distribution, so one pass decides.
      const double target = static_cast<double>(top_p) * SumInOrder(out->weights);
      threshold = std::max(threshold, TopPBoundary(out->weights, target, &scratch->sorted));
    }
    if (threshold > 0.0f) {
      size_t kept = 0;
      for (size_t i = 0; i < out->weights.size(); ++i) {
        if (out->weights[i] >= threshold) {
          out->ids[kept] = out->ids[i];
          out->weights[kept] = out->weights[i];
          ++kept;
        }
      }
      out->ids.resize(kept);
      out->weights.resize(kept);
    }
    out->total = SumInOrder(out->weights);
    return true;
  }

  std::vector<float>& dense = scratch->weights;
  dense.resize(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) dense[static_cast<size_t>(i)] = weight(logits[static_cast<size_t>(i)]);
  if (use_top_p) {
    // Sort only the tokens above a cut and check that they carry top_p of the mass; lower the cut
    // until they do. Probability 1e-3 leaves at most 1,000 candidates and covers peaked
    // distributions; 1e-5 most others. The third cut is sure to succeed: everything below it
    // weighs less than vocab * cut = (1 - top_p) / 2 of the total. Zero is for rounding when
    // top_p is within float precision of 1. A cut at or below min_p that falls short means the
    // top-p boundary lies below min-p's, so min-p alone decides.
    const double z = SumInOrder(dense);
    const double target = static_cast<double>(top_p) * z;
    const double cuts[] = {1e-3 * z, 1e-5 * z, (1.0 - top_p) * z / (2.0 * static_cast<double>(vocab)), 0.0};
    std::vector<float>& candidates = scratch->candidates;
    for (double cut : cuts) {
      const float c = std::max(static_cast<float>(cut), min_p);
      candidates.clear();
      for (float w : dense) {
        if (w >= c) candidates.push_back(w);
      }
      const float boundary = TopPBoundary(candidates, target, &scratch->sorted);
      if (boundary >= 0.0f) {
        threshold = std::max(threshold, boundary);
        break;
      }
      if (c <= min_p || cut == 0.0) break;
    }
  }
  for (int64_t i = 0; i < vocab; ++i) {
    const float w = dense[static_cast<size_t>(i)];
    if (w >= threshold) {
      out->ids.push_back(static_cast<int32_t>(i));
      out->weights.push_back(w);
    }
  }
  out->total = SumInOrder(out->weights);
  return true;
}

int32_t SampleFromDistribution(const FilteredDistribution& dist, double u) {
  const double target = u * dist.total;
  double cumulative = 0.0;
  int64_t last_positive = -1;
  for (int64_t i = 0; i < dist.size(); ++i) {
    const float w = dist.weights[static_cast<size_t>(i)];
    if (w <= 0.0f) continue;
    cumulative += w;
    last_positive = i;
    if (cumulative > target) return dist.id(i);
  }
  // Only when u * total rounds up to total.
  EMBER_CHECK(last_positive >= 0, "sampling from a distribution with no weight");
  return dist.id(last_positive);
}

}  // namespace ember
