#include "cluster/gpu_slices.h"

#include "cluster/cluster_state.h"

#include <algorithm>
#include <bit>

namespace tessera {

const char* IsolationName(Isolation i) {
  switch (i) {
    case Isolation::kStrict:
      return "strict";
    case Isolation::kStandard:
      return "standard";
    case Isolation::kBestEffort:
      return "best-effort";
  }
  return "?";
}

Result<Isolation> ParseIsolation(std::string_view text) {
  if (text == "strict") return Isolation::kStrict;
  if (text == "standard") return Isolation::kStandard;
  if (text == "best-effort") return Isolation::kBestEffort;
  return InvalidArgument("unknown isolation class '" + std::string(text) +
                         "' (known: strict, standard, best-effort)");
}

const char* SliceKindName(SliceKind k) {
  switch (k) {
    case SliceKind::kExclusive:
      return "exclusive";
    case SliceKind::kMig:
      return "mig";
    case SliceKind::kMps:
      return "mps";
    case SliceKind::kTimeSlice:
      return "timeslice";
    case SliceKind::kMigMps:
      return "mig-mps";
  }
  return "?";
}

bool SliceKindSatisfies(SliceKind k, Isolation i) {
  switch (i) {
    case Isolation::kStrict:
      return k == SliceKind::kExclusive || k == SliceKind::kMig;
    case Isolation::kStandard:
      return k != SliceKind::kTimeSlice;
    case Isolation::kBestEffort:
      return true;
  }
  return false;
}

const char* GpuModeName(GpuMode m) {
  switch (m) {
    case GpuMode::kIdle:
      return "idle";
    case GpuMode::kExclusive:
      return "exclusive";
    case GpuMode::kMps:
      return "mps";
    case GpuMode::kTimeSlice:
      return "timeslice";
    case GpuMode::kMig:
      return "mig";
  }
  return "?";
}

Status ValidateSliceDemand(const SliceDemand& d) {
  if (d.memory_mib < 0) return InvalidArgument("GPU memory must not be negative");
  if (d.compute_pct < 0 || d.compute_pct > 100)
    return InvalidArgument("compute share " + std::to_string(d.compute_pct) + "% outside 0..100");
  if (d.whole_gpus < 0 || d.whole_gpus > kMaxGpusPerNode)
    return InvalidArgument("whole GPUs " + std::to_string(d.whole_gpus) + " outside 0.." +
                           std::to_string(kMaxGpusPerNode));
  if (d.whole_gpus > 0 && !d.mig_profile.empty())
    return InvalidArgument("whole GPUs and a MIG profile cannot be combined");
  if (d.whole_gpus > 0 && d.compute_pct > 0 && d.compute_pct < 100)
    return InvalidArgument("whole GPUs and a fractional compute share cannot be combined");
  if (d.cpu.v < 0 || d.host_memory.v < 0)
    return InvalidArgument("host CPU and memory must not be negative");
  return Status::Ok();
}

MigLayout GpuSlices::Layout() const {
  MigLayout l;
  for (const auto& s : instances) l.push_back(s.instance);
  return l;
}

const MigSlot* GpuSlices::Instance(int start) const {
  for (const auto& s : instances)
    if (s.instance.start == start) return &s;
  return nullptr;
}

Result<NodeIdx> SliceCluster::AddNode(NodeSpec spec) {
  if (by_name_.count(spec.name)) return AlreadyExists("duplicate node name '" + spec.name + "'");
  TESSERA_RETURN_IF_ERROR(ValidateNodeSpec(spec));
  const GpuCatalog& cat = GpuCatalog::Builtin();
  if (spec.model != kNoGpuModel && cat.Get(spec.model).memory_mib <= 0)
    return InvalidArgument("node '" + spec.name + "': GPU model " + cat.Get(spec.model).name +
                           " has no known memory size; slices need one");
  std::vector<GpuSlices> gpus(spec.gpu_count);
  for (auto& g : gpus) {
    g.model = spec.model;
    g.memory_mib = cat.Get(spec.model).memory_mib;
  }
  const NodeIdx idx = static_cast<NodeIdx>(specs_.size());
  by_name_.emplace(spec.name, idx);
  free_cpu_.push_back(spec.cpu.v);
  free_mem_.push_back(spec.memory.v);
  specs_.push_back(std::move(spec));
  gpus_.push_back(std::move(gpus));
  return idx;
}

Status SliceCluster::CheckFit(const SliceDemand& d, const SliceAssignment& a) const {
  if (a.node >= specs_.size()) return NotFound("no node index " + std::to_string(a.node));
  const auto& gpus = gpus_[a.node];
  const std::string where = "node '" + specs_[a.node].name + "'";
  if (d.cpu.v < 0 || d.host_memory.v < 0 || a.thread_pct < 0 || a.memory_mib < 0)
    return InvalidArgument("negative request");
  if (d.cpu.v > free_cpu_[a.node]) return ResourceExhausted(where + ": insufficient CPU");
  if (d.host_memory.v > free_mem_[a.node])
    return ResourceExhausted(where + ": insufficient host memory");
  if (a.gpus == 0) return InvalidArgument("an assignment names no GPU");
  if (a.gpus >> gpus.size()) return InvalidArgument(where + ": assignment names a GPU it lacks");
  if (d.models != 0 && !((d.models >> gpus[0].model) & 1))
    return FailedPrecondition(where + ": GPU model not allowed");
  const int n = std::popcount(a.gpus);
  if (a.kind != SliceKind::kExclusive && n != 1)
    return InvalidArgument(std::string(SliceKindName(a.kind)) + " slice must name exactly one GPU");
  const int g = std::countr_zero(a.gpus);
  const GpuSlices& gpu = gpus[g];
  const std::string gname = where + " GPU " + std::to_string(g);
  switch (a.kind) {
    case SliceKind::kExclusive:
      for (int i = 0; i < static_cast<int>(gpus.size()); ++i) {
        if (!((a.gpus >> i) & 1)) continue;
        if (gpus[i].mode == GpuMode::kMig)
          return FailedPrecondition(where + " GPU " + std::to_string(i) + " is in MIG mode");
        if (!gpus[i].Idle())
          return ResourceExhausted(where + " GPU " + std::to_string(i) + " is in use (" +
                                   GpuModeName(gpus[i].mode) + ")");
      }
      return Status::Ok();
    case SliceKind::kMps: {
      if (gpu.mode != GpuMode::kIdle && gpu.mode != GpuMode::kMps)
        return FailedPrecondition(gname + " is " + GpuModeName(gpu.mode) + ", not MPS");
      if (a.thread_pct < 1 || a.thread_pct > 100)
        return InvalidArgument("MPS active-thread % must be 1..100");
      if (gpu.clients + 1 > limits_.mps_max_clients)
        return ResourceExhausted(gname + ": MPS client limit " +
                                 std::to_string(limits_.mps_max_clients) + " reached");
      if (gpu.thread_pct_used + a.thread_pct > 100)
        return ResourceExhausted(gname + ": " + std::to_string(100 - gpu.thread_pct_used) +
                                 "% of threads free, " + std::to_string(a.thread_pct) + "% asked");
      if (gpu.memory_used + a.memory_mib > gpu.memory_mib)
        return ResourceExhausted(gname + ": " + std::to_string(gpu.memory_mib - gpu.memory_used) +
                                 " MiB free for MPS limits, " + std::to_string(a.memory_mib) +
                                 " MiB asked");
      if (a.memory_mib <= 0) return InvalidArgument("an MPS client needs a pinned memory limit");
      return Status::Ok();
    }
    case SliceKind::kTimeSlice:
      if (gpu.mode != GpuMode::kIdle && gpu.mode != GpuMode::kTimeSlice)
        return FailedPrecondition(gname + " is " + GpuModeName(gpu.mode) + ", not time-sliced");
      if (gpu.clients + 1 > limits_.timeslice_max_replicas)
        return ResourceExhausted(gname + ": all " + std::to_string(limits_.timeslice_max_replicas) +
                                 " time-slice replicas taken");
      if (gpu.memory_used + a.memory_mib > gpu.memory_mib)
        return ResourceExhausted(gname + ": declared memory would exceed the GPU's");
      return Status::Ok();
    case SliceKind::kMig:
    case SliceKind::kMigMps: {
      if (gpu.mode != GpuMode::kMig) return FailedPrecondition(gname + " is not in MIG mode");
      const MigSlot* slot = gpu.Instance(a.mig_start);
      if (!slot)
        return NotFound(gname + ": no MIG instance at start " + std::to_string(a.mig_start));
      const MigGeometry* geo = MigGeometryFor(gpu.model);
      const MigProfile& prof = geo->profiles[slot->instance.profile];
      const std::string iname = gname + " " + prof.name + "@" + std::to_string(a.mig_start);
      if (a.kind == SliceKind::kMig) {
        if (slot->use != MigSlot::Use::kFree) return ResourceExhausted(iname + " is in use");
        return Status::Ok();
      }
      if (slot->use == MigSlot::Use::kWhole) return ResourceExhausted(iname + " is held whole");
      const int limit =
          MpsClientLimit(limits_.mps_max_clients, prof.compute_slices, geo->compute_slices);
      if (slot->clients + 1 > limit)
        return ResourceExhausted(iname + ": MPS client limit " + std::to_string(limit) +
                                 " reached");
      if (a.thread_pct < 1 || a.thread_pct > 100)
        return InvalidArgument("MPS active-thread % must be 1..100");
      if (slot->thread_pct_used + a.thread_pct > 100)
        return ResourceExhausted(iname + ": not enough threads free");
      if (a.memory_mib <= 0) return InvalidArgument("an MPS client needs a pinned memory limit");
      if (slot->memory_used + a.memory_mib > slot->memory_mib)
        return ResourceExhausted(iname + ": MPS memory limits would exceed the instance's");
      return Status::Ok();
    }
  }
  return InvalidArgument("unknown slice kind");
}

void SliceCluster::Apply(const SliceDemand& d, const SliceAssignment& a, int sign) {
  free_cpu_[a.node] -= sign * d.cpu.v;
  free_mem_[a.node] -= sign * d.host_memory.v;
  auto& gpus = gpus_[a.node];
  if (a.kind == SliceKind::kExclusive) {
    for (int i = 0; i < static_cast<int>(gpus.size()); ++i) {
      if (!((a.gpus >> i) & 1)) continue;
      gpus[i].clients += sign;
      gpus[i].mode = gpus[i].clients ? GpuMode::kExclusive : GpuMode::kIdle;
    }
    return;
  }
  GpuSlices& gpu = gpus[std::countr_zero(a.gpus)];
  gpu.clients += sign;
  switch (a.kind) {
    case SliceKind::kMps:
    case SliceKind::kTimeSlice:
      gpu.thread_pct_used += sign * (a.kind == SliceKind::kMps ? a.thread_pct : 0);
      gpu.memory_used += sign * a.memory_mib;
      gpu.mode = gpu.clients == 0            ? GpuMode::kIdle
                 : a.kind == SliceKind::kMps ? GpuMode::kMps
                                             : GpuMode::kTimeSlice;
      break;
    case SliceKind::kMig:
    case SliceKind::kMigMps:
      for (auto& slot : gpu.instances) {
        if (slot.instance.start != a.mig_start) continue;
        slot.clients += sign;
        if (a.kind == SliceKind::kMigMps) {
          slot.thread_pct_used += sign * a.thread_pct;
          slot.memory_used += sign * a.memory_mib;
        }
        slot.use = slot.clients == 0           ? MigSlot::Use::kFree
                   : a.kind == SliceKind::kMig ? MigSlot::Use::kWhole
                                               : MigSlot::Use::kMps;
      }
      break;
    default:
      break;
  }
}

Status SliceCluster::Allocate(WorkloadId id, const SliceDemand& d, const SliceAssignment& a) {
  if (ledger_.count(id)) return AlreadyExists("workload " + std::to_string(id) + " allocated");
  TESSERA_RETURN_IF_ERROR(CheckFit(d, a));
  Apply(d, a, +1);
  ledger_.emplace(id, Entry{d, a});
  return Status::Ok();
}

Status SliceCluster::Release(WorkloadId id) {
  auto it = ledger_.find(id);
  if (it == ledger_.end()) return NotFound("workload " + std::to_string(id) + " not allocated");
  Apply(it->second.demand, it->second.assignment, -1);
  ledger_.erase(it);
  return Status::Ok();
}

const SliceAssignment* SliceCluster::Find(WorkloadId id) const {
  auto it = ledger_.find(id);
  return it == ledger_.end() ? nullptr : &it->second.assignment;
}

std::vector<WorkloadId> SliceCluster::OnGpu(NodeIdx n, int g) const {
  std::vector<WorkloadId> out;
  for (const auto& [id, e] : ledger_)
    if (e.assignment.node == n && ((e.assignment.gpus >> g) & 1)) out.push_back(id);
  std::sort(out.begin(), out.end());
  return out;
}

Result<MigDiff> SliceCluster::PreviewMigLayout(NodeIdx n, int g, bool mig_enabled,
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

Result<MigDiff> SliceCluster::SetMigLayout(NodeIdx n, int g, bool mig_enabled,
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
  gpu.instances = std::move(kept);
  gpu.mode = mig_enabled ? GpuMode::kMig : GpuMode::kIdle;
  ++reconfigurations_;
  return diff;
}

Status SliceCluster::CheckInvariants() const {
  std::vector<int64_t> cpu(specs_.size()), mem(specs_.size());
  std::vector<std::vector<GpuSlices>> expect = gpus_;
  for (size_t n = 0; n < specs_.size(); ++n) {
    cpu[n] = specs_[n].cpu.v;
    mem[n] = specs_[n].memory.v;
    for (auto& g : expect[n]) {
      g.clients = 0;
      g.thread_pct_used = 0;
      g.memory_used = 0;
      for (auto& s : g.instances) s = MigSlot{s.instance, s.memory_mib};
    }
  }
  for (const auto& [id, e] : ledger_) {
    const auto& a = e.assignment;
    cpu[a.node] -= e.demand.cpu.v;
    mem[a.node] -= e.demand.host_memory.v;
    for (int g = 0; g < static_cast<int>(expect[a.node].size()); ++g) {
      if (!((a.gpus >> g) & 1)) continue;
      GpuSlices& gpu = expect[a.node][g];
      ++gpu.clients;
      if (a.kind == SliceKind::kMps || a.kind == SliceKind::kTimeSlice) {
        gpu.memory_used += a.memory_mib;
        if (a.kind == SliceKind::kMps) gpu.thread_pct_used += a.thread_pct;
      }
      if (a.kind == SliceKind::kMig || a.kind == SliceKind::kMigMps) {
        bool found = false;
        for (auto& s : gpu.instances) {
          if (s.instance.start != a.mig_start) continue;
          found = true;
          ++s.clients;
          if (a.kind == SliceKind::kMigMps) {
            s.thread_pct_used += a.thread_pct;
            s.memory_used += a.memory_mib;
          }
        }
        if (!found)
          return Internal("workload " + std::to_string(id) + " on a missing MIG instance");
      }
    }
  }
  for (size_t n = 0; n < specs_.size(); ++n) {
    const std::string where = "node '" + specs_[n].name + "'";
    if (cpu[n] != free_cpu_[n] || mem[n] != free_mem_[n])
      return Internal(where + ": host resources differ from the ledger");
    if (cpu[n] < 0 || mem[n] < 0) return Internal(where + ": host resources over-allocated");
    for (size_t g = 0; g < expect[n].size(); ++g) {
      const GpuSlices& e = expect[n][g];
      const GpuSlices& s = gpus_[n][g];
      const std::string gname = where + " GPU " + std::to_string(g);
      if (e.clients != s.clients || e.thread_pct_used != s.thread_pct_used ||
          e.memory_used != s.memory_used)
        return Internal(gname + ": counters differ from the ledger");
      if (s.mode == GpuMode::kExclusive && s.clients != 1)
        return Internal(gname + ": exclusive GPU with " + std::to_string(s.clients) + " workloads");
      if (s.mode != GpuMode::kMig && (s.mode == GpuMode::kIdle) != (s.clients == 0))
        return Internal(gname + ": mode does not match occupancy");
      if (s.mode == GpuMode::kMps && (s.thread_pct_used > 100 || s.memory_used > s.memory_mib ||
                                      s.clients > limits_.mps_max_clients))
        return Internal(gname + ": MPS limits over-allocated");
      if (s.mode == GpuMode::kTimeSlice &&
          (s.memory_used > s.memory_mib || s.clients > limits_.timeslice_max_replicas))
        return Internal(gname + ": time-slice replicas over-allocated");
      if (s.mode != GpuMode::kMig && !s.instances.empty())
        return Internal(gname + ": MIG instances on a MIG-disabled GPU");
      if (s.mode == GpuMode::kMig) {
        const MigGeometry* geo = MigGeometryFor(s.model);
        if (!geo) return Internal(gname + ": MIG mode on a model without MIG");
        Status st = CheckMigLayout(*geo, s.Layout());
        if (!st.ok()) return Internal(gname + ": illegal layout: " + st.message());
        for (size_t i = 0; i < s.instances.size(); ++i) {
          const MigSlot& a = s.instances[i];
          const MigSlot& b = e.instances[i];
          if (a.clients != b.clients || a.thread_pct_used != b.thread_pct_used ||
              a.memory_used != b.memory_used)
            return Internal(gname + ": instance counters differ from the ledger");
          if (a.use == MigSlot::Use::kWhole && a.clients != 1)
            return Internal(gname + ": whole instance shared");
          if (a.memory_used > a.memory_mib || a.thread_pct_used > 100)
            return Internal(gname + ": MPS limits exceed an instance");
          if ((a.use == MigSlot::Use::kFree) != (a.clients == 0))
            return Internal(gname + ": instance use does not match occupancy");
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace tessera
