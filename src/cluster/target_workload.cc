#include "cluster/target_workload.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace tessera {

TargetWorkload TargetWorkload::FromDemands(std::span<const Demand> demands, double coverage_pct) {
  return FromWeightedDemands(demands, coverage_pct, [](const Demand&) { return 1.0; });
}

TargetWorkload TargetWorkload::FromWeightedDemands(std::span<const Demand> demands,
                                                   double coverage_pct,
                                                   double (*weight)(const Demand&)) {
  using Key = std::tuple<int64_t, int, int, ModelMask>;
  std::map<Key, double> counts;
  double total = 0;
  for (const Demand& d : demands) {
    const double w = weight(d);
    counts[{d.cpu.v, d.gpu_milli, d.num_gpu, d.models}] += w;
    total += w;
  }
  std::vector<std::pair<Key, double>> sorted(counts.begin(), counts.end());
  // Most frequent first; equal counts in key order so the result is deterministic.
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  const double needed = coverage_pct / 100.0 * total;
  TargetWorkload out;
  double covered = 0;
  for (const auto& [key, n] : sorted) {
    if (covered >= needed && !out.shapes.empty()) break;
    const auto& [cpu, milli, num, models] = key;
    out.shapes.push_back({cpu, milli, num, models, n});
    covered += n;
  }
  if (covered <= 0) return TargetWorkload{};
  for (auto& s : out.shapes) s.popularity /= covered;
  return out;
}

}  // namespace tessera
