// Multi-tenant admission: queues with quotas per flavor, borrowing and lending inside a cohort
// (organization), fair share over decayed usage, priorities, gangs with topology constraints,
// reservations with backfill, preemption and reclaim, and an exact reason for every waiting job.
//
// Admission happens in the same cycle as placement: a job is admitted only if its queue's quota
// (own or borrowed) allows it AND the engine places at least min_member of its pods now, all or
// nothing; nothing is admitted that cannot run. A gang that cannot be placed may hold a
// reservation (a set of nodes that backfill does not use), charged to its queue's quota.
//
// Order of the pending jobs in a cycle: priority (higher first), then jobs that fit their
// queue's nominal quota before jobs that would borrow, then the weighted dominant share of the
// job's queue (lower first), then arrival, then job id. The share is the larger, over GPU, CPU
// and memory, of usage / (weight x cluster capacity), where usage is the mean of the current
// usage and the usage decayed with `usage_half_life_s` (current usage alone when the half-life
// is 0). With fair_sharing off, only priority, arrival and id order the jobs.
//
// Preemption (when a job does not fit): candidates are running jobs of
//  * the same queue that the queue's WithinQueuePreemption allows (by default strictly lower
//    priority; optionally also equal priority and newer), and
//  * queues of the same cohort that are borrowing, when the preemptor's queue would stay within
//    its nominal quota after admitting the job (reclaim; the queue's ReclaimPreemption may
//    limit it to lower-priority jobs or turn it off);
// never jobs that have run less than `min_runtime_s`, nor jobs a cycle admitted at the current
// time. Victims are chosen to free enough room while minimising lost GPU-time, then the number
// of victims; whole gangs are evicted. A single pod in the sharing path (JobSpec::slice, whole
// GPUs or a fraction) takes its victims from PlanEviction (sharing/eviction.h) over all
// candidates, as the sharing simulation does; if the GPU(s) it clears need a MIG re-layout
// first, the victims are evicted and the job waits for the layout. A job waiting for its own
// re-layout holds no reservation. No loop:
// a reclaiming job is within nominal quota and so can never itself be reclaimed by its victims'
// queue, and within-queue preemption only goes down the strict order (priority, then arrival,
// then id), so a victim can never evict its preemptor.
//
// Quota unit for GPUs: milli GPU-equivalents. One whole GPU of model m counts
// 1000 * gpu_equivalent(m); a share counts in proportion. The default weight of every model is
// 1.0; configure per model (e.g. H100 = 1, A100 = 0.5, T4 = 0.1) to make different GPUs
// comparable for quota and fairness. With models of different weights a job is placed only on
// models its queue's remaining quota can pay for (a 1-GPU job with 0.5 GPU-eq left goes to an
// A100, not an H100).
//
// Cost under overload: within a cycle capacity only shrinks until a preemption frees some, so a
// placement failure is remembered for the rest of the cycle and a later job asking no less
// (same nodes; the same gang, or a single pod no smaller on every dimension, CPU and memory
// not counting when only GPU terms refused it) is refused without a new attempt; its reason
// names the job that failed (jobs with node layouts are always tried). Preemption attempts that
// cannot succeed even with every candidate evicted (quota, or fewer free milli-GPUs on the
// allowed nodes than the job asks) end before anything is evicted, and an eviction is followed
// by a placement attempt only once enough milli-GPUs are free.
//
// Deterministic. Not thread-safe; one Admission per scheduling loop. The engine is pure; the
// caller supplies time.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cluster/cluster_state.h"
#include "core/status.h"
#include "engine/engine.h"

