#include "admission/admission.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <span>

namespace tessera {

std::string Resources::ToString() const {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.2f GPU-eq, %g CPU, %g GiB", static_cast<double>(gpu) / 1000.0,
                static_cast<double>(cpu) / 1000.0, static_cast<double>(memory) / 1024.0);
  return buf;
}

Status AdmissionConfig::Validate() const {
  if (!(usage_half_life_s >= 0)) return InvalidArgument("usage_half_life_s must be >= 0");
  if (!(min_runtime_s >= 0)) return InvalidArgument("min_runtime_s must be >= 0");
  if (max_preemption_attempts_per_cycle < 0 || max_victims_per_attempt < 1)
    return InvalidArgument("preemption bounds must be >= 0 attempts and >= 1 victim");
  for (const auto& [model, w] : gpu_equivalents) {
    if (!GpuCatalog::Builtin().Find(model))
      return InvalidArgument("gpu_equivalents: unknown GPU model '" + model + "'");
    if (!(w > 0) || w > 1000)
      return InvalidArgument("gpu_equivalents: weight of " + model + " must be in (0, 1000]");
  }
  return Status::Ok();
}

const char* Name(WithinQueuePreemption p) {
  switch (p) {
    case WithinQueuePreemption::kNever:
      return "Never";
    case WithinQueuePreemption::kLowerPriority:
      return "LowerPriority";
    case WithinQueuePreemption::kLowerOrNewerEqualPriority:
      return "LowerOrNewerEqualPriority";
  }
  return "?";
}

const char* Name(ReclaimPreemption p) {
  switch (p) {
    case ReclaimPreemption::kNever:
      return "Never";
    case ReclaimPreemption::kLowerPriority:
      return "LowerPriority";
    case ReclaimPreemption::kAny:
      return "Any";
  }
  return "?";
}

const char* Name(QueueingStrategy s) {
  return s == QueueingStrategy::kStrictFifo ? "StrictFIFO" : "BestEffortFIFO";
}

namespace {

template <typename E>
Result<E> ParseEnum(const std::string& text, std::initializer_list<E> values, const char* what) {
  std::string accepted;
  for (E v : values) {
    if (text == Name(v)) return v;
    accepted += std::string(accepted.empty() ? "" : ", ") + Name(v);
  }
  return InvalidArgument(std::string(what) + ": '" + text + "' is not one of " + accepted);
}

}  // namespace

Result<WithinQueuePreemption> ParseWithinQueuePreemption(const std::string& text) {
  return ParseEnum(text,
                   {WithinQueuePreemption::kNever, WithinQueuePreemption::kLowerPriority,
                    WithinQueuePreemption::kLowerOrNewerEqualPriority},
                   "within-queue preemption");
}

Result<ReclaimPreemption> ParseReclaimPreemption(const std::string& text) {
  return ParseEnum(
      text, {ReclaimPreemption::kNever, ReclaimPreemption::kLowerPriority, ReclaimPreemption::kAny},
      "reclaim within cohort");
}

Result<QueueingStrategy> ParseQueueingStrategy(const std::string& text) {
  return ParseEnum(text, {QueueingStrategy::kBestEffortFifo, QueueingStrategy::kStrictFifo},
                   "queueing strategy");
}

namespace {

constexpr int kDims = 3;

std::string Gpu2(int64_t milli) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(milli) / 1000.0);
  return buf;
}

int64_t Dim(const Resources& r, int d) {
  return d == 0 ? r.gpu : d == 1 ? r.cpu : r.memory;
}

Resources Max0(const Resources& r) {
  return {std::max<int64_t>(0, r.gpu), std::max<int64_t>(0, r.cpu), std::max<int64_t>(0, r.memory)};
}

Resources Min(const Resources& a, const Resources& b) {
  return {std::min(a.gpu, b.gpu), std::min(a.cpu, b.cpu), std::min(a.memory, b.memory)};
}

const char* DimName(int d) {
  return d == 0 ? "GPU" : d == 1 ? "CPU" : "memory";
}

}  // namespace

struct Admission::Impl {
  struct Job {
    JobSpec spec;
    int queue = 0;
    JobState st = JobState::kPending;
    double start = -1;
    double waiting_since = 0;
    int flavor = -1;  // while running: index into the queue's flavors
    Resources charged;
    std::vector<WorkloadId> pods;  // running pod ids
    std::vector<Placement> placements;
    std::vector<SliceAssignment> slices;  // slice jobs: per running pod
    std::string why;
    bool timed_out = false;
    bool has_reservation = false;
    int res_flavor = -1;
    Resources res_charge;
    std::vector<uint8_t> reserved;        // nodes held by this job's reservation
    std::vector<NodeIdx> reserved_nodes;  // the same, as a list
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

  int64_t EqMilli(GpuModelId m, int64_t milli) const {
    const double w = m < gpu_eq.size() ? gpu_eq[m] : 1.0;
    return static_cast<int64_t>(std::llround(static_cast<double>(milli) * w));
  }

  // Smallest GPU-equivalent weight among the models a flavor (and the pod) allow: a quota
  // check with it is a lower bound of the real charge, known once the pods are placed.
  double MinWeight(ModelMask models) const {
    auto it = min_weight.find(models);
    if (it != min_weight.end()) return it->second;
    double w = 0;
    for (size_t m = 0; m < gpu_eq.size(); ++m)
      if (models == 0 || ((models >> m) & 1)) w = w == 0 ? gpu_eq[m] : std::min(w, gpu_eq[m]);
    return min_weight[models] = w > 0 ? w : 1.0;
  }

  Resources PodCharge(const Demand& d, GpuModelId model) const {
    return {d.num_gpu > 0 ? EqMilli(model, d.TotalMilliGpu()) : 0, d.cpu.v, d.memory.v};
  }

  // A slice pod is charged by the slice it holds (SliceMilli: a 3g.40gb instance 3/7 of a GPU,
  // an MPS client the larger of its threads and its memory limit), not by its request.
  Resources SliceCharge(const ClusterState& state, const Demand& d,
                        const SliceAssignment& s) const {
    const int g = std::countr_zero(s.gpus);
    if (s.node >= state.num_nodes() || g >= state.gpu_count(s.node))
      return PodCharge(d, kNoGpuModel);
    const GpuSlices& gpu = state.gpu(s.node, g);
    return {EqMilli(gpu.model, SliceMilli(gpu, s)), d.cpu.v, d.memory.v};
  }

  Resources EstimateCharge(const JobSpec& j, int pods, ModelMask models) const {
    return ChargeAt(j, pods, MinWeight(models));
  }

  Resources ChargeAt(const JobSpec& j, int pods, double w) const {
    const int64_t g =
        static_cast<int64_t>(std::llround(static_cast<double>(j.pod.TotalMilliGpu()) * w));
    return {g * pods, j.pod.cpu.v * pods, j.pod.memory.v * pods};
  }

  // The GPU models (within `models`, 0 = any) that j's queue can pay for on flavor f: with
  // models of different GPU-equivalent weights, a placement on a heavier one could exceed the
  // quota that a lighter one fits. Returns `models` itself when no model is excluded. Call
  // only after the quota check with the lightest model passed.
  ModelMask AffordableModels(const Job& j, int f, ModelMask models, int need) const {
    if (j.spec.pod.num_gpu == 0 || weights.size() < 2) return models;
    const ModelMask allowed = models == 0 ? all_models : models;
    ModelMask ok = 0;
    for (size_t k = 0; k < weights.size(); ++k) {
      const ModelMask upto = allowed & models_upto[k];
      if (upto == ok) continue;
      Resources c = ChargeAt(j.spec, need, weights[k]);
      if (j.has_reservation && j.res_flavor == f) c = Max0(c - j.res_charge);
      if (!QuotaFits(j.queue, f, c, false).ok()) break;
      ok = upto;
    }
    return ok == allowed || ok == 0 ? models : ok;
  }

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
  static bool Covers(const Shape& a, const Shape& b) {
    if (a.only != b.only) return false;
    const bool sa = a.pods == 1 && a.topology == TopologyKind::kNone;
    const bool sb = b.pods == 1 && b.topology == TopologyKind::kNone;
    if (sa != sb) return false;
    if (!sa)
      return a.d == b.d && a.pods == b.pods && a.need == b.need && a.topology == b.topology &&
             a.label == b.label;
    if (b.d.num_gpu < a.d.num_gpu) return false;
    if (!a.gpu_bound && (b.d.cpu.v < a.d.cpu.v || b.d.memory.v < a.d.memory.v)) return false;
    if (a.d.num_gpu == 0) return true;
    if (b.d.gpu_milli < a.d.gpu_milli) return false;
    if (a.d.models == 0) return true;
    return b.d.models != 0 && (b.d.models & ~a.d.models) == 0;
  }

