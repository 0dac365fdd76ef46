// Internal to the admission library: the state behind Admission (Admission::Impl) and the
// helpers its translation units share. Included only by src/admission/*.cc.
#pragma once

#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "admission/admission.h"

namespace tessera {

inline constexpr int kDims = 3;

inline std::string Gpu2(int64_t milli) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(milli) / 1000.0);
  return buf;
}

inline int64_t Dim(const Resources& r, int d) {
  return d == 0 ? r.gpu : d == 1 ? r.cpu : r.memory;
}

inline Resources Max0(const Resources& r) {
  return {std::max<int64_t>(0, r.gpu), std::max<int64_t>(0, r.cpu), std::max<int64_t>(0, r.memory)};
}

inline Resources Min(const Resources& a, const Resources& b) {
  return {std::min(a.gpu, b.gpu), std::min(a.cpu, b.cpu), std::min(a.memory, b.memory)};
}

inline const char* DimName(int d) {
  return d == 0 ? "GPU" : d == 1 ? "CPU" : "memory";
}

struct Admission::Impl {
  struct Job {
    JobSpec spec;
    int queue = 0;
    JobState st = JobState::kPending;
    double start = -1;
    // When a cycle admitted it (TryAdmit); adopted jobs keep -inf. A job admitted at the
    // current time is never a preemption victim.
    double admitted_at = -std::numeric_limits<double>::infinity();
    double waiting_since = 0;
    int flavor = -1;  // while running: index into the queue's flavors
    Resources charged;
    std::vector<WorkloadId> pods;  // running pod ids
    std::vector<Placement> placements;
    std::vector<SliceAssignment> slices;  // slice jobs: per running pod
    std::string why;
    PendingReason why_reason = PendingReason::kOther;
    bool timed_out = false;
    bool has_reservation = false;
    int res_flavor = -1;
    Resources res_charge;
    std::vector<uint8_t> reserved;               // nodes held by this job's reservation
    std::vector<NodeIdx> reserved_nodes;         // the same, as a list
    std::vector<MigReconfig> relayouts;          // this cycle: the re-layouts the job waits for
    bool layout_ready = false;                   // SetLayoutReady: tried first in the next cycle
    std::optional<SliceAssignment> ready_slice;  // SetLayoutReady: the slice to try first
  };
  struct QueueState {
    std::vector<Resources> usage;       // per flavor: running + reserved
    std::vector<Resources> reserved;    // per flavor: reserved part
    double decayed[kDims] = {0, 0, 0};  // exponentially averaged usage
    int pending = 0, running = 0;
  };

  Admission* self;
  std::unordered_map<WorkloadId, Job> jobs;
  std::vector<QueueState> qs;
  std::vector<std::set<WorkloadId>> running;  // per queue: running jobs (preemption candidates)
  std::unordered_map<std::string, int> queue_index;
  std::vector<std::vector<int>> cohort_members;  // per queue: queues of its cohort (incl. itself)
  std::vector<double> gpu_eq;                    // per catalog model
  mutable std::unordered_map<ModelMask, double> min_weight;  // MinWeight by model mask
  std::vector<double> weights;         // distinct GPU-equivalent weights, ascending
  std::vector<ModelMask> models_upto;  // per weight: the models weighing no more
  ModelMask all_models = 0;
  // Flavors by name id: flavor_ids[q][f] is the id of queue q's flavor f; flavor_by_id[q][id]
  // is its index in queue q, or -1.
  std::vector<std::vector<int>> flavor_ids;
  std::vector<std::vector<int>> flavor_by_id;
  double last_now = -1;
  double capacity[kDims] = {1, 1, 1};

