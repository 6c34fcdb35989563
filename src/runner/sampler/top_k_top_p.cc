#include "runner/sampler/top_k_top_p.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>

#include "core/check.h"
#include "runner/sampler/fast_exp.h"

namespace ember {
namespace {

// Below vocabulary / kHeapFactor a heap of k values beats nth_element over a copy.
constexpr int64_t kHeapFactor = 16;
// TopPBoundary sorts what is left once a range is this small.
constexpr size_t kSortBelow = 64;
// Row scans first check a chunk this long for any value past their cut with a vectorized max.
constexpr size_t kChunk = 32;

int32_t ChunkMaxKey(const float* values) { return MaxOrderKey(values, kChunk); }

// Fills block_sums and total from weights.
void Finish(FilteredDistribution* out) {
  const int64_t n = out->size();
  const int64_t blocks = (n + FilteredDistribution::kBlock - 1) / FilteredDistribution::kBlock;
  out->block_sums.resize(static_cast<size_t>(blocks));
  out->total = 0.0;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * FilteredDistribution::kBlock;
    const double sum = LaneSum(out->weights.data() + begin, std::min(FilteredDistribution::kBlock, n - begin));
    out->block_sums[static_cast<size_t>(b)] = sum;
    out->total += sum;
  }
}

// Grows `buffer` to at least `n` elements; never shrinks it, so later rows do not zero-fill.
template <typename T>
T* Reserve(std::vector<T>* buffer, size_t n) {
  if (buffer->size() < n) buffer->resize(n);
  return buffer->data();
}

// Writes the values >= cut to `values_out` and, when given, their indices to `ids_out`; returns
// how many. Chunks with nothing past the cut (most of them when few tokens survive) are skipped
// after a vectorized max; inside the others the copy is branch-free, since whether a value passes
// is a coin flip when many do.
size_t CopyAtLeast(std::span<const float> values, float cut, float* values_out, int32_t* ids_out) {
  const size_t n = values.size();
  // -0 passes a cut of +0 as a float but not by key, so a zero cut is checked as -0.
  const int32_t cut_key = FloatOrderKey(cut == 0.0f ? -0.0f : cut);
  size_t count = 0;
  for (size_t base = 0; base < n; base += kChunk) {
    const size_t end = std::min(n, base + kChunk);
    if (end - base == kChunk && ChunkMaxKey(values.data() + base) < cut_key) continue;
    for (size_t i = base; i < end; ++i) {
      if (ids_out != nullptr) ids_out[count] = static_cast<int32_t>(i);
      values_out[count] = values[i];
      count += values[i] >= cut;
    }
  }
  return count;
}

// Appends (i, values[i]) to `out` for every values[i] >= cut.
void AppendAtLeast(std::span<const float> values, float cut, FilteredDistribution* out) {
  const size_t start = static_cast<size_t>(out->count);
  int32_t* ids = Reserve(&out->ids, start + values.size()) + start;
  float* weights = Reserve(&out->weights, start + values.size()) + start;
  out->count += static_cast<int64_t>(CopyAtLeast(values, cut, weights, ids));
}

// Keeps the entries of `out` whose weight is at least `threshold`, in order.
void KeepAtLeast(float threshold, FilteredDistribution* out) {
  int64_t kept = 0;
  for (int64_t i = 0; i < out->count; ++i) {
    const float w = out->weights[static_cast<size_t>(i)];
    out->ids[static_cast<size_t>(kept)] = out->ids[static_cast<size_t>(i)];
    out->weights[static_cast<size_t>(kept)] = w;
    kept += w >= threshold;
  }
  out->count = kept;
}

}  // namespace