  const Failure* KnownFailure(const Shape& s) const {
    for (const Failure& e : failures)
      if (Covers(ShapeOf(e), s)) return &e;
    return nullptr;
  }

  void RememberFailure(const Shape& s, const std::string& job, const std::string& why) {
    Failure e{s.d, s.only, s.pods, s.need, s.topology, s.label, job, why, s.gpu_bound};
    // Entries the new one covers are redundant.
    std::erase_if(failures, [&](const Failure& old) { return Covers(ShapeOf(e), ShapeOf(old)); });
    if (failures.size() < kMaxFailures) failures.push_back(std::move(e));
  }

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
  Status QuotaFits(int q, int f, const Resources& r, bool explain = true) const {
    const FlavorQuota& fq = Q(q).flavors[f];
    const Resources& u = qs[q].usage[f];
    const Resources after = u + r;
    if (after.FitsIn(fq.nominal)) return Status::Ok();
    const Resources need = Max0(after - fq.nominal);
    auto refuse = [&](int kind, int d, const Resources& pool, auto&& make) {
      QuotaMemos& ms = quota_memo[q][f];
      for (const QuotaMemo& m : ms.slot)
        if (m.kind == kind && m.dim == d && m.asked == Dim(r, d) && m.usage == u && m.pool == pool)
          return ResourceExhausted(m.message);
      QuotaMemo& m = ms.slot[ms.next];
      ms.next = (ms.next + 1) % kQuotaMemos;
      m = {kind, d, Dim(r, d), u, pool, make()};
      return ResourceExhausted(m.message);
    };
    if (fq.borrowing_limit && !after.FitsIn(fq.nominal + *fq.borrowing_limit)) {
      if (!explain) return ResourceExhausted("");
      for (int d = 0; d < kDims; ++d) {
        if (Dim(after, d) > Dim(fq.nominal + *fq.borrowing_limit, d))
          return refuse(0, d, Resources{}, [&] {
            return std::string(DimName(d)) + " borrowing limit of " + fq.name + " in " + Q(q).name +
                   " reached (" + Usage(u, fq, d) + ", " + Amount(r, d) + " asked)";
          });
      }
    }
    const Resources pool = Lendable(q, f);
    for (int d = 0; d < kDims; ++d) {
      if (Dim(need, d) > Dim(pool, d)) {
        if (!explain) return ResourceExhausted("");
        return refuse(1, d, pool, [&] {
          if (Q(q).cohort.empty())
            return "quota of " + fq.name + " in " + Q(q).name + " exhausted (" + Usage(u, fq, d) +
                   ", " + Amount(r, d) + " asked; no cohort to borrow from)";
          return "quota of " + fq.name + " in " + Q(q).name + " exhausted (" + Usage(u, fq, d) +
                 ", " + Amount(r, d) + " asked; cohort " + Q(q).cohort + " lends " +
                 Amount(pool, d) + ", " + Amount(Max0(pool - Max0(u - fq.nominal)), d) +
                 " of it left)";
        });
      }
    }
    return Status::Ok();
  }

  std::string Amount(const Resources& r, int d) const {
    if (d == 0) return Gpu2(r.gpu) + " GPU-eq";
    if (d == 1) return Gpu2(r.cpu) + " CPU";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(r.memory) / 1024.0);
    return buf;
  }
  std::string Usage(const Resources& u, const FlavorQuota& fq, int d) const {
    return Amount(u, d) + " used of " + Amount(fq.nominal, d);
  }

  // Capacity the rest of q's cohort can lend on flavor `name`, after what is already borrowed.
  Resources Lendable(int q, int qf) const {
    Resources lend, borrowed;
    for (int o : cohort_members[q]) {
      const int f = FlavorIn(o, q, qf);
      if (f < 0) continue;
      const FlavorQuota& fq = Q(o).flavors[f];
      const Resources& u = qs[o].usage[f];
      const Resources own = Min(u, fq.nominal);
      if (o == q) continue;
      borrowed += Max0(u - fq.nominal);
      Resources cap = Max0(fq.nominal - own);
      if (fq.lending_limit) cap = Min(cap, *fq.lending_limit);
      lend += cap;
    }
    return Max0(lend - borrowed);
  }

  bool WithinNominal(const Job& j) const {
    const int need = j.spec.min_member > 0 ? j.spec.min_member : j.spec.pods;
    for (size_t f = 0; f < Q(j.queue).flavors.size(); ++f) {
      const FlavorQuota& fq = Q(j.queue).flavors[f];
      const Resources est = EstimateCharge(j.spec, need, fq.models);
      if ((qs[j.queue].usage[f] + est).FitsIn(fq.nominal)) return true;
    }
    return false;
  }

  // v comes after j in a queue's order among equal priorities: later arrival, then higher id.
  static bool Newer(const JobSpec& v, const JobSpec& j) {
    return v.arrival != j.arrival ? v.arrival > j.arrival : v.id > j.id;
  }

  bool Borrowing(int q, int f) const { return !qs[q].usage[f].FitsIn(Q(q).flavors[f].nominal); }

  double Share(int q) const {
    const QueueState& s = qs[q];
    Resources u;
    for (const auto& x : s.usage) u += x;
    const double w = Q(q).weight;
    double share = 0;
    const double cur[kDims] = {static_cast<double>(u.gpu), static_cast<double>(u.cpu),
                               static_cast<double>(u.memory)};
    const bool decay = self->config_.usage_half_life_s > 0;
    for (int d = 0; d < kDims; ++d) {
      const double v = decay ? 0.5 * s.decayed[d] + 0.5 * cur[d] : cur[d];
      share = std::max(share, v / (w * capacity[d]));
    }
    return share;
  }

  void Decay(double now) {
    if (last_now < 0) {
      last_now = now;
      return;
    }
    const double dt = now - last_now;
    last_now = now;
    const double h = self->config_.usage_half_life_s;
    if (h <= 0 || dt <= 0) return;
    const double keep = std::exp2(-dt / h);
    for (auto& s : qs) {
      Resources u;
      for (const auto& x : s.usage) u += x;
      const double cur[kDims] = {static_cast<double>(u.gpu), static_cast<double>(u.cpu),
                                 static_cast<double>(u.memory)};
      for (int d = 0; d < kDims; ++d) s.decayed[d] = keep * s.decayed[d] + (1 - keep) * cur[d];
    }
  }

  // Nodes no other job's reservation holds (for `job`), or nullptr when none is held.
  std::vector<uint8_t> free_mask;
  bool any_reservation = false;
  std::set<WorkloadId> reserving;  // jobs holding a reservation
  void BuildFreeMask(size_t nodes) {
    free_mask.assign(nodes, 1);
    any_reservation = false;
    for (WorkloadId id : reserving) {
      const Job& j = jobs.at(id);
      any_reservation = true;
      for (NodeIdx n : j.reserved_nodes)
        if (n < nodes) free_mask[n] = 0;
    }
  }

