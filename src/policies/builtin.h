// The built-in placement policies and the registry that holds them.
//
//   random      one feasible node uniformly at random
//   dotprod     Tetris-style alignment: smallest dot product of free resources and demand
//   clustering  GPU clustering: nodes already running pods of the same GPU shape first
//   packing     GPU packing: shared GPUs, then used nodes, then the smallest idle nodes
//   bestfit     least weighted leftover of CPU and GPU
//   fgd         fragmentation gradient descent (Weng et al., USENIX ATC'23)
//   tessera     Tessera's own policy (see tessera.cc); the default
// Definitions follow docs/POLICIES.md. The registry is immutable after construction and
// safe to read from any thread.
#pragma once

#include <memory>

#include "engine/registry.h"

namespace tessera {

const PolicyRegistry& BuiltinPolicies();
inline constexpr const char* kDefaultPolicy = "tessera";

std::unique_ptr<Scorer> MakeRandomScorer();
std::unique_ptr<Scorer> MakeDotProdScorer();
std::unique_ptr<Scorer> MakeClusteringScorer();
std::unique_ptr<Scorer> MakePackingScorer();
std::unique_ptr<Scorer> MakeBestFitScorer();
std::unique_ptr<Scorer> MakeFgdScorer(const TargetWorkload& target);
std::unique_ptr<Scorer> MakeTesseraScorer();

}  // namespace tessera
