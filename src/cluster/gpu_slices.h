// GPU slices as allocatable targets: exclusive GPUs, MIG instances, MPS shares (also inside a
// MIG instance) and memory-guarded time-slice replicas, with a ledger whose invariants extend
// ClusterState's to every kind of slice.
//
// Contract (SliceCluster):
//  * A non-MIG GPU is in one mode at a time: idle, exclusive (one workload), MPS (clients with an
//    active-thread % and a pinned memory limit) or time-slicing (replicas with declared memory).
//    The mode is set by the first occupant and returns to idle when the last one leaves.
//  * MPS: at most `mps_max_clients` clients per GPU (48 on Volta and later), thread % summing to
//    at most 100, pinned memory limits summing to at most the GPU's memory.
//  * Time-slicing: at most `timeslice_max_replicas` replicas; declared memory sums to at most
//    the GPU's memory (a replica may declare 0: an unguarded replica, as the NVIDIA device
//    plugin hands out; the caller then owns the risk and measures it).
//  * A MIG-enabled GPU holds a legal layout (mig_geometry.h). Each instance is free, held whole
//    by one workload, or runs MPS clients (client limit scaled by the instance's compute
//    slices: floor(48 * G / compute slices of the GPU)); MPS limits inside an instance sum to at
//    most its memory and 100 % of its threads.
//  * Host CPU and memory never go negative. Allocate checks everything before changing anything.
//    Release restores the exact previous state.
//  * SetMigLayout changes a GPU's layout only if no instance it destroys is in use; enabling or
//    disabling MIG mode needs the whole GPU idle. It reports the instances destroyed and created.
// Not thread-safe; callers serialise access.
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

enum class SliceKind : uint8_t { kExclusive, kMig, kMps, kTimeSlice, kMigMps };
const char* SliceKindName(SliceKind k);  // "exclusive", "mig", "mps", "timeslice", "mig-mps"
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
  bool operator==(const SliceAssignment&) const = default;
};

enum class GpuMode : uint8_t { kIdle, kExclusive, kMps, kTimeSlice, kMig };
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
  std::vector<MigSlot> instances;  // kMig: the layout, sorted by start

  bool mig_enabled() const { return mode == GpuMode::kMig; }
  bool Idle() const { return clients == 0; }
  MigLayout Layout() const;
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

class SliceCluster {
 public:
  explicit SliceCluster(SliceLimits limits = {}) : limits_(limits) {}

  // Adds a node, all GPUs idle with MIG disabled. Same validation as ClusterState::AddNode.
  Result<NodeIdx> AddNode(NodeSpec spec);

  size_t num_nodes() const { return specs_.size(); }
  const NodeSpec& spec(NodeIdx n) const { return specs_[n]; }
  int gpu_count(NodeIdx n) const { return static_cast<int>(gpus_[n].size()); }
  const GpuSlices& gpu(NodeIdx n, int g) const { return gpus_[n][g]; }
  int64_t free_cpu(NodeIdx n) const { return free_cpu_[n]; }
  int64_t free_host_memory(NodeIdx n) const { return free_mem_[n]; }
  const SliceLimits& limits() const { return limits_; }

  // Whether the workload (host CPU/memory from `d`; GPU part from `a`) fits now. Ok or the
  // reason. Checks physical invariants only; whether `a` suits `d`'s isolation is the caller's.
  Status CheckFit(const SliceDemand& d, const SliceAssignment& a) const;
  Status Allocate(WorkloadId id, const SliceDemand& d, const SliceAssignment& a);
  Status Release(WorkloadId id);
  const SliceAssignment* Find(WorkloadId id) const;
  size_t num_allocations() const { return ledger_.size(); }
  // Workloads on node n, GPU g (any kind), in id order.
  std::vector<WorkloadId> OnGpu(NodeIdx n, int g) const;

  // Applies a new MIG state to one GPU (see the contract above). mig_enabled = false requires
  // an empty layout.
  Result<MigDiff> SetMigLayout(NodeIdx n, int g, bool mig_enabled, const MigLayout& layout);
  // The diff SetMigLayout would apply, or the reason it cannot.
  Result<MigDiff> PreviewMigLayout(NodeIdx n, int g, bool mig_enabled,
                                   const MigLayout& layout) const;
  // Number of SetMigLayout calls that changed something.
  int64_t reconfigurations() const { return reconfigurations_; }

  // Recomputes every GPU and node from the ledger; Ok or the first discrepancy.
  Status CheckInvariants() const;

 private:
  struct Entry {
    SliceDemand demand;
    SliceAssignment assignment;
  };
  void Apply(const SliceDemand& d, const SliceAssignment& a, int sign);

  SliceLimits limits_;
  std::vector<NodeSpec> specs_;
  std::vector<std::vector<GpuSlices>> gpus_;
  std::vector<int64_t> free_cpu_, free_mem_;
  std::unordered_map<std::string, NodeIdx> by_name_;
  std::unordered_map<WorkloadId, Entry> ledger_;
  int64_t reconfigurations_ = 0;
};

// MPS client limit of an instance with `g` compute slices on a GPU with `total` slices.
inline int MpsClientLimit(int max_clients, int g, int total) {
  return max_clients * g / total;
}

}  // namespace tessera
