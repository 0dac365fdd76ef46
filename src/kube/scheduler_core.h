// SchedulerCore: the Kubernetes scheduler's decision logic, without I/O. It is fed pod and node
// objects (JSON as the API server sends them, e.g. from informers) and, once per cycle, turns
// the engine's and the admission layer's plan into actions: bind these pods (with the device
// assignment annotation), evict these pods (preemption), report why these pods wait.
//
// Contract:
//  * Nodes: first seen -> added to the cluster model (capacity is fixed at that point; later
//    updates change readiness, cordon, taints, labels and inventory only). A deleted or
//    NotReady node releases its allocations; every job with a pod on it is requeued whole.
//  * Pods of other schedulers and pods bound before a restart are adopted at their node with
//    the GPUs their tessera.io/assignment annotation names (or any free GPUs if it has none), so
//    no GPU is ever assigned twice. The assignment wins over a node report that does not show
//    the named instance (or shows MIG where it names a GPU with MIG off): see
//    ConformToAssignment. A bound pod whose GPUs are already taken is reported once and adopted
//    when they are free. CPU and memory never refuse one (it holds what its node has free), nor
//    does a queue without a flavor for its node's GPU model (it runs outside every queue).
//  * Pending pods with spec.schedulerName == config.scheduler_name become admission jobs: one
//    pod each, or one job per gang (tessera.io/gang) once min-member pods (or, without
//    min-member, the pods seen when no new member arrived for gang_settle_s) are pending.
//    Members already bound (by a leader that died while binding the gang, or before a member's
//    failed bind is retried) count towards min-member; a gang still short of members gets a
//    notice saying how many are missing.
//  * Every pod constraint kube-scheduler honours is applied through the allowed-node mask:
//    readiness, cordon, taints/tolerations, nodeSelector, required node affinity. Pending jobs'
//    masks follow node changes (a new node, a taint removed, e.g. the API server's
//    node.kubernetes.io/not-ready taint on a node that has just joined).
//  * A bind is issued once per pod; BindFailed requeues the pod's whole job. Binds onto a node
//    where evicted pods are still terminating are held until those pods are gone.
//  * Invalid requests become warning reasons (one per distinct message), never crashes.
// Deterministic for the same event sequence and seed. Not thread-safe: callers serialise.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "admission/admission.h"
#include "kube/prom_histogram.h"
#include "kube/translate.h"
#include "sharing/mig_planner.h"