namespace tessera {

struct Resources {
  int64_t gpu = 0;     // milli GPU-equivalents
  int64_t cpu = 0;     // milli-CPU
  int64_t memory = 0;  // MiB
  Resources operator+(const Resources& o) const {
    return {gpu + o.gpu, cpu + o.cpu, memory + o.memory};
  }
  Resources operator-(const Resources& o) const {
    return {gpu - o.gpu, cpu - o.cpu, memory - o.memory};
  }
  Resources& operator+=(const Resources& o) { return *this = *this + o; }
  Resources& operator-=(const Resources& o) { return *this = *this - o; }
  bool FitsIn(const Resources& cap) const {
    return gpu <= cap.gpu && cpu <= cap.cpu && memory <= cap.memory;
  }
  bool operator==(const Resources&) const = default;
  std::string ToString() const;  // "4.50 GPU-eq, 12 CPU, 64 GiB"
};

// A quota for one flavor: a set of GPU models (0 = CPU-only workloads and any model).
struct FlavorQuota {
  std::string name;                          // e.g. "h100"
  ModelMask models = 0;                      // GPU models of this flavor; 0 = any
  Resources nominal;                         // guaranteed
  std::optional<Resources> borrowing_limit;  // unset: may borrow all the cohort lends
  std::optional<Resources> lending_limit;    // unset: lends all of its unused nominal quota
};

// A queue's priority policy, in Kueue's terms (spelled as Kueue spells them in text form).
// Which running jobs of the same queue a pending job may evict.
enum class WithinQueuePreemption : uint8_t {
  kNever,
  kLowerPriority,              // strictly lower priority (default)
  kLowerOrNewerEqualPriority,  // or equal priority and arrived later (then higher job id)
};
// Which jobs of borrowing queues of the cohort a job within its nominal quota may evict.
enum class ReclaimPreemption : uint8_t {
  kNever,
  kLowerPriority,  // only jobs of strictly lower priority
  kAny,            // any (default)
};
// How a queue's own jobs pass each other.
enum class QueueingStrategy : uint8_t {
  kBestEffortFifo,  // a job that does not fit lets later jobs of the queue try (default)
  kStrictFifo,      // the queue's head blocks the jobs behind it
};

// Text forms: "Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any", "BestEffortFIFO",
// "StrictFIFO". Parse* return InvalidArgument listing the accepted values.
const char* Name(WithinQueuePreemption p);
const char* Name(ReclaimPreemption p);
const char* Name(QueueingStrategy s);
Result<WithinQueuePreemption> ParseWithinQueuePreemption(const std::string& text);
Result<ReclaimPreemption> ParseReclaimPreemption(const std::string& text);
Result<QueueingStrategy> ParseQueueingStrategy(const std::string& text);

struct QueueSpec {
  std::string name;
  std::string cohort;                // organization; empty = neither borrows nor lends
  std::vector<FlavorQuota> flavors;  // tried in this order
  double weight = 1.0;               // fair-share weight (> 0)
  WithinQueuePreemption within_queue = WithinQueuePreemption::kLowerPriority;
  ReclaimPreemption reclaim = ReclaimPreemption::kAny;  // take back lent quota
  QueueingStrategy queueing = QueueingStrategy::kBestEffortFifo;
};

struct AdmissionConfig {
  double usage_half_life_s = 3600;  // decayed usage for fair share; 0 = current usage only
  bool backfill = true;             // small jobs may run on nodes no reservation holds
  bool reservations = true;         // a blocked gang reserves nodes
  // Most nodes reservations hold at once (0: no limit). A reservation that would exceed it is
  // not made, unless no node is reserved (so a gang larger than the limit still gets one).
  // Reserved nodes drain; the limit bounds the capacity idled for waiting gangs.
  int max_reserved_nodes = 0;
  bool preemption = true;
  bool fair_sharing = true;  // false: order by priority, then arrival only (FIFO)
  bool strict_fifo = false;  // true: every queue is kStrictFifo, whatever its own strategy
  double min_runtime_s = 0;  // jobs running less than this are not preemptible
  // Bounds on preemption work: jobs that may try preemption per cycle, and victims tried per
  // attempt (cheapest first). Jobs beyond the first bound try again in a later cycle.
  int max_preemption_attempts_per_cycle = 64;
  int max_victims_per_attempt = 32;
  // Remember placement failures within a cycle (see above): the same decisions at less cost.
  // Off, every pending job gets its own placement attempt.
  bool remember_failures = true;
  std::map<std::string, double> gpu_equivalents;  // GPU model name -> weight of one GPU
  Status Validate() const;
};

enum class TopologyKind : uint8_t { kNone, kSameNode, kSameLabel };

// A job: `pods` identical pods; admitted with at least min_member of them placed at once.
struct JobSpec {
  WorkloadId id = 0;
  std::string name;
  std::string queue;
  int priority = 0;
  double arrival = 0;  // seconds
  Demand pod;
  // Set: each pod is a GPU slice (whole GPUs, a MIG instance, MPS or time-slice) whose
  // mechanism and size the engine's selector chooses in the cycle (Engine::DecideSlice);
  // `pod` still carries the host CPU/memory and the GPU-equivalent estimate quota is charged
  // with. Its models are narrowed by the flavor like `pod`'s. Slice jobs neither share nor
  // use the per-cycle failure memory, and their preemption skips the free-capacity screen.
  std::optional<SliceDemand> slice;
  int pods = 1;
  int min_member = 0;  // 0 = all pods
  TopologyKind topology = TopologyKind::kNone;
  std::string topology_label;  // kSameLabel: node label key, e.g. "nvlink-domain", "rack"
  double gang_timeout_s = 0;   // > 0: a gang waiting longer drops its reservation and is
                               // reported as timed out (it stays queued)
  // Nodes the job may use (one byte per node index, non-zero = allowed), e.g. from taints,
  // selectors and node readiness; null = every node. Shared, read-only.
  std::shared_ptr<const std::vector<uint8_t>> allowed_nodes;
  // Node layouts the gang accepts, best first; null or empty = the engine places pod by pod.
  // A layout lists pods per node: parts > 0 summing to `pods` (min_member must be 0 or pods;
  // no topology, not a slice job). The job is placed with the first layout whose parts fit on
  // distinct allowed nodes. Parts are placed in the order given, each on one of the unused
  // nodes with the fewest free pod slots that still hold it (tightest fit); the engine's scorer
  // chooses among those nodes and picks the GPUs. Shared, read-only.
  std::shared_ptr<const std::vector<std::vector<int>>> node_layouts;
  bool preemptible = true;  // false: never chosen as a preemption victim
};

// Pod ids of a job: job.id * kPodsPerJob + index.
inline constexpr WorkloadId kPodsPerJob = 1024;

enum class JobState : uint8_t { kPending, kRunning, kFinished };

// The kind of reason a pending job waits (the class of Admission::WhyPending's text): its queue's
// quota (or borrowing limit) refuses it, no allowed node or GPU has room for it (a gang holding a
// reservation waits for room too), or anything else (not yet considered, requeued after a node
// loss or a failed bind).
enum class PendingReason : uint8_t { kOther, kQuota, kNoFit };

struct Preemption {
  WorkloadId victim = 0;
  WorkloadId preemptor = 0;
  std::string
      reason;  // "reclaim: team-a needs its lent quota of h100", "priority 10 > 0 in team-b"
};

// A single-pod slice job that waits for a MIG re-layout (Admission::SetLayoutPlanner): the
// caller applies `reconfig` (or not) and a later cycle places the job.
struct LayoutProposal {
  WorkloadId job = 0;
  MigReconfig reconfig;
  // The slice the job took on the new layout in this cycle's plan (none: only its host CPU and
  // memory were kept); SetLayoutReady gives it back once the layout is made.
  std::optional<SliceAssignment> slice;
};

struct CycleResult {
  std::vector<WorkloadId> admitted;
  std::vector<Preemption> preempted;  // evicted jobs, now pending again
  // One per waiting job; those jobs stay pending. While the cycle runs a proposed layout is in
  // the ledger, so a later job whose slice lies in it waits for the same layout (a second plan
  // for the GPU composes with the first: every proposal of a GPU names the layout they lead
  // to), and each waiting job holds its slice there, or at least its host CPU and memory on the
  // node, so a later job cannot take them. All of it is undone when the cycle ends.
  std::vector<LayoutProposal> relayouts;
};

struct QueueStatus {
  std::string name;
  Resources usage;     // running, summed over flavors
  Resources borrowed;  // usage above nominal, summed over flavors
  Resources reserved;  // held by reservations
  double share = 0;    // weighted dominant share (decayed)
  int pending = 0;
  int running = 0;
};

class Admission {
 public:
  // Validates the queues (unique names, flavors with non-negative quotas, weights > 0, limits
  // consistent) and the config; InvalidArgument naming the first problem.
  static Result<std::unique_ptr<Admission>> Create(std::vector<QueueSpec> queues,
                                                   AdmissionConfig config,
                                                   std::unique_ptr<Scorer> scorer, uint64_t seed);

