#include "kube/extender_view.h"

#include <algorithm>
#include <bit>

namespace tessera::kube {
namespace {

constexpr int64_t kHostUnlimited = int64_t{1} << 40;

// The slice an assignment names on the single-node model; a milli-GPU share is modelled as an
// MPS client (the extender sizes shares by memory and compute).
std::optional<SliceAssignment> ToSlice(const Assignment& a, const PodRequest& p,
                                       const NodeInfo& n) {
  auto s = SliceFor(a, n, 0);
  if (!s || s->kind != SliceKind::kShare) return s;
  s->kind = SliceKind::kMps;
  s->thread_pct = std::clamp((a.gpu_milli + 9) / 10, 1, 100);
  const int64_t card = n.spec.gpu_memory_mib > 0 ? n.spec.gpu_memory_mib
                                                 : GpuCatalog::Builtin().Get(n.model).memory_mib;
  s->memory_mib = a.memory_limit_mib > 0
                      ? a.memory_limit_mib
                      : std::max<int64_t>(p.gpu.memory_mib, card * a.gpu_milli / 1000);
  s->gpu_milli = 0;
  return s;
}

bool InView(const NodeInfo* n) {
  return n != nullptr && n->spec.gpu_count > 0 && n->model != kNoGpuModel;
}

bool SameSpec(const NodeSpec& a, const NodeSpec& b) {
  return a.name == b.name && a.cpu == b.cpu && a.memory == b.memory && a.gpu_count == b.gpu_count &&
         a.model == b.model && a.gpu_memory_mib == b.gpu_memory_mib;
}

// What a bound pod holds on `n`: its demand on the node's model and the GPUs its assignment
// names (0: none named).
std::pair<Demand, GpuMask> Held(const PodRequest& p, const NodeInfo& n) {
  Demand d = DemandOn(p, n.model);
  GpuMask mask = 0;
  if (p.assignment && !p.assignment->gpus.empty()) {
    const Assignment& a = *p.assignment;
    for (int g : a.gpus)
      if (g >= 0 && g < n.spec.gpu_count) mask |= GpuMask{1} << g;
    d.num_gpu = std::popcount(mask);
    if (a.kind == AssignmentKind::kShare && a.gpu_milli > 0) d.gpu_milli = a.gpu_milli;
    if (a.kind == AssignmentKind::kMps) d.gpu_milli = std::max(d.gpu_milli, a.mps_thread_pct * 10);
    if (a.kind == AssignmentKind::kExclusive) d.gpu_milli = 1000;
    d.gpu_milli = std::clamp(d.gpu_milli, 1, 1000);
  }
  return {d, mask};
}

}  // namespace

bool CountedMig(const PodRequest& p, const NodeInfo& n) {
  return !p.gpu.mig_profile.empty() && n.inventory.empty();
}

SliceDemand GpuOnly(SliceDemand d) {
  d.cpu = MilliCpu(0);
  d.host_memory = MiB(0);
  return d;
}

Result<NodeModel> BuildNodeModel(const NodeInfo& n, const std::vector<const PodRequest*>& bound,
                                 const SliceSelector& selector) {
  NodeModel m;
  NodeSpec spec = n.spec;
  spec.cpu = MilliCpu(kHostUnlimited);
  spec.memory = MiB(kHostUnlimited);
  auto added = m.cluster.AddNode(spec);
  if (!added.ok()) return added.status();
  for (const GpuInventoryEntry& e : n.inventory) {
    if (!e.mig_enabled || e.index >= n.spec.gpu_count) continue;
    const MigGeometry* geo = MigGeometryFor(n.model);
    if (!geo) continue;
    auto layout = ParseMigLayout(*geo, e.mig_layout);
    if (!layout.ok()) return layout.status();
    auto set = m.cluster.SetMigLayout(0, e.index, true, *layout);
    if (!set.ok()) return set.status();
  }
  WorkloadId id = 1;
  for (const PodRequest* p : bound) {
    if (CountedMig(*p, n) || (p->assignment && p->assignment->gpus.empty())) {
      ++m.mig_counted[p->gpu.mig_profile];
      continue;
    }
    const SliceDemand d = GpuOnly(SliceDemandOn(*p, n.model));
    const WorkloadId wid = id++;
    if (p->assignment && p->assignment->node == n.spec.name) {
      auto s = ToSlice(*p->assignment, *p, n);
      if (s && m.cluster.Allocate(wid, d, *s).ok()) continue;
      // The assignment wins over an inventory that does not show what it holds.
      if (s && !ConformToAssignment(m.cluster, *s, p->assignment->mig_instance).empty() &&
          m.cluster.Allocate(wid, d, *s).ok())
        continue;
    }
    SliceChoice c = selector.Select(m.cluster, d);
    if (c.placed) (void)m.cluster.Allocate(wid, d, c.assignment);
  }
  // Blocked once the bound pods are in: a pod keeps the GPU that turned unhealthy under it.
  for (int g = 0; g < n.spec.gpu_count; ++g)
    if ((n.unhealthy >> g) & 1) (void)m.cluster.SetGpuBlocked(0, g, true);
  return m;
}

void EngineView::NodeChanged(const std::string& name, const NodeInfo* before,
                             const NodeInfo* after) {
  if (stale_) return;
  const bool was = index_.count(name) != 0;
  if (!InView(after)) {
    if (was) stale_ = true;
    return;
  }
  if (was && (!InView(before) || !SameSpec(before->spec, after->spec))) {
    stale_ = true;
    return;
  }
  dirty_.insert(name);
}

void EngineView::PodsChanged(const std::string& node) {
  if (!stale_) dirty_.insert(node);
}

std::optional<NodeIdx> EngineView::Find(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

void EngineView::Refresh(const std::map<std::string, NodeEntry>& nodes, const BoundFn& bound) {
  if (stale_) {
    state_ = ClusterState();
    index_.clear();
    held_.clear();
    dirty_.clear();
    for (const auto& [name, e] : nodes) dirty_.insert(name);
    stale_ = false;
    ++rebuilds_;
  }
  for (const std::string& name : dirty_) {
    auto e = nodes.find(name);
    if (e == nodes.end() || !InView(e->second.info ? &*e->second.info : nullptr)) continue;
    const NodeInfo& info = *e->second.info;
    auto it = index_.find(name);
    if (it == index_.end()) {
      auto added = state_.AddNode(info.spec);
      if (!added.ok()) continue;
      it = index_.emplace(name, *added).first;
      held_.resize(state_.num_nodes());
    }
    RebuildNode(it->second, info, bound);
  }
  dirty_.clear();
}

void EngineView::RebuildNode(NodeIdx n, const NodeInfo& info, const BoundFn& bound) {
  for (WorkloadId id : held_[n]) (void)state_.Release(id);
  held_[n].clear();
  auto hold = [&](const Demand& d, GpuMask mask) {
    const WorkloadId id = next_id_++;
    if (!state_.Allocate(id, d, Placement{n, mask}).ok()) return false;
    held_[n].push_back(id);
    return true;
  };
  for (int g = 0; g < info.spec.gpu_count; ++g) (void)state_.SetGpuBlocked(n, g, false);
  GpuMask blocked = 0;
  if (!mig_open_)
    for (const GpuInventoryEntry& e : info.inventory)
      if (e.mig_enabled && e.index < info.spec.gpu_count) blocked |= GpuMask{1} << e.index;
  for (int g = 0; g < info.spec.gpu_count; ++g) {
    if (!((blocked >> g) & 1)) continue;
    Demand blk;
    blk.num_gpu = 1;
    blk.gpu_milli = 1000;
    (void)hold(blk, GpuMask{1} << g);
  }
  for (const PodRequest* p : bound(info.spec.name)) {
    auto [d, mask] = Held(*p, info);
    if (d.num_gpu == 0) continue;
    if (mask == 0) {
      const NodeFree& f = state_.free(n);
      for (int g = 0; g < f.gpu_count && std::popcount(mask) < d.num_gpu; ++g)
        if (f.gpu[g] >= d.gpu_milli) mask |= GpuMask{1} << g;
      if (std::popcount(mask) < d.num_gpu) continue;
    }
    if (hold(d, mask)) continue;
    // Beyond the node's free CPU or memory (its allocatable shrank): counted in full, as the
    // kubelet counts it, with its GPUs.
    const WorkloadId id = next_id_++;
    if (state_.AllocateBeyondHost(id, d, Placement{n, mask}).ok()) held_[n].push_back(id);
  }
  // Blocked once the bound pods are in: a pod keeps the GPU that turned unhealthy under it.
  for (int g = 0; g < info.spec.gpu_count; ++g)
    if ((info.unhealthy >> g) & 1) (void)state_.SetGpuBlocked(n, g, true);
}

}  // namespace tessera::kube
