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

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "cluster/cluster_state.h"
#include "sharing/mig_planner.h"
#include "sharing/multi_gpu_forecast.h"
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
  // Node protection (docs/SHARING.md, "Large jobs"): once multi-GPU demands (whole_gpus > 1)
  // have been observed with a time, enough whole nodes of the models they may use to hold the
  // GPUs they are forecast to need (MultiGpuForecast) are kept from new single-GPU and
  // fractional work, so they are idle or draining when the next multi-GPU job arrives.
  // Multi-GPU jobs try protected nodes first. No multi-GPU demand => no protection.
  bool protect_nodes = false;
  double protect_half_life_s = 4 * 3600.0;       // arrival-rate half-life, 600 s .. 7 days
  double protect_duration_prior_s = 4 * 3600.0;  // run-time prior, 60 s .. 30 days
  double max_protected_share = 0.75;  // of the eligible nodes, 0 .. 1 (0 = no protection)
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
  // As above, at time `now_s` (seconds, non-decreasing): also feeds the multi-GPU forecast.
  void Observe(const SliceDemand& d, double now_s);
  // The time of the next Place calls (seconds, non-decreasing); placements and completions of
  // multi-GPU jobs are timed with it. Without it, time stays at the last Observe.
  void AdvanceClock(double now_s) { now_s_ = std::max(now_s_, now_s); }

  // Places `d` as `id`; a multi-GPU demand that does not fit may reserve a node (see
  // SharingConfig::max_reserved_nodes). Calling Place again with the same id retries it.
  PlaceOutcome Place(ClusterState& cluster, WorkloadId id, const SliceDemand& d);
  // Nodes `id` may use: those not reserved for another workload; null when that is every node.
  // Valid until the next call on this allocator.
  const std::vector<uint8_t>* NodesFor(const ClusterState& cluster, WorkloadId id) {
    return Allowed(cluster, id, Scope::kAll);
  }
  // The workload will not be retried (it gave up): its reservation ends. True when it held one
  // (its node is open to other work again).
  bool Forget(WorkloadId id) { return reserved_.erase(id) > 0; }
  size_t reserved_nodes() const { return reserved_.size(); }
  // Nodes protected at the last Place call, and the GPUs the forecast asked for then.
  size_t protected_nodes() const;
  bool is_protected(NodeIdx n) const { return n < protected_.size() && protected_[n]; }
  double forecast_gpus() const { return forecast_gpus_; }

 private:
  enum class Scope { kAll, kUnprotected, kProtected };
  // Nodes `id` may use: those of `scope`, less the nodes reserved for others; null when that
  // is every node.
  const std::vector<uint8_t>* Allowed(const ClusterState& cluster, WorkloadId id, Scope scope);
  // Recomputes protected_ from the forecast; records finished multi-GPU jobs.
  void UpdateProtection(const ClusterState& cluster);
  void Reserve(const ClusterState& cluster, WorkloadId id, const SliceDemand& d);
  PlaceOutcome PlaceOn(ClusterState& cluster, WorkloadId id, const SliceDemand& d,
                       const std::vector<uint8_t>* allowed);
  SharingConfig config_;
  std::map<WorkloadId, NodeIdx> reserved_;
  std::vector<uint8_t> allowed_buf_;
  MultiGpuForecast forecast_;
  double now_s_ = 0;
  ModelMask multi_models_ = 0;  // models observed multi-GPU demands may use
  bool multi_any_model_ = false;
  int multi_min_gpus_ = 0;  // fewest GPUs an observed multi-GPU demand asked for
  std::map<WorkloadId, NodeIdx> multi_running_;
  std::vector<uint8_t> protected_;
  double forecast_gpus_ = 0;
  SliceSelector selector_;
  MigPlanner planner_;
};

}  // namespace tessera
