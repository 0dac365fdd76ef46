// MIG layout planner: when pending demand does not fit any MIG-capable GPU's current layout,
// choose a GPU and a new legal layout that hosts it, without disturbing running work.
//
// Contract: a plan only destroys instances that are free (no workload, no MPS client); turning
// MIG mode on or off is planned only for an idle GPU. Among the legal layouts that keep every
// busy instance in place and add the needed instance, it picks the one that keeps future demand
// placeable: the most instances of the profiles seen so far (weighted by their observed mix),
// then the fewest instances destroyed. Emits the result as an NVIDIA mig-parted config and an
// explicit diff. Pure and deterministic; thread-compatible.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/cluster_state.h"
#include "sharing/selector.h"

namespace tessera {

struct MigPlannerConfig {
  bool allow_enable_mig = true;  // may enable MIG on an idle MIG-capable GPU
  int window = 512;              // demands remembered for the mix
};

struct MigReconfig {
  NodeIdx node = 0;
  int gpu = 0;
  bool mig_before = false;
  bool mig_after = true;
  MigLayout before;
  MigLayout after;
  MigDiff diff;
  std::string reason;  // e.g. "create 3g.40gb@4 for a pending 3g.40gb; destroys 2 free 1g.10gb"
};

class MigPlanner {
 public:
  explicit MigPlanner(MigPlannerConfig config = {}) : config_(config) {}

  // Records an arrived demand; layouts are shaped for the mix of the last `window` demands.
  void Observe(const SliceDemand& d);
  // Observed demand per profile of `geo` (smallest covering profile of each recorded demand).
  std::map<int, double> Mix(const MigGeometry& geo) const;

  // A reconfiguration of one GPU after which a free MIG instance that covers `d` (its smallest
  // covering profile on that GPU's model, selector.h SizeSlice) exists on a node with enough
  // host CPU/memory and an allowed model. NotFound with the reason if no GPU can change without
  // disturbing running work. With `allowed` (one byte per node, non-zero = may be used) other
  // nodes are left out; with `frozen` (one GpuMask per node) those GPUs are not touched.
  Result<MigReconfig> PlanFor(const ClusterState& cluster, const SliceDemand& d,
                              const std::vector<uint8_t>* allowed = nullptr,
                              const std::vector<GpuMask>* frozen = nullptr) const;
  // For a whole-GPU demand: MIG-enabled GPUs with no workload, on one node, whose MIG mode is
  // turned off so that, with the node's idle GPUs, `d.whole_gpus` (at least 1) GPUs are idle.
  // NotFound if no node can get there without disturbing running work. `allowed` and `frozen`
  // as in PlanFor.
  Result<std::vector<MigReconfig>> PlanWholeGpus(
      const ClusterState& cluster, const SliceDemand& d,
      const std::vector<uint8_t>* allowed = nullptr,
      const std::vector<GpuMask>* frozen = nullptr) const;

  // The placement rule every caller shares (the sharing simulation and the scheduling cycle):
  // for a slice demand (not whole GPUs) whose best slice in the cluster as it is, `in_place`
  // (SliceSelector::Select with the same `allowed`), is missing or a whole GPU, the re-layout
  // of one GPU (PlanFor) whose new instance costs less than `in_place` by a margin of 0.02.
  // A slice that shares a GPU in place (MPS, time-slice, a free instance) is kept: it runs at
  // once and disturbs nothing. NotFound with the reason when no re-layout is better.
  Result<MigReconfig> PlanBetterThan(const ClusterState& cluster, const SliceDemand& d,
                                     const SliceChoice& in_place,
                                     const std::vector<uint8_t>* allowed = nullptr,
                                     const std::vector<GpuMask>* frozen = nullptr) const;

 private:
  MigPlannerConfig config_;
  std::vector<SliceDemand> recent_;  // ring buffer of the last `window` demands
  size_t next_ = 0;
};

// NVIDIA mig-parted config (version v1) with one named config that reproduces the current MIG
// state of every GPU of `node`: MIG-disabled GPUs as `mig-enabled: false`, the others with
// their profile counts, GPUs with equal layouts grouped.
std::string MigPartedConfig(const ClusterState& cluster, NodeIdx node,
                            std::string_view config_name);
// Human-readable diff, one line per instance: "node-7 GPU 3: destroy 1g.10gb@4", "... create".
std::string MigDiffText(const ClusterState& cluster, const MigReconfig& r);

}  // namespace tessera
