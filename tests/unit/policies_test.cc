#include <gtest/gtest.h>

#include <cmath>
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
// Score tables for the stateless baselines. Each case is one node (with prior pods), one
// demand, the expected score and the expected GPU mask.

struct ScoreCase {
  const char* label;
  NodeSpec node;
  std::vector<Prior> prior;
  Demand demand;
  double score;
  GpuMask gpus;
};

void PrintTo(const ScoreCase& c, std::ostream* os) {
  *os << c.label;
}

std::string CaseName(const ::testing::TestParamInfo<ScoreCase>& info) {
  return info.param.label;
}

void RunScoreCase(Scorer& scorer, const ScoreCase& c) {
  Builder b;
  const NodeIdx n = b.Add(c.node, c.prior);
  ASSERT_EQ(FilterNode(b.state.free(n), c.demand), FilterVerdict::kFits);
  const NodeScore s = ScoreOne(scorer, b.state, n, c.demand);
  EXPECT_EQ(s.score, c.score);
  EXPECT_EQ(s.gpus, c.gpus);
}

class DotProdTest : public ::testing::TestWithParam<ScoreCase> {};
TEST_P(DotProdTest, Score) {
  RunScoreCase(*MakeDotProdScorer(), GetParam());
}

// score = floor(100 (1 - dot/2)), dot = (c/128000)(cpu/128000) + (R/8000)(k d/8000).
INSTANTIATE_TEST_SUITE_P(
    Cases, DotProdTest,
    ::testing::Values(
        // (64000/128000)(8000/128000) + (2000/8000)(500/8000) = 0.03125 + 0.015625
        // = 0.046875; 100 (1 - 0.0234375) = 97.66 -> 97. Best-fit among equal GPUs: GPU 0.
        ScoreCase{"SmallNodeShare", Node("n", 64000, 2), {}, Share(8000, 500), 97, 0b1},
        // 1 * 0.0625 + 1 * 0.0625 = 0.125; 100 (1 - 0.0625) = 93.75 -> 93.
        ScoreCase{"LargeNodeShare", Node("n", 128000, 8), {}, Share(8000, 500), 93, 0b1},
        // 1 * 0.125 + 1 * 0.25 = 0.375; 100 (1 - 0.1875) = 81.25 -> 81; first two GPUs.
        ScoreCase{"WholeTwo", Node("n", 128000, 8), {}, Whole(16000, 2), 81, 0b11},
        // 0.5 * 0.25 + 0 = 0.125 -> 93; no GPU.
        ScoreCase{"CpuOnly", Node("n", 64000, 2), {}, CpuOnly(32000), 93, 0},
        // R = 1300: 0 + 0.1625 * 0.025 = 0.0040625; 100 (1 - 0.00203125) = 99.8 -> 99.
        // Best fit: GPU 1 (300 free) over GPU 0 (1000 free).
        ScoreCase{
            "PartlyUsedBestFit", Node("n", 64000, 2), {Use(1, 700)}, Share(0, 200), 99, 0b10}),
    CaseName);

class ClusteringTest : public ::testing::TestWithParam<ScoreCase> {};
TEST_P(ClusteringTest, Score) {
  RunScoreCase(*MakeClusteringScorer(), GetParam());
}

