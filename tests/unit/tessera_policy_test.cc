#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "cluster/cluster_state.h"
#include "core/random.h"
#include "engine/engine.h"
#include "engine/gpu_select.h"
#include "engine/registry.h"
#include "policies/builtin.h"
#include "policies/frag.h"
#include "policies/frag_descent.h"
#include "policies/share_prices.h"
#include "tests/unit/policy_test_util.h"

namespace tessera {
namespace {

using namespace policy_test;  // NOLINT(google-build-using-namespace)

// ---------------------------------------------------------------------------------------
// Tessera: x = Delta F + lambda * Delta S against the mix learned online, where
// S = sum over the GPU shapes m seen of w_m max(0, R - c / kappa_m), w_m the shape's share of
// the GPU requested and kappa_m its milli-CPU per milli-GPU (plus the CPU-only workloads' CPU
// per milli-GPU of the mix); score = floor(100 sigmoid(-x / T)) with T in milli-GPU.

TesseraConfig Config(double lambda, double temperature) {
  TesseraConfig c;
  c.stranding_weight = lambda;
  c.score_temperature = temperature;
  return c;
}

// Learned M = {share 500, no CPU, p = 1}; kappa stays at its default (no CPU seen), and no
// node below runs short of CPU, so Delta S = 0. Node P: one GPU with 510 free; node Q: one
// GPU with 530 free. Demand share 500: P -> 10 left, too small for M -> F = 10, delta 10;
// Q -> delta 30.
class TesseraTest : public ::testing::Test {
 protected:
  void SetUp() override {
    p_ = b_.Add(Node("p", 8000, 1), {Use(0, 490)});
    q_ = b_.Add(Node("q", 8000, 1), {Use(0, 470)});
  }
  Builder b_;
  NodeIdx p_ = 0, q_ = 0;
  const Demand d_ = Share(0, 500);
};

TEST_F(TesseraTest, TemperatureSetsTheTieWidth) {
  // T = 1000 (default): floor(100 / (1 + e^0.01)) = 49 = floor(100 / (1 + e^0.03)), a tie,
  // exactly like FGD.
  auto t = MakeTesseraScorer();
  EXPECT_EQ(t->name(), "tessera");
  t->Observe(d_);
  EXPECT_EQ(ScoreOne(*t, b_.state, p_, d_).score, 49);
  EXPECT_EQ(ScoreOne(*t, b_.state, q_, d_).score, 49);
  auto fgd = MakeFgdScorer(TargetWorkload{{TaskShape{0, 500, 1, 0, 1.0}}});
  EXPECT_EQ(ScoreOne(*fgd, b_.state, p_, d_).score, 49);
  EXPECT_EQ(ScoreOne(*fgd, b_.state, q_, d_).score, 49);

  // T = 100: floor(100 / (1 + e^0.1)) = floor(47.50) = 47; floor(100 / (1 + e^0.3)) =
  // floor(42.56) = 42.
  auto sharp = MakeTesseraScorer(Config(0.1, 100));
  sharp->Observe(d_);
  EXPECT_EQ(ScoreOne(*sharp, b_.state, p_, d_).score, 47);
  EXPECT_EQ(ScoreOne(*sharp, b_.state, q_, d_).score, 42);
}

TEST_F(TesseraTest, PicksLowerDeltaOnceOutsideTheTieWidth) {
  std::set<NodeIdx> tied_choices;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    Engine sharp(MakeTesseraScorer(Config(0.1, 100)), seed);
    sharp.Observe(d_);
    const Decision ds = sharp.Decide(b_.state, 1, d_);
    ASSERT_TRUE(ds.placed);
    EXPECT_EQ(ds.placement.node, p_) << "seed " << seed;

    Engine tied(MakeTesseraScorer(), seed);
    tied.Observe(d_);
    const Decision dt = tied.Decide(b_.state, 1, d_);
    ASSERT_TRUE(dt.placed);
    tied_choices.insert(dt.placement.node);
  }
  // With the default temperature the nodes tie; the seeded node order decides.
  EXPECT_EQ(tied_choices.size(), 2u);
}

// Observed: share 500 with 5000 milli-CPU -> kappa = 10 and M = {cpu 5000, share 500}.
// Node N: 20 cores, 2 idle GPUs. Demand: share 500 with 12000 milli-CPU.
//   Delta F: before both GPUs usable and 20000 >= 5000 -> 0; after [500, 1000] with 8000
//   milli-CPU left, both still usable -> 0. Delta F = 0.
//   S before = max(0, 2000 - 20000/10) = 0; after = max(0, 1500 - 8000/10) = 700.
// Node M: 64 cores: S = 0 before and after, and Delta F = 0.
struct StrandingCase {
  double lambda, temperature, score_n, score_m;
};

void PrintTo(const StrandingCase& c, std::ostream* os) {
  *os << "lambda " << c.lambda << " T " << c.temperature;
}

class TesseraStrandingTest : public ::testing::TestWithParam<StrandingCase> {};

TEST_P(TesseraStrandingTest, Score) {
  const StrandingCase& c = GetParam();
  Builder b;
  const NodeIdx n = b.Add(Node("n", 20000, 2));
  const NodeIdx m = b.Add(Node("m", 64000, 2));
  auto t = MakeTesseraScorer(Config(c.lambda, c.temperature));
  t->Observe(Share(5000, 500));
  const Demand d = Share(12000, 500);
  const NodeScore sn = ScoreOne(*t, b.state, n, d);
  EXPECT_EQ(sn.score, c.score_n);
  EXPECT_EQ(sn.gpus, 0b01u);
  EXPECT_EQ(ScoreOne(*t, b.state, m, d).score, c.score_m);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TesseraStrandingTest,
    ::testing::Values(
        // x = 0: 50 on both.
        StrandingCase{0.0, 1000, 50, 50},
        // x = 70 -> floor(100 / (1 + e^0.07)) = floor(48.25) = 48.
        StrandingCase{0.1, 1000, 48, 50},
        // Default lambda 0.25: x = 175 -> floor(100 / (1 + e^0.175)) = floor(45.64) = 45.
        StrandingCase{0.25, 1000, 45, 50},
        // x = 350 -> floor(100 / (1 + e^0.35)) = floor(41.34) = 41.
        StrandingCase{0.5, 1000, 41, 50},
        // x = 700 -> floor(100 / (1 + e^0.7)) = floor(33.18) = 33.
        StrandingCase{1.0, 1000, 33, 50},
        // x = 700, T = 500 -> floor(100 / (1 + e^1.4)) = floor(19.78) = 19.
        StrandingCase{1.0, 500, 19, 50}));

TEST(TesseraPolicyTest, DefaultConfigAvoidsStrandingWhereFgdTies) {
  Builder b;
  b.Add(Node("n", 20000, 2));
  const NodeIdx m = b.Add(Node("m", 64000, 2));
  const TargetWorkload target{{TaskShape{5000, 500, 1, 0, 1.0}}};
  std::set<NodeIdx> fgd_choices;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    Engine tessera(MakeTesseraScorer(), seed);
    tessera.Observe(Share(5000, 500));
    EXPECT_EQ(tessera.Decide(b.state, 1, Share(12000, 500)).placement.node, m) << seed;
    Engine fgd(MakeFgdScorer(target), seed);
    fgd_choices.insert(fgd.Decide(b.state, 1, Share(12000, 500)).placement.node);
  }
  EXPECT_EQ(fgd_choices.size(), 2u);
}

