#include "cluster/gpu_slices.h"

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
    case SliceKind::kShare:
      return "share";
  }
  return "?";
}

bool SliceKindSatisfies(SliceKind k, Isolation i) {
  switch (i) {
    case Isolation::kStrict:
      return k == SliceKind::kExclusive || k == SliceKind::kMig;
    case Isolation::kStandard:
      return k != SliceKind::kTimeSlice && k != SliceKind::kShare;
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
    case GpuMode::kShare:
      return "share";
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

int GpuSlices::HeldMilli() const {
  switch (mode) {
    case GpuMode::kIdle:
      return 0;
    case GpuMode::kExclusive:
      return 1000;
    case GpuMode::kShare:
      return milli_used;
    case GpuMode::kMps:
      return 10 * thread_pct_used;
    case GpuMode::kTimeSlice:
      return memory_mib > 0 ? static_cast<int>(1000 * memory_used / memory_mib) : 0;
    case GpuMode::kMig: {
      const MigGeometry* geo = MigGeometryFor(model);
      if (!geo || geo->compute_slices <= 0) return 0;
      int slices = 0;
      for (const MigSlot& s : instances)
        if (s.use != MigSlot::Use::kFree)
          slices += geo->profiles[s.instance.profile].compute_slices;
      return 1000 * slices / geo->compute_slices;
    }
  }
  return 0;
}

int64_t SliceMilli(const GpuSlices& gpu, const SliceAssignment& a) {
  auto share = [](int64_t part, int64_t whole) -> int64_t {
    if (whole <= 0) return 1000;
    return std::min<int64_t>(1000, (1000 * part + whole - 1) / whole);
  };
  switch (a.kind) {
    case SliceKind::kExclusive:
      return 1000LL * std::popcount(a.gpus);
    case SliceKind::kShare:
      return std::clamp<int64_t>(a.gpu_milli, 0, 1000);
    case SliceKind::kMps:
      return std::max<int64_t>(10LL * std::clamp(a.thread_pct, 0, 100),
                               share(a.memory_mib, gpu.memory_mib));
    case SliceKind::kTimeSlice:
      return share(a.memory_mib, gpu.memory_mib);
    case SliceKind::kMig:
    case SliceKind::kMigMps: {
      const MigGeometry* geo = MigGeometryFor(gpu.model);
      const MigSlot* slot = gpu.Instance(a.mig_start);
      if (!geo || !slot || geo->compute_slices <= 0) return 1000;
      const int64_t inst =
          1000LL * geo->profiles[slot->instance.profile].compute_slices / geo->compute_slices;
      if (a.kind == SliceKind::kMig) return inst;
      const int64_t used = std::max<int64_t>(10LL * std::clamp(a.thread_pct, 0, 100),
                                             share(a.memory_mib, slot->memory_mib));
      return (inst * used + 999) / 1000;
    }
  }
  return 1000;
}

const MigSlot* GpuSlices::Instance(int start) const {
  for (const auto& s : instances)
    if (s.instance.start == start) return &s;
  return nullptr;
}

}  // namespace tessera
