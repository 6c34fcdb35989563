// How a long-running command (`ember serve`, `ember router`) stops: SIGINT and SIGTERM are
// blocked in every thread (constructed before any thread starts, so they all inherit the mask)
// and taken by one watcher thread. The first signal starts a graceful stop; a second exits at
// once, for an operator who does not want to wait.
#pragma once

#include <signal.h>

#include <atomic>
#include <functional>
#include <thread>

namespace ember::tools {

class ShutdownSignals {
 public:
  ShutdownSignals();
  // Stops the watcher if it still waits for a signal.
  ~ShutdownSignals();
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

  // Starts the watcher: on the first signal it logs that requests in flight get up to
  // `shutdown_timeout_s` and calls `stop` (on the watcher thread).
  void Watch(double shutdown_timeout_s, std::function<void()> stop);
  // Ends the watcher (what `stop` touches may go after this); the destructor calls it too.
  void Stop();

 private:
  sigset_t signals_;
  std::atomic<bool> exiting_{false};
  std::thread watcher_;
};

// Each connection holds a descriptor: the soft limit (often 1024) is raised towards the hard one
// so that `descriptors` (with room for the model files and the listener) can be open at once.
void RaiseDescriptorLimit(size_t descriptors);

}  // namespace ember::tools
