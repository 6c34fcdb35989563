#include "engine/kv_transfer_params.h"

#include <xxhash.h>

namespace ember {

uint64_t KvTokensHash(std::span<const int32_t> tokens) {
  // Seeded so that this hash is never mistaken for a prefix-cache block hash of the same ids.
  constexpr uint64_t kSeed = 0x656d6b76'70726f6dULL;  // "emkvprom"
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), kSeed);
}

}  // namespace ember
