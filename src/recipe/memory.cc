#include "recipe/memory.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/int_math.h"

namespace ember::recipe {

namespace {

int64_t BytesOf(const ComponentBytes& bytes, Component c) { return bytes[static_cast<int>(c)]; }

}  // namespace

Expected<MemoryPlan> PlanMemory(const MemoryInputs& in) {
  const ParallelShape& s = in.shape;
  if (s.tp < 1 || s.pp < 1 || s.dp < 1 || s.replicas < 1) {
    return InvalidArgument(fmt::format("parallel sizes must be at least 1 (tp {}, pp {}, dp {}, replicas {})", s.tp,
                                       s.pp, s.dp, s.replicas));
  }
  if (in.kv_layers.empty()) return InvalidArgument("the model has no attention layers");
  if (s.pp > static_cast<int64_t>(in.kv_layers.size())) {
    return InvalidArgument(fmt::format("{} pipeline stages for {} layers", s.pp, in.kv_layers.size()));
  }
  MemoryPlan plan;
  plan.checkpoint = SumByComponent(in.tensors);
  plan.checkpoint_total = TotalBytes(in.tensors);

  using C = Component;
  auto set = [&](C c, int64_t bytes) { plan.per_device[static_cast<int>(c)] = bytes; };
  const ComponentBytes& ck = plan.checkpoint;
  set(C::kExperts, CeilDiv(BytesOf(ck, C::kExperts), s.tp * s.dp * s.pp));
  for (C c : {C::kAttention, C::kLatentProjections, C::kDenseMlp}) set(c, CeilDiv(BytesOf(ck, c), s.tp * s.pp));
  for (C c : {C::kRouter, C::kNorms}) set(c, CeilDiv(BytesOf(ck, c), s.pp));
  const int64_t embed = BytesOf(ck, C::kEmbeddings), head = BytesOf(ck, C::kLmHead);
  if (s.pp == 1) {
    set(C::kEmbeddings, CeilDiv(embed, s.tp));
    set(C::kLmHead, CeilDiv(head, s.tp));
  } else if (embed >= head) {
    set(C::kEmbeddings, CeilDiv(embed, s.tp));  // the first stage, the larger of the two ends
  } else {
    set(C::kLmHead, CeilDiv(head, s.tp));
  }
  set(C::kMultimodalTowers, in.load_towers ? BytesOf(ck, C::kMultimodalTowers) : 0);
  for (int64_t b : plan.per_device) plan.per_device_total += b;

  // One device's KV: the first pipeline stage's layers with its share of the KV heads.
  const int64_t stage_layers = CeilDiv(static_cast<int64_t>(in.kv_layers.size()), s.pp);
  std::vector<kv::LayerKvSpec> layers(in.kv_layers.begin(), in.kv_layers.begin() + stage_layers);
  for (kv::LayerKvSpec& l : layers) l.num_kv_heads = std::max<int64_t>(1, CeilDiv(l.num_kv_heads, s.tp));
  EMBER_ASSIGN_OR_RETURN(plan.kv, kv::PlanKvGroups(layers, in.block_size, in.kv_dtype));
  std::vector<kv::LayerKvSpec> all_full = layers;
  for (kv::LayerKvSpec& l : all_full) l.kind = kv::AttentionKind::kFull;
  EMBER_ASSIGN_OR_RETURN(const kv::KvCacheConfig full_config, kv::PlanKvGroups(all_full, in.block_size, in.kv_dtype));
  plan.kv_bytes_per_sequence = kv::KvBytesPerSequence(plan.kv, in.max_model_len);
  plan.kv_bytes_per_sequence_all_full = kv::KvBytesPerSequence(full_config, in.max_model_len);
  const int64_t per_layer = kv::KvBytesPerTokenPerLayer(in.kv_dtype, plan.kv.num_kv_heads, plan.kv.head_dim);
  for (const kv::KvCacheGroupSpec& g : plan.kv.groups) {
    KvGroupRow row;
    row.kind = g.kind;
    row.window = g.window;
    row.layers = static_cast<int64_t>(g.layers.size());
    row.bytes_per_token = plan.kv.layers_per_group * per_layer;
    kv::KvCacheConfig one = plan.kv;
    one.groups = {g};
    row.tokens_held_per_sequence = kv::KvBytesPerSequence(one, in.max_model_len) / plan.kv.BytesPerBlock() * in.block_size;
    plan.kv_groups.push_back(row);
  }

  plan.usable_per_device = static_cast<int64_t>(static_cast<double>(in.device_memory_bytes) * in.memory_utilization);
  if (plan.per_device_total >= plan.usable_per_device) return plan;  // nothing left for KV
  int64_t budget = plan.usable_per_device - plan.per_device_total;
  if (in.kv_as_needed) {
    const int64_t needed = plan.kv_bytes_per_sequence * in.max_num_seqs + 2 * plan.kv.BytesPerBlock();
    budget = std::min({budget, needed, static_cast<int64_t>(in.device_memory_bytes * in.kv_max_fraction)});
  }
  plan.kv_budget_per_device = budget;
  const int64_t blocks = budget / plan.kv.BytesPerBlock();
  if (blocks < 2) return plan;
  plan.kv.num_blocks = blocks;
  plan.kv_capacity_tokens = (blocks - 1) * in.block_size * s.dp;
  plan.kv_sequences = plan.kv_bytes_per_sequence > 0
                          ? (blocks - 1) * plan.kv.BytesPerBlock() / plan.kv_bytes_per_sequence * s.dp
                          : 0;
  return plan;
}

Expected<double> HybridKvRatio(const std::vector<kv::LayerKvSpec>& layers, kv::KvDtype dtype, int64_t num_tokens) {
  EMBER_ASSIGN_OR_RETURN(const kv::KvCacheConfig hybrid, kv::PlanKvGroups(layers, 16, dtype));
  std::vector<kv::LayerKvSpec> all_full = layers;
  for (kv::LayerKvSpec& l : all_full) l.kind = kv::AttentionKind::kFull;
  EMBER_ASSIGN_OR_RETURN(const kv::KvCacheConfig full, kv::PlanKvGroups(all_full, 16, dtype));
  return static_cast<double>(kv::KvBytesPerSequence(hybrid, num_tokens)) /
         static_cast<double>(kv::KvBytesPerSequence(full, num_tokens));
}

}  // namespace ember::recipe
