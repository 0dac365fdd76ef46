#include "sharing/allocator.h"

namespace tessera {
namespace {

bool WholeGpuDemand(const SliceDemand& d) {
  return d.whole_gpus > 0 || d.compute_pct == 100 ||
         (d.memory_mib == 0 && d.compute_pct == 0 && d.mig_profile.empty());
}

// Cost of a freshly planned instance, comparable with SliceChoice::cost.
double PlannedCost(const ClusterState& c, const MigReconfig& r, const SliceDemand& d) {
  const GpuModelId model = c.spec(r.node).model;
  const MigGeometry* geo = MigGeometryFor(model);
  auto s = SizeSlice(d, model, SliceKind::kMig);
  if (!geo || !s.ok()) return 1e9;
  return static_cast<double>(geo->profiles[s->mig_profile].compute_slices) / geo->compute_slices +
         (r.mig_before ? 0.0 : 0.05);
}

}  // namespace

Status ValidateSharingConfig(const SharingConfig& c) {
  if (c.planner.window < 0) return InvalidArgument("planner.window must not be negative");
  if (c.max_reserved_nodes < 0) return InvalidArgument("max_reserved_nodes must not be negative");
  if (!c.selector.allow_mig && c.reconfigure_mig)
    return InvalidArgument("reconfigure_mig needs selector.allow_mig");
  return Status::Ok();
}

SharingAllocator::SharingAllocator(SharingConfig config)
    : config_(config), selector_(config.selector), planner_(config.planner) {}

void SharingAllocator::Observe(const SliceDemand& d) {
  planner_.Observe(d);
}

const std::vector<uint8_t>* SharingAllocator::Allowed(const ClusterState& cluster, WorkloadId id) {
  if (reserved_.empty()) return nullptr;
  allowed_buf_.assign(cluster.num_nodes(), 1);
  for (const auto& [owner, n] : reserved_)
    if (owner != id && n < allowed_buf_.size()) allowed_buf_[n] = 0;
  return &allowed_buf_;
}

void SharingAllocator::Reserve(const ClusterState& cluster, WorkloadId id, const SliceDemand& d) {
  if (reserved_.count(id) || static_cast<int>(reserved_.size()) >= config_.max_reserved_nodes)
    return;
  const int need = std::max(1, d.whole_gpus);
  int best_idle = -1;
  NodeIdx best = 0;
  for (NodeIdx n = 0; n < cluster.num_nodes(); ++n) {
    if (cluster.gpu_count(n) < need) continue;
    const GpuModelId m = cluster.spec(n).model;
    if (d.models != 0 && !((d.models >> m) & 1)) continue;
    if (d.memory_mib > GpuCatalog::Builtin().Get(m).memory_mib) continue;
    if (d.cpu.v > cluster.spec(n).cpu.v || d.host_memory.v > cluster.spec(n).memory.v) continue;
    bool taken = false;
    for (const auto& [owner, r] : reserved_) taken |= r == n;
    if (taken) continue;
    // Fewest workloads to wait for: the node that drains first when durations are unknown.
    int clients = 0;
    for (int g = 0; g < cluster.gpu_count(n); ++g) clients += cluster.gpu(n, g).clients;
    const int idle = 100000 - clients;
    if (idle > best_idle) {
      best_idle = idle;
      best = n;
    }
  }
  if (best_idle >= 0) reserved_[id] = best;
}

PlaceOutcome SharingAllocator::Place(ClusterState& cluster, WorkloadId id, const SliceDemand& d) {
  PlaceOutcome out = PlaceOn(cluster, id, d, Allowed(cluster, id));
  const bool multi = d.whole_gpus > 1;
  if (out.placed) {
    reserved_.erase(id);
  } else if (multi && config_.max_reserved_nodes > 0) {
    Reserve(cluster, id, d);
  }
  return out;
}

PlaceOutcome SharingAllocator::PlaceOn(ClusterState& cluster, WorkloadId id, const SliceDemand& d,
                                       const std::vector<uint8_t>* allowed) {
  PlaceOutcome out;
  Status valid = ValidateSliceDemand(d);
  if (!valid.ok()) {
    out.reason = valid.message();
    return out;
  }
  SliceChoice choice = selector_.Select(cluster, d, allowed);
  if (config_.reconfigure_mig) {
    if (WholeGpuDemand(d)) {
      if (!choice.placed) {
        auto plan = planner_.PlanWholeGpus(cluster, d, allowed);
        if (plan.ok()) out.reconfigs = std::move(*plan);
      }
    } else if (!choice.placed || choice.cost > 1.0 / 7.0) {
      // A re-layout can only help when the best slice in place costs more than the smallest
      // MIG instance; compare the planned instance with it.
      auto plan = planner_.PlanFor(cluster, d, allowed);
      if (plan.ok() && (!choice.placed || PlannedCost(cluster, *plan, d) + 0.02 < choice.cost))
        out.reconfigs.push_back(std::move(*plan));
    }
    for (const auto& r : out.reconfigs) {
      auto diff = cluster.SetMigLayout(r.node, r.gpu, r.mig_after, r.after);
      if (!diff.ok()) {
        out.reason = "internal: planned reconfiguration refused: " + diff.status().message();
        return out;
      }
    }
    if (!out.reconfigs.empty()) choice = selector_.Select(cluster, d, allowed);
  }
  if (!choice.placed) {
    // Leave the cluster as it was: undo the re-layouts (their instances are all still free).
    for (auto it = out.reconfigs.rbegin(); it != out.reconfigs.rend(); ++it)
      (void)cluster.SetMigLayout(it->node, it->gpu, it->mig_before, it->before);
    out.reconfigs.clear();
    out.reason = choice.reason;
    return out;
  }
  Status st = cluster.Allocate(id, d, choice.assignment);
  if (!st.ok()) {
    out.reason = "internal: chosen slice refused: " + st.message();
    return out;
  }
  out.placed = true;
  out.assignment = choice.assignment;
  out.explanation = choice.explanation;
  for (const auto& r : out.reconfigs) out.explanation += "; " + r.reason;
  return out;
}

}  // namespace tessera
