// Temperature, top-k, top-p and min-p: from one row of (penalised) logits to the distribution that
// is sampled from.
//
// All three filters are thresholds, so ties never depend on sort order:
//   top-k  keeps the tokens whose logit is at least the k-th largest (ties with it are kept, as
//          in vLLM); k <= 0 or k >= vocabulary is off;
//   top-p  on the top-k survivors, renormalised: keeps the tokens whose probability is at least
//          that of the token at which the cumulative probability, in decreasing order, first
//          reaches top_p (ties with it are kept); top_p = 1 is off and a tiny top_p keeps the
//          argmax;
//   min-p  keeps the tokens whose probability is at least min_p times the largest one.
// Probabilities are softmax(logits / temperature); weights are exp((logit - max) / temperature),
// the same numbers unnormalised, with the most likely token weighing exactly 1.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ember {

// The kept tokens in increasing id order with their weights.
struct FilteredDistribution {
  static constexpr int64_t kBlock = 1024;  // weights per entry of block_sums

  bool all_tokens = false;      // nothing was filtered: ids is unused and weights[i] is token i's
  // The first `count` entries are the distribution; the vectors are buffers that only grow, so a
  // row costs no allocation or zero-filling.
  int64_t count = 0;
  std::vector<int32_t> ids;
  std::vector<float> weights;
  // LaneSum of each kBlock weights, and their sum in order: the draw walks blocks first, so it
  // costs one pass over the block sums plus one block.
  std::vector<double> block_sums;
  double total = 0.0;

  int64_t size() const { return count; }
  int32_t id(int64_t i) const { return all_tokens ? static_cast<int32_t>(i) : ids[static_cast<size_t>(i)]; }
};

struct FilterScratch {
  std::vector<float> weights;     // dense weights of the whole row
  std::vector<float> candidates;  // weights above a top-p cut, reordered by TopPBoundary (a buffer)
  std::vector<float> select;      // KthLargest's copy
};

// The k-th largest of `values` (k in [1, size]). A size-k heap for small k, nth_element on a copy
// in `scratch` otherwise: never a full sort.
float KthLargest(std::span<const float> values, int64_t k, std::vector<float>* scratch);

// The top-p boundary among `weights` (reordered in place): the weight at which the cumulative
// weight, in decreasing order, first reaches `target`; -1 when all of them together stay below it.
// Quickselect-style partitioning with partial sums, so expected linear time: only the last few
// dozen candidates are sorted.
float TopPBoundary(std::span<float> weights, double target);

// Applies temperature (> 0), top-k, top-p and min-p to `logits`. Returns false, leaving `out`
// unspecified, when no logit is finite (every token masked).
bool FilterDistribution(std::span<const float> logits, float temperature, int32_t top_k, float top_p, float min_p,
                        FilterScratch* scratch, FilteredDistribution* out);

// Inverse CDF in token-id order: the first kept token whose cumulative weight exceeds
// u * total, for u in [0, 1).
int32_t SampleFromDistribution(const FilteredDistribution& dist, double u);

}  // namespace ember
