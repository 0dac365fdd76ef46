// The scheduling cycle and placement: gang and layout placement, the per-cycle failure cache,
// admission of a job on a flavor, and reservations for blocked gangs.
#include "admission/admission_internal.h"

#include <bit>
#include <limits>
#include <span>

namespace tessera {
namespace {
// Ledger ids of the cycle's host CPU/memory holds (RunCycle), far above any job's pod ids.
constexpr WorkloadId kHostHoldBase = WorkloadId{3} << 60;
}  // namespace

bool Admission::Impl::Covers(const Shape& a, const Shape& b) {
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

const Admission::Impl::Failure* Admission::Impl::KnownFailure(const Shape& s) const {
  for (const Failure& e : failures)
    if (Covers(ShapeOf(e), s)) return &e;
  return nullptr;
}

void Admission::Impl::RememberFailure(const Shape& s, const std::string& job,
                                      const std::string& why) {
  Failure e{s.d, s.only, s.pods, s.need, s.topology, s.label, job, why, s.gpu_bound};
  // Entries the new one covers are redundant.
  std::erase_if(failures, [&](const Failure& old) { return Covers(ShapeOf(e), ShapeOf(old)); });
  if (failures.size() < kMaxFailures) failures.push_back(std::move(e));
}

void Admission::Impl::BuildFreeMask(size_t nodes) {
  free_mask.assign(nodes, 1);
  any_reservation = false;
  for (WorkloadId id : reserving) {
    const Job& j = jobs.at(id);
    any_reservation = true;
    for (NodeIdx n : j.reserved_nodes)
      if (n < nodes) free_mask[n] = 0;
  }
}

bool Admission::Impl::PlaceGang(ClusterState& state, Job& j, const Demand& d, std::string* why,
                                bool* gpu_bound, bool* exhaustive) {
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
      Decision dec;
      // A job whose layout was made for it takes the slice the plan gave it, if still free,
      // even on a node reserved since: the reservation was made with that slice held.
      const SliceAssignment* ready = sd && want == 1 && j.ready_slice ? &*j.ready_slice : nullptr;
      if (ready && state.Allocate(pid, *sd, *ready).ok()) {
        (void)state.Release(pid);
        dec.workload = pid;
        dec.is_slice = true;
        dec.placed = true;
        dec.slice = *ready;
        dec.placement = {ready->node, ready->gpus};
        dec.slice_explanation = "the slice its MIG re-layout was made for";
      } else {
        dec = sd ? self->engine_.DecideSlice(state, pid, *sd, allowed, &frozen)
                 : self->engine_.Decide(state, pid, d, allowed);
      }
      // A GPU promised to a re-layout earlier in this cycle holds its new layout in the
      // ledger until the cycle ends. A single pod whose slice lies there waits for the same
      // layout (as if placed right after it); other jobs decide again without its node (a few
      // times at most, then wait for the next cycle).
      auto on_promised = [&] {
        return sd && dec.placed && dec.slice.node < promised.size() &&
               (promised[dec.slice.node] & dec.slice.gpus) != 0;
      };
      if (on_promised() && want == 1) {
        const int g = std::countr_zero(dec.slice.gpus & promised[dec.slice.node]);
        if (auto it = promised_plans.find({dec.slice.node, g}); it != promised_plans.end()) {
          dec.placed = false;
          dec.relayouts = {it->second};
          dec.why_not = "waiting for a MIG re-layout: " + it->second.reason;
        }
      }
      for (int retry = 0; retry < 4 && on_promised(); ++retry) {
        if (retry == 0) promised_allowed = allowed ? *allowed : std::vector<uint8_t>(nodes, 1);
        promised_allowed[dec.slice.node] = 0;
        dec = self->engine_.DecideSlice(state, pid, *sd, &promised_allowed, &frozen);
      }
      if (on_promised()) {
        dec.placed = false;
        dec.why_not = "its best slices are on GPUs other pods' MIG re-layouts take";
      }
      if (!dec.placed) {
        if (!dec.relayouts.empty() && want == 1) j.relayouts = std::move(dec.relayouts);
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
    *why =
        "gang of " + std::to_string(need) + " finds no " +
        (j.spec.topology == TopologyKind::kSameNode ? std::string("single node")
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

int64_t Admission::Impl::PodSlots(const NodeFree& f, const Demand& d) {
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

bool Admission::Impl::PlaceLayouts(ClusterState& state, Job& j, const Demand& d,
                                   const std::vector<uint8_t>* base, std::string* why) {
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

void Admission::Impl::Release(ClusterState& state, Job& j) {
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

void Admission::Impl::DropReservation(Job& j) {
  if (!j.has_reservation) return;
  qs[j.queue].usage[j.res_flavor] -= j.res_charge;
  qs[j.queue].reserved[j.res_flavor] -= j.res_charge;
  j.has_reservation = false;
  reserving.erase(j.spec.id);
  // Its nodes are open to other jobs at once (later in the same cycle too); failures found
  // while they were closed no longer hold.
  for (NodeIdx n : j.reserved_nodes)
    if (n < free_mask.size()) free_mask[n] = 1;
  if (!j.reserved_nodes.empty()) failures.clear();
  any_reservation = !reserving.empty();
  j.reserved.clear();
  j.reserved_nodes.clear();
  j.res_charge = {};
  j.res_flavor = -1;
}

bool Admission::Impl::TryAdmit(ClusterState& state, Job& j, int f, double now,
                               bool* placement_failed) {
  const FlavorQuota& fq = Q(j.queue).flavors[f];
  Demand d = j.spec.pod;
  if (d.num_gpu > 0 && fq.models != 0) {
    d.models = d.models == 0 ? fq.models : (d.models & fq.models);
    if (d.models == 0) {
      j.why = "flavor " + fq.name + " has none of the GPU models the job allows";
      j.why_reason = PendingReason::kNoFit;
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
    j.why_reason = PendingReason::kQuota;
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
                (j.has_reservation ? "none of its reserved nodes fits; elsewhere " : "") + e->why +
                " (found this cycle for " + e->job + ", which asks no more)";
        j.why_reason = PendingReason::kNoFit;
        return false;
      }
    }
  }
  std::string why;
  bool exhaustive = true;
  if (!PlaceGang(state, j, d, &why, &shape.gpu_bound, &exhaustive)) {
    *placement_failed = true;
    j.why = "no placement: " + why;
    j.why_reason = PendingReason::kNoFit;
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
    j.why_reason = PendingReason::kQuota;
    return false;
  }
  DropReservation(j);
  j.flavor = f;
  j.charged = charge;
  j.st = JobState::kRunning;
  running[j.queue].insert(j.spec.id);
  j.start = now;
  j.admitted_at = now;
  j.why.clear();
  j.timed_out = false;
  qs[j.queue].usage[f] += charge;
  --qs[j.queue].pending;
  ++qs[j.queue].running;
  return true;
}

void Admission::Impl::Reserve(ClusterState& state, Job& j, int f) {
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
    if (j.spec.slice) {
      // Slices: the node with the fewest workloads on its GPUs, the one that drains first
      // when run times are unknown (as the sharing simulation reserves).
      if (j.spec.slice->memory_mib > GpuCatalog::Builtin().Get(s.model).memory_mib) continue;
      int64_t clients = 0;
      for (int g = 0; g < state.gpu_count(n); ++g) clients += state.gpu(n, g).clients;
      cand.push_back({clients, n});
      continue;
    }
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
  if (const int limit = self->config_.max_reserved_nodes; limit > 0) {
    size_t held = 0, add = 0;
    for (WorkloadId id : reserving) held += jobs.at(id).reserved_nodes.size();
    for (uint8_t m : mask) add += m;
    if (held > 0 && held + add > static_cast<size_t>(limit)) return;
  }
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

std::string Admission::Impl::ReservedNodes(const ClusterState& state, const Job& j) const {
  std::string out;
  int shown = 0, total = 0;
  for (NodeIdx n : j.reserved_nodes) {
    ++total;
    if (shown++ < 4) out += (out.empty() ? "" : ",") + state.spec(static_cast<NodeIdx>(n)).name;
  }
  if (total > 4) out += ",... (" + std::to_string(total) + " nodes)";
  return out;
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
      if (a->layout_ready != b->layout_ready) return a->layout_ready;
      const auto& x = a->spec;
      const auto& y = b->spec;
      if (x.priority != y.priority) return x.priority > y.priority;
      if (x.arrival != y.arrival) return x.arrival < y.arrival;
      return x.id < y.id;
    });
  }
  im.BuildFreeMask(state.num_nodes());
  im.frozen = im.frozen_base;
  im.frozen.resize(state.num_nodes(), 0);
  im.promised.assign(state.num_nodes(), 0);
  im.failures.clear();
  im.label_groups.clear();
  im.failure_cache = config_.remember_failures;
  std::vector<size_t> head(queues_.size(), 0);
  std::vector<bool> blocked(queues_.size(), false);  // strict FIFO: head could not be admitted
  int preemption_attempts = 0;
  // Slices (or host CPU/memory) held for jobs that wait for a re-layout, and the layouts
  // proposed, both undone when the cycle ends.
  std::vector<WorkloadId> holds;
  std::vector<MigReconfig> tentative;
  im.promised_plans.clear();
  // The order key of each queue's head job; recomputed when the head or the queue's usage
  // changes (dirty), i.e. for the queue just served, or for all queues after a preemption.
  struct HeadKey {
    bool layout_ready = false;
    int priority = 0;
    bool within_nominal = false;
    double share = 0;
    double arrival = 0;
    WorkloadId id = 0;
    bool Before(const HeadKey& o) const {
      if (layout_ready != o.layout_ready) return layout_ready;
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
        keys[q] = {h.layout_ready,
                   h.spec.priority,
                   config_.fair_sharing && im.WithinNominal(h),
                   config_.fair_sharing ? im.Share(static_cast<int>(q)) : 0.0,
                   h.spec.arrival,
                   h.spec.id};
        dirty[q] = false;
      }
      if (best < 0 || keys[q].Before(keys[best])) best = static_cast<int>(q);
    }
    if (best < 0) break;
    Impl::Job& j = *per_queue[best][head[best]++];
    dirty[best] = true;
    j.layout_ready = false;
    bool admitted = false, placement_failed = false;
    int first_flavor = -1;
    std::string first_why;
    PendingReason first_reason = PendingReason::kOther;
    flavor_placement_failed.assign(queues_[best].flavors.size(), false);
    j.relayouts.clear();
    for (size_t f = 0; f < queues_[best].flavors.size() && !admitted; ++f) {
      bool pf = false;
      admitted = im.TryAdmit(state, j, static_cast<int>(f), now, &pf);
      if (!admitted) {
        flavor_placement_failed[f] = pf;
        if (first_flavor < 0 || (pf && !placement_failed)) {
          first_flavor = static_cast<int>(f);
          first_why = j.why;
          first_reason = j.why_reason;
        }
        placement_failed |= pf;
      }
    }
    j.ready_slice.reset();
    // A job that waits for a re-layout fits once the layout is made: it does not preempt. A
    // single-pod slice job may preempt and then wait for the layout of the GPU(s) it cleared.
    if (!admitted && j.relayouts.empty() && config_.preemption &&
        preemption_attempts < config_.max_preemption_attempts_per_cycle) {
      ++preemption_attempts;
      for (size_t f = 0; f < queues_[best].flavors.size() && !admitted && j.relayouts.empty(); ++f)
        admitted = im.Preempt(state, j, static_cast<int>(f), now, flavor_placement_failed[f], out);
      if (admitted || !j.relayouts.empty()) std::fill(dirty.begin(), dirty.end(), true);
    }
    const bool waits_for_layout = !admitted && !j.relayouts.empty() && j.spec.slice &&
                                  j.relayouts.front().node < state.num_nodes();
    if (waits_for_layout) {
      const NodeIdx node = j.relayouts.front().node;
      GpuMask gpus = 0;  // the GPUs re-laid out for the job
      for (const MigReconfig& r : j.relayouts) {
        const GpuMask bit = GpuMask{1} << r.gpu;
        gpus |= bit;
        auto plan = im.promised_plans.find({r.node, r.gpu});
        if (plan == im.promised_plans.end()) {
          // A new layout: it stays in the ledger until the cycle ends.
          im.promised[r.node] |= bit;
          im.promised_plans[{r.node, r.gpu}] = r;
          if (state.SetMigLayout(r.node, r.gpu, r.mig_after, r.after).ok()) tentative.push_back(r);
        } else if (plan->second.mig_after != r.mig_after || plan->second.after != r.after) {
          // A second re-layout of the same GPU on top of the first (it destroys only instances
          // nobody holds): the GPU's proposal becomes the layout both lead to.
          if (state.SetMigLayout(r.node, r.gpu, r.mig_after, r.after).ok()) {
            tentative.push_back(r);
            plan->second.mig_after = r.mig_after;
            plan->second.after = r.after;
            plan->second.reason += "; then " + r.reason;
          }
        }
      }
      // For the rest of the cycle the job holds its slice on the new layouts (with its host
      // CPU and memory), or at least its host CPU and memory on that node.
      std::vector<uint8_t> only(state.num_nodes(), 0);
      only[node] = 1;
      SliceDemand sd = *j.spec.slice;
      sd.models = j.spec.pod.models;
      const SliceChoice c = engine_.selector().Select(state, sd, &only);
      const WorkloadId hold = kHostHoldBase + holds.size();
      const bool slice_held = c.placed && (c.assignment.gpus & gpus) != 0 &&
                              state.Allocate(hold, sd, c.assignment).ok();
      bool held = slice_held;
      if (!held) {
        Demand host;
        host.cpu = j.spec.pod.cpu;
        host.memory = j.spec.pod.memory;
        held = state.Allocate(hold, host, Placement{node, 0}).ok();
      }
      if (held) holds.push_back(hold);
      // The job now waits for its own layouts, not for a reserved node to drain: the
      // reservation ends at once, as the sharing simulation's ends when the job is placed.
      im.DropReservation(j);
      for (const MigReconfig& r : j.relayouts) {
        LayoutProposal& proposal = out.relayouts.emplace_back();
        proposal.job = j.spec.id;
        proposal.reconfig = r;
        if (slice_held) proposal.slice = c.assignment;
      }
    }
    j.relayouts.clear();
    if (admitted) {
      out.admitted.push_back(j.spec.id);
      continue;
    }
    j.why = first_why;
    j.why_reason = first_reason;
    const bool gang = j.spec.pods > 1 || j.spec.pod.num_gpu > 1;
    if (placement_failed && gang && config_.reservations && !j.timed_out && !waits_for_layout) {
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
  // Every proposal of a GPU names the layout the cycle's plans for it lead to.
  for (LayoutProposal& p : out.relayouts)
    if (auto it = im.promised_plans.find({p.reconfig.node, p.reconfig.gpu});
        it != im.promised_plans.end())
      p.reconfig = it->second;
  for (WorkloadId hold : holds) (void)state.Release(hold);
  for (auto it = tentative.rbegin(); it != tentative.rend(); ++it)
    (void)state.SetMigLayout(it->node, it->gpu, it->mig_before, it->before);
  im.promised_plans.clear();
  return out;
}

}  // namespace tessera
