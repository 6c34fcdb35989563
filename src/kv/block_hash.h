// Chained prefix-cache block hashes: block j's hash covers block j-1's hash, block j's token ids
// and the request's extra key, so equal hashes mean equal whole prefixes (vLLM's scheme,
// reference/serving_engines.md §2 item 3). 128-bit XXH3 with a fixed seed: identical across
// processes and runs, and collisions are negligible (~n^2 / 2^129 for n cached blocks).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace ember::kv {

struct BlockHash {
  uint64_t lo = 0;
  uint64_t hi = 0;
  friend bool operator==(const BlockHash&, const BlockHash&) = default;
};

// Hash of one full block: `tokens` are exactly block_size ids.
BlockHash HashBlock(const BlockHash& parent, std::span<const int32_t> tokens, uint64_t extra_key);

// Appends to `hashes` the chained hashes of every full block of `tokens` that it lacks, so a
// request's chain grows incrementally. The first block's parent is the all-zero hash.
void ExtendBlockHashes(std::span<const int32_t> tokens, int64_t block_size, uint64_t extra_key,
                       std::vector<BlockHash>& hashes);

}  // namespace ember::kv

template <>
struct std::hash<ember::kv::BlockHash> {
  // The hash is already uniform; its low word is a good bucket index.
  size_t operator()(const ember::kv::BlockHash& h) const noexcept { return static_cast<size_t>(h.lo); }
};
