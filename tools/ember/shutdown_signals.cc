#include "tools/ember/shutdown_signals.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "core/logging.h"

namespace ember::tools {

ShutdownSignals::ShutdownSignals() {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGINT);
  sigaddset(&signals_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
}

void ShutdownSignals::Watch(double shutdown_timeout_s, std::function<void()> stop) {
  watcher_ = std::thread([this, shutdown_timeout_s, stop = std::move(stop)] {
    int received = 0;
    sigwait(&signals_, &received);
    if (exiting_) return;
    EMBER_LOG_INFO("received {}: finishing requests in flight (at most {} s; a second signal exits now)",
                   received == SIGINT ? "SIGINT" : "SIGTERM", shutdown_timeout_s);
    stop();
    sigwait(&signals_, &received);
    if (exiting_) return;
    std::fprintf(stderr, "received a second signal: exiting at once\n");
    _exit(128 + received);
  });
}

ShutdownSignals::~ShutdownSignals() { Stop(); }

void ShutdownSignals::Stop() {
  exiting_ = true;
  if (watcher_.joinable()) {
    pthread_kill(watcher_.native_handle(), SIGTERM);  // the watcher may still wait for a signal
    watcher_.join();
  }
}

void RaiseDescriptorLimit(size_t descriptors) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t want = static_cast<rlim_t>(descriptors) + 256;
  if (limit.rlim_cur >= want) return;
  limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? want : std::min(want, limit.rlim_max);
  setrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < want) {
    EMBER_LOG_WARN("the descriptor limit ({}) is below the {} connections allowed: connections past it wait in the "
                   "accept queue", static_cast<uint64_t>(limit.rlim_cur), descriptors);
  }
}

}  // namespace ember::tools
