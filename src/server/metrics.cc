#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "server/expert_load_metrics.h"

namespace ember::server {
void Header(const std::string& name, const std::string& help, const char* type, std::string* out) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

namespace {

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

}  // namespace

void Counter::Add(double value) {
  std::lock_guard lock(mutex_);
  value_ += value;
}
double Counter::value() const {
  std::lock_guard lock(mutex_);
  return value_;
}
void Counter::Render(const std::string& labels, std::string* out) const {
  Header(name_, help_, "counter", out);
  *out += fmt::format("{}{{{}}} {}\n", name_, labels, Number(value()));
}

void Gauge::Set(double value) {
  std::lock_guard lock(mutex_);
  value_ = value;
}
double Gauge::value() const {
  std::lock_guard lock(mutex_);
  return value_;
}
void Gauge::Render(const std::string& labels, std::string* out) const {
  Header(name_, help_, "gauge", out);
  *out += fmt::format("{}{{{}}} {}\n", name_, labels, Number(value()));
}

void GaugeVector::Resize(size_t n) {
  std::lock_guard lock(mutex_);
  // Grows only: a scrape between a Resize and the Sets that follow must not see counters drop.
  if (values_.size() < n) values_.resize(n, 0.0);
}
void GaugeVector::Set(size_t index, double value) {
  std::lock_guard lock(mutex_);
  if (index < values_.size()) values_[index] = value;
}
void GaugeVector::Render(const std::string& labels, std::string* out) const {
  std::lock_guard lock(mutex_);
  Header(name_, help_, type_.c_str(), out);
  for (size_t i = 0; i < values_.size(); ++i) {
    *out += fmt::format("{}{{{},{}=\"{}\"}} {}\n", name_, labels, label_, first_label_ + i, Number(values_[i]));
  }
}

Histogram::Histogram(std::string name, std::string help, std::vector<double> bucket_bounds)
    : Metric(std::move(name), std::move(help)), bounds_(std::move(bucket_bounds)), counts_(bounds_.size() + 1, 0) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::Observe(double value) {
  std::lock_guard lock(mutex_);
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[bucket];
  ++count_;
  sum_ += value;
}

void Histogram::Render(const std::string& labels, std::string* out) const {
  std::lock_guard lock(mutex_);
  Header(name_, help_, "histogram", out);
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const double le = i < bounds_.size() ? bounds_[i] : INFINITY;
    *out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name_, labels, Number(le), cumulative);
  }
  *out += fmt::format("{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name_, labels, Number(sum_), name_, labels, count_);
}

namespace {
// Prometheus label values escape backslash, double quote and newline.
std::string EscapeLabel(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}
}  // namespace

ServerMetrics::ServerMetrics(std::string model_name)
    : labels(fmt::format("model_name=\"{}\"", EscapeLabel(model_name))),
      expert_load(std::make_unique<ExpertLoadMetrics>()) {}

ServerMetrics::~ServerMetrics() = default;

std::string ServerMetrics::Render() const {
  std::string out;
  for (const Metric* m : std::initializer_list<const Metric*>{
           &num_requests_running, &num_requests_waiting, &kv_cache_usage, &dp_num_requests_running,
           &dp_num_requests_waiting, &dp_kv_cache_usage, &kv_group_usage, &prefix_cache_queries, &prefix_cache_hits,
           &prompt_tokens, &generation_tokens, &num_preemptions, &spec_decode_num_drafts,
           &spec_decode_num_draft_tokens, &spec_decode_num_accepted_tokens, &spec_decode_accepted_per_pos, &spec_decode_drafts_per_len, &kv_transfer_held, &kv_transfer_waiting, &kv_transfer_sent_bytes, &kv_transfer_received_bytes,
           &kv_transfer_sent, &kv_transfer_received, &kv_transfer_pull_failures, &kv_transfer_holds_expired,
           &requests_success, &requests_failed,
           &time_to_first_token, &inter_token_latency, &e2e_request_latency, &request_queue_time,
           static_cast<const Metric*>(expert_load.get())}) {
    m->Render(labels, &out);
  }
  return out;
}

}  // namespace ember::server
