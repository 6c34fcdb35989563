// The UCX KV connector between two instances in one process (a producer and a consumer on
// 127.0.0.1): a held request's KV lands in the consumer's blocks byte for byte, after a held
// prefix only the rest moves, and every way a pull can fail (another KV layout, an unknown or
// expired hold, a producer that goes away, an abort) ends the pull with an error and no write
// after it, within the configured timeouts.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "disagg/kv_transfer_config.h"
#include "disagg/ucx_kv_connector.h"
#include "engine/kv_transfer_params.h"
#include "model/kv_store.h"
#include "unit/model/filled_kv_store.h"

namespace ember::disagg {
namespace {

using Tables = std::vector<std::vector<int32_t>>;
constexpr int64_t kBlockSize = 4;
constexpr int64_t kTokens = 23;
constexpr int64_t kEntries = 6;

kv::KvCacheConfig Config(int64_t block_size = kBlockSize) {
  return test::RandomDecoderKvConfig(kv::KvDtype::kBF16, block_size, kEntries);
}
Tables ConsecutiveTables(int32_t first) { return test::ConsecutiveKvTables(first, kEntries); }
KvStore FilledStore(const kv::KvCacheConfig& config, int seed) { return test::FilledKvStore(config, seed); }

std::unique_ptr<UcxKvConnector> Start(KvRole role, const kv::KvCacheConfig& kv, double timeout_s = 10.0) {
  KvTransferConfig config;
  config.role = role;
  config.port = 0;  // any free port
  config.hold_timeout_s = timeout_s;
  config.pull_timeout_s = timeout_s;
  config.connect_timeout_s = timeout_s;
  auto connector = UcxKvConnector::Create(config, kv);
  EXPECT_TRUE(connector.ok()) << connector.status().ToString();
  return connector.ok() ? std::move(*connector) : nullptr;
}

// Collects events until `done` says so or 20 s pass.
template <typename Done>
KvConnector::Events WaitFor(KvConnector& connector, Done done) {
  KvConnector::Events all;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done(all) && std::chrono::steady_clock::now() < deadline) {
    KvConnector::Events events = connector.TakeEvents();
    for (RequestIndex r : events.released) all.released.push_back(r);
    for (auto& p : events.pulls) all.pulls.push_back(std::move(p));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return all;
}
auto OnePull = [](const KvConnector::Events& e) { return !e.pulls.empty(); };
auto OneRelease = [](const KvConnector::Events& e) { return !e.released.empty(); };

bool SameBytes(const KvExportSpans& a, const KvExportSpans& b) {
  if (a.spans.size() != b.spans.size()) return false;
  for (size_t i = 0; i < a.spans.size(); ++i) {
    if (a.spans[i].bytes.size() != b.spans[i].bytes.size() ||
        std::memcmp(a.spans[i].bytes.data(), b.spans[i].bytes.data(), a.spans[i].bytes.size()) != 0) {
      return false;
    }
  }
  return true;
}

TEST(UcxKvConnectorTest, PulledKvEqualsTheHeldKvAndFreesTheHold) {
  const kv::KvCacheConfig config = Config();
  const KvStore source = FilledStore(config, 1);
  auto dest = KvStore::Create(config);
  ASSERT_TRUE(dest.ok());
  auto producer = Start(KvRole::kProducer, config);
  auto consumer = Start(KvRole::kConsumer, config);
  ASSERT_TRUE(producer && consumer);
  EXPECT_GT(producer->port(), 0);

  auto exported = source.ExportSpans(ConsecutiveTables(1), kTokens);
  ASSERT_TRUE(exported.ok());
  const int64_t payload = exported->layout.PayloadBytes();
  auto where = producer->Hold(7, std::move(*exported), 42);
  ASSERT_TRUE(where.ok());
  EXPECT_EQ(where->num_tokens, kTokens);
  EXPECT_EQ(where->num_bytes, payload);
  auto into = dest->ImportSpansFor(ConsecutiveTables(3), kTokens, 0);
  ASSERT_TRUE(into.ok());
  consumer->StartPull(9, *where, 0, 1, std::move(*into));
  KvConnector::Events pulled = WaitFor(*consumer, OnePull);
  ASSERT_EQ(pulled.pulls.size(), 1u);
  EXPECT_EQ(pulled.pulls[0].index, 9u);
  ASSERT_TRUE(pulled.pulls[0].status.ok()) << pulled.pulls[0].status.ToString();
  EXPECT_EQ(pulled.pulls[0].bytes, payload);
  auto original = source.ExportSpans(ConsecutiveTables(1), kTokens);
  auto moved = dest->ExportSpans(ConsecutiveTables(3), kTokens);
  ASSERT_TRUE(original.ok() && moved.ok());
  EXPECT_TRUE(SameBytes(*original, *moved));
  // Pulled once, as asked: the producer frees it.
  KvConnector::Events released = WaitFor(*producer, OneRelease);
  ASSERT_EQ(released.released.size(), 1u);
  EXPECT_EQ(released.released[0], 7u);
  EXPECT_EQ(producer->Stats().bytes_sent, payload);
  EXPECT_EQ(consumer->Stats().bytes_received, payload);
  EXPECT_EQ(consumer->Stats().transfers_received, 1);

  // Pulled already: a second pull is refused with a message, and nothing is written.
  auto again = dest->ImportSpansFor(ConsecutiveTables(3), kTokens, 0);
  ASSERT_TRUE(again.ok());
  consumer->StartPull(10, *where, 0, 1, std::move(*again));
  KvConnector::Events refused = WaitFor(*consumer, OnePull);
  ASSERT_EQ(refused.pulls.size(), 1u);
  EXPECT_FALSE(refused.pulls[0].status.ok());
  EXPECT_NE(refused.pulls[0].status.message().find("holds no KV"), std::string::npos)
      << refused.pulls[0].status.ToString();
}

TEST(UcxKvConnectorTest, AfterAHeldPrefixOnlyTheRestMovesAndNChoicesPullOneHold) {
  const kv::KvCacheConfig config = Config();
  const KvStore source = FilledStore(config, 2);
  auto producer = Start(KvRole::kProducer, config);
  auto consumer = Start(KvRole::kConsumer, config);
  ASSERT_TRUE(producer && consumer);
  auto exported = source.ExportSpans(ConsecutiveTables(1), kTokens);
  ASSERT_TRUE(exported.ok());
  const int64_t whole = exported->layout.PayloadBytes();
  auto where = producer->Hold(1, std::move(*exported), 5);
  ASSERT_TRUE(where.ok());
  // Two choices pull the same hold: one with 2 blocks of prefix held, one with none.
  auto dest_a = KvStore::Create(config);
  auto dest_b = KvStore::Create(config);
  ASSERT_TRUE(dest_a.ok() && dest_b.ok());
  auto into_a = dest_a->ImportSpansFor(ConsecutiveTables(3), kTokens, 2 * kBlockSize);
  auto into_b = dest_b->ImportSpansFor(ConsecutiveTables(3), kTokens, 0);
  ASSERT_TRUE(into_a.ok() && into_b.ok());
  const int64_t rest = into_a->layout.PayloadBytes();
  EXPECT_LT(rest, whole);
  consumer->StartPull(2, *where, 2 * kBlockSize, 2, std::move(*into_a));
  consumer->StartPull(3, *where, 0, 2, std::move(*into_b));
  KvConnector::Events pulled = WaitFor(*consumer, [](const auto& e) { return e.pulls.size() == 2; });
  ASSERT_EQ(pulled.pulls.size(), 2u);
  for (const auto& p : pulled.pulls) EXPECT_TRUE(p.status.ok()) << p.status.ToString();
  auto original = source.ExportSpans(ConsecutiveTables(1), kTokens, 2 * kBlockSize);
  auto moved = dest_a->ExportSpans(ConsecutiveTables(3), kTokens, 2 * kBlockSize);
  ASSERT_TRUE(original.ok() && moved.ok());
  EXPECT_TRUE(SameBytes(*original, *moved));
  EXPECT_EQ(consumer->Stats().bytes_received, rest + whole);
  EXPECT_EQ(WaitFor(*producer, OneRelease).released.size(), 1u);
}

// Holds `source`'s KV of ConsecutiveTables(1) on the producer as request `index` and starts the
// consumer's pull of it into ConsecutiveTables(3) of `dest`.
void HoldAndStartPull(UcxKvConnector& producer, UcxKvConnector& consumer, const KvStore& source, KvStore& dest,
                      RequestIndex index) {
  auto exported = source.ExportSpans(ConsecutiveTables(1), kTokens);
  ASSERT_TRUE(exported.ok());
  auto where = producer.Hold(index, std::move(*exported), 5 + index);
  ASSERT_TRUE(where.ok());
  auto into = dest.ImportSpansFor(ConsecutiveTables(3), kTokens, 0);
  ASSERT_TRUE(into.ok());
  consumer.StartPull(index, *where, 0, 1, std::move(*into));
}

// The engine answers its client as soon as Hold returns, so a consumer's pull can reach the
// producer's thread together with the hold it names, still queued. The thread registers queued
// holds before it reads the messages that arrived, so the pull finds its hold. (Read the other
// way round, it was refused with "holds no KV" and the consumer computed the prompt itself: the
// disaggregation e2e flake of session 32.)
TEST(UcxKvConnectorTest, APullThatArrivesWithItsHoldStillQueuedFindsIt) {
  const kv::KvCacheConfig config = Config();
  const KvStore source = FilledStore(config, 7);
  auto dest = KvStore::Create(config);
  ASSERT_TRUE(dest.ok());
  auto producer = Start(KvRole::kProducer, config);
  auto consumer = Start(KvRole::kConsumer, config);
  ASSERT_TRUE(producer && consumer);
  // A first transfer connects the two, so the second pull is one message straight to the producer.
  HoldAndStartPull(*producer, *consumer, source, *dest, 1);
  KvConnector::Events connected = WaitFor(*consumer, OnePull);
  ASSERT_EQ(connected.pulls.size(), 1u);
  ASSERT_TRUE(connected.pulls[0].status.ok()) << connected.pulls[0].status.ToString();

  // The producer's thread waits while the hold is queued and the pull arrives at its worker. It
  // resumes on every way out of this block: a paused thread would hang the producer's destructor.
  {
    struct ResumeOnExit {
      std::function<void()> resume;
      ~ResumeOnExit() { resume(); }
    } paused{producer->PauseForTesting()};
    HoldAndStartPull(*producer, *consumer, source, *dest, 2);
    const auto sent = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (consumer->Stats().pulls_in_flight == 0 && std::chrono::steady_clock::now() < sent) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // loopback delivery
  }
  KvConnector::Events pulled = WaitFor(*consumer, OnePull);
  ASSERT_EQ(pulled.pulls.size(), 1u);
  EXPECT_TRUE(pulled.pulls[0].status.ok()) << pulled.pulls[0].status.ToString();
  EXPECT_EQ(consumer->Stats().transfers_received, 2);
}

TEST(UcxKvConnectorTest, AnotherKvLayoutIsRefusedAtConnectTime) {
  const kv::KvCacheConfig config = Config();
  const kv::KvCacheConfig other = Config(/*block_size=*/8);
  const KvStore source = FilledStore(config, 3);
  auto producer = Start(KvRole::kProducer, config);
  auto consumer = Start(KvRole::kConsumer, other);
  ASSERT_TRUE(producer && consumer);
  auto exported = source.ExportSpans(ConsecutiveTables(1), kTokens);
  ASSERT_TRUE(exported.ok());
  auto where = producer->Hold(1, std::move(*exported), 5);
  ASSERT_TRUE(where.ok());
  auto dest = KvStore::Create(other);
  ASSERT_TRUE(dest.ok());
  Tables tables(2, std::vector<int32_t>(3));
  std::iota(tables[0].begin(), tables[0].end(), 1);
  std::iota(tables[1].begin(), tables[1].end(), 4);
  auto into = dest->ImportSpansFor(tables, kTokens, 0);
  ASSERT_TRUE(into.ok()) << into.status().ToString();
  consumer->StartPull(2, *where, 0, 1, std::move(*into));
  KvConnector::Events refused = WaitFor(*consumer, OnePull);
  ASSERT_EQ(refused.pulls.size(), 1u);
  EXPECT_NE(refused.pulls[0].status.message().find("block size"), std::string::npos)
      << refused.pulls[0].status.ToString();
}

TEST(UcxKvConnectorTest, AHoldNobodyPullsExpires) {
  const kv::KvCacheConfig config = Config();
  const KvStore source = FilledStore(config, 4);
  auto producer = Start(KvRole::kProducer, config, /*timeout_s=*/0.3);
  ASSERT_TRUE(producer);
  auto exported = source.ExportSpans(ConsecutiveTables(1), kTokens);
  ASSERT_TRUE(exported.ok());
  ASSERT_TRUE(producer->Hold(11, std::move(*exported), 5).ok());
  KvConnector::Events released = WaitFor(*producer, OneRelease);
  ASSERT_EQ(released.released.size(), 1u);
  EXPECT_EQ(released.released[0], 11u);
  EXPECT_EQ(producer->Stats().holds_expired, 1);
}

TEST(UcxKvConnectorTest, AWrongPromptOrAGoneProducerFailsThePull) {
  const kv::KvCacheConfig config = Config();
  const KvStore source = FilledStore(config, 5);
  auto producer = Start(KvRole::kProducer, config);
  auto consumer = Start(KvRole::kConsumer, config, /*timeout_s=*/2.0);
  ASSERT_TRUE(producer && consumer);
  auto exported = source.ExportSpans(ConsecutiveTables(1), kTokens);
  ASSERT_TRUE(exported.ok());
  auto where = producer->Hold(1, std::move(*exported), 5);
  ASSERT_TRUE(where.ok());
  auto dest = KvStore::Create(config);
  ASSERT_TRUE(dest.ok());
  RemoteKv wrong = *where;
  wrong.tokens_hash ^= 1;
  auto into = dest->ImportSpansFor(ConsecutiveTables(3), kTokens, 0);
  ASSERT_TRUE(into.ok());
  consumer->StartPull(2, wrong, 0, 1, std::move(*into));
  KvConnector::Events refused = WaitFor(*consumer, OnePull);
  ASSERT_EQ(refused.pulls.size(), 1u);
  EXPECT_NE(refused.pulls[0].status.message().find("another prompt"), std::string::npos)
      << refused.pulls[0].status.ToString();

  // The producer goes away: the next pull fails within the connect/pull timeouts, no hang.
  RemoteKv gone = *where;
  producer.reset();
  auto into_again = dest->ImportSpansFor(ConsecutiveTables(3), kTokens, 0);
  ASSERT_TRUE(into_again.ok());
  const auto start = std::chrono::steady_clock::now();
  consumer->StartPull(3, gone, 0, 1, std::move(*into_again));
  KvConnector::Events failed = WaitFor(*consumer, OnePull);
  ASSERT_EQ(failed.pulls.size(), 1u);
  EXPECT_FALSE(failed.pulls[0].status.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(UcxKvConnectorTest, CancelledPullEndsWithAnError) {
  const kv::KvCacheConfig config = Config();
  auto consumer = Start(KvRole::kConsumer, config, /*timeout_s=*/30.0);
  ASSERT_TRUE(consumer);
  auto dest = KvStore::Create(config);
  ASSERT_TRUE(dest.ok());
  // A producer address nobody answers on within the test: the pull waits; the cancel ends it.
  RemoteKv nowhere;
  nowhere.host = "127.0.0.1";
  nowhere.port = 9;  // discard: nothing listens
  nowhere.num_tokens = kTokens;
  auto into = dest->ImportSpansFor(ConsecutiveTables(3), kTokens, 0);
  ASSERT_TRUE(into.ok());
  consumer->StartPull(4, nowhere, 0, 1, std::move(*into));
  consumer->CancelPull(4);
  KvConnector::Events cancelled = WaitFor(*consumer, OnePull);
  ASSERT_EQ(cancelled.pulls.size(), 1u);
  EXPECT_EQ(cancelled.pulls[0].index, 4u);
  EXPECT_FALSE(cancelled.pulls[0].status.ok());
}

TEST(UcxKvConnectorTest, AProducerOutsideAllowedProducersIsNeverContacted) {
  const kv::KvCacheConfig config = Config();
  const KvStore source = FilledStore(config, 6);
  auto producer = Start(KvRole::kProducer, config);
  ASSERT_TRUE(producer);
  KvTransferConfig only_other;
  only_other.role = KvRole::kConsumer;
  only_other.allowed_producers = {"10.0.0.9:14579"};
  auto consumer = UcxKvConnector::Create(only_other, config);
  ASSERT_TRUE(consumer.ok());
  auto exported = source.ExportSpans(ConsecutiveTables(1), kTokens);
  ASSERT_TRUE(exported.ok());
  auto where = producer->Hold(1, std::move(*exported), 5);
  ASSERT_TRUE(where.ok());
  auto dest = KvStore::Create(config);
  ASSERT_TRUE(dest.ok());
  auto into = dest->ImportSpansFor(ConsecutiveTables(3), kTokens, 0);
  ASSERT_TRUE(into.ok());
  (*consumer)->StartPull(2, *where, 0, 1, std::move(*into));
  KvConnector::Events refused = WaitFor(**consumer, OnePull);
  ASSERT_EQ(refused.pulls.size(), 1u);
  EXPECT_NE(refused.pulls[0].status.message().find("allowed_producers"), std::string::npos)
      << refused.pulls[0].status.ToString();
  EXPECT_EQ(producer->Stats().bytes_sent, 0);
}

TEST(KvTransferConfigTest, ParsesVllmShapeAndRefusesTypos) {
  auto config = ParseKvTransferConfig(
      R"({"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_port":0,)"
      R"("kv_connector_extra_config":{"pull_timeout_s":3}})");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->role, KvRole::kConsumer);
  EXPECT_TRUE(config->is_consumer());
  EXPECT_FALSE(config->is_producer());
  EXPECT_EQ(config->pull_timeout_s, 3.0);
  EXPECT_FALSE(ParseKvTransferConfig(R"({"kv_connector":"P2pNcclConnector","kv_role":"kv_producer"})").ok());
  EXPECT_FALSE(ParseKvTransferConfig(R"({"kv_connector":"UcxConnector","kv_role":"producer"})").ok());
  EXPECT_FALSE(ParseKvTransferConfig(R"({"kv_connector":"UcxConnector","kv_role":"kv_both","kv_prot":1})").ok());
  EXPECT_FALSE(ParseKvTransferConfig(R"({"kv_connector":"UcxConnector","kv_role":"kv_both","kv_port":70000})").ok());
  EXPECT_FALSE(ParseKvTransferConfig("[1]").ok());
  auto allowed = ParseKvTransferConfig(
      R"({"kv_connector":"UcxConnector","kv_role":"kv_consumer","kv_connector_extra_config":)"
      R"({"allowed_producers":["10.0.0.1:14579"]}})");
  ASSERT_TRUE(allowed.ok()) << allowed.status().ToString();
  EXPECT_TRUE(allowed->AllowsProducer("10.0.0.1", 14579));
  EXPECT_FALSE(allowed->AllowsProducer("10.0.0.1", 14580));
  EXPECT_FALSE(ParseKvTransferConfig(R"({"kv_connector":"UcxConnector","kv_role":"kv_consumer",)"
                                     R"("kv_connector_extra_config":{"allowed_producers":["10.0.0.1"]}})")
                   .ok());
}

}  // namespace
}  // namespace ember::disagg
