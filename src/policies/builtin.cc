#include "policies/builtin.h"

namespace tessera {
namespace {

Result<std::unique_ptr<Scorer>> Wrap(std::unique_ptr<Scorer> s) {
  return Result<std::unique_ptr<Scorer>>(std::move(s));
}

PolicyRegistry* Build() {
  auto* r = new PolicyRegistry();
  auto add = [&](const char* name, const char* desc, PolicyRegistry::Factory f) {
    Status st = r->Register(name, desc, std::move(f));
    if (!st.ok()) std::abort();
  };
  add("random", "a feasible node uniformly at random",
      [](const PolicyConfig&) { return Wrap(MakeRandomScorer()); });
  add("dotprod", "smallest dot product of free resources and demand (Tetris)",
      [](const PolicyConfig&) { return Wrap(MakeDotProdScorer()); });
  add("clustering", "nodes already running pods of the same GPU shape first",
      [](const PolicyConfig&) { return Wrap(MakeClusteringScorer()); });
  add("packing", "shared GPUs, then used nodes, then the smallest idle nodes",
      [](const PolicyConfig&) { return Wrap(MakePackingScorer()); });
  add("bestfit", "least weighted leftover of CPU and GPU",
      [](const PolicyConfig&) { return Wrap(MakeBestFitScorer()); });
  add("fgd", "fragmentation gradient descent against the configured target workload",
      [](const PolicyConfig& c) -> Result<std::unique_ptr<Scorer>> {
        if (c.target.shapes.empty())
          return InvalidArgument("policy fgd needs a non-empty target workload");
        return Wrap(MakeFgdScorer(c.target));
      });
  add("tessera",
      "fragmentation descent with CPU-stranding look-ahead against the workload mix learned "
      "online (the default)",
      [](const PolicyConfig&) -> Result<std::unique_ptr<Scorer>> {
        const TesseraConfig cfg;
        TESSERA_RETURN_IF_ERROR(cfg.Validate());
        return Wrap(MakeTesseraScorer(cfg));
      });
  return r;
}

}  // namespace

const PolicyRegistry& BuiltinPolicies() {
  static const PolicyRegistry* registry = Build();
  return *registry;
}

}  // namespace tessera
