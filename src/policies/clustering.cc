// GpuClustering: tiers by the GPU shape class of the pods already on the node (GPU-share
// pods form one class, pods with k whole GPUs another per k):
//   (75,100] only pods of the demand's class;  (50,75] that class and others;
//   (25,50]  no GPU pods;                       [0,25]  only other classes;
// plus floor(25 * (8000 - idle milli-GPU) / 8000) inside a tier (fuller first).
// CPU-only demands score 0 everywhere. Best-fit GPU.
#include "engine/gpu_select.h"
#include "policies/builtin.h"

namespace tessera {
namespace {

class ClusteringScorer final : public Scorer {
 public:
  std::string_view name() const override { return "clustering"; }
  NodeScore Score(const ClusterState& state, NodeIdx n, const Demand& d) override {
    const NodeFree& f = state.free(n);
    if (d.IsCpuOnly()) return {0, 0};
    const int cls = d.IsShare() ? 0 : d.num_gpu;
    int classes = 0;
    for (uint16_t c : f.shape_pods) classes += c > 0;
    const int64_t fill = 25 * (8000 - static_cast<int64_t>(f.gpu_total)) / 8000;
    int64_t tier;
    if (f.shape_pods[cls] > 0) {
      tier = classes == 1 ? 75 : 50;
    } else {
      tier = classes == 0 ? 25 : 0;
    }
    return {static_cast<double>(fill + tier), SelectBestFit(f, d)};
  }
};

}  // namespace

std::unique_ptr<Scorer> MakeClusteringScorer() {
  return std::make_unique<ClusteringScorer>();
}

}  // namespace tessera