  // Tries to place min_member..pods pods of job j with pod demand `d`; all or nothing.
  // On success the pods are allocated and recorded in j.
  // *gpu_bound (if given) is set when a single pod found no node and no node refused it for CPU
  // or memory. *exhaustive (if given) is cleared when a topology gang was not tried on every
  // group that passed the capacity screen (at most 16 are tried): its failure then says nothing
  // about a cluster with less room.
  bool PlaceGang(ClusterState& state, Job& j, const Demand& d, std::string* why,
                 bool* gpu_bound = nullptr, bool* exhaustive = nullptr) {
    const int want = j.spec.pods;
    const int need = j.spec.min_member > 0 ? j.spec.min_member : want;
    const size_t nodes = state.num_nodes();
    // Allowed nodes: not reserved by another job (backfill), plus the job's own reservation.
    const auto* only = j.spec.allowed_nodes.get();
    const std::vector<uint8_t>* base = nullptr;  // null: every node
    if (!j.has_reservation && !only) {
      if (any_reservation) base = &free_mask;
    } else {
      if (any_reservation) {
        base_buf = free_mask;
      } else {
        base_buf.assign(nodes, 1);
      }
      for (NodeIdx n : j.reserved_nodes)
        if (n < nodes) base_buf[n] = 1;
      if (only)
        for (size_t n = 0; n < nodes; ++n) base_buf[n] &= n < only->size() && (*only)[n] ? 1 : 0;
      base = &base_buf;
    }
    auto allowed_node = [&](NodeIdx n) { return !base || (*base)[n]; };
    auto attempt = [&](const std::vector<uint8_t>* allowed, std::string* reason) {
      std::vector<WorkloadId> ids;
      std::vector<Placement> places;
      std::vector<SliceAssignment> slices;
      std::optional<SliceDemand> sd = j.spec.slice;
      if (sd) sd->models = d.models;
      for (int i = 0; i < want; ++i) {
        const WorkloadId pid = j.spec.id * kPodsPerJob + static_cast<WorkloadId>(i);
        Decision dec = sd ? self->engine_.DecideSlice(state, pid, *sd, allowed)
                          : self->engine_.Decide(state, pid, d, allowed);
        if (!dec.placed) {
          if (reason && static_cast<int>(ids.size()) < need) *reason = dec.WhyNotPlaced();
          if (gpu_bound && want == 1 && d.num_gpu > 0 && !sd)
            *gpu_bound = dec.reasons.cpu == 0 && dec.reasons.memory == 0;
          break;
        }
        const Status st =
            sd ? state.Allocate(pid, *sd, dec.slice) : state.Allocate(pid, d, dec.placement);
        if (!st.ok()) break;
        ids.push_back(pid);
        places.push_back(dec.placement);
        if (sd) slices.push_back(dec.slice);
      }
      if (static_cast<int>(ids.size()) < need) {
        for (auto it = ids.rbegin(); it != ids.rend(); ++it) (void)state.Release(*it);
        if (reason && need > 1)
          *reason = "gang placed " + std::to_string(ids.size()) + " of " + std::to_string(need) +
                    " pods (" + *reason + ")";
        return false;
      }
      j.pods = std::move(ids);
      j.placements = std::move(places);
      j.slices = std::move(slices);
      return true;
    };
    if (j.spec.node_layouts && !j.spec.node_layouts->empty())
      return PlaceLayouts(state, j, d, base, why);
    if (j.spec.topology == TopologyKind::kNone) return attempt(base, why);
    // Topology groups (same node, or same label value) as spans into group_buf.
    group_buf.clear();
    std::vector<std::pair<size_t, size_t>> groups;  // offset, length
    if (j.spec.topology == TopologyKind::kSameNode) {
      for (NodeIdx n = 0; n < nodes; ++n) {
        if (!allowed_node(n)) continue;
        groups.push_back({group_buf.size(), 1});
        group_buf.push_back(n);
      }
    } else {
      auto it = label_groups.find(j.spec.topology_label);
      if (it == label_groups.end()) {
        std::map<std::string, std::vector<NodeIdx>> by;
        for (NodeIdx n = 0; n < nodes; ++n) {
          auto l = state.spec(n).labels.find(j.spec.topology_label);
          if (l != state.spec(n).labels.end()) by[l->second].push_back(n);
        }
        std::vector<std::vector<NodeIdx>> all;
        for (auto& [v, ns] : by) all.push_back(std::move(ns));
        it = label_groups.emplace(j.spec.topology_label, std::move(all)).first;
      }
      for (const auto& ns : it->second) {
        const size_t off = group_buf.size();
        for (NodeIdx n : ns)
          if (allowed_node(n)) group_buf.push_back(n);
        if (group_buf.size() > off) groups.push_back({off, group_buf.size() - off});
      }
    }
    auto members = [&](size_t g) {
      return std::span<const NodeIdx>(group_buf.data() + groups[g].first, groups[g].second);
    };
    if (groups.empty()) {
      *why = j.spec.topology == TopologyKind::kSameLabel
                 ? "no node carries label " + j.spec.topology_label
                 : "no node available";
      return false;
    }
    // Cheap capacity screen, then try groups with the most free GPU first.
    std::vector<std::pair<int64_t, size_t>> order;
    for (size_t g = 0; g < groups.size(); ++g) {
      int64_t slots = 0, cpu = 0, mem = 0;
      for (NodeIdx n : members(g)) {
        const NodeFree& f = state.free(n);
        cpu += f.cpu;
        mem += f.memory;
        if (d.num_gpu == 0) continue;
        if (!d.AllowsModel(f.model)) continue;
        int per = 0;
        if (d.gpu_milli >= 1000) {
          for (int k = 0; k < f.gpu_count; ++k) per += f.gpu[k] >= d.gpu_milli;
        } else if (d.gpu_milli > 0) {
          for (int k = 0; k < f.gpu_count; ++k) per += f.gpu[k] / d.gpu_milli;
        }
        slots += d.num_gpu == 1 ? per : per / d.num_gpu;
      }
      const bool fits =
          cpu >= d.cpu.v * need && mem >= d.memory.v * need && (d.num_gpu == 0 || slots >= need);
      if (fits) order.push_back({-slots, g});
    }
    std::sort(order.begin(), order.end());
    if (order.empty()) {
      *why = "gang of " + std::to_string(need) + " finds no " +
             (j.spec.topology == TopologyKind::kSameNode
                  ? std::string("single node")
                  : "group with label " + j.spec.topology_label) +
             " with room for all of it";
      return false;
    }
    const size_t tries = std::min<size_t>(order.size(), 16);
    if (exhaustive && tries < order.size()) *exhaustive = false;
    allowed_buf.assign(nodes, 0);
    for (size_t t = 0; t < tries; ++t) {
      for (NodeIdx n : members(order[t].second)) allowed_buf[n] = 1;
      const bool ok = attempt(&allowed_buf, why);
      for (NodeIdx n : members(order[t].second)) allowed_buf[n] = 0;
      if (ok) return true;
    }
    return false;
  }

  // Pods of demand d that fit on a node with free resources f.
  static int64_t PodSlots(const NodeFree& f, const Demand& d) {
    if (FilterNode(f, d) != FilterVerdict::kFits) return 0;
    int64_t slots = std::numeric_limits<int64_t>::max();
    if (d.cpu.v > 0) slots = std::min(slots, f.cpu / d.cpu.v);
    if (d.memory.v > 0) slots = std::min(slots, f.memory / d.memory.v);
    if (d.num_gpu > 0) {
      int64_t per = 0;
      for (int g = 0; g < f.gpu_count; ++g)
        per += d.gpu_milli >= 1000 ? (f.gpu[g] >= 1000 ? 1 : 0) : f.gpu[g] / d.gpu_milli;
      slots = std::min(slots, per / d.num_gpu);
    }
    return slots;
  }

