// Judging recommendations against a known future (the generator's following day), and the
// inputs of the closed-loop simulation built from a report. Pure functions.
//
// A workload is judged when it has samples in `truth`. It is covered when its memory limit
// (Recommendation::memory_limit_mib: the prediction with headroom; the request for kept
// workloads and the honest states) is at least its true peak of that period; a released (idle)
// workload is covered when it stays idle (p99 SM activity at most idle_sm_active). Over-provision
// of a workload is limit / true peak - 1, in %, over the resized workloads (not kept, not
// released) with a positive true peak; `median_overprovision_all_pct` takes every judged
// non-released workload, `median_slice_overprovision_pct` the resized workloads' slice memory
// (a MIG instance or whole GPU holds more than the limit).
#pragma once

#include <string>
#include <vector>

#include "advisor/closed_loop.h"
#include "advisor/recommend.h"
#include "advisor/usage.h"

namespace tessera::advisor {

struct Evaluation {
  int judged = 0, covered = 0, resized = 0;
  double covered_pct = 0;
  double median_overprovision_pct = 0;
  double median_overprovision_all_pct = 0;
  double median_slice_overprovision_pct = 0;  // the slice's memory instead of the limit
  std::vector<std::string> uncovered;         // "key: granted X MiB, true peak Y MiB"
};

Evaluation Evaluate(const AdvisorReport& report, const UsageHistory& truth,
                    const AdvisorConfig& cfg);

// Closed-loop inputs: one LoopWorkload per report item (auto_rightsize for all), with its true
// per-GPU peak from `truth` (0 when absent), in report order.
std::vector<LoopWorkload> LoopWorkloads(const AdvisorReport& report, const UsageHistory& truth);

// A fixed GPU set: per model, ceil(fraction * GPUs the original requests of that model take),
// models in name order.
std::vector<std::string> LoopGpus(const AdvisorReport& report, double fraction);

}  // namespace tessera::advisor
