// Prefill/decode disaggregation in the engine core, with a connector that records what it is
// asked and reports what the test says: a producer holds a finished prefill's blocks until the
// connector releases them; a consumer pulls a prompt's KV into blocks it allocated, decodes from
// there the same tokens a colocated run gets, computes the prompt itself when the pull fails or
// the KV is another prompt's, and never frees blocks the transport may still write.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <vector>

#include "engine/kv_connector.h"
#include "engine_harness.h"

namespace ember::test {
namespace {

class RecordingConnector : public KvConnector {
 public:
  struct Pull {
    RemoteKv from;
    int64_t first_token;
    int32_t num_pulls;
    int64_t num_tokens;
  };
  bool is_producer() const override { return true; }
  bool is_consumer() const override { return true; }
  Expected<RemoteKv> Hold(RequestIndex index, KvExportSpans spans, uint64_t tokens_hash) override {
    RemoteKv where;
    where.host = "127.0.0.1";
    where.port = 1;
    where.transfer_id = 1000 + index;
    where.num_tokens = spans.layout.num_tokens;
    where.tokens_hash = tokens_hash;
    held[index] = where;
    return where;
  }
  void StartPull(RequestIndex index, const RemoteKv& from, int64_t first_token, int32_t num_pulls,
                 KvImportSpans into) override {
    pulls[index] = {from, first_token, num_pulls, into.layout.num_tokens};
  }
  void CancelPull(RequestIndex index) override { cancelled.push_back(index); }
  void ReleaseRemote(const RemoteKv& from) override { released_remote.push_back(from.transfer_id); }
  Events TakeEvents() override { return std::exchange(events, {}); }
  void SetWake(std::function<void()>) override {}
  KvTransferStats Stats() const override { return {}; }

  std::map<RequestIndex, RemoteKv> held;
  std::map<RequestIndex, Pull> pulls;
  std::vector<RequestIndex> cancelled;
  std::vector<uint64_t> released_remote;
  Events events;
};

SchedulerConfig Config(bool producer, bool consumer) {
  SchedulerConfig c = FakeModelConfig(8, 64, 256);
  c.kv_producer = producer;
  c.kv_consumer = consumer;
  return c;
}

RequestInput Input(std::vector<int32_t> prompt, int32_t max_tokens) {
  RequestInput input;
  input.prompt_token_ids = std::move(prompt);
  input.sampling.max_tokens = max_tokens;
  input.sampling.ignore_eos = true;
  return input;
}

// What a colocated engine generates for `prompt`.
std::vector<int32_t> Colocated(const std::vector<int32_t>& prompt, int32_t max_tokens) {
  EngineHarness h(Config(false, false), HybridKv(4, 64, 8));
  const RequestIndex r = h.Add(Input(prompt, max_tokens));
  h.RunToCompletion(100);
  return h.result(r).tokens;
}

RemoteKv HeldFor(const std::vector<int32_t>& prompt) {
  RemoteKv where;
  where.host = "127.0.0.1";
  where.port = 1;
  where.transfer_id = 77;
  where.num_tokens = static_cast<int64_t>(prompt.size()) - 1;
  where.tokens_hash = KvTokensHash(std::span(prompt).first(prompt.size() - 1));
  return where;
}

// A consumer engine over the fake model, its connector recording what it is asked.
struct Consumer {
  explicit Consumer(kv::KvCacheConfig kv) : h(Config(false, true), std::move(kv)) { h.core().set_kv_connector(&connector); }
  // A request for `prompt` that brings `from` (by default: a producer's hold of this very prompt).
  RequestIndex AddPulling(const std::vector<int32_t>& prompt, int32_t max_tokens,
                          std::optional<RemoteKv> from = std::nullopt) {
    RequestInput input = Input(prompt, max_tokens);
    input.kv_transfer.remote_prefill = from ? *from : HeldFor(prompt);
    return h.Add(std::move(input));
  }
  void PullEnds(RequestIndex r, Status status, int64_t bytes = 10) {
    connector.events.pulls.push_back({r, std::move(status), bytes});
  }

