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

  // Prepares node f's counts; the After calls then refer to the last node this object loaded.
  void Load(const NodeFree& f);
  // The same, remembering the counts of node index n by the node's stamp: a node loaded again
  // unchanged (for another demand shape) skips counting its GPUs and the shape terms.
  void Load(const NodeFree& f, NodeIdx n);
  double loaded_frag() const { return loaded_frag_; }
  // F after taking `cpu` milli-CPU and lowering `count` GPUs whose free share is `old_r` to
  // `new_r` (count 0 = CPU only).
  double After(int64_t cpu, int old_r, int new_r, int count) const;
  // Takes over `older`'s per-node counts when both models have the same distinct shares (the
  // counts depend on nothing else); F is recomputed from them at each node's next Load.
  void KeepCounts(FragModel& older);

 private:
  // Counts f's GPUs per distinct share: with r >= share, and the sum of r < share.
  void Count(const NodeFree& f, uint8_t* usable, int32_t* less) const;
  // F of the loaded node.
  double LoadedFrag() const;
  // The access row of `model`, built on first use.
  const uint8_t* AccessRow(GpuModelId model);

  TargetWorkload target_;
  // The distinct per-GPU shares of the shapes (ascending), and each shape's index into them:
  // a node's GPUs are counted once per distinct share, not once per shape.
  std::vector<int> shares_;
  std::vector<int> share_of_shape_;
  // Per GPU model (row index by model id, -1 = not built yet): per shape, 1 when the model is
  // allowed and the shape needs a GPU.
  std::vector<int16_t> access_row_;
  std::vector<uint8_t> access_rows_;
  // Loaded node: CPU, idle GPU, F, its model's access row and its per-share counts (GPUs with
  // r >= share, sum of r < share), in scratch_* or in the per-node cache.
  int64_t cpu_ = 0;
  int64_t idle_ = 0;
  double loaded_frag_ = 0;
  const uint8_t* access_ = nullptr;
  const uint8_t* usable_ = nullptr;
  const int32_t* less_ = nullptr;
  std::vector<uint8_t> scratch_usable_;
  std::vector<int32_t> scratch_less_;
  // Per node index: the stamp loaded, F (NaN: not computed since KeepCounts), and the
  // per-share counts (shares_.size() each).
  std::vector<uint64_t> cached_stamp_;
  std::vector<double> cached_frag_;
  std::vector<uint8_t> cached_usable_;  // at most kMaxGpusPerNode
  std::vector<int32_t> cached_less_;    // at most kMaxGpusPerNode x 1000
};

}  // namespace tessera
