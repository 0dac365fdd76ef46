#include "sim/fill_bound.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cluster/gpu_catalog.h"
#include "core/random.h"
#include "policies/share_prices.h"
#include "sim/family.h"
#include "sim/fill.h"
#include "sim/report.h"

namespace tessera {
namespace {

GpuModelId Model(const char* name) {
  return GpuCatalog::Builtin().Find(name).value();
}

ModelMask Only(const char* name) {
  return ModelMask{1} << Model(name);
}

NodeSpec Node(int64_t cpu, int gpus, const char* model, int64_t memory_mib = 1 << 20) {
  static int made = 0;
  NodeSpec s;
  s.name = "node-" + std::to_string(made++);
  s.cpu = MilliCpu(cpu);
  s.memory = MiB(memory_mib);
  s.gpu_count = gpus;
  s.model = Model(model);
  return s;
}

Demand Ask(int num_gpu, int milli, int64_t cpu, ModelMask models = 0, int64_t memory_mib = 1024) {
  return Demand{MilliCpu(cpu), MiB(memory_mib), num_gpu, milli, models};
}

std::vector<Demand> Times(int n, const Demand& d) {
  return std::vector<Demand>(n, d);
}

std::vector<Demand> Join(std::vector<Demand> a, const std::vector<Demand>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Case {
  const char* name;
  std::vector<NodeSpec> nodes;
  std::vector<Demand> arrived;
  double placeable_milli;
};

TEST(FillBound, FluidOptimumOfSmallClusters) {
  const std::vector<Case> cases = {
      {"nothing arrived", {Node(64000, 4, "T4")}, {}, 0},
      {"CPU-only pods take nothing", {Node(64000, 4, "T4")}, Times(3, Ask(0, 0, 1000)), 0},
      {"no more than arrived", {Node(64000, 4, "T4")}, Times(3, Ask(1, 1000, 1000)), 3000},
      {"no more than the cluster holds",
       {Node(64000, 4, "T4")},
       Times(9, Ask(1, 1000, 1000)),
       4000},
      // The bound's shares pack as far as whole pieces allow (dual feasible functions): three
      // 0.3 shares fit a GPU, not four; two 0.6 shares need two GPUs; halves pair up.
      {"three 0.3 shares to a GPU", {Node(64000, 1, "T4")}, Times(4, Ask(1, 300, 1000)), 900},
      {"one share above half to a GPU", {Node(64000, 2, "T4")}, Times(4, Ask(1, 600, 1000)), 1200},
      {"two 0.4 shares to a GPU", {Node(64000, 1, "T4")}, Times(5, Ask(1, 400, 1000)), 800},
      {"halves pair up", {Node(64000, 2, "T4")}, Times(5, Ask(1, 500, 1000)), 2000},
      {"quarters fill a GPU", {Node(64000, 1, "T4")}, Times(5, Ask(1, 250, 1000)), 1000},
      // A 0.6 share and a 0.4 share fill a GPU: three of each on three GPUs.
      {"large and small shares pair up",
       {Node(64000, 3, "T4")},
       Join(Times(3, Ask(1, 600, 1000)), Times(3, Ask(1, 400, 1000))),
       3000},
      // Whole GPUs leave the rest to one 0.7 share each.
      {"whole GPUs and shares above half",
       {Node(64000, 2, "T4")},
       Join(Times(1, Ask(1, 1000, 1000)), Times(3, Ask(1, 700, 1000))),
       1700},
      // 8 cores feed two 4-core pods.
      {"CPU binds", {Node(8000, 4, "T4")}, Times(4, Ask(1, 1000, 4000)), 2000},
      {"memory binds", {Node(64000, 4, "T4", 10240)}, Times(4, Ask(1, 1000, 1000, 0, 4096)), 2500},
      // The A100's 8 GPUs are out of the T4-pinned pods' reach.
      {"model pins bind",
       {Node(64000, 2, "T4"), Node(64000, 8, "A100-80GB")},
       Join(Times(5, Ask(1, 1000, 1000, Only("T4"))), Times(3, Ask(1, 1000, 1000))),
       5000},
      {"multi-GPU pods need enough GPUs per node",
       {Node(64000, 4, "T4"), Node(64000, 4, "T4")},
       Times(2, Ask(8, 1000, 1000)),
       0},
      // CPU-heavy pods belong on the CPU-rich node, the light ones on the other.
      {"CPU-heavy work goes where the CPU is",
       {Node(40000, 2, "T4"), Node(4000, 2, "A100-80GB")},
       Join(Times(2, Ask(1, 1000, 20000)), Times(2, Ask(1, 1000, 2000))),
       4000},
  };
  for (const Case& c : cases) {
    auto got = FluidPlaceableMilliGpu(c.nodes, c.arrived);
    ASSERT_TRUE(got.ok()) << c.name << ": " << got.status().message();
    EXPECT_NEAR(*got, c.placeable_milli, 1e-6) << c.name;
  }
}

TEST(FillBound, CoarserClassesOnlyLoosenTheBound) {
  // 5 light pods and 395 of 16-40 cores: with one class every pod counts as light.
  Rng rng(7);
  std::vector<Demand> arrived = Times(5, Ask(1, 1000, 4000));
  for (int i = 0; i < 395; ++i)
    arrived.push_back(Ask(1, 1000, 1000 * (16 + static_cast<int64_t>(rng.Uniform(25)))));
  const std::vector<NodeSpec> nodes = {Node(96000, 8, "A100-80GB"), Node(96000, 8, "A100-80GB"),
                                       Node(208000, 4, "T4")};
  const double fine = FluidPlaceableMilliGpu(nodes, arrived, 256).value();
  const double coarse = FluidPlaceableMilliGpu(nodes, arrived, 1).value();
  EXPECT_LT(fine, 20000);  // CPU binds: the bound is not the trivial one
  EXPECT_GT(coarse, fine);
  EXPECT_EQ(coarse, 20000);
}

TEST(FillBound, RefusesBadClassCounts) {
  const std::vector<NodeSpec> nodes = {Node(64000, 4, "T4")};
  const std::vector<Demand> arrived = Times(2, Ask(1, 1000, 1000));
  EXPECT_FALSE(FluidPlaceableMilliGpu(nodes, arrived, 0).ok());
  EXPECT_FALSE(FluidPlaceableMilliGpu(nodes, arrived, 1025).ok());
  EXPECT_FALSE(ComputeFillBound(nodes, {}, 0.0, 42).ok());
}

// Trace-like pods: shares, whole and multi-GPU pods, some pinned, CPU from 1 to 32 cores.
std::vector<Workload> MixedPods(int n, uint64_t seed) {
  Rng rng(seed);
  std::vector<Workload> pods;
  for (int i = 0; i < n; ++i) {
    Workload w;
    w.name = "pod-" + std::to_string(i);
    const double kind = rng.UniformDouble();
    const int64_t cpu = 1000 * (1 + static_cast<int64_t>(rng.Uniform(32)));
    const ModelMask pin = rng.UniformDouble() < 0.3 ? Only("T4") : 0;
    if (kind < 0.1)
      w.demand = Ask(0, 0, cpu);
    else if (kind < 0.5)
      w.demand = Ask(1, 100 * (1 + static_cast<int>(rng.Uniform(9))), cpu, pin);
    else if (kind < 0.9)
      w.demand = Ask(1, 1000, cpu, pin);
    else
      w.demand = Ask(rng.UniformDouble() < 0.5 ? 2 : 4, 1000, cpu);
    pods.push_back(w);
  }
  return pods;
}

std::vector<NodeSpec> MixedNodes() {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 6; ++i) nodes.push_back(Node(96000, 8, "A100-80GB"));
  for (int i = 0; i < 10; ++i) nodes.push_back(Node(104000, 2, "T4"));
  for (int i = 0; i < 4; ++i) nodes.push_back(Node(16000, 2, "P100"));
  return nodes;
}

// The bound is a relaxation: no policy leaves less unallocated GPU than it, on any seed.
TEST(FillBound, NoPolicyBeatsTheBound) {
  const std::vector<NodeSpec> nodes = MixedNodes();
  const std::vector<Workload> pods = MixedPods(300, 11);
  const std::vector<uint64_t> seeds = {42, 43, 44, 45};
  auto bounds = ComputeFillBounds(nodes, pods, 1.3, seeds, 2);
  ASSERT_TRUE(bounds.ok()) << bounds.status().message();
  ASSERT_EQ(bounds->size(), seeds.size());
  auto runs = RunFillMatrix(nodes, pods, {"fgd", "tessera", "bestfit", "random"}, seeds, 1.3, 2);
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  bool some_above_zero = false;
  for (size_t i = 0; i < seeds.size(); ++i) {
    const FillBoundRun& b = (*bounds)[i];
    EXPECT_EQ(b.seed, seeds[i]);
    some_above_zero = some_above_zero || b.unalloc_pct_at_100 > 0;
    for (const FillSummary& s : *runs) {
      EXPECT_LE(b.unalloc_pct_at_100, s.runs[i].unalloc_pct_at_100 + 1e-9)
          << s.policy << " seed " << seeds[i];
      EXPECT_LE(b.unalloc_pct_at_130, s.runs[i].unalloc_pct_at_130 + 1e-9)
          << s.policy << " seed " << seeds[i];
    }
    // The same as one seed alone, whatever the threads.
    auto one = ComputeFillBound(nodes, pods, 1.3, seeds[i]);
    ASSERT_TRUE(one.ok());
    EXPECT_EQ(one->unalloc_pct_at_100, b.unalloc_pct_at_100);
    EXPECT_EQ(one->unalloc_pct_at_130, b.unalloc_pct_at_130);
  }
  EXPECT_TRUE(some_above_zero);  // the pins and the P100s' CPU make the bound bite
}

TEST(FillBound, ReportsCarryTheBound) {
  FillSummary s;
  s.policy = "fgd";
  s.unalloc_at_100 = {.mean = 5};
  const std::vector<FillBoundRun> bounds = {{42, 1.0, 0.5, std::nullopt},
                                            {43, 3.0, 0.5, std::nullopt}};
  const std::string table = FillTable({s}, &bounds);
  EXPECT_NE(table.find("bound            2        2.00 (1.41)        0.50 (0.00)"),
            std::string::npos)
      << table;
  EXPECT_EQ(FillTable({s}).find("bound"), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(FillJson({s}, "n.csv", "p.csv", &bounds));
  EXPECT_DOUBLE_EQ(j["bound"]["unalloc_pct_at_100"].get<double>(), 2.0);
  EXPECT_EQ(j["bound"]["runs"].size(), 2u);
  EXPECT_EQ(j["bound"]["runs"][1]["seed"].get<uint64_t>(), 43u);
  EXPECT_FALSE(nlohmann::json::parse(FillJson({s}, "n.csv", "p.csv")).contains("bound"));
}

TEST(FillBound, SharePackingFloorOfHandSolvedMixes) {
  // Two 470s, a 650 and two 320s need 7/3 GPUs at best ({470, 470}, {650, 320} and a third of
  // {320, 320, 320}) for 2.23 GPUs of shares; with 2 whole GPUs beside them, 0.1033 of 4.3333
  // GPUs stay unused.
  const std::vector<Demand> mixed =
      Join(Join(Times(2, Ask(1, 470, 1000)), {Ask(1, 650, 1000), Ask(2, 1000, 1000)}),
           Times(2, Ask(1, 320, 1000)));
  const std::optional<double> floor = SharePackingFloorPct(mixed);
  ASSERT_TRUE(floor.has_value());
  EXPECT_NEAR(*floor, 100.0 * (7.0 / 3.0 - 2.23) / (7.0 / 3.0 + 2.0), 1e-6);
  // Halves pair up exactly: nothing is lost; a GPU count of shares counts each share.
  EXPECT_NEAR(*SharePackingFloorPct(Times(4, Ask(1, 500, 1000))), 0.0, 1e-9);
  EXPECT_NEAR(*SharePackingFloorPct(std::vector<Demand>{Ask(2, 600, 1000)}), 100.0 * 0.8 / 2.0,
              1e-6);
  // Whole GPUs only: nothing to pack; CPU-only pods only: no figure.
  EXPECT_EQ(SharePackingFloorPct(Times(3, Ask(1, 1000, 1000))), std::optional<double>(0.0));
  EXPECT_FALSE(SharePackingFloorPct(Times(3, Ask(0, 0, 1000))).has_value());
  // More distinct sizes than the LP takes: no figure.
  std::vector<Demand> many;
  for (int m = 100; m < 100 + 10 * static_cast<int>(SharePrices::kMaxSizes + 1); m += 10)
    many.push_back(Ask(1, m, 1000));
  EXPECT_FALSE(SharePackingFloorPct(many).has_value());
  many.pop_back();
  EXPECT_TRUE(SharePackingFloorPct(many).has_value());
}

TEST(FillBound, ReportsCarryTheSharePackingFloor) {
  FillSummary s;
  s.policy = "fgd";
  std::vector<FillBoundRun> bounds = {{42, 1.0, 0.5, 3.0}, {43, 3.0, 0.5, 5.0}};
  EXPECT_NE(FillTable({s}, &bounds).find("share packing floor at 100% (not a bound): 4.00 (1.41)"),
            std::string::npos);
  nlohmann::json j = nlohmann::json::parse(FillJson({s}, "n.csv", "p.csv", &bounds));
  EXPECT_DOUBLE_EQ(j["bound"]["share_packing_pct_at_100_stats"]["mean"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(j["bound"]["runs"][0]["share_packing_pct_at_100"].get<double>(), 3.0);
  // One seed without the figure: no mean, and that run's figure is null.
  bounds[1].share_packing_pct_at_100.reset();
  EXPECT_EQ(FillTable({s}, &bounds).find("share packing"), std::string::npos);
  j = nlohmann::json::parse(FillJson({s}, "n.csv", "p.csv", &bounds));
  EXPECT_TRUE(j["bound"]["share_packing_pct_at_100_stats"].is_null());
  EXPECT_TRUE(j["bound"]["runs"][1]["share_packing_pct_at_100"].is_null());
}

FamilyMixResult FakeMix(const std::string& name, double cand, double ref, double bound) {
  FamilyMixResult r;
  r.name = name;
  FillSummary c, f;
  c.policy = "tessera";
  c.unalloc_at_100 = {.mean = cand};
  c.unalloc_at_130 = {.mean = cand};
  f.policy = "fgd";
  f.unalloc_at_100 = {.mean = ref};
  f.unalloc_at_130 = {.mean = ref};
  FillRun run;
  run.seed = 7;
  run.unalloc_pct_at_100 = cand;
  run.unalloc_pct_at_130 = cand;
  c.runs = {run};
  r.results = {c, f};
  r.bounds = {{42, bound, bound, std::nullopt}};
  return r;
}

TEST(FillBound, FamilySummaryGivesTheShareOfTheGapClosed) {
  const std::vector<FamilyMixResult> results = {
      FakeMix("half", 3.0, 4.0, 2.0),       // closes 50%
      FakeMix("all", 1.0, 2.0, 1.0),        // closes 100%
      FakeMix("at-bound", 1.0, 1.05, 1.0),  // the reference is within 0.1 of the bound: not counted
  };
  const FamilySummary s = SummarizeFamily(results, "tessera", "fgd");
  EXPECT_EQ(s.gap_mixes_at_100, 2);
  EXPECT_NEAR(s.gap_closed_pct_at_100, 75.0, 1e-9);
  EXPECT_EQ(s.gap_mixes_at_130, 2);
  const std::string table = FamilyTable(results, "tessera", "fgd");
  EXPECT_NE(table.find("tessera closes 75.0% of fgd's gap at 100% (2 mixes)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("| bound @100 | bound @end |"), std::string::npos) << table;
  FamilyOptions o;
  o.bound = true;
  const nlohmann::json j = nlohmann::json::parse(FamilyJson(results, o, "tessera", "fgd"));
  EXPECT_NEAR(j["summary"]["gap_closed_pct_at_100"].get<double>(), 75.0, 1e-9);
  EXPECT_DOUBLE_EQ(j["mixes"][0]["bound"]["unalloc_pct_at_100"]["mean"].get<double>(), 2.0);
  // Every policy's runs, seed by seed.
  ASSERT_EQ(j["mixes"][0]["policies"]["tessera"]["runs"].size(), 1u);
  EXPECT_EQ(j["mixes"][0]["policies"]["tessera"]["runs"][0]["seed"].get<uint64_t>(), 7u);
  EXPECT_DOUBLE_EQ(
      j["mixes"][0]["policies"]["tessera"]["runs"][0]["unalloc_pct_at_100"].get<double>(), 3.0);
}

}  // namespace
}  // namespace tessera
