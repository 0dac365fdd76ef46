#include "sharing/multi_gpu_forecast.h"

#include <algorithm>
#include <cmath>

namespace tessera {

MultiGpuForecast::MultiGpuForecast(double half_life_s, double duration_prior_s)
    : tau_s_(half_life_s / std::log(2.0)), prior_s_(duration_prior_s) {}

void MultiGpuForecast::Arrival(int gpus, double now_s) {
  if (first_s_ < 0) first_s_ = now_s;
  if (gpus <= 1) return;
  Ewma& e = rate_[gpus];
  const double t = std::max(now_s, e.at);
  e.value = e.value * std::exp(-(t - e.at) / tau_s_) + 1.0;
  e.at = t;
}

void MultiGpuForecast::Started(int64_t job, double now_s) {
  running_.emplace(job, now_s);
}

void MultiGpuForecast::Finished(int64_t job, double now_s) {
  auto it = running_.find(job);
  if (it == running_.end()) return;
  completed_s_ += std::max(0.0, now_s - it->second);
  ++completed_;
  running_.erase(it);
}

double MultiGpuForecast::Rate(int gpus, double now_s) const {
  auto it = rate_.find(gpus);
  if (it == rate_.end()) return 0;
  const double since = std::max(0.0, now_s - it->second.at);
  const double seen = std::max(0.5, 1.0 - std::exp(-std::max(0.0, now_s - first_s_) / tau_s_));
  return it->second.value * std::exp(-since / tau_s_) / tau_s_ / seen;
}

double MultiGpuForecast::ExpectedDurationS(double now_s) const {
  double total = prior_s_ + completed_s_;
  for (const auto& [job, start] : running_) total += std::max(0.0, now_s - start);
  return total / static_cast<double>(1 + completed_);
}

double MultiGpuForecast::GpusNeeded(double now_s) const {
  double per_duration = 0;
  for (const auto& [g, e] : rate_) per_duration += Rate(g, now_s) * g;
  return per_duration == 0 ? 0 : per_duration * ExpectedDurationS(now_s);
}

}  // namespace tessera
