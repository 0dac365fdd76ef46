// FGD: score = floor(100 * sigmoid((F_before - F_after) / 1000)) against a fixed target
// workload; share demands take the GPU with the best score. Scores are integers, so nodes
// whose Delta F differ by less than ~40 milli-GPU near zero tie.
#include "policies/builtin.h"
#include "policies/frag_descent.h"

namespace tessera {

std::unique_ptr<Scorer> MakeFgdScorer(const TargetWorkload& target) {
  return std::make_unique<FragDescentScorer>(
      "fgd", target,
      [](double delta, const NodeFree&, const Demand&, int) { return FgdIntegerScore(delta); },
      /*learn_online=*/false);
}

}  // namespace tessera