  // Placement failures seen in the current cycle, for jobs without a reservation. Within a
  // cycle capacity only shrinks (admissions, reservations) until a preemption frees some, so a
  // job asking no less than a failed one, on the same nodes, fails too and is not retried.
  // Cleared at the start of every cycle and after every preemption; not used while preempting.
  struct Failure {
    Demand d;  // flavor-restricted pod demand
    const std::vector<uint8_t>* only = nullptr;
    int pods = 1, need = 1;
    TopologyKind topology = TopologyKind::kNone;
    std::string label;
    std::string job;  // name of the job that failed
    std::string why;
    // No node was refused for CPU or memory (a single pod): the GPU terms alone refused it, so
    // any CPU and memory request fails with GPU terms no easier.
    bool gpu_bound = false;
  };
  static constexpr size_t kMaxFailures = 256;
  std::vector<Failure> failures;
  bool failure_cache = false;  // on while the cycle's ordered pass runs, off while preempting

  // Per cycle: node groups by label value for each topology label key (all nodes), and scratch.
  std::map<std::string, std::vector<std::vector<NodeIdx>>> label_groups;
  std::vector<uint8_t> base_buf, allowed_buf;
  std::vector<NodeIdx> group_buf;

  explicit Impl(Admission* a) : self(a) {}

  const QueueSpec& Q(int q) const { return self->queues_[q]; }

  int64_t EqMilli(GpuModelId m, int64_t milli) const;

  // Smallest GPU-equivalent weight among the models a flavor (and the pod) allow: a quota
  // check with it is a lower bound of the real charge, known once the pods are placed.
  double MinWeight(ModelMask models) const;

  Resources PodCharge(const Demand& d, GpuModelId model) const;

  // A slice pod is charged by the slice it holds (SliceMilli: a 3g.40gb instance 3/7 of a GPU,
  // an MPS client the larger of its threads and its memory limit), not by its request.
  Resources SliceCharge(const ClusterState& state, const Demand& d, const SliceAssignment& s) const;

  Resources EstimateCharge(const JobSpec& j, int pods, ModelMask models) const;

  Resources ChargeAt(const JobSpec& j, int pods, double w) const;

  // The GPU models (within `models`, 0 = any) that j's queue can pay for on flavor f: with
  // models of different GPU-equivalent weights, a placement on a heavier one could exceed the
  // quota that a lighter one fits. Returns `models` itself when no model is excluded. Call
  // only after the quota check with the lightest model passed.
  ModelMask AffordableModels(const Job& j, int f, ModelMask models, int need) const;

  // Index in queue o of the flavor that queue q calls f; -1 if o has no flavor of that name.
  int FlavorIn(int o, int q, int f) const {
    return flavor_by_id[o][static_cast<size_t>(flavor_ids[q][f])];
  }

  // The shape of a placement attempt: what a failure is remembered by.
  struct Shape {
    const Demand& d;
    const std::vector<uint8_t>* only;
    int pods, need;
    TopologyKind topology;
    const std::string& label;
    bool gpu_bound = false;
  };
  static Shape ShapeOf(const Failure& e) {
    return {e.d, e.only, e.pods, e.need, e.topology, e.label, e.gpu_bound};
  }

  // True if every attempt of shape b fails when one of shape a did: the same nodes and either
  // the same gang, or a single pod asking no less on every dimension (FilterNode is monotone),
  // CPU and memory not counting when a's refusals were all for GPU terms.
  static bool Covers(const Shape& a, const Shape& b);

  const Failure* KnownFailure(const Shape& s) const;

  void RememberFailure(const Shape& s, const std::string& job, const std::string& why);

  // Quota check of `r` more for queue q on flavor f. Ok, or the exact reason (an empty
  // message when `explain` is false).
  // Recent quota refusals per queue and flavor with the inputs of their messages; a message is
  // a pure function of them, so an identical refusal reuses it instead of formatting again.
  struct QuotaMemo {
    int kind = -1;  // 0 borrowing limit, 1 quota exhausted
    int dim = 0;
    int64_t asked = 0;
    Resources usage, pool;
    std::string message;
  };
  static constexpr size_t kQuotaMemos = 8;
  struct QuotaMemos {
    std::array<QuotaMemo, kQuotaMemos> slot;
    size_t next = 0;
  };
  mutable std::vector<std::vector<QuotaMemos>> quota_memo;  // per queue, per flavor

