// The extender's two views of the cluster (internal to the extender).
//
// Single-node models (filter, bind, preempt): one node with its bound GPU pods as slices (MIG
// instances, MPS clients, time-slice replicas, whole GPUs), on which the sharing selector
// chooses a pod's slice. Host CPU and memory are not modelled: kube-scheduler checks them.
//
// The engine view of the whole GPU fleet (prioritize), kept between requests. One ClusterState
// holds every known node with GPUs and the GPU pods bound to it, as the placement policy sees them:
// whole GPUs and milli-GPU shares. Prioritize scores the request's candidates in this view, so the
// policy's cluster-wide terms (model prices and the capacity balance, docs/POLICIES.md) describe
// the fleet, not the candidates of one request.
//
// A node holds, in this order:
//  * in the view for pods that do not ask for a MIG instance (`mig_open` false), a blocking
//    workload on every MIG-enabled GPU;
//  * its bound GPU pods in `BoundFn` order. A pod holds the GPUs its tessera.io/assignment
//    names (a share its milli-GPU, an MPS client its thread % x 10, exclusive whole GPUs);
//    without GPUs named it holds the first GPUs with room. A pod whose host CPU or memory no
//    longer fits is counted in full beyond the node's balance (ClusterState::AllocateBeyondHost);
//    one whose GPUs do not fit is left out;
//  * then its unhealthy GPUs are blocked (ClusterState::SetGpuBlocked): a pod keeps a GPU that
//    turned unhealthy under it, and nothing new is scored there.
//
// Updates are lazy. NodeChanged and PodsChanged mark a node; Refresh rebuilds the marked nodes
// only. A node added is appended; a node removed, or whose spec changed, rebuilds the whole
// view at the next Refresh. Not thread-safe: the extender's lock serialises it.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "cluster/cluster_state.h"
#include "kube/translate.h"
#include "sharing/selector.h"

namespace tessera::kube {

// A node as the extender knows it: translated, or the translation error it fails pods with.
struct NodeEntry {
  std::optional<NodeInfo> info;
  std::string error;
};

// Whether a pod's placement is left to counting rather than decided on the node's GPUs: a MIG
// request on a node without a GPU inventory.
bool CountedMig(const PodRequest& p, const NodeInfo& n);

// The demand without host CPU and memory.
SliceDemand GpuOnly(SliceDemand d);

// The single-node model of one node with its bound GPU pods.
struct NodeModel {
  ClusterState cluster;
  std::map<std::string, int64_t> mig_counted;  // profile -> instances used (no inventory)
};

// Builds the model of `n` from its MIG layouts (inventory), the pods in `bound` and then its
// unhealthy GPUs (blocked), in order: a pod holds the slice its tessera.io/assignment names (a
// milli-GPU share as an MPS client; where the inventory does not show that instance, or shows MIG
// on a GPU a non-MIG slice names, the GPU is made to hold it, destroying only free instances), or,
// without one or if that slice is taken, what the selector chooses.
// MIG pods without a concrete instance are counted by profile. Error: a MIG layout the node's
// model cannot have.
Result<NodeModel> BuildNodeModel(const NodeInfo& n, const std::vector<const PodRequest*>& bound,
                                 const SliceSelector& selector);

class EngineView {
 public:
  // The node's bound GPU pods, in the order they are counted.
  using BoundFn = std::function<std::vector<const PodRequest*>(const std::string& node)>;

  explicit EngineView(bool mig_open) : mig_open_(mig_open) {}

  // `before` / `after`: the node's translated form before and after the change (null: unknown
  // or failed translation).
  void NodeChanged(const std::string& name, const NodeInfo* before, const NodeInfo* after);
  // The bound pods of `node` changed (bound, released, re-annotated).
  void PodsChanged(const std::string& node);

  // Brings the view up to date with `nodes` and their bound pods.
  void Refresh(const std::map<std::string, NodeEntry>& nodes, const BoundFn& bound);

  const ClusterState& state() const { return state_; }
  // The node's index in state(), if it is in the view.
  std::optional<NodeIdx> Find(const std::string& name) const;
  // Full rebuilds so far (tests observe that pod updates do not cause them).
  int64_t rebuilds() const { return rebuilds_; }

 private:
  void RebuildNode(NodeIdx n, const NodeInfo& info, const BoundFn& bound);

  bool mig_open_;
  bool stale_ = true;
  ClusterState state_;
  std::unordered_map<std::string, NodeIdx> index_;
  std::vector<std::vector<WorkloadId>> held_;  // per node
  std::set<std::string> dirty_;
  WorkloadId next_id_ = 1;
  int64_t rebuilds_ = 0;
};

}  // namespace tessera::kube
