// Runs one load level of `ember bench serve`: the sessions of a dataset sent at a fixed
// concurrency or as Poisson arrivals, one thread per in-flight session (fine for the tens of
// concurrent requests a CPU server takes; not meant for thousands).
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/ember/bench/serve_client.h"

namespace ember::tools::bench {

struct LoadLevel {
  int64_t concurrency = 0;    // > 0: this many sessions in flight, each worker takes the next one
  double request_rate = 0;    // concurrency 0: sessions start at Poisson arrivals of this rate
                              // (infinity: all at once)
  int64_t max_concurrency = 0;  // rate mode: at most this many sessions in flight (0: no cap)
  uint64_t seed = 0;            // of the arrival times
};

struct LevelRun {
  std::vector<RequestResult> results;  // in completion order
  double duration_s = 0;               // first send to last response
};

LevelRun RunLoadLevel(const ServerTarget& target, const std::string& model, const std::vector<Session>& sessions,
                      const LoadLevel& level, const nlohmann::json& extra_body);

}  // namespace ember::tools::bench
