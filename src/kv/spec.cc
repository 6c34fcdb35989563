#include "kv/spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

namespace ember::kv {

std::string_view KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32: return "f32";
    case KvDtype::kF16: return "f16";
    case KvDtype::kBF16: return "bf16";
    case KvDtype::kFp8E4M3: return "fp8";
  }
  return "?";
}

Expected<KvDtype> ParseKvDtype(std::string_view name) {
  if (name == "f32" || name == "float32") return KvDtype::kF32;
  if (name == "f16" || name == "float16" || name == "half") return KvDtype::kF16;
  if (name == "bf16" || name == "bfloat16") return KvDtype::kBF16;
  if (name == "fp8" || name == "fp8_e4m3") return KvDtype::kFp8E4M3;
  return InvalidArgument(fmt::format("unknown KV cache dtype '{}': use f32, f16, bf16 or fp8", name));
}

int64_t KvBytesPerTokenPerLayer(KvDtype dtype, int64_t num_kv_heads, int64_t head_dim) {
  switch (dtype) {
    case KvDtype::kF32: return 2 * num_kv_heads * head_dim * 4;
    case KvDtype::kF16:
    case KvDtype::kBF16: return 2 * num_kv_heads * head_dim * 2;
    case KvDtype::kFp8E4M3: return 2 * num_kv_heads * (head_dim + 4);  // + one f32 scale per head
  }
  return 0;
}

int64_t SlidingWindowSkippedBlocks(int64_t window, int64_t block_size, int64_t num_computed_tokens) {
  // The earliest key any query at a position >= num_computed_tokens reads.
  const int64_t first_needed = std::max<int64_t>(0, num_computed_tokens - window + 1);
  return first_needed / block_size;
}

int64_t KvCacheConfig::BytesPerBlock() const {
  return layers_per_group * block_size * KvBytesPerTokenPerLayer(dtype, num_kv_heads, head_dim);
}

Expected<KvCacheConfig> PlanKvGroups(const std::vector<LayerKvSpec>& layers, int64_t block_size, KvDtype dtype) {
  if (layers.empty()) return InvalidArgument("PlanKvGroups: the model has no attention layers");
  if (block_size <= 0) return InvalidArgument(fmt::format("block size must be positive, got {}", block_size));
  KvCacheConfig config;
  config.block_size = block_size;
  config.dtype = dtype;
  config.num_kv_heads = layers.front().num_kv_heads;
  config.head_dim = layers.front().head_dim;
  // Layers of one kind (and window) in model order.
  std::map<std::pair<AttentionKind, int64_t>, std::vector<int>> by_kind;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerKvSpec& l = layers[i];
    if (l.num_kv_heads != config.num_kv_heads || l.head_dim != config.head_dim) {
      return Unimplemented(fmt::format(
          "layer {} has {} KV heads x {} but layer 0 has {} x {}: one block pool needs one KV shape for all layers",
          i, l.num_kv_heads, l.head_dim, config.num_kv_heads, config.head_dim));
    }
    if (l.kind == AttentionKind::kSlidingWindow && l.window <= 0) {
      return InvalidArgument(fmt::format("layer {} is sliding-window with window {}", i, l.window));
    }
    const int64_t window = l.kind == AttentionKind::kSlidingWindow ? l.window : 0;
    by_kind[{l.kind, window}].push_back(static_cast<int>(i));
  }
  // vLLM's rule: the group size is the smallest kind's layer count, so the rarest kind fits in one
  // group exactly and the others pad at most their last group.
  int64_t group_size = static_cast<int64_t>(layers.size());
  for (const auto& [kind, members] : by_kind) group_size = std::min<int64_t>(group_size, members.size());
  config.layers_per_group = group_size;
  config.group_of_layer.assign(layers.size(), -1);
  config.tensor_of_layer.assign(layers.size(), -1);
  for (const auto& [kind, members] : by_kind) {
    for (size_t start = 0; start < members.size(); start += group_size) {
      KvCacheGroupSpec group;
      group.kind = kind.first;
      group.window = kind.second;
      for (size_t j = start; j < std::min(members.size(), start + group_size); ++j) {
        config.group_of_layer[members[j]] = static_cast<int>(config.groups.size());
        config.tensor_of_layer[members[j]] = static_cast<int>(group.layers.size());
        group.layers.push_back(members[j]);
      }
      config.groups.push_back(std::move(group));
    }
  }
  return config;
}

Expected<int64_t> NumBlocksForBudget(const KvCacheConfig& config, int64_t budget_bytes) {
  const int64_t per_block = config.BytesPerBlock();
  if (per_block <= 0) return InvalidArgument("KV config has no layers");
  const int64_t blocks = budget_bytes / per_block;
  if (blocks < 2) {
    return ResourceExhausted(fmt::format(
        "a KV cache budget of {} bytes holds {} blocks of {} bytes; at least 2 are needed: raise --kv-cache-memory",
        budget_bytes, blocks, per_block));
  }
  return blocks;
}

int64_t KvBytesPerSequence(const KvCacheConfig& config, int64_t num_tokens) {
  const int64_t bs = config.block_size;
  const int64_t all_blocks = (num_tokens + bs - 1) / bs;
  int64_t blocks = 0;
  for (const KvCacheGroupSpec& g : config.groups) {
    if (g.kind == AttentionKind::kFull) {
      blocks += all_blocks;
    } else {
      // The newest query reads window keys; they span at most ceil((window - 1) / bs) + 1 blocks.
      blocks += std::min(all_blocks, (g.window - 1 + bs - 1) / bs + 1);
    }
  }
  const int64_t per_group_block = config.BytesPerBlock();
  return blocks * per_group_block;
}

std::string DescribeKvConfig(const KvCacheConfig& config) {
  int full = 0, sliding = 0;
  for (const KvCacheGroupSpec& g : config.groups) (g.kind == AttentionKind::kFull ? full : sliding)++;
  std::string text = fmt::format("{} KV groups x {} layers ({} full, {} sliding", config.groups.size(),
                                 config.layers_per_group, full, sliding);
  for (const KvCacheGroupSpec& g : config.groups) {
    if (g.kind == AttentionKind::kSlidingWindow) {
      text += fmt::format(" window {}", g.window);
      break;
    }
  }
  text += fmt::format("), {} KV, block {} tokens x {} bytes", KvDtypeName(config.dtype), config.block_size,
                      config.BytesPerBlock());
  if (config.num_blocks > 0) {
    text += fmt::format(", {} blocks = {:.1f} MiB", config.num_blocks,
                        static_cast<double>(config.num_blocks * config.BytesPerBlock()) / (1 << 20));
  }
  return text;
}

}  // namespace ember::kv
