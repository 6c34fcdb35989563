// Latency and throughput statistics of one `ember bench serve` level, in the JSON shape that
// scripts/bench_plot.py and scripts/bench_vs_llamacpp_serve.py read (the shape vLLM's
// `bench serve` popularised: ttft_ms / tpot_ms / itl_ms / e2el_ms with mean, median, p90, p99).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace ember::tools::bench {

// What the client saw of one streamed completion. Times are seconds from the request's start.
struct RequestResult {
  bool ok = false;
  std::string error;
  double ttft = 0;     // first chunk that carried text
  double latency = 0;  // last byte of the response
  std::vector<double> chunk_times;  // arrival of every chunk that carried text
  int64_t chunks = 0;
  int64_t usage_prompt_tokens = -1;      // from the final usage chunk; -1 if the server sent none
  int64_t usage_completion_tokens = -1;

  // Output tokens: the server's usage when it sent one (a server may pack several tokens into
  // one chunk), else the chunk count.
  int64_t OutputTokens() const { return usage_completion_tokens >= 0 ? usage_completion_tokens : chunks; }
  // (latency - ttft) / (tokens - 1): the mean time per token after the first; 0 for one token.
  double Tpot() const;
};

struct Distribution {
  double mean = 0;
  double median = 0;
  double p90 = 0;
  double p99 = 0;
};

// The q-th percentile (0..100) with linear interpolation between the closest ranks (numpy's
// default), so the numbers match the Python tools'. `values` must not be empty.
double Percentile(std::vector<double> values, double q);
Distribution Describe(const std::vector<double>& values);

// Latency targets in milliseconds by metric name: "ttft", "tpot", "e2el".
using GoodputTargets = std::map<std::string, double>;
// "ttft:500" -> targets["ttft"] = 500; errors name the bad item.
Status ParseGoodputTarget(const std::string& item, GoodputTargets* targets);
// Whether a successful request met every target.
bool MeetsTargets(const RequestResult& r, const GoodputTargets& targets);

// The summary of one level: counts, token totals, throughputs over `duration_s`, goodput and
// the four latency distributions (milliseconds; null when there is no sample).
nlohmann::ordered_json Summarize(const std::vector<RequestResult>& results, double duration_s,
                                 const GoodputTargets& targets);

}  // namespace ember::tools::bench