// Two shapes of different CPU-to-GPU ratio. Observed: A = share 500 with 5000 milli-CPU
// (kappa 10) and B = one whole GPU with 1000 milli-CPU (kappa 1); A asks 1/3 of the GPU, B 2/3.
// Node N: 20 cores, 2 idle GPUs; node M: 64 cores. Demand: share 500 with 12000 milli-CPU, on
// GPU 0 either way, leaving N [500, 1000] with 8000 milli-CPU.
//   Delta F on both nodes: A still fits; B fits on GPU 1 and cannot use GPU 0's 500:
//   1/2 x 500 = 250.
//   S on N: before A: max(0, 2000 - 20000/10) = 0, B: 0; after A: 1500 - 800 = 700, B: 0.
//   Delta S = 1/3 x 700 = 233.3. On M: 0.
//   N: x = 250 + 0.25 x 233.3 = 308.3 -> floor(100 / (1 + e^0.3083)) = 42; M: x = 250 -> 43.
// One pooled ratio (6000 / 1500 = 4 milli-CPU per milli-GPU) would see no stranding on N
// (1500 - 8000/4 < 0) and score both 43: the A-type work that fills N runs out of CPU first.
TEST(TesseraPolicyTest, StrandingFillsTheNodeAtEachShapesOwnRatio) {
  Builder b;
  const NodeIdx n = b.Add(Node("n", 20000, 2));
  const NodeIdx m = b.Add(Node("m", 64000, 2));
  auto t = MakeTesseraScorer();
  t->Observe(Share(5000, 500));
  t->Observe(Whole(1000, 1));
  const Demand d = Share(12000, 500);
  const NodeScore sn = ScoreOne(*t, b.state, n, d);
  EXPECT_EQ(sn.score, 42);
  EXPECT_EQ(sn.gpus, 0b01u);
  EXPECT_EQ(ScoreOne(*t, b.state, m, d).score, 43);
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    Engine e(MakeTesseraScorer(), seed);
    e.Observe(Share(5000, 500));
    e.Observe(Whole(1000, 1));
    EXPECT_EQ(e.Decide(b.state, 1, d).placement.node, m) << seed;
  }
}

TEST(TesseraPolicyTest, ConfigValidation) {
  EXPECT_TRUE(TesseraConfig{}.Validate().ok());
  EXPECT_TRUE(Config(0, 1).Validate().ok());
  EXPECT_TRUE(Config(100, 1e6).Validate().ok());
  for (const TesseraConfig& bad :
       {Config(-0.1, 1000), Config(100.5, 1000), Config(std::nan(""), 1000), Config(0.1, 0),
        Config(0.1, -5), Config(0.1, 2e6), Config(0.1, std::nan(""))}) {
    EXPECT_EQ(bad.Validate().code(), StatusCode::kInvalidArgument)
        << bad.stranding_weight << " " << bad.score_temperature;
  }
  TesseraConfig cov;
  cov.coverage_pct = 0;
  EXPECT_FALSE(cov.Validate().ok());
  cov.coverage_pct = 100;
  EXPECT_TRUE(cov.Validate().ok());
  cov.coverage_pct = 100.5;
  EXPECT_FALSE(cov.Validate().ok());
}

TEST_F(TesseraTest, NeutralBeforeAnyObservation) {
  auto t = MakeTesseraScorer();
  const NodeScore sp = ScoreOne(*t, b_.state, p_, d_);
  const NodeScore sq = ScoreOne(*t, b_.state, q_, d_);
  EXPECT_EQ(sp.score, sq.score);
  EXPECT_EQ(sp.gpus, 0b1u);
}

