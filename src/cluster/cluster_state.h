// ClusterState: the one cluster model and allocation ledger. Nodes with their host CPU and
// memory, and per GPU its slice state (gpu_slices.h): idle, whole (exclusive), milli-GPU
// shares, MPS clients with thread % and pinned memory limits, time-slice replicas with declared
// memory, or MIG mode with a legal layout whose instances are free, held whole or run MPS
// clients. Whole GPUs and milli-GPU shares are kinds of slice; the engine, admission, the
// simulators, the Kubernetes scheduler and the extender all allocate here.
//
// Contract:
//  * Every allocation is checked whole before anything changes (nothing is partially applied)
//    and fails with a reason; Release restores exactly the state before the matching Allocate.
//  * A node's host balance is its CPU (memory) capacity minus what its workloads ask; its free
//    CPU (memory) is the balance, or 0 when the balance is negative. A negative balance (the
//    node is over-committed) comes only from AllocateBeyondHost (running work adopted beyond
//    what was free) or ResizeHost (the capacity shrank), never from Allocate; nothing asking
//    CPU (memory) fits there until enough of its work leaves. This is the kubelet's count:
//    requests against allocatable.
//  * A non-MIG GPU is in one mode at a time, set by its first occupant and back to idle when the
//    last leaves: exclusive (one workload), share (milli-GPU shares summing to at most 1000),
//    MPS (at most SliceLimits::mps_max_clients clients, thread % summing to at most 100, pinned
//    memory limits summing to at most the GPU's memory) or time-slicing (at most
//    timeslice_max_replicas replicas, declared memory summing to at most the GPU's memory; a
//    replica may declare 0, an unguarded replica, whose risk the caller owns).
//  * A MIG-enabled GPU holds a legal layout (mig_geometry.h); each instance is free, held whole
//    by one workload, or runs MPS clients (limit floor(48 x G / compute slices of the GPU),
//    thread % and memory limits within the instance).
//  * NodeFree (the compact view the placement loop reads for every node) is derived from the
//    slice state: gpu[g] is GpuSlices::FreeMilli(), the capacity whole-GPU and milli-share
//    demands may use. gpu_allocated_milli() sums GpuSlices::HeldMilli() over all GPUs.
//  * SetMigLayout changes a layout only if no instance it destroys is in use; switching MIG mode
//    needs the GPU idle.
//  * A blocked GPU (SetGpuBlocked: its node reports it unhealthy) takes no new slice: CheckFit
//    refuses any slice on it and its FreeMilli() is 0. What runs there stays until it leaves;
//    AllocateBeyondHost (running work) and layout changes are not refused.
//  * Each mutation gives the touched node a new stamp, unique across all ClusterState objects
//    of the process (copies included), so callers can cache per-node derived values by stamp.
//  * gpu_state_key(n) is a 64-bit hash of the node's GPU slice state (model, modes, layouts,
//    clients, limits held). Nodes whose GPU state is equal have equal keys; unequal states
//    collide only by hash accident. Searches use it to evaluate identical nodes once.
// Not thread-safe; callers serialise access (the engine reads it between mutations).
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cluster/gpu_slices.h"
#include "cluster/types.h"
#include "core/status.h"

namespace tessera {

// Mutable free resources of one node. Kept compact: the scheduling loop reads it for every
// node on every decision.
struct NodeFree {
  int64_t cpu = 0;        // free milli-CPU
  int64_t memory = 0;     // free MiB
  int32_t gpu_total = 0;  // sum of gpu[0..gpu_count)
  uint8_t gpu_count = 0;
  GpuModelId model = kNoGpuModel;
  uint64_t stamp = 0;
  std::array<int16_t, kMaxGpusPerNode> gpu{};  // free milli-GPU per GPU
  // Pods on the node per GPU shape class: [0] GPU-share pods, [k] pods with k whole GPUs.
  std::array<uint16_t, kMaxGpusPerNode + 1> shape_pods{};

  int FullyFreeGpus() const {
    int n = 0;
    for (int g = 0; g < gpu_count; ++g) n += gpu[g] == 1000;
    return n;
  }
  // Number of GPUs with at least `milli` free.
  int GpusWithAtLeast(int milli) const {
    int n = 0;
    for (int g = 0; g < gpu_count; ++g) n += gpu[g] >= milli;
    return n;
  }
};

// Checks a node on its own: non-empty name, positive CPU and memory, 0..kMaxGpusPerNode GPUs,
// a GPU count and a catalog model together (or neither). InvalidArgument naming the node.
Status ValidateNodeSpec(const NodeSpec& spec);

class ClusterState {
 public:
  explicit ClusterState(SliceLimits limits = {}) : limits_(limits) {}

