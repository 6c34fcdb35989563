// What the KV cache holds and how layers share one block pool (vLLM's hybrid KV cache design,
// ARCHITECTURE.md "KV cache"; reference/codebases.md §9.4).
//
// One pool of `num_blocks` blocks of `block_size` token slots. Layers are grouped by attention
// kind; every group has the same number of layers (`layers_per_group`, the last group of a kind
// padded), so one block id means the same number of bytes in every group. Physical storage is
// `layers_per_group` K/V tensors of [num_blocks, block_size, num_kv_heads, head_dim]; layer i of
// every group shares tensor i, which is why a block id belongs to exactly one group at a time.
// Pure host logic: nothing here touches KV memory.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ember::kv {

using BlockId = int32_t;
// Placeholder in a block list for a block a sliding-window group released (vLLM's null block).
inline constexpr BlockId kNullBlock = 0;

enum class AttentionKind : uint8_t {
  kFull,           // keeps every token's K/V
  kSlidingWindow,  // a query at position i reads keys (i - window, i]; older blocks are released
};

// Element type of stored K/V. kFp8E4M3 stores e4m3 values with one f32 scale per (token, KV head)
// for K and for V, so it needs no calibration.
enum class KvDtype : uint8_t { kF32, kF16, kBF16, kFp8E4M3 };

std::string_view KvDtypeName(KvDtype dtype);  // "f32", "f16", "bf16", "fp8"
// Accepts "f32"/"float32", "f16"/"float16"/"half", "bf16"/"bfloat16", "fp8"/"fp8_e4m3".
Expected<KvDtype> ParseKvDtype(std::string_view name);
// Bytes one token of one layer occupies: K and V for every KV head, plus fp8 scales.
int64_t KvBytesPerTokenPerLayer(KvDtype dtype, int64_t num_kv_heads, int64_t head_dim);

// One attention layer as the model declares it.
struct LayerKvSpec {
  AttentionKind kind = AttentionKind::kFull;
  int64_t window = 0;  // keys per query including itself, for kSlidingWindow
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
};

struct KvCacheGroupSpec {
  AttentionKind kind = AttentionKind::kFull;
  int64_t window = 0;
  std::vector<int> layers;  // model layer indices; layers[i] uses physical tensor i
};

struct KvCacheConfig {
  int64_t block_size = 16;  // token slots per block
  int64_t num_blocks = 0;   // including the null block 0, which is never handed out
  KvDtype dtype = KvDtype::kBF16;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t layers_per_group = 0;  // = number of physical K/V tensors
  std::vector<KvCacheGroupSpec> groups;
  std::vector<int> group_of_layer;     // [num_layers]
  std::vector<int> tensor_of_layer;    // [num_layers] index within its group

  // Bytes of one block across all physical tensors (what one block id costs).
  int64_t BytesPerBlock() const;
};

// Leading entries of a sliding-window group's block list that no query at a position >=
// num_computed_tokens reads (it reads keys (position - window, position]). The manager releases
// them; a KV export leaves them out.
int64_t SlidingWindowSkippedBlocks(int64_t window, int64_t block_size, int64_t num_computed_tokens);

// Groups `layers` (all sharing num_kv_heads and head_dim) into equal-size groups by kind.
// num_blocks is left 0; see NumBlocksForBudget.
Expected<KvCacheConfig> PlanKvGroups(const std::vector<LayerKvSpec>& layers, int64_t block_size, KvDtype dtype);
// Blocks that fit in `budget_bytes` (at least 2: the null block and one usable block).
Expected<int64_t> NumBlocksForBudget(const KvCacheConfig& config, int64_t budget_bytes);

// Bytes one sequence of `num_tokens` tokens holds in steady state: full groups all its blocks,
// sliding groups only the blocks that can intersect the window. The planner and `ember recipe`
// use this; the hybrid saving at long context is the ratio to an all-full configuration.
int64_t KvBytesPerSequence(const KvCacheConfig& config, int64_t num_tokens);

// "3 groups x 6 layers (1 full, 2 sliding 512), block 16 tokens, 12345 blocks = ..." for logs.
std::string DescribeKvConfig(const KvCacheConfig& config);

}  // namespace ember::kv