float KthLargest(std::span<const float> values, int64_t k, std::vector<float>* scratch) {
  const int64_t n = static_cast<int64_t>(values.size());
  EMBER_CHECK(k >= 1 && k <= n, "k {} outside [1, {}]", k, n);
  if (k * kHeapFactor <= n) {
    // Min-heap of the k largest so far: most values lose a single comparison with its top.
    // Whole chunks below the heap's top are skipped after a vectorized max.
    std::priority_queue<float, std::vector<float>, std::greater<float>> heap(
        std::greater<float>(), std::vector<float>(values.begin(), values.begin() + k));
    const float* v = values.data();
    for (int64_t i = k; i < n;) {
      if (i + static_cast<int64_t>(kChunk) <= n && ChunkMaxKey(v + i) <= FloatOrderKey(heap.top())) {
        i += static_cast<int64_t>(kChunk);
        continue;
      }
      const int64_t end = std::min(n, i + static_cast<int64_t>(kChunk));
      for (; i < end; ++i) {
        if (v[i] > heap.top()) {
          heap.pop();
          heap.push(v[i]);
        }
      }
    }
    return heap.top();
  }
  scratch->assign(values.begin(), values.end());
  std::nth_element(scratch->begin(), scratch->begin() + (k - 1), scratch->end(), std::greater<float>());
  return (*scratch)[static_cast<size_t>(k - 1)];
}

float TopPBoundary(std::span<float> weights, double target) {
  // [lo, hi) holds the undecided weights; mass_above is the weight of every value known to be
  // larger than all of them.
  float* w = weights.data();
  size_t lo = 0;
  size_t hi = weights.size();
  double mass_above = 0.0;
  while (hi - lo > kSortBelow) {
    const float a = w[lo], b = w[lo + (hi - lo) / 2], c = w[hi - 1];
    const float pivot = std::max(std::min(a, b), std::min(std::max(a, b), c));  // median of three
    float* greater_end = std::partition(w + lo, w + hi, [pivot](float x) { return x > pivot; });
    float* equal_end = std::partition(greater_end, w + hi, [pivot](float x) { return x == pivot; });
    const double greater = LaneSum(w + lo, greater_end - (w + lo));
    if (mass_above + greater >= target) {
      hi = static_cast<size_t>(greater_end - w);  // the boundary is among the larger values
      continue;
    }
    const double equal = static_cast<double>(pivot) * static_cast<double>(equal_end - greater_end);
    if (mass_above + greater + equal >= target) return pivot;
    mass_above += greater + equal;
    lo = static_cast<size_t>(equal_end - w);
  }
  std::sort(w + lo, w + hi, std::greater<float>());
  double cumulative = mass_above;
  for (size_t i = lo; i < hi; ++i) {
    cumulative += w[i];
    if (cumulative >= target) return w[i];
  }
  return -1.0f;
}

