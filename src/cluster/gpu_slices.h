// The value types of GPU slices: isolation classes, slice kinds, what a workload asks of a GPU
// (SliceDemand), where a slice sits (SliceAssignment) and the slice state of one GPU (GpuSlices,
// MigSlot). The one ledger that holds them is ClusterState (cluster_state.h).
// Plain values; thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cluster/mig_geometry.h"
#include "cluster/types.h"
#include "core/status.h"

namespace tessera {

// What a workload needs from isolation.
//  kStrict:     hardware isolation only: a MIG instance or exclusive GPU(s).
//  kStandard:   memory-limited sharing: MIG, MPS (with a pinned memory limit) or exclusive.
//  kBestEffort: anything, including time-slicing.
enum class Isolation : uint8_t { kStrict, kStandard, kBestEffort };
const char* IsolationName(Isolation i);  // "strict", "standard", "best-effort"
Result<Isolation> ParseIsolation(std::string_view text);

// kExclusive: whole GPUs (one or more). kShare: a milli-GPU share of one GPU without a memory
// limit (the fill model's GPU share). The others are single-GPU slices.
enum class SliceKind : uint8_t { kExclusive, kMig, kMps, kTimeSlice, kMigMps, kShare };
// "exclusive", "mig", "mps", "timeslice", "mig-mps", "share"
const char* SliceKindName(SliceKind k);
// Whether a slice of this kind satisfies the isolation class.
bool SliceKindSatisfies(SliceKind k, Isolation i);

// What a workload asks for. Every field is optional; see docs/SHARING.md for the defaults:
// nothing at all => one exclusive GPU; compute without memory => memory in proportion.
struct SliceDemand {
  int64_t memory_mib = 0;   // peak GPU memory; 0 = unspecified
  int compute_pct = 0;      // % of one whole GPU's compute (1..100); 0 = unspecified
  int whole_gpus = 0;       // > 0: this many exclusive whole GPUs
  std::string mig_profile;  // explicit MIG profile, e.g. "3g.40gb" (implies kMig)
  Isolation isolation = Isolation::kStandard;
  ModelMask models = 0;  // allowed GPU models; 0 = any
  MilliCpu cpu;          // host CPU
  MiB host_memory;       // host memory
};
// InvalidArgument for negative values, compute_pct > 100, whole GPUs combined with a MIG
// profile or with a fractional compute share, more than kMaxGpusPerNode GPUs.
Status ValidateSliceDemand(const SliceDemand& d);

// Where a workload runs.
struct SliceAssignment {
  SliceKind kind = SliceKind::kExclusive;
  NodeIdx node = 0;
  GpuMask gpus = 0;        // kExclusive: one or more GPUs; every other kind: exactly one
  int mig_start = -1;      // kMig, kMigMps: start of the instance (identifies it on the GPU)
  int thread_pct = 0;      // kMps, kMigMps: active-thread % of the GPU / of the instance
  int64_t memory_mib = 0;  // kMps, kMigMps: pinned memory limit; kTimeSlice: declared memory
  int gpu_milli = 0;       // kShare: milli-GPU of the one GPU (1..999)
  bool operator==(const SliceAssignment&) const = default;
};

enum class GpuMode : uint8_t { kIdle, kExclusive, kMps, kTimeSlice, kMig, kShare };
const char* GpuModeName(GpuMode m);

struct MigSlot {
  MigInstance instance;
  int64_t memory_mib = 0;  // the instance's memory
  enum class Use : uint8_t { kFree, kWhole, kMps } use = Use::kFree;
  int clients = 0;          // kWhole: 1; kMps: MPS clients
  int thread_pct_used = 0;  // kMps
  int64_t memory_used = 0;  // kMps: sum of pinned limits
};

struct GpuSlices {
  GpuModelId model = kNoGpuModel;
  int64_t memory_mib = 0;
  GpuMode mode = GpuMode::kIdle;   // kMig iff MIG mode is enabled
  int clients = 0;                 // workloads on the GPU (non-MIG) or on its instances (MIG)
  int thread_pct_used = 0;         // kMps
  int64_t memory_used = 0;         // kMps: pinned limits; kTimeSlice: declared memory
  int milli_used = 0;              // kShare: milli-GPU held by shares
  std::vector<MigSlot> instances;  // kMig: the layout, sorted by start
  bool blocked = false;            // takes no new slice (ClusterState::SetGpuBlocked)

  bool mig_enabled() const { return mode == GpuMode::kMig; }
  // Milli-GPU free for whole-GPU and milli-share demands: 1000 idle, the unshared rest in share
  // mode, 0 in any other mode (MPS, time-slicing and MIG GPUs take only their own kind) and on
  // a blocked GPU.
  int FreeMilli() const {
    if (blocked) return 0;
    return mode == GpuMode::kIdle ? 1000 : mode == GpuMode::kShare ? 1000 - milli_used : 0;
  }
  // Milli-GPU held by workloads: 1000 exclusive; the shares; MPS thread % x 10; time-slicing
  // declared memory / GPU memory; MIG the compute slices of the used instances / the GPU's.
  bool Idle() const { return clients == 0; }
  MigLayout Layout() const;
  int HeldMilli() const;
  const MigSlot* Instance(int start) const;
};

struct SliceLimits {
  int mps_max_clients = 48;
  int timeslice_max_replicas = 16;
};

// Instances a layout change destroys and creates.
struct MigDiff {
  bool mode_change = false;  // MIG mode enabled or disabled
  MigLayout destroy;
  MigLayout create;
  bool empty() const { return !mode_change && destroy.empty() && create.empty(); }
};

// Milli-GPU the slice `a` holds on `gpu` (the GPU it names; for kExclusive, per GPU of its
// mask), the size quota is charged with: kExclusive 1000 per GPU; kShare its gpu_milli; kMps the
// larger of its thread % and its pinned memory limit as a share of the GPU's memory; kTimeSlice
// its declared memory share; kMig the instance's compute slices over the GPU's; kMigMps the
// instance's share times the larger of its thread % and memory share of the instance. A MIG
// slice whose instance is not in `gpu`'s layout counts as the whole GPU. At most 1000 per GPU.
int64_t SliceMilli(const GpuSlices& gpu, const SliceAssignment& a);

// MPS client limit of an instance with `g` compute slices on a GPU with `total` slices.
inline int MpsClientLimit(int max_clients, int g, int total) {
  return max_clients * g / total;
}

}  // namespace tessera
