// Makes a hung engine step visible instead of silent. A monitor thread watches each step the
// engine core executes; one that runs far past its expected cost is logged once with its request
// ids and the op the engine thread is in (core/op_trace.h), and stalled() turns true, which
// /health reports as 503, until the step ends (then it logs how long the step took).
//
// Expected cost: seconds per scheduled token, a moving average over the finished steps, times
// the step's tokens. A step is stalled when it has run longer than both `min_seconds` and
// `factor` times that (before any step has finished, `first_step_seconds`: a cold start reads
// the weights in).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/op_trace.h"
#include "engine/step_observer.h"

namespace ember {

struct StepWatchdogOptions {
  double min_seconds = 10.0;
  double factor = 20.0;
  double first_step_seconds = 60.0;
  std::chrono::milliseconds poll{100};
};

class StepWatchdog : public StepObserver {
 public:
  explicit StepWatchdog(StepWatchdogOptions options = {});
  ~StepWatchdog() override;
  StepWatchdog(const StepWatchdog&) = delete;
  StepWatchdog& operator=(const StepWatchdog&) = delete;

  // The engine thread passes this to SetThreadOpTrace so the report can name the op.
  OpTrace* trace() { return &trace_; }

  void OnStepBegin(const SchedulerOutput& step, const std::vector<const std::string*>& request_ids) override;
  void OnStepEnd() override;

  // Any thread: true while the current step has run past its limit.
  bool stalled() const;
  // Any thread: what /health says while stalled, e.g. "engine step 41 has run for 12.0 s
  // (limit 10.0 s, 8 tokens) in layer 3 attention.o_proj; requests cmpl-1, cmpl-2"; "" otherwise.
  std::string StallMessage() const;
  // Any thread: how long the step in flight has run, in seconds (0 between steps).
  double CurrentStepSeconds() const;
  // The limit a step of `num_tokens` gets now, in seconds.
  double LimitSeconds(int64_t num_tokens) const;

 private:
  using Clock = std::chrono::steady_clock;
  void Monitor();
  double LimitSecondsLocked(int64_t num_tokens) const;
  // "engine step 41 has run for 12.0 s (limit 10.0 s, 8 tokens) in layer 3 attention.o_proj;
  // requests cmpl-1, cmpl-2" (the first few ids), with mu_ held.
  std::string DescribeLocked() const;

  const StepWatchdogOptions options_;
  OpTrace trace_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  // The step in flight (guarded by mu_).
  bool in_step_ = false;
  bool stalled_ = false;
  uint64_t step_id_ = 0;
  int64_t num_tokens_ = 0;
  std::vector<const std::string*> request_ids_;  // valid while in_step_
  Clock::time_point started_;
  double limit_s_ = 0.0;
  // Moving average of seconds per scheduled token over finished steps; < 0 before the first.
  double seconds_per_token_ = -1.0;
  std::thread monitor_;
};

}  // namespace ember