// Packing loss. Observed: shares 470 x2, 650 x1, 320 x2 and 3 whole-GPU pods, no CPU (8
// arrivals, so the last re-learning saw all of them): M = {470: 1/4, 650: 1/8, 320: 1/4,
// whole: 3/8}, and the share-packing LP packs {470, 470}, {650, 320}, {320, 320, 320} with
// prices y_470 = 1/2, y_650 = 2/3, y_320 = 1/3. A 320 next to a lone 470 (free 530) loses
// K(530) - y_320 - K(210) = 1/2 - 1/3 - 0 = 1/6 GPU; on a fresh GPU it loses
// K(1000) - 1/3 - K(680) = 1 - 1/3 - 2/3 = 0.
// Delta F (64 cores: no stranding, Delta S = 0):
//   free [530] -> [210]: before 650 and whole lack a GPU: (1/8 + 3/8) 530 = 265; after every
//     shape lacks one: 210. Delta F = -55.
//   free [1000] -> [680]: before 0; after only the whole shape lacks a GPU: 3/8 680 = 255.
// FGD: floor(100 sigmoid(0.055)) = 51 vs floor(100 sigmoid(-0.255)) = 43: the 470's GPU.
// tessera: x = -55 + 20 * 1000 / 6 = 3278.3 -> floor(3.63) = 3 vs x = 255 -> 43: fresh GPU.
void ObservePackingMix(Scorer& s) {
  for (int i = 0; i < 2; ++i) s.Observe(Share(0, 470));
  s.Observe(Share(0, 650));
  for (int i = 0; i < 2; ++i) s.Observe(Share(0, 320));
  for (int i = 0; i < 3; ++i) s.Observe(Whole(0, 1));
}

TEST(TesseraPolicyTest, PackingLossKeepsSharesInLpPatterns) {
  Builder b;
  const NodeIdx a = b.Add(Node("a", 64000, 1), {Use(0, 470)});
  const NodeIdx f = b.Add(Node("f", 64000, 1));
  const NodeIdx c = b.Add(Node("c", 64000, 2), {Use(0, 470)});
  const Demand d = Share(0, 320);
  auto t = MakeTesseraScorer();
  ObservePackingMix(*t);
  EXPECT_EQ(ScoreOne(*t, b.state, a, d).score, 3);
  EXPECT_EQ(ScoreOne(*t, b.state, f, d).score, 43);
  // Inside one node [530, 1000] the same two choices: GPU 1 wins.
  const NodeScore sc = ScoreOne(*t, b.state, c, d);
  EXPECT_EQ(sc.score, 43);
  EXPECT_EQ(sc.gpus, 0b10u);

  auto fgd =
      MakeFgdScorer(TargetWorkload{{TaskShape{0, 470, 1, 0, 0.2}, TaskShape{0, 650, 1, 0, 0.1},
                                    TaskShape{0, 320, 1, 0, 0.2}, TaskShape{0, 1000, 1, 0, 0.5}}});
  EXPECT_EQ(ScoreOne(*fgd, b.state, a, d).score, 52);
  EXPECT_EQ(ScoreOne(*fgd, b.state, f, d).score, 41);
  const NodeScore fc = ScoreOne(*fgd, b.state, c, d);
  EXPECT_EQ(fc.score, 52);
  EXPECT_EQ(fc.gpus, 0b01u);
}

// Model scarcity. Observed: three whole-GPU pods pinned to T4 and one unpinned; the cluster has
// 2 free T4 GPUs and 2 free A100s. If the mix filled the cluster, the T4-pinned pods would ask
// 3/4 x 4 GPUs = 3 GPUs of the 2 T4s: T4's price is min(1, 1.5) = 1, A100's is 0. An unpinned
// pod on the T4 node then loses (1 - 0) x its milli-GPU; on the A100 node nothing, and a
// T4-pinned pod loses nothing on T4 (its cheapest allowed model is T4 itself).
TEST(TesseraPolicyTest, ScarcityKeepsUnpinnedWorkOffModelsThatPinnedPodsNeed) {
  Builder b;
  const NodeIdx t4 = b.Add(Node("t", 64000, 2, "T4"));
  const NodeIdx a100 = b.Add(Node("a", 64000, 2, "A100-80GB"));
  const Demand pinned{MilliCpu(0), MiB(0), 1, 1000, Bit("T4")};
  auto observe = [&](Scorer& s) {
    for (int i = 0; i < 3; ++i) s.Observe(pinned);
    s.Observe(Whole(0, 1));
  };
  // Only the classes seen: the prior for unseen ones has its own test below.
  TesseraConfig seen_only;
  seen_only.unseen_pinned_confidence = 0;
  TesseraConfig off = seen_only;
  off.scarcity_weight = 0;
  struct Case {
    const char* label;
    NodeIdx node;
    Demand demand;
    bool loses;  // scored lower than with scarcity_weight 0
  };
  for (const Case& c : {Case{"unpinned whole on T4", t4, Whole(0, 1), true},
                        Case{"unpinned share on T4", t4, Share(0, 500), true},
                        Case{"unpinned whole on A100", a100, Whole(0, 1), false},
                        Case{"T4-pinned whole on T4", t4, pinned, false}}) {
    auto with = MakeTesseraScorer(seen_only);
    auto without = MakeTesseraScorer(off);
    observe(*with);
    observe(*without);
    const double s_with = ScoreOne(*with, b.state, c.node, c.demand).score;
    const double s_without = ScoreOne(*without, b.state, c.node, c.demand).score;
    if (c.loses) {
      EXPECT_LT(s_with, s_without) << c.label;
    } else {
      EXPECT_EQ(s_with, s_without) << c.label;
    }
  }
  // It sends an unpinned pod to the A100 node whatever the tie-break seed.
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    Engine e(MakeTesseraScorer(seen_only), seed);
    for (int i = 0; i < 3; ++i) e.Observe(pinned);
    e.Observe(Whole(0, 1));
    EXPECT_EQ(e.Decide(b.state, 1, Share(0, 500)).placement.node, a100) << seed;
  }
}

