// GPU fragmentation of a node against a target workload (the FGD measure), in milli-GPU.
//
// For task shape m and node n with free CPU c, per-GPU free shares r_g and idle R = sum r_g:
//   F_n(m) = R                          if m is CPU-only, or n's GPU model is not allowed for m,
//          = sum_{g : r_g < d_m} r_g    if at least k_m GPUs have r_g >= d_m and c >= cpu_m,
//          = R                          otherwise;
//   F_n(M) = sum_m p_m F_n(m).
// FragModel evaluates F for a node and, in O(|M|) per candidate, for the node after a
// hypothetical allocation. It holds scratch space: not thread-safe, one per thread.
#pragma once

#include <vector>

#include "cluster/cluster_state.h"
#include "cluster/target_workload.h"

namespace tessera {

class FragModel {
 public:
  explicit FragModel(TargetWorkload target);

  const TargetWorkload& target() const { return target_; }
  bool empty() const { return target_.shapes.empty(); }

  // F_n(M) of the node as it is.
  double Frag(const NodeFree& f) const;

  // Prepares per-shape counts for node f; the After* calls then refer to this node.
  void Load(const NodeFree& f);
  // The same, remembering the counts of node index n by the node's stamp: a node loaded again
  // unchanged (for another demand shape) skips counting its GPUs and the shape terms.
  void Load(const NodeFree& f, NodeIdx n);
  double loaded_frag() const { return loaded_frag_; }
  // F after taking `cpu` milli-CPU and lowering `count` GPUs whose free share is `old_r` to
  // `new_r` (count 0 = CPU only).
  double After(int64_t cpu, int old_r, int new_r, int count) const;

 private:
  TargetWorkload target_;
  // Loaded node.
  int64_t cpu_ = 0;
  int64_t idle_ = 0;
  double loaded_frag_ = 0;
  std::vector<int> usable_;      // per shape: GPUs with r >= d_m
  std::vector<int64_t> less_;    // per shape: sum of r_g < d_m
  std::vector<uint8_t> access_;  // per shape: model allowed and shape needs a GPU
  // The distinct per-GPU shares of the shapes, and each shape's index into them: Load counts
  // a node's GPUs once per distinct share, not once per shape.
  std::vector<int> shares_;
  std::vector<int> share_of_shape_;
  std::vector<int> share_usable_;
  std::vector<int64_t> share_less_;
  // Per node index: the stamp loaded, F, and the per-share counts (shares_.size() each).
  std::vector<uint64_t> cached_stamp_;
  std::vector<double> cached_frag_;
  std::vector<uint8_t> cached_usable_;  // at most kMaxGpusPerNode
  std::vector<int32_t> cached_less_;    // at most kMaxGpusPerNode x 1000
};

}  // namespace tessera
