#include "core/counter_random.h"

namespace ember {
namespace {
constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ull;  // SplitMix64's increment
}  // namespace

uint64_t Mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double SamplingUniform(uint64_t seed, int64_t token_index) {
  // Mixing the seed first keeps nearby seeds (42, 43, ...) from producing shifted copies of one
  // sequence, which plain SplitMix64 seeded with `seed` would.
  const uint64_t state = Mix64(seed) + kGoldenGamma * (static_cast<uint64_t>(token_index) + 1);
  return static_cast<double>(Mix64(state) >> 11) * 0x1.0p-53;
}

}  // namespace ember
