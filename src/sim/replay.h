// Dynamic trace replay: a discrete-event simulation driven by the trace's creation and
// deletion times, scheduling through the same Engine and ClusterState a live cluster uses.
//
// Contract (semantics of one run):
//   * Every pod arrives at its creation time; arrivals at one time are handled in name order
//     (then input order). On arrival the engine observes the demand once (Engine::Observe),
//     then the pod is decided (Engine::Decide) and, if placed, allocated in the ledger
//     (ClusterState::Allocate).
//   * A placed pod runs for its original lifetime (deletion - creation) from the time it is
//     placed, so it departs at start + lifetime and is released (ClusterState::Release). A pod
//     with deletion -1 never departs.
//   * A pod that does not fit waits in a FIFO queue. At each event time, departures come
//     first; if any pod departed, the waiting pods are retried in arrival order, and only then
//     are the arrivals of that time handled. A newly arriving pod is tried at once even when
//     older pods wait (no head-of-line blocking), as the Kubernetes scheduler does. Zero
//     lifetime pods placed at time t depart at t, which starts another retry round at t.
//   * A pod whose demand fits no node of the empty cluster is impossible: it is observed and
//     decided once on arrival, never queued, and counted in both `impossible` and
//     `never_placed`. Pods still waiting when no arrival or departure is left are never
//     placed as well.
//   * Retries are pruned without changing any result: a demand shape (the whole Demand) that
//     failed is not decided again until a departure has freed capacity on a node that now
//     passes the engine's filter for it, since allocations only shrink free resources and a
//     failed Decide has no side effects. ReplayOptions::prune_retries turns this off.
//   * Queueing delay (wait) = start - creation, over placed pods; percentiles interpolate
//     linearly between order statistics. Time-weighted GPU allocation = integral of
//     allocated milli-GPU over [first arrival, last event] / (GPU capacity x that span),
//     in percent (0 when the span is empty). The arrival-window allocation is the same integral
//     over [first arrival, last arrival] divided by capacity x that window.
//   * The seed drives only the engine's tie-break order and the random policy's draws; the
//     run is deterministic in (nodes, pods, policy, seed). The fgd policy's target workload is
//     TargetWorkload::FromDemands over all pods' demands (as RunFill).
// Failure: NotFound for an unknown policy; InvalidArgument for no pods, a cluster without
// GPUs, an invalid demand or a deletion before creation; Internal if the ledger refuses an engine
// placement or (with check_invariants_every) a ledger check fails. Thread-safety: RunReplay shares
// no state between calls; RunReplayMatrix runs policy x seed pairs on a pool of threads and its
// results do not depend on the thread count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/types.h"
#include "core/status.h"
#include "policies/builtin.h"
#include "sim/fill.h"

namespace tessera {

struct ReplayOptions {
  std::string policy = "tessera";
  uint64_t seed = 42;
  double typical_coverage_pct = 95.0;
  bool prune_retries = true;
  // Runs ClusterState::CheckInvariants after every n-th event time and at the end, and checks
  // that the ledger then holds exactly the pods that never depart. 0 = never (for tests).
  int64_t check_invariants_every = 0;
  // The configuration of the tessera policy (other policies ignore it).
  TesseraConfig tessera;
};

enum class PodFate : uint8_t { kPlaced, kImpossible, kNeverPlaced };

// What happened to one pod. start/end are -1 when not applicable (end is -1 for a placed pod
// that never departs).
struct PodOutcome {
  PodFate fate = PodFate::kNeverPlaced;
  SimTime start = -1;
  SimTime end = -1;
  Placement placement;
};

struct ReplayRun {
  std::string policy;
  uint64_t seed = 0;
  int64_t pods = 0;
  int64_t placed = 0;
  int64_t never_placed = 0;  // impossible + still waiting at the end
  int64_t impossible = 0;
  int64_t delayed = 0;  // placed with a positive wait
  double wait_p50_s = 0, wait_p95_s = 0, wait_p99_s = 0, mean_wait_s = 0, max_wait_s = 0;
  double gpu_alloc_time_weighted_pct = 0;
  // The same integral over the arrival window [first arrival, last arrival] only, so that
  // long-running pods after the last arrival do not dilute it.
  double gpu_alloc_arrival_window_pct = 0;
  SimTime last_arrival = 0;
  int64_t peak_pending = 0;  // largest number of waiting pods at any time
  SimTime first_arrival = 0;
  SimTime last_event = 0;
  int64_t decisions = 0;    // Engine::Decide calls
  int64_t mix_changes = 0;  // changes of the mix the policy detected (Scorer::mix_changes)
  double wall_seconds = 0;
  std::vector<PodOutcome> outcomes;  // one per input pod, in input order
};

Result<ReplayRun> RunReplay(const std::vector<NodeSpec>& nodes, const std::vector<Workload>& pods,
                            const ReplayOptions& options);

struct ReplaySummary {
  std::string policy;
  std::vector<ReplayRun> runs;  // one per seed, in seed order
  Stats placed, never_placed, impossible, wait_p50_s, wait_p95_s, wait_p99_s, mean_wait_s,
      gpu_alloc_time_weighted_pct, gpu_alloc_arrival_window_pct, peak_pending, wall_seconds;
};

// Runs every (policy, seed) pair; fails on an empty or duplicated policy list, an empty seed
// list, or the first failing run. threads = 0: hardware concurrency. Per-pod outcomes are
// dropped unless keep_outcomes.
Result<std::vector<ReplaySummary>> RunReplayMatrix(const std::vector<NodeSpec>& nodes,
                                                   const std::vector<Workload>& pods,
                                                   const std::vector<std::string>& policies,
                                                   const std::vector<uint64_t>& seeds,
                                                   unsigned threads = 0,
                                                   bool keep_outcomes = false);
// The same for variants of the options (a policy and its configuration, which may repeat a
// policy); each variant runs with every seed in turn. Summaries are named by the variant's
// policy. A failing run's error is returned.
Result<std::vector<ReplaySummary>> RunReplayVariants(const std::vector<NodeSpec>& nodes,
                                                     const std::vector<Workload>& pods,
                                                     const std::vector<ReplayOptions>& variants,
                                                     const std::vector<uint64_t>& seeds,
                                                     unsigned threads = 0,
                                                     bool keep_outcomes = false);

// A readable table, one row per policy (means over seeds).
// Divides every creation time by `factor` (>= 1; rounded down) and keeps each pod's lifetime,
// so the same work arrives `factor` times faster. InvalidArgument for factor < 1 or not finite.
Result<std::vector<Workload>> CompressArrivals(const std::vector<Workload>& pods, double factor);

std::string ReplayTable(const std::vector<ReplaySummary>& results);
// {"nodes": ..., "pods": ..., "policies": {"<name>": {...}}}: per policy the means over seeds
// of every metric, the seed list, per-metric stats and the per-seed runs.
std::string ReplayJson(const std::vector<ReplaySummary>& results, const std::string& nodes_source,
                       const std::string& pods_source);

}  // namespace tessera
