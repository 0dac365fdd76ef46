// Policy extension points of the scheduling cycle.
//
// A Scorer ranks the nodes that passed the filter for one workload and chooses the GPUs it
// would use on each. Higher scores win; the engine breaks ties by a seeded node order. A
// Scorer may keep caches keyed by NodeFree::stamp. Scorers are single-threaded objects: one
// engine owns one Scorer.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "cluster/cluster_state.h"
#include "cluster/target_workload.h"
#include "core/random.h"

namespace tessera {

struct NodeScore {
  double score = 0;
  GpuMask gpus = 0;
};

class Scorer {
 public:
  virtual ~Scorer() = default;
  virtual std::string_view name() const = 0;

  // Sees each workload once, when it arrives (before it is scheduled). Online policies learn
  // the workload mix here; they may not look at workloads that have not arrived.
  virtual void Observe(const Demand& /*demand*/) {}
  // Sees a workload of the cluster's past, before the first arrival. Default: as an arrival.
  virtual void ObservePast(const Demand& demand) { Observe(demand); }
  // How often an online learner has found that the workload mix changed and re-learned it
  // from the recent arrivals alone; 0 for policies that do not learn online.
  virtual int64_t mix_changes() const { return 0; }

  // Once per decision, with the nodes that passed the filter, before any Score call.
  virtual void PreScore(const ClusterState& /*state*/, const Demand& /*demand*/,
                        std::span<const NodeIdx> /*feasible*/, Rng& /*rng*/) {}

  // Scores feasible node n for `demand` and picks the GPUs it would use there.
  virtual NodeScore Score(const ClusterState& state, NodeIdx n, const Demand& demand) = 0;
};

// Validated configuration of a policy.
struct PolicyConfig {
  std::string name;
  // Expected workload mix for fragmentation-aware policies (FGD's "typical pods"). Policies
  // that learn online ignore it.
  TargetWorkload target;
};

}  // namespace tessera
