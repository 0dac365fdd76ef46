// Shadow prices of the cluster's free GPU and CPU, per node group, from a fluid model of the
// mix still to come (docs/POLICIES.md item 7).
//
// Groups are the nodes of one GPU model and GPU count, with their free GPU and CPU summed.
// Classes are parts of the learned mix, each with a GPU count, allowed models and milli-CPU per
// milli-GPU r_k, asking D_k milli-GPU in all. The LP
//   max sum_{k,g} x_kg  s.t.  sum_g x_kg <= D_k,  sum_k x_kg <= GPU_g,  sum_k r_k x_kg <= CPU_g,
//   x_kg >= 0, and x_kg = 0 where class k cannot use group g (model, GPU count),
// places as much of the mix as the free capacity can take. Its duals a_g and b_g price a
// milli-GPU and a milli-CPU of group g in milli-GPU of the mix that no longer fits. A workload
// asking d milli-GPU and c milli-CPU costs a_g d + b_g c on group g; placed on a group where that
// is above the lowest cost among the groups that can host it now, it loses the difference. The
// loss is 0 wherever the LP's optimum would put such work, and it grows with how much of a
// binding resource the workload takes there: CPU-heavy work placed where CPU runs out first, or
// GPU-heavy work placed where GPU does. Pure; not thread-safe (Loss remembers its last demand).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cluster/types.h"

namespace tessera {

struct CapacityGroup {
  GpuModelId model = kNoGpuModel;
  int gpu_count = 0;
  double free_gpu = 0;  // milli-GPU
  double free_cpu = 0;  // milli-CPU
};

struct CapacityClass {
  int num_gpu = 1;         // >= 1: a group needs at least this many GPUs per node
  ModelMask models = 0;    // allowed models; 0 = any
  double demand = 0;       // D_k, milli-GPU
  double cpu_per_gpu = 0;  // r_k, milli-CPU per milli-GPU
};

// Solves max c x s.t. A x <= b, x >= 0 for b >= 0 (dense tableau from the slack basis;
// Dantzig's rule, Bland's after a run of degenerate pivots, a pivot limit) and returns the
// row duals y >= 0 of the final basis. `a` is row-major, b.size() rows of c.size() columns.
std::vector<double> SolveLpDuals(std::span<const double> a, std::span<const double> b,
                                 std::span<const double> c);

class CapacityPrices {
 public:
  // Above this many (class, group) pairs the LP is not solved and nothing is priced: a dense
  // tableau of that size takes tens of milliseconds per solve.
  static constexpr size_t kMaxPairs = 4096;

  CapacityPrices() = default;
  static CapacityPrices Solve(std::span<const CapacityGroup> groups,
                              std::span<const CapacityClass> classes);

  bool empty() const { return groups_.empty(); }
  double gpu_price(size_t group) const { return gpu_price_[group]; }
  double cpu_price(size_t group) const { return cpu_price_[group]; }
  // The Cost of `d` on nodes of (model, gpu_count) above the lowest Cost of `d` among the groups
  // whose free capacity can host it; 0 for a CPU-only demand or a group outside the LP.
  double Loss(GpuModelId model, int gpu_count, const Demand& d);

 private:
  double Cost(size_t group, const Demand& d) const;
  double MinCost(const Demand& d);

  std::vector<CapacityGroup> groups_;
  std::vector<double> gpu_price_, cpu_price_;
  // Group of (model, GPU count) at model * (kMaxGpusPerNode + 1) + count; -1 = none.
  std::vector<int> group_of_;
  // The last demand MinCost was asked for (a decision asks once per candidate).
  struct {
    bool known = false;
    int64_t cpu = 0, gpu = 0;
    int num_gpu = 0;
    ModelMask models = 0;
    double cost = 0;
  } min_cost_;
};

}  // namespace tessera
