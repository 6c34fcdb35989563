#include "kv/block_hash.h"

#include <xxhash.h>

#include <cstring>

#include "core/check.h"

namespace ember::kv {

namespace {
// Fixed so that hashes are reproducible across processes (a router or a later run can match them).
constexpr XXH64_hash_t kSeed = 0x656d626572'6b7631ULL;  // "emberkv1"
}  // namespace

BlockHash HashBlock(const BlockHash& parent, std::span<const int32_t> tokens, uint64_t extra_key) {
  // One contiguous message: parent (lo, hi), extra key, then the token ids, all in host byte order
  // (x86-64 and arm64 are both little-endian).
  std::vector<uint8_t> message(3 * sizeof(uint64_t) + tokens.size_bytes());
  const uint64_t header[3] = {parent.lo, parent.hi, extra_key};
  std::memcpy(message.data(), header, sizeof(header));
  if (!tokens.empty()) std::memcpy(message.data() + sizeof(header), tokens.data(), tokens.size_bytes());
  const XXH128_hash_t h = XXH3_128bits_withSeed(message.data(), message.size(), kSeed);
  return BlockHash{h.low64, h.high64};
}

void ExtendBlockHashes(std::span<const int32_t> tokens, int64_t block_size, uint64_t extra_key,
                       std::vector<BlockHash>& hashes) {
  EMBER_CHECK(block_size > 0);
  const int64_t num_full = static_cast<int64_t>(tokens.size()) / block_size;
  for (int64_t j = static_cast<int64_t>(hashes.size()); j < num_full; ++j) {
    const BlockHash parent = j == 0 ? BlockHash{} : hashes[j - 1];
    hashes.push_back(HashBlock(parent, tokens.subspan(j * block_size, block_size), extra_key));
  }
}

}  // namespace ember::kv
