// The FGD paper's fill protocol (USENIX ATC'23; docs/BENCHMARK.md):
//   pods sorted by name, shuffled with the seed; inflated to `tune_ratio` x cluster GPU
//   capacity by drawing original pods (in name order, so input order never matters) uniformly
//   with replacement (stopping at the first draw
//   whose per-GPU share would overshoot), or deflated by removing random pods; then every pod
//   is scheduled once, in order, with no departures and no retries. After every pod the run
//   records allocated vs arrived GPU and the fragmentation of the cluster against the target
//   workload of the original trace.
// RunFill is deterministic in (inputs, policy, seed). RunFillMatrix runs policy x seed
// experiments on a pool of threads; results do not depend on the thread count.
// Limits: the tune ratio is a finite number in (0, kMaxTuneRatio]; a workload with no GPU demand,
// or one whose inflation would need more than kMaxFillPods pods, is InvalidArgument.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cluster/target_workload.h"
#include "cluster/types.h"
#include "core/status.h"

namespace tessera {

inline constexpr int kArrivalBuckets = 131;  // arrival % 0..130
inline constexpr double kMaxTuneRatio = 4.0;
inline constexpr int64_t kMaxFillPods = 10'000'000;

// OK iff 0 < tune_ratio <= kMaxTuneRatio (NaN and infinities refused).
Status ValidateTuneRatio(double tune_ratio);

// Upper bounds (seconds) of the decision latency histogram of FillDetail.
inline constexpr std::array<double, 12> kDecisionLatencyBounds = {
    1e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3, 2.5e-2, 0.1};

// What a run collects with FillOptions::detail (the demo's /metrics); it does not change the
// run's placements.
struct FillDetail {
  // Milli-GPU held at the end of the run, per node (index in `nodes`) and GPU mode name
  // (GpuModeName: "exclusive" for whole GPUs, "share" for milli-GPU shares). Nodes without any
  // held GPU have an empty map.
  std::vector<std::map<std::string, int64_t>> node_held_milli;
  // Pods not placed, per dominant reason: the filter check that the most nodes failed
  // ("gpu": not enough free GPU, "gpu_model", "cpu", "memory"; ties in that order).
  std::map<std::string, int64_t> not_placed;
  // Engine::Decide wall time: pods per bucket (bucket i: at most kDecisionLatencyBounds[i] and
  // above the previous bound; the last entry counts the rest) and the sum.
  std::array<int64_t, kDecisionLatencyBounds.size() + 1> latency_count{};
  double latency_sum_seconds = 0;
};

struct FillOptions {
  std::string policy = "tessera";
  uint64_t seed = 42;
  double tune_ratio = 1.3;
  double typical_coverage_pct = 95.0;
  bool detail = false;  // fill FillRun::detail
  // Past workloads (not owned; null = none): observed, in order, before the first arrival and
  // never placed, as a policy that learns the mix online has seen the cluster's earlier pods.
  // FGD's target workload stays that of `pods`.
  const std::vector<Workload>* past = nullptr;
};

struct FillRun {
  std::string policy;
  uint64_t seed = 0;
  int64_t pods = 0;  // after inflation
  int64_t placed = 0;
  double unalloc_pct_at_100 = 0;
  double unalloc_pct_at_130 = 0;  // at the end of the run (arrival = tune ratio, e.g. 130%)
  double frag_ratio_at_90 = 0;    // fragmented / idle GPU, %
  double final_arrival_pct = 0;
  // Per arrival bucket (first pod at or past the bucket): unallocated GPU %, fragmentation
  // ratio % (fragmented / idle) and fragmented GPU as % of the cluster.
  std::array<double, kArrivalBuckets> unalloc_pct{};
  std::array<double, kArrivalBuckets> frag_ratio_pct{};
  std::array<double, kArrivalBuckets> frag_pct{};
  double wall_seconds = 0;
  int64_t decisions = 0;
  std::optional<FillDetail> detail;  // with FillOptions::detail
};

// Builds the submission sequence of one experiment (exposed for tests). Without GPU demand in
// `pods`, or with tune_ratio <= 0, the shuffled pods are returned as they are.
std::vector<Workload> PrepareFillSequence(const std::vector<Workload>& pods,
                                          int64_t gpu_capacity_milli, double tune_ratio,
                                          uint64_t seed);

Result<FillRun> RunFill(const std::vector<NodeSpec>& nodes, const std::vector<Workload>& pods,
                        const FillOptions& options);

struct Stats {
  double mean = 0, median = 0, stddev = 0, min = 0, max = 0;
  static Stats Of(std::vector<double> v);
};

struct FillSummary {
  std::string policy;
  double tune_ratio = 1.3;    // the runs' final arrival, x GPU capacity
  std::vector<FillRun> runs;  // one per seed, in seed order
  Stats unalloc_at_100, unalloc_at_130, frag_ratio_at_90;
  double wall_seconds = 0;  // sum over runs
};

// What every run of a matrix shares besides its policy and seed.
struct FillHooks {
  bool detail = false;                          // FillOptions::detail of every run
  const std::vector<Workload>* past = nullptr;  // FillOptions::past of every run
  // Called with each successful run as it ends, on the worker thread that ran it (so possibly
  // from several threads at once).
  std::function<void(const FillRun&)> on_run;
};

// Runs every (policy, seed) pair. threads = 0: hardware concurrency.
Result<std::vector<FillSummary>> RunFillMatrix(const std::vector<NodeSpec>& nodes,
                                               const std::vector<Workload>& pods,
                                               const std::vector<std::string>& policies,
                                               const std::vector<uint64_t>& seeds,
                                               double tune_ratio = 1.3, unsigned threads = 0,
                                               const FillHooks& hooks = {});

}  // namespace tessera