  RecordingConnector connector;  // outlives the core that points at it
  EngineHarness h;
};

TEST(DisaggregationTest, ProducerHoldsThePromptKvUntilReleased) {
  EngineHarness h(Config(true, false), HybridKv(4, 64, 8));
  RecordingConnector connector;
  h.core().set_kv_connector(&connector);
  RequestInput input = Input(Prompt(22, 1), 1);
  input.kv_transfer.do_remote_decode = true;
  const RequestIndex r = h.Add(std::move(input));
  h.RunToCompletion(20);
  const RequestResult& result = h.result(r);
  ASSERT_EQ(result.num_final_events, 1);
  ASSERT_TRUE(result.final_event.kv_transfer_params.has_value());
  EXPECT_EQ(result.final_event.kv_transfer_params->num_tokens, 21);  // all but the last prompt token
  EXPECT_EQ(result.final_event.kv_transfer_params->tokens_hash, HeldFor(Prompt(22, 1)).tokens_hash);
  ASSERT_TRUE(connector.held.contains(r));
  EXPECT_GT(h.core().kv_cache().usage(), 0.0);  // held
  EXPECT_EQ(h.core().Stats().num_held_for_remote_decode, 1);
  connector.events.released.push_back(r);
  h.core().ApplyKvConnectorEvents();
  h.ExpectAllReleased();
}

TEST(DisaggregationTest, OnlyAProducerTakesDoRemoteDecodeAndOnlyAConsumerAPull) {
  EngineHarness h(Config(false, false), FullOnlyKv(4, 64));
  RequestInput input = Input(Prompt(8, 1), 1);
  input.kv_transfer.do_remote_decode = true;
  EXPECT_NE(h.core().AddRequest(0, std::move(input)).message().find("no KV producer"), std::string::npos);
  RequestInput pull = Input(Prompt(8, 1), 1);
  pull.kv_transfer.remote_prefill = HeldFor(Prompt(8, 1));
  EXPECT_NE(h.core().AddRequest(1, std::move(pull)).message().find("no KV consumer"), std::string::npos);
}

TEST(DisaggregationTest, ConsumerDecodesFromPulledKvLikeAColocatedRun) {
  const std::vector<int32_t> prompt = Prompt(22, 2);
  Consumer c(HybridKv(4, 64, 8));
  auto& [connector, h] = c;
  const RequestIndex r = c.AddPulling(prompt, 5);
  h.Step();
  ASSERT_TRUE(connector.pulls.contains(r));
  EXPECT_EQ(connector.pulls[r].first_token, 0);
  EXPECT_EQ(connector.pulls[r].num_tokens, 21);
  EXPECT_TRUE(h.executor().positions(r).empty());  // nothing computed while the KV is on its way
  EXPECT_FALSE(h.core().HasSchedulableWork());
  EXPECT_EQ(h.core().Stats().num_waiting_for_remote_kv, 1);
  h.Step();
  EXPECT_TRUE(h.executor().positions(r).empty());
  c.PullEnds(r, Status::Ok());
  h.RunToCompletion(20);
  // Only the last prompt token and the decodes were computed here.
  ASSERT_FALSE(h.executor().positions(r).empty());
  EXPECT_EQ(h.executor().positions(r).front(), 21);
  EXPECT_EQ(h.result(r).tokens, Colocated(prompt, 5));
  h.ExpectAllReleased();
}

TEST(DisaggregationTest, AFailedPullComputesThePromptHere) {
  const std::vector<int32_t> prompt = Prompt(22, 3);
  Consumer c(HybridKv(4, 64, 8));
  auto& h = c.h;
  const RequestIndex r = c.AddPulling(prompt, 5);
  h.Step();
  c.PullEnds(r, IoError("producer gone"), 0);
  h.RunToCompletion(20);
  EXPECT_EQ(h.executor().positions(r).front(), 0);
  EXPECT_EQ(h.result(r).tokens, Colocated(prompt, 5));
  h.ExpectAllReleased();
}

TEST(DisaggregationTest, KvOfAnotherPromptIsNeverPulled) {
  const std::vector<int32_t> prompt = Prompt(22, 4);
  Consumer c(HybridKv(4, 64, 8));
  auto& [connector, h] = c;
  const RequestIndex r = c.AddPulling(prompt, 5, HeldFor(Prompt(22, 5)));  // same length, other ids
  h.RunToCompletion(20);
  EXPECT_TRUE(connector.pulls.empty());
  EXPECT_EQ(h.result(r).tokens, Colocated(prompt, 5));
  h.ExpectAllReleased();
}

TEST(DisaggregationTest, AnAbortWhilePullingFreesTheBlocksOnlyWhenThePullEnds) {
  const std::vector<int32_t> prompt = Prompt(22, 6);
  Consumer c(HybridKv(4, 64, 8));
  auto& [connector, h] = c;
  const RequestIndex r = c.AddPulling(prompt, 5);
  h.Step();
  ASSERT_TRUE(h.core().AbortRequest(r));
  h.Step();
  EXPECT_EQ(h.result(r).reason, FinishReason::kAbort);
  ASSERT_EQ(connector.cancelled, std::vector<RequestIndex>{r});
  EXPECT_GT(h.core().kv_cache().usage(), 0.0);  // the transport may still write them
  c.PullEnds(r, IoError("cancelled"), 0);
  h.Step();
  h.ExpectAllReleased();
}

TEST(DisaggregationTest, APrefixCachedHereIsNotPulledAgain) {
  const std::vector<int32_t> prompt = Prompt(22, 7);
  Consumer c(FullOnlyKv(4, 64));
  auto& [connector, h] = c;
  std::vector<int32_t> shorter(prompt.begin(), prompt.begin() + 13);
  h.Add(Input(shorter, 1));  // caches 3 full blocks of the same prefix
  h.RunToCompletion(20);
  const RequestIndex r = c.AddPulling(prompt, 5);
  h.Step();
  ASSERT_TRUE(connector.pulls.contains(r));
  EXPECT_EQ(connector.pulls[r].first_token, 12);
  c.PullEnds(r, Status::Ok());
  h.RunToCompletion(20);
  EXPECT_EQ(h.executor().positions(r).front(), 21);
  EXPECT_EQ(h.result(r).tokens, Colocated(prompt, 5));
  h.ExpectAllReleased();
}

TEST(DisaggregationTest, ALongPromptTakesOnlyItsWindowsBlocksForThePull) {
  // 60 held positions in blocks of 4: the full group needs 15 blocks, each sliding group (window
  // 8) only the 3 its last query reads. Blocks for every position of every group (45) would not
  // fit this pool of 30; the window's do.
  const std::vector<int32_t> prompt = Prompt(61, 8);
  Consumer c(HybridKv(4, 30, 8));
  auto& [connector, h] = c;
  const RequestIndex r = c.AddPulling(prompt, 3);
  h.Step();
  ASSERT_TRUE(connector.pulls.contains(r));
  EXPECT_LE(h.core().kv_cache().usage(), 21.0 / 29.0);
  c.PullEnds(r, Status::Ok());
  h.RunToCompletion(20);
  EXPECT_EQ(h.executor().positions(r).front(), 60);
  EXPECT_EQ(h.result(r).tokens, Colocated(prompt, 3));
  h.ExpectAllReleased();
}

TEST(DisaggregationTest, AConsumerWithThePromptCachedReleasesTheHold) {
  const std::vector<int32_t> prompt = Prompt(17, 9);  // 16 held positions: 4 full blocks
  Consumer c(FullOnlyKv(4, 64));
  auto& [connector, h] = c;
  h.Add(Input(prompt, 4));  // caches the 4 blocks
  h.RunToCompletion(20);
  const RequestIndex r = c.AddPulling(prompt, 5);
  h.RunToCompletion(20);
  EXPECT_TRUE(connector.pulls.empty());
  EXPECT_EQ(connector.released_remote, std::vector<uint64_t>{77});
  EXPECT_EQ(h.result(r).tokens, Colocated(prompt, 5));
  h.ExpectAllReleased();
}

}  // namespace
}  // namespace ember::test
