#include "exec/expert_placement.h"

#include <fmt/format.h>

#include <algorithm>

namespace ember::exec {
namespace {

Status CheckSizes(int64_t num_experts, int ep_size) {
  if (num_experts < 1) return InvalidArgument(fmt::format("an expert placement needs num_experts >= 1, got {}", num_experts));
  if (ep_size < 1) return InvalidArgument(fmt::format("an expert placement needs ep_size >= 1, got {}", ep_size));
  if (num_experts % ep_size != 0) {
    return InvalidArgument(fmt::format("{} experts do not split evenly over {} expert-parallel ranks: every rank holds "
                                       "the same number of experts (E / N), so N must divide E",
                                       num_experts, ep_size));
  }
  return Status::Ok();
}

std::vector<int32_t> ContiguousRanks(int64_t num_experts, int ep_size) {
  std::vector<int32_t> ranks(static_cast<size_t>(num_experts));
  const int64_t per_rank = num_experts / ep_size;
  for (int64_t e = 0; e < num_experts; ++e) ranks[e] = static_cast<int32_t>(e / per_rank);
  return ranks;
}

}  // namespace

Status CheckRankList(std::span<const int32_t> ranks, int64_t num_experts, int ep_size, const std::string& what) {
  if (static_cast<int64_t>(ranks.size()) != num_experts) {
    return InvalidArgument(fmt::format("expert placement, {}: {} ranks listed, one per expert needs {}", what,
                                       ranks.size(), num_experts));
  }
  std::vector<int64_t> held(static_cast<size_t>(ep_size), 0);
  for (size_t e = 0; e < ranks.size(); ++e) {
    if (ranks[e] < 0 || ranks[e] >= ep_size) {
      return InvalidArgument(fmt::format("expert placement, {}: expert {} is on rank {}, outside [0, {})", what, e,
                                         ranks[e], ep_size));
    }
    ++held[ranks[e]];
  }
  const int64_t per_rank = num_experts / ep_size;
  for (int r = 0; r < ep_size; ++r) {
    if (held[r] != per_rank) {
      return InvalidArgument(fmt::format("expert placement, {}: rank {} holds {} experts; every rank must hold E / N = "
                                         "{} so that expert memory is the same on every rank",
                                         what, r, held[r], per_rank));
    }
  }
  return Status::Ok();
}

Expected<ExpertPlacement> ExpertPlacement::Contiguous(int64_t num_experts, int ep_size) {
  EMBER_RETURN_IF_ERROR(CheckSizes(num_experts, ep_size));
  return Create(num_experts, ep_size, ContiguousRanks(num_experts, ep_size), {});
}

Expected<ExpertPlacement> ExpertPlacement::Create(int64_t num_experts, int ep_size, std::vector<int32_t> default_ranks,
                                                  std::vector<std::vector<int32_t>> layer_ranks, int64_t num_layers) {
  EMBER_RETURN_IF_ERROR(CheckSizes(num_experts, ep_size));
  if (num_layers < 0) return InvalidArgument(fmt::format("expert placement: num_layers {} is negative", num_layers));
  EMBER_RETURN_IF_ERROR(CheckRankList(default_ranks, num_experts, ep_size, "default"));
  for (size_t l = 0; l < layer_ranks.size(); ++l) {
    if (layer_ranks[l].empty()) continue;
    if (num_layers > 0 && static_cast<int64_t>(l) >= num_layers) {
      return InvalidArgument(fmt::format("expert placement: layer {} is listed, but num_layers is {}", l, num_layers));
    }
    EMBER_RETURN_IF_ERROR(CheckRankList(layer_ranks[l], num_experts, ep_size, fmt::format("layer {}", l)));
  }
  while (!layer_ranks.empty() && layer_ranks.back().empty()) layer_ranks.pop_back();
  ExpertPlacement p;
  p.num_experts_ = num_experts;
  p.ep_size_ = ep_size;
  p.num_layers_ = num_layers;
  p.default_ranks_ = std::move(default_ranks);
  p.layer_ranks_ = std::move(layer_ranks);
  return p;
}

std::span<const int32_t> ExpertPlacement::ranks(int64_t layer) const {
  if (layer >= 0 && layer < static_cast<int64_t>(layer_ranks_.size()) && !layer_ranks_[layer].empty()) {
    return layer_ranks_[layer];
  }
  return default_ranks_;
}

std::vector<int32_t> ExpertPlacement::experts_of(int64_t layer, int rank) const {
  std::vector<int32_t> experts;
  const std::span<const int32_t> r = ranks(layer);
  for (size_t e = 0; e < r.size(); ++e) {
    if (r[e] == rank) experts.push_back(static_cast<int32_t>(e));
  }
  return experts;
}

std::vector<int64_t> ExpertPlacement::listed_layers() const {
  std::vector<int64_t> layers;
  for (size_t l = 0; l < layer_ranks_.size(); ++l) {
    if (!layer_ranks_[l].empty()) layers.push_back(static_cast<int64_t>(l));
  }
  return layers;
}

bool ExpertPlacement::is_contiguous() const {
  const std::vector<int32_t> contiguous = ContiguousRanks(num_experts_, ep_size_);
  if (!std::equal(default_ranks_.begin(), default_ranks_.end(), contiguous.begin(), contiguous.end())) return false;
  return std::all_of(layer_ranks_.begin(), layer_ranks_.end(),
                     [&](const std::vector<int32_t>& r) { return r.empty() || r == contiguous; });
}

Status ExpertPlacement::CheckModel(int64_t num_layers, int64_t num_experts, std::span<const int32_t> moe_layers) const {
  if (moe_layers.empty()) {
    return InvalidArgument("an expert placement needs a mixture-of-experts model; this model has no routed experts");
  }
  if (num_experts != num_experts_) {
    return InvalidArgument(fmt::format("the expert placement is for {} experts per layer, the model has {}",
                                       num_experts_, num_experts));
  }
  if (num_layers_ > 0 && num_layers_ != num_layers) {
    return InvalidArgument(fmt::format("the expert placement is for {} decoder layers, the model has {}", num_layers_,
                                       num_layers));
  }
  for (const int64_t l : listed_layers()) {
    if (l >= num_layers) {
      return InvalidArgument(fmt::format("the expert placement lists layer {}, the model has {} decoder layers", l,
                                         num_layers));
    }
    if (std::find(moe_layers.begin(), moe_layers.end(), l) == moe_layers.end()) {
      return InvalidArgument(fmt::format("the expert placement lists layer {}, which is a dense layer of the model "
                                         "(no routed experts)", l));
    }
  }
  return Status::Ok();
}

}  // namespace ember::exec
