// Tessera's policy: exact fragmentation descent against the workload mix learned online.
#include "policies/builtin.h"
#include "policies/frag_descent.h"

namespace tessera {

std::unique_ptr<Scorer> MakeTesseraScorer() {
  return std::make_unique<FragDescentScorer>(
      "tessera", TargetWorkload{},
      [](double delta, const NodeFree&, const Demand&, int) { return -delta; },
      /*learn_online=*/true);
}

}  // namespace tessera
