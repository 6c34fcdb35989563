// Runs the engine loop on its own thread and connects it to HTTP handler threads: a handler
// submits a request and reads that request's events from its own RequestStream; the engine thread
// routes every step's events to the streams and refreshes the metrics. Post-processing
// (detokenizing, stop strings, JSON) stays on the handler threads, off the engine loop.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "engine/engine_client.h"
#include "engine/step_watchdog.h"
#include "server/metrics.h"

namespace ember::server {

// The events of one request, in order; the last one is finished.
class RequestStream {
 public:
  void Push(RequestOutput output);
  // Waits up to `timeout` for the next event (0: only takes one that is there); false if none.
  bool Pop(RequestOutput* out, std::chrono::milliseconds timeout);
  // Called (on the pushing thread, outside the lock) after every Push: how an HTTP connection
  // learns that its stream has events without a thread waiting on it. Empty: none.
  void SetListener(std::function<void()> listener);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> events_;
  std::shared_ptr<std::function<void()>> listener_;  // guarded by mu_
};

class AsyncEngine {
 public:
  // The index of a submission refused because the engine is not running (its stream gets one
  // finished error event carrying this index).
  static constexpr RequestIndex kNoRequest = ~RequestIndex{0};

  // `client` (which outlives this object) is stepped only by this object's thread once Start()
  // runs. `metrics` may be null. The step watchdog reports a step that runs far past its
  // expected cost (stalled()).
  AsyncEngine(EngineClient* client, ServerMetrics* metrics, StepWatchdogOptions watchdog = {});
  ~AsyncEngine();

  void Start();
  // Stops the loop after the current step; unfinished requests get a final error event.
  void Stop();

  struct Submitted {
    RequestIndex index;
    std::shared_ptr<RequestStream> stream;
  };
  Submitted Submit(RequestInput input);
  // Several requests may share one stream (the choices of one API call); events carry `req`.
  RequestIndex Submit(RequestInput input, std::shared_ptr<RequestStream> stream);
  void Abort(RequestIndex index);

  // From any thread, the engine thread included (e.g. a tensor-parallel fault handler inside a
  // step whose peer rank died): every unfinished request gets a final error event with `message`,
  // later submissions are refused, and /health answers 503 with `message`. The loop itself may
  // still be blocked; the caller ends the process.
  void Fail(const std::string& message);
  // Why Fail() was called, or "" (for /health).
  std::string FailureMessage() const;

  // False once the engine loop has died (a bug), stopped or Fail() was called; /health answers 503 then.
  bool alive() const { return alive_.load(); }
  // True while the current step runs far past its expected cost; /health answers 503 with
  // StallMessage() then.
  bool stalled() const { return watchdog_.stalled(); }
  std::string StallMessage() const { return watchdog_.StallMessage(); }
  // How long the engine step in flight has run (0 between steps).
  double CurrentStepSeconds() const { return watchdog_.CurrentStepSeconds(); }
  // Requests submitted and not finished yet (for overload control).
  int64_t num_in_flight() const { return in_flight_.load(); }

 private:
  void Loop();
  void Route(std::vector<RequestOutput> outputs);
  void FailAll(const std::string& message);
  void UpdateMetrics(const std::vector<RequestOutput>& outputs);

  EngineClient* client_;
  ServerMetrics* metrics_;
  StepWatchdog watchdog_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> alive_{false};
  std::atomic<int64_t> in_flight_{0};
  mutable std::mutex failure_mu_;
  std::string failure_;  // guarded by failure_mu_
  std::mutex streams_mu_;
  std::unordered_map<RequestIndex, std::shared_ptr<RequestStream>> streams_;  // guarded by streams_mu_
  // Previous totals, to turn the scheduler's cumulative counters into metric increments.
  KvTransferStats last_kv_;
  MultiModalStepStats last_mm_;
  int64_t last_preemptions_ = 0, last_prefix_queries_ = 0, last_prefix_hits_ = 0;
  SpecDecodeCounters last_spec_;
  std::unordered_map<RequestIndex, Clock::time_point> last_token_time_;  // engine thread only
};

}  // namespace ember::server
