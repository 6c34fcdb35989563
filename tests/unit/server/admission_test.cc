#include "server/admission.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace ember::server {
namespace {

TEST(AdmissionTest, SlotsAreBoundedAndComeBack) {
  Admission admission;
  auto a = admission.TryAcquire(1, 2);
  auto b = admission.TryAcquire(1, 2);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(admission.TryAcquire(1, 2));
  EXPECT_EQ(admission.in_progress(), 2);
  a.reset();
  EXPECT_EQ(admission.in_progress(), 1);
  Admission::Slot moved = std::move(*b);
  b.reset();  // the moved-from slot holds nothing
  EXPECT_EQ(admission.in_progress(), 1);
  EXPECT_TRUE(admission.TryAcquire(1, 2));  // a temporary: taken and given back at once
  EXPECT_EQ(admission.in_progress(), 1);
}

// A request costs prompts x n: it takes them all or none, and gives them all back.
TEST(AdmissionTest, ARequestTakesItsWholeCostOrNothing) {
  Admission admission;
  auto big = admission.TryAcquire(6, 8);
  ASSERT_TRUE(big);
  EXPECT_EQ(admission.in_progress(), 6);
  EXPECT_FALSE(admission.TryAcquire(3, 8));  // 9 > 8: refused whole, nothing taken
  EXPECT_EQ(admission.in_progress(), 6);
  auto fits = admission.TryAcquire(2, 8);
  ASSERT_TRUE(fits);
  EXPECT_EQ(admission.in_progress(), 8);
  Admission::Slot moved;
  moved = std::move(*big);
  big.reset();
  EXPECT_EQ(admission.in_progress(), 8);
  moved = Admission::Slot();  // assigning over a held slot gives its cost back
  EXPECT_EQ(admission.in_progress(), 2);
  fits.reset();
  EXPECT_EQ(admission.in_progress(), 0);
}

// A burst of threads that all try at once (what the server's handler threads do), costing 1 or 2
// slots each: never more than the limit at a time, and the count returns to zero.
TEST(AdmissionTest, ABurstNeverAdmitsMoreThanTheLimit) {
  Admission admission;
  constexpr int kLimit = 3;
  std::atomic<int> holding{0}, most{0}, refused{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < 200; ++i) {
        auto slot = admission.TryAcquire(1 + i % 2, kLimit);
        if (!slot) {
          ++refused;
          continue;
        }
        const int now = holding += 1 + i % 2;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::yield();
        holding -= 1 + i % 2;
      }
    });
  }
  go = true;
  for (std::thread& t : threads) t.join();
  EXPECT_LE(most.load(), kLimit);
  EXPECT_GT(refused.load(), 0);
  EXPECT_EQ(admission.in_progress(), 0);
}

}  // namespace
}  // namespace ember::server
