// The thread-safe front door of an EngineCore. Server threads Submit() and Abort() at any time;
// the engine thread calls Step(), which first drains what was submitted (submissions before
// aborts, so an abort of a just-submitted request finds it) and then steps the core. Nothing
// else touches the core, so the core itself needs no locks.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/engine_core.h"

namespace ember {

class EngineClient {
 public:
  // `core` outlives the client; only the client's Step() may use it from now on.
  explicit EngineClient(EngineCore* core) : core_(core) {}

  // Any thread. Returns the index to abort with and to match outputs against. A request the
  // core rejects at admission comes out of Step() as a finished event with kError.
  RequestIndex Submit(RequestInput input);
  // Any thread. Unknown or finished indices are ignored.
  void Abort(RequestIndex index);

  // Engine thread: drains submissions and aborts, then runs one step if there is work.
  std::vector<RequestOutput> Step();
  // Engine thread: blocks until something was submitted or `timeout` passes, unless the core
  // still has work. Lets an idle engine loop sleep instead of spinning.
  void WaitForWork(std::chrono::milliseconds timeout);

 private:
  // Engine thread: admits what was submitted; rejections become final events in `events`.
  void Drain(std::vector<RequestOutput>& events);

  EngineCore* core_;
  std::atomic<RequestIndex> next_index_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<RequestIndex, RequestInput>> submitted_;  // guarded by mu_
  std::vector<RequestIndex> aborted_;                             // guarded by mu_
};

}  // namespace ember
