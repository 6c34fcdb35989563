// Reproducible random inputs for tests: standard normal floats from a seed.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace ember::test {

inline std::vector<float> NormalValues(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

}  // namespace ember::test