  // PlaceGang for a job with node layouts (JobSpec::node_layouts).
  bool PlaceLayouts(ClusterState& state, Job& j, const Demand& d, const std::vector<uint8_t>* base,
                    std::string* why) {
    const size_t nodes = state.num_nodes();
    std::vector<int64_t> slots(nodes, 0);
    for (NodeIdx n = 0; n < nodes; ++n)
      if (!base || (*base)[n]) slots[n] = PodSlots(state.free(n), d);
    std::vector<uint8_t> used(nodes, 0);
    // Nodes tied for the tightest fit of a part: unused, holding it, with the fewest slots.
    auto tightest = [&](int part, std::vector<uint8_t>* mask) {
      int64_t best = -1;
      for (NodeIdx n = 0; n < nodes; ++n)
        if (!used[n] && slots[n] >= part && (best < 0 || slots[n] < best)) best = slots[n];
      if (best < 0) return false;
      if (mask) {
        mask->assign(nodes, 0);
        for (NodeIdx n = 0; n < nodes; ++n) (*mask)[n] = !used[n] && slots[n] == best;
      }
      return true;
    };
    for (const std::vector<int>& layout : *j.spec.node_layouts) {
      std::fill(used.begin(), used.end(), 0);
      bool fits = true;
      for (int part : layout) {
        if (!tightest(part, &allowed_buf)) {
          fits = false;
          break;
        }
        for (NodeIdx n = 0; n < nodes; ++n)
          if (allowed_buf[n]) {
            used[n] = 1;
            break;
          }
      }
      if (!fits) continue;
      std::fill(used.begin(), used.end(), 0);
      std::vector<WorkloadId> ids;
      std::vector<Placement> places;
      bool ok = true;
      for (size_t k = 0; k < layout.size() && ok; ++k) {
        ok = tightest(layout[k], &allowed_buf);
        for (int i = 0; ok && i < layout[k]; ++i) {
          const WorkloadId pid = j.spec.id * kPodsPerJob + static_cast<WorkloadId>(ids.size());
          const Decision dec = self->engine_.Decide(state, pid, d, &allowed_buf);
          ok = dec.placed && state.Allocate(pid, d, dec.placement).ok();
          if (!ok) break;
          ids.push_back(pid);
          places.push_back(dec.placement);
          if (i == 0) {
            used[dec.placement.node] = 1;
            std::fill(allowed_buf.begin(), allowed_buf.end(), 0);
            allowed_buf[dec.placement.node] = 1;
          }
        }
      }
      if (ok) {
        j.pods = std::move(ids);
        j.placements = std::move(places);
        j.slices.clear();
        return true;
      }
      for (auto it = ids.rbegin(); it != ids.rend(); ++it) (void)state.Release(*it);
    }
    if (why)
      *why = "none of its " + std::to_string(j.spec.node_layouts->size()) +
             " node layouts fits the free nodes";
    return false;
  }

  void Release(ClusterState& state, Job& j) {
    running[j.queue].erase(j.spec.id);
    for (auto it = j.pods.rbegin(); it != j.pods.rend(); ++it) (void)state.Release(*it);
    j.pods.clear();
    j.placements.clear();
    j.slices.clear();
    qs[j.queue].usage[j.flavor] -= j.charged;
    --qs[j.queue].running;
    j.charged = {};
    j.flavor = -1;
  }

  void DropReservation(Job& j) {
    if (!j.has_reservation) return;
    qs[j.queue].usage[j.res_flavor] -= j.res_charge;
    qs[j.queue].reserved[j.res_flavor] -= j.res_charge;
    j.has_reservation = false;
    reserving.erase(j.spec.id);
    j.reserved.clear();
    j.reserved_nodes.clear();
    j.res_charge = {};
    j.res_flavor = -1;
  }

  // Admits j on flavor f if quota and placement allow. Fills j.why otherwise.
  bool TryAdmit(ClusterState& state, Job& j, int f, double now, bool* placement_failed) {
    const FlavorQuota& fq = Q(j.queue).flavors[f];
    Demand d = j.spec.pod;
    if (d.num_gpu > 0 && fq.models != 0) {
      d.models = d.models == 0 ? fq.models : (d.models & fq.models);
      if (d.models == 0) {
        j.why = "flavor " + fq.name + " has none of the GPU models the job allows";
        return false;
      }
    }
    const int need = j.spec.min_member > 0 ? j.spec.min_member : j.spec.pods;
    // A reservation's charge is already in usage: check only the remainder.
    Resources est = EstimateCharge(j.spec, need, d.models);
    if (j.has_reservation && j.res_flavor == f) est = Max0(est - j.res_charge);
    Status q = QuotaFits(j.queue, f, est);
    if (!q.ok()) {
      j.why = q.message();
      return false;
    }
    d.models = AffordableModels(j, f, d.models, need);
    // A single pod's failure covers every node it could use; a reservation only adds the
    // job's own nodes to the unreserved ones, so a reserved single pod uses the failures too.
    const bool single = j.spec.pods == 1 && j.spec.topology == TopologyKind::kNone;
    const bool cached =
        failure_cache && !j.spec.slice && !j.spec.node_layouts && (!j.has_reservation || single);
    Shape shape{
        d, j.spec.allowed_nodes.get(), j.spec.pods, need, j.spec.topology, j.spec.topology_label};
    if (cached) {
      if (const Failure* e = KnownFailure(shape)) {
        const auto* only = j.spec.allowed_nodes.get();
        bool own = false;
        for (NodeIdx n : j.reserved_nodes)
          own |= (!only || (n < only->size() && (*only)[n])) &&
                 FilterNode(state.free(n), d) == FilterVerdict::kFits;
        if (!own) {
          *placement_failed = true;
          j.why = std::string("no placement: ") +
                  (j.has_reservation ? "none of its reserved nodes fits; elsewhere " : "") +
                  e->why + " (found this cycle for " + e->job + ", which asks no more)";
          return false;
        }
      }
    }
    std::string why;
    bool exhaustive = true;
    if (!PlaceGang(state, j, d, &why, &shape.gpu_bound, &exhaustive)) {
      *placement_failed = true;
      j.why = "no placement: " + why;
      if (cached && exhaustive) RememberFailure(shape, j.spec.name, why);
      return false;
    }
    Resources charge;
    for (size_t i = 0; i < j.pods.size(); ++i)
      charge += j.spec.slice && i < j.slices.size()
                    ? SliceCharge(state, d, j.slices[i])
                    : PodCharge(d, state.free(j.placements[i].node).model);
    Resources exact = charge;
    if (j.has_reservation && j.res_flavor == f) exact = Max0(exact - j.res_charge);
    Status exact_fit = QuotaFits(j.queue, f, exact);
    if (!exact_fit.ok()) {
      for (auto it = j.pods.rbegin(); it != j.pods.rend(); ++it) (void)state.Release(*it);
      j.pods.clear();
      j.placements.clear();
      j.slices.clear();
      j.why = exact_fit.message();
      return false;
    }
    DropReservation(j);
    j.flavor = f;
    j.charged = charge;
    j.st = JobState::kRunning;
    running[j.queue].insert(j.spec.id);
    j.start = now;
    j.why.clear();
    j.timed_out = false;
    qs[j.queue].usage[f] += charge;
    --qs[j.queue].pending;
    ++qs[j.queue].running;
    return true;
  }

  // Reserves nodes for a blocked gang: the nodes with the most GPU capacity not held by other
  // reservations, until their total capacity covers the gang.
  void Reserve(ClusterState& state, Job& j, int f) {
    const Demand& d = j.spec.pod;
    const FlavorQuota& fq = Q(j.queue).flavors[f];
    const int need = j.spec.min_member > 0 ? j.spec.min_member : j.spec.pods;
    ModelMask models = d.models;
    if (fq.models != 0) models = models == 0 ? fq.models : (models & fq.models);
    std::vector<std::pair<int64_t, NodeIdx>> cand;
    const auto* only = j.spec.allowed_nodes.get();
    for (NodeIdx n = 0; n < state.num_nodes(); ++n) {
      if (!free_mask.empty() && !free_mask[n]) continue;
      if (only && (n >= only->size() || !(*only)[n])) continue;
      const NodeSpec& s = state.spec(n);
      if (d.num_gpu > 0 && (s.gpu_count < d.num_gpu || (models != 0 && !((models >> s.model) & 1))))
        continue;
      if (s.cpu.v < d.cpu.v || s.memory.v < d.memory.v) continue;
      const NodeFree& fr = state.free(n);
      cand.push_back({-(static_cast<int64_t>(fr.gpu_total) * 4 + s.gpu_count), n});
    }
    std::sort(cand.begin(), cand.end());
    int64_t slots = 0;
    std::vector<uint8_t> mask(state.num_nodes(), 0);
    for (const auto& [key, n] : cand) {
      if (slots >= need) break;
      const NodeSpec& s = state.spec(n);
      const int64_t by_gpu =
          d.num_gpu > 0 ? (s.gpu_count * (1000 / std::max(1, d.gpu_milli))) / d.num_gpu : need;
      const int64_t by_cpu = d.cpu.v > 0 ? s.cpu.v / d.cpu.v : need;
      slots += std::min(by_gpu, by_cpu);
      mask[n] = 1;
      if (j.spec.topology == TopologyKind::kSameNode) {
        if (slots >= need) break;
        slots = 0;
        std::fill(mask.begin(), mask.end(), 0);
      }
    }
    if (slots < need) return;
    const Resources charge = EstimateCharge(j.spec, need, models);
    if (!QuotaFits(j.queue, f, charge).ok()) return;
    j.has_reservation = true;
    reserving.insert(j.spec.id);
    j.reserved = std::move(mask);
    j.reserved_nodes.clear();
    for (NodeIdx n = 0; n < j.reserved.size(); ++n)
      if (j.reserved[n]) j.reserved_nodes.push_back(n);
    j.res_flavor = f;
    j.res_charge = charge;
    qs[j.queue].usage[f] += charge;
    qs[j.queue].reserved[f] += charge;
    for (NodeIdx n : j.reserved_nodes) free_mask[n] = 0;
    any_reservation = true;
  }

