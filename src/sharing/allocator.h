// SharingAllocator: Tessera's adaptive slice placement. For each workload it chooses the
// sharing mechanism and size (selector.h) and, when no current MIG layout can host the demand,
// re-plans the layout of GPUs whose change disturbs no running workload (mig_planner.h).
//
// Contract: Place() never violates the workload's isolation class and never oversubscribes
// memory (every assignment guarantees the workload its peak memory). It applies the layout
// changes it chose and the allocation to the cluster, or changes nothing when the workload is
// not placed (reason filled in). Deterministic: same cluster + demand => same outcome.
// Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cluster/cluster_state.h"
#include "sharing/mig_planner.h"
#include "sharing/selector.h"

namespace tessera {

struct SharingConfig {
  SelectorConfig selector;
  MigPlannerConfig planner;
  bool reconfigure_mig = true;  // false: use the layouts as they are
};
// InvalidArgument naming the bad field.
Status ValidateSharingConfig(const SharingConfig& c);

struct PlaceOutcome {
  bool placed = false;
  SliceAssignment assignment;
  std::vector<MigReconfig> reconfigs;  // applied before the allocation
  std::string explanation;  // e.g. "MIG 2g.20gb on GPU 3 of node-7: strict isolation, 14 GiB peak"
  std::string reason;       // when !placed
};

class SharingAllocator {
 public:
  explicit SharingAllocator(SharingConfig config = {});
  const SharingConfig& config() const { return config_; }

  // Informs the allocator of demand that has arrived (pending or running); the planner sizes
  // layouts for what is likely to come. Optional.
  void Observe(const SliceDemand& d);

  PlaceOutcome Place(ClusterState& cluster, WorkloadId id, const SliceDemand& d);

 private:
  SharingConfig config_;
  SliceSelector selector_;
  MigPlanner planner_;
};

}  // namespace tessera
