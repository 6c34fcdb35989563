// Expert parallelism's map: which expert-parallel rank holds each routed expert of each decoder
// layer. The MoE block's Dispatch sends a routed row to the rank that holds its expert, so a map
// that spreads the measured hot experts evens out the ranks' work (EPLB's first step: a placement
// chosen at startup from measured counts, exec/expert_balancer.h; the file format is
// exec/expert_json.h).
//
// Every rank holds exactly E / N experts of every layer (E experts, N ranks; E % N == 0). Equal
// counts keep the expert weights' memory equal across ranks, so a placement can never make one
// rank run out of memory, and let the execution lay each rank's experts out in fixed slots.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace ember::exec {

class ExpertPlacement {
 public:
  // Rank r holds experts [r * E / N, (r + 1) * E / N) of every layer. InvalidArgument unless
  // E >= 1, N >= 1 and N divides E.
  static Expected<ExpertPlacement> Contiguous(int64_t num_experts, int ep_size);

  // `default_ranks[e]` is expert e's rank in every layer without an entry of its own;
  // `layer_ranks[l]`, where not empty, is layer l's. Each list must have E entries in [0, N),
  // E / N per rank. `num_layers` (0: not known) bounds the layers a placement may list; a model
  // checks it with CheckModel. Errors name the layer and what is wrong.
  static Expected<ExpertPlacement> Create(int64_t num_experts, int ep_size, std::vector<int32_t> default_ranks,
                                          std::vector<std::vector<int32_t>> layer_ranks, int64_t num_layers = 0);

  int64_t num_experts() const { return num_experts_; }
  int ep_size() const { return ep_size_; }
  int64_t experts_per_rank() const { return num_experts_ / ep_size_; }
  // Decoder layers of the model the placement was made for; 0 when the file did not say.
  int64_t num_layers() const { return num_layers_; }

  // Expert -> rank for one layer (its own list, or the default): E entries.
  std::span<const int32_t> ranks(int64_t layer) const;
  int rank_of(int64_t layer, int64_t expert) const { return ranks(layer)[static_cast<size_t>(expert)]; }
  // The experts `rank` holds in `layer`, ascending (E / N of them).
  std::vector<int32_t> experts_of(int64_t layer, int rank) const;
  std::span<const int32_t> default_ranks() const { return default_ranks_; }
  // Layers with a list of their own, ascending.
  std::vector<int64_t> listed_layers() const;
  bool is_contiguous() const;

  // Checks the placement against a model: its expert count, its decoder layer count (when the
  // placement records one), and that every listed layer is one of `moe_layers` (decoder layers
  // with routed experts). The message says which does not match and what the model has.
  Status CheckModel(int64_t num_layers, int64_t num_experts, std::span<const int32_t> moe_layers) const;

  bool operator==(const ExpertPlacement&) const = default;

 private:
  ExpertPlacement() = default;

  int64_t num_experts_ = 0;
  int ep_size_ = 1;
  int64_t num_layers_ = 0;
  std::vector<int32_t> default_ranks_;
  std::vector<std::vector<int32_t>> layer_ranks_;  // indexed by layer; empty: the default
};

// Checks one layer's expert -> rank list: E entries, each in [0, N), E / N per rank. `what`
// names the list in the message ("layer 3", "default").
Status CheckRankList(std::span<const int32_t> ranks, int64_t num_experts, int ep_size, const std::string& what);

}  // namespace ember::exec
