// Sharing simulation: the workloads of a sharing scenario (sim/sharing_scenario.h) run through
// one GPU-sharing strategy on a fresh ClusterState built from the scenario, with the outcome
// measured independently of the strategy.
//
// Strategies (names are a fixed interface):
//   exclusive   every workload takes max(1, whole_gpus) idle whole GPUs (`nvidia.com/gpu: N`):
//               the node with the fewest idle GPUs that suffices, its lowest-numbered idle GPUs.
//   static-mig  node groups with a static_mig_layout get it at the start on their first
//               static_mig_gpus GPUs (the initial state, not a reconfiguration), never changed.
//               A fraction of a GPU takes the smallest free instance (memory, then compute
//               slices, then node, GPU, start) whose memory covers its peak, else an idle
//               non-MIG GPU; whole-GPU workloads take idle non-MIG GPUs as in exclusive.
//   timeslice   the device plugin's time-slicing with N = timeslice_replicas replicas per GPU:
//               one unguarded replica (declared memory 0) per requested GPU, on distinct GPUs
//               with fewer than N replicas; the least-loaded GPU (then node, GPU index) for one
//               GPU, the node whose k least-loaded GPUs carry the fewest replicas for k GPUs.
//   mps         the device plugin's MPS with N = mps_clients clients per GPU, chosen as in
//               timeslice; each client gets 100/N % of the threads and GPU memory / N pinned,
//               whatever the workload needs.
//   tessera     SharingAllocator::Place (default config), with Observe on every arrival.
// All strategies honour the demand's model mask (the user's node selector: models with enough
// memory for the peak) and host CPU/memory.
//
// Event semantics: arrivals at their times; a placed workload departs at start + duration; a
// workload that does not fit waits in a FIFO queue and gives up at arrival + patience. At one
// time, departures come first, then (if any departed) the queue is retried in arrival order,
// then give-ups, then arrivals, each tried at once (the strategy observes all the arrivals of
// that time before any is tried). Only events before the horizon count.
//
// Metrics (per strategy), measured by the simulation rather than taken from the strategy:
//   placed / abandoned / never_placed   workloads that started before giving up and before the
//                                       horizon / gave up / were still waiting at the horizon
//   p50/p95/p99/mean_wait_s             start - arrival over placed workloads (percentiles
//                                       interpolate linearly between order statistics)
//   gpus_busy_avg, gpu_busy_pct         time-weighted GPUs with at least one workload, over
//                                       [0, horizon), as a count and as % of all GPUs
//   isolation_violations                workloads with a slice their class forbids: strict needs
//                                       MIG or exclusive, standard MIG, MPS, MIG-MPS or exclusive
//   memory_oversubscribed               workloads whose guaranteed memory is below their peak
//                                       (MPS limit, MIG instance, exclusive GPU), or that shared a
//                                       time-sliced GPU while its workloads' peaks summed above
//                                       its memory; each counted once
//   reconfigurations                    MIG layout changes during the run (ledger counter)
//   disturbed                           running workloads whose MIG instance was destroyed, whose
//                                       GPU changed MIG mode, or whose allocation changed, during
//                                       a strategy's placement of another workload
// Failure: InvalidArgument for an unknown strategy or a workload that does not fit the scenario
// (unknown class, negative times); Internal when the ledger refuses a placement the strategy
// chose, a strategy reports a placement the ledger does not hold, or ClusterState::CheckInvariants
// fails (checked every 256 events and at the end).
// Deterministic in (scenario, workloads, strategy). Thread-safety: no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "sim/sharing_scenario.h"

namespace tessera {

// exclusive, static-mig, timeslice, mps, tessera.
const std::vector<std::string>& SharingStrategyNames();

struct SharingMetrics {
  std::string strategy;
  int64_t workloads = 0;
  int64_t placed = 0;
  int64_t abandoned = 0;
  int64_t never_placed = 0;
  double p50_wait_s = 0;
  double p95_wait_s = 0;
  double p99_wait_s = 0;
  double mean_wait_s = 0;
  double gpus_busy_avg = 0;
  double gpu_busy_pct = 0;
  int64_t isolation_violations = 0;
  int64_t memory_oversubscribed = 0;
  int64_t reconfigurations = 0;
  int64_t disturbed = 0;
  // The reconfigurations as the strategy reported them: MIG turned on (idle GPU), turned off,
  // or a new layout on a MIG GPU; and the free instances they destroyed.
  int64_t mig_enabled = 0;
  int64_t mig_disabled = 0;
  int64_t mig_relayouts = 0;
  int64_t mig_instances_destroyed = 0;
  // Preemption (docs/SHARING.md, "Preemption"): workloads evicted for one of higher priority,
  // and how many of them never ran again. An evicted workload waits again with its full
  // patience (the strategy observes its demand again, as the scheduler observes the recreated
  // pod) and, once placed again, runs its whole duration; `placed` counts it only then.
  int64_t preemptions = 0;
  int64_t preempted_not_replaced = 0;
  std::vector<int64_t> arrived_by_class;  // indexed like SharingScenario::classes
  std::vector<int64_t> placed_by_class;
  std::map<std::string, int64_t> placed_by_kind;  // SliceKindName of the first slice
  // Whether each workload (by id) was placed; for comparisons with other placement paths
  // (bench/sharing_replay_bench.cc). Not part of the table or JSON.
  std::vector<uint8_t> placed_workloads;
  // Per workload (by id), where and when it was placed first: "t=<s> <node> gpu<g,...> <kind>"
  // ("" when never placed); for locating where two placement paths part (same use as above).
  std::vector<std::string> placement_of;
  // First placement explanation per slice kind, and the first MIG reconfiguration reasons
  // (strategies that give reasons only).
  std::vector<std::string> explanations;
  std::vector<std::string> reconfiguration_reasons;
  // Every MIG change as "t=<s>s <node> GPU <g>: destroy|create <profile>@<start>" lines, and at
  // the end, per node with MIG-capable GPUs, its state as an NVIDIA mig-parted config (named
  // after the strategy). Empty for strategies that never change MIG state.
  std::vector<std::string> mig_diff_log;
  std::map<std::string, std::string> mig_parted_configs;
};

// Whether the scenario's classes differ in priority, so that workloads may preempt.
bool SharingPreemption(const SharingScenario& s);

Result<SharingMetrics> SimulateSharing(const SharingScenario& scenario,
                                       const std::vector<SharingWorkload>& workloads,
                                       const std::string& strategy);

// Generates the workloads with `seed` and simulates every strategy in order (a list of names
// from SharingStrategyNames, no duplicates).
Result<std::vector<SharingMetrics>> CompareSharing(const SharingScenario& scenario, uint64_t seed,
                                                   const std::vector<std::string>& strategies);

// Side-by-side table (one column per strategy) with the tessera explanations below it.
std::string SharingTable(const SharingScenario& scenario, uint64_t seed,
                         const std::vector<SharingMetrics>& results);
// {"scenario": NAME, "seed": N, "horizon_s": ..., "nodes": ..., "gpus": ...,
//  "strategies": {"<name>": {"placed": ..., "isolation_violations": ..., ...}}}
std::string SharingJson(const SharingScenario& scenario, uint64_t seed,
                        const std::vector<SharingMetrics>& results);

}  // namespace tessera
