// Multi-tenant queue simulation: the jobs of a workload (sim/queue_scenario.h) arrive, wait in
// their queues, are admitted and placed by Admission (admission/admission.h) on a ClusterState
// built from the cluster file, run, and depart; the outcome is measured by the simulation.
//
// Policies (names are a fixed interface), applied on top of the cluster file's admission block:
//   fifo     no fair share (fair_sharing = false: priority, then arrival), no preemption, no
//            reservations or backfill. Quotas and borrowing stay as configured.
//   kueue    Kueue-like: quotas, borrowing, fair-share ordering, classic preemption (within
//            queue by priority, reclaim of lent quota); no reservations or backfill.
//   tessera  everything as the cluster file configures it (all features on by default).
// Placement uses the engine policy QueueSimOptions::placement (default: the tessera scorer).
//
// Event semantics:
//   * A job is submitted at its arrival time. Scheduling cycles (Admission::RunCycle) run at
//     multiples of cycle_s, but only when something changed since the previous cycle: an
//     arrival, a completion, a job becoming preemptible (min_runtime_s) or a gang timeout
//     passing, or the previous cycle admitted or preempted something. A skipped cycle would see
//     the state the previous one left unchanged; the decayed usage still advances over the
//     skipped time.
//   * At one time: completions first, then arrivals, then timers, then the cycle.
//   * An admitted job runs duration_s from its admission and then completes
//     (Admission::Finish). A preempted job loses its progress: when admitted again it runs its
//     full duration again. Lost GPU-hours = GPUs it held x time it ran before the preemption.
//   * The run ends when no arrival, completion or timer is left and no cycle is due, or at
//     QueueSimOptions::horizon_s. Jobs not admitted by then count as never admitted (with their
//     WhyPending reason).
// Metrics (per queue and overall):
//   wait = first admission - arrival (over admitted jobs; p50/p95/p99 interpolate linearly
//   between order statistics); jct = completion - arrival (over completed jobs);
//   gpu_utilization = time-integral of allocated milli-GPU / (GPU capacity x span), span =
//   [first arrival, end of the run]. Shares are fractions of the cluster's capacity in
//   GPU-equivalents: gpu_share = time-average of the queue's running GPU-eq; fair_share =
//   time-average of its weighted fair share, where each cohort (or queue without a cohort) gets
//   a pool equal to its nominal GPU quota (all pools scaled down if they exceed the cluster) and
//   each pool is divided by weighted max-min (water-filling) among its queues with demand
//   (running plus pending GPU-eq), capped at their demand; fair_share_deviation = time-average
//   of |running - fair| over the time the queue has demand, fair_share_deviation_max its largest
//   value. Gangs are jobs with more than one pod.
// Deterministic in (cluster, jobs, options), except wall_seconds. Failure: InvalidArgument for an
// unknown policy or placement policy, a cluster without GPUs, or a job Admission rejects;
// Internal when Admission or the ledger fails; on_cycle errors are returned as they are.
// Thread-safety: RunQueueSim shares no state between calls.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "admission/admission.h"
#include "core/status.h"
#include "sim/queue_scenario.h"

namespace tessera {

const std::vector<std::string>& QueuePolicyNames();  // fifo, kueue, tessera

struct QueuePolicySetup {
  std::vector<QueueSpec> queues;
  AdmissionConfig config;
};
// The queues and admission config a policy runs with. InvalidArgument for an unknown name.
Result<QueuePolicySetup> ApplyQueuePolicy(const QueueCluster& cluster, const std::string& policy);

// What a test sees after every cycle (references valid during the callback only).
struct QueueCycleView {
  double now = 0;
  const ClusterState& state;
  const Admission& admission;
  const CycleResult& result;
  const std::vector<QueueJob>& jobs;
};

struct QueueSimOptions {
  std::string policy = "tessera";
  std::string placement = "tessera";
  uint64_t seed = 42;
  double horizon_s = 0;          // > 0: stop there (events at or after it are not handled)
  int64_t max_cycles = 5000000;  // a run reaching it stops and is marked truncated
  std::function<Status(const QueueCycleView&)> on_cycle;
};

struct QueueJobOutcome {
  double first_start = -1;  // first admission; -1 if never admitted
  double start = -1;        // last admission
  double end = -1;          // completion; -1 if not completed
  int preemptions = 0;
  int pods_placed = 0;  // at the last admission
  double lost_gpu_hours = 0;
  std::string why_pending;  // for jobs not completed at the end
};

struct QueueMetrics {
  std::string name;
  double weight = 1;
  int64_t jobs = 0, admitted = 0, completed = 0, never_admitted = 0;
  double p50_wait_s = 0, p95_wait_s = 0, p99_wait_s = 0, mean_wait_s = 0, max_wait_s = 0;
  double avg_jct_s = 0;
  double gpu_share = 0, fair_share = 0, fair_share_deviation = 0, fair_share_deviation_max = 0;
  int64_t preemptions = 0;
  double lost_gpu_hours = 0;
  int64_t gangs = 0, gangs_admitted = 0, gangs_waiting = 0;
  double gang_wait_p95_s = 0;
};

struct QueueSimResult {
  std::string policy, placement;
  uint64_t seed = 0;
  std::vector<QueueMetrics> queues;  // in cluster order
  QueueMetrics overall;              // shares summed over queues; deviations: the largest queue's
  double gpu_utilization = 0;
  int64_t cycles = 0;
  int max_preemptions_per_job = 0;
  double start_s = 0, end_s = 0;
  double wall_seconds = 0;  // measured, not deterministic
  bool truncated = false;
  std::vector<QueueJobOutcome> outcomes;         // one per job, in input order
  std::map<std::string, int64_t> never_reasons;  // WhyPending of never-admitted jobs, counted
};

Result<QueueSimResult> RunQueueSim(const QueueCluster& cluster, const std::vector<QueueJob>& jobs,
                                   const QueueSimOptions& options);

// One block per policy: a row per queue and an overall row.
std::string QueueSimTable(const std::vector<QueueSimResult>& results);
// One policy: {"policy", "placement", "seed", "cluster", "workload", "queues": {name: {...}},
// "overall": {...}}; several: {"cluster", "workload", "policies": {name: {...}}}.
std::string QueueSimJson(const std::vector<QueueSimResult>& results,
                         const std::string& cluster_source, const std::string& workload_source);

}  // namespace tessera