// Model prices follow the ledger, not only the re-learnings. Node t: T4, 4 GPUs; node a: A100,
// 8 GPUs; CPU to spare. Seen: 1 T4-pinned and 7 unpinned whole-GPU pods (the next re-learning
// is at 16). Empty: p_T4 = (1/8 * 12 GPUs) / 4 = 0.375 and phi = 1, so an unpinned GPU on t
// costs 375 milli-GPU. With 3 of t's GPUs taken: p_T4 = (1/8 * 9) / 1, capped at 1, and
// phi = 0.75, so it costs 750 (score 32 against 40). A scorer that priced the empty cluster
// first scores the filled one as a scorer that sees it first does; with prices that never
// move on (tolerance 100 steps) it keeps the empty cluster's price.
TEST(TesseraPolicyTest, ModelPricesFollowTheLedgerBetweenRelearnings) {
  Builder b;
  const NodeIdx t4 = b.Add(Node("t", 640000, 4, "T4"));
  b.Add(Node("a", 640000, 8, "A100-80GB"));
  const Demand pinned{MilliCpu(0), MiB(0), 1, 1000, Bit("T4")};
  TesseraConfig c;
  c.unseen_pinned_confidence = 0;
  c.balance_weight = 0;  // its LP is solved at re-learnings only
  TesseraConfig frozen = c;
  frozen.reprice_tolerance = 100;
  auto make = [&](const TesseraConfig& config) {
    auto s = MakeTesseraScorer(config);
    s->Observe(pinned);
    for (int i = 0; i < 7; ++i) s->Observe(Whole(0, 1));
    return s;
  };
  auto early = make(c);
  auto early_frozen = make(frozen);
  EXPECT_EQ(ScoreOne(*early, b.state, t4, Whole(0, 1)).score, 40);
  EXPECT_EQ(ScoreOne(*early_frozen, b.state, t4, Whole(0, 1)).score, 40);
  for (WorkloadId id = 1; id <= 3; ++id)
    ASSERT_TRUE(b.state.Allocate(id, Whole(0, 1), {t4, GpuMask{1} << (id - 1)}).ok());
  auto late = make(c);
  EXPECT_EQ(ScoreOne(*late, b.state, t4, Whole(0, 1)).score, 32);
  EXPECT_EQ(ScoreOne(*early, b.state, t4, Whole(0, 1)).score, 32);
  EXPECT_EQ(ScoreOne(*early_frozen, b.state, t4, Whole(0, 1)).score, 40);
}

// Pinned classes not seen yet. After 10 unpinned whole-GPU tasks, a class pinned to one model
// alone could still hold up to 3/10 of the GPU tasks (rule of three): filling the 10 free GPUs
// it would ask 3 GPUs of the model, all of the 2-GPU T4 node (price 1) and 3/8 of the 8-GPU
// A100 node. So an unpinned pod loses on the rare model and not on the common one. After
// 100,000 such tasks the bound is 3e-5 of the demand: the loss is below one score point.
TEST(TesseraPolicyTest, UnseenPinnedClassesKeepEarlyWorkOffRareModels) {
  Builder b;
  const NodeIdx t4 = b.Add(Node("t", 64000, 2, "T4"));
  const NodeIdx a100 = b.Add(Node("a", 64000, 8, "A100-80GB"));
  TesseraConfig off;
  off.unseen_pinned_confidence = 0;
  // Score points the prior costs a pod on `node` after `seen` unpinned whole-GPU tasks.
  auto loss = [&](int64_t seen, NodeIdx node) {
    auto with = MakeTesseraScorer();
    auto without = MakeTesseraScorer(off);
    for (int64_t i = 0; i < seen; ++i) {
      with->Observe(Whole(0, 1));
      without->Observe(Whole(0, 1));
    }
    return ScoreOne(*without, b.state, node, Whole(0, 1)).score -
           ScoreOne(*with, b.state, node, Whole(0, 1)).score;
  };
  EXPECT_GE(loss(10, t4), 10);
  EXPECT_EQ(loss(10, a100), 0);
  EXPECT_LE(loss(100000, t4), 1);
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    Engine e(MakeTesseraScorer(), seed);
    for (int i = 0; i < 10; ++i) e.Observe(Whole(0, 1));
    EXPECT_EQ(e.Decide(b.state, 1, Whole(0, 1)).placement.node, a100) << seed;
  }
}

