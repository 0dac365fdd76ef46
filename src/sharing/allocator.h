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

#include <map>
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
  // A multi-GPU demand that does not fit reserves one node with enough GPUs (the one with the
  // most idle GPUs): other work is not placed there until the demand is placed or forgotten,
  // so the node drains. At most this many nodes are reserved at once; 0 = no reservations.
  int max_reserved_nodes = 4;
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

  // Places `d` as `id`; a multi-GPU demand that does not fit may reserve a node (see
  // SharingConfig::max_reserved_nodes). Calling Place again with the same id retries it.
  PlaceOutcome Place(ClusterState& cluster, WorkloadId id, const SliceDemand& d);
  // The workload will not be retried (it gave up): its reservation ends.
  void Forget(WorkloadId id) { reserved_.erase(id); }
  size_t reserved_nodes() const { return reserved_.size(); }

 private:
  // Nodes other work may use: all but the reserved ones (except `id`'s own); null when none.
  const std::vector<uint8_t>* Allowed(const ClusterState& cluster, WorkloadId id);
  void Reserve(const ClusterState& cluster, WorkloadId id, const SliceDemand& d);
  PlaceOutcome PlaceOn(ClusterState& cluster, WorkloadId id, const SliceDemand& d,
                       const std::vector<uint8_t>* allowed);
  SharingConfig config_;
  std::map<WorkloadId, NodeIdx> reserved_;
  std::vector<uint8_t> allowed_buf_;
  SliceSelector selector_;
  MigPlanner planner_;
};

}  // namespace tessera
