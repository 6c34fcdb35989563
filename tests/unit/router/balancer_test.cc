#include "router/balancer.h"

#include <gtest/gtest.h>

#include <set>

namespace ember::router {
namespace {

using namespace std::chrono_literals;
const auto kT0 = Balancer::Clock::time_point{} + 1h;

TEST(BalancerTest, TiesGoRoundRobin) {
  Balancer b({"a", "b", "c"}, 2s);
  std::vector<size_t> picked;
  for (int i = 0; i < 6; ++i) {
    auto lease = b.Acquire(kT0, false);
    ASSERT_TRUE(lease);
    picked.push_back(lease->index());  // released at once: every instance stays at 0
  }
  EXPECT_EQ(picked, (std::vector<size_t>{0, 1, 2, 0, 1, 2}));
}

TEST(BalancerTest, PicksTheFewestInFlight) {
  Balancer b({"a", "b"}, 2s);
  auto first = b.Acquire(kT0, false);   // a
  auto second = b.Acquire(kT0, false);  // b
  auto third = b.Acquire(kT0, false);   // a again (tie, in turn)
  ASSERT_TRUE(first && second && third);
  EXPECT_EQ(b.in_flight(0) + b.in_flight(1), 3u);
  // a has 2 in flight, b 1: b goes next even though the turn is b's anyway; release b and hold
  // two more on b to check the count wins over the turn.
  auto fourth = b.Acquire(kT0, false);
  EXPECT_EQ(fourth->index(), 1u);
  auto fifth = b.Acquire(kT0, false);  // 2 and 2: the turn (a)
  EXPECT_EQ(fifth->index(), 0u);
  fifth.reset();
  first.reset();
  third.reset();  // a: 0, b: 2
  for (int i = 0; i < 3; ++i) {
    auto lease = b.Acquire(kT0, false);
    EXPECT_EQ(lease->index(), 0u) << i;  // released each time: a stays the least loaded
  }
  EXPECT_EQ(b.in_flight(0), 0u);
  EXPECT_EQ(b.in_flight(1), 2u);
}

TEST(BalancerTest, LeasesReleaseOnceAndMove) {
  Balancer b({"a"}, 2s);
  {
    auto lease = b.Acquire(kT0, false);
    EXPECT_EQ(b.in_flight(0), 1u);
    Balancer::Lease moved = std::move(*lease);
    EXPECT_EQ(b.in_flight(0), 1u);
    moved.Release();
    moved.Release();
    EXPECT_EQ(b.in_flight(0), 0u);
  }
  EXPECT_EQ(b.in_flight(0), 0u);
}

TEST(BalancerTest, AFailedConnectIsSkippedForTheBackoff) {
  Balancer b({"a", "b"}, 2s);
  EXPECT_TRUE(b.ReportConnectFailure(0, kT0));   // a state change: logged
  EXPECT_FALSE(b.ReportConnectFailure(0, kT0));  // still failing: not logged again
  for (int i = 0; i < 4; ++i) EXPECT_EQ(b.Acquire(kT0 + 1s, false)->index(), 1u);
  // Back-off over: a is tried again.
  std::set<size_t> seen;
  for (int i = 0; i < 4; ++i) seen.insert(b.Acquire(kT0 + 3s, false)->index());
  EXPECT_EQ(seen, (std::set<size_t>{0, 1}));
  EXPECT_TRUE(b.ReportSuccess(0));
  EXPECT_FALSE(b.ReportSuccess(0));
}

TEST(BalancerTest, WhenAllBackOffOnlyAForcedPickGetsOne) {
  Balancer b({"a", "b"}, 2s);
  b.ReportConnectFailure(0, kT0);
  b.ReportConnectFailure(1, kT0);
  EXPECT_FALSE(b.Acquire(kT0, false));  // prefill: fall back rather than wait on a dead instance
  auto forced = b.Acquire(kT0, true);   // decode: try anyway
  ASSERT_TRUE(forced);
  EXPECT_TRUE(b.backing_off(0, kT0));
  EXPECT_FALSE(b.backing_off(0, kT0 + 2s));
}

TEST(BalancerTest, ExcludedInstancesAreNotPicked) {
  Balancer b({"a", "b", "c"}, 2s);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b.Acquire(kT0, true, {0, 2})->index(), 1u);
  EXPECT_FALSE(b.Acquire(kT0, true, {0, 1, 2}));
}

TEST(BalancerTest, AFailureWithoutConnectProblemDoesNotBackOff) {
  Balancer b({"a"}, 2s);
  EXPECT_TRUE(b.ReportFailure(0));
  EXPECT_FALSE(b.ReportFailure(0));
  EXPECT_FALSE(b.backing_off(0, kT0));
  EXPECT_TRUE(b.Acquire(kT0, false));
}

}  // namespace
}  // namespace ember::router
