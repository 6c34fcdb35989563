#include "exec/expert_balancer.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace ember::exec {

Expected<std::vector<int32_t>> BalanceLayer(std::span<const int64_t> tokens, int ep_size) {
  const int64_t num_experts = static_cast<int64_t>(tokens.size());
  // The same checks as any placement (E >= 1, N >= 1, N divides E).
  EMBER_RETURN_IF_ERROR(ExpertPlacement::Contiguous(num_experts, ep_size).status());
  std::vector<int32_t> order(tokens.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return tokens[a] > tokens[b]; });
  const int64_t slots = num_experts / ep_size;
  std::vector<int64_t> load(static_cast<size_t>(ep_size), 0);
  std::vector<int64_t> held(static_cast<size_t>(ep_size), 0);
  std::vector<int32_t> ranks(tokens.size(), -1);
  for (const int32_t e : order) {
    int best = -1;
    for (int r = 0; r < ep_size; ++r) {
      if (held[r] < slots && (best < 0 || load[r] < load[best])) best = r;
    }
    ranks[e] = best;
    load[best] += tokens[e];
    ++held[best];
  }
  return ranks;
}

Expected<ExpertPlacement> BalancePlacement(const ExpertLoad& load, int ep_size, int64_t num_layers) {
  EMBER_ASSIGN_OR_RETURN(const ExpertPlacement contiguous, ExpertPlacement::Contiguous(load.num_experts, ep_size));
  std::vector<std::vector<int32_t>> layer_ranks;
  for (size_t i = 0; i < load.num_rows(); ++i) {
    const size_t layer = static_cast<size_t>(load.layers[i]);
    if (layer_ranks.size() <= layer) layer_ranks.resize(layer + 1);
    EMBER_ASSIGN_OR_RETURN(layer_ranks[layer], BalanceLayer(load.row(i), ep_size));
  }
  const std::span<const int32_t> fallback = contiguous.default_ranks();
  return ExpertPlacement::Create(load.num_experts, ep_size, {fallback.begin(), fallback.end()}, std::move(layer_ranks),
                                 num_layers);
}

}  // namespace ember::exec
