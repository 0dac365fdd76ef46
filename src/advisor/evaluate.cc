#include "advisor/evaluate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "advisor/numbers.h"

namespace tessera::advisor {
namespace {

struct Truth {
  double peak_mib = 0;
  std::vector<double> sm;
};

std::unordered_map<std::string, Truth> TruthByKey(const UsageHistory& h) {
  std::unordered_map<std::string, Truth> out;
  for (const WorkloadUsage& w : h.workloads) {
    Truth t;
    for (const PodSeries& p : w.pods)
      for (const UsageSample& s : p.samples) {
        t.peak_mib = std::max(t.peak_mib, s.memory_mib);
        t.sm.push_back(s.sm_active);
      }
    if (!t.sm.empty()) out[w.Key()] = std::move(t);
  }
  return out;
}

double SlicePerGpu(const Recommendation& r) {
  const Slice& s = (r.keep || r.state != AdviceState::kOk) ? r.requested : r.recommended;
  return static_cast<double>(s.memory_mib) / std::max(1, s.whole_gpus);
}

}  // namespace

Evaluation Evaluate(const AdvisorReport& report, const UsageHistory& truth,
                    const AdvisorConfig& cfg) {
  Evaluation e;
  auto by_key = TruthByKey(truth);
  std::vector<double> over, over_all, over_slice;
  for (const Recommendation& r : report.items) {
    auto it = by_key.find(r.key);
    if (it == by_key.end()) continue;
    ++e.judged;
    Truth& t = it->second;
    const bool released =
        r.state == AdviceState::kOk && !r.keep && r.recommended.type == SliceType::kRelease;
    if (released) {
      const bool still_idle = Percentile(t.sm, 0.99) <= cfg.idle_sm_active;
      if (still_idle) {
        ++e.covered;
      } else {
        e.uncovered.push_back(r.key + ": released, but active in the following period");
      }
      continue;
    }
    const double granted = static_cast<double>(r.memory_limit_mib);
    const double slice = SlicePerGpu(r);
    if (t.peak_mib <= granted) {
      ++e.covered;
    } else {
      e.uncovered.push_back(r.key + ": granted " + FormatDecimal(granted, 0) + " MiB, true peak " +
                            FormatDecimal(t.peak_mib, 0) + " MiB");
    }
    if (t.peak_mib <= 0) continue;
    const double pct = (granted / t.peak_mib - 1.0) * 100.0;
    over_all.push_back(pct);
    if (r.state == AdviceState::kOk && !r.keep) {
      over.push_back(pct);
      over_slice.push_back((slice / t.peak_mib - 1.0) * 100.0);
      ++e.resized;
    }
  }
  e.covered_pct = e.judged ? 100.0 * e.covered / e.judged : 0;
  e.median_overprovision_pct = Percentile(over, 0.5);
  e.median_overprovision_all_pct = Percentile(over_all, 0.5);
  e.median_slice_overprovision_pct = Percentile(over_slice, 0.5);
  return e;
}

std::vector<LoopWorkload> LoopWorkloads(const AdvisorReport& report, const UsageHistory& truth) {
  auto by_key = TruthByKey(truth);
  std::vector<LoopWorkload> out;
  for (const Recommendation& r : report.items) {
    LoopWorkload w;
    w.key = r.key;
    w.model = r.model;
    w.request = r.request;
    w.advice = r;
    auto it = by_key.find(r.key);
    w.true_peak_mib = it == by_key.end() ? 0 : it->second.peak_mib;
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<std::string> LoopGpus(const AdvisorReport& report, double fraction) {
  std::map<std::string, double> need;
  for (const Recommendation& r : report.items) need[r.model] += r.requested.gpu_fraction;
  std::vector<std::string> out;
  for (const auto& [model, n] : need) {
    const int count = static_cast<int>(std::ceil(n * fraction - 1e-9));
    for (int i = 0; i < count; ++i) out.push_back(model);
  }
  return out;
}

}  // namespace tessera::advisor