// Capacity balance (docs/POLICIES.md item 7). Node t: T4, 2 GPUs, 100 cores; node a: A100,
// 8 GPUs, 16 cores. Observed: 3 CPU-heavy whole-GPU pods (40 cores) and 7 CPU-light ones
// (2 cores). Filling the 10 free GPUs with that mix, the LP puts the heavy work on t and the
// light work on a (capacity_prices_test has the prices): a light pod on t takes a GPU the
// heavy work needs and loses 950 milli-GPU; on a it loses nothing. A heavy pod loses nothing
// on either node.
TEST(TesseraPolicyTest, BalanceSendsWorkWhereTheMixFits) {
  Builder b;
  const NodeIdx t = b.Add(Node("t", 100000, 2, "T4"));
  const NodeIdx a = b.Add(Node("a", 16000, 8, "A100-80GB"));
  TesseraConfig on;
  on.unseen_pinned_confidence = 0;  // the rare-model prior would also favour a
  TesseraConfig off = on;
  off.balance_weight = 0;
  auto observe = [](Scorer& s) {
    for (int i = 0; i < 3; ++i) s.Observe(Whole(40000, 1));
    for (int i = 0; i < 7; ++i) s.Observe(Whole(2000, 1));
  };
  auto score = [&](const TesseraConfig& c, NodeIdx n, const Demand& d) {
    auto s = MakeTesseraScorer(c);
    observe(*s);
    return ScoreOne(*s, b.state, n, d).score;
  };
  const Demand light = Whole(2000, 1), heavy = Whole(40000, 1);
  EXPECT_LT(score(on, t, light), score(off, t, light));
  EXPECT_EQ(score(on, a, light), score(off, a, light));
  EXPECT_EQ(score(on, t, heavy), score(off, t, heavy));
  EXPECT_EQ(score(on, a, heavy), score(off, a, heavy));
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    Engine e(MakeTesseraScorer(on), seed);
    for (int i = 0; i < 3; ++i) e.Observe(heavy);
    for (int i = 0; i < 7; ++i) e.Observe(light);
    EXPECT_EQ(e.Decide(b.state, 1, light).placement.node, a) << seed;
  }
}

// The balance prices follow the free capacity between re-learnings. Same nodes and mix as above.
// A pod on a taking 15 of its 16 cores moves the free CPU by 13% (above a fraction of 1/8): a
// light pod then fits only on t, so the LP solved again loses nothing there, and t scores as
// without the balance term. A scorer that solves only at re-learnings keeps the empty
// cluster's prices and still keeps light work off t.
TEST(TesseraPolicyTest, BalancePricesFollowTheFreeCapacityBetweenRelearnings) {
  Builder b;
  const NodeIdx t = b.Add(Node("t", 100000, 2, "T4"));
  const NodeIdx a = b.Add(Node("a", 16000, 8, "A100-80GB"));
  TesseraConfig on;
  on.unseen_pinned_confidence = 0;
  on.scarcity_weight = 0;
  on.balance_resolve_fraction = 0.125;
  TesseraConfig fixed = on;
  fixed.balance_resolve_fraction = 0;
  TesseraConfig off = on;
  off.balance_weight = 0;
  auto make = [](const TesseraConfig& c) {
    auto s = MakeTesseraScorer(c);
    for (int i = 0; i < 3; ++i) s->Observe(Whole(40000, 1));
    for (int i = 0; i < 7; ++i) s->Observe(Whole(2000, 1));
    return s;
  };
  const Demand light = Whole(2000, 1);
  auto following = make(on), solved_once = make(fixed), without = make(off);
  const int before = ScoreOne(*without, b.state, t, light).score;
  EXPECT_LT(ScoreOne(*following, b.state, t, light).score, before);
  EXPECT_LT(ScoreOne(*solved_once, b.state, t, light).score, before);
  ASSERT_TRUE(b.state.Allocate(1, Whole(15000, 1), {a, GpuMask{1}}).ok());
  const int after = ScoreOne(*without, b.state, t, light).score;
  EXPECT_EQ(ScoreOne(*following, b.state, t, light).score, after);
  EXPECT_EQ(ScoreOne(*make(on), b.state, t, light).score, after);
  EXPECT_LT(ScoreOne(*solved_once, b.state, t, light).score, after);
}

// Expects Validate to refuse each value of `bad` put in `field` of a default config.
template <typename T>
void ExpectRefused(T TesseraConfig::*field, std::initializer_list<T> bad) {
  for (T v : bad) {
    TesseraConfig c;
    c.*field = v;
    EXPECT_FALSE(c.Validate().ok()) << v;
  }
}

TEST(TesseraPolicyTest, BalanceSettingsAreValidated) {
  ExpectRefused<double>(&TesseraConfig::balance_weight, {-1.0, 101.0, std::nan("")});
  ExpectRefused<int>(&TesseraConfig::balance_classes, {-1, 0, 257});
  ExpectRefused<double>(&TesseraConfig::balance_resolve_fraction, {-0.1, 1.5, std::nan("")});
  TesseraConfig c;
  c.balance_weight = 0;
  c.balance_classes = 1;
  c.balance_resolve_fraction = 0;
  EXPECT_TRUE(c.Validate().ok());
}

// The settings of the model-scarcity loss (item 5) and the packing weight.
TEST(TesseraPolicyTest, ScarcityWeightIsValidated) {
  TesseraConfig c;
  for (double bad : {-1.0, 101.0, std::nan("")}) {
    c.scarcity_weight = bad;
    EXPECT_FALSE(c.Validate().ok()) << bad;
  }
  c.scarcity_weight = 0;
  EXPECT_TRUE(c.Validate().ok());
  ExpectRefused<double>(&TesseraConfig::unseen_pinned_confidence, {-0.1, 1.0, std::nan("")});
  ExpectRefused<double>(&TesseraConfig::reprice_tolerance, {-0.5, 101.0, std::nan("")});
  TesseraConfig r;
  r.reprice_tolerance = 0;
  EXPECT_TRUE(r.Validate().ok());
  c.packing_weight = -1;
  EXPECT_FALSE(c.Validate().ok());
}