  std::string ReservedNodes(const ClusterState& state, const Job& j) const {
    std::string out;
    int shown = 0, total = 0;
    for (NodeIdx n : j.reserved_nodes) {
      ++total;
      if (shown++ < 4) out += (out.empty() ? "" : ",") + state.spec(static_cast<NodeIdx>(n)).name;
    }
    if (total > 4) out += ",... (" + std::to_string(total) + " nodes)";
    return out;
  }

  // Preemption for j on flavor f. Returns true if j was admitted after evicting victims.
  // `placement_failed`: j's placement on f failed in this cycle with the cluster as it is now,
  // so only nodes that victims free can take a single pod.
  bool Preempt(ClusterState& state, Job& j, int f, double now, bool placement_failed,
               CycleResult& out) {
    const bool cache = failure_cache;
    failure_cache = false;
    const bool admitted = PreemptImpl(state, j, f, now, placement_failed, out);
    failure_cache = cache;
    if (admitted) failures.clear();  // capacity was freed
    return admitted;
  }

  bool PreemptImpl(ClusterState& state, Job& j, int f, double now, bool placement_failed,
                   CycleResult& out) {
    const QueueSpec& qspec = Q(j.queue);
    const int need = j.spec.min_member > 0 ? j.spec.min_member : j.spec.pods;
    const Resources est = EstimateCharge(j.spec, need, j.spec.pod.models);
    // Reclaim only when the job keeps its queue within nominal quota.
    const bool within_nominal = (qs[j.queue].usage[f] + est).FitsIn(qspec.flavors[f].nominal);
    struct Cand {
      WorkloadId id;
      const Job* job;
      double lost;  // GPU-seconds of progress lost
      int priority;
      double start;
      bool reclaim;
    };
    std::vector<Cand> cands;
    // Only two kinds of victims exist: jobs of the same queue below j in its order, and jobs of
    // borrowing queues of the cohort (reclaim). Look only there.
    std::vector<int> where;
    if (qspec.within_queue != WithinQueuePreemption::kNever) where.push_back(j.queue);
    if (qspec.reclaim != ReclaimPreemption::kNever && within_nominal && !qspec.cohort.empty()) {
      for (int o : cohort_members[j.queue]) {
        if (o == j.queue) continue;
        const int vf = FlavorIn(o, j.queue, f);
        if (vf >= 0 && Borrowing(o, vf)) where.push_back(o);
      }
    }
    for (int q : where) {
      for (WorkloadId id : running[q]) {
        const Job& v = jobs.at(id);
        if (id == j.spec.id || !v.spec.preemptible) continue;
        if (now - v.start < self->config_.min_runtime_s) continue;
        bool ok = false, reclaim = false;
        if (v.queue == j.queue) {
          ok = qspec.within_queue != WithinQueuePreemption::kNever &&
               (v.spec.priority < j.spec.priority ||
                (qspec.within_queue == WithinQueuePreemption::kLowerOrNewerEqualPriority &&
                 v.spec.priority == j.spec.priority && Newer(v.spec, j.spec)));
        } else {
          const int vf = FlavorIn(v.queue, j.queue, f);
          if (vf >= 0 && vf == v.flavor &&
              (qspec.reclaim == ReclaimPreemption::kAny || v.spec.priority < j.spec.priority))
            ok = reclaim = true;
        }
        if (!ok) continue;
        const double gpus = static_cast<double>(v.spec.pod.TotalMilliGpu()) / 1000.0 *
                            static_cast<double>(v.pods.size());
        cands.push_back({id, &v, gpus * (now - v.start), v.spec.priority, v.start, reclaim});
      }
    }
    if (cands.empty()) return false;
    auto cheaper = [](const Cand& a, const Cand& b) {
      if (a.lost != b.lost) return a.lost < b.lost;
      if (a.priority != b.priority) return a.priority < b.priority;
      if (a.start != b.start) return a.start > b.start;
      return a.id < b.id;
    };
    const size_t limit = static_cast<size_t>(self->config_.max_victims_per_attempt);
    if (cands.size() > limit) {
      std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(limit),
                        cands.end(), cheaper);
      cands.resize(limit);
    } else {
      std::sort(cands.begin(), cands.end(), cheaper);
    }
    // Necessary conditions for fits(), cheap to check: the quota check TryAdmit starts with,
    // and, for a single pod that found no node before, a node freed by a victim that now fits.
    Demand fd = j.spec.pod;
    const FlavorQuota& ffq = qspec.flavors[f];
    if (fd.num_gpu > 0 && ffq.models != 0) {
      fd.models = fd.models == 0 ? ffq.models : (fd.models & ffq.models);
      if (fd.models == 0) return false;  // TryAdmit refuses this flavor
    }
    Resources est_rest = EstimateCharge(j.spec, need, fd.models);
    if (j.has_reservation && j.res_flavor == f) est_rest = Max0(est_rest - j.res_charge);
    // The free-capacity screens below read NodeFree, which does not describe slice room.
    const bool single_pod =
        j.spec.pods == 1 && j.spec.topology == TopologyKind::kNone && !j.spec.slice;
    const auto* only = j.spec.allowed_nodes.get();
    auto node_allowed = [&](NodeIdx n) {
      return (!any_reservation || free_mask[n] ||
              (j.has_reservation && n < j.reserved.size() && j.reserved[n])) &&
             (!only || (n < only->size() && (*only)[n]));
    };
    // Whether the allowed nodes have at least the milli-GPUs j asks for (a necessary condition
    // of any placement), now or, with `with_candidates`, once every candidate is evicted.
    auto gpu_room_left = [&](bool with_candidates) {
      if (j.spec.slice || fd.num_gpu == 0) return true;
      int64_t room = 0;
      for (NodeIdx n = 0; n < state.num_nodes(); ++n)
        if (node_allowed(n) && fd.AllowsModel(state.free(n).model)) room += state.free(n).gpu_total;
      if (with_candidates)
        for (const Cand& c : cands)
          for (const Placement& p : c.job->placements)
            if (node_allowed(p.node) && fd.AllowsModel(state.free(p.node).model))
              room += c.job->spec.slice ? 1000LL * std::popcount(p.gpus)  // may idle the GPU
                                        : c.job->spec.pod.TotalMilliGpu();
      return room >= static_cast<int64_t>(need) * fd.TotalMilliGpu();
    };
    // A hopeless attempt ends here, before anything is evicted: with every candidate gone the
    // quota check still refuses j, the allowed nodes lack the milli-GPUs j asks for, or (a
    // single pod that found no node) no freed node fits it.
    {
      for (const Cand& c : cands) {
        const Job& v = *c.job;
        qs[v.queue].usage[v.flavor] -= v.charged;
      }
      const bool quota_ok = QuotaFits(j.queue, f, est_rest, false).ok();
      for (const Cand& c : cands) {
        const Job& v = *c.job;
        qs[v.queue].usage[v.flavor] += v.charged;
      }
      if (!quota_ok) return false;
      if (!gpu_room_left(true)) return false;
      if (placement_failed && single_pod) {
        std::vector<std::pair<NodeIdx, NodeFree>> freed;
        for (const Cand& c : cands) {
          const Job& v = *c.job;
          for (const Placement& p : v.placements) {
            auto it = std::find_if(freed.begin(), freed.end(),
                                   [&](const auto& x) { return x.first == p.node; });
            if (it == freed.end()) {
              freed.push_back({p.node, state.free(p.node)});
              it = freed.end() - 1;
            }
            NodeFree& nf = it->second;
            nf.cpu += v.spec.pod.cpu.v;
            nf.memory += v.spec.pod.memory.v;
            for (int g = 0; g < nf.gpu_count; ++g)
              if ((p.gpus >> g) & 1)
                nf.gpu[g] = static_cast<int16_t>(nf.gpu[g] + v.spec.pod.gpu_milli);
          }
        }
        bool any = false;
        for (const auto& [n, nf] : freed)
          any |= node_allowed(n) && FilterNode(nf, fd) == FilterVerdict::kFits;
        if (!any) return false;
      }
    }
    // Greedy: evict until j fits, then put back the victims it does not need (reverse order).
    struct Saved {
      WorkloadId id;
      std::vector<WorkloadId> pods;
      std::vector<Placement> places;
      std::vector<SliceAssignment> slices;
      int flavor;
      Resources charged;
    };
    std::vector<Saved> taken;
    auto evict = [&](WorkloadId id) {
      Job& v = jobs.at(id);
      taken.push_back({id, v.pods, v.placements, v.slices, v.flavor, v.charged});
      Release(state, v);
    };
    auto restore = [&](const Saved& s) {
      Job& v = jobs.at(s.id);
      Demand d = v.spec.pod;
      for (size_t i = 0; i < s.pods.size(); ++i) {
        Demand pd = d;
        pd.models = 0;
        if (v.spec.slice && i < s.slices.size()) {
          SliceDemand sd = *v.spec.slice;
          sd.models = 0;
          (void)state.Allocate(s.pods[i], sd, s.slices[i]);
        } else {
          (void)state.Allocate(s.pods[i], pd, s.places[i]);
        }
      }
      v.pods = s.pods;
      v.placements = s.places;
      v.slices = s.slices;
      v.flavor = s.flavor;
      v.charged = s.charged;
      qs[v.queue].usage[s.flavor] += s.charged;
      ++qs[v.queue].running;
      running[v.queue].insert(s.id);
    };
    auto could_fit = [&]() {
      if (!QuotaFits(j.queue, f, est_rest, false).ok()) return false;
      if (!gpu_room_left(false)) return false;
      if (!placement_failed || !single_pod) return true;
      for (const auto& t : taken)
        for (const Placement& p : t.places)
          if (node_allowed(p.node) && FilterNode(state.free(p.node), fd) == FilterVerdict::kFits)
            return true;
      return false;
    };
    auto fits = [&]() {
      if (!could_fit()) return false;
      bool pf = false;
      Job probe = j;
      const QueueState saved = qs[j.queue];
      if (!TryAdmit(state, probe, f, now, &pf)) return false;
      for (auto it = probe.pods.rbegin(); it != probe.pods.rend(); ++it) (void)state.Release(*it);
      qs[j.queue] = saved;
      running[j.queue].erase(j.spec.id);
      return true;
    };
    size_t k = 0;
    bool ok = false;
    for (; k < cands.size(); ++k) {
      evict(cands[k].id);
      if (fits()) {
        ok = true;
        break;
      }
    }
    if (!ok) {
      for (auto it = taken.rbegin(); it != taken.rend(); ++it) restore(*it);
      return false;
    }
    // Drop victims that are not needed, latest first (the last one is needed by construction).
    std::vector<Saved> victims;
    victims.push_back(taken.back());
    for (int i = static_cast<int>(taken.size()) - 2; i >= 0; --i) {
      restore(taken[i]);
      if (fits()) continue;  // not needed
      Job& v = jobs.at(taken[i].id);
      Release(state, v);
      victims.push_back(taken[i]);
    }
    bool pf = false;
    if (!TryAdmit(state, j, f, now, &pf)) {
      for (auto it = victims.rbegin(); it != victims.rend(); ++it) restore(*it);
      return false;
    }
    for (const Saved& s : victims) {
      Job& v = jobs.at(s.id);
      v.st = JobState::kPending;
      v.start = -1;
      v.waiting_since = now;
      ++qs[v.queue].pending;
      const bool reclaim =
          v.queue != j.queue;  // within-queue preemption needs a strictly higher priority
      v.why = reclaim ? "preempted: " + Q(j.queue).name + " reclaimed its lent quota of " +
                            Q(j.queue).flavors[f].name + " for " + j.spec.name
              : v.spec.priority < j.spec.priority
                  ? "preempted by " + j.spec.name + " (priority " +
                        std::to_string(j.spec.priority) + " > " + std::to_string(v.spec.priority) +
                        ")"
                  : "preempted by " + j.spec.name + " (same priority " +
                        std::to_string(j.spec.priority) + ", arrived earlier)";
      out.preempted.push_back({s.id, j.spec.id, v.why});
    }
    return true;
  }
};

