#include "cluster/target_workload.h"

#include <algorithm>

namespace tessera {

TargetWorkload TargetWorkload::FromDemands(std::span<const Demand> demands, double coverage_pct) {
  ShapeTally tally;
  for (const Demand& d : demands) tally.Add(d);
  return tally.Build(coverage_pct);
}

void ShapeTally::Add(const Demand& d) {
  ++counts_[{d.cpu.v, d.gpu_milli, d.num_gpu, d.models}];
  ++tasks_;
  if (d.num_gpu > 0) ++gpu_tasks_;
  cpu_ += static_cast<double>(d.cpu.v);
  gpu_ += static_cast<double>(d.TotalMilliGpu());
}

TargetWorkload ShapeTally::Build(double coverage_pct) const {
  using Key = std::tuple<int64_t, int, int, ModelMask>;
  std::vector<std::pair<Key, int64_t>> sorted(counts_.begin(), counts_.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  const double needed = coverage_pct / 100.0 * static_cast<double>(tasks_);
  TargetWorkload out;
  double covered = 0;
  for (const auto& [key, n] : sorted) {
    if (covered >= needed && !out.shapes.empty()) break;
    const auto& [cpu, milli, num, models] = key;
    out.shapes.push_back({cpu, milli, num, models, static_cast<double>(n)});
    covered += static_cast<double>(n);
  }
  if (covered <= 0) return TargetWorkload{};
  for (auto& s : out.shapes) s.popularity /= covered;
  return out;
}

}  // namespace tessera
