#include "sim/replay.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/random.h"
#include "sim/trace.h"
#include "tests/support/test_paths.h"

namespace tessera {
namespace {

NodeSpec Node(const std::string& name, int gpus, int64_t cpu = 32000, int64_t mem = 131072) {
  NodeSpec n;
  n.name = name;
  n.cpu = MilliCpu(cpu);
  n.memory = MiB(mem);
  n.gpu_count = gpus;
  n.model = gpus > 0 ? *GpuCatalog::Builtin().Find("T4") : kNoGpuModel;
  return n;
}

// A pod asking for `num_gpu` GPUs of `milli` each; deletion -1 = never departs.
Workload Pod(const std::string& name, SimTime creation, SimTime deletion, int num_gpu = 1,
             int milli = 1000, int64_t cpu = 1000) {
  Workload w;
  w.name = name;
  w.demand = Demand{MilliCpu(cpu), MiB(1024), num_gpu, num_gpu > 0 ? milli : 0, 0};
  w.creation = creation;
  w.deletion = deletion;
  return w;
}

ReplayRun MustRun(const std::vector<NodeSpec>& nodes, const std::vector<Workload>& pods,
                  const std::string& policy = "bestfit", uint64_t seed = 42) {
  ReplayOptions o;
  o.policy = policy;
  o.seed = seed;
  o.check_invariants_every = 1;
  auto r = RunReplay(nodes, pods, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : ReplayRun{};
}

SimTime Wait(const ReplayRun& r, const std::vector<Workload>& pods, size_t i) {
  return r.outcomes[i].start - pods[i].creation;
}

// Checks a run's outcomes against the pods without trusting the simulator's ledger: lifetimes
// are kept, no GPU, CPU or memory of any node is over-committed at any time, counts add up,
// and the time-weighted allocation matches the outcomes.
void CheckOutcomes(const std::vector<NodeSpec>& nodes, const std::vector<Workload>& pods,
                   const ReplayRun& r) {
  ASSERT_EQ(r.outcomes.size(), pods.size());
  int64_t placed = 0, impossible = 0, never = 0;
  // Per node: (time, 0 = release / 1 = allocate, pod). Releases at a time come first.
  std::vector<std::vector<std::tuple<SimTime, int, size_t>>> events(nodes.size());
  double integral = 0;
  int64_t capacity = 0;
  for (const NodeSpec& n : nodes) capacity += 1000 * n.gpu_count;
  for (size_t i = 0; i < pods.size(); ++i) {
    const PodOutcome& o = r.outcomes[i];
    const Workload& w = pods[i];
    if (o.fate == PodFate::kImpossible) ++impossible;
    if (o.fate == PodFate::kNeverPlaced) ++never;
    if (o.fate != PodFate::kPlaced) {
      EXPECT_EQ(o.start, -1) << w.name;
      continue;
    }
    ++placed;
    EXPECT_GE(o.start, w.creation) << w.name;
    if (w.deletion == -1) {
      EXPECT_EQ(o.end, -1) << w.name;
    } else {
      EXPECT_EQ(o.end - o.start, w.deletion - w.creation) << w.name;
    }
    EXPECT_EQ(std::popcount(o.placement.gpus), w.demand.num_gpu) << w.name;
    const SimTime end = o.end == -1 ? r.last_event : o.end;
    EXPECT_LE(end, r.last_event) << w.name;
    integral += static_cast<double>(w.demand.TotalMilliGpu()) * static_cast<double>(end - o.start);
    if (o.end == o.start) continue;
    events[o.placement.node].emplace_back(o.start, 1, i);
    if (o.end != -1) events[o.placement.node].emplace_back(o.end, 0, i);
  }
  EXPECT_EQ(placed, r.placed);
  EXPECT_EQ(impossible, r.impossible);
  EXPECT_EQ(impossible + never, r.never_placed);
  EXPECT_EQ(r.placed + r.never_placed, r.pods);
  EXPECT_EQ(r.pods, static_cast<int64_t>(pods.size()));
  for (size_t n = 0; n < nodes.size(); ++n) {
    auto& ev = events[n];
    std::sort(ev.begin(), ev.end());
    int64_t cpu = 0, mem = 0;
    std::vector<int> gpu(kMaxGpusPerNode, 0);
    for (const auto& [t, kind, i] : ev) {
      const Demand& d = pods[i].demand;
      const int sign = kind == 1 ? 1 : -1;
      cpu += sign * d.cpu.v;
      mem += sign * d.memory.v;
      for (int g = 0; g < kMaxGpusPerNode; ++g) {
        if ((r.outcomes[i].placement.gpus >> g) & 1) gpu[g] += sign * d.gpu_milli;
      }
      ASSERT_LE(cpu, nodes[n].cpu.v) << nodes[n].name << " t=" << t;
      ASSERT_LE(mem, nodes[n].memory.v) << nodes[n].name << " t=" << t;
      for (int g = 0; g < kMaxGpusPerNode; ++g) {
        ASSERT_LE(gpu[g], g < nodes[n].gpu_count ? 1000 : 0) << nodes[n].name << " t=" << t;
        ASSERT_GE(gpu[g], 0);
      }
    }
  }
  const double span = static_cast<double>(r.last_event - r.first_arrival);
  const double expect = span > 0 ? integral / (static_cast<double>(capacity) * span) * 100 : 0;
  EXPECT_NEAR(r.gpu_alloc_time_weighted_pct, expect, 1e-9 * std::max(1.0, expect));
}

// A small, contended random scenario: 3 nodes with 2 GPUs and a mix of shapes.
std::pair<std::vector<NodeSpec>, std::vector<Workload>> RandomScenario(uint64_t seed, int pods) {
  std::vector<NodeSpec> nodes = {Node("n0", 2), Node("n1", 2), Node("n2", 2, 16000)};
  std::vector<Workload> out;
  Rng rng(seed);
  for (int i = 0; i < pods; ++i) {
    const SimTime c = static_cast<SimTime>(rng.Uniform(2000));
    const SimTime life = static_cast<SimTime>(rng.Uniform(400));
    const SimTime del = rng.Uniform(50) == 0 ? -1 : c + life;
    const int64_t cpu = 1000 * static_cast<int64_t>(1 + rng.Uniform(8));
    const std::string name = "p" + std::to_string(1000 + i);
    switch (rng.Uniform(5)) {
      case 0:
        out.push_back(Pod(name, c, del, 0, 0, cpu));
        break;
      case 1:
      case 2:
        out.push_back(Pod(name, c, del, 1, static_cast<int>(250 * (1 + rng.Uniform(3))), cpu));
        break;
      case 3:
        out.push_back(Pod(name, c, del, 1, 1000, cpu));
        break;
      default:
        out.push_back(Pod(name, c, del, 2, 1000, cpu));
        break;
    }
  }
  return {nodes, out};
}

TEST(ReplayTest, PodWaitsForDeparture) {
  const std::vector<NodeSpec> nodes = {Node("n0", 1)};
  const std::vector<Workload> pods = {Pod("a", 0, 100), Pod("b", 10, 60)};
  const ReplayRun r = MustRun(nodes, pods);
  EXPECT_EQ(r.outcomes[0].start, 0);
  EXPECT_EQ(r.outcomes[0].end, 100);
  EXPECT_EQ(r.outcomes[1].start, 100);
  EXPECT_EQ(r.outcomes[1].end, 150);  // its 50 s lifetime counts from its start
  EXPECT_EQ(Wait(r, pods, 1), 90);
  EXPECT_EQ(r.placed, 2);
  EXPECT_EQ(r.never_placed, 0);
  EXPECT_EQ(r.delayed, 1);
  EXPECT_EQ(r.peak_pending, 1);
  EXPECT_DOUBLE_EQ(r.wait_p50_s, 45);
  EXPECT_DOUBLE_EQ(r.mean_wait_s, 45);
  EXPECT_DOUBLE_EQ(r.max_wait_s, 90);
  EXPECT_DOUBLE_EQ(r.wait_p99_s, 89.1);
  EXPECT_EQ(r.first_arrival, 0);
  EXPECT_EQ(r.last_event, 150);
  EXPECT_DOUBLE_EQ(r.gpu_alloc_time_weighted_pct, 100.0);
  CheckOutcomes(nodes, pods, r);
}

// A long-running pod after the last arrival dilutes the time-weighted figure but not the
// arrival-window one: 2000 milli over 0..10, then 1000 milli over 10..1010.
TEST(ReplayTest, ArrivalWindowAllocationIgnoresTheTailAfterTheLastArrival) {
  const std::vector<NodeSpec> nodes = {Node("n0", 2)};
  const std::vector<Workload> pods = {Pod("a", 0, 10, 2), Pod("b", 10, 1010, 1)};
  const ReplayRun r = MustRun(nodes, pods);
  EXPECT_EQ(r.last_arrival, 10);
  EXPECT_DOUBLE_EQ(r.gpu_alloc_arrival_window_pct, 100.0);
  EXPECT_DOUBLE_EQ(r.gpu_alloc_time_weighted_pct,
                   (2000.0 * 10 + 1000.0 * 1000) / (2000.0 * 1010) * 100);
}

TEST(ReplayTest, TimeWeightedAllocation) {
  const std::vector<NodeSpec> nodes = {Node("n0", 2)};
  // 1000 milli for 0..100 and 500 milli for 50..150 over 2000 x 150: 150000 / 300000.
  const std::vector<Workload> pods = {Pod("a", 0, 100), Pod("b", 50, 150, 1, 500)};
  const ReplayRun r = MustRun(nodes, pods);
  EXPECT_DOUBLE_EQ(r.gpu_alloc_time_weighted_pct, 50.0);
  // Arrival window 0..50: 1000 milli over 2000 x 50.
  EXPECT_EQ(r.last_arrival, 50);
  EXPECT_DOUBLE_EQ(r.gpu_alloc_arrival_window_pct, 50.0);
  EXPECT_EQ(r.delayed, 0);
  EXPECT_DOUBLE_EQ(r.wait_p99_s, 0);
}

TEST(ReplayTest, WaitingPodsStartInArrivalOrder) {
  const std::vector<NodeSpec> nodes = {Node("n0", 1)};
  // "y" and "x" arrive together: name order puts x first. "c" arrives later than both.
  const std::vector<Workload> pods = {Pod("a", 0, 100), Pod("c", 30, 40), Pod("y", 20, 25),
                                      Pod("x", 20, 30)};
  const ReplayRun r = MustRun(nodes, pods);
  EXPECT_EQ(r.outcomes[3].start, 100);  // x: lifetime 10
  EXPECT_EQ(r.outcomes[2].start, 110);  // y: lifetime 5
  EXPECT_EQ(r.outcomes[1].start, 115);  // c: lifetime 10
  EXPECT_EQ(r.outcomes[1].end, 125);
  EXPECT_EQ(r.peak_pending, 3);
  EXPECT_EQ(Wait(r, pods, 1), 85);
  CheckOutcomes(nodes, pods, r);
}

TEST(ReplayTest, WaitingPodsGoBeforeArrivalsAtTheSameTime) {
  const std::vector<NodeSpec> nodes = {Node("n0", 1)};
  // b waits from 50; at 100 a departs, b is retried before the arrival of c at 100.
  const std::vector<Workload> pods = {Pod("c", 100, 110), Pod("a", 0, 100), Pod("b", 50, 70)};
  const ReplayRun r = MustRun(nodes, pods);
  EXPECT_EQ(r.outcomes[2].start, 100);
  EXPECT_EQ(r.outcomes[0].start, 120);
  EXPECT_EQ(Wait(r, pods, 0), 20);
  EXPECT_EQ(Wait(r, pods, 2), 50);
  CheckOutcomes(nodes, pods, r);
}

TEST(ReplayTest, SmallerArrivalIsNotBlockedByAWaitingPod) {
  const std::vector<NodeSpec> nodes = {Node("n0", 2)};
  // b needs both GPUs and waits; c fits on the second GPU at once and holds it to 220.
  const std::vector<Workload> pods = {Pod("a", 0, 100), Pod("b", 10, 20, 2), Pod("c", 20, 220)};
  const ReplayRun r = MustRun(nodes, pods);
  EXPECT_EQ(r.outcomes[2].start, 20);
  EXPECT_EQ(r.outcomes[1].start, 220);
  EXPECT_EQ(r.outcomes[1].end, 230);
  EXPECT_EQ(Wait(r, pods, 1), 210);
  CheckOutcomes(nodes, pods, r);
}

TEST(ReplayTest, DeparturesFreeCapacityForSeveralWaiters) {
  const std::vector<NodeSpec> nodes = {Node("n0", 2), Node("n1", 2)};
  // A hog holds both GPUs of each node; eight half-GPU pods wait, then all start at 100.
  std::vector<Workload> pods = {Pod("hog0", 0, 100, 2), Pod("hog1", 0, 100, 2)};
  for (int i = 0; i < 8; ++i) pods.push_back(Pod("s" + std::to_string(i), 10 + i, 60 + i, 1, 500));
  const ReplayRun r = MustRun(nodes, pods);
  for (size_t i = 2; i < pods.size(); ++i) EXPECT_EQ(r.outcomes[i].start, 100) << pods[i].name;
  EXPECT_EQ(r.peak_pending, 8);
  EXPECT_EQ(r.delayed, 8);
  CheckOutcomes(nodes, pods, r);
}

TEST(ReplayTest, ImpossiblePodsAreReportedSeparately) {
  const std::vector<NodeSpec> nodes = {Node("n0", 2), Node("n1", 2)};
  std::vector<Workload> pods = {Pod("eight", 0, 10, 8), Pod("cpu", 0, 10, 1, 1000, 64000),
                                Pod("ok", 5, 15)};
  Workload wrong_model = Pod("v100", 1, 10);
  wrong_model.demand.models = *ParseModelList("V100M32");
  pods.push_back(wrong_model);
  const ReplayRun r = MustRun(nodes, pods);
  EXPECT_EQ(r.impossible, 3);
  EXPECT_EQ(r.never_placed, 3);
  EXPECT_EQ(r.placed, 1);
  EXPECT_EQ(r.peak_pending, 0);
  EXPECT_EQ(r.outcomes[0].fate, PodFate::kImpossible);
  EXPECT_EQ(r.outcomes[1].fate, PodFate::kImpossible);
  EXPECT_EQ(r.outcomes[3].fate, PodFate::kImpossible);
  EXPECT_EQ(r.outcomes[2].fate, PodFate::kPlaced);
  EXPECT_EQ(r.first_arrival, 0);
  EXPECT_EQ(r.last_event, 15);
  CheckOutcomes(nodes, pods, r);
}

TEST(ReplayTest, PodsWaitingAtTheEndAreNeverPlaced) {
  const std::vector<NodeSpec> nodes = {Node("n0", 1)};
  const std::vector<Workload> pods = {Pod("forever", 0, -1), Pod("b", 10, 20), Pod("c", 30, 40)};
  const ReplayRun r = MustRun(nodes, pods);
  EXPECT_EQ(r.outcomes[0].fate, PodFate::kPlaced);
  EXPECT_EQ(r.outcomes[0].end, -1);
  EXPECT_EQ(r.outcomes[1].fate, PodFate::kNeverPlaced);
  EXPECT_EQ(r.outcomes[2].fate, PodFate::kNeverPlaced);
  EXPECT_EQ(r.never_placed, 2);
  EXPECT_EQ(r.impossible, 0);
  EXPECT_EQ(r.placed, 1);
  EXPECT_EQ(r.peak_pending, 2);
  EXPECT_EQ(r.last_event, 30);
  EXPECT_DOUBLE_EQ(r.gpu_alloc_time_weighted_pct, 100.0);
  CheckOutcomes(nodes, pods, r);
}

TEST(ReplayTest, ZeroLifetimePodsFreeCapacityAtTheSameTime) {
  const std::vector<NodeSpec> nodes = {Node("n0", 1)};
  const std::vector<Workload> pods = {Pod("a", 0, 0), Pod("b", 0, 50)};
  const ReplayRun r = MustRun(nodes, pods);
  EXPECT_EQ(r.outcomes[0].start, 0);
  EXPECT_EQ(r.outcomes[0].end, 0);
  EXPECT_EQ(r.outcomes[1].start, 0);
  EXPECT_EQ(r.delayed, 0);
  EXPECT_EQ(r.peak_pending, 1);
  CheckOutcomes(nodes, pods, r);
}

TEST(ReplayTest, CpuOnlyDepartureAlsoFreesCapacity) {
  const std::vector<NodeSpec> nodes = {Node("n0", 2, 4000)};
  const std::vector<Workload> pods = {Pod("cpuhog", 0, 100, 0, 0, 4000), Pod("g", 10, 20)};
  const ReplayRun r = MustRun(nodes, pods);
  EXPECT_EQ(r.outcomes[1].start, 100);
  CheckOutcomes(nodes, pods, r);
}

TEST(ReplayTest, RandomScenariosKeepInvariantsForEveryPolicy) {
  for (const char* policy :
       {"random", "dotprod", "clustering", "packing", "bestfit", "fgd", "tessera"}) {
    auto [nodes, pods] = RandomScenario(7, 400);
    const ReplayRun r = MustRun(nodes, pods, policy, 3);
    EXPECT_GT(r.delayed, 0) << policy;
    EXPECT_GT(r.peak_pending, 0) << policy;
    CheckOutcomes(nodes, pods, r);
  }
}

TEST(ReplayTest, PruningDoesNotChangeResults) {
  for (const char* policy : {"random", "fgd", "tessera", "packing"}) {
    for (uint64_t seed : {1, 2}) {
      auto [nodes, pods] = RandomScenario(seed + 10, 500);
      ReplayOptions o;
      o.policy = policy;
      o.seed = seed;
      auto pruned = RunReplay(nodes, pods, o);
      o.prune_retries = false;
      auto full = RunReplay(nodes, pods, o);
      ASSERT_TRUE(pruned.ok() && full.ok());
      EXPECT_LT(pruned->decisions, full->decisions) << policy;
      for (size_t i = 0; i < pods.size(); ++i) {
        EXPECT_EQ(pruned->outcomes[i].fate, full->outcomes[i].fate) << policy << " " << i;
        EXPECT_EQ(pruned->outcomes[i].start, full->outcomes[i].start) << policy << " " << i;
        EXPECT_EQ(pruned->outcomes[i].placement, full->outcomes[i].placement) << policy << " " << i;
      }
    }
  }
}

TEST(ReplayTest, DeterministicForASeed) {
  auto [nodes, pods] = RandomScenario(99, 400);
  for (const char* policy : {"random", "tessera"}) {
    const ReplayRun a = MustRun(nodes, pods, policy, 5);
    const ReplayRun b = MustRun(nodes, pods, policy, 5);
    ASSERT_EQ(a.outcomes.size(), b.outcomes.size());
    for (size_t i = 0; i < a.outcomes.size(); ++i) {
      EXPECT_EQ(a.outcomes[i].start, b.outcomes[i].start);
      EXPECT_EQ(a.outcomes[i].placement, b.outcomes[i].placement);
    }
    EXPECT_EQ(a.decisions, b.decisions);
    EXPECT_DOUBLE_EQ(a.gpu_alloc_time_weighted_pct, b.gpu_alloc_time_weighted_pct);
  }
  // The random policy's choices follow the seed.
  const ReplayRun s1 = MustRun(nodes, pods, "random", 1);
  const ReplayRun s2 = MustRun(nodes, pods, "random", 2);
  bool differ = false;
  for (size_t i = 0; i < pods.size(); ++i)
    differ |= !(s1.outcomes[i].placement == s2.outcomes[i].placement);
  EXPECT_TRUE(differ);
}

TEST(ReplayTest, ArrivalOrderDoesNotDependOnInputOrder) {
  auto [nodes, pods] = RandomScenario(5, 300);
  const ReplayRun a = MustRun(nodes, pods, "tessera");
  std::vector<Workload> reversed(pods.rbegin(), pods.rend());
  const ReplayRun b = MustRun(nodes, reversed, "tessera");
  for (size_t i = 0; i < pods.size(); ++i) {
    EXPECT_EQ(a.outcomes[i].start, b.outcomes[pods.size() - 1 - i].start);
    EXPECT_EQ(a.outcomes[i].placement, b.outcomes[pods.size() - 1 - i].placement);
  }
}

TEST(ReplayTest, RejectsBadInput) {
  const std::vector<NodeSpec> nodes = {Node("n0", 1)};
  ReplayOptions o;
  o.policy = "bestfit";
  EXPECT_EQ(RunReplay(nodes, {}, o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RunReplay({Node("cpu", 0)}, {Pod("a", 0, 1)}, o).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RunReplay(nodes, {Pod("a", 10, 5)}, o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RunReplay(nodes, {Pod("a", 0, 5, 2, 500)}, o).status().code(),
            StatusCode::kInvalidArgument);
  o.policy = "no-such-policy";
  EXPECT_FALSE(RunReplay(nodes, {Pod("a", 0, 5)}, o).ok());
}

TEST(ReplayTest, MatrixSummarisesEverySeedAndPolicy) {
  auto [nodes, pods] = RandomScenario(3, 300);
  auto m = RunReplayMatrix(nodes, pods, {"bestfit", "random"}, {1, 2, 3}, 2, true);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 2u);
  for (const ReplaySummary& s : *m) {
    ASSERT_EQ(s.runs.size(), 3u);
    double sum = 0;
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(s.runs[k].seed, k + 1);
      EXPECT_EQ(s.runs[k].policy, s.policy);
      sum += s.runs[k].wait_p95_s;
      CheckOutcomes(nodes, pods, s.runs[k]);
    }
    EXPECT_NEAR(s.wait_p95_s.mean, sum / 3, 1e-9);
  }
  // Results do not depend on the thread count.
  auto one = RunReplayMatrix(nodes, pods, {"bestfit", "random"}, {1, 2, 3}, 1);
  ASSERT_TRUE(one.ok());
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_TRUE(one->at(p).runs[0].outcomes.empty());
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(one->at(p).runs[k].decisions, m->at(p).runs[k].decisions);
      EXPECT_EQ(one->at(p).runs[k].mean_wait_s, m->at(p).runs[k].mean_wait_s);
    }
  }
  EXPECT_FALSE(RunReplayMatrix(nodes, pods, {"bestfit", "bestfit"}, {1}).ok());
  EXPECT_FALSE(RunReplayMatrix(nodes, pods, {}, {1}).ok());
  EXPECT_FALSE(RunReplayMatrix(nodes, pods, {"bestfit"}, {}).ok());
  EXPECT_FALSE(RunReplayMatrix(nodes, pods, {"nope"}, {1}).ok());
}

TEST(ReplayTest, JsonHasTheDocumentedFields) {
  auto [nodes, pods] = RandomScenario(4, 200);
  auto m = RunReplayMatrix(nodes, pods, {"packing", "tessera"}, {7, 8});
  ASSERT_TRUE(m.ok());
  const auto j = nlohmann::json::parse(ReplayJson(*m, "n.csv", "p.csv"));
  EXPECT_EQ(j["nodes"], "n.csv");
  for (const char* policy : {"packing", "tessera"}) {
    const auto& p = j["policies"][policy];
    for (const char* key :
         {"pods", "placed", "never_placed", "impossible", "wait_p50_s", "wait_p95_s", "wait_p99_s",
          "mean_wait_s", "gpu_alloc_time_weighted_pct", "peak_pending", "seeds", "wall_seconds",
          "runs"}) {
      EXPECT_TRUE(p.contains(key)) << policy << " " << key;
    }
    EXPECT_EQ(p["seeds"], nlohmann::json::array({7, 8}));
    EXPECT_EQ(p["runs"].size(), 2u);
    EXPECT_DOUBLE_EQ(p["pods"].get<double>(), 200.0);
  }
  const std::string table = ReplayTable(*m);
  EXPECT_NE(table.find("packing"), std::string::npos);
  EXPECT_NE(table.find("tessera"), std::string::npos);
}

const std::string kTraceDir = test::SharedDir() + "/traces/alibaba-gpu-2023";

bool HaveTrace() {
  return std::filesystem::exists(kTraceDir + "/openb_pod_list_default.csv");
}

TEST(ReplayTest, DefaultTraceKeepsInvariants) {
  if (!HaveTrace()) GTEST_SKIP() << "trace not found under " << kTraceDir;
  auto nodes = ReadNodesCsv(kTraceDir + "/openb_node_list_gpu_node.csv");
  auto pods = ReadPodsCsv(kTraceDir + "/openb_pod_list_default.csv");
  ASSERT_TRUE(nodes.ok() && pods.ok());
  for (const char* policy : {"fgd", "tessera"}) {
    ReplayOptions o;
    o.policy = policy;
    o.check_invariants_every = 50;
    auto r = RunReplay(*nodes, *pods, o);
    ASSERT_TRUE(r.ok()) << policy << ": " << r.status().ToString();
    EXPECT_EQ(r->pods, 8152);
    EXPECT_GT(r->placed, 8000) << policy;
    EXPECT_GE(r->wait_p99_s, r->wait_p95_s);
    EXPECT_GE(r->wait_p95_s, r->wait_p50_s);
    EXPECT_GT(r->gpu_alloc_time_weighted_pct, 0);
    EXPECT_LE(r->gpu_alloc_time_weighted_pct, 100);
    CheckOutcomes(*nodes, *pods, *r);
  }
}

// The trace's own cluster never runs out of GPUs at trace times; ten 2-GPU nodes do, so this
// exercises long queues with real shapes and lifetimes.
TEST(ReplayTest, DefaultTraceOnTenNodesQueuesAndPrunesExactly) {
  if (!HaveTrace()) GTEST_SKIP() << "trace not found under " << kTraceDir;
  auto nodes = ReadNodesCsv(kTraceDir + "/openb_node_list_gpu_node.csv");
  auto pods = ReadPodsCsv(kTraceDir + "/openb_pod_list_default.csv");
  ASSERT_TRUE(nodes.ok() && pods.ok());
  nodes->resize(10);
  ReplayOptions o;
  o.policy = "fgd";
  o.check_invariants_every = 10;
  auto r = RunReplay(*nodes, *pods, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->delayed, 1000);
  EXPECT_GT(r->peak_pending, 100);
  EXPECT_GT(r->impossible, 0);
  CheckOutcomes(*nodes, *pods, *r);

  pods->resize(1500);
  o.policy = "tessera";
  o.check_invariants_every = 0;
  auto pruned = RunReplay(*nodes, *pods, o);
  o.prune_retries = false;
  auto full = RunReplay(*nodes, *pods, o);
  ASSERT_TRUE(pruned.ok() && full.ok());
  EXPECT_GT(pruned->delayed, 0);
  EXPECT_LT(pruned->decisions, full->decisions);
  for (size_t i = 0; i < pods->size(); ++i) {
    ASSERT_EQ(pruned->outcomes[i].start, full->outcomes[i].start) << i;
    ASSERT_EQ(pruned->outcomes[i].placement, full->outcomes[i].placement) << i;
  }
}

}  // namespace
}  // namespace tessera
