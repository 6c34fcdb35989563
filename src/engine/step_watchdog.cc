#include "engine/step_watchdog.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>

#include "core/logging.h"

namespace ember {
namespace {
// Weight of the newest step in the moving average of seconds per token.
constexpr double kAverageWeight = 0.1;
// Request ids a report lists before it says "and N more".
constexpr size_t kMaxListedRequests = 16;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

StepWatchdog::StepWatchdog(StepWatchdogOptions options) : options_(options) {
  monitor_ = std::thread([this] { Monitor(); });
}

StepWatchdog::~StepWatchdog() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  monitor_.join();
}

double StepWatchdog::LimitSecondsLocked(int64_t num_tokens) const {
  if (seconds_per_token_ < 0) return std::max(options_.min_seconds, options_.first_step_seconds);
  const double expected = seconds_per_token_ * static_cast<double>(std::max<int64_t>(1, num_tokens));
  return std::max(options_.min_seconds, options_.factor * expected);
}

double StepWatchdog::LimitSeconds(int64_t num_tokens) const {
  std::lock_guard lock(mu_);
  return LimitSecondsLocked(num_tokens);
}

void StepWatchdog::OnStepBegin(const SchedulerOutput& step, const std::vector<const std::string*>& request_ids) {
  std::lock_guard lock(mu_);
  in_step_ = true;
  stalled_ = false;
  step_id_ = step.step_id;
  num_tokens_ = step.total_num_scheduled_tokens;
  request_ids_ = request_ids;  // reuses the capacity: no allocation in a steady state
  started_ = Clock::now();
  limit_s_ = LimitSecondsLocked(num_tokens_);
}

void StepWatchdog::OnStepEnd() {
  std::lock_guard lock(mu_);
  const double elapsed = SecondsSince(started_);
  if (stalled_) {
    EMBER_LOG_WARN("engine step {} finished after {:.1f} s; /health answers 200 again", step_id_, elapsed);
  }
  in_step_ = false;
  stalled_ = false;
  if (num_tokens_ > 0) {
    const double per_token = elapsed / static_cast<double>(num_tokens_);
    seconds_per_token_ =
        seconds_per_token_ < 0 ? per_token : (1 - kAverageWeight) * seconds_per_token_ + kAverageWeight * per_token;
  }
}

double StepWatchdog::CurrentStepSeconds() const {
  std::lock_guard lock(mu_);
  return in_step_ ? std::chrono::duration<double>(Clock::now() - started_).count() : 0.0;
}

bool StepWatchdog::stalled() const {
  std::lock_guard lock(mu_);
  return stalled_;
}

std::string StepWatchdog::DescribeLocked() const {
  const size_t listed = std::min(request_ids_.size(), kMaxListedRequests);
  std::string ids;
  for (size_t i = 0; i < listed; ++i) ids += (i > 0 ? ", " : "") + *request_ids_[i];
  if (request_ids_.size() > listed) ids += fmt::format(" and {} more", request_ids_.size() - listed);
  return fmt::format("engine step {} has run for {:.1f} s (limit {:.1f} s, {} tokens) in {}; requests {}", step_id_,
                     SecondsSince(started_), limit_s_, num_tokens_, trace_.Describe(), ids);
}

std::string StepWatchdog::StallMessage() const {
  std::lock_guard lock(mu_);
  return stalled_ ? DescribeLocked() : std::string();
}

void StepWatchdog::Monitor() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, options_.poll);
    if (!in_step_ || stalled_ || SecondsSince(started_) <= limit_s_) continue;
    stalled_ = true;
    EMBER_LOG_ERROR("{}; /health answers 503 until it finishes (a hang here is a bug: `gdb -p {}` and "
                    "`thread apply all bt` show where the engine thread is)", DescribeLocked(), getpid());
  }
}

}  // namespace ember
