// GpuPacking: (1) the demand fits on partly used GPUs: max(100 - sum of their free % / 10, 50);
// (2) the node is partly used but fully free GPUs are needed: max(50 - #free GPUs used, 33);
// (3) the node is entirely idle: max(33 - #GPUs, #GPUs). CPU-only demands score 0.
// GPUs are taken least-free first. Best-fit GPU.
#include <algorithm>

#include "engine/gpu_select.h"
#include "policies/builtin.h"

namespace tessera {
namespace {

class PackingScorer final : public Scorer {
 public:
  std::string_view name() const override { return "packing"; }
  NodeScore Score(const ClusterState& state, NodeIdx n, const Demand& d) override {
    const NodeFree& f = state.free(n);
    if (d.IsCpuOnly()) return {0, 0};
    const GpuMask gpus = SelectBestFit(f, d);
    const int fully_free = f.FullyFreeGpus();
    if (fully_free == f.gpu_count) {
      return {static_cast<double>(std::max(33 - fully_free, fully_free)), gpus};
    }
    // Least free GPUs first (stable on index), as many as the demand needs.
    int order[kMaxGpusPerNode];
    for (int g = 0; g < f.gpu_count; ++g) order[g] = g;
    std::stable_sort(order, order + f.gpu_count, [&](int a, int b) { return f.gpu[a] < f.gpu[b]; });
    int need = d.num_gpu;
    int free_used = 0;
    int64_t free_pct = 0;
    for (int i = 0; i < f.gpu_count && need > 0; ++i) {
      const int g = order[i];
      if (f.gpu[g] >= d.gpu_milli) {
        --need;
        free_used += f.gpu[g] == 1000;
        free_pct += static_cast<int64_t>(f.gpu[g]) * 100 / 1000;
      }
    }
    if (free_used > 0) return {static_cast<double>(std::max(50 - free_used, 33)), gpus};
    return {static_cast<double>(std::max<int64_t>(100 - free_pct / 10, 50)), gpus};
  }
};

}  // namespace

std::unique_ptr<Scorer> MakePackingScorer() {
  return std::make_unique<PackingScorer>();
}

}  // namespace tessera
