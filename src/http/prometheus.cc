#include "http/prometheus.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ember::prometheus {
namespace {

// "{labels}" or "{labels,extra}", without empty parts or braces when there is nothing.
std::string Braces(const std::string& labels, const std::string& extra = {}) {
  if (labels.empty() && extra.empty()) return {};
  if (labels.empty() || extra.empty()) return "{" + labels + extra + "}";
  return "{" + labels + "," + extra + "}";
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
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

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

void Header(const std::string& name, const std::string& help, const char* type, std::string* out) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

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
  *out += fmt::format("{}{} {}\n", name_, Braces(labels), Number(value()));
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
  *out += fmt::format("{}{} {}\n", name_, Braces(labels), Number(value()));
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
    *out += fmt::format("{}{} {}\n", name_, Braces(labels, fmt::format("{}=\"{}\"", label_, first_label_ + i)),
                        Number(values_[i]));
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
    *out += fmt::format("{}_bucket{} {}\n", name_, Braces(labels, fmt::format("le=\"{}\"", Number(le))), cumulative);
  }
  *out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name_, Braces(labels), Number(sum_), name_, Braces(labels), count_);
}

}  // namespace ember::prometheus
