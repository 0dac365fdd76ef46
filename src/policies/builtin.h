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
// Tunables of the tessera policy; each default and its rationale is in docs/POLICIES.md.
struct TesseraConfig {
  double stranding_weight = 0.25;   // lambda: weight of GPU stranded by CPU exhaustion
  double score_temperature = 1000;  // T: milli-GPU per sigmoid unit; sets the tie width
  double coverage_pct = 95;         // learned shapes kept until they cover this % of tasks
  // mu: weight of the share-packing loss (GPU -> milli-GPU x mu). Large enough to act as a
  // lexicographic key: among loss-free choices the other terms decide.
  double packing_weight = 20;
  // sigma: weight of the model-scarcity loss, in milli-GPU of pinned demand displaced per
  // milli-GPU placed; 1 puts it in the units of Delta F. 0 turns it off.
  double scarcity_weight = 1;
  // The model prices and phi follow the ledger's free capacity at every GPU decision; the prices
  // in use move on once phi * p_m has moved by enough to change a one-GPU workload's cost by
  // this many steps of the score (a step is T/25 milli-GPU where the score is steepest), and at
  // every re-learning. 0 moves them at every change. A trade of time for freshness
  // (docs/POLICIES.md, configuration).
  double reprice_tolerance = 2;
  // Model-pinned classes not seen yet (docs/POLICIES.md item 6): every model is priced as if a
  // class pinned to it alone had the upper confidence bound of its share after n GPU tasks
  // without one, -ln(1 - c) / n (the "rule of three" at c = 0.95). 0 turns it off.
  double unseen_pinned_confidence = 0.95;
  // rho: weight of the capacity-balance loss (docs/POLICIES.md item 7), the milli-GPU of the mix
  // to come that a placement keeps from fitting, by the duals of a fluid LP over the free GPU
  // and CPU of each node group; 1 puts it in the units of Delta F. 0 turns it off.
  double balance_weight = 1;
  // The LP's classes: the learned GPU shapes cut, by GPU count, allowed models and CPU per GPU,
  // into about this many classes of equal GPU demand (its resolution of the mix).
  int balance_classes = 32;
  // The balance LP is solved again at every re-learning and, between them, at the first GPU
  // decision after the cluster's free GPU or free CPU moved by this fraction of what it was at
  // the last solve (so the solves follow the free capacity geometrically, a few dozen per fill).
  // 0 (the default) solves only at re-learnings: 1/8 helps CPU-bound mixes and widens the
  // spread of others (docs/POLICIES.md, "Prices that follow the free capacity").
  double balance_resolve_fraction = 0;
  // A past workload (Scorer::ObservePast) is forgotten once the arrivals disagree with it; this
  // is the chance, per comparison, of forgetting a past that does describe the arrivals.
  double past_false_alarm = 0.001;
  // The mix is followed as it changes (docs/POLICIES.md item 1): arrivals are compared with the
  // sample the mix was learned from in windows of up to this many arrivals, and a window that
  // disagrees replaces everything learned before it. As long as the steady re-learning period
  // (1024 arrivals): a change is judged on at most one period. A power of two from 16 to 2^20,
  // or 0 to compare only a past with the arrivals (the learned mix then never forgets).
  int mix_window = 1024;
  Status Validate() const;
};
std::unique_ptr<Scorer> MakeTesseraScorer(const TesseraConfig& config = {});

}  // namespace tessera
