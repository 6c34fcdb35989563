// A fake scheduling loop drives KvCacheManager through thousands of steps: random arrivals from
// a few shared prompt prefixes (so prefix hits happen), chunked prefill, decode, lookahead slots,
// preemption when the pool is short, aborts at any time, occasional prefix-cache resets. After
// every step the manager's invariants hold, and every prefix hit is checked against a shadow
// record of what each block was computed from. At the end every block is free again.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv_test_util.h"

namespace ember::kv {
namespace {

using testing::MakeConfig;

struct Request {
  uint64_t id = 0;
  uint64_t key = 0;
  std::vector<int32_t> tokens;  // prompt + generated
  int64_t max_len = 0;
  int64_t num_computed = 0;
};

// What a block's K/V was computed from: the extra key and the token prefix through its end.
uint64_t PrefixDigest(uint64_t key, const std::vector<int32_t>& tokens, int64_t end) {
  uint64_t h = 1469598103934665603ULL ^ key;  // FNV-1a, independent of the manager's XXH3
  for (int64_t i = 0; i < end; ++i) h = (h ^ static_cast<uint32_t>(tokens[i])) * 1099511628211ULL;
  return h;
}

struct Scenario {
  std::string name;
  KvCacheConfig config;
  bool prefix_caching;
};

class RandomizedTest : public ::testing::TestWithParam<int> {};

std::vector<Scenario> Scenarios() {
  return {
      // Pools sized so that admission waits and preemption happen, but not constantly.
      {"hybrid", MakeConfig(2, 4, 40, 8, 1 + 3 * 100), true},
      {"full_only", MakeConfig(3, 0, 0, 8, 1 + 150), true},
      {"sliding_only_window_1", MakeConfig(0, 2, 1, 4, 1 + 16), true},
      {"hybrid_no_prefix_caching", MakeConfig(1, 3, 21, 4, 1 + 4 * 140), false},
  };
}

TEST_P(RandomizedTest, FakeSchedulerKeepsInvariants) {
  const Scenario sc = Scenarios()[GetParam()];
  SCOPED_TRACE(sc.name);
  KvCacheManager kv(sc.config, {.enable_prefix_caching = sc.prefix_caching});
  const int64_t bs = sc.config.block_size;
  std::mt19937_64 rng(20261130 + GetParam());
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };

  std::vector<std::vector<int32_t>> bases;  // shared prompt prefixes
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> base(uniform(1, 120));
    for (auto& t : base) t = static_cast<int32_t>(uniform(0, 50));
    bases.push_back(base);
  }
  std::map<BlockId, uint64_t> shadow;  // cached-block contents, per block (groups hold distinct ids)
  std::deque<Request> waiting;
  std::vector<Request> running;
  uint64_t next_id = 1;
  int64_t preemptions = 0, hits = 0, aborts = 0, finished = 0;

  auto record_computed = [&](const Request& r) {
    const KvBlocks& blocks = kv.Blocks(r.id);
    for (const auto& list : blocks.per_group) {
      for (int64_t j = 0; j < std::min<int64_t>(r.num_computed / bs, list.size()); ++j) {
        if (list[j] != kNullBlock) shadow[list[j]] = PrefixDigest(r.key, r.tokens, (j + 1) * bs);
      }
    }
  };
  auto preempt_one = [&]() {
    const size_t victim = static_cast<size_t>(uniform(0, static_cast<int64_t>(running.size()) - 1));
    Request r = running[victim];
    kv.Free(r.id);
    r.num_computed = 0;
    running.erase(running.begin() + static_cast<std::ptrdiff_t>(victim));
    waiting.push_front(r);
    ++preemptions;
  };

