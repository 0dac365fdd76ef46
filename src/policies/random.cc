// Random: PreScore draws one feasible node uniformly; it scores 100, every other node 0.
// The GPU is a uniformly chosen fitting GPU.
#include "engine/gpu_select.h"
#include "policies/builtin.h"

namespace tessera {
namespace {

class RandomScorer final : public Scorer {
 public:
  std::string_view name() const override { return "random"; }
  void PreScore(const ClusterState& state, const Demand& d, std::span<const NodeIdx> feasible,
                Rng& rng) override {
    chosen_ = feasible[rng.Uniform(feasible.size())];
    gpus_ = SelectRandom(state.free(chosen_), d, rng);
  }
  NodeScore Score(const ClusterState&, NodeIdx n, const Demand&) override {
    return n == chosen_ ? NodeScore{100, gpus_} : NodeScore{0, 0};
  }

 private:
  NodeIdx chosen_ = 0;
  GpuMask gpus_ = 0;
};

}  // namespace

std::unique_ptr<Scorer> MakeRandomScorer() {
  return std::make_unique<RandomScorer>();
}

}  // namespace tessera