namespace tessera::kube {

struct SchedulerConfig {
  std::string scheduler_name = "tessera";
  std::string policy = "tessera";  // placement policy (src/policies/builtin.h)
  std::vector<QueueSpec> queues;   // empty: one queue "default" with unlimited quota
  // Admission as in admission.h, except that reservations hold at most 4 nodes at once, as the
  // sharing simulation's (SharingConfig::max_reserved_nodes).
  AdmissionConfig admission = [] {
    AdmissionConfig c;
    c.max_reserved_nodes = 4;
    return c;
  }();
  double gang_settle_s = 2;  // gangs without min-member: wait this long for members
  // A waiting pod's reason is re-sent (condition and Event) at once when it says something new,
  // but when only its parenthesised detail changed, at most this often, so reasons whose
  // supporting figures move every cycle do not flood the API server.
  double notice_interval_s = 30;
  // Shares (tessera.io/gpu-memory, gpu-compute, HAMi resources) go through the sharing-mode
  // selector: MPS with a thread % and memory limit, time-slicing, or a MIG instance, chosen by
  // isolation class and size (docs/SHARING.md), and the assignment names it. Off: standard and
  // best-effort shares are milli-GPU shares (`share`) whose mechanism the node chooses, for nodes
  // served by another sharing device plugin; strict shares and MIG requests are slices either way.
  bool select_share_mechanism = true;
  // MIG re-layouts (two phases): when a slice pod fits no current layout, the scheduler may ask
  // a node to re-lay out one GPU, destroying only free instances (LayoutAction); the pod is
  // bound only after the node reports the layout applied. A GPU whose apply failed or did not
  // finish within mig_relayout_timeout_s is not planned again for that long.
  bool mig_relayout = true;
  double mig_relayout_timeout_s = 120;
  int max_relayouts_per_cycle = 8;
  // Rightsizing (tessera.io/rightsize: auto): no grant holds less GPU memory than this (a MIG
  // grant takes the smallest profile holding it). 1 GiB covers a CUDA context and its libraries
  // (as the advisor's auto_floor_mib); 0 disables the floor. Within [0, 262144].
  int64_t rightsize_floor_mib = 1024;
  // A rightsized single-GPU memory share may also run, at the same memory limit, on other GPU
  // models the pod allows where the recommendation's compute, scaled by relative compute, stays
  // within this fraction of one GPU (and, for an MPS grant, within its thread %), as the
  // advisor's other_model_max_compute. 0 keeps grants on the recommended model. Within [0, 1].
  double rightsize_other_model_max_compute = 0.80;
  uint64_t seed = 1;
  Status Validate() const;
};

struct BindAction {
  std::string ns, name, uid, node;
  std::map<std::string, std::string> annotations;  // tessera.io/assignment
  WorkloadId job = 0;
};

struct PodNotice {
  std::string ns, name, uid;
  std::string reason;   // "Unschedulable" | "InvalidRequest" | "AdoptFailed" | "NodeLost" |
                        // "EvictionBlocked" | "SliceMissing" | "NodeOvercommitted" |
                        // "OutsideQueue"
  std::string message;  // the exact why
};

struct EvictAction {
  std::string ns, name, uid;
  std::string reason;
  // The Event written on the pod: "Preempted" (a preemption victim, a pod on a lost node) or
  // "RightsizeOomRestart" (a rightsized pod killed out of memory whose controller would restart
  // it in place at the same grant; evicted so that the controller's next pod is sized again).
  std::string event_reason = "Preempted";
};

// A MIG layout the scheduler wants on one GPU of a node; the runtime records it in the node's
// MigLayout object (docs/OPERATIONS.md) and the node agent applies it and reports back through
// SchedulerCore::LayoutReported. Revisions grow monotonically per scheduler.
struct LayoutAction {
  std::string node;
  int gpu = 0;
  int64_t revision = 0;
  bool mig_enabled = true;
  std::string layout;  // MigLayoutString form, e.g. "3g.40gb@0 2g.20gb@4 1g.10gb@6"
  std::string reason;  // e.g. "create 3g.40gb for a pending strict workload; destroys 2 free ..."
};

// An Event to write about a pod (type Normal or Warning), e.g. a rightsizing decision.
struct PodEventAction {
  std::string ns, name, uid;
  std::string type, reason, note;
};

struct CycleOutput {
  std::vector<LayoutAction> layouts;  // new desired layouts to record
  std::vector<BindAction> binds;
  std::vector<EvictAction> evictions;
  std::vector<PodNotice> notices;      // only when a pod's message changed since the last notice
  std::vector<PodEventAction> events;  // rightsizing decisions and out-of-memory kills
  int64_t admitted_jobs = 0;
};

struct CoreStats {
  int64_t nodes = 0, pods_pending = 0, pods_bound = 0, binds_issued = 0, bind_failures = 0;
  int64_t adopted = 0, adopt_failures = 0, invalid = 0, requeued_by_node = 0, cycles = 0;
  int64_t relayouts_planned = 0, relayouts_applied = 0, relayouts_failed = 0;
  // Rightsizing: auto pods granted less than they asked, recommend pods told what they would
  // get, pods whose rightsizing was skipped (malformed annotations), out-of-memory kills of
  // rightsized pods, and pods sized after such kills of their owner.
  int64_t rightsize_applied = 0, rightsize_proposed = 0, rightsize_skipped = 0;
  int64_t rightsize_oom_kills = 0, rightsize_oom_retries = 0;
  // Pods evicted to make room for an out-of-memory retry (scheduler_oom_preempt.cc).
  int64_t rightsize_oom_preemptions = 0;
  // Killed pods evicted because their container would restart in place at the same grant.
  int64_t rightsize_oom_evictions = 0;
  // Victims' pods evicted by admission preemption (priority or reclaimed quota), and pods given
  // a new Unschedulable notice.
  int64_t preemption_evictions = 0, unschedulable_notices = 0;
};

class SchedulerCore {
 public:
  static Result<std::unique_ptr<SchedulerCore>> Create(SchedulerConfig config);

  void UpsertNode(const Json& node);
  void DeleteNode(const Json& node);
  void UpsertPod(const Json& pod);
  void DeletePod(const Json& pod);

