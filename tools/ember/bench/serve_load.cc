#include "tools/ember/bench/serve_load.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace ember::tools::bench {

LevelRun RunLoadLevel(const ServerTarget& target, const std::string& model, const std::vector<Session>& sessions,
                      const LoadLevel& level, const nlohmann::json& extra_body) {
  LevelRun run;
  std::mutex mutex;
  std::condition_variable slot_freed;
  int64_t in_flight = 0;
  const auto run_session = [&](const Session& session) {
    for (const BenchRequest& request : session.requests) {
      RequestResult result = SendCompletion(target, model, request, extra_body);
      std::lock_guard<std::mutex> lock(mutex);
      run.results.push_back(std::move(result));
    }
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  // The next session a fixed-concurrency worker takes; declared here so that it outlives the
  // threads, which are joined below.
  std::atomic<size_t> next{0};
  if (level.concurrency > 0) {
    const int64_t workers = std::min<int64_t>(level.concurrency, static_cast<int64_t>(sessions.size()));
    for (int64_t w = 0; w < workers; ++w) {
      threads.emplace_back([&] {
        for (size_t i = next++; i < sessions.size(); i = next++) run_session(sessions[i]);
      });
    }
  } else {
    BenchRng arrivals(level.seed);
    auto at = start;
    for (const Session& session : sessions) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        slot_freed.wait(lock, [&] { return level.max_concurrency <= 0 || in_flight < level.max_concurrency; });
        ++in_flight;
      }
      threads.emplace_back([&, s = &session] {
        run_session(*s);
        std::lock_guard<std::mutex> lock(mutex);
        --in_flight;
        slot_freed.notify_one();
      });
      if (std::isfinite(level.request_rate)) {
        at += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(arrivals.Exponential(level.request_rate)));
        std::this_thread::sleep_until(at);
      }
    }
  }
  for (std::thread& t : threads) t.join();
  run.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

}  // namespace ember::tools::bench
