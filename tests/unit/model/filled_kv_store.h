// KV stores for the KV-transfer tests (tests/unit/model/kv_transfer_format_test.cc,
// tests/unit/disagg): the random dense decoder's KV layout (group 0 full attention on layers 1
// and 3, group 1 a sliding window of 5 on layers 0 and 2), block tables of consecutive ids, and
// stores whose every slot holds random K/V rows.
#pragma once

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "kv/spec.h"
#include "model/kv_store.h"
#include "random_dense_decoder.h"

namespace ember::test {

using KvTables = std::vector<std::vector<int32_t>>;

// Room for two requests of `entries` blocks per group, and a few more.
inline kv::KvCacheConfig RandomDecoderKvConfig(kv::KvDtype dtype, int64_t block_size, int64_t entries) {
  RandomDenseDecoder random;
  auto config = kv::PlanKvGroups(random.model().KvLayerSpecs(), block_size, dtype);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  config->num_blocks = 1 + 2 * entries + 4;
  return *config;
}

// Group g holds blocks first + g * entries, ... in order.
inline KvTables ConsecutiveKvTables(int32_t first, int64_t entries) {
  KvTables tables(2);
  for (int g = 0; g < 2; ++g) {
    tables[g].resize(entries);
    std::iota(tables[g].begin(), tables[g].end(), first + g * static_cast<int32_t>(entries));
  }
  return tables;
}

// A store whose every slot of every layer holds random K/V rows.
inline KvStore FilledKvStore(const kv::KvCacheConfig& config, int seed) {
  auto store = KvStore::Create(config);
  EXPECT_TRUE(store.ok());
  const int64_t width = config.num_kv_heads * config.head_dim;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> k(store->num_slots() * width), v(k.size());
  std::vector<int64_t> slots(store->num_slots());
  std::iota(slots.begin(), slots.end(), 0);
  for (size_t layer = 0; layer < config.group_of_layer.size(); ++layer) {
    for (float& x : k) x = normal(rng);
    for (float& x : v) x = normal(rng);
    store->Write(static_cast<int64_t>(layer), k.data(), v.data(), store->num_slots(), slots.data());
  }
  return std::move(*store);
}

}  // namespace ember::test