  // Adds a pending job. InvalidArgument for an unknown queue, a duplicate id, pods outside
  // 1..kPodsPerJob-1 or min_member > pods, a demand the ledger would reject.
  Status Submit(const JobSpec& job);
  // Releases a running job's pods (it completed). NotFound if it is not running.
  Status Finish(ClusterState& state, WorkloadId job);
  // Removes a pending job (cancelled). NotFound if it is not pending.
  Status Cancel(WorkloadId job);
  // Registers a job that already runs with these pod placements (e.g. rebuilt from bound pods
  // after a restart): allocates the pods on `state` and charges the queue's first flavor whose
  // models include the pods' GPU model. FailedPrecondition, changing nothing, if a placement's
  // GPUs do not fit (e.g. a GPU would be assigned twice) or no flavor matches. Host CPU and
  // memory never refuse it: a pod asking more than its node has free in the ledger holds what
  // is free there (the node is then full; its release gives back exactly that), and the queue
  // is charged the full request, as it is charged above quota.
  // For a slice job, `slices` (one per placement) names each pod's slice; it is allocated as
  // given (a MIG instance must exist and be free).
  // An adopted job's pods are the cluster's past for the placement policy
  // (Scorer::ObservePast): adopted before any job is submitted, they are compared with the
  // arrivals and forgotten if the mix has changed; adopted later, they count as arrivals. A
  // refused adoption is not observed.
  Status Adopt(ClusterState& state, const JobSpec& job, const std::vector<Placement>& placements,
               double start, const std::vector<SliceAssignment>& slices = {});
  // Requeues, whole, every running job with a pod on node n (the node disappeared or became
  // unusable): releases all their pods and makes them pending again. Returns the job ids.
  std::vector<WorkloadId> RequeueNode(ClusterState& state, NodeIdx n, const std::string& why);
  // Requeues one running job: releases its pods and makes it pending again. NotFound if it
  // is not running.
  Status Requeue(ClusterState& state, WorkloadId job, const std::string& why);
  // Pending jobs, in no particular order.
  std::vector<WorkloadId> PendingJobs() const;
  // Changes a pending or running job's priority, e.g. when a least-attained-service policy
  // demotes it or an order is recomputed from predictions. It applies from the next cycle: to
  // the order of pending jobs and to which running jobs a pending one may preempt (a running
  // job keeps its GPUs until a cycle evicts it). NotFound if the job is neither.
  Status SetPriority(WorkloadId job, int priority);
  // Replaces a pending job's allowed nodes (JobSpec::allowed_nodes), e.g. after a node was
  // added or its readiness, taints or labels changed. NotFound if the job is not pending.
  Status SetAllowedNodes(WorkloadId job, std::shared_ptr<const std::vector<uint8_t>> allowed);