// tier (75 same class only / 50 same and others / 25 no GPU pods / 0 others only)
// + floor(25 (8000 - R) / 8000).
INSTANTIATE_TEST_SUITE_P(
    Cases, ClusteringTest,
    ::testing::Values(
        // Empty 8-GPU node: 25 + floor(25 * 0 / 8000) = 25.
        ScoreCase{"EmptyNode", Node("n", 64000, 8), {}, Share(1000, 300), 25, 0b1},
        // One share pod, R = 7500: 75 + floor(25 * 500 / 8000 = 1.56) = 76. Best fit: GPU 0.
        ScoreCase{"SameClassOnly", Node("n", 64000, 8), {Use(0, 500)}, Share(1000, 300), 76, 0b1},
        // Same node, 1-GPU pod: only another class there -> 0 + 1 = 1. First free GPU: 1.
        ScoreCase{"OtherClassOnly", Node("n", 64000, 8), {Use(0, 500)}, Whole(0, 1), 1, 0b10},
        // Share + 1-GPU pods, R = 6500: 50 + floor(25 * 1500 / 8000 = 4.69) = 54.
        ScoreCase{"SameAndOther",
                  Node("n", 64000, 8),
                  {Use(0, 500), Use(1, 1000)},
                  Share(1000, 300),
                  54,
                  0b1},
        // Same node, 2-GPU demand: classes {share, 1-GPU} only -> 0 + 4 = 4; GPUs 2 and 3.
        ScoreCase{"OtherClassesOnlyWhole",
                  Node("n", 64000, 8),
                  {Use(0, 500), Use(1, 1000)},
                  Whole(0, 2),
                  4,
                  0b1100},
        // 2-GPU node with a share pod, R = 1500: 75 + floor(25 * 6500 / 8000 = 20.3) = 95.
        ScoreCase{"SmallNodeFuller", Node("n", 64000, 2), {Use(0, 500)}, Share(0, 200), 95, 0b1},
        // Two 2-GPU pods, R = 4000: 75 + floor(25 * 4000 / 8000 = 12.5) = 87.
        ScoreCase{"WholeSameClass",
                  Node("n", 64000, 8),
                  {{Whole(0, 2), 0b0011}, {Whole(0, 2), 0b1100}},
                  Whole(0, 2),
                  87,
                  0b110000},
        // CPU-only pods carry no GPU class: the node counts as empty -> 25.
        ScoreCase{
            "CpuOnlyPodIgnored", Node("n", 64000, 8), {{CpuOnly(4000), 0}}, Share(0, 300), 25, 0b1},
        ScoreCase{"CpuOnlyDemand", Node("n", 64000, 8), {Use(0, 500)}, CpuOnly(1000), 0, 0}),
    CaseName);

class PackingTest : public ::testing::TestWithParam<ScoreCase> {};
TEST_P(PackingTest, Score) {
  RunScoreCase(*MakePackingScorer(), GetParam());
}

// Node "used": 4 GPUs with free shares [1000, 300, 600, 1000].
const std::vector<Prior> kUsed = {Use(1, 700), Use(2, 400)};

INSTANTIATE_TEST_SUITE_P(
    Cases, PackingTest,
    ::testing::Values(
        // Case 1 on GPU 1 (300 free = 30%): max(100 - 30/10, 50) = 97.
        ScoreCase{"Case1LeastFree", Node("n", 64000, 4), kUsed, Share(0, 250), 97, 0b0010},
        // Case 1 on GPU 2 (60%): 100 - 6 = 94.
        ScoreCase{"Case1NextGpu", Node("n", 64000, 4), kUsed, Share(0, 500), 94, 0b0100},
        // Case 1 with truncation: 350 free = 35%, 35/10 = 3 -> 97.
        ScoreCase{"Case1Truncates", Node("n", 64000, 2), {Use(0, 650)}, Share(0, 300), 97, 0b01},
        // Needs a fully free GPU on a used node: case 2, max(50 - 1, 33) = 49; GPU 0.
        ScoreCase{"Case2Share", Node("n", 64000, 4), kUsed, Share(0, 700), 49, 0b0001},
        ScoreCase{"Case2WholeOne", Node("n", 64000, 4), kUsed, Whole(0, 1), 49, 0b0001},
        // Two fully free GPUs: max(50 - 2, 33) = 48; GPUs 0 and 3.
        ScoreCase{"Case2WholeTwo", Node("n", 64000, 4), kUsed, Whole(0, 2), 48, 0b1001},
        // Idle nodes: max(33 - G, G).
        ScoreCase{"Case3Idle8", Node("n", 64000, 8), {}, Share(0, 100), 25, 0b1},
        ScoreCase{"Case3Idle2", Node("n", 64000, 2), {}, Share(0, 100), 31, 0b1},
        ScoreCase{"Case3Idle1", Node("n", 64000, 1), {}, Whole(0, 1), 32, 0b1},
        // A CPU-only pod leaves every GPU free: still case 3.
        ScoreCase{
            "Case3CpuPodOnly", Node("n", 64000, 2), {{CpuOnly(8000), 0}}, Share(0, 100), 31, 0b1},
        ScoreCase{"CpuOnlyDemand", Node("n", 64000, 4), kUsed, CpuOnly(1000), 0, 0}),
    CaseName);

class BestFitTest : public ::testing::TestWithParam<ScoreCase> {};
TEST_P(BestFitTest, Score) {
  RunScoreCase(*MakeBestFitScorer(), GetParam());
}

