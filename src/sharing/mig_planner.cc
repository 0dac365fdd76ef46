#include "sharing/mig_planner.h"

#include <algorithm>
#include <tuple>

#include "sharing/selector.h"

namespace tessera {
namespace {

// Every legal layout per geometry, computed once (the tables are immutable).
const std::vector<MigLayout>& LayoutsOf(const MigGeometry& geo) {
  static const std::vector<std::vector<MigLayout>>* all = [] {
    auto* v = new std::vector<std::vector<MigLayout>>();
    for (const auto& g : AllMigGeometries()) v->push_back(EnumerateMigLayouts(g));
    return v;
  }();
  const auto& geos = AllMigGeometries();
  return (*all)[static_cast<size_t>(&geo - geos.data())];
}

bool Contains(const MigLayout& l, MigInstance in) {
  return std::find(l.begin(), l.end(), in) != l.end();
}

bool HostFits(const ClusterState& c, NodeIdx n, const SliceDemand& d) {
  if (d.cpu.v > c.free_cpu(n) || d.host_memory.v > c.free_host_memory(n)) return false;
  const GpuModelId m = c.spec(n).model;
  return c.gpu_count(n) > 0 && (d.models == 0 || ((d.models >> m) & 1));
}

// Cost of the instance a re-layout creates for `d`, comparable with SliceChoice::cost.
double PlannedCost(const ClusterState& c, const MigReconfig& r, const SliceDemand& d) {
  const GpuModelId model = c.spec(r.node).model;
  const MigGeometry* geo = MigGeometryFor(model);
  auto s = SizeSlice(d, model, SliceKind::kMig);
  if (!geo || !s.ok()) return 1e9;
  return CapacityWeight(c, r.node) *
         (static_cast<double>(geo->profiles[s->mig_profile].compute_slices) / geo->compute_slices +
          (r.mig_before ? 0.0 : 0.05));
}

// No MIG instance costs less than this: the smallest profile (1/7 of a GPU) on the GPU of
// least memory.
double SmallestMigCost(const ClusterState& c) {
  const int64_t largest = c.max_gpu_memory_mib();
  const double w =
      largest > 0 ? static_cast<double>(c.min_gpu_memory_mib()) / static_cast<double>(largest) : 1;
  return w / 7.0;
}

}  // namespace

Result<MigReconfig> MigPlanner::PlanBetterThan(const ClusterState& cluster, const SliceDemand& d,
                                               const SliceChoice& in_place,
                                               const std::vector<uint8_t>* allowed,
                                               const std::vector<GpuMask>* frozen) const {
  if (WantsWholeGpus(d)) return NotFound("whole GPUs are not served by MIG instances");
  if (in_place.placed && in_place.assignment.kind != SliceKind::kExclusive)
    return NotFound("the slice in place shares a GPU");
  if (in_place.placed && in_place.cost <= SmallestMigCost(cluster))
    return NotFound("no MIG instance costs less than the slice in place");
  auto plan = PlanFor(cluster, d, allowed, frozen);
  if (!plan.ok()) return plan.status();
  if (in_place.placed && PlannedCost(cluster, *plan, d) + 0.02 >= in_place.cost)
    return NotFound("the slice in place costs no more than a new MIG instance");
  return plan;
}

void MigPlanner::Observe(const SliceDemand& d) {
  if (config_.window <= 0) return;
  if (recent_.size() < static_cast<size_t>(config_.window)) {
    recent_.push_back(d);
  } else {
    recent_[next_] = d;
    next_ = (next_ + 1) % recent_.size();
  }
}

std::map<int, double> MigPlanner::Mix(const MigGeometry& geo) const {
  std::map<int, double> mix;
  auto model = GpuCatalog::Builtin().Find(geo.model);
  if (!model || recent_.empty()) return mix;
  int counted = 0;
  for (const auto& d : recent_) {
    auto s = SizeSlice(d, *model, SliceKind::kMig);
    if (!s.ok()) continue;
    mix[s->mig_profile] += 1.0;
    ++counted;
  }
  for (auto& [p, w] : mix) w /= counted;
  return mix;
}

Result<MigReconfig> MigPlanner::PlanFor(const ClusterState& cluster, const SliceDemand& d,
                                        const std::vector<uint8_t>* allowed,
                                        const std::vector<GpuMask>* frozen) const {
  // Lower is better: no MIG mode change; when MIG must be turned on, a node with fewer idle
  // GPUs (whole idle nodes stay for multi-GPU work); the value of the free capacity left; the
  // fewest instance changes.
  using Key = std::tuple<int, int, double, int, NodeIdx, int>;
  bool found = false;
  Key best_key{};
  MigReconfig best;
  int mig_nodes = 0, busy_gpus = 0, mig_gpus = 0;
  std::map<const MigGeometry*, std::map<int, double>> mixes;
  for (NodeIdx n = 0; n < cluster.num_nodes(); ++n) {
    if (allowed && (n >= allowed->size() || !(*allowed)[n])) continue;
    if (!HostFits(cluster, n, d)) continue;
    const GpuModelId model = cluster.spec(n).model;
    const MigGeometry* geo = MigGeometryFor(model);
    if (!geo) continue;
    auto sized = SizeSlice(d, model, SliceKind::kMig);
    if (!sized.ok()) continue;
    ++mig_nodes;
    const int need = sized->mig_profile;
    auto mit = mixes.find(geo);
    if (mit == mixes.end()) mit = mixes.emplace(geo, Mix(*geo)).first;
    const auto& mix = mit->second;
    const GpuMask skip = frozen && n < frozen->size() ? (*frozen)[n] : 0;
    int idle_gpus = 0;
    for (int g = 0; g < cluster.gpu_count(n); ++g)
      idle_gpus += cluster.gpu(n, g).mode == GpuMode::kIdle && !cluster.gpu(n, g).blocked;
    for (int g = 0; g < cluster.gpu_count(n); ++g) {
      const GpuSlices& gpu = cluster.gpu(n, g);
      if (((skip >> g) & 1) || gpu.blocked) continue;
      MigLayout busy;
      const MigLayout current = gpu.Layout();
      if (gpu.mig_enabled()) {
        ++mig_gpus;
        for (const auto& slot : gpu.instances)
          if (slot.clients > 0) busy.push_back(slot.instance);
      } else if (!gpu.Idle() || !config_.allow_enable_mig) {
        ++busy_gpus;
        continue;
      }
      const int mode_change = gpu.mig_enabled() ? 0 : 1;
      for (const MigLayout& layout : LayoutsOf(*geo)) {
        bool keeps = true;
        for (const auto& b : busy) keeps = keeps && Contains(layout, b);
        if (!keeps) continue;
        // Value of the free capacity left after the new instance is taken: each free instance
        // counts its compute slices, weighted by how much of the observed mix it serves.
        bool has_need = false;
        double value = 0;
        int used_slices = 0;
        for (const auto& in : layout) {
          used_slices += geo->profiles[in.profile].compute_slices;
          if (Contains(busy, in)) continue;
          if (!has_need && in.profile == need) {
            has_need = true;
            continue;
          }
          auto w = mix.find(in.profile);
          if (w != mix.end()) value += w->second * geo->profiles[in.profile].compute_slices;
        }
        if (!has_need) continue;
        value += 0.001 * used_slices;
        int changes = 0;
        for (const auto& in : current) changes += !Contains(layout, in);
        for (const auto& in : layout) changes += !Contains(current, in);
        if (changes == 0 && !mode_change) continue;  // nothing to do: the selector saw it
        Key key{mode_change, mode_change ? idle_gpus : 0, -value, changes, n, g};
        if (found && !(key < best_key)) continue;
        found = true;
        best_key = key;
        best.node = n;
        best.gpu = g;
        best.mig_before = gpu.mig_enabled();
        best.mig_after = true;
        best.before = current;
        best.after = layout;
      }
    }
  }
  if (!found) {
    if (mig_nodes == 0)
      return NotFound("no MIG-capable node with room for the demand's host CPU/memory and model");
    return NotFound(std::to_string(mig_gpus) +
                    " MIG-enabled GPUs could be re-laid out but hold running instances in the "
                    "way, " +
                    std::to_string(busy_gpus) + " GPUs without MIG are in use");
  }
  auto diff = cluster.PreviewMigLayout(best.node, best.gpu, true, best.after);
  if (!diff.ok()) return diff.status();
  best.diff = *diff;
  const MigGeometry* geo = MigGeometryFor(cluster.spec(best.node).model);
  auto sized = SizeSlice(d, cluster.spec(best.node).model, SliceKind::kMig);
  best.reason = "create " + geo->profiles[sized->mig_profile].name + " for a pending " +
                IsolationName(d.isolation) + " workload" +
                (best.mig_before ? "" : "; MIG enabled on an idle GPU") + "; destroys " +
                std::to_string(best.diff.destroy.size()) + " free instance(s), layout " +
                MigLayoutString(*geo, best.after);
  return best;
}

Result<std::vector<MigReconfig>> MigPlanner::PlanWholeGpus(
    const ClusterState& cluster, const SliceDemand& d, const std::vector<uint8_t>* allowed,
    const std::vector<GpuMask>* frozen) const {
  const int want = std::max(1, d.whole_gpus);
  for (NodeIdx n = 0; n < cluster.num_nodes(); ++n) {
    if (allowed && (n >= allowed->size() || !(*allowed)[n])) continue;
    if (!HostFits(cluster, n, d) || cluster.gpu_count(n) < want) continue;
    int idle = 0;
    std::vector<int> empty_mig;
    const GpuMask skip = frozen && n < frozen->size() ? (*frozen)[n] : 0;
    for (int g = 0; g < cluster.gpu_count(n); ++g) {
      const GpuSlices& gpu = cluster.gpu(n, g);
      if (gpu.blocked) continue;
      if (gpu.mode == GpuMode::kIdle)
        ++idle;
      else if (gpu.mig_enabled() && gpu.Idle() && !((skip >> g) & 1))
        empty_mig.push_back(g);
    }
    if (idle >= want || idle + static_cast<int>(empty_mig.size()) < want) continue;
    std::vector<MigReconfig> out;
    for (int i = 0; i < want - idle; ++i) {
      MigReconfig r;
      r.node = n;
      r.gpu = empty_mig[i];
      r.mig_before = true;
      r.mig_after = false;
      r.before = cluster.gpu(n, r.gpu).Layout();
      auto diff = cluster.PreviewMigLayout(n, r.gpu, false, {});
      if (!diff.ok()) return diff.status();
      r.diff = *diff;
      r.reason = "disable MIG on an empty GPU for a " + std::to_string(want) + "-GPU workload";
      out.push_back(std::move(r));
    }
    return out;
  }
  return NotFound("no node can free " + std::to_string(want) +
                  " whole GPU(s) without disturbing running work");
}

}  // namespace tessera
