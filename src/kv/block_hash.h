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

// Content that positions [start, end) of a request stand for besides their token ids: a
// multimodal input whose placeholder tokens are the same for every image (or clip) of one size.
// Every block the range overlaps covers `hash` and where the range starts relative to the block,
// so the same placeholders over another image never share blocks (vLLM's mm extra keys).
struct ExtraContent {
  int64_t start = 0;
  int64_t end = 0;
  BlockHash hash;
  friend bool operator==(const ExtraContent&, const ExtraContent&) = default;
};

// What a request's block hashes cover besides its token ids: the cache-salt key (requests with
// different keys never share blocks) and its multimodal content, sorted by start.
struct BlockKeys {
  uint64_t salt = 0;
  std::span<const ExtraContent> content;
  BlockKeys(uint64_t salt = 0, std::span<const ExtraContent> content = {})  // NOLINT: a salt alone is the common case
      : salt(salt), content(content) {}
};

// Hash of one full block: `tokens` are exactly block_size ids; `content` is the extra content
// that overlaps the block, `block_start` the block's first position.
BlockHash HashBlock(const BlockHash& parent, std::span<const int32_t> tokens, uint64_t salt,
                    std::span<const ExtraContent> content = {}, int64_t block_start = 0);

// Appends to `hashes` the chained hashes of every full block of `tokens` that it lacks, so a
// request's chain grows incrementally. The first block's parent is the all-zero hash.
void ExtendBlockHashes(std::span<const int32_t> tokens, int64_t block_size, const BlockKeys& keys,
                       std::vector<BlockHash>& hashes);

}  // namespace ember::kv

template <>
struct std::hash<ember::kv::BlockHash> {
  // The hash is already uniform; its low word is a good bucket index.
  size_t operator()(const ember::kv::BlockHash& h) const noexcept { return static_cast<size_t>(h.lo); }
};
