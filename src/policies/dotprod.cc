// DotProd: node vector (free CPU / 128 cores, idle milli-GPU / 8000), demand vector (CPU /
// 128 cores, total milli-GPU / 8000); score = floor(100 * (1 - dot / 2)). Best-fit GPU.
#include <cmath>

#include "engine/gpu_select.h"
#include "policies/builtin.h"

namespace tessera {
namespace {

class DotProdScorer final : public Scorer {
 public:
  std::string_view name() const override { return "dotprod"; }
  NodeScore Score(const ClusterState& state, NodeIdx n, const Demand& d) override {
    const NodeFree& f = state.free(n);
    const double dot = (static_cast<double>(f.cpu) / 128000.0) * (d.cpu.v / 128000.0) +
                       (f.gpu_total / 8000.0) * (static_cast<double>(d.TotalMilliGpu()) / 8000.0);
    const double score = std::floor(100.0 * (1.0 - dot / 2.0));
    return {score, SelectBestFit(f, d)};
  }
};

}  // namespace

std::unique_ptr<Scorer> MakeDotProdScorer() {
  return std::make_unique<DotProdScorer>();
}

}  // namespace tessera
