// ClusterState: the slice checks (any kind of slice) and MIG layout changes.
#include <algorithm>
#include <bit>

#include "cluster/cluster_state.h"

namespace tessera {

Status ClusterState::CheckFit(const SliceDemand& d, const SliceAssignment& a) const {
  if (a.node >= specs_.size()) return NotFound("no node index " + std::to_string(a.node));
  const auto& gpus = gpus_[a.node];
  // Names are built only for the error: the selector calls this for every candidate.
  auto where = [&] { return "node '" + specs_[a.node].name + "'"; };
  if (d.cpu.v < 0 || d.host_memory.v < 0 || a.thread_pct < 0 || a.memory_mib < 0)
    return InvalidArgument("negative request");
  if (d.cpu.v > free_[a.node].cpu) return ResourceExhausted(where() + ": insufficient CPU");
  if (d.host_memory.v > free_[a.node].memory)
    return ResourceExhausted(where() + ": insufficient host memory");
  if (a.gpus == 0) return InvalidArgument("an assignment names no GPU");
  if (a.gpus >> gpus.size()) return InvalidArgument(where() + ": assignment names a GPU it lacks");
  for (int i = 0; i < static_cast<int>(gpus.size()); ++i)
    if (((a.gpus >> i) & 1) && gpus[i].blocked)
      return FailedPrecondition(where() + " GPU " + std::to_string(i) + " is blocked (unhealthy)");
  if (d.models != 0 && !((d.models >> gpus[0].model) & 1))
    return FailedPrecondition(where() + ": GPU model not allowed");
  const int n = std::popcount(a.gpus);
  if (a.kind != SliceKind::kExclusive && n != 1)
    return InvalidArgument(std::string(SliceKindName(a.kind)) + " slice must name exactly one GPU");
  const int g = std::countr_zero(a.gpus);
  const GpuSlices& gpu = gpus[g];
  auto gname = [&] { return where() + " GPU " + std::to_string(g); };
  switch (a.kind) {
    case SliceKind::kExclusive:
      for (int i = 0; i < static_cast<int>(gpus.size()); ++i) {
        if (!((a.gpus >> i) & 1)) continue;
        if (gpus[i].mode == GpuMode::kMig)
          return FailedPrecondition(where() + " GPU " + std::to_string(i) + " is in MIG mode");
        if (!gpus[i].Idle())
          return ResourceExhausted(where() + " GPU " + std::to_string(i) + " is in use (" +
                                   GpuModeName(gpus[i].mode) + ")");
      }
      return Status::Ok();
    case SliceKind::kShare:
      if (gpu.mode != GpuMode::kIdle && gpu.mode != GpuMode::kShare)
        return FailedPrecondition(gname() + " is " + GpuModeName(gpu.mode) + ", not shared");
      if (a.gpu_milli < 1 || a.gpu_milli > 999)
        return InvalidArgument("a GPU share must be 1..999 milli-GPU");
      if (gpu.milli_used + a.gpu_milli > 1000)
        return ResourceExhausted(gname() + ": " + std::to_string(1000 - gpu.milli_used) +
                                 " milli-GPU free, " + std::to_string(a.gpu_milli) + " asked");
      return Status::Ok();
    case SliceKind::kMps: {
      if (gpu.mode != GpuMode::kIdle && gpu.mode != GpuMode::kMps)
        return FailedPrecondition(gname() + " is " + GpuModeName(gpu.mode) + ", not MPS");
      if (a.thread_pct < 1 || a.thread_pct > 100)
        return InvalidArgument("MPS active-thread % must be 1..100");
      if (gpu.clients + 1 > limits_.mps_max_clients)
        return ResourceExhausted(gname() + ": MPS client limit " +
                                 std::to_string(limits_.mps_max_clients) + " reached");
      if (gpu.thread_pct_used + a.thread_pct > 100)
        return ResourceExhausted(gname() + ": " + std::to_string(100 - gpu.thread_pct_used) +
                                 "% of threads free, " + std::to_string(a.thread_pct) + "% asked");
      if (gpu.memory_used + a.memory_mib > gpu.memory_mib)
        return ResourceExhausted(gname() + ": " + std::to_string(gpu.memory_mib - gpu.memory_used) +
                                 " MiB free for MPS limits, " + std::to_string(a.memory_mib) +
                                 " MiB asked");
      if (a.memory_mib <= 0) return InvalidArgument("an MPS client needs a pinned memory limit");
      return Status::Ok();
    }
    case SliceKind::kTimeSlice:
      if (gpu.mode != GpuMode::kIdle && gpu.mode != GpuMode::kTimeSlice)
        return FailedPrecondition(gname() + " is " + GpuModeName(gpu.mode) + ", not time-sliced");
      if (gpu.clients + 1 > limits_.timeslice_max_replicas)
        return ResourceExhausted(gname() + ": all " +
                                 std::to_string(limits_.timeslice_max_replicas) +
                                 " time-slice replicas taken");
      if (gpu.memory_used + a.memory_mib > gpu.memory_mib)
        return ResourceExhausted(gname() + ": declared memory would exceed the GPU's");
      return Status::Ok();
    case SliceKind::kMig:
    case SliceKind::kMigMps: {
      if (gpu.mode != GpuMode::kMig) return FailedPrecondition(gname() + " is not in MIG mode");
      const MigSlot* slot = gpu.Instance(a.mig_start);
      if (!slot)
        return NotFound(gname() + ": no MIG instance at start " + std::to_string(a.mig_start));
      const MigGeometry* geo = MigGeometryFor(gpu.model);
      const MigProfile& prof = geo->profiles[slot->instance.profile];
      auto iname = [&] { return gname() + " " + prof.name + "@" + std::to_string(a.mig_start); };
      if (a.kind == SliceKind::kMig) {
        if (slot->use != MigSlot::Use::kFree) return ResourceExhausted(iname() + " is in use");
        return Status::Ok();
      }
      if (slot->use == MigSlot::Use::kWhole) return ResourceExhausted(iname() + " is held whole");
      const int limit =
          MpsClientLimit(limits_.mps_max_clients, prof.compute_slices, geo->compute_slices);
      if (slot->clients + 1 > limit)
        return ResourceExhausted(iname() + ": MPS client limit " + std::to_string(limit) +
                                 " reached");
      if (a.thread_pct < 1 || a.thread_pct > 100)
        return InvalidArgument("MPS active-thread % must be 1..100");
      if (slot->thread_pct_used + a.thread_pct > 100)
        return ResourceExhausted(iname() + ": not enough threads free");
      if (a.memory_mib <= 0) return InvalidArgument("an MPS client needs a pinned memory limit");
      if (slot->memory_used + a.memory_mib > slot->memory_mib)
        return ResourceExhausted(iname() + ": MPS memory limits would exceed the instance's");
      return Status::Ok();
    }
  }
  return InvalidArgument("unknown slice kind");
}

Result<bool> ClusterState::ConformGpu(NodeIdx n, int g, std::optional<MigInstance> inst) {
  if (n >= specs_.size() || g < 0 || g >= gpu_count(n))
    return NotFound("no GPU " + std::to_string(g) + " on node index " + std::to_string(n));
  const GpuSlices& gpu = gpus_[n][g];
  if (!inst) {
    if (!gpu.mig_enabled()) return false;
    TESSERA_RETURN_IF_ERROR(SetMigLayout(n, g, false, {}).status());
    return true;
  }
  const MigGeometry* geo = MigGeometryFor(gpu.model);
  if (!geo) return FailedPrecondition(GpuCatalog::Builtin().Get(gpu.model).name + " has no MIG");
  if (gpu.mig_enabled()) {
    const MigSlot* slot = gpu.Instance(inst->start);
    if (slot && slot->instance == *inst) return false;
  }
  MigLayout layout;
  for (const MigSlot& slot : gpu.instances)
    if (slot.clients > 0) layout.push_back(slot.instance);
  TESSERA_RETURN_IF_ERROR(CheckMigAdd(*geo, layout, *inst));
  layout.push_back(*inst);
  for (const MigSlot& slot : gpu.instances)
    if (slot.clients == 0 && CheckMigAdd(*geo, layout, slot.instance).ok())
      layout.push_back(slot.instance);
  std::sort(layout.begin(), layout.end());
  TESSERA_RETURN_IF_ERROR(SetMigLayout(n, g, true, layout).status());
  return true;
}

Result<MigDiff> ClusterState::PreviewMigLayout(NodeIdx n, int g, bool mig_enabled,
                                               const MigLayout& layout) const {
  if (n >= specs_.size() || g < 0 || g >= gpu_count(n))
    return NotFound("no GPU " + std::to_string(g) + " on node index " + std::to_string(n));
  const GpuSlices& gpu = gpus_[n][g];
  const std::string gname = "node '" + specs_[n].name + "' GPU " + std::to_string(g);
  const MigGeometry* geo = MigGeometryFor(gpu.model);
  if (!geo) {
    if (mig_enabled)
      return FailedPrecondition(gname + ": " + GpuCatalog::Builtin().Get(gpu.model).name +
                                " does not support MIG");
    return MigDiff{};
  }
  if (!mig_enabled && !layout.empty())
    return InvalidArgument(gname + ": a MIG-disabled GPU has no instances");
  MigLayout sorted = layout;
  std::sort(sorted.begin(), sorted.end(), [](MigInstance a, MigInstance b) {
    return a.start != b.start ? a.start < b.start : a.profile < b.profile;
  });
  TESSERA_RETURN_IF_ERROR(CheckMigLayout(*geo, sorted));
  MigDiff diff;
  diff.mode_change = gpu.mig_enabled() != mig_enabled;
  if (diff.mode_change && !gpu.Idle())
    return FailedPrecondition(gname + ": changing MIG mode needs the GPU idle (" +
                              std::to_string(gpu.clients) + " workloads)");
  const MigLayout before = gpu.Layout();
  for (const auto& slot : gpu.instances) {
    if (std::find(sorted.begin(), sorted.end(), slot.instance) != sorted.end()) continue;
    if (slot.clients > 0)
      return FailedPrecondition(gname + ": instance " + geo->profiles[slot.instance.profile].name +
                                "@" + std::to_string(slot.instance.start) + " is in use by " +
                                std::to_string(slot.clients) + " workload(s)");
    diff.destroy.push_back(slot.instance);
  }
  for (const auto& in : sorted)
    if (std::find(before.begin(), before.end(), in) == before.end()) diff.create.push_back(in);
  return diff;
}

Result<MigDiff> ClusterState::SetMigLayout(NodeIdx n, int g, bool mig_enabled,
                                           const MigLayout& layout) {
  auto diff = PreviewMigLayout(n, g, mig_enabled, layout);
  if (!diff.ok() || diff->empty()) return diff;
  GpuSlices& gpu = gpus_[n][g];
  const MigGeometry* geo = MigGeometryFor(gpu.model);
  std::vector<MigSlot> kept;
  for (auto& slot : gpu.instances) {
    if (std::find(diff->destroy.begin(), diff->destroy.end(), slot.instance) == diff->destroy.end())
      kept.push_back(slot);
  }
  for (const auto& in : diff->create) {
    MigSlot s;
    s.instance = in;
    s.memory_mib = geo->profiles[in.profile].memory_mib;
    kept.push_back(s);
  }
  std::sort(kept.begin(), kept.end(),
            [](const MigSlot& a, const MigSlot& b) { return a.instance.start < b.instance.start; });
  const int held_before = gpu.HeldMilli();
  gpu.instances = std::move(kept);
  gpu.mode = mig_enabled ? GpuMode::kMig : GpuMode::kIdle;
  Sync(n, g, held_before);
  Touch(n);
  ++reconfigurations_;
  return diff;
}

}  // namespace tessera