  // One scheduling cycle at monotonic time `now` (seconds).
  CycleOutput Cycle(double now);
  // The API server refused a bind (already bound elsewhere, pod deleted, conflict...): the
  // pod's job is requeued whole; pods of it already bound are left to the informer.
  void BindFailed(const BindAction& b, const Status& why);
  // The API server refused an eviction (429: a PodDisruptionBudget blocks it, or another
  // error): the victim keeps running, so it is accounted again at its node, and every preemptor
  // whose bind waits on its node is requeued. The victim is not chosen again for
  // kEvictionRetrySeconds, doubled with every refusal of the same pod up to
  // kEvictionRetryMaxSeconds: the budget may allow it later (e.g. once replacements run
  // elsewhere), and a waiting preemptor must then get its chance.
  void EvictionFailed(const EvictAction& e, const Status& why);
  // The node agent's outcome for a LayoutAction: applied (the ledger takes the new layout and
  // pods may use it from the next cycle) or failed (the plan is reverted, its GPU is left alone
  // for mig_relayout_timeout_s and the waiting pods are told why). Reports for unknown or
  // superseded revisions are ignored; returns whether the report was taken.
  bool LayoutReported(const std::string& node, int gpu, int64_t revision, bool applied,
                      const std::string& message);
  // A MigLayout object (deploy/crds/miglayout.yaml) as the API server sends it: every GPU whose
  // status reports an outcome (Applied or Failed) for the revision in flight is passed to
  // LayoutReported. Malformed entries are skipped.
  void UpsertMigLayout(const Json& obj);
  // Turns MIG re-layout planning on or off (e.g. off when the MigLayout CRD is not installed).
  void SetRelayoutEnabled(bool on) { config_.mig_relayout = on; }
  static constexpr double kEvictionRetrySeconds = 30;
  static constexpr double kEvictionRetryMaxSeconds = 600;

  const ClusterState& cluster() const { return state_; }
  const Admission& admission() const { return *admission_; }
  CoreStats stats() const;
  // Prometheus exposition (text format 0.0.4) of the core's gauges at time `now`:
  // tessera_pending_pods{queue}, tessera_pending_oldest_seconds{queue},
  // tessera_invalid_pods_total, tessera_gpu_allocated_ratio, tessera_gpu_fragmentation_ratio
  // (free GPU capacity on partly used GPUs, which no whole-GPU pod can use, over all free GPU
  // capacity), tessera_mig_relayouts_total{result}, tessera_mig_relayouts_in_flight,
  // tessera_mig_layout_conflicts, tessera_rightsize_applied_total{mode},
  // tessera_rightsize_skipped_total, tessera_rightsize_oom_kills_total{namespace,owner_kind,owner},
  // tessera_rightsize_oom_retries_total{namespace,owner_kind,owner},
  // tessera_rightsize_oom_preemptions_total, tessera_rightsize_oom_evictions_total,
  // tessera_pending_pods_by_reason{queue,reason} (reason: one of kPendingReasons, see
  // PendingReasonOf), tessera_scheduling_latency_seconds (histogram: first seen pending -> bind
  // issued, one observation per bind issued), tessera_scheduling_decisions_total{result}
  // (bound: binds issued; unschedulable: new Unschedulable notices), tessera_preemptions_total,
  // tessera_node_gpu_allocated_ratio{node,model}.
  std::string Metrics(double now) const;
  // The reason codes of tessera_pending_pods_by_reason.
  static constexpr const char* kPendingReasons[] = {"quota",      "no_fit",  "gang", "mig_relayout",
                                                    "preempting", "binding", "other"};
  // Why a pending pod ("ns/name") waits; empty if unknown or not pending.
  std::string WhyPending(const std::string& pod_key) const;