Admission::Admission(std::vector<QueueSpec> queues, AdmissionConfig config,
                     std::unique_ptr<Scorer> scorer, uint64_t seed)
    : queues_(std::move(queues)),
      config_(std::move(config)),
      engine_(std::move(scorer), seed),
      impl_(std::make_shared<Impl>(this)) {}

Result<std::unique_ptr<Admission>> Admission::Create(std::vector<QueueSpec> queues,
                                                     AdmissionConfig config,
                                                     std::unique_ptr<Scorer> scorer,
                                                     uint64_t seed) {
  TESSERA_RETURN_IF_ERROR(config.Validate());
  if (!scorer) return InvalidArgument("admission needs a placement policy");
  if (queues.empty()) return InvalidArgument("no queues");
  std::set<std::string> names;
  for (const auto& q : queues) {
    if (q.name.empty()) return InvalidArgument("a queue has no name");
    if (!names.insert(q.name).second) return InvalidArgument("duplicate queue '" + q.name + "'");
    if (!(q.weight > 0)) return InvalidArgument("queue '" + q.name + "': weight must be > 0");
    if (q.flavors.empty()) return InvalidArgument("queue '" + q.name + "' has no flavor");
    std::set<std::string> fl;
    for (const auto& f : q.flavors) {
      const std::string where = "queue '" + q.name + "' flavor '" + f.name + "'";
      if (f.name.empty()) return InvalidArgument("queue '" + q.name + "': a flavor has no name");
      if (!fl.insert(f.name).second) return InvalidArgument(where + " listed twice");
      auto neg = [](const Resources& r) { return r.gpu < 0 || r.cpu < 0 || r.memory < 0; };
      if (neg(f.nominal)) return InvalidArgument(where + ": negative nominal quota");
      if (f.borrowing_limit && neg(*f.borrowing_limit))
        return InvalidArgument(where + ": negative borrowing limit");
      if (f.lending_limit && neg(*f.lending_limit))
        return InvalidArgument(where + ": negative lending limit");
      if (f.lending_limit && !f.lending_limit->FitsIn(f.nominal))
        return InvalidArgument(where + ": lending limit above nominal quota");
      if ((f.borrowing_limit || f.lending_limit) && q.cohort.empty())
        return InvalidArgument(where + ": borrowing/lending limits need a cohort");
    }
  }
  auto a = std::unique_ptr<Admission>(
      new Admission(std::move(queues), std::move(config), std::move(scorer), seed));
  Impl& im = *a->impl_;
  const GpuCatalog& cat = GpuCatalog::Builtin();
  im.gpu_eq.assign(cat.size(), 1.0);
  for (const auto& [model, w] : a->config_.gpu_equivalents) im.gpu_eq[*cat.Find(model)] = w;
  im.weights = im.gpu_eq;
  std::sort(im.weights.begin(), im.weights.end());
  im.weights.erase(std::unique(im.weights.begin(), im.weights.end()), im.weights.end());
  for (double w : im.weights) {
    ModelMask m = 0;
    for (size_t k = 0; k < im.gpu_eq.size() && k < 64; ++k)
      if (im.gpu_eq[k] <= w) m |= ModelMask{1} << k;
    im.models_upto.push_back(m);
  }
  for (size_t k = 0; k < im.gpu_eq.size() && k < 64; ++k) im.all_models |= ModelMask{1} << k;
  im.qs.resize(a->queues_.size());
  im.running.resize(a->queues_.size());
  {
    std::map<std::string, int> ids;
    for (const auto& q : a->queues_)
      for (const auto& f : q.flavors) ids.emplace(f.name, static_cast<int>(ids.size()));
    im.flavor_ids.resize(a->queues_.size());
    im.flavor_by_id.assign(a->queues_.size(), std::vector<int>(ids.size(), -1));
    for (size_t q = 0; q < a->queues_.size(); ++q) {
      for (size_t f = 0; f < a->queues_[q].flavors.size(); ++f) {
        const int id = ids.at(a->queues_[q].flavors[f].name);
        im.flavor_ids[q].push_back(id);
        im.flavor_by_id[q][static_cast<size_t>(id)] = static_cast<int>(f);
      }
    }
  }
  im.cohort_members.resize(a->queues_.size());
  for (size_t i = 0; i < a->queues_.size(); ++i) {
    im.queue_index[a->queues_[i].name] = static_cast<int>(i);
    im.qs[i].usage.assign(a->queues_[i].flavors.size(), {});
    im.qs[i].reserved.assign(a->queues_[i].flavors.size(), {});
    im.quota_memo.emplace_back(a->queues_[i].flavors.size());
    for (size_t k = 0; k < a->queues_.size(); ++k) {
      if (k == i || (!a->queues_[i].cohort.empty() && a->queues_[k].cohort == a->queues_[i].cohort))
        im.cohort_members[i].push_back(static_cast<int>(k));
    }
  }
  return a;
}