// s = 0.5 (c - cpu) / 128000 + 0.5 (R - k d) / 8000; score = floor(100 (1 - s)).
INSTANTIATE_TEST_SUITE_P(
    Cases, BestFitTest,
    ::testing::Values(
        // 0.5 * 56000/128000 + 0.5 * 1500/8000 = 0.21875 + 0.09375 = 0.3125 -> 68.75 -> 68.
        ScoreCase{"Share", Node("n", 64000, 2), {}, Share(8000, 500), 68, 0b01},
        // 0.5 * 24000/128000 + 0.5 * 500/8000 = 0.09375 + 0.03125 = 0.125 -> 87.5 -> 87.
        ScoreCase{"TightNode", Node("n", 32000, 1), {}, Share(8000, 500), 87, 0b1},
        // 0.5 * 64000/128000 + 0.5 * 6000/8000 = 0.25 + 0.375 = 0.625 -> 37.5 -> 37.
        ScoreCase{"WholeTwo", Node("n", 96000, 8), {}, Whole(32000, 2), 37, 0b11},
        // R = 1300: 0.5 * 0.5 + 0.5 * 1100/8000 = 0.25 + 0.06875 = 0.31875 -> 68.1 -> 68.
        // Best fit: GPU 1.
        ScoreCase{"PartlyUsed", Node("n", 64000, 2), {Use(1, 700)}, Share(0, 200), 68, 0b10}),
    CaseName);

// ---------------------------------------------------------------------------------------
// Random.

TEST(RandomPolicyTest, ChoosesFeasibleNodesUniformly) {
  Builder b;
  for (int i = 0; i < 4; ++i) b.Add(Node("ok" + std::to_string(i), 64000, 4));
  const NodeIdx small = b.Add(Node("small", 1000, 4));
  Engine engine(MakeRandomScorer(), 99);
  const Demand d = Share(4000, 500);
  std::map<NodeIdx, int> count;
  for (int i = 0; i < 400; ++i) {
    const Decision dec = engine.Decide(b.state, i, d);
    ASSERT_TRUE(dec.placed);
    EXPECT_EQ(dec.score, 100);
    EXPECT_EQ(dec.feasible_nodes, 4);
    ++count[dec.placement.node];
  }
  EXPECT_EQ(count.count(small), 0u);
  ASSERT_EQ(count.size(), 4u);
  // Binomial(400, 1/4): mean 100, sd 8.7.
  for (const auto& [n, c] : count) {
    EXPECT_GT(c, 60) << n;
    EXPECT_LT(c, 140) << n;
  }
}

TEST(RandomPolicyTest, OnlyTheChosenNodeScores) {
  Builder b;
  for (int i = 0; i < 3; ++i) b.Add(Node("n" + std::to_string(i), 64000, 2));
  auto scorer = MakeRandomScorer();
  const std::vector<NodeIdx> feasible = {0, 1, 2};
  Rng rng(5);
  const Demand d = Share(0, 500);
  scorer->PreScore(b.state, d, feasible, rng);
  int hundreds = 0;
  for (NodeIdx n : feasible) {
    const NodeScore s = scorer->Score(b.state, n, d);
    if (s.score == 100) {
      ++hundreds;
      EXPECT_TRUE(s.gpus == 0b01 || s.gpus == 0b10) << s.gpus;
    } else {
      EXPECT_EQ(s.score, 0);
    }
  }
  EXPECT_EQ(hundreds, 1);
}

// ---------------------------------------------------------------------------------------
// FGD integer score and GPU choice.

// The table-driven score equals the exact one away from its step edges, across the whole
// range (both saturated ends included).
TEST(FgdIntegerScoreTest, FastMatchesExactOffTheEdges) {
  int64_t compared = 0;
  for (double delta = -40000; delta <= 40000; delta += 0.0371) {
    ASSERT_EQ(FgdIntegerScoreFast(delta), FgdIntegerScore(delta)) << delta;
    ++compared;
  }
  EXPECT_GT(compared, 2'000'000);
  for (int k = 1; k <= 99; ++k) {
    const double edge = 1000.0 * std::log(100.0 / k - 1.0);
    EXPECT_EQ(FgdIntegerScoreFast(edge - 1e-6), k) << k;
    EXPECT_EQ(FgdIntegerScoreFast(edge + 1e-6), k - 1) << k;
  }
}

TEST(FgdIntegerScoreTest, FloorOfScaledSigmoid) {
  struct Case {
    double delta;
    double score;
  };
  // floor(100 / (1 + e^(delta/1000))).
  const Case cases[] = {
      {0, 50},      // 100 / 2
      {-1000, 73},  // 100 / 1.3679 = 73.1
      {1000, 26},   // 100 / 3.7183 = 26.9
      {500, 37},    // 100 / 2.6487 = 37.8
      {-100, 52},   // 100 / 1.9048 = 52.5
      {10, 49},     // 100 / 2.0101 = 49.75
      {-200, 54},   // 100 / 1.8187 = 54.98
      {1e6, 0},     // e^1000 overflows to infinity
      {-1e6, 100},  // e^-1000 underflows to 0
  };
  for (const Case& c : cases) EXPECT_EQ(FgdIntegerScore(c.delta), c.score) << c.delta;
}

