#include "sharing/eviction.h"

#include <algorithm>
#include <bit>
#include <set>
#include <tuple>

namespace tessera {

double HeldGpuShare(const ClusterState& cluster, const SliceAssignment& a) {
  if (a.gpus == 0) return 0;
  const GpuSlices& gpu = cluster.gpu(a.node, std::countr_zero(a.gpus));
  const double memory = static_cast<double>(std::max<int64_t>(1, gpu.memory_mib));
  switch (a.kind) {
    case SliceKind::kExclusive:
      return std::popcount(a.gpus);
    case SliceKind::kShare:
      return a.gpu_milli / 1000.0;
    case SliceKind::kMig: {
      const MigSlot* slot = gpu.Instance(a.mig_start);
      return slot ? static_cast<double>(slot->memory_mib) / memory : 0;
    }
    case SliceKind::kMps:
    case SliceKind::kMigMps:
    case SliceKind::kTimeSlice:
      return static_cast<double>(a.memory_mib) / memory;
  }
  return 0;
}

namespace {

// A workload's slice on its node, as an order key: its first GPU, MIG instance start, memory
// limit, thread % and milli-GPU. Ties in cost are broken by it before ids, so that callers
// numbering workloads differently (the simulation, the scheduler) choose the same victims
// unless two victims hold equal slices.
using SliceKey = std::tuple<int, int, int64_t, int, int>;
SliceKey Position(const ClusterState& cluster, WorkloadId id) {
  const SliceAssignment* a = cluster.Find(id);
  if (!a || a->gpus == 0) return {-1, -1, 0, 0, 0};
  return {std::countr_zero(a->gpus), a->mig_start, a->memory_mib, a->thread_pct, a->gpu_milli};
}

}  // namespace

std::optional<EvictionPlan> PlanEviction(const ClusterState& cluster, const SliceDemand& d,
                                         const std::map<WorkloadId, EvictionCandidate>& candidates,
                                         const std::vector<uint8_t>* allowed,
                                         const EvictionProbe& probe) {
  const int need = std::max(1, d.whole_gpus);  // a fraction needs one cleared GPU
  if (candidates.empty()) return std::nullopt;
  std::optional<EvictionPlan> best;
  const auto occupants = cluster.Occupants();
  for (NodeIdx n = 0; n < cluster.num_nodes(); ++n) {
    if (allowed && (n >= allowed->size() || !(*allowed)[n])) continue;
    const int count = cluster.gpu_count(n);
    const GpuModelId m = cluster.spec(n).model;
    if (count < need || m == kNoGpuModel) continue;
    if (d.models != 0 && !(m < 64 && ((d.models >> m) & 1))) continue;
    if (d.cpu.v > cluster.spec(n).cpu.v || d.host_memory.v > cluster.spec(n).memory.v) continue;
    struct Gpu {
      double cost;
      size_t victims;
      int g;
    };
    std::vector<Gpu> clearable;
    std::vector<std::vector<WorkloadId>> on(count);
    for (int g = 0; g < count; ++g) {
      on[g] = occupants[n][g];
      if (cluster.gpu(n, g).memory_mib < d.memory_mib) continue;
      double cost = 0;
      bool ok = true;
      for (WorkloadId id : on[g]) {
        auto it = candidates.find(id);
        if (it == candidates.end()) {
          ok = false;
          break;
        }
        cost += it->second.cost;
      }
      if (ok) clearable.push_back({cost, on[g].size(), g});
    }
    if (static_cast<int>(clearable.size()) < need) continue;
    std::sort(clearable.begin(), clearable.end(), [](const Gpu& a, const Gpu& b) {
      return std::tie(a.victims, a.cost, a.g) < std::tie(b.victims, b.cost, b.g);
    });
    EvictionPlan plan;
    plan.node = n;
    std::set<WorkloadId> victims;
    for (int i = 0; i < need; ++i) {
      plan.gpus |= GpuMask{1} << clearable[i].g;
      victims.insert(on[clearable[i].g].begin(), on[clearable[i].g].end());
    }
    // The balance, not the free amount: on an over-committed node evicting frees less.
    int64_t cpu = cluster.cpu_balance(n), mem = cluster.memory_balance(n);
    for (WorkloadId id : victims) {
      cpu += candidates.at(id).cpu.v;
      mem += candidates.at(id).host_memory.v;
    }
    if (cpu < d.cpu.v || mem < d.host_memory.v) {
      // Host room: the node's other candidates, cheapest first.
      // cost, slice, newest first, id
      std::vector<std::tuple<double, SliceKey, double, WorkloadId>> more;
      for (int g = 0; g < count; ++g) {
        for (WorkloadId id : on[g]) {
          auto it = candidates.find(id);
          if (it == candidates.end() || victims.count(id)) continue;
          more.push_back({it->second.cost, Position(cluster, id), -it->second.since, id});
        }
      }
      std::sort(more.begin(), more.end());
      more.erase(std::unique(more.begin(), more.end()), more.end());
      for (const auto& [c, slice, newest, id] : more) {
        if (cpu >= d.cpu.v && mem >= d.host_memory.v) break;
        victims.insert(id);
        cpu += candidates.at(id).cpu.v;
        mem += candidates.at(id).host_memory.v;
      }
      if (cpu < d.cpu.v || mem < d.host_memory.v) continue;
    }
    if (victims.empty()) continue;
    for (WorkloadId id : victims) plan.cost += candidates.at(id).cost;
    plan.victims.assign(victims.begin(), victims.end());
    if (!best || std::make_pair(plan.victims.size(), plan.cost) <
                     std::make_pair(best->victims.size(), best->cost))
      best = std::move(plan);
  }
  if (best && d.whole_gpus < 1 && probe && best->victims.size() > 1) {
    std::vector<WorkloadId> order = best->victims;
    std::sort(order.begin(), order.end(), [&](WorkloadId a, WorkloadId b) {
      const double ca = candidates.at(a).cost, cb = candidates.at(b).cost;
      if (ca != cb) return ca > cb;
      const auto pa = Position(cluster, a), pb = Position(cluster, b);
      if (pa != pb) return pa < pb;
      // The older is kept first, so the newer is evicted.
      const double sa = candidates.at(a).since, sb = candidates.at(b).since;
      return sa != sb ? sa < sb : a < b;
    });
    for (WorkloadId keep : order) {
      if (best->victims.size() == 1) break;
      std::vector<WorkloadId> rest;
      for (WorkloadId v : best->victims)
        if (v != keep) rest.push_back(v);
      if (probe(rest)) best->victims = std::move(rest);
    }
    best->cost = 0;
    for (WorkloadId id : best->victims) best->cost += candidates.at(id).cost;
  }
  return best;
}

}  // namespace tessera
