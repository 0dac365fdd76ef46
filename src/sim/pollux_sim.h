// Discrete-time simulation of the Pollux (OSDI'21) benchmark with rigid jobs.
//
// Cluster: `nodes` x `gpus_per_node` identical GPUs (catalog model T4, the Pollux testbed's;
// host CPU and memory never binding), held in a ClusterState. Every `interval_s` (rounds at
// t = 0, interval, 2*interval, ...) one Admission cycle (admission/admission.h) runs over the
// jobs submitted at or before t that have not finished: it orders them, places each as a gang
// of num_replicas one-GPU pods (all or none) through the engine and preempts running jobs,
// exactly as it does for the Kubernetes scheduler. The simulation keeps only the job-progress
// model: between rounds jobs progress continuously by sim/pollux.h and finish at the exact time
// their last iteration ends (Admission::Finish); GPUs they free are reused at the next round. A
// job admitted again (its first start, or a resume after Admission preempted it) makes no
// progress for `restart_s`. Running jobs are never moved. JCT = finish - submit.
//
// Mapping onto Admission: one queue with the cluster as nominal quota, no fair sharing, no
// reservations. Each job lists its acceptable node layouts (JobSpec::node_layouts).
//   fifo         priority 0, arrival order, no preemption; a job that does not fit is passed
//                over by later jobs that fit (BestEffortFIFO, no reservation).
//   fifo-strict  as fifo with StrictFIFO: the first job that does not fit blocks all later ones.
//   tiresias     two-queue discretised least-attained-service: a job moves from queue 0 to
//                queue 1 once it has held `tiresias_threshold_gpu_s` GPU-seconds (restarts
//                included); queue 0 is priority 1, queue 1 priority 0 (Admission::SetPriority
//                on demotion), arrival order within a queue. Within-queue preemption
//                LowerOrNewerEqualPriority: a waiting job may evict running jobs after it in
//                that order. No starvation handling.
//   tessera      rigid, same GPU counts and batch sizes as the workload. Priority: minus the
//                predicted remaining GPU-seconds, set every round: GPUs x remaining iterations
//                x the profiled iteration time (of the current placement, or of the fastest
//                split for a waiting job), plus the restart cost for a waiting job and minus it
//                for a running one (a waiting job displaces a running one only when it saves
//                more than the two restarts). Within-queue preemption LowerPriority. Uses the
//                profile-predicted run time (as Optimus does); only submitted jobs are known.
// Layouts: fifo and tiresias list every split fewest nodes first (which puts the job on the
// nodes with the most free GPUs and the rest on the node that fits it most tightly); tessera
// lists every split by profiled iteration time, fastest first. Admission takes the first that
// fits, each part on the node whose free GPUs fit it most tightly.
// Victims are Admission's: the running jobs below the waiting one whose eviction loses the
// least GPU-time, as few as needed.
//
// Deterministic: no randomness beyond the engine's seeded tie-break between identical nodes;
// equal priorities go to the earlier job (submission time, then file order). Simulate* is
// reentrant (no shared state); RunPolluxMatrix runs independent simulations on worker threads
// and its result does not depend on the thread count.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sim/pollux.h"

namespace tessera {

enum class PolluxPolicy { kFifo, kFifoStrict, kTiresias, kTessera };

Result<PolluxPolicy> ParsePolluxPolicy(std::string_view name);
const char* PolluxPolicyName(PolluxPolicy p);

struct PolluxSimConfig {
  int nodes = 16;
  int gpus_per_node = 4;
  double interval_s = 60;
  double restart_s = 30;
  double tiresias_threshold_gpu_s = 16 * 3600.0;
  double max_time_s = 365 * 86400.0;  // a run still going after this is an error
};

struct PolluxJobResult {
  std::string name;
  std::string application;
  int num_replicas = 0;
  double submit = 0;
  double start = 0;   // first allocation
  double finish = 0;  // completion
  double jct = 0;     // finish - submit
  int preemptions = 0;
  int restarts = 0;  // allocations after the first
};

struct PolluxRunResult {
  std::string workload;
  PolluxPolicy policy = PolluxPolicy::kFifo;
  std::vector<PolluxJobResult> jobs;  // in workload file order
  double avg_jct = 0;
  double p50_jct = 0;  // nearest rank
  double p99_jct = 0;
  double makespan = 0;  // last finish, from t = 0
  double gpu_util = 0;  // GPU-seconds held by jobs / (GPUs * makespan)
  int preemptions = 0;
};

using PolluxApps = std::map<std::string, PolluxApp>;

// Checks the workload against the profiles and the cluster (application known, num_replicas fits
// the cluster, batch size within the profiled range) and simulates it. InvalidArgument naming
// the workload file and line otherwise; InvalidArgument for a bad config.
Result<PolluxRunResult> SimulatePollux(const PolluxApps& apps, const PolluxWorkload& workload,
                                       PolluxPolicy policy, const PolluxSimConfig& config);

// Every (policy, workload) pair; result i = policies[i / W] on workloads[i % W]. `threads` = 0
// uses the hardware concurrency. The first error (in that order) is returned.
Result<std::vector<PolluxRunResult>> RunPolluxMatrix(const PolluxApps& apps,
                                                     const std::vector<PolluxWorkload>& workloads,
                                                     const std::vector<PolluxPolicy>& policies,
                                                     const PolluxSimConfig& config,
                                                     unsigned threads);

// Published per-workload average JCTs of one policy (results-jobload/<policy>-<load>/summary.json:
// {"avgs": {"workload-N": seconds, ...}, "mean": seconds, ...}; other keys are ignored).
struct PolluxReference {
  std::string policy;  // e.g. "pollux"
  std::map<std::string, double> avg_jct;
  double mean = 0;
};
// InvalidArgument naming `source` when the text is not JSON of that shape (numbers finite, >= 0).
Result<PolluxReference> ParsePolluxSummary(std::string_view json, const std::string& source,
                                           const std::string& policy);

// The readable table: one row per workload plus the mean of the workloads' average JCTs, one
// column per simulated policy, then one per reference ("pub:<policy>"; blank where a reference
// lacks the workload). `results` as returned by RunPolluxMatrix for `policies`.
std::string PolluxTable(const std::vector<PolluxRunResult>& results,
                        const std::vector<PolluxReference>& references);
// {"policies": {"<name>": {"mean_avg_jct_s": X, "avg_jct_s": {"workload-N": X, ...},
//   "workloads": {"workload-N": {"p50_jct_s", "p99_jct_s", "makespan_s", "gpu_util",
//   "preemptions", "jcts_s": {job: X}}}}}, "published": {"<policy>": {"mean_avg_jct_s",
//   "avg_jct_s"}}, "cluster": {...}, "model": "<model>"}
// "model" names the job model the runs used (the caller's label, e.g. "pollux").
std::string PolluxJson(const std::vector<PolluxRunResult>& results,
                       const std::vector<PolluxReference>& references,
                       const PolluxSimConfig& config, const std::string& model = "");

}  // namespace tessera