int64_t Admission::GpuEquivalentMilli(GpuModelId model, int64_t milli_gpu) const {
  return impl_->EqMilli(model, milli_gpu);
}

Status Admission::Submit(const JobSpec& job) {
  Impl& im = *impl_;
  auto q = im.queue_index.find(job.queue);
  if (q == im.queue_index.end())
    return InvalidArgument("job '" + job.name + "': unknown queue '" + job.queue + "'");
  if (im.jobs.count(job.id)) return InvalidArgument("duplicate job id " + std::to_string(job.id));
  if (job.pods < 1 || static_cast<WorkloadId>(job.pods) >= kPodsPerJob)
    return InvalidArgument("job '" + job.name + "': pods must be 1.." +
                           std::to_string(kPodsPerJob - 1));
  if (job.min_member < 0 || job.min_member > job.pods)
    return InvalidArgument("job '" + job.name + "': min_member must be 0..pods");
  const Demand& d = job.pod;
  if (d.cpu.v < 0 || d.memory.v < 0 || d.num_gpu < 0 || d.gpu_milli < 0 || d.gpu_milli > 1000 ||
      (d.num_gpu == 0) != (d.gpu_milli == 0) || (d.num_gpu > 1 && d.gpu_milli != 1000) ||
      d.num_gpu > kMaxGpusPerNode)
    return InvalidArgument("job '" + job.name + "': invalid pod demand");
  if (job.slice) {
    Status sv = ValidateSliceDemand(*job.slice);
    if (!sv.ok()) return InvalidArgument("job '" + job.name + "': " + sv.message());
  }
  if (job.node_layouts) {
    if (job.slice || job.topology != TopologyKind::kNone ||
        (job.min_member != 0 && job.min_member != job.pods))
      return InvalidArgument("job '" + job.name +
                             "': node layouts need a gang of whole pods without topology");
    for (const auto& layout : *job.node_layouts) {
      int64_t sum = 0;
      bool positive = !layout.empty();
      for (int part : layout) {
        positive &= part > 0;
        sum += part;
      }
      if (!positive || sum != job.pods)
        return InvalidArgument("job '" + job.name +
                               "': a node layout needs positive parts summing to pods");
    }
  }
  if (job.topology == TopologyKind::kSameLabel && job.topology_label.empty())
    return InvalidArgument("job '" + job.name + "': label topology without a label key");
  if (job.id > (~WorkloadId{0}) / kPodsPerJob - 1)
    return InvalidArgument("job id " + std::to_string(job.id) + " too large");
  Impl::Job j;
  j.spec = job;
  j.queue = q->second;
  j.waiting_since = job.arrival;
  j.why = "not yet considered by a scheduling cycle";
  ++im.qs[j.queue].pending;
  im.jobs.emplace(job.id, std::move(j));
  // Online placement policies learn the mix from arrivals.
  for (int i = 0; i < job.pods; ++i) engine_.Observe(job.pod);
  return Status::Ok();
}

Status Admission::Finish(ClusterState& state, WorkloadId job) {
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end() || it->second.st != JobState::kRunning)
    return NotFound("job " + std::to_string(job) + " is not running");
  impl_->Release(state, it->second);
  impl_->jobs.erase(it);  // finished jobs are forgotten: state() reports kFinished
  return Status::Ok();
}

Status Admission::Cancel(WorkloadId job) {
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end() || it->second.st != JobState::kPending)
    return NotFound("job " + std::to_string(job) + " is not pending");
  impl_->DropReservation(it->second);
  --impl_->qs[it->second.queue].pending;
  impl_->jobs.erase(it);
  return Status::Ok();
}

Status Admission::Adopt(ClusterState& state, const JobSpec& job,
                        const std::vector<Placement>& placements, double start,
                        const std::vector<SliceAssignment>& slices) {
  Impl& im = *impl_;
  TESSERA_RETURN_IF_ERROR(Submit(job));
  Impl::Job& j = im.jobs.at(job.id);
  auto undo = [&](const std::string& why) {
    for (auto it = j.pods.rbegin(); it != j.pods.rend(); ++it) (void)state.Release(*it);
    --im.qs[j.queue].pending;
    im.jobs.erase(job.id);
    return FailedPrecondition("job '" + job.name + "' cannot be adopted: " + why);
  };
  if (placements.empty() || static_cast<int>(placements.size()) > job.pods)
    return undo("needs 1.." + std::to_string(job.pods) + " placements");
  if (job.slice && slices.size() != placements.size())
    return undo("a slice job needs one slice per placement");
  Demand d = job.pod;
  d.models = 0;
  std::optional<SliceDemand> sd = job.slice;
  if (sd) sd->models = 0;
  Resources charge;
  GpuModelId model = kNoGpuModel;
  for (size_t i = 0; i < placements.size(); ++i) {
    const WorkloadId pid = job.id * kPodsPerJob + static_cast<WorkloadId>(i);
    if (placements[i].node >= state.num_nodes()) return undo("unknown node index");
    if (sd && (slices[i].node != placements[i].node || slices[i].gpus != placements[i].gpus))
      return undo("slice and placement disagree");
    Status st = sd ? state.Allocate(pid, *sd, slices[i]) : state.Allocate(pid, d, placements[i]);
    if (!st.ok()) return undo(state.spec(placements[i].node).name + ": " + st.message());
    j.pods.push_back(pid);
    j.placements.push_back(placements[i]);
    if (sd) j.slices.push_back(slices[i]);
    model = state.spec(placements[i].node).model;
    charge += sd ? im.SliceCharge(state, d, slices[i]) : im.PodCharge(d, model);
  }
  int flavor = -1;
  for (size_t f = 0; f < queues_[j.queue].flavors.size() && flavor < 0; ++f) {
    const ModelMask m = queues_[j.queue].flavors[f].models;
    if (m == 0 || d.num_gpu == 0 || (model != kNoGpuModel && ((m >> model) & 1)))
      flavor = static_cast<int>(f);
  }
  if (flavor < 0) return undo("no flavor of queue " + job.queue + " covers its GPU model");
  // Running work is adopted even above quota: it is there. Later admissions see the usage.
  j.flavor = flavor;
  j.charged = charge;
  j.st = JobState::kRunning;
  im.running[j.queue].insert(job.id);
  j.start = start;
  j.why.clear();
  im.qs[j.queue].usage[flavor] += charge;
  --im.qs[j.queue].pending;
  ++im.qs[j.queue].running;
  return Status::Ok();
}

std::vector<WorkloadId> Admission::RequeueNode(ClusterState& state, NodeIdx n,
                                               const std::string& why) {
  Impl& im = *impl_;
  std::vector<WorkloadId> out;
  for (auto& [id, j] : im.jobs) {
    if (j.st != JobState::kRunning) continue;
    bool on = false;
    for (const auto& p : j.placements) on |= p.node == n;
    if (!on) continue;
    im.Release(state, j);
    j.st = JobState::kPending;
    j.start = -1;
    j.why = why;
    ++im.qs[j.queue].pending;
    out.push_back(id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status Admission::Requeue(ClusterState& state, WorkloadId job, const std::string& why) {
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end() || it->second.st != JobState::kRunning)
    return NotFound("job " + std::to_string(job) + " is not running");
  impl_->Release(state, it->second);
  it->second.st = JobState::kPending;
  it->second.start = -1;
  it->second.why = why;
  ++impl_->qs[it->second.queue].pending;
  return Status::Ok();
}

std::vector<WorkloadId> Admission::PendingJobs() const {
  std::vector<WorkloadId> out;
  for (const auto& [id, j] : impl_->jobs)
    if (j.st == JobState::kPending) out.push_back(id);
  return out;
}

Status Admission::SetPriority(WorkloadId job, int priority) {
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end() || it->second.st == JobState::kFinished)
    return NotFound("job " + std::to_string(job) + " is neither pending nor running");
  it->second.spec.priority = priority;
  return Status::Ok();
}

Status Admission::SetAllowedNodes(WorkloadId job,
                                  std::shared_ptr<const std::vector<uint8_t>> allowed) {
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end() || it->second.st != JobState::kPending)
    return NotFound("job " + std::to_string(job) + " is not pending");
  it->second.spec.allowed_nodes = std::move(allowed);
  return Status::Ok();
}

