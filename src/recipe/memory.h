// Memory arithmetic of a deployment: weight bytes per device under a parallel shape, and the KV
// cache that fits beside them (src/kv's hybrid groups, so sliding-window layers cost only their
// window).
//
// Sharding per device, for tp x pp x dp ranks of one engine instance:
//   experts                        / (tp * dp * pp)  (TP splits each expert, EP places whole ones:
//                                                     the same bytes per rank either way)
//   attention, latent, dense MLP   / (tp * pp)       (replicated across data-parallel attention ranks)
//   embeddings + lm_head           / tp              (vocab-parallel; with pp > 1 the first stage
//                                                     holds the embeddings, the last the head)
//   router, norms                  / pp              (replicated)
//   multimodal towers              whole, when loaded
// KV heads split over tp (replicated when tp exceeds them); a pipeline stage keeps its layers.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "kv/spec.h"
#include "recipe/census.h"

namespace ember::recipe {

struct ParallelShape {
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t dp = 1;        // data-parallel attention ranks sharing the experts (DEP)
  int64_t replicas = 1;  // independent engine instances (2 for prefill/decode disaggregation)
  // Expert parallelism changes where experts live, not how many bytes a rank holds, so it is not
  // part of the shape the arithmetic needs.
  int64_t DevicesUsed() const { return tp * pp * dp * replicas; }
};

struct MemoryInputs {
  std::vector<TensorEntry> tensors;
  bool load_towers = false;
  std::vector<kv::LayerKvSpec> kv_layers;  // the whole model
  kv::KvDtype kv_dtype = kv::KvDtype::kBF16;
  int64_t block_size = 16;
  ParallelShape shape;
  int64_t device_memory_bytes = 0;
  double memory_utilization = 0.9;
  bool kv_as_needed = false;  // size KV for max_num_seqs sequences (CPU) rather than all free memory
  double kv_max_fraction = 1.0;
  int64_t max_model_len = 0;
  int64_t max_num_seqs = 1;
};

struct KvGroupRow {
  kv::AttentionKind kind = kv::AttentionKind::kFull;
  int64_t window = 0;
  int64_t layers = 0;               // model layers in the group
  int64_t bytes_per_token = 0;      // per device, all layers of the group (padded groups cost the full width)
  int64_t tokens_held_per_sequence = 0;  // at max_model_len: all of them, or the window's blocks
};

struct MemoryPlan {
  ComponentBytes checkpoint{};  // the whole checkpoint (towers included)
  int64_t checkpoint_total = 0;
  ComponentBytes per_device{};  // one device of the largest pipeline stage
  int64_t per_device_total = 0;
  int64_t usable_per_device = 0;
  int64_t kv_budget_per_device = 0;  // 0 when the weights do not fit
  kv::KvCacheConfig kv;              // one device's cache; num_blocks 0 when nothing fits
  std::vector<KvGroupRow> kv_groups;
  int64_t kv_bytes_per_sequence = 0;           // per device at max_model_len (hybrid)
  int64_t kv_bytes_per_sequence_all_full = 0;  // the same layers if every one kept every token
  int64_t kv_capacity_tokens = 0;  // tokens a full-attention group holds, over the dp ranks
  int64_t kv_sequences = 0;        // max_model_len sequences that fit at once, over the dp ranks
};

Expected<MemoryPlan> PlanMemory(const MemoryInputs& in);

// KV bytes of one `num_tokens` sequence with hybrid groups over the same with every layer full
// attention (block_size 16): 62 Muse Spark layers at 1M tokens give slightly more than 1/4.
Expected<double> HybridKvRatio(const std::vector<kv::LayerKvSpec>& layers, kv::KvDtype dtype, int64_t num_tokens);

}  // namespace ember::recipe