// A past workload counts like arrivals while the arrivals agree with it. Classes compared:
// CPU-only, shares by quarter, one / 2-3 / 4-7 / 8+ GPUs, each pinned or not (18). With
// k = 18 and a false-alarm rate r = 0.001, a sample of n is within
// eps(n) = sqrt(2 (18 ln 2 + ln(2 / r)) / n) of its distribution: eps(2000) = 0.142,
// eps(16) = 1.584.
const FragDescentScorer& Learner(const std::unique_ptr<Scorer>& s) {
  return dynamic_cast<const FragDescentScorer&>(*s);
}

TEST(TesseraPastTest, APastOfAnotherMixIsForgottenAtTheFirstCheck) {
  auto t = MakeTesseraScorer();
  for (int i = 0; i < 2000; ++i) t->ObservePast(Share(4000, 500));
  ASSERT_EQ(Learner(t).model().target().shapes.size(), 1u);
  EXPECT_EQ(Learner(t).model().target().shapes[0].gpu_milli, 500);
  // Arrivals of whole GPUs: disjoint classes, L1 distance 2 > 0.142 + 1.584 at the 16th.
  for (int i = 0; i < 15; ++i) t->Observe(Whole(8000, 1));
  EXPECT_FALSE(Learner(t).past_forgotten());
  t->Observe(Whole(8000, 1));
  EXPECT_TRUE(Learner(t).past_forgotten());
  // Re-learned from the 16 arrivals alone.
  const auto& shapes = Learner(t).model().target().shapes;
  ASSERT_EQ(shapes.size(), 1u);
  EXPECT_EQ(shapes[0].num_gpu, 1);
  EXPECT_EQ(shapes[0].gpu_milli, 1000);
  EXPECT_DOUBLE_EQ(shapes[0].popularity, 1.0);
  // Forgotten for good: more past is ignored.
  for (int i = 0; i < 100; ++i) t->ObservePast(Share(4000, 500));
  EXPECT_EQ(Learner(t).model().target().shapes.size(), 1u);
}

TEST(TesseraPastTest, APastOfTheSameMixIsKept) {
  auto t = MakeTesseraScorer();
  for (int i = 0; i < 1000; ++i) {
    t->ObservePast(Share(4000, 500));
    t->ObservePast(Whole(8000, 1));
  }
  // The same two classes in the same proportion, checked at 16, 32, ..., 4096 arrivals.
  for (int i = 0; i < 2048; ++i) {
    t->Observe(Whole(8000, 1));
    t->Observe(Share(4000, 500));
  }
  EXPECT_FALSE(Learner(t).past_forgotten());
  const auto& shapes = Learner(t).model().target().shapes;
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_DOUBLE_EQ(shapes[0].popularity, 0.5);
}

TEST(TesseraPastTest, WithoutAPastNothingIsForgotten) {
  auto t = MakeTesseraScorer();
  for (int i = 0; i < 100; ++i) t->Observe(Whole(8000, 1));
  EXPECT_FALSE(Learner(t).past_forgotten());
  // A past that comes after the first arrival is one more arrival.
  t->ObservePast(Share(4000, 500));
  t->Observe(Whole(8000, 1));
  EXPECT_FALSE(Learner(t).past_forgotten());
}

TEST(TesseraPastTest, FalseAlarmRateIsValidated) {
  ExpectRefused<double>(&TesseraConfig::past_false_alarm, {0.0, 1.0, -0.5, std::nan("")});
  TesseraConfig c;
  c.past_false_alarm = 0.05;
  EXPECT_TRUE(c.Validate().ok());
}

// The mix is followed as it changes: windows of up to TesseraConfig::mix_window (1024)
// arrivals are compared with the sample the mix was learned from, at 16, 32, ..., 1024
// arrivals, by the same bound (over the 18 shape classes eps(4096) = 0.101, eps(128) = 0.570,
// eps(64) = 0.806; over the 6 CPU classes eps(4096) = 0.078, eps(16) = 1.248).
std::unique_ptr<Scorer> TesseraWithWindow(int window) {
  TesseraConfig c;
  c.mix_window = window;
  return MakeTesseraScorer(c);
}

TEST(TesseraMixChangeTest, AMixThatChangesIsRelearnedFromTheWindowAlone) {
  for (int window : {1024, 0}) {
    SCOPED_TRACE(window);
    auto t = TesseraWithWindow(window);
    for (int i = 0; i < 4096; ++i) t->Observe(Share(4000, 500));
    for (int i = 0; i < 15; ++i) t->Observe(Whole(8000, 1));
    EXPECT_EQ(Learner(t).mix_changes(), 0);
    for (int i = 0; i < 2048; ++i) t->Observe(Whole(8000, 1));
    const auto& shapes = Learner(t).model().target().shapes;
    if (window == 0) {
      // The learned mix never forgets: the 4,096 shares still dominate it.
      EXPECT_EQ(Learner(t).mix_changes(), 0);
      ASSERT_EQ(shapes.size(), 2u);
      EXPECT_EQ(shapes[0].gpu_milli, 500);
      continue;
    }
    // Disjoint classes: L1 distance 2 > eps(4096) + eps(16) at the 16th whole GPU, and from
    // then on the mix is the whole GPUs alone.
    EXPECT_EQ(Learner(t).mix_changes(), 1);
    EXPECT_FALSE(Learner(t).past_forgotten());
    ASSERT_EQ(shapes.size(), 1u);
    EXPECT_EQ(shapes[0].gpu_milli, 1000);
    EXPECT_DOUBLE_EQ(shapes[0].popularity, 1.0);
  }
}

