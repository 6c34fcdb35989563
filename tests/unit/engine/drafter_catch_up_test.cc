// Which requests a drafter model catches up (engine/drafter_catch_up.h): the rule on its own, and
// the scheduler serving a stream of requests with a simulated drafter, timed as SmolLM2 BF16 with
// its Q4_1 drafter measured on the AMD EPYC VM (bench/results/spec_decode_s13), against the same
// stream without speculation.
#include "engine/drafter_catch_up.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "engine_harness.h"
#include "engine/scheduler.h"

namespace ember {
namespace {

TEST(DrafterCatchUp, ACurrentRequestAlwaysDrafts) {
  const DrafterCatchUp rule;
  EXPECT_TRUE(rule.Pays({.behind = DrafterCatchUp::kCurrent, .emitted = 0, .room = 100, .saving_per_token = 0.0}));
  EXPECT_FALSE(rule.Pays({.behind = DrafterCatchUp::kCurrent + 1, .emitted = 0, .room = 100, .saving_per_token = 0.0}));
}

TEST(DrafterCatchUp, LearnsWithOneRequestAtATime) {
  const DrafterCatchUp rule;
  EXPECT_TRUE(rule.Pays({.behind = 330, .saving_per_token = std::nullopt, .another_is_current = false}));
  EXPECT_FALSE(rule.Pays({.behind = 330, .saving_per_token = std::nullopt, .another_is_current = true}));
}

TEST(DrafterCatchUp, CatchesUpWhereTheExpectedSavingRepaysIt) {
  DrafterCatchUp rule;
  rule.ObserveCatchUp(330, 0.330);  // 1 ms per token
  for (int i = 0; i < 20; ++i) rule.ObserveFinished(200);
  EXPECT_NEAR(rule.seconds_per_token(), 1e-3, 1e-9);
  EXPECT_NEAR(rule.mean_output_tokens(), 200.0, 1e-6);
  // 330 ms of catch-up against 2 ms x 200 tokens: yes; against 0.6 ms x 200: no.
  EXPECT_TRUE(rule.Pays({.behind = 330, .emitted = 0, .room = 1000, .saving_per_token = 2e-3}));
  EXPECT_FALSE(rule.Pays({.behind = 330, .emitted = 0, .room = 1000, .saving_per_token = 0.6e-3}));
  // Only what the request may still emit counts.
  EXPECT_FALSE(rule.Pays({.behind = 330, .emitted = 0, .room = 100, .saving_per_token = 2e-3}));
  // Off (no saving): never.
  EXPECT_FALSE(rule.Pays({.behind = 40, .emitted = 0, .room = 1000, .saving_per_token = 0.0}));
  // A predicted saving must repay the catch-up twice: 2 ms x 200 = 400 ms against 2 x 330 ms.
  EXPECT_FALSE(rule.Pays({.behind = 330, .emitted = 0, .room = 1000, .saving_per_token = 2e-3, .saving_predicted = true}));
  EXPECT_TRUE(rule.Pays({.behind = 330, .emitted = 0, .room = 1000, .saving_per_token = 4e-3, .saving_predicted = true}));
  // Small catch-ups say little about a prompt's cost per token: not measured.
  rule.ObserveCatchUp(DrafterCatchUp::kCurrent, 1.0);
  EXPECT_NEAR(rule.seconds_per_token(), 1e-3, 1e-9);
}

TEST(DrafterCatchUp, ExpectsTokensLeftFromFinishedRequests) {
  DrafterCatchUp rule;
  // Before any request finished: as many as emitted so far, so a new request waits.
  EXPECT_EQ(rule.ExpectedTokensLeft(0, 100), 0.0);
  EXPECT_EQ(rule.ExpectedTokensLeft(30, 100), 30.0);
  EXPECT_EQ(rule.ExpectedTokensLeft(80, 15), 15.0);
  rule.ObserveFinished(100);
  EXPECT_EQ(rule.ExpectedTokensLeft(0, 500), 100.0);
  EXPECT_EQ(rule.ExpectedTokensLeft(40, 500), 60.0);
  EXPECT_EQ(rule.ExpectedTokensLeft(150, 500), 150.0);  // outlived the typical request
}

// Seconds of a forward over n tokens: the larger of streaming the weights (a fixed cost plus a
// little per row) and computing (per token, as a prefill does). Fitted to SmolLM2 on the AMD EPYC
// VM, 2 threads (bench/results/spec_decode_s13): the BF16 target decodes 4 requests in 30 ms and
// prefills 422 tok/s; its Q4_1 drafter runs a 4-request forward in 12.8 ms and prefills 681 tok/s.
struct ForwardCost {
  double fixed, per_row, per_token;
  double operator()(int64_t n) const {
    const double tokens = static_cast<double>(n);
    return std::max(fixed + per_row * tokens, per_token * tokens);
  }
};
constexpr ForwardCost kTarget{26e-3, 1.0e-3, 1.0 / 422.0};
constexpr ForwardCost kDrafter{11e-3, 0.45e-3, 1.0 / 681.0};

// Serves `num_requests` requests of `prompt_len` prompt tokens and `max_tokens` outputs at
// `concurrency` through the scheduler, with a simulated drafter when `k` > 0: it catches a
// request up over the tokens it has not computed (one forward for all), then runs a forward per
// further draft token; its drafts are right at 19 positions in 20. Returns output tokens per
// simulated second.
double SimulatedThroughput(int32_t k, int32_t concurrency, int num_requests, int prompt_len, int max_tokens) {
  StepCostModel cost;
  for (const int64_t n : {1, 2, 4, 8, 16, 32, 64, 128}) {
    cost.tokens.push_back(n);
    cost.seconds.push_back(kTarget(n));
  }
  SchedulerConfig c = test::AdaptiveSpecConfig(concurrency, k, std::move(cost), 2048, 4096);
  c.propose_cost_per_position = true;
  c.proposer_catches_up = true;
  const kv::KvCacheConfig kv_config = test::FullOnlyKv(16, 2000);
  kv::KvCacheManager kv(kv_config, {});
  Scheduler scheduler(c, &kv);
  test::FakeExecutor executor(c, 1, kv_config.block_size);
  executor.set_draft_errors([](std::span<const int32_t>, int64_t pos) { return (pos * 7919) % 20 == 0; });
  test::AddFixedLengthRequests(scheduler, num_requests, prompt_len, max_tokens);
  std::map<RequestIndex, int64_t> drafter_tokens;  // what the simulated drafter has computed
  double seconds = 0.0;
  int64_t emitted = 0;
  for (int step = 0; step < 20000 && scheduler.HasUnfinished(); ++step) {
    const SchedulerOutput out = scheduler.Schedule();
    if (out.empty()) continue;
    ModelRunnerOutput result = executor.Execute(out);
    int64_t catch_up_tokens = 0, drafting = 0, longest = 0;
    for (size_t i = 0; i < out.scheduled_reqs.size(); ++i) {
      emitted += static_cast<int64_t>(result.sampled_token_ids[i].size());
      if (out.num_tokens_to_propose.empty() || out.num_tokens_to_propose[i] == 0) continue;
      if (result.sampled_token_ids[i].empty()) continue;
      const RequestIndex idx = out.scheduled_reqs[i];
      const int64_t length = scheduler.Find(idx)->num_tokens() + static_cast<int64_t>(result.sampled_token_ids[i].size());
      catch_up_tokens += std::max<int64_t>(1, length - drafter_tokens[idx]);
      drafter_tokens[idx] = length;
      ++drafting;
      longest = std::max<int64_t>(longest, out.num_tokens_to_propose[i]);
    }
    if (drafting > 0) {
      const double catch_up = kDrafter(catch_up_tokens);
      result.propose_seconds = catch_up + static_cast<double>(longest - 1) * kDrafter(drafting);
      result.propose_catch_up_seconds = std::max(0.0, catch_up - kDrafter(drafting));
    }
    const double noise = 0.9 + 0.2 * static_cast<double>((step * 7919) % 101) / 100.0;
    result.execute_seconds = noise * kTarget(out.total_num_scheduled_tokens) + result.propose_seconds;
    seconds += result.execute_seconds;
    scheduler.UpdateFromOutput(out, result);
  }
  EXPECT_FALSE(scheduler.HasUnfinished());
  return static_cast<double>(emitted) / seconds;
}

// The edit dataset at 4 requests (bench/results/spec_decode_s13: 0.87x): the drafter makes a
// decode step ~1.1x faster, but catching up a 330-token prompt costs more than that saves over a
// 192-token output, so adaptive speculation must leave new requests to plain decoding.
TEST(DrafterCatchUp, AtFourRequestsACatchUpThatDoesNotPayIsNotMade) {
  const double plain = SimulatedThroughput(0, 4, 16, 330, 192);
  const double speculating = SimulatedThroughput(5, 4, 16, 330, 192);
  EXPECT_GE(speculating / plain, 0.98) << plain << " vs " << speculating << " tok/s";
}

// One request at a time, the drafter halves the time per token: catching up pays, and must still
// be made for every request.
TEST(DrafterCatchUp, AtOneRequestTheDrafterStillPays) {
  const double plain = SimulatedThroughput(0, 1, 6, 330, 192);
  const double speculating = SimulatedThroughput(5, 1, 6, 330, 192);
  EXPECT_GE(speculating / plain, 1.15) << plain << " vs " << speculating << " tok/s";
}

}  // namespace
}  // namespace ember