  // Adds a node, fully free, all GPUs idle with MIG disabled. Fails on an empty or duplicate
  // name, non-positive CPU or memory, more than kMaxGpusPerNode GPUs, or a GPU count without a
  // model (or vice versa).
  Result<NodeIdx> AddNode(NodeSpec spec);

  size_t num_nodes() const { return specs_.size(); }
  const NodeSpec& spec(NodeIdx n) const { return specs_[n]; }
  const NodeFree& free(NodeIdx n) const { return free_[n]; }
  std::span<const NodeFree> all_free() const { return free_; }
  int gpu_count(NodeIdx n) const { return specs_[n].gpu_count; }
  const GpuSlices& gpu(NodeIdx n, int g) const { return gpus_[n][g]; }
  int64_t free_cpu(NodeIdx n) const { return free_[n].cpu; }
  int64_t free_host_memory(NodeIdx n) const { return free_[n].memory; }
  uint64_t gpu_state_key(NodeIdx n) const { return gpu_state_key_[n]; }
  const SliceLimits& limits() const { return limits_; }

  // ---- Whole GPUs and milli-GPU shares (the placement engine's demands) ----

  // Whether `demand` fits on node n using exactly the GPUs in `gpus`. Ok or the reason.
  Status CheckFit(NodeIdx n, const Demand& demand, GpuMask gpus) const;
  // Records the allocation (an exclusive slice of the GPUs, or a kShare slice). Fails (and
  // changes nothing) if the id is already allocated or CheckFit fails.
  Status Allocate(WorkloadId id, const Demand& demand, Placement placement);

  // ---- Any kind of slice ----

  // Whether the workload (host CPU/memory from `d`; GPU part from `a`) fits now. Ok or the
  // reason. Checks physical invariants only; whether `a` suits `d`'s isolation is the caller's.
  Status CheckFit(const SliceDemand& d, const SliceAssignment& a) const;
  Status Allocate(WorkloadId id, const SliceDemand& d, const SliceAssignment& a);

  // Allocate, without the host CPU and memory checks: for work already running on the node
  // (adopted after a restart, or put back as it was). The full request is counted, so the
  // node's balance may go negative. Every GPU check still applies.
  Status AllocateBeyondHost(WorkloadId id, const Demand& demand, Placement placement);
  Status AllocateBeyondHost(WorkloadId id, const SliceDemand& d, const SliceAssignment& a);

  // Releases a previous allocation of either form, restoring the node exactly. NotFound if
  // unknown.
  Status Release(WorkloadId id);

  // Blocks GPU g of node n (see the contract), or unblocks it. NotFound on an unknown GPU.
  Status SetGpuBlocked(NodeIdx n, int g, bool blocked);

  // Node n's host capacity changes (its allocatable changed): the balance moves by the
  // difference and may go negative. InvalidArgument on a non-positive amount.
  Status ResizeHost(NodeIdx n, MilliCpu cpu, MiB memory);
  // The node's host balance (see the contract): capacity minus what its workloads ask, in
  // milli-CPU and MiB; negative when over-committed. free(n) holds the same floored at 0.
  int64_t cpu_balance(NodeIdx n) const { return balance_[n].cpu; }
  int64_t memory_balance(NodeIdx n) const { return balance_[n].memory; }

  bool IsAllocated(WorkloadId id) const { return ledger_.count(id) != 0; }
  size_t num_allocations() const { return ledger_.size(); }
  // The slice of an allocated workload (whole GPUs: kExclusive; shares: kShare); null if none.
  const SliceAssignment* Find(WorkloadId id) const;
  // Workloads on node n, GPU g (any kind), in id order. One pass over the ledger.
  std::vector<WorkloadId> OnGpu(NodeIdx n, int g) const;
  // The same for every GPU at once, indexed [node][gpu]; one pass over the ledger.
  std::vector<std::vector<std::vector<WorkloadId>>> Occupants() const;