  // With a planner, single-pod slice jobs may wait for a MIG re-layout instead of taking a
  // worse slice in place (Engine::DecideSlice); the cycle lists them (CycleResult::relayouts)
  // and does not preempt for them. Null: layouts are used as they are (default). The planner
  // must outlive its use.
  void SetLayoutPlanner(const MigPlanner* planner) { engine_.set_layout_planner(planner); }
  // GPUs (one mask per node) the next cycles must not re-lay out, e.g. re-layouts in flight.
  void SetFrozenGpus(std::vector<GpuMask> frozen);
  // The re-layouts pending job `job` waited for are made: the next cycle tries it before every
  // other job (the new instances were made for it; without this another pod could take them
  // and the job plan again), on `slice` (LayoutProposal::slice) when that is still free, so it
  // gets what the plan gave it. Once: the cycle after that orders and places it as usual.
  Status SetLayoutReady(WorkloadId job, std::optional<SliceAssignment> slice = std::nullopt);

  // One scheduling cycle at time `now` (seconds, non-decreasing): updates decayed usage,
  // admits what fits, preempts where the rules allow. Fails only on an internal inconsistency.
  Result<CycleResult> RunCycle(ClusterState& state, double now);

  JobState state(WorkloadId job) const;
  // The exact reason a pending job waits, e.g. "quota of h100 in team-a exhausted (8.00 of 8.00
  // GPU-eq used, 2.00 asked; cohort lends 0.00)", "gang waits for 3 more nodes",
  // "reservation: waiting for nodes n1,n2 to free". Empty for jobs that are not pending.
  std::string WhyPending(WorkloadId job) const;
  // The class of that reason; kOther for jobs that are not pending.
  PendingReason WhyPendingReason(WorkloadId job) const;
  // Nodes (by index, `nodes` entries) that reservations of jobs other than `job` hold: the
  // cycle places `job` on none of them, so room made there (a MIG re-layout) cannot serve it.
  std::vector<uint8_t> ReservedForOthers(WorkloadId job, size_t nodes) const;
  // Placement of each pod of a running job.
  std::vector<Placement> Placements(WorkloadId job) const;
  // Slice of each pod of a running slice job (same order as Placements); empty otherwise.
  std::vector<SliceAssignment> Slices(WorkloadId job) const;
  double StartTime(WorkloadId job) const;  // last admission time; -1 if never admitted

  std::vector<QueueStatus> Queues() const;
  const AdmissionConfig& config() const { return config_; }
  // The engine admitted jobs are placed by (for its policy's state, e.g. Scorer::mix_changes).
  const Engine& engine() const { return engine_; }
  int64_t GpuEquivalentMilli(GpuModelId model, int64_t milli_gpu) const;

 private:
  Admission(std::vector<QueueSpec> queues, AdmissionConfig config, std::unique_ptr<Scorer> scorer,
            uint64_t seed);
  // Submit, without showing the job to the placement policy.
  Status Enqueue(const JobSpec& job);
  struct Impl;
  friend struct Impl;
  std::vector<QueueSpec> queues_;
  AdmissionConfig config_;
  Engine engine_;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tessera