  constexpr int kSteps = 4000;
  for (int step = 0; step < kSteps + 2000 && (step < kSteps || !running.empty() || !waiting.empty()); ++step) {
    const bool arrivals = step < kSteps;
    if (arrivals && chance(0.3)) {
      Request r;
      r.id = next_id++;
      r.key = chance(0.2) ? 1 : 0;
      r.tokens = bases[uniform(0, 3)];
      for (int64_t n = uniform(chance(0.3) ? 0 : 1, 40); n > 0; --n) r.tokens.push_back(static_cast<int32_t>(uniform(0, 50)));
      r.max_len = static_cast<int64_t>(r.tokens.size()) + uniform(1, 60);
      waiting.push_back(r);
    }
    // Admit from the head of the queue while the pool allows.
    while (!waiting.empty() && running.size() < 12) {
      Request& r = waiting.front();
      const CacheHit hit = kv.FindCachedPrefix(r.tokens, r.key);
      ASSERT_LT(hit.num_tokens, static_cast<int64_t>(r.tokens.size()));
      ASSERT_EQ(hit.num_tokens % bs, 0);
      for (const auto& list : hit.blocks.per_group) {
        ASSERT_EQ(static_cast<int64_t>(list.size()), hit.num_tokens / bs);
        for (size_t j = 0; j < list.size(); ++j) {
          if (list[j] == kNullBlock) continue;
          ASSERT_TRUE(shadow.contains(list[j]));
          ASSERT_EQ(shadow[list[j]], PrefixDigest(r.key, r.tokens, (j + 1) * bs)) << "wrong prefix hit";
        }
      }
      const int64_t chunk = std::min<int64_t>(uniform(1, 48), r.tokens.size() - hit.num_tokens);
      const int64_t free_before = kv.num_free_blocks();
      const auto appended = kv.AllocateSlots(r.id, hit.num_tokens, chunk, &hit);
      if (!appended) {
        ASSERT_EQ(kv.num_free_blocks(), free_before);
        break;
      }
      hits += hit.num_tokens > 0;
      ASSERT_EQ(appended->per_group, kv.Blocks(r.id).per_group);
      r.num_computed = hit.num_tokens;
      running.push_back(r);
      waiting.pop_front();
      // Its first chunk is computed at once (the loop below may give it a second one).
      Request& admitted = running.back();
      admitted.num_computed += chunk;
      record_computed(admitted);
      kv.CacheFullBlocks(admitted.id, admitted.tokens, admitted.num_computed, admitted.key);
    }
    // One step for every running request that was not just admitted: chunked prefill or decode.
    for (size_t i = 0; i < running.size();) {
      Request& r = running[i];
      if (r.num_computed == static_cast<int64_t>(r.tokens.size())) {
        if (static_cast<int64_t>(r.tokens.size()) >= r.max_len) {  // finished
          kv.Free(r.id);
          running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
          ++finished;
          continue;
        }
        r.tokens.push_back(static_cast<int32_t>(uniform(0, 50)));  // the sampled token
      }
      const int64_t remaining = static_cast<int64_t>(r.tokens.size()) - r.num_computed;
      const int64_t n = std::min<int64_t>(remaining, uniform(1, 32));
      const int64_t lookahead = uniform(0, 2);
      const size_t before = kv.Blocks(r.id).per_group[0].size();
      const auto appended = kv.AllocateSlots(r.id, r.num_computed, n, nullptr, lookahead);
      if (!appended) {
        preempt_one();  // possibly r itself; revisit the same index either way
        ASSERT_TRUE(kv.CheckInvariants().ok()) << kv.CheckInvariants().message();
        continue;
      }
      const KvBlocks& blocks = kv.Blocks(r.id);
      for (size_t g = 0; g < blocks.per_group.size(); ++g) {
        ASSERT_EQ(static_cast<int64_t>(blocks.per_group[g].size()),
                  std::max<int64_t>(before, (r.num_computed + n + lookahead + bs - 1) / bs));
        ASSERT_TRUE(std::equal(appended->per_group[g].rbegin(), appended->per_group[g].rend(),
                               blocks.per_group[g].rbegin()));
      }
      r.num_computed += n;
      record_computed(r);
      kv.CacheFullBlocks(r.id, r.tokens, r.num_computed, r.key);
      ++i;
    }
    if (chance(0.02) && !running.empty()) {  // abort a running request
      const size_t i = static_cast<size_t>(uniform(0, static_cast<int64_t>(running.size()) - 1));
      kv.Free(running[i].id);
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      ++aborts;
    }
    if (chance(0.01) && !waiting.empty()) {  // abort a waiting one (holds nothing)
      kv.Free(waiting.back().id);
      waiting.pop_back();
      ++aborts;
    }
    if (chance(0.002)) kv.ResetPrefixCache();
    const Status s = kv.CheckInvariants();
    ASSERT_TRUE(s.ok()) << "step " << step << ": " << s.message();
  }
  for (const Request& r : running) kv.Free(r.id);
  EXPECT_TRUE(kv.CheckInvariants().ok());
  EXPECT_EQ(kv.usage(), 0.0);
  EXPECT_EQ(kv.num_free_blocks(), sc.config.num_blocks - 1);
  std::printf("%s: %lld finished, %lld aborted, %lld preemptions, %lld admissions with a prefix hit, "
              "prefix cache %lld/%lld tokens\n",
              sc.name.c_str(), static_cast<long long>(finished), static_cast<long long>(aborts),
              static_cast<long long>(preemptions), static_cast<long long>(hits),
              static_cast<long long>(kv.prefix_cache_stats().hits), static_cast<long long>(kv.prefix_cache_stats().queries));
  EXPECT_GT(finished, 100);
  EXPECT_GT(preemptions, 0);  // the pool is small enough to be short sometimes
  if (sc.prefix_caching) {
    EXPECT_GT(hits, 50);
  } else {
    EXPECT_EQ(hits, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, RandomizedTest, ::testing::Range(0, 4),
                         [](const auto& info) { return Scenarios()[info.param].name; });

}  // namespace
}  // namespace ember::kv