TEST(TesseraMixChangeTest, AShiftInProportionIsFoundWithinTheWindow) {
  auto t = MakeTesseraScorer();
  // Half shares, half whole GPUs, then 9 in 10 whole GPUs: L1 distance 0.8, above
  // eps(4096) + eps(128) = 0.67 but not above eps(4096) + eps(64) = 0.91.
  for (int i = 0; i < 2048; ++i) {
    t->Observe(Share(4000, 500));
    t->Observe(Whole(8000, 1));
  }
  for (int i = 0; i < 127; ++i) t->Observe(i % 10 == 0 ? Share(4000, 500) : Whole(8000, 1));
  EXPECT_EQ(Learner(t).mix_changes(), 0);
  t->Observe(Whole(8000, 1));
  EXPECT_EQ(Learner(t).mix_changes(), 1);
  const auto& shapes = Learner(t).model().target().shapes;
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0].gpu_milli, 1000);
  EXPECT_NEAR(shapes[0].popularity, 115.0 / 128.0, 1e-9);
}

TEST(TesseraMixChangeTest, AChangeOnlyInCpuPerGpuIsFound) {
  for (int window : {1024, 0}) {
    SCOPED_TRACE(window);
    auto t = TesseraWithWindow(window);
    // The same shape, 8 then 32 cores per GPU: the shape classes agree, the CPU classes are
    // disjoint (L1 distance 2 > eps(4096) + eps(16) = 1.33 at the 16th new pod).
    for (int i = 0; i < 4096; ++i) t->Observe(Whole(8000, 1));
    for (int i = 0; i < 15; ++i) t->Observe(Whole(32000, 1));
    EXPECT_EQ(Learner(t).mix_changes(), 0);
    t->Observe(Whole(32000, 1));
    if (window == 0) {
      EXPECT_EQ(Learner(t).mix_changes(), 0);
      continue;
    }
    EXPECT_EQ(Learner(t).mix_changes(), 1);
    for (int i = 0; i < 16; ++i) t->Observe(Whole(32000, 1));
    const auto& shapes = Learner(t).model().target().shapes;
    ASSERT_EQ(shapes.size(), 1u);
    EXPECT_EQ(shapes[0].cpu, 32000);
  }
}

TEST(TesseraMixChangeTest, AMixThatStaysIsNeverForgotten) {
  // 200 windows of a mix over eight of the classes, with class shares from 2% to 40%: the
  // learned mix is the one a scorer that never forgets learns from the same arrivals.
  auto t = MakeTesseraScorer();
  auto never = TesseraWithWindow(0);
  const std::vector<std::pair<Demand, double>> mix = {
      {Share(4000, 100), 0.40},    {Share(4000, 300), 0.20},
      {Share(6000, 600), 0.10},    {Whole(8000, 1), 0.15},
      {Whole(16000, 2), 0.05},     {Whole(32000, 8), 0.02},
      {Share(4000, 500, 1), 0.05}, {Demand{MilliCpu{2000}, MiB{0}, 0, 0, 0}, 0.03}};
  Rng rng(7);
  for (int i = 0; i < 200 * 1024; ++i) {
    double u = rng.UniformDouble();
    size_t k = 0;
    while (k + 1 < mix.size() && u >= mix[k].second) u -= mix[k++].second;
    t->Observe(mix[k].first);
    never->Observe(mix[k].first);
  }
  EXPECT_EQ(Learner(t).mix_changes(), 0);
  const auto& shapes = Learner(t).model().target().shapes;
  const auto& expected = Learner(never).model().target().shapes;
  ASSERT_EQ(shapes.size(), expected.size());
  ASSERT_GE(shapes.size(), 6u);
  for (size_t i = 0; i < shapes.size(); ++i) {
    EXPECT_EQ(shapes[i].gpu_milli, expected[i].gpu_milli) << i;
    EXPECT_EQ(shapes[i].num_gpu, expected[i].num_gpu) << i;
    EXPECT_DOUBLE_EQ(shapes[i].popularity, expected[i].popularity) << i;
  }
}

TEST(TesseraMixChangeTest, WindowIsValidated) {
  ExpectRefused<int>(&TesseraConfig::mix_window, {-1, 8, 15, 100, 1 << 21});
  for (int ok : {0, 16, 1 << 20}) {
    TesseraConfig c;
    c.mix_window = ok;
    EXPECT_TRUE(c.Validate().ok()) << ok;
  }
}

// ---------------------------------------------------------------------------------------
// SharePrices: dual prices of the share-packing LP.

TEST(SharePricesTest, EmptyHasNoLoss) {
  const SharePrices p = SharePrices::Solve({});
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(p.Loss(1000, 470), 0.0);
}

