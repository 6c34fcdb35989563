// How a frontend (the server's AsyncEngine, the offline tools) talks to an engine core: submit and
// abort from any thread, step and wait on the thread that drives the loop. An interface so that
// the core can live elsewhere: today's implementation is InProcessEngineClient (below); a
// multi-process one (the core behind a socket, vLLM's MPClient) arrives with parallelism.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>
#include <string>
#include <vector>

#include "engine/engine_core.h"

namespace ember {

class EngineClient {
 public:
  virtual ~EngineClient() = default;

  // Any thread. Returns the index to abort with and to match outputs against. A request the
  // core rejects at admission comes out of Step() as a finished event with kError.
  virtual RequestIndex Submit(RequestInput input) = 0;
  // Any thread. Unknown or finished indices are ignored.
  virtual void Abort(RequestIndex index) = 0;

  // Loop thread: admits submissions and aborts, then runs one step if there is work; returns the
  // step's events (rejections included).
  virtual std::vector<RequestOutput> Step() = 0;
  // Loop thread: blocks until something was submitted or `timeout` passes, unless the core still
  // has work. Lets an idle loop sleep instead of spinning.
  virtual void WaitForWork(std::chrono::milliseconds timeout) = 0;
  // Loop thread: true while a submitted request has not had its final event, or the core still
  // has bookkeeping to finish, so `while (HasUnfinished()) Step();` runs everything to the end.
  virtual bool HasUnfinished() = 0;
  // Loop thread: the scheduler's counters, for metrics.
  virtual SchedulerStats Stats() const = 0;
  // Loop thread: tokens routed to each expert of each MoE layer since the engine started
  // (EngineCore::ReadExpertLoad), copied into `out` reusing its memory; empty for dense models.
  virtual void ReadExpertLoad(exec::ExpertLoad* out) const { *out = {}; }
  // Loop thread: told when each step's execution starts and ends (the step watchdog); null:
  // nobody. The observer must outlive the client or be reset first.
  virtual void SetStepObserver(StepObserver* observer) = 0;
};

// The final event of a request the engine refuses at admission: kError with `error`.
RequestOutput RejectedRequest(RequestIndex index, const RequestInput& input, std::string error);

// What Submit and Abort queue for the loop thread, shared by the clients: any thread adds, the
// loop thread takes everything at the start of a step (submissions before aborts, so an abort of a
// just-submitted request finds it).
class SubmissionQueue {
 public:
  struct Taken {
    std::vector<std::pair<RequestIndex, RequestInput>> submitted;
    std::vector<RequestIndex> aborted;
  };
  // Any thread: a new index unique for the client's lifetime.
  RequestIndex Submit(RequestInput input);
  void Abort(RequestIndex index);
  // Loop thread.
  Taken Take();
  bool empty();
  // Blocks until something is queued, Wake() is called or `timeout` passes.
  void Wait(std::chrono::milliseconds timeout);
  // Any thread: ends the current or next Wait early (a KV connector reporting a finished transfer).
  void Wake();

 private:
  std::atomic<RequestIndex> next_index_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  Taken queued_;  // guarded by mu_
  bool woken_ = false;  // guarded by mu_
};

// The core in this process. Submit() and Abort() queue under a mutex; Step() drains the queues
// (submissions before aborts, so an abort of a just-submitted request finds it) and then steps
// the core. Nothing else touches the core, so the core itself needs no locks.
class InProcessEngineClient final : public EngineClient {
 public:
  // `core` outlives the client; only the client's Step() may use it from now on.
  explicit InProcessEngineClient(EngineCore* core) : core_(core) {}
  // Any thread: wakes the loop from WaitForWork (what a KV connector calls when it has events).
  void Wake() { queue_.Wake(); }

  RequestIndex Submit(RequestInput input) override { return queue_.Submit(std::move(input)); }
  void Abort(RequestIndex index) override { queue_.Abort(index); }
  std::vector<RequestOutput> Step() override;
  void WaitForWork(std::chrono::milliseconds timeout) override;
  bool HasUnfinished() override;
  SchedulerStats Stats() const override { return core_->Stats(); }
  void ReadExpertLoad(exec::ExpertLoad* out) const override { core_->ReadExpertLoad(out); }
  void SetStepObserver(StepObserver* observer) override { core_->set_step_observer(observer); }

 private:
  // Loop thread: admits what was submitted; rejections become final events in `events`.
  void Drain(std::vector<RequestOutput>& events);

  EngineCore* core_;
  SubmissionQueue queue_;
};

}  // namespace ember
