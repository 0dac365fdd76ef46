// A lower bound on the unallocated GPU that any placement policy leaves in the fill protocol
// (sim/fill.h), per seed: how close a policy came to what the arrivals allowed, and how much of a
// policy's spread across seeds is the arrivals' own.
//
// After the first arrivals of a fill sequence, any policy has placed some of them. The GPU it
// placed is at most the optimum of a fluid LP over the cluster:
//   * groups: the nodes of one GPU model and GPU count, with their GPU, CPU and memory summed;
//   * classes: the arrived GPU pods by GPU count and allowed models, each kind cut, in order of
//     CPU per GPU, into runs of about equal GPU (about `max_classes` in all). A class asks for
//     its pods' GPU in all and uses, per milli-GPU, the least CPU and the least memory per
//     milli-GPU of any of its pods. Each run is split further by the steps of u^(1..3) of its
//     pieces (below);
//   * max sum x_kg subject to sum_g x_kg <= D_k and, per group, sum_k x_kg <= GPU_g,
//     sum_k c_k x_kg <= CPU_g, sum_k m_k x_kg <= MEM_g, and for k' = 1..3
//     sum_k u_kk' x_kg <= GPU_g, with x_kg = 0 where a pod of class k cannot use group g (GPU
//     model, or fewer GPUs per node than it asks). u_kk' is the least, over class k's pods, of
//     u^(k')(piece) / piece for the Fekete-Schepers dual feasible function u^(k')(x) = x where
//     (k' + 1) x is whole, else floor((k' + 1) x) / k' (a piece is a share or one GPU of a
//     whole-GPU pod). The u of the pieces on one GPU add up to at most 1, so these rows hold for
//     every real placement: no two shares above half on a GPU, three above a third, four above
//     a quarter.
// The LP relaxes every real placement: pods split across nodes, shares pack as far as those
// rows allow, CPU-only pods and pods left out take nothing. By weak duality any dual-feasible
// vector bounds its optimum; the bound is b.y for the simplex's duals, scaled up until they are
// feasible, so it stays valid even if the solver stops before the optimum. It is loose where
// the loss is integral beyond those rows (a node's CPU or GPUs left in pieces, whole nodes for
// multi-GPU pods) and tight where model pins, CPU, memory or share sizes bind.
//
// Beside the bound, a reference figure that is not a bound: the share-packing floor, the GPU
// that packing every arrived share as tightly as the cutting-stock LP allows would leave unused
// (policies/share_prices.h), as a % of the GPUs that packing and the whole-GPU pods would fill.
// It ignores CPU, memory, model pins and nodes, and a policy that leaves a share out can go
// below it; where shares decide the result it says how much of the gap to the bound is the
// shares' sizes rather than the placement.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "cluster/types.h"
#include "core/status.h"
#include "sim/fill.h"

namespace tessera {

// At most this many GPU milli placeable by `arrived` on `nodes` (an upper bound on the GPU any
// policy placed; see above). InvalidArgument for more than 4,096 (class, group) pairs or
// max_classes outside [1, 1024]; Internal if the duals cannot be made feasible.
Result<double> FluidPlaceableMilliGpu(const std::vector<NodeSpec>& nodes,
                                      std::span<const Demand> arrived, int max_classes = 64);

// The share-packing floor of `arrived` (see above), in %: 100 (L - S) / (L + W) for the shares'
// GPU S, the LP's GPUs L to hold them all and the whole GPUs W asked (a pod of n GPUs of m < 1000
// milli is n shares of m). 0 without shares; nullopt without GPU pods or with more distinct
// share sizes than SharePrices::kMaxSizes.
std::optional<double> SharePackingFloorPct(std::span<const Demand> arrived);

struct FillBoundRun {
  uint64_t seed = 0;
  // Lower bounds on the unallocated GPU %: at the first arrival at or past 100% of GPU capacity
  // (the fill's unalloc_pct_at_100), and after the whole sequence (unalloc_pct_at_130).
  double unalloc_pct_at_100 = 0;
  double unalloc_pct_at_130 = 0;
  // SharePackingFloorPct of the arrivals up to 100% (not a bound).
  std::optional<double> share_packing_pct_at_100;
};

// The mean and spread over seeds of each of the two bounds, and of the share-packing floor when
// every run has one.
struct FillBoundStats {
  Stats at_100, at_130;
  std::optional<Stats> share_packing_at_100;
};
FillBoundStats SummarizeFillBounds(const std::vector<FillBoundRun>& runs);

// The bounds of the fill experiment (pods, tune_ratio, seed): the same sequence RunFill
// schedules (PrepareFillSequence).
Result<FillBoundRun> ComputeFillBound(const std::vector<NodeSpec>& nodes,
                                      const std::vector<Workload>& pods, double tune_ratio,
                                      uint64_t seed);

// ComputeFillBound for each seed, on `threads` worker threads (0: hardware concurrency); the
// runs in seed order. The first error, if any.
Result<std::vector<FillBoundRun>> ComputeFillBounds(const std::vector<NodeSpec>& nodes,
                                                    const std::vector<Workload>& pods,
                                                    double tune_ratio,
                                                    const std::vector<uint64_t>& seeds,
                                                    unsigned threads = 0);

}  // namespace tessera
