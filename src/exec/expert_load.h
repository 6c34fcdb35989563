// Expert load: how many tokens the router sent to each expert of each MoE layer, and what that
// means for the ranks of an expert placement. The model counts into an ExpertLoad while it routes
// (model/blocks/moe_block.h, into ForwardOutput::expert_load); the runner hands rank 0's counts to
// the engine (Executor::ReadExpertLoad), and /metrics and `ember bench` report them. Under tensor
// parallelism every rank routes every token, so rank 0's counts are the counts.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exec/expert_placement.h"

namespace ember::exec {

struct ExpertLoad {
  int64_t num_experts = 0;       // E
  int64_t top_k = 0;             // experts each token is routed to
  std::vector<int32_t> layers;   // the decoder layer of each row, ascending
  std::vector<int64_t> tokens;   // [layers.size(), num_experts]: tokens routed to each expert

  bool empty() const { return layers.empty(); }
  size_t num_rows() const { return layers.size(); }
  std::span<const int64_t> row(size_t i) const {
    return {tokens.data() + i * static_cast<size_t>(num_experts), static_cast<size_t>(num_experts)};
  }
  std::span<int64_t> row(size_t i) {
    return {tokens.data() + i * static_cast<size_t>(num_experts), static_cast<size_t>(num_experts)};
  }
  // Sets the shape (every count 0) unless it is already this one; then leaves the counts alone.
  void Shape(int64_t experts, int64_t k, std::span<const int32_t> counted_layers);
  // Every count back to 0, the shape kept.
  void Zero();
  // Adds `other`'s counts (same shape; an empty `this` takes its shape).
  void Add(const ExpertLoad& other);
  // A copy that reuses this one's memory (steady-state readers do not allocate).
  void CopyFrom(const ExpertLoad& other);
};

// The counts of `after` minus those of `before` (the same shape, or `before` empty): the load of a
// window between two readings.
ExpertLoad Difference(const ExpertLoad& after, const ExpertLoad& before);

// max / mean of `values`: 1 is perfectly even, larger is worse; 0 when they sum to 0 (nothing
// counted yet).
double MaxOverMean(std::span<const int64_t> values);

// Tokens each rank of `placement` processes for one layer's expert counts: ranks[r] is the sum of
// expert_tokens[e] over the experts rank r holds in `layer`.
std::vector<int64_t> RankTokens(std::span<const int64_t> expert_tokens, const ExpertPlacement& placement,
                                int64_t layer);

}  // namespace ember::exec