bool FilterDistribution(std::span<const float> logits, float temperature, int32_t top_k, float top_p, float min_p,
                        FilterScratch* scratch, FilteredDistribution* out) {
  EMBER_CHECK(temperature > 0.0f);
  const int64_t vocab = static_cast<int64_t>(logits.size());
  const float max_logit = MaxValue(logits);
  if (!(max_logit > -std::numeric_limits<float>::infinity())) return false;

  // Weights are exp((l - max) / T) rather than exp(l / T - max / T): exactly 1 at the maximum and
  // no overflow for tiny temperatures.
  const float inv_temperature = 1.0f / temperature;
  const bool use_top_k = top_k > 0 && top_k < vocab;
  const bool use_top_p = top_p < 1.0f;
  const bool use_min_p = min_p > 0.0f;
  out->all_tokens = false;
  out->count = 0;

  if (!use_top_k && !use_top_p && !use_min_p) {
    out->all_tokens = true;
    out->count = vocab;
    ExpShifted(logits, max_logit, inv_temperature, Reserve(&out->weights, static_cast<size_t>(vocab)));
    Finish(out);
    return true;
  }

  // Candidates by a cut on the logits, then their weights. min-p alone needs no other weight: its
  // cut is min_p relative to the largest weight (1), moved down by 1e-3 in log space so that the
  // cut on logits never drops a token whose computed weight passes.
  auto collect = [&](float logit_cut) {
    AppendAtLeast(logits, logit_cut, out);
    const std::span<float> weights(out->weights.data(), static_cast<size_t>(out->count));
    ExpShifted(weights, max_logit, inv_temperature, weights.data());
  };
  if (use_top_k || !use_top_p) {
    if (use_top_k) {
      collect(KthLargest(logits, top_k, &scratch->select));
    } else {
      collect(max_logit + temperature * (std::log(min_p) - 1e-3f));
    }
    float threshold = min_p;  // in weight units: the largest weight is 1
    if (use_top_p) {
      // The top-k survivors are the whole renormalised distribution: one boundary search decides.
      float* candidates = Reserve(&scratch->candidates, static_cast<size_t>(out->count));
      std::copy_n(out->weights.data(), out->count, candidates);
      const double target = static_cast<double>(top_p) * LaneSum(out->weights.data(), out->count);
      threshold = std::max(threshold, TopPBoundary({candidates, static_cast<size_t>(out->count)}, target));
    }
    if (threshold > 0.0f) KeepAtLeast(threshold, out);
    Finish(out);
    return true;
  }

  // top-p over the whole vocabulary needs the total weight, so every weight once.
  const std::span<float> dense(Reserve(&scratch->weights, static_cast<size_t>(vocab)), static_cast<size_t>(vocab));
  ExpShifted(logits, max_logit, inv_temperature, dense.data());
  const double z = LaneSum(dense.data(), vocab);
  const double target = static_cast<double>(top_p) * z;
  // Search only the tokens above a cut, after checking that they carry top_p of the mass. A
  // probability of 1e-3 leaves at most 1,000 candidates and suits peaked distributions. The
  // second cut cannot fail: everything below it weighs less than vocab * cut = (1 - top_p) / 2 of
  // the total. Zero is for rounding when top_p is within float precision of 1. A cut at min_p
  // that falls short means the top-p boundary lies below min-p's, so min-p alone decides.
  const double cuts[] = {1e-3 * z, (1.0 - top_p) * z / (2.0 * static_cast<double>(vocab)), 0.0};
  float threshold = min_p;
  for (double cut : cuts) {
    const float c = std::max(static_cast<float>(cut), min_p);
    float* candidates = Reserve(&scratch->candidates, dense.size());
    const size_t count = CopyAtLeast(dense, c, candidates, nullptr);
    const float boundary = TopPBoundary({candidates, count}, target);
    if (boundary >= 0.0f) {
      threshold = std::max(threshold, boundary);
      break;
    }
    if (c <= min_p || cut == 0.0) break;
  }
  AppendAtLeast(dense, threshold, out);
  Finish(out);
  return true;
}

int32_t SampleFromDistribution(const FilteredDistribution& dist, double u) {
  const double target = u * dist.total;
  double cumulative = 0.0;
  const int64_t n = dist.size();
  const int64_t blocks = static_cast<int64_t>(dist.block_sums.size());
  // The block whose sum carries the cumulative weight past the target; the last block with any
  // weight when u * total rounds up to total.
  int64_t block = -1;
  double before = 0.0;
  for (int64_t b = 0; b < blocks; ++b) {
    const double sum = dist.block_sums[static_cast<size_t>(b)];
    if (sum <= 0.0) continue;
    block = b;
    before = cumulative;
    cumulative += sum;
    if (cumulative > target) break;
  }
  EMBER_CHECK(block >= 0, "sampling from a distribution with no weight");
  // Within the block the running sum is serial, not LaneSum's order, so it may end a rounding
  // error short of the target: then the block's last token with weight.
  const int64_t begin = block * FilteredDistribution::kBlock;
  const int64_t end = std::min(n, begin + FilteredDistribution::kBlock);
  int64_t last_positive = begin;
  cumulative = before;
  for (int64_t i = begin; i < end; ++i) {
    const float w = dist.weights[static_cast<size_t>(i)];
    if (w <= 0.0f) continue;
    cumulative += w;
    last_positive = i;
    if (cumulative > target) return dist.id(i);
  }
  return dist.id(last_positive);
}

}  // namespace ember
