// Randomized workload against a tiny pool: random arrivals, lengths, shared prefixes, priorities,
// EOS and aborts over thousands of steps. FakeExecutor checks the SchedulerOutput invariants every
// step; at the end every request finished exactly once with its own tokens and the pool is empty.
#include <gtest/gtest.h>

#include <random>

#include "engine_harness.h"

namespace ember::test {
namespace {

constexpr int32_t kEos = 5;
constexpr int64_t kMaxModelLen = 96;

// Like FakeToken, but about one position in 40 emits EOS.
int32_t TokenWithEos(std::span<const int32_t> prompt, int64_t pos) {
  const int32_t t = FakeToken(prompt, pos);
  return t % 40 == 0 ? kEos : t;
}

std::vector<int32_t> ExpectedWithEos(const RequestInput& in) {
  std::vector<int32_t> out;
  const auto& prompt = in.prompt_token_ids;
  for (int64_t pos = static_cast<int64_t>(prompt.size());; ++pos) {
    out.push_back(TokenWithEos(prompt, pos));
    if (out.back() == kEos && static_cast<int32_t>(out.size()) >= in.sampling.min_tokens) break;
    if (static_cast<int32_t>(out.size()) >= in.sampling.max_tokens || pos + 1 >= kMaxModelLen) break;
  }
  return out;
}

struct RandomCase {
  const char* name;
  bool hybrid;
  bool chunked;
  SchedulingPolicy policy;
  uint32_t seed;
  int32_t num_speculative_tokens = 0;  // with drafts that go wrong at random positions
  bool adaptive = false;
};

class RandomWorkload : public ::testing::TestWithParam<RandomCase> {};

TEST_P(RandomWorkload, InvariantsHoldAndEverythingIsReleased) {
  const RandomCase& p = GetParam();
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = p.chunked ? 48 : kMaxModelLen;
  c.max_model_len = kMaxModelLen;
  c.enable_chunked_prefill = p.chunked;
  c.policy = p.policy;
  c.num_speculative_tokens = p.num_speculative_tokens;
  c.adaptive_speculation = p.adaptive;
  // A cost model where a wider step costs little more: adaptive speculation verifies often.
  c.step_cost = {{1, 8, 64}, {1e-3, 1.1e-3, 3e-3}};
  // Pools where one request of at most 96 tokens always fits alone (a whole 64-token prompt in
  // every group of the hybrid config), but eight at once do not.
  const kv::KvCacheConfig kv = p.hybrid ? HybridKv(4, 61, 12) : FullOnlyKv(4, 41);
  EngineHarness h(c, kv);
  h.executor().set_token_fn(TokenWithEos);
  if (p.num_speculative_tokens > 0) {
    // About one draft position in four goes wrong, so drafts are partly accepted.
    h.executor().set_draft_errors(
        [](std::span<const int32_t> prompt, int64_t pos) { return FakeToken(prompt, pos * 3 + 1) % 4 == 0; });
  }

  std::mt19937 rng(p.seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  // Three shared "system prompts" so prefix hits happen.
  std::vector<std::vector<int32_t>> prefixes = {Prompt(16, 100), Prompt(24, 200), Prompt(9, 300)};
  std::map<RequestIndex, RequestInput> inputs;
  std::vector<RequestIndex> live;

  constexpr int kArrivalSteps = 2500;
  for (int step = 0; step < kArrivalSteps; ++step) {
    if (uniform(0, 99) < 30) {
      RequestInput in;
      if (uniform(0, 1)) in.prompt_token_ids = prefixes[uniform(0, 2)];
      const int suffix = uniform(in.prompt_token_ids.empty() ? 1 : 0, 40);
      for (int i = 0; i < suffix; ++i) in.prompt_token_ids.push_back(uniform(10, 30000));
      in.sampling.max_tokens = uniform(1, 30);
      in.sampling.min_tokens = uniform(0, 3);
      in.priority = uniform(0, 3);
      in.eos_token_id = kEos;
      RequestInput copy = in;
      const RequestIndex idx = h.Add(std::move(in));
      inputs.emplace(idx, std::move(copy));
      live.push_back(idx);
    }
    if (!live.empty() && uniform(0, 99) < 3) {
      const size_t k = uniform(0, static_cast<int>(live.size()) - 1);
      h.core().AbortRequest(live[k]);  // false when it already finished: fine
      live.erase(live.begin() + k);
    }
    h.Step();
    if (step % 100 == 0) {
      const Status s = h.core().kv_cache().CheckInvariants();
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  }
  h.RunToCompletion(5000);

  const SchedulerStats stats = h.core().Stats();
  EXPECT_GT(stats.num_preemptions, 0);
  EXPECT_GT(stats.prefix_cache.hits, 0);
  int num_aborted = 0;
  for (const auto& [idx, in] : inputs) {
    const RequestResult& r = h.result(idx);
    const std::vector<int32_t> expected = ExpectedWithEos(in);
    ASSERT_NE(r.reason, FinishReason::kError) << r.error;
    if (r.reason == FinishReason::kAbort) {
      ++num_aborted;
      ASSERT_LE(r.tokens.size(), expected.size());
      EXPECT_TRUE(std::equal(r.tokens.begin(), r.tokens.end(), expected.begin())) << "request " << idx;
    } else {
      EXPECT_EQ(r.tokens, expected) << "request " << idx;
      EXPECT_EQ(r.reason, expected.back() == kEos && expected.size() >= static_cast<size_t>(in.sampling.min_tokens)
                              ? FinishReason::kStop
                              : FinishReason::kLength);
    }
  }
  EXPECT_GT(num_aborted, 0);
  if (p.num_speculative_tokens > 0) {
    EXPECT_GT(stats.spec_decode.num_drafts, 0);
    EXPECT_GT(stats.spec_decode.num_accepted_tokens, 0);
    EXPECT_LT(stats.spec_decode.num_accepted_tokens, stats.spec_decode.num_draft_tokens);
    RecordProperty("spec_accepted", static_cast<int>(stats.spec_decode.num_accepted_tokens));
    RecordProperty("spec_drafted", static_cast<int>(stats.spec_decode.num_draft_tokens));
  }
  h.ExpectAllReleased();
  RecordProperty("requests", static_cast<int>(inputs.size()));
  RecordProperty("preemptions", static_cast<int>(stats.num_preemptions));
  RecordProperty("prefix_hit_tokens", static_cast<int>(stats.prefix_cache.hits));
}

INSTANTIATE_TEST_SUITE_P(
    Scheduler, RandomWorkload,
    ::testing::Values(RandomCase{"full_fcfs_chunked", false, true, SchedulingPolicy::kFcfs, 1},
                      RandomCase{"full_priority_whole", false, false, SchedulingPolicy::kPriority, 2},
                      RandomCase{"hybrid_fcfs_whole", true, false, SchedulingPolicy::kFcfs, 3},
                      RandomCase{"hybrid_priority_chunked", true, true, SchedulingPolicy::kPriority, 4},
                      RandomCase{"full_fcfs_chunked_spec", false, true, SchedulingPolicy::kFcfs, 5, 4, false},
                      RandomCase{"hybrid_fcfs_whole_spec", true, false, SchedulingPolicy::kFcfs, 10, 5, false},
                      RandomCase{"hybrid_priority_chunked_adaptive", true, true, SchedulingPolicy::kPriority, 7, 3, true}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ember::test
