// ClusterState: nodes plus the allocation ledger.
//
// Contract: every node's free CPU, memory and per-GPU free share stay within [0, capacity]
// at all times; Allocate checks the whole demand before changing anything and fails with a
// reason otherwise (nothing is partially applied). Release restores exactly the state before
// the matching Allocate. Each mutation gives the touched node a new stamp, unique across all
// ClusterState objects of the process (copies included), so callers can cache per-node derived
// values by stamp.
// Not thread-safe; callers serialise access (the engine reads it between mutations).
#pragma once

#include <array>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

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
  ClusterState() = default;

  // Adds a node, fully free. Fails on an empty or duplicate name, non-positive CPU or
  // memory, more than kMaxGpusPerNode GPUs, or a GPU count without a model (or vice versa).
  Result<NodeIdx> AddNode(NodeSpec spec);

  size_t num_nodes() const { return specs_.size(); }
  const NodeSpec& spec(NodeIdx n) const { return specs_[n]; }
  const NodeFree& free(NodeIdx n) const { return free_[n]; }
  std::span<const NodeFree> all_free() const { return free_; }

  // Whether `demand` fits on node n using exactly the GPUs in `gpus`. Ok or the reason.
  Status CheckFit(NodeIdx n, const Demand& demand, GpuMask gpus) const;

  // Records the allocation. Fails (and changes nothing) if the id is already allocated or
  // CheckFit fails.
  Status Allocate(WorkloadId id, const Demand& demand, Placement placement);
  // Releases a previous allocation, restoring the node exactly. NotFound if unknown.
  Status Release(WorkloadId id);

  bool IsAllocated(WorkloadId id) const { return ledger_.count(id) != 0; }
  size_t num_allocations() const { return ledger_.size(); }

  int64_t gpu_capacity_milli() const { return gpu_capacity_milli_; }
  int64_t gpu_allocated_milli() const { return gpu_allocated_milli_; }
  int64_t total_gpus() const { return gpu_capacity_milli_ / 1000; }

  // Recomputes every node's free resources from capacities and the ledger and compares
  // with the incremental state. Ok, or the first discrepancy found.
  Status CheckInvariants() const;

 private:
  struct Entry {
    Demand demand;
    Placement placement;
  };
  void Touch(NodeIdx n);
  static int ShapeClass(const Demand& d) { return d.IsShare() ? 0 : d.num_gpu; }

  std::vector<NodeSpec> specs_;
  std::vector<NodeFree> free_;
  std::unordered_map<std::string, NodeIdx> by_name_;
  std::unordered_map<WorkloadId, Entry> ledger_;
  int64_t gpu_capacity_milli_ = 0;
  int64_t gpu_allocated_milli_ = 0;
};

}  // namespace tessera