TEST(FgdPolicyTest, ShareChoosesGpuWithLeastFragmentationNotBestFit) {
  // M = {share 500, p = 1}. Node GPUs [700, 600], demand share 200.
  //   F before: both GPUs >= 500 -> 0.
  //   GPU 0 -> [500, 600]: both usable -> F = 0, delta 0, score 50.
  //   GPU 1 -> [700, 400]: 400 < 500 is fragment -> F = 400, score floor(40.1) = 40.
  Builder b;
  const NodeIdx n = b.Add(Node("n", 32000, 2), {Use(0, 300), Use(1, 400)});
  TargetWorkload t{{TaskShape{0, 500, 1, 0, 1.0}}};
  auto fgd = MakeFgdScorer(t);
  const Demand d = Share(1000, 200);
  const NodeScore s = ScoreOne(*fgd, b.state, n, d);
  EXPECT_EQ(s.score, 50);
  EXPECT_EQ(s.gpus, 0b01u);
  EXPECT_EQ(SelectBestFit(b.state.free(n), d), 0b10u);
}

class FgdTwoShapeTest : public ::testing::TestWithParam<ScoreCase> {};

// M = {A: cpu 1000, share 500, p 0.5; B: cpu 1000, 1 whole GPU, p 0.5}.
// Node GPUs [1000, 600]: F_A = 0 (both >= 500), F_B = 600 (GPU 1 too small for B),
// F before = 300.
TEST_P(FgdTwoShapeTest, Score) {
  TargetWorkload t{{TaskShape{1000, 500, 1, 0, 0.5}, TaskShape{1000, 1000, 1, 0, 0.5}}};
  RunScoreCase(*MakeFgdScorer(t), GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FgdTwoShapeTest,
    ::testing::Values(
        // GPU 0 -> [500, 600]: F_A 0, F_B = R = 1100 -> F 550, delta +250 -> 43.
        // GPU 1 -> [1000, 100]: F_A 100, F_B 100 -> F 100, delta -200 -> 54. GPU 1 wins.
        ScoreCase{
            "ShareTakesBetterGpu", Node("n", 32000, 2), {Use(1, 400)}, Share(1000, 500), 54, 0b10},
        // Whole GPU: [0, 600]: F_A 0, F_B = R = 600 -> F 300, delta 0 -> 50; GPU 0.
        ScoreCase{"WholeGpu", Node("n", 32000, 2), {Use(1, 400)}, Whole(1000, 1), 50, 0b01},
        // CPU-only leaving 500 milli-CPU: both shapes lack CPU -> F = R = 1600,
        // delta 1300 -> floor(100 / (1 + e^1.3)) = floor(21.4) = 21.
        ScoreCase{"CpuOnlyStarvesCpu", Node("n", 2000, 2), {Use(1, 400)}, CpuOnly(1500), 21, 0}),
    CaseName);

// The per-node cache is keyed by NodeFree::stamp. Stamps are unique across ClusterState
// copies, so one scorer used on an original and a diverging copy never returns the other
// state's cached score.
//   M = {share 500}, demand share 200. Original: GPUs [400, 1000]; GPU 0 -> 200 left,
//   F 400 -> 200, delta -200 -> 54. Copy: GPUs [700, 1000]; every choice keeps both GPUs
//   usable, delta 0 -> 50.
TEST(FgdPolicyTest, CacheIsNotFooledByACopiedState) {
  Builder b;
  const NodeIdx n = b.Add(Node("n", 32000, 2));
  ClusterState copy = b.state;
  ASSERT_TRUE(b.state.Allocate(1, Share(0, 600), {n, 0b01}).ok());
  ASSERT_TRUE(copy.Allocate(1, Share(0, 300), {n, 0b01}).ok());
  const TargetWorkload t{{TaskShape{0, 500, 1, 0, 1.0}}};
  const Demand d = Share(0, 200);
  Engine engine(MakeFgdScorer(t), 1);
  EXPECT_EQ(engine.Decide(b.state, 2, d).score, 54);
  EXPECT_EQ(engine.Decide(copy, 2, d).score, 50);
}

TEST(FgdPolicyTest, RegistryRequiresTarget) {
  auto r = BuiltinPolicies().Create(PolicyConfig{"fgd", TargetWorkload{}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------
// FragModel.

// Node: 8 cores, 4 T4 GPUs with free [1000, 600, 300, 0], R = 1900.
struct FragCase {
  const char* label;
  std::vector<TaskShape> shapes;
  double frag;
};

void PrintTo(const FragCase& c, std::ostream* os) {
  *os << c.label;
}

class FragModelHandTest : public ::testing::TestWithParam<FragCase> {};

TEST_P(FragModelHandTest, Frag) {
  Builder b;
  const NodeIdx n = b.Add(Node("n", 8000, 4), {Use(1, 400), Use(2, 700), Use(3, 1000)});
  ASSERT_EQ(b.state.free(n).gpu_total, 1900);
  FragModel m(TargetWorkload{GetParam().shapes});
  EXPECT_DOUBLE_EQ(m.Frag(b.state.free(n)), GetParam().frag);
  m.Load(b.state.free(n));
  EXPECT_DOUBLE_EQ(m.loaded_frag(), GetParam().frag);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FragModelHandTest,
    ::testing::Values(
        // CPU-only shape: all idle GPU counts -> R.
        FragCase{"CpuOnlyShape", {{1000, 0, 0, 0, 1.0}}, 1900},
        // Node model T4 not in {A100-40GB}: no access -> R.
        FragCase{"ModelNotAllowed", {{0, 500, 1, Bit("A100-40GB"), 1.0}}, 1900},
        // Q3: GPUs 0, 1 usable; fragments 300 + 0.
        FragCase{"ModelAllowedQ3", {{0, 500, 1, Bit("T4") | Bit("A10"), 1.0}}, 300},
        FragCase{"AnyModelQ3", {{0, 500, 1, 0, 1.0}}, 300},
        // Whole GPU: only GPU 0 usable; 600 + 300 + 0.
        FragCase{"WholeOneQ3", {{0, 1000, 1, 0, 1.0}}, 900},
        // Two whole GPUs needed, one exists -> R.
        FragCase{"WholeTwoLacksGpu", {{0, 1000, 2, 0, 1.0}}, 1900},
        // Every GPU with share left is usable for 300.
        FragCase{"SmallShareNoFragment", {{0, 300, 1, 0, 1.0}}, 0},
        // CPU exactly enough, then one milli-CPU short.
        FragCase{"CpuExactlyEnough", {{8000, 500, 1, 0, 1.0}}, 300},
        FragCase{"LacksCpu", {{8001, 500, 1, 0, 1.0}}, 1900},
        // 0.25 * 1900 + 0.75 * 300 = 475 + 225.
        FragCase{"Mixed", {{1000, 0, 0, 0, 0.25}, {0, 500, 1, 0, 0.75}}, 700},
        // 0.5 * 900 + 0.3 * 1900 + 0.2 * 0 = 450 + 570.
        FragCase{"ThreeShapes",
                 {{0, 1000, 1, 0, 0.5}, {0, 250, 1, Bit("G2"), 0.3}, {0, 200, 1, 0, 0.2}},
                 1020}),
    [](const ::testing::TestParamInfo<FragCase>& info) { return info.param.label; });

TEST(FragModelTest, NodesWithoutGpusHaveNoFragment) {
  Builder b;
  const NodeIdx n = b.Add(Node("cpu", 8000, 0));
  FragModel m(TargetWorkload{{{0, 500, 1, 0, 0.5}, {1000, 0, 0, 0, 0.5}}});
  EXPECT_EQ(m.Frag(b.state.free(n)), 0);
}

// Builds a node with the given free shares (and free CPU) through the ledger.
NodeIdx AddNodeWithFree(Builder& b, const std::string& name, int64_t cpu, int64_t cpu_free,
                        const std::vector<int>& free, GpuModelId model) {
  NodeSpec s;
  s.name = name;
  s.cpu = MilliCpu(cpu);
  s.memory = MiB(1 << 20);
  s.gpu_count = static_cast<int>(free.size());
  s.model = free.empty() ? kNoGpuModel : model;
  std::vector<Prior> prior;
  for (size_t g = 0; g < free.size(); ++g) {
    if (free[g] < 1000) prior.push_back(Use(static_cast<int>(g), 1000 - free[g]));
  }
  if (cpu_free < cpu) prior.push_back({CpuOnly(cpu - cpu_free), 0});
  return b.Add(s, prior);
}

TEST(FragModelTest, AfterMatchesFragOfTheModifiedNode) {
  Rng rng(777);
  const std::vector<GpuModelId> models = {Model("T4"), Model("G2"), Model("V100M32")};
  const int share_levels[] = {50, 100, 200, 250, 300, 400, 500, 600, 700, 750, 800, 900, 1000};
  int checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<TaskShape> shapes;
    const int num_shapes = 1 + static_cast<int>(rng.Uniform(6));
    for (int i = 0; i < num_shapes; ++i) {
      TaskShape s;
      s.cpu = static_cast<int64_t>(rng.Uniform(9)) * 2000;
      const uint64_t kind = rng.Uniform(3);
      if (kind == 1) {
        s.num_gpu = 1;
        s.gpu_milli = share_levels[rng.Uniform(12)];
      } else if (kind == 2) {
        s.num_gpu = 1 << rng.Uniform(4);
        s.gpu_milli = 1000;
      }
      if (s.num_gpu > 0 && rng.Uniform(3) == 0)
        s.models = ModelMask{1} << models[rng.Uniform(models.size())];
      s.popularity = 1.0 / num_shapes;
      shapes.push_back(s);
    }
    FragModel m(TargetWorkload{shapes});

    Builder b;
    const int gpus = 1 + static_cast<int>(rng.Uniform(8));
    std::vector<int> free(gpus);
    for (int& r : free) r = rng.Uniform(3) == 0 ? 1000 : static_cast<int>(rng.Uniform(1001));
    const int64_t cpu = 32000;
    const int64_t cpu_free = static_cast<int64_t>(rng.Uniform(33)) * 1000;
    const NodeIdx n = AddNodeWithFree(b, "n", cpu, cpu_free, free, models[rng.Uniform(3)]);
    const NodeFree before = b.state.free(n);
    m.Load(before);
    ASSERT_DOUBLE_EQ(m.loaded_frag(), m.Frag(before));

    Demand d;
    const uint64_t kind = rng.Uniform(3);
    d.cpu = MilliCpu(static_cast<int64_t>(rng.Uniform(cpu_free / 1000 + 1)) * 1000);
    if (kind == 1) {
      d.num_gpu = 1;
      d.gpu_milli = 1 + static_cast<int>(rng.Uniform(999));
    } else if (kind == 2) {
      d.num_gpu = 1 + static_cast<int>(rng.Uniform(gpus));
      d.gpu_milli = 1000;
    }
    if (FilterNode(before, d) != FilterVerdict::kFits) continue;
    GpuMask mask;
    double predicted;
    if (d.IsShare()) {
      // Any fitting GPU, not only the one a policy would choose.
      std::vector<int> fitting;
      for (int g = 0; g < gpus; ++g) {
        if (before.gpu[g] >= d.gpu_milli) fitting.push_back(g);
      }
      const int g = fitting[rng.Uniform(fitting.size())];
      mask = GpuMask{1} << g;
      predicted = m.After(d.cpu.v, before.gpu[g], before.gpu[g] - d.gpu_milli, 1);
    } else if (d.IsCpuOnly()) {
      mask = 0;
      predicted = m.After(d.cpu.v, 0, 0, 0);
    } else {
      mask = SelectFirstFit(before, d);
      predicted = m.After(d.cpu.v, 1000, 0, d.num_gpu);
    }
    ASSERT_TRUE(b.state.Allocate(1, d, {n, mask}).ok());
    EXPECT_NEAR(predicted, m.Frag(b.state.free(n)), 1e-9) << "trial " << trial;
    ++checked;
  }
  EXPECT_GT(checked, 200);
}

// A scorer evaluates nodes in the same state once (FragDescentScorer's memo by node content).
// Nodes that differ only in free CPU, GPU model or which GPU has which free share must still
// get their own scores: each equals what a scorer that saw only that node gives.
TEST(FgdPolicyTest, NodesAlikeShareAnEvaluationOthersDoNot) {
  Builder b;
  const std::vector<NodeIdx> nodes = {
      AddNodeWithFree(b, "a", 32000, 8000, {1000, 500}, Model("T4")),
      AddNodeWithFree(b, "a-twin", 32000, 8000, {1000, 500}, Model("T4")),
      AddNodeWithFree(b, "less-cpu", 32000, 4500, {1000, 500}, Model("T4")),
      AddNodeWithFree(b, "other-model", 32000, 8000, {1000, 500}, Model("G2")),
      AddNodeWithFree(b, "gpus-swapped", 32000, 8000, {500, 1000}, Model("T4"))};
  const TargetWorkload t{{TaskShape{4000, 1000, 1, 0, 0.5}, TaskShape{0, 500, 1, Bit("T4"), 0.5}}};
  const Demand d = Share(1000, 250);
  auto shared = MakeFgdScorer(t);
  Rng rng(1);
  shared->PreScore(b.state, d, nodes, rng);
  std::vector<NodeScore> alone;
  for (NodeIdx n : nodes) {
    alone.push_back(ScoreOne(*MakeFgdScorer(t), b.state, n, d));
    const NodeScore s = shared->Score(b.state, n, d);
    EXPECT_EQ(s.score, alone.back().score) << b.state.spec(n).name;
    EXPECT_EQ(s.gpus, alone.back().gpus) << b.state.spec(n).name;
  }
  // The nodes unlike "a" are unlike it in score or GPUs, so sharing would be caught above.
  for (size_t i = 2; i < nodes.size(); ++i)
    EXPECT_TRUE(alone[i].score != alone[0].score || alone[i].gpus != alone[0].gpus) << i;
}

// A model re-learned with the same distinct shares takes over the older model's per-node
// counts, and must then give exactly what counting afresh gives; with other shares it must
// count afresh.
struct KeepCountsCase {
  std::string label;
  std::vector<TaskShape> shapes;
};
class FragModelKeepCountsTest : public ::testing::TestWithParam<KeepCountsCase> {};

TEST_P(FragModelKeepCountsTest, LoadsAsIfCountedAfresh) {
  Builder b;
  const std::vector<NodeIdx> nodes = {
      AddNodeWithFree(b, "a", 32000, 32000, {300, 1000, 600, 0}, Model("T4")),
      AddNodeWithFree(b, "b", 32000, 4000, {1000, 1000, 250, 500}, Model("G2")),
      AddNodeWithFree(b, "c", 32000, 16000, {100, 900}, Model("T4")),
      AddNodeWithFree(b, "d", 32000, 0, {1000, 1000, 1000, 1000}, Model("V100M32"))};
  FragModel older(TargetWorkload{{{0, 500, 1, 0, 0.5}, {2000, 1000, 2, 0, 0.5}}});
  for (NodeIdx n : nodes) older.Load(b.state.free(n), n);

  FragModel kept(TargetWorkload{GetParam().shapes});
  FragModel fresh(TargetWorkload{GetParam().shapes});
  kept.KeepCounts(older);
  auto check = [&](const char* when) {
    for (NodeIdx n : nodes) {
      const NodeFree& f = b.state.free(n);
      kept.Load(f, n);
      fresh.Load(f);
      EXPECT_EQ(kept.loaded_frag(), fresh.Frag(f)) << when << " node " << n;
      EXPECT_EQ(kept.After(1000, 1000, 0, 1), fresh.After(1000, 1000, 0, 1)) << when;
      EXPECT_EQ(kept.After(0, f.gpu[0], 0, 1), fresh.After(0, f.gpu[0], 0, 1)) << when;
    }
  };
  check("first load");
  check("loaded again");
  ASSERT_TRUE(b.state.Allocate(1, Whole(1000, 1), {nodes[1], GpuMask{1}}).ok());
  check("after a node changed");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FragModelKeepCountsTest,
    ::testing::Values(
        KeepCountsCase{"SameSharesNewWeights", {{0, 500, 1, 0, 0.9}, {2000, 1000, 2, 0, 0.1}}},
        KeepCountsCase{
            "SameSharesOtherShapes",
            {{4000, 500, 1, 0, 0.3}, {0, 1000, 1, Bit("T4"), 0.4}, {0, 1000, 4, 0, 0.3}}},
        KeepCountsCase{"OtherShares", {{0, 250, 1, 0, 0.6}, {0, 700, 1, 0, 0.4}}}),
    [](const ::testing::TestParamInfo<KeepCountsCase>& info) { return info.param.label; });

// ---------------------------------------------------------------------------------------
// GPU selection inside a node.

class GpuSelectTest : public ::testing::Test {
 protected:
  void SetUp() override { n_ = b_.Add(Node("n", 64000, 4), {Use(0, 700), Use(2, 200)}); }
  const NodeFree& f() const { return b_.state.free(n_); }  // free [300, 1000, 800, 1000]
  Builder b_;
  NodeIdx n_ = 0;
};

TEST_F(GpuSelectTest, FirstFit) {
  EXPECT_EQ(SelectFirstFit(f(), Share(0, 250)), 0b0001u);
  EXPECT_EQ(SelectFirstFit(f(), Share(0, 500)), 0b0010u);
  EXPECT_EQ(SelectFirstFit(f(), Whole(0, 1)), 0b0010u);
  EXPECT_EQ(SelectFirstFit(f(), Whole(0, 2)), 0b1010u);
  EXPECT_EQ(SelectFirstFit(f(), Whole(0, 3)), 0u);
  EXPECT_EQ(SelectFirstFit(f(), CpuOnly(1000)), 0u);
}

TEST_F(GpuSelectTest, BestFit) {
  EXPECT_EQ(SelectBestFit(f(), Share(0, 250)), 0b0001u);
  EXPECT_EQ(SelectBestFit(f(), Share(0, 500)), 0b0100u);
  EXPECT_EQ(SelectBestFit(f(), Share(0, 900)), 0b0010u);  // equal free: lowest index
  EXPECT_EQ(SelectBestFit(f(), Whole(0, 2)), 0b1010u);
  EXPECT_EQ(SelectBestFit(f(), CpuOnly(1000)), 0u);
  Builder full;
  const NodeIdx n = full.Add(Node("n", 64000, 2), {Use(0, 700), Use(1, 500)});
  EXPECT_EQ(SelectBestFit(full.state.free(n), Share(0, 600)), 0u);
}

TEST_F(GpuSelectTest, RandomIsUniformOverFittingGpus) {
  Rng rng(3);
  std::map<GpuMask, int> count;
  for (int i = 0; i < 3000; ++i) ++count[SelectRandom(f(), Share(0, 500), rng)];
  ASSERT_EQ(count.size(), 3u);
  for (GpuMask m : {0b0010u, 0b0100u, 0b1000u}) {
    // Binomial(3000, 1/3): mean 1000, sd 26.
    EXPECT_GT(count[m], 880) << m;
    EXPECT_LT(count[m], 1120) << m;
  }
  EXPECT_EQ(SelectRandom(f(), Whole(0, 2), rng), 0b1010u);
  Rng a(11), b(11);
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(SelectRandom(f(), Share(0, 100), a), SelectRandom(f(), Share(0, 100), b));
}

// ---------------------------------------------------------------------------------------
// Registry.

TEST(PolicyRegistryTest, BuiltinNames) {
  const std::vector<std::string> names = BuiltinPolicies().Names();
  const std::set<std::string> got(names.begin(), names.end());
  const std::set<std::string> want = {"random",  "dotprod", "clustering", "packing",
                                      "bestfit", "fgd",     "tessera"};
  EXPECT_EQ(got, want);
  EXPECT_NE(got.count(kDefaultPolicy), 0u);
  const TargetWorkload target{{TaskShape{0, 500, 1, 0, 1.0}}};
  for (const std::string& n : names) {
    auto s = BuiltinPolicies().Create(PolicyConfig{n, target});
    ASSERT_TRUE(s.ok()) << n << ": " << s.status().ToString();
    EXPECT_EQ((*s)->name(), n);
    EXPECT_FALSE(BuiltinPolicies().Describe(n).empty()) << n;
  }
}

TEST(PolicyRegistryTest, UnknownNameListsKnownNames) {
  auto r = BuiltinPolicies().Create(PolicyConfig{"fgdd", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find("'fgdd'"), std::string::npos) << msg;
  for (const std::string& n : BuiltinPolicies().Names())
    EXPECT_NE(msg.find(n), std::string::npos) << n << " missing from: " << msg;
  EXPECT_EQ(BuiltinPolicies().Describe("fgdd"), "");
}

TEST(PolicyRegistryTest, CustomRegistry) {
  PolicyRegistry reg;
  auto make = [](const PolicyConfig&) -> Result<std::unique_ptr<Scorer>> {
    return std::unique_ptr<Scorer>(std::make_unique<FixedScorer>(std::map<NodeIdx, double>{}));
  };
  ASSERT_TRUE(reg.Register("zeta", "last", make).ok());
  ASSERT_TRUE(reg.Register("alpha", "first", make).ok());
  EXPECT_EQ(reg.Register("zeta", "again", make).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(reg.Describe("zeta"), "last");
  EXPECT_EQ(reg.Names(), (std::vector<std::string>{"alpha", "zeta"}));
  auto r = reg.Create(PolicyConfig{"beta", {}});
  ASSERT_FALSE(r.ok());
  for (const char* known : {"alpha", "zeta"})
    EXPECT_NE(r.status().message().find(known), std::string::npos) << r.status().message();
  EXPECT_TRUE(reg.Create(PolicyConfig{"alpha", {}}).ok());
}

}  // namespace
}  // namespace tessera