  // Applies a new MIG state to one GPU (see the contract above). mig_enabled = false requires
  // an empty layout. Reports the instances destroyed and created.
  Result<MigDiff> SetMigLayout(NodeIdx n, int g, bool mig_enabled, const MigLayout& layout);
  // Makes GPU g of node n MIG-enabled with `inst` among its instances, keeping every instance
  // in use and the free ones that still fit beside it; with no `inst`, MIG off. For a workload
  // that holds a slice the recorded layout does not show (a node report that lags, or is
  // wrong). Returns whether anything changed; refused when work in use is in the way.
  Result<bool> ConformGpu(NodeIdx n, int g, std::optional<MigInstance> inst);
  // The diff SetMigLayout would apply, or the reason it cannot.
  Result<MigDiff> PreviewMigLayout(NodeIdx n, int g, bool mig_enabled,
                                   const MigLayout& layout) const;
  // Number of SetMigLayout calls that changed something.
  int64_t reconfigurations() const { return reconfigurations_; }

  int64_t gpu_capacity_milli() const { return gpu_capacity_milli_; }
  // The smallest and largest per-GPU memory of the nodes with GPUs (0 when there are none).
  int64_t min_gpu_memory_mib() const { return min_gpu_memory_mib_; }
  int64_t max_gpu_memory_mib() const { return max_gpu_memory_mib_; }
  int64_t gpu_allocated_milli() const { return gpu_allocated_milli_; }
  // Sums of NodeFree over the nodes, kept with the ledger: free milli-GPU of the GPUs of one
  // model (0 for an id with no GPUs), free milli-CPU, and the milli-CPU of every node.
  int64_t free_gpu_milli(GpuModelId model) const {
    return model < free_gpu_by_model_.size() ? free_gpu_by_model_[model] : 0;
  }
  int64_t free_cpu_milli() const { return free_cpu_milli_; }
  int64_t cpu_capacity_milli() const { return cpu_capacity_milli_; }
  int64_t total_gpus() const { return gpu_capacity_milli_ / 1000; }

  // Recomputes every node's free resources and every GPU's slice state from capacities and
  // the ledger and compares with the incremental state. Ok, or the first discrepancy found.
  Status CheckInvariants() const;

 private:
  struct Entry {
    int64_t cpu = 0;     // milli-CPU
    int64_t memory = 0;  // MiB
    SliceAssignment slice;
  };
  struct Balance {
    int64_t cpu = 0;     // milli-CPU
    int64_t memory = 0;  // MiB
  };
  void Touch(NodeIdx n);
  // Sets free_[n]'s host amounts (and the cluster's free CPU) from balance_[n].
  void SyncHost(NodeIdx n);
  // Makes allocated workload `id` ask `cpu` and `memory` of its node instead.
  void MoveHost(WorkloadId id, int64_t cpu, int64_t memory);
  // Unblocks the blocked GPUs of `gpus` on node n and returns them; Reblock blocks them again.
  GpuMask Unblock(NodeIdx n, GpuMask gpus);
  void Reblock(NodeIdx n, GpuMask gpus);
  uint64_t ComputeGpuStateKey(NodeIdx n) const;
  void Apply(const Entry& e, int sign);
  // Re-derives NodeFree::gpu[g] and the allocated total after GPU g of node n changed.
  void Sync(NodeIdx n, int g, int held_before);
  // Shape class of a slice for NodeFree::shape_pods: 0 single-GPU slices, k k whole GPUs, -1
  // CPU-only.
  static int ShapeClass(const SliceAssignment& a);

  SliceLimits limits_;
  std::vector<NodeSpec> specs_;
  std::vector<NodeFree> free_;
  std::vector<Balance> balance_;
  std::vector<std::vector<GpuSlices>> gpus_;
  std::vector<uint64_t> gpu_state_key_;
  std::unordered_map<std::string, NodeIdx> by_name_;
  std::unordered_map<WorkloadId, Entry> ledger_;
  int64_t gpu_capacity_milli_ = 0;
  int64_t min_gpu_memory_mib_ = 0;
  int64_t max_gpu_memory_mib_ = 0;
  int64_t gpu_allocated_milli_ = 0;
  int64_t reconfigurations_ = 0;
  std::array<int64_t, 64> free_gpu_by_model_{};  // by model id (ids are < 64)
  int64_t free_cpu_milli_ = 0;
  int64_t cpu_capacity_milli_ = 0;
};

}  // namespace tessera
