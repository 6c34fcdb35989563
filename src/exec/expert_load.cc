#include "exec/expert_load.h"

#include <algorithm>
#include <numeric>

#include "core/check.h"

namespace ember::exec {

void ExpertLoad::Shape(int64_t experts, int64_t k, std::span<const int32_t> counted_layers) {
  if (num_experts == experts && top_k == k && std::ranges::equal(layers, counted_layers)) return;
  num_experts = experts;
  top_k = k;
  layers.assign(counted_layers.begin(), counted_layers.end());
  tokens.assign(layers.size() * static_cast<size_t>(experts), 0);
}

void ExpertLoad::Zero() { std::fill(tokens.begin(), tokens.end(), 0); }

void ExpertLoad::Add(const ExpertLoad& other) {
  if (other.empty()) return;
  Shape(other.num_experts, other.top_k, other.layers);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] += other.tokens[i];
}

void ExpertLoad::CopyFrom(const ExpertLoad& other) {
  num_experts = other.num_experts;
  top_k = other.top_k;
  layers.assign(other.layers.begin(), other.layers.end());
  tokens.assign(other.tokens.begin(), other.tokens.end());
}

ExpertLoad Difference(const ExpertLoad& after, const ExpertLoad& before) {
  ExpertLoad d = after;
  if (before.empty()) return d;
  EMBER_CHECK(before.num_experts == after.num_experts && before.layers == after.layers,
              "expert load readings of different shapes");
  for (size_t i = 0; i < d.tokens.size(); ++i) d.tokens[i] -= before.tokens[i];
  return d;
}

double MaxOverMean(std::span<const int64_t> values) {
  if (values.empty()) return 0.0;
  const int64_t sum = std::accumulate(values.begin(), values.end(), int64_t{0});
  if (sum == 0) return 0.0;
  const int64_t max = *std::max_element(values.begin(), values.end());
  return static_cast<double>(max) * static_cast<double>(values.size()) / static_cast<double>(sum);
}

std::vector<int64_t> RankTokens(std::span<const int64_t> expert_tokens, const ExpertPlacement& placement,
                                int64_t layer) {
  const std::span<const int32_t> ranks = placement.ranks(layer);
  EMBER_CHECK(ranks.size() == expert_tokens.size(), "{} expert counts for a placement of {} experts",
              expert_tokens.size(), ranks.size());
  std::vector<int64_t> per_rank(static_cast<size_t>(placement.ep_size()), 0);
  for (size_t e = 0; e < expert_tokens.size(); ++e) per_rank[ranks[e]] += expert_tokens[e];
  return per_rank;
}

}  // namespace ember::exec
