// BestFit: s = 0.5 (free CPU - demand CPU) / 128 cores + 0.5 (idle milli-GPU - demand
// milli-GPU) / 8000; score = floor(100 (1 - s)). (The reference min-max normalises the
// integer scores to 0..100; with a score range of at most 100 that keeps their order, so the
// argmax is the same.) Best-fit GPU.
#include <cmath>

#include "engine/gpu_select.h"
#include "policies/builtin.h"

namespace tessera {
namespace {

class BestFitScorer final : public Scorer {
 public:
  std::string_view name() const override { return "bestfit"; }
  NodeScore Score(const ClusterState& state, NodeIdx n, const Demand& d) override {
    const NodeFree& f = state.free(n);
    const double s = 0.5 * static_cast<double>(f.cpu - d.cpu.v) / 128000.0 +
                     0.5 * static_cast<double>(f.gpu_total - d.TotalMilliGpu()) / 8000.0;
    return {std::trunc(100.0 * (1.0 - s)), SelectBestFit(f, d)};
  }
};

}  // namespace

std::unique_ptr<Scorer> MakeBestFitScorer() {
  return std::make_unique<BestFitScorer>();
}

}  // namespace tessera
