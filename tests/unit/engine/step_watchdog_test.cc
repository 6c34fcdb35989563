#include "engine/step_watchdog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace ember {
namespace {

using std::chrono::milliseconds;

SchedulerOutput StepOf(uint64_t id, std::vector<RequestIndex> reqs, int64_t tokens) {
  SchedulerOutput s;
  s.step_id = id;
  s.scheduled_reqs = std::move(reqs);
  s.total_num_scheduled_tokens = tokens;
  return s;
}

const std::string kIdA = "cmpl-a", kIdB = "cmpl-b";
const std::vector<const std::string*> kIds = {&kIdA, &kIdB};

StepWatchdogOptions FastOptions() {
  StepWatchdogOptions o;
  o.min_seconds = 0.2;
  o.factor = 20.0;
  o.first_step_seconds = 0.3;
  o.poll = milliseconds(10);
  return o;
}

// Polls `pred` for up to 5 s.
template <typename Pred>
bool Eventually(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

TEST(StepWatchdogTest, AStepPastItsLimitIsReportedWithItsOpUntilItEnds) {
  StepWatchdog watchdog(FastOptions());
  SetThreadOpTrace(watchdog.trace());
  watchdog.OnStepBegin(StepOf(41, {3, 5}, 2), kIds);
  {
    ScopedOp layer("decoder", 4);
    ScopedOp op("attention.o_proj");
    ASSERT_TRUE(Eventually([&] { return watchdog.stalled(); }));
    const std::string message = watchdog.StallMessage();
    EXPECT_NE(message.find("engine step 41"), std::string::npos) << message;
    EXPECT_NE(message.find("in layer 4 attention.o_proj"), std::string::npos) << message;
    EXPECT_NE(message.find("requests cmpl-a, cmpl-b"), std::string::npos) << message;
  }
  watchdog.OnStepEnd();
  EXPECT_FALSE(watchdog.stalled());
  EXPECT_EQ(watchdog.StallMessage(), "");
  SetThreadOpTrace(nullptr);
}

TEST(StepWatchdogTest, StepsWithinTheirLimitAreNeverStalled) {
  StepWatchdog watchdog(FastOptions());
  for (uint64_t i = 0; i < 20; ++i) {
    watchdog.OnStepBegin(StepOf(i, {1}, 4), {&kIdA});
    std::this_thread::sleep_for(milliseconds(2));
    EXPECT_FALSE(watchdog.stalled());
    watchdog.OnStepEnd();
  }
  EXPECT_FALSE(watchdog.stalled());
}

TEST(StepWatchdogTest, TheLimitFollowsTheMeasuredCostPerToken) {
  StepWatchdogOptions options = FastOptions();
  options.min_seconds = 0.0;
  StepWatchdog watchdog(options);
  EXPECT_DOUBLE_EQ(watchdog.LimitSeconds(1), 0.3);  // nothing measured yet: the first-step limit
  watchdog.OnStepBegin(StepOf(0, {1}, 10), {&kIdA});
  std::this_thread::sleep_for(milliseconds(20));
  watchdog.OnStepEnd();
  // At least 2 ms per token measured: a 100-token step may run 20x its 100 tokens' cost.
  EXPECT_GE(watchdog.LimitSeconds(100), 20 * 100 * 0.002);
  EXPECT_NEAR(watchdog.LimitSeconds(100) / watchdog.LimitSeconds(10), 10.0, 1e-9);
}

TEST(StepWatchdogTest, ScopedOpsNestAndRestore) {
  OpTrace trace;
  SetThreadOpTrace(&trace);
  EXPECT_EQ(trace.Describe(), "outside the model");
  {
    ScopedOp layer("decoder", 2);
    EXPECT_EQ(trace.Describe(), "layer 2 decoder");
    {
      ScopedOp inner("moe.experts");
      EXPECT_EQ(trace.Describe(), "layer 2 moe.experts");
    }
    EXPECT_EQ(trace.Describe(), "layer 2 decoder");
  }
  EXPECT_EQ(trace.Describe(), "outside the model");
  SetThreadOpTrace(nullptr);
  ScopedOp untraced("lm_head");  // no trace on this thread: nothing to write
  EXPECT_EQ(trace.Describe(), "outside the model");
}

}  // namespace
}  // namespace ember
