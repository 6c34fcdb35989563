#include "kv/block_hash.h"

#include <xxhash.h>

#include <cstring>

#include "core/check.h"

namespace ember::kv {

namespace {
// Fixed so that hashes are reproducible across processes (a router or a later run can match them).
constexpr XXH64_hash_t kSeed = 0x656d626572'6b7631ULL;  // "emberkv1"
}  // namespace

BlockHash HashBlock(const BlockHash& parent, std::span<const int32_t> tokens, uint64_t salt,
                    std::span<const ExtraContent> content, int64_t block_start) {
  // One contiguous message: parent (lo, hi), salt, the token ids, then per overlapping content
  // its hash and its start relative to the block, all in host byte order (x86-64 and arm64 are
  // both little-endian). Without content the message is what it was before multimodal inputs,
  // so text-only hashes did not change.
  const uint64_t header[3] = {parent.lo, parent.hi, salt};
  std::vector<uint8_t> message(sizeof(header) + tokens.size_bytes() + content.size() * 3 * sizeof(uint64_t));
  uint8_t* out = message.data();
  std::memcpy(out, header, sizeof(header));
  out += sizeof(header);
  if (!tokens.empty()) std::memcpy(out, tokens.data(), tokens.size_bytes());
  out += tokens.size_bytes();
  for (const ExtraContent& c : content) {
    const uint64_t words[3] = {c.hash.lo, c.hash.hi, static_cast<uint64_t>(c.start - block_start)};
    std::memcpy(out, words, sizeof(words));
    out += sizeof(words);
  }
  const XXH128_hash_t h = XXH3_128bits_withSeed(message.data(), message.size(), kSeed);
  return BlockHash{h.low64, h.high64};
}

void ExtendBlockHashes(std::span<const int32_t> tokens, int64_t block_size, const BlockKeys& keys,
                       std::vector<BlockHash>& hashes) {
  EMBER_CHECK(block_size > 0);
  const int64_t num_full = static_cast<int64_t>(tokens.size()) / block_size;
  // The content is sorted by start and its ranges do not overlap, so the ranges that touch block j
  // are a window that only moves forward.
  size_t first = 0;
  for (int64_t j = static_cast<int64_t>(hashes.size()); j < num_full; ++j) {
    const int64_t begin = j * block_size;
    const int64_t end = begin + block_size;
    while (first < keys.content.size() && keys.content[first].end <= begin) ++first;
    size_t last = first;
    while (last < keys.content.size() && keys.content[last].start < end) ++last;
    const BlockHash parent = j == 0 ? BlockHash{} : hashes[j - 1];
    hashes.push_back(HashBlock(parent, tokens.subspan(begin, block_size), keys.salt,
                               keys.content.subspan(first, last - first), begin));
  }
}

}  // namespace ember::kv
