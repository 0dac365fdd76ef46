// Closed-loop rightsizing, simulated on a fixed set of GPUs.
//
// Workloads annotated `tessera.io/rightsize: auto` are granted their latest recommendation at
// admission, at least AdvisorConfig::auto_floor_mib of memory and never more than the owner
// requested; the others (and "keep" recommendations) are granted their request. Admission packs
// workloads in the given order, each on a GPU with room: GPUs already shared (the fullest first)
// before idle ones; a grant on another model is tried on the workload's own model first; with
// admit_on_other_models a resized single-GPU share that finds no room there takes the same
// memory limit on another model of the set where its compute fits (other_model_max_compute),
// the least capable first. A workload that does not fit is skipped. Slices: MIG instances at
// legal placements of the model's geometry (CheckMigAdd), MPS shares (thread % and memory limits
// summing to at most the GPU's), time-slice replicas (declared memory summing to at most the
// GPU's), whole GPUs. A GPU holds one kind of slice at a time.
//
// Then each placed auto workload meets its true peak of the evaluation period: a peak above the
// granted memory is an out-of-memory kill. The workload is re-admitted at the largest size that
// has room, from its owner's request halving down to oom_growth times the grant that was killed,
// each size on its own model (the GPU it had first) and then on the set's other models
// (single-GPU workloads, compute within other_model_max_compute); that size is its new request
// for the back-off (oom_backoff_periods, doubling per further kill) while the history learns the
// new peak. With oom_preempt, a re-admission that finds no room displaces workloads admitted
// after it from one GPU (the GPU where the fewest give room, the smallest shares first); the
// displaced are admitted again where they find room, or wait. A re-admission that is killed again
// is one more retry. An OOM is unrecovered when even the smallest grown size finds no room (the
// workload waits) or the request is below the need. Pure, deterministic.
#pragma once

#include <string>
#include <vector>

#include "advisor/config.h"
#include "advisor/recommend.h"

namespace tessera::advisor {

struct LoopWorkload {
  std::string key;
  std::string model;  // the model of its request
  GpuRequest request;
  bool auto_rightsize = true;
  Recommendation advice;     // latest recommendation (its `recommended` slice is used when auto)
  double true_peak_mib = 0;  // true memory peak of the evaluation period (per GPU)
};

struct OomEvent {
  std::string key;
  int64_t granted_mib = 0, true_peak_mib = 0, regranted_mib = 0;
  int retries = 0;              // re-admissions until it ran (1 = recovered at once)
  int64_t backoff_periods = 0;  // periods it stays at its request before auto-sizing resumes
  bool recovered = false;       // false: no room for the request, or the request is too small
  std::vector<std::string> displaced;  // workloads it displaced to find room (oom_preempt)
  int displaced_readmitted = 0;        // of those, admitted again elsewhere
};

struct LoopResult {
  int gpus = 0;
  int workloads = 0;
  int fit_original = 0;  // placed with every workload at its request
  int fit_auto = 0;      // placed with auto workloads at their grant
  double auto_fit_ratio = 0;
  std::vector<OomEvent> oom;
  int max_retries_per_oom = 0;
  int unrecovered = 0;
  int displaced_waiting = 0;  // workloads displaced by a re-admission that found no room again
  // Running once every kill was handled: placed, holding its peak, not displaced into waiting.
  int fit_auto_running = 0;
  double running_fit_ratio = 0;  // fit_auto_running / fit_original
};

// `gpus` lists the model of each GPU. InvalidArgument for an invalid config or a model without
// memory in the catalog.
Result<LoopResult> SimulateClosedLoop(const std::vector<std::string>& gpus,
                                      const std::vector<LoopWorkload>& workloads,
                                      const AdvisorConfig& cfg);

// The slice an auto workload is granted for its advice: the recommendation with the floor
// applied; for an idle (released) workload that keeps running, the memory it holds with
// headroom and minimal compute; the request for keep/unattributed/too-short advice.
Slice GrantFor(const LoopWorkload& w, const AdvisorConfig& cfg);

}  // namespace tessera::advisor