 private:
  explicit SchedulerCore(SchedulerConfig config);
  struct PodEntry;
  struct JobEntry;
  struct NodeEntry;
  void RebuildMasks();
  std::shared_ptr<const std::vector<uint8_t>> MaskFor(const PodRequest& p);
  void SubmitPending(double now);
  void ForgetPod(const std::string& key);
  // Adds a bind to the cycle's output, counting it and observing its pod's scheduling latency.
  void IssueBind(BindAction b, double now, CycleOutput& out);
  // The code (kPendingReasons) of why a pending pod of ours waits: its gang has not formed
  // (gang), admission refuses it for quota (quota) or finds no room (no_fit, also a gang
  // holding a reservation), it waits for a MIG re-layout (mig_relayout), its bind waits for
  // preemption victims to terminate (preempting), its bind is issued but not yet seen
  // (binding), anything else (other: not yet considered, requeued).
  const char* PendingReasonOf(const PodEntry& p) const;
  void NodeGone(NodeIdx n, const std::string& why);
  Status AdoptBound(PodEntry& pod, bool preemptible = true);
  // What a GPU held before ConformToAssignment changed it: enough to put it back.
  struct Conformed {
    int gpu = 0;
    bool mig_enabled = false;
    MigLayout layout;
    std::optional<std::string> conflict;  // the GPU's layout conflict before, if any
  };
  // Ends an adoption on node n: if admission refused it (`admitted`), puts back the GPUs
  // ConformToAssignment changed and returns why; else records the pod's one-pod job and tells
  // it what its node's report lacks, and, once each, that it runs beyond its node's free CPU or
  // memory in the ledger (`beyond`, NodeOvercommitted) or outside its queue (`outside`,
  // OutsideQueue); an empty message tells nothing.
  Status Adopted(PodEntry& pod, NodeIdx n, WorkloadId job, const Status& admitted,
                 const std::vector<Conformed>& conformed, const std::string& beyond = "",
                 const std::string& outside = "");
  // Why a pod asking `cpu` milli-CPU and `memory` MiB is adopted beyond node n's free CPU or
  // memory in the ledger; empty if it fits.
  std::string Beyond(NodeIdx n, int64_t cpu, int64_t memory) const;
  // Brings node n's MIG layouts in the ledger (GPU `only` alone, or all with -1) to its
  // inventory's (tessera.io/gpu-inventory); a change that would destroy an instance in use is
  // refused and kept in layout_conflicts_, and tried again once the node's version changes.
  void SyncMigLayouts(NodeIdx n, int only = -1);
  // A bound pod's assignment is evidence of its GPUs' state even where the node's report
  // disagrees (a report that lags a restart, or is wrong): the ledger's GPUs named by `s` take
  // the state it needs (MIG on with its instance `mig_instance`, "<profile>@<start>", or MIG
  // off for any other kind), destroying only free instances. A GPU changed so becomes a layout
  // conflict, and the report takes over again once nothing in the way is in use. Nothing
  // changes where running work is in the way; adoption then reports the conflict. Returns what
  // the changed GPUs held, for RevertConform.
  std::vector<Conformed> ConformToAssignment(const SliceAssignment& s,
                                             const std::string& mig_instance,
                                             const std::string& key);
  // Tells the pods on GPU g of node n (of job `only_job` alone, unless 0) that hold what the
  // report (MIG mode `mig_enabled`, instances `reported`) does not show: a SliceMissing notice.
  void NotifySliceMissing(NodeIdx n, int g, bool mig_enabled, const MigLayout& reported,
                          WorkloadId only_job = 0);
  // NotifySliceMissing for job `job`, adopted on GPUs ConformToAssignment changed.
  void NotifyConformed(NodeIdx n, const std::vector<Conformed>& conformed, WorkloadId job);
  // GPU g's MIG mode and layout as node n reports them (MIG off where it is not listed), or
  // nothing when the reported layout does not parse.
  std::optional<std::pair<bool, MigLayout>> ReportedLayout(NodeIdx n, int g) const;
  // Puts node n's GPUs back as ConformToAssignment found them (an adoption that failed leaves
  // the ledger as it was).
  void RevertConform(NodeIdx n, const std::vector<Conformed>& saved);
  // What decides whether a bound pod can be adopted on node n, or whether n's report can reach
  // the ledger: the ledger's stamp of the node and node_epoch_ (its report, readiness, and
  // re-layouts in flight). A failed try is repeated only once this changes.
  using NodeVersion = std::pair<uint64_t, uint64_t>;
  NodeVersion VersionOf(NodeIdx n) const { return {state_.free(n).stamp, node_epoch_[n]}; }
  std::string Notice(const std::string& key, const std::string& reason, const std::string& msg,
                     CycleOutput& out);
  // Rightsizing (scheduler_rightsize.cc). ObserveRightsize reads a pod's rightsizing history
  // (out-of-memory kills of rightsized pods, tessera.io/rightsize-oom-retries) into oom_level_;
  // Regrant gives `req` the grant a pod already has (its tessera.io/rightsize-applied
  // annotation, or the decision taken while it waits); DecideRightsize takes that decision once
  // per pod when it is first submitted.
  void ObserveRightsize(const Json& pod);
  void Regrant(const Json& pod, PodRequest& req, const PodEntry* p) const;
  void DecideRightsize(PodEntry& p);
  void RightsizeEvent(const PodEntry& p, const char* type, const char* reason,
                      const std::string& note);
  std::string RightsizeMetrics() const;
  // The out-of-memory retry of a rightsized owner (scheduler_oom_preempt.cc): a pending pod
  // sized after its owner's kill (tessera.io/rightsize-oom-retries) that fits on no allowed node
  // evicts, from one node, tessera.io/rightsize: auto pods of the same or lower priority that
  // this scheduler bound after the killed pod: the fewest that make room (one victim, the
  // smallest that suffices; else the largest first), on the node needing the fewest, then
  // freeing the least. Never pods bound before the killed one (pods adopted after a restart
  // count as bound before any this process binds), of higher priority, not rightsized, of
  // gangs, or whose eviction was refused recently. Once per retry pod; the victims' pods get
  // EvictActions and the retry's bind waits until they are gone. Runs before admission; at
  // most kOomPreemptTrialsPerCycle fits with victims removed are tried per cycle.
  void OomPreempt(CycleOutput& out);
  static constexpr int kOomPreemptTrialsPerCycle = 64;
  // Pods of this scheduler in gang "ns/name" that are bound (and not being deleted).
  int BoundGangMembers(const std::string& gang) const;