Result<CycleResult> Admission::RunCycle(ClusterState& state, double now) {
  Impl& im = *impl_;
  CycleResult out;
  im.Decay(now);
  // Cluster capacity for the shares.
  {
    int64_t gpu = 0, cpu = 0, mem = 0;
    for (NodeIdx n = 0; n < state.num_nodes(); ++n) {
      const NodeSpec& s = state.spec(n);
      cpu += s.cpu.v;
      mem += s.memory.v;
      if (s.gpu_count > 0) gpu += im.EqMilli(s.model, 1000LL * s.gpu_count);
    }
    im.capacity[0] = std::max<double>(1, static_cast<double>(gpu));
    im.capacity[1] = std::max<double>(1, static_cast<double>(cpu));
    im.capacity[2] = std::max<double>(1, static_cast<double>(mem));
  }
  // Pending jobs per queue, in (priority desc, arrival, id) order.
  std::vector<std::vector<Impl::Job*>> per_queue(queues_.size());
  for (auto& [id, j] : im.jobs) {
    if (j.st != JobState::kPending) continue;
    if (j.spec.gang_timeout_s > 0 && j.has_reservation &&
        now - j.waiting_since > j.spec.gang_timeout_s) {
      im.DropReservation(j);
      j.timed_out = true;
    }
    per_queue[j.queue].push_back(&j);
  }
  for (auto& v : per_queue) {
    std::sort(v.begin(), v.end(), [](const Impl::Job* a, const Impl::Job* b) {
      const auto& x = a->spec;
      const auto& y = b->spec;
      if (x.priority != y.priority) return x.priority > y.priority;
      if (x.arrival != y.arrival) return x.arrival < y.arrival;
      return x.id < y.id;
    });
  }
  im.BuildFreeMask(state.num_nodes());
  im.failures.clear();
  im.label_groups.clear();
  im.failure_cache = config_.remember_failures;
  std::vector<size_t> head(queues_.size(), 0);
  std::vector<bool> blocked(queues_.size(), false);  // strict FIFO: head could not be admitted
  int preemption_attempts = 0;
  // The order key of each queue's head job; recomputed when the head or the queue's usage
  // changes (dirty), i.e. for the queue just served, or for all queues after a preemption.
  struct HeadKey {
    int priority = 0;
    bool within_nominal = false;
    double share = 0;
    double arrival = 0;
    WorkloadId id = 0;
    bool Before(const HeadKey& o) const {
      if (priority != o.priority) return priority > o.priority;
      if (within_nominal != o.within_nominal) return within_nominal;
      if (share != o.share) return share < o.share;
      if (arrival != o.arrival) return arrival < o.arrival;
      return id < o.id;
    }
  };
  std::vector<HeadKey> keys(queues_.size());
  std::vector<bool> dirty(queues_.size(), true);
  std::vector<bool> flavor_placement_failed;
  while (true) {
    // Next job: highest priority head, then within nominal quota before borrowing, then lowest
    // queue share, then earliest arrival.
    int best = -1;
    for (size_t q = 0; q < queues_.size(); ++q) {
      if (blocked[q] || head[q] >= per_queue[q].size()) continue;
      if (dirty[q]) {
        const Impl::Job& h = *per_queue[q][head[q]];
        keys[q] = {h.spec.priority, config_.fair_sharing && im.WithinNominal(h),
                   config_.fair_sharing ? im.Share(static_cast<int>(q)) : 0.0, h.spec.arrival,
                   h.spec.id};
        dirty[q] = false;
      }
      if (best < 0 || keys[q].Before(keys[best])) best = static_cast<int>(q);
    }
    if (best < 0) break;
    Impl::Job& j = *per_queue[best][head[best]++];
    dirty[best] = true;
    bool admitted = false, placement_failed = false;
    int first_flavor = -1;
    std::string first_why;
    flavor_placement_failed.assign(queues_[best].flavors.size(), false);
    for (size_t f = 0; f < queues_[best].flavors.size() && !admitted; ++f) {
      bool pf = false;
      admitted = im.TryAdmit(state, j, static_cast<int>(f), now, &pf);
      if (!admitted) {
        flavor_placement_failed[f] = pf;
        if (first_flavor < 0 || (pf && !placement_failed)) {
          first_flavor = static_cast<int>(f);
          first_why = j.why;
        }
        placement_failed |= pf;
      }
    }
    if (!admitted && config_.preemption &&
        preemption_attempts < config_.max_preemption_attempts_per_cycle) {
      ++preemption_attempts;
      for (size_t f = 0; f < queues_[best].flavors.size() && !admitted; ++f)
        admitted = im.Preempt(state, j, static_cast<int>(f), now, flavor_placement_failed[f], out);
      if (admitted) std::fill(dirty.begin(), dirty.end(), true);
    }
    if (admitted) {
      out.admitted.push_back(j.spec.id);
      continue;
    }
    j.why = first_why;
    const bool gang = j.spec.pods > 1 || j.spec.pod.num_gpu > 1;
    if (placement_failed && gang && config_.reservations && !j.timed_out) {
      if (!j.has_reservation) im.Reserve(state, j, first_flavor);
      if (j.has_reservation) {
        const int need = j.spec.min_member > 0 ? j.spec.min_member : j.spec.pods;
        j.why = "gang of " + std::to_string(need) + " holds a reservation on " +
                im.ReservedNodes(state, j) + "; waits for them to free (" + first_why + ")";
      }
    }
    if (j.timed_out)
      j.why = "gang timed out after " +
              std::to_string(static_cast<int64_t>(j.spec.gang_timeout_s)) +
              " s; waits without reservation (" + first_why + ")";
    if (config_.strict_fifo || queues_[best].queueing == QueueingStrategy::kStrictFifo ||
        (!config_.backfill && j.has_reservation))
      blocked[best] = true;
  }
  im.failure_cache = false;
  return out;
}

JobState Admission::state(WorkloadId job) const {
  auto it = impl_->jobs.find(job);
  return it == impl_->jobs.end() ? JobState::kFinished : it->second.st;
}

std::string Admission::WhyPending(WorkloadId job) const {
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end() || it->second.st != JobState::kPending) return "";
  return it->second.why;
}

std::vector<Placement> Admission::Placements(WorkloadId job) const {
  auto it = impl_->jobs.find(job);
  return it == impl_->jobs.end() ? std::vector<Placement>{} : it->second.placements;
}

std::vector<SliceAssignment> Admission::Slices(WorkloadId job) const {
  auto it = impl_->jobs.find(job);
  return it == impl_->jobs.end() ? std::vector<SliceAssignment>{} : it->second.slices;
}

double Admission::StartTime(WorkloadId job) const {
  auto it = impl_->jobs.find(job);
  return it == impl_->jobs.end() ? -1 : it->second.start;
}

std::vector<QueueStatus> Admission::Queues() const {
  std::vector<QueueStatus> out;
  for (size_t q = 0; q < queues_.size(); ++q) {
    QueueStatus s;
    s.name = queues_[q].name;
    for (size_t f = 0; f < queues_[q].flavors.size(); ++f) {
      s.usage += impl_->qs[q].usage[f] - impl_->qs[q].reserved[f];
      s.reserved += impl_->qs[q].reserved[f];
      s.borrowed += Max0(impl_->qs[q].usage[f] - queues_[q].flavors[f].nominal);
    }
    s.share = impl_->Share(static_cast<int>(q));
    s.pending = impl_->qs[q].pending;
    s.running = impl_->qs[q].running;
    out.push_back(s);
  }
  return out;
}

}  // namespace tessera
