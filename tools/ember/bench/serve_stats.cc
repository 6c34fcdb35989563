#include "tools/ember/bench/serve_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "core/check.h"

namespace ember::tools::bench {

double RequestResult::Tpot() const {
  const int64_t tokens = OutputTokens();
  return tokens > 1 ? (latency - ttft) / static_cast<double>(tokens - 1) : 0.0;
}

double Percentile(std::vector<double> values, double q) {
  EMBER_CHECK(!values.empty(), "percentile of no values");
  std::sort(values.begin(), values.end());
  const double rank = q / 100.0 * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(below);
  return values[below] + frac * (values[above] - values[below]);
}

Distribution Describe(const std::vector<double>& values) {
  Distribution d;
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  d.median = Percentile(values, 50);
  d.p90 = Percentile(values, 90);
  d.p99 = Percentile(values, 99);
  return d;
}

Status ParseGoodputTarget(const std::string& item, GoodputTargets* targets) {
  const size_t colon = item.find(':');
  const std::string key = item.substr(0, colon);
  double ms = -1;
  if (colon != std::string::npos) {
    try {
      size_t used = 0;
      ms = std::stod(item.substr(colon + 1), &used);
      if (used != item.size() - colon - 1) ms = -1;
    } catch (...) {
      ms = -1;
    }
  }
  if ((key != "ttft" && key != "tpot" && key != "e2el") || !(ms >= 0)) {
    return InvalidArgument(fmt::format("--goodput takes ttft:MS, tpot:MS or e2el:MS (milliseconds); got '{}'", item));
  }
  (*targets)[key] = ms;
  return Status::Ok();
}

bool MeetsTargets(const RequestResult& r, const GoodputTargets& targets) {
  const auto within = [&](const char* key, double seconds) {
    const auto it = targets.find(key);
    return it == targets.end() || seconds * 1000.0 <= it->second;
  };
  return r.ok && within("ttft", r.ttft) && within("tpot", r.Tpot()) && within("e2el", r.latency);
}

namespace {

nlohmann::ordered_json DistributionMs(const std::vector<double>& seconds) {
  if (seconds.empty()) return {{"mean", nullptr}, {"median", nullptr}, {"p90", nullptr}, {"p99", nullptr}};
  const Distribution d = Describe(seconds);
  return {{"mean", d.mean * 1000}, {"median", d.median * 1000}, {"p90", d.p90 * 1000}, {"p99", d.p99 * 1000}};
}

}  // namespace

nlohmann::ordered_json Summarize(const std::vector<RequestResult>& results, double duration_s,
                                 const GoodputTargets& targets) {
  std::vector<double> ttft, tpot, itl, e2el;
  int64_t completed = 0, good = 0, input_tokens = 0, output_tokens = 0, chunks = 0;
  bool chunks_equal_usage = true;
  std::set<std::string> errors;
  for (const RequestResult& r : results) {
    if (!r.ok) {
      errors.insert(r.error);
      continue;
    }
    ++completed;
    ttft.push_back(r.ttft);
    if (r.OutputTokens() > 1) tpot.push_back(r.Tpot());
    for (size_t i = 1; i < r.chunk_times.size(); ++i) itl.push_back(r.chunk_times[i] - r.chunk_times[i - 1]);
    e2el.push_back(r.latency);
    output_tokens += r.OutputTokens();
    input_tokens += std::max<int64_t>(r.usage_prompt_tokens, 0);
    chunks += r.chunks;
    chunks_equal_usage = chunks_equal_usage && r.chunks == r.usage_completion_tokens;
    if (MeetsTargets(r, targets)) ++good;
  }
  nlohmann::ordered_json error_list = nlohmann::ordered_json::array();
  for (const std::string& e : errors) {
    if (error_list.size() == 5) break;
    error_list.push_back(e);
  }
  nlohmann::ordered_json goodput_targets = nlohmann::ordered_json::object();
  for (const auto& [key, ms] : targets) goodput_targets[key] = ms;
  const double d = duration_s > 0 ? duration_s : 1e-9;
  return {{"completed", completed},
          {"failed", static_cast<int64_t>(results.size()) - completed},
          {"errors", error_list},
          {"duration_s", duration_s},
          {"total_input_tokens", input_tokens},
          {"total_output_tokens", output_tokens},
          {"total_chunks", chunks},
          {"chunks_equal_usage_tokens", chunks_equal_usage},
          {"request_throughput", completed / d},
          {"input_throughput", input_tokens / d},
          {"output_throughput", output_tokens / d},
          {"total_token_throughput", (input_tokens + output_tokens) / d},
          {"goodput_targets_ms", goodput_targets},
          {"request_goodput", good / d},
          {"ttft_ms", DistributionMs(ttft)},
          {"tpot_ms", DistributionMs(tpot)},
          {"itl_ms", DistributionMs(itl)},
          {"e2el_ms", DistributionMs(e2el)}};
}

}  // namespace ember::tools::bench