  SchedulerConfig config_;
  ClusterState state_;
  std::unique_ptr<Admission> admission_;
  std::vector<NodeInfo> node_info_;  // by NodeIdx
  std::vector<uint8_t> node_alive_;
  std::unordered_map<std::string, NodeIdx> node_index_;
  std::unordered_map<std::string, std::shared_ptr<PodEntry>> pods_;
  std::unordered_map<WorkloadId, std::shared_ptr<JobEntry>> jobs_;
  std::map<std::string, std::vector<std::string>> gang_waiting_;  // "ns/gang" -> pod keys
  std::map<std::string, double> gang_last_seen_;
  std::vector<std::string> pending_new_;  // pending pods not yet submitted
  struct SentNotice {
    std::string msg;
    double at = 0;
  };
  std::map<std::string, SentNotice> last_notice_;
  std::map<std::string, std::shared_ptr<const std::vector<uint8_t>>> mask_cache_;
  std::vector<BindAction> held_;             // binds waiting for terminating pods to leave
  std::vector<EvictAction> held_evictions_;  // evictions decided outside a cycle
  // Bound pods not accounted yet: their node is not known yet (retried every cycle), or
  // adoption failed (reported once, and retried once the node's version or the pod changes).
  struct Unadopted {
    bool reported = false;
    std::optional<NodeVersion> tried;  // the node's version after the last failed try
  };
  std::map<std::string, Unadopted> unadopted_;
  std::vector<uint64_t> node_epoch_;                       // by NodeIdx; see VersionOf
  std::map<std::string, std::string> slice_missing_told_;  // pod key -> its SliceMissing notice
  // Pods adopted beyond their node's free CPU or memory, and pods counted outside their queue
  // (no flavor covers their node's GPU model): pod key -> the notice it was given.
  std::map<std::string, std::string> overcommitted_, outside_queue_;
  double last_now_ = 0;
  std::map<NodeIdx, std::set<std::string>> terminating_;  // evicted pods still present
  WorkloadId next_job_ = 1;
  CoreStats stats_;
  std::vector<PodNotice> deferred_notices_;
  // A node was added, removed, or changed what decides which pods may use it (readiness,
  // cordon, taints, labels): pending jobs get their allowed nodes recomputed next cycle.
  bool masks_stale_ = false;
  // Pods whose eviction the API server refused: when they may be victims again (< 0: already
  // are) and how many refusals so far.
  struct EvictionRetry {
    double at = -1;
    int refusals = 0;
  };
  std::map<std::string, EvictionRetry> eviction_retry_;
  // GPUs whose ledger layout is not the node's report, why, and the node's version when the
  // report was last tried (none: try it next cycle).
  struct LayoutConflict {
    std::string why;
    std::optional<NodeVersion> tried;
  };
  std::map<std::pair<NodeIdx, int>, LayoutConflict> layout_conflicts_;
  // MIG re-layouts in flight (scheduler_relayout.cc).
  struct Relayout {
    int64_t revision = 0;
    bool mig_after = true;
    MigLayout after;
    std::string reason;
    double started = 0;
    std::vector<WorkloadId> jobs;          // the jobs waiting for it (the first one proposed it)
    std::vector<WorkloadId> placeholders;  // ledger entries holding the GPU meanwhile
  };
  using GpuKey = std::pair<NodeIdx, int>;
  // Before a cycle: forgets waits of jobs no longer pending; gives admission the planner and
  // the GPUs it must not re-lay out (in flight, backing off).
  void PrepareRelayouts(double now);
  // After a cycle: starts the re-layouts it proposed (at most max_relayouts_per_cycle; a
  // proposal for a GPU already started this cycle with the same layout adds its job to the
  // waiters, as does turning MIG off for whole-GPU pods); returns how many were started.
  int StartRelayouts(double now, const std::vector<LayoutProposal>& proposals, CycleOutput& out);
  // Holds the GPU of `plan` for job `id` with placeholders, records the layout action and keeps
  // the job from being placed until every GPU of its plan is applied or has failed. False (and
  // nothing changed) when the GPU is already being re-laid out or cannot be held.
  bool HoldForRelayout(WorkloadId id, const MigReconfig& plan, double now, CycleOutput& out,
                       std::optional<SliceAssignment> slice = std::nullopt);
  // Job `id` waits for the re-layout of `key` (started for it, or for an earlier job when
  // admission found its slice in the same new layout): it holds its host CPU/memory on the node
  // and is placed nowhere meanwhile; `slice` is what the plan gave it on the new layout.
  void WaitForRelayout(WorkloadId id, GpuKey key, std::optional<SliceAssignment> slice);
  // GPUs being re-laid out or backing off after a failure.
  std::vector<GpuMask> FrozenGpus() const;
  // Once every re-layout of the job has ended: its allowed nodes are restored, its host hold
  // released and, when all were applied, admission tries it first in the next cycle.
  void ReleaseRelayoutWait(WorkloadId job);
  void ExpireRelayouts(double now);
  // Ends a re-layout: applied -> the ledger takes the layout; otherwise it is reverted.
  void EndRelayout(GpuKey key, bool applied, const std::string& why);
  std::map<GpuKey, Relayout> relayouts_;
  std::map<GpuKey, double> relayout_backoff_;        // GPU -> not planned again before this time
  std::map<WorkloadId, std::string> relayout_wait_;  // job -> the re-layout it waits for
  // A job waiting for re-layouts: the ledger entry holding its host CPU/memory on the node
  // meanwhile (0: none), and whether one of its re-layouts failed.
  struct RelayoutHold {
    WorkloadId host = 0;
    bool failed = false;
    std::optional<SliceAssignment> slice;  // LayoutProposal::slice
  };
  std::map<WorkloadId, RelayoutHold> relayout_hold_;
  // Ends the job's wait's host hold (and its entry).
  void DropRelayoutHold(WorkloadId job);
  MigPlanner planner_;
  // "<owner key>\n<recommendation>" -> out-of-memory kills under that recommendation.
  std::map<std::string, int> oom_level_;
  std::set<std::string> oom_seen_;  // "<pod uid>/<container>#<restart>" kills counted
  using OwnerLabels = std::tuple<std::string, std::string, std::string>;  // ns, kind, name
  std::map<OwnerLabels, int64_t> oom_kills_by_owner_, oom_retries_by_owner_;
  std::vector<PodEventAction> deferred_events_;
  // "<owner key>\n<recommendation>" -> admission order (PodEntry::admitted_seq) of the last
  // pod of the owner killed out of memory under that recommendation.
  std::map<std::string, int64_t> oom_killed_seq_;
  // Killed pods evicted to restart at a larger grant ("ns/name" -> OwnerText of their owner),
  // until they are gone or their eviction is refused: the owner's retry waits for their room
  // instead of preempting.
  std::map<std::string, std::string> oom_restarting_;
  int64_t next_admission_seq_ = 0;
  std::unique_ptr<Engine> trial_engine_;  // fit trials of OomPreempt, never allocates
  int64_t next_revision_ = 1;
  WorkloadId next_placeholder_ = WorkloadId{1} << 60;
  PromHistogram latency_{PromHistogram::LatencyBounds()};
};

}  // namespace tessera::kube
