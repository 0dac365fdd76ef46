// GPU cost report (`tessera report`, docs/ADVISOR.md): GPU-hours allocated, used and idle per
// queue, per namespace and per GPU model over a window, their cost, and the cluster's measured
// waste. Pure: the input is already-fetched samples; no files, network or clock.
//
// Method. Every sample of a pod stands for `step_s` seconds. At a sample the pod holds
// `allocated_gpus` GPUs of its model (fractions for slices). Its compute use, in GPUs (a GPU's SM
// activity summed over the pod's devices), counts up to the allocation; the rest of the
// allocation is idle. Its memory use counts up to the allocation's memory (allocated GPUs x the
// model's memory); the rest is allocated-but-unused memory. A sample without a compute (memory)
// reading counts as unmeasured compute (memory), neither used nor idle: used + idle + unmeasured
// = allocated. Cost is allocated GPU-hours x the model's price per GPU-hour; idle cost is idle
// GPU-hours x the price. The unallocated GPU % is 100 x (1 - the mean of the cluster's allocated
// ratio samples), when the source has them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "advisor/config.h"
#include "advisor/usage.h"
#include "core/status.h"

namespace tessera::advisor {

struct CostSample {
  int64_t t_s = 0;
  double allocated_gpus = 0;
  bool has_compute = false, has_memory = false;
  double compute_gpus = 0;  // GPUs of compute used (SM active x GPUs)
  double memory_mib = 0;    // memory used
};

struct CostPod {
  std::string ns, pod, queue, model, kind;  // model: catalog name; queue may be "" (unknown)
  std::vector<CostSample> samples;
};

struct CostInput {
  std::string source;
  int64_t start_s = 0, end_s = 0, step_s = 300;
  std::vector<CostPod> pods;
  std::vector<double> allocated_ratio;  // cluster-wide samples in 0..1; empty = not known
};

struct CostTotals {
  int64_t pods = 0;
  double allocated_gpu_hours = 0, used_gpu_hours = 0, idle_gpu_hours = 0, unmeasured_gpu_hours = 0;
  double allocated_memory_gib_hours = 0, used_memory_gib_hours = 0, unused_memory_gib_hours = 0,
         unmeasured_memory_gib_hours = 0;
  double cost_usd = 0, idle_cost_usd = 0;
};

struct CostRow {
  std::string key;
  CostTotals totals;
};

struct CostReport {
  std::string source;
  int64_t start_s = 0, end_s = 0, step_s = 0;
  std::vector<CostRow> by_queue, by_namespace, by_model;  // sorted by key
  CostTotals total;
  // Waste over the measured part of the allocation: idle / (used + idle) and unused memory /
  // (used + unused), in percent; nullopt when nothing was measured.
  std::optional<double> idle_compute_pct, unused_memory_pct;
  std::optional<double> unallocated_gpu_pct;
};

// InvalidArgument for a model outside the catalog, a non-finite or negative value, step_s <= 0;
// NotFound (the price table's message) for a model without a price; NotFound when no pod holds
// any GPU in the window.
Result<CostReport> ComputeCostReport(const CostInput& in, const PriceTable& prices);

// The pods of a usage history (`tessera advise --history` format) as cost input: a series of
// whole GPUs holds one GPU, a MIG profile its compute slices' share of the GPU, a memory request
// its share of the model's memory (or the requested compute when larger). Samples in
// (end_s - window_s, end_s] (end_s: the history's last sample; window_s 0 = all) count, each for
// step_s seconds. Queues are unknown (""). Device-level readings of a GPU shared by several pods
// (PodSeries::shared_device) count as unmeasured.
CostInput CostInputFromHistory(const UsageHistory& h, int64_t window_s, int64_t step_s,
                               const std::string& source);

// A fixed-width table: the three breakdowns and the waste summary.
std::string CostReportTable(const CostReport& r);

// JSON (docs/ADVISOR.md): {"source", "start_s", "end_s", "step_s", "total": TOTALS,
// "by_queue"|"by_namespace"|"by_model": [{"key", TOTALS...}], "waste": {"idle_compute_pct",
// "unused_memory_pct", "unallocated_gpu_pct" (null when unknown)}}, TOTALS the CostTotals fields
// by their names.
std::string CostReportJson(const CostReport& r);

}  // namespace tessera::advisor
