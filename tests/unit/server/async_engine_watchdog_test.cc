// The step watchdog through the real engine thread: a step that hangs in the executor turns
// AsyncEngine::stalled() (and so /health) on, naming the op it hangs in, and off once it ends;
// the request still completes.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "../engine/engine_harness.h"
#include "core/op_trace.h"
#include "server/async_engine.h"

namespace ember::server {
namespace {

// Holds the first step inside a traced op until released.
class HangingExecutor : public Executor {
 public:
  HangingExecutor(const SchedulerConfig& config) : inner_(config, 1, 4) {}
  ModelRunnerOutput Execute(const SchedulerOutput& out) override {
    if (!out.empty() && hang_.exchange(false)) {
      ScopedOp layer("decoder", 7);
      ScopedOp op("moe.experts");
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!released_.load() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    return inner_.Execute(out);
  }
  void Release() { released_ = true; }

 private:
  test::FakeExecutor inner_;
  std::atomic<bool> hang_{true};
  std::atomic<bool> released_{false};
};

TEST(AsyncEngineWatchdogTest, AHungStepIsReportedAndClearsWhenItEnds) {
  SchedulerConfig config;
  config.vocab_size = test::kFakeVocabSize;
  HangingExecutor executor(config);
  auto core = EngineCore::Create({config, test::FullOnlyKv(4, 64), {}}, &executor);
  ASSERT_TRUE(core.ok()) << core.status().ToString();
  StepWatchdogOptions watchdog;
  watchdog.min_seconds = 0.1;
  watchdog.first_step_seconds = 0.1;
  watchdog.poll = std::chrono::milliseconds(10);
  InProcessEngineClient client(core->get());
  AsyncEngine engine(&client, nullptr, watchdog);
  engine.Start();

  RequestInput input;
  input.external_id = "cmpl-hung";
  input.prompt_token_ids = test::Prompt(6, 1);
  input.sampling.max_tokens = 3;
  auto submitted = engine.Submit(std::move(input));

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!engine.stalled() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(engine.stalled());
  const std::string message = engine.StallMessage();
  EXPECT_NE(message.find("in layer 7 moe.experts"), std::string::npos) << message;
  EXPECT_NE(message.find("requests cmpl-hung"), std::string::npos) << message;
  EXPECT_TRUE(engine.alive());

  executor.Release();
  RequestOutput event;
  std::vector<int32_t> tokens;
  while (submitted.stream->Pop(&event, std::chrono::seconds(10))) {
    tokens.insert(tokens.end(), event.new_token_ids.begin(), event.new_token_ids.end());
    if (event.finished) break;
  }
  EXPECT_TRUE(event.finished);
  EXPECT_EQ(event.finish_reason, FinishReason::kLength);
  EXPECT_EQ(tokens.size(), 3u);
  EXPECT_FALSE(engine.stalled());
  engine.Stop();
}

}  // namespace
}  // namespace ember::server
