// The scheduling cycle: filter -> score -> select, for one workload or a batch.
//
// Filter (built in): CPU, memory, GPU model, and enough GPUs with the per-GPU share free.
// Score: the configured Scorer. Select: highest score; ties go to the node that comes first in
// a permutation of the nodes drawn from the engine's seed (same input + seed => same plan).
// The engine performs no I/O and reads no clock. Decide() does not change the cluster;
// RunCycle() applies its decisions tentatively and returns a Plan that can be rolled back.
// Not thread-safe: one engine per scheduling loop.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/cluster_state.h"
#include "core/random.h"
#include "engine/policy.h"
#include "sharing/mig_planner.h"
#include "sharing/selector.h"

namespace tessera {

enum class FilterVerdict : uint8_t { kFits, kCpu, kMemory, kGpuModel, kGpuCount };

// Why a workload fits on no node: how many nodes failed each check (first failing check).
struct RejectReasons {
  int64_t nodes = 0;
  int64_t cpu = 0;
  int64_t memory = 0;
  int64_t gpu_model = 0;
  int64_t gpu = 0;       // not enough GPUs with the requested share free
  int64_t excluded = 0;  // left out by the caller (topology, reservations)
  void Count(FilterVerdict v);
  std::string Summary() const;
};

struct Decision {
  WorkloadId workload = 0;
  Demand demand;
  bool placed = false;
  Placement placement;
  double score = 0;
  int64_t feasible_nodes = 0;
  RejectReasons reasons;  // meaningful when !placed
  // Slice decisions (Engine::DecideSlice): the mechanism and size chosen, and why; `demand`
  // and `score` are unused. When !placed, `why_not` says what is missing.
  bool is_slice = false;
  SliceAssignment slice;
  std::string slice_explanation;  // e.g. "MIG 1g.10gb on GPU 2 of node-7: strict isolation, ..."
  std::string why_not;
  // Set (and placed false) when MIG re-layouts serve the slice better than any slice in place,
  // or, for whole GPUs that fit nowhere, turn MIG off on empty MIG GPUs of one node
  // (Engine::set_layout_planner): the workload waits for them to be applied. One per GPU.
  std::vector<MigReconfig> relayouts;

  // One line, e.g. "placed on node-7 GPUs [3] (score 57.000, best of 412 feasible nodes)".
  std::string Explain(const ClusterState& state) const;
  // Why it was not placed: reasons.Summary(), or why_not for a slice decision.
  std::string WhyNotPlaced() const;
};

// Decisions of one cycle, applied to the cluster in order. Rollback releases them in reverse.
struct Plan {
  std::vector<Decision> decisions;
  Status Rollback(ClusterState& state) const;
};

FilterVerdict FilterNode(const NodeFree& f, const Demand& d);

class Engine {
 public:
  Engine(std::unique_ptr<Scorer> scorer, uint64_t seed);

  const Scorer& scorer() const { return *scorer_; }
  // Forwards an arrival to the scorer (see Scorer::Observe).
  void Observe(const Demand& d) { scorer_->Observe(d); }
  // Forwards a workload of the cluster's past to the scorer (see Scorer::ObservePast).
  void ObservePast(const Demand& d) { scorer_->ObservePast(d); }

  // Chooses a node and GPUs for one workload without changing the cluster. With `allowed`
  // (one byte per node, non-zero = may be used), other nodes are left out and counted as
  // excluded.
  Decision Decide(const ClusterState& state, WorkloadId id, const Demand& demand,
                  const std::vector<uint8_t>* allowed = nullptr);

  // Chooses the sharing mechanism, size, node and GPU (or MIG instance) for one slice demand
  // without changing the cluster (sharing/selector.h: never violates the isolation class,
  // always guarantees the peak memory). `allowed` as in Decide. Without a layout planner it uses
  // the layouts as they are. With one, it also weighs re-laying out one GPU not in `frozen`
  // (MigPlanner::PlanBetterThan): when that serves the demand better, the decision is not
  // placed and carries the re-layout, and why_not says what it waits for. Whole GPUs that fit
  // nowhere may wait for MIG to be turned off on empty MIG GPUs (MigPlanner::PlanWholeGpus).
  Decision DecideSlice(const ClusterState& state, WorkloadId id, const SliceDemand& demand,
                       const std::vector<uint8_t>* allowed = nullptr,
                       const std::vector<GpuMask>* frozen = nullptr) const;
  void set_selector_config(const SelectorConfig& c) { selector_ = SliceSelector(c); }
  const SliceSelector& selector() const { return selector_; }
  // The planner DecideSlice weighs re-layouts with (null: none); it must outlive its use.
  void set_layout_planner(const MigPlanner* planner) { planner_ = planner; }

  // Decides the workloads in order, allocating each placed one before deciding the next.
  // Returns the plan (placed and unplaced decisions). Fails only if an allocation the engine
  // chose is refused by the ledger, in which case everything is rolled back.
  Result<Plan> RunCycle(ClusterState& state,
                        const std::vector<std::pair<WorkloadId, Demand>>& batch);

 private:
  void EnsureOrder(size_t num_nodes);

  std::unique_ptr<Scorer> scorer_;
  SliceSelector selector_;
  const MigPlanner* planner_ = nullptr;
  Rng rng_;
  std::vector<uint32_t> rank_;  // tie-break order of nodes
  std::vector<NodeIdx> feasible_;
};

}  // namespace tessera
