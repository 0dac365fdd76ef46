// The strategies `tessera sim sharing` compares, behind one interface: the device plugin's
// exclusive GPUs, static MIG, time-slicing and MPS replicas, and tessera's SharingAllocator.
// Internal to tessera_sim (sharing_sim.cc drives them).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cluster/cluster_state.h"
#include "sharing/mig_planner.h"
#include "sim/sharing_sim.h"

namespace tessera::sharing_detail {

struct Part {
  WorkloadId ledger_id = 0;
  SliceAssignment a;
  int mig_profile = -1;  // kMig / kMigMps: the instance's profile when placed
};

struct Placement {
  std::vector<Part> parts;
  std::vector<MigReconfig> reconfigs;
  std::string explanation;
};

// A sharing strategy: places one workload (ledger ids base, base + 1, ...) by applying its
// allocations to the cluster, or leaves the cluster unchanged and returns false.
class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual Status Init(ClusterState&) { return Status::Ok(); }
  // A workload arrived at `t`.
  virtual void Observe(const SliceDemand&, SimTime) {}
  // The next Place calls happen at `t`.
  virtual void Clock(SimTime) {}
  virtual Result<bool> Place(ClusterState& c, const SharingWorkload& w, WorkloadId base,
                             Placement* out) = 0;
  // The workload placed as `base` gave up waiting; it is not retried. True when that opened
  // room to other workloads (a reservation ended).
  virtual bool GaveUp(WorkloadId) { return false; }
  // Nodes held by reservations now (a reservation that ends opens its node to other work).
  virtual size_t Reservations() const { return 0; }
  // The nodes on which workloads may be evicted for the one placed as `base` (null = all).
  virtual const std::vector<uint8_t>* PreemptNodes(const ClusterState&, WorkloadId) {
    return nullptr;
  }
};

// The strategy named `name` (one of SharingStrategyNames()) for scenario `s`; sets the ledger
// limits it needs (time-slice replicas, MPS clients) in `limits`. InvalidArgument for an
// unknown name.
Result<std::unique_ptr<Strategy>> MakeStrategy(const SharingScenario& s, const std::string& name,
                                               SliceLimits* limits);

}  // namespace tessera::sharing_detail
