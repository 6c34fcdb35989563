// What every per-variant micro benchmark does first: select the kernel level it is named for and
// size the global pool. A level this host cannot run marks the benchmark skipped.
#pragma once

#include <benchmark/benchmark.h>

#include <string>

#include "core/isa.h"
#include "core/thread_pool.h"

namespace ember::bench {

// False (and the benchmark skipped) if `variant` is not available here.
inline bool SelectVariantAndThreads(benchmark::State& state, const std::string& variant, int threads) {
  if (!SelectIsa(variant).ok()) {
    state.SkipWithError("variant not available on this host");
    return false;
  }
  ThreadPool::SetGlobalThreads(threads);
  return true;
}

}  // namespace ember::bench