TEST(SharePricesTest, OneSizePacksPairs) {
  const std::vector<ShareCount> items = {{500, 3}};
  const SharePrices p = SharePrices::Solve(items);
  EXPECT_NEAR(p.Price(500), 0.5, 1e-9);
  EXPECT_NEAR(p.objective(), 0.5, 1e-9);  // GPUs per task
  EXPECT_NEAR(p.BestFill(999), 0.5, 1e-9);
  EXPECT_NEAR(p.BestFill(1000), 1.0, 1e-9);
  EXPECT_NEAR(p.Loss(1000, 500), 0.0, 1e-9);
  EXPECT_NEAR(p.Loss(510, 500), 0.0, 1e-9);
  EXPECT_EQ(p.Loss(400, 500), 0.0);  // does not fit
}

TEST(SharePricesTest, HandSolvedPatterns) {
  // Optimal packing of 470 x2, 650 x1, 320 x2: {470, 470}, {650, 320}, 1/3 of {320 x3}:
  // 7/3 GPUs for 5 tasks. All three patterns are used, so their prices are tight.
  const std::vector<ShareCount> items = {{470, 2}, {650, 1}, {320, 2}};
  const SharePrices p = SharePrices::Solve(items);
  EXPECT_NEAR(p.objective(), 7.0 / 15.0, 1e-9);
  EXPECT_NEAR(p.Price(470), 0.5, 1e-9);
  EXPECT_NEAR(p.Price(650), 2.0 / 3.0, 1e-9);
  EXPECT_NEAR(p.Price(320), 1.0 / 3.0, 1e-9);
  EXPECT_NEAR(p.Loss(530, 320), 1.0 / 6.0, 1e-9);  // 320 next to a 470
  EXPECT_NEAR(p.Loss(350, 320), 0.0, 1e-9);        // 320 completes a 650
  EXPECT_NEAR(p.Loss(1000, 320), 0.0, 1e-9);
  EXPECT_NEAR(p.Loss(680, 470), 1.0 / 6.0, 1e-9);  // 470 next to a 320
  EXPECT_NEAR(p.Loss(530, 470), 0.0, 1e-9);
  // A size outside the LP is priced at K(d): 100 fits nothing learned, so it is free.
  EXPECT_NEAR(p.Price(100), 0.0, 1e-9);
}

TEST(SharePricesTest, ScarceFillersAreFree) {
  // 810s outnumber the 160s that could complete them: every extra 810 needs its own GPU
  // (y = 1), so a 160 costs nothing wherever it goes.
  const std::vector<ShareCount> items = {{810, 10}, {160, 1}};
  const SharePrices p = SharePrices::Solve(items);
  EXPECT_NEAR(p.Price(810), 1.0, 1e-9);
  EXPECT_NEAR(p.Price(160), 0.0, 1e-9);
  EXPECT_NEAR(p.objective(), 10.0 / 11.0, 1e-9);
  EXPECT_NEAR(p.Loss(190, 160), 0.0, 1e-9);
  EXPECT_NEAR(p.Loss(1000, 810), 0.0, 1e-9);
}

TEST(SharePricesTest, FillsGapsThatAreNotMultiplesOfTheSizes) {
  // Sizes 300 and 450 (gcd 150; 1000 is not a multiple): y_300 = 1/3 (three per GPU), y_450 =
  // 1/2 (two per GPU), and a 450 with a 300 is worth 5/6.
  const std::vector<ShareCount> items = {{300, 1}, {450, 1}};
  const SharePrices p = SharePrices::Solve(items);
  EXPECT_NEAR(p.Price(300), 1.0 / 3.0, 1e-9);
  EXPECT_NEAR(p.Price(450), 0.5, 1e-9);
  EXPECT_NEAR(p.objective(), 5.0 / 12.0, 1e-9);
  EXPECT_NEAR(p.BestFill(299), 0.0, 1e-9);
  EXPECT_NEAR(p.BestFill(749), 2.0 / 3.0, 1e-9);
  EXPECT_NEAR(p.BestFill(750), 5.0 / 6.0, 1e-9);
  EXPECT_NEAR(p.BestFill(899), 5.0 / 6.0, 1e-9);
  EXPECT_NEAR(p.BestFill(900), 1.0, 1e-9);
  EXPECT_NEAR(p.BestFill(1000), 1.0, 1e-9);
  EXPECT_NEAR(p.Loss(700, 450), 1.0 / 6.0, 1e-9);  // a 450 leaves 250, which holds nothing
}

TEST(SharePricesTest, BestFillIsTheKnapsackOfThePrices) {
  // K(r) against an unbounded knapsack over every capacity, on random size sets: with and
  // without a common divisor, some not dividing 1000.
  Rng rng(7);
  const std::vector<int> steps = {1, 7, 10, 30, 125, 150};
  for (int round = 0; round < 60; ++round) {
    const int step = steps[round % steps.size()];
    std::vector<ShareCount> items;
    const int n = 1 + static_cast<int>(rng.Uniform(6));
    for (int i = 0; i < n; ++i) {
      const int units = 1 + static_cast<int>(rng.Uniform(999 / step));
      if (units * step < 1000) items.push_back({units * step, 1.0 + 5.0 * rng.UniformDouble()});
    }
    const SharePrices p = SharePrices::Solve(items);
    std::vector<double> best(1001, 0.0);
    for (int c = 1; c <= 1000; ++c) {
      best[c] = best[c - 1];
      for (const ShareCount& it : items)
        if (it.milli <= c) best[c] = std::max(best[c], best[c - it.milli] + p.Price(it.milli));
    }
    for (int c = 0; c <= 1000; ++c)
      ASSERT_NEAR(p.BestFill(c), best[c], 1e-7) << "round " << round << ", capacity " << c;
  }
}

}  // namespace
}  // namespace tessera
