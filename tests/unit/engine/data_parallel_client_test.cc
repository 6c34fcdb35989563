// DataParallelEngineClient: requests spread over data-parallel ranks' cores (least loaded, then the
// longest cached prefix), every rank stepped together, each answer the one a single core gives.
#include "engine/data_parallel_client.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "any_token.h"
#include "engine_harness.h"

namespace ember::test {
namespace {

TEST(PickDataParallelRank, LeastLoadedThenLowerRank) {
  EXPECT_EQ(PickDataParallelRank(std::vector<DataParallelLoad>{{0, 0}, {0, 0}}), 0);
  EXPECT_EQ(PickDataParallelRank(std::vector<DataParallelLoad>{{1, 0}, {0, 0}}), 1);
  EXPECT_EQ(PickDataParallelRank(std::vector<DataParallelLoad>{{3, 0}, {2, 0}, {2, 0}}), 1);
}

TEST(PickDataParallelRank, CachedPrefixWinsWithinTheSlack) {
  // Rank 1 holds 32 tokens of the prompt and is 2 requests busier: the prefix wins.
  EXPECT_EQ(PickDataParallelRank(std::vector<DataParallelLoad>{{0, 0}, {kPrefixRoutingSlack, 32}}), 1);
  // Beyond the slack load wins.
  EXPECT_EQ(PickDataParallelRank(std::vector<DataParallelLoad>{{0, 0}, {kPrefixRoutingSlack + 1, 32}}), 0);
  // Equal prefixes: the less loaded, then the lower rank.
  EXPECT_EQ(PickDataParallelRank(std::vector<DataParallelLoad>{{2, 16}, {1, 16}, {1, 16}}), 1);
}

// Every rank's output run on its own FakeExecutor, as DataParallelStepper runs each on its rank.
class FakeDataParallelExecutor final : public DataParallelExecutor {
 public:
  FakeDataParallelExecutor(const SchedulerConfig& c, int ranks) {
    for (int d = 0; d < ranks; ++d) executors_.push_back(std::make_unique<FakeExecutor>(c, 1, 4));
  }
  std::vector<ModelRunnerOutput> ExecuteAll(std::span<const SchedulerOutput> steps) override {
    std::vector<ModelRunnerOutput> outputs;
    bool any = false;
    for (const SchedulerOutput& s : steps) any = any || !s.empty();
    for (size_t d = 0; d < steps.size(); ++d) {
      outputs.push_back(executors_[d]->Execute(steps[d]));
      if (any && steps[d].empty()) ++idle_steps;
    }
    ++steps_run;
    return outputs;
  }
  std::vector<std::unique_ptr<FakeExecutor>> executors_;
  int steps_run = 0;
  int idle_steps = 0;  // a rank without tokens in a step where another had some (a dummy forward)
};

struct DataParallelHarness {
  explicit DataParallelHarness(int ranks, bool prefix_caching = true) : executor(Config(), ranks) {
    for (int d = 0; d < ranks; ++d) {
      kv::KvCacheManagerOptions kv_options;
      kv_options.enable_prefix_caching = prefix_caching;
      auto core = EngineCore::Create({Config(), FullOnlyKv(4, 64), kv_options}, executor.executors_[d].get());
      EXPECT_TRUE(core.ok()) << core.status().ToString();
      cores.push_back(std::move(*core));
    }
    std::vector<EngineCore*> raw;
    for (auto& c : cores) raw.push_back(c.get());
    client = std::make_unique<DataParallelEngineClient>(raw, &executor);
  }
  static SchedulerConfig Config() { return FakeModelConfig(8, 64, 64); }
  // One step; every request's tokens so far are in `tokens`, final reasons in `reasons`.
  void Step() {
    for (const RequestOutput& e : client->Step()) {
      auto& t = tokens[e.req];
      t.insert(t.end(), e.new_token_ids.begin(), e.new_token_ids.end());
      if (e.finished) reasons[e.req] = e.finish_reason;
    }
  }
  void RunAll() {
    while (client->HasUnfinished()) Step();
  }
  std::map<RequestIndex, std::vector<int32_t>> tokens;
  std::map<RequestIndex, FinishReason> reasons;
  FakeDataParallelExecutor executor;
  std::vector<std::unique_ptr<EngineCore>> cores;
  std::unique_ptr<DataParallelEngineClient> client;
};

RequestInput Input(int64_t length, int32_t salt, int32_t max_tokens) {
  RequestInput in;
  in.prompt_token_ids = Prompt(length, salt);
  in.sampling.max_tokens = max_tokens;
  return in;
}

TEST(DataParallelEngineClient, SpreadsRequestsAndAnswersAsOneCore) {
  DataParallelHarness h(2);
  std::map<RequestIndex, RequestInput> inputs;
  for (int i = 0; i < 5; ++i) {
    RequestInput in = Input(6 + i, i, 3 + i);
    const RequestIndex idx = h.client->Submit(in);
    inputs[idx] = in;
  }
  h.Step();  // admits (and routes) them all
  std::map<int, int> per_rank;
  for (const auto& [idx, in] : inputs) ++per_rank[h.client->RankOf(idx)];
  EXPECT_EQ(per_rank[0], 3);  // 0, 1, 0, 1, 0: the least loaded, ties to the lower rank
  EXPECT_EQ(per_rank[1], 2);
  const SchedulerStats stats = h.client->Stats();
  ASSERT_EQ(stats.data_parallel_ranks.size(), 2u);
  EXPECT_EQ(stats.data_parallel_ranks[0].num_running + stats.data_parallel_ranks[0].num_waiting, 3);
  EXPECT_EQ(stats.num_running + stats.num_waiting, 5);
  h.RunAll();
  for (const auto& [idx, in] : inputs) {
    EXPECT_EQ(h.tokens[idx], ExpectedOutput(in.prompt_token_ids, in.sampling.max_tokens, 64)) << "request " << idx;
  }
  EXPECT_EQ(h.client->RankOf(0), -1);  // finished
}

TEST(DataParallelEngineClient, AnIdleRankStepsWithTheOthers) {
  DataParallelHarness h(2);
  const RequestInput in = Input(9, 7, 4);
  const RequestIndex idx = h.client->Submit(in);
  h.RunAll();
  EXPECT_EQ(h.tokens[idx], ExpectedOutput(in.prompt_token_ids, 4, 64));
  EXPECT_GT(h.executor.idle_steps, 0);
  EXPECT_EQ(h.executor.idle_steps, h.executor.steps_run - 1);  // every step but the last (finished only)
}

TEST(DataParallelEngineClient, PrefersTheRankHoldingThePrefix) {
  DataParallelHarness h(2);
  const RequestInput shared = Input(20, 3, 2);
  h.client->Submit(shared);
  h.RunAll();  // rank 0 computed (and cached) the prompt
  const RequestIndex busy = h.client->Submit(Input(8, 50, 30));  // both idle: rank 0
  h.Step();
  EXPECT_EQ(h.client->RankOf(busy), 0);
  // Rank 0 is now busier, but holds the prompt's prefix: the same prompt goes there.
  const RequestIndex again = h.client->Submit(shared);
  h.Step();
  EXPECT_EQ(h.client->RankOf(again), 0);
  // Without the prefix, the least loaded rank.
  const RequestIndex other = h.client->Submit(Input(20, 99, 2));
  h.Step();
  EXPECT_EQ(h.client->RankOf(other), 1);
  h.RunAll();
}

TEST(DataParallelEngineClient, RefusesStructuredOutputs) {
  DataParallelHarness h(2);
  RequestInput in = Input(6, 1, 4);
  in.sampling.constraint = std::make_shared<AnyToken>();  // grammars do not travel to the sampling rank
  const RequestIndex idx = h.client->Submit(std::move(in));
  h.RunAll();
  EXPECT_EQ(h.reasons[idx], FinishReason::kError);
  EXPECT_EQ(h.executor.steps_run, 0);
}

TEST(DataParallelEngineClient, AbortsReachTheRightRankAndRejectionsComeBack) {
  DataParallelHarness h(2);
  const RequestIndex a = h.client->Submit(Input(6, 1, 40));
  const RequestIndex b = h.client->Submit(Input(6, 2, 40));
  RequestInput empty;
  const RequestIndex bad = h.client->Submit(std::move(empty));
  h.Step();
  EXPECT_EQ(h.reasons[bad], FinishReason::kError);
  EXPECT_EQ(h.client->RankOf(b), 1);
  h.client->Abort(b);
  h.RunAll();
  EXPECT_EQ(h.reasons[b], FinishReason::kAbort);
  EXPECT_EQ(h.reasons[a], FinishReason::kLength);
}

}  // namespace
}  // namespace ember::test