  // Quota check of `r` more for queue q on flavor f. Ok, or the exact reason (an empty
  // message when `explain` is false).
  Status QuotaFits(int q, int f, const Resources& r, bool explain = true) const;

  std::string Amount(const Resources& r, int d) const;
  std::string Usage(const Resources& u, const FlavorQuota& fq, int d) const;

  // Capacity the rest of q's cohort can lend on flavor `name`, after what is already borrowed.
  Resources Lendable(int q, int qf) const;

  bool WithinNominal(const Job& j) const;

  // v comes after j in a queue's order among equal priorities: later arrival, then higher id.
  static bool Newer(const JobSpec& v, const JobSpec& j);

  bool Borrowing(int q, int f) const { return !qs[q].usage[f].FitsIn(Q(q).flavors[f].nominal); }

  double Share(int q) const;

  void Decay(double now);

  // Nodes no other job's reservation holds (for `job`), or nullptr when none is held.
  std::vector<uint8_t> free_mask;
  std::vector<GpuMask> frozen_base;  // SetFrozenGpus
  std::vector<GpuMask> frozen;       // this cycle: frozen_base and the GPUs proposed so far
  std::vector<GpuMask> promised;     // this cycle: the GPUs proposed so far
  // This cycle: the re-layout proposed for each promised GPU (node, GPU). Its layout is in the
  // ledger until the cycle ends, so later jobs can wait for the same layout.
  std::map<std::pair<NodeIdx, int>, MigReconfig> promised_plans;
  std::vector<uint8_t> promised_allowed;  // scratch: allowed nodes less promised ones
  bool any_reservation = false;
  std::set<WorkloadId> reserving;  // jobs holding a reservation
  void BuildFreeMask(size_t nodes);

  // Tries to place min_member..pods pods of job j with pod demand `d`; all or nothing.
  // On success the pods are allocated and recorded in j.
  // *gpu_bound (if given) is set when a single pod found no node and no node refused it for CPU
  // or memory. *exhaustive (if given) is cleared when a topology gang was not tried on every
  // group that passed the capacity screen (at most 16 are tried): its failure then says nothing
  // about a cluster with less room.
  bool PlaceGang(ClusterState& state, Job& j, const Demand& d, std::string* why,
                 bool* gpu_bound = nullptr, bool* exhaustive = nullptr);

  // Pods of demand d that fit on a node with free resources f.
  static int64_t PodSlots(const NodeFree& f, const Demand& d);

  // PlaceGang for a job with node layouts (JobSpec::node_layouts).
  bool PlaceLayouts(ClusterState& state, Job& j, const Demand& d, const std::vector<uint8_t>* base,
                    std::string* why);

  void Release(ClusterState& state, Job& j);

  void DropReservation(Job& j);

  // Admits j on flavor f if quota and placement allow. Fills j.why otherwise.
  bool TryAdmit(ClusterState& state, Job& j, int f, double now, bool* placement_failed);

  // Reserves nodes for a blocked gang: the nodes with the most GPU capacity not held by other
  // reservations, until their total capacity covers the gang.
  void Reserve(ClusterState& state, Job& j, int f);

  std::string ReservedNodes(const ClusterState& state, const Job& j) const;

  // Preemption for j on flavor f. Returns true if j was admitted after evicting victims.
  // `placement_failed`: j's placement on f failed in this cycle with the cluster as it is now,
  // so only nodes that victims free can take a single pod.
  bool Preempt(ClusterState& state, Job& j, int f, double now, bool placement_failed,
               CycleResult& out);

  bool PreemptImpl(ClusterState& state, Job& j, int f, double now, bool placement_failed,
                   CycleResult& out);
};

}  // namespace tessera
