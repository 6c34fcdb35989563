// Prometheus metrics in the text exposition format (version 0.0.4): counters, gauges, labelled
// gauge vectors and histograms that render themselves with a caller's label set. Shared by
// `ember serve`'s /metrics (server/metrics.h) and `ember router`'s (router/metrics.h). Thread-safe:
// one thread records while HTTP threads render.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace ember::prometheus {

// A label value with backslash, double quote and newline escaped.
std::string EscapeLabelValue(const std::string& value);
// A sample value: "+Inf" / "-Inf" for infinities, else the shortest exact decimal.
std::string Number(double value);

// Appends a family's "# HELP" and "# TYPE" lines.
void Header(const std::string& name, const std::string& help, const char* type, std::string* out);

class Metric {
 public:
  Metric(std::string name, std::string help) : name_(std::move(name)), help_(std::move(help)) {}
  virtual ~Metric() = default;
  // Appends "# HELP", "# TYPE" and the samples, each labelled with `labels` ("model_name=\"m\"", or
  // "" for none).
  virtual void Render(const std::string& labels, std::string* out) const = 0;
  const std::string& name() const { return name_; }

 protected:
  std::string name_, help_;
};

class Counter : public Metric {
 public:
  using Metric::Metric;
  void Add(double value = 1.0);
  double value() const;
  void Render(const std::string& labels, std::string* out) const override;

 private:
  mutable std::mutex mutex_;
  double value_ = 0;
};

class Gauge : public Metric {
 public:
  using Metric::Metric;
  void Set(double value);
  double value() const;
  void Render(const std::string& labels, std::string* out) const override;

 private:
  mutable std::mutex mutex_;
  double value_ = 0;
};

// One gauge per value of an extra label (e.g. per KV group); with `type` "counter", a counter per
// value, set to its running total.
class GaugeVector : public Metric {
 public:
  // Entry i is rendered with label value first_label + i.
  GaugeVector(std::string name, std::string help, std::string label, std::string type = "gauge", size_t first_label = 0)
      : Metric(std::move(name), std::move(help)),
        label_(std::move(label)),
        type_(std::move(type)),
        first_label_(first_label) {}
  void Resize(size_t n);
  void Set(size_t index, double value);
  void Render(const std::string& labels, std::string* out) const override;

 private:
  mutable std::mutex mutex_;
  std::string label_;
  std::string type_;
  size_t first_label_ = 0;
  std::vector<double> values_;
};

class Histogram : public Metric {
 public:
  Histogram(std::string name, std::string help, std::vector<double> bucket_bounds);
  void Observe(double value);
  void Render(const std::string& labels, std::string* out) const override;

 private:
  mutable std::mutex mutex_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; rendered cumulatively
  uint64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace ember::prometheus
