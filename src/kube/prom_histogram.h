// A Prometheus histogram (text format 0.0.4): cumulative counts per upper bound, the +Inf bucket,
// the sum and the count of the observations. Not thread-safe: callers serialise.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace tessera::kube {

class PromHistogram {
 public:
  // `bounds`: the buckets' upper bounds, ascending.
  explicit PromHistogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {}

  // Scheduling latencies and cycle durations: 10 ms to 1 h.
  static std::vector<double> LatencyBounds() {
    return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};
  }

  // Scheduling cycle durations: 1 ms to 10 s.
  static std::vector<double> CycleBounds() {
    return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  }

  void Observe(double v) {
    for (size_t i = 0; i < bounds_.size(); ++i)
      if (v <= bounds_[i]) ++counts_[i];
    ++count_;
    sum_ += v;
  }
  int64_t count() const { return count_; }

  // HELP, TYPE, the buckets, _sum and _count of metric `name`.
  std::string Render(const std::string& name, const std::string& help) const {
    std::string out = "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
    char num[64];
    for (size_t i = 0; i < bounds_.size(); ++i) {
      std::snprintf(num, sizeof num, "%g", bounds_[i]);
      out += name + "_bucket{le=\"" + num + "\"} " + std::to_string(counts_[i]) + "\n";
    }
    out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
    std::snprintf(num, sizeof num, "%.9g", sum_);
    out += name + "_sum " + num + "\n";
    out += name + "_count " + std::to_string(count_) + "\n";
    return out;
  }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // cumulative: observations <= bounds_[i]
  int64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace tessera::kube
