#include "sim/fill.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "core/random.h"
#include "sim/trace.h"
#include "tests/support/test_paths.h"

namespace tessera {
namespace {

GpuModelId Model(const char* name) {
  return GpuCatalog::Builtin().Find(name).value();
}

Workload Pod(std::string name, int64_t cpu, int num_gpu, int milli, ModelMask models = 0) {
  Workload w;
  w.name = std::move(name);
  w.demand = Demand{MilliCpu(cpu), MiB(1024), num_gpu, milli, models};
  return w;
}

NodeSpec Node(std::string name, int64_t cpu, int gpus, const char* model) {
  NodeSpec s;
  s.name = std::move(name);
  s.cpu = MilliCpu(cpu);
  s.memory = MiB(1 << 20);
  s.gpu_count = gpus;
  s.model = gpus > 0 ? Model(model) : kNoGpuModel;
  return s;
}

int64_t TotalMilli(const std::vector<Workload>& seq) {
  int64_t t = 0;
  for (const Workload& w : seq) t += w.demand.TotalMilliGpu();
  return t;
}

std::vector<std::string> Names(const std::vector<Workload>& seq) {
  std::vector<std::string> out;
  for (const Workload& w : seq) out.push_back(w.name);
  return out;
}

// Pods of mixed shapes whose GPU requests sum to exactly `total_milli` (a multiple of 100).
std::vector<Workload> MixedPods(int64_t total_milli, uint64_t seed) {
  Rng rng(seed);
  std::vector<Workload> pods;
  int64_t left = total_milli;
  int i = 0;
  while (left > 0) {
    const int share = static_cast<int>(std::min<int64_t>(left, 100 * (1 + rng.Uniform(10))));
    pods.push_back(Pod("pod-" + std::to_string(1000 + i++), 1000, 1, share));
    left -= share;
    if (rng.Uniform(4) == 0) pods.push_back(Pod("pod-" + std::to_string(1000 + i++), 500, 0, 0));
  }
  return pods;
}

bool IsSubsequence(const std::vector<std::string>& sub, const std::vector<std::string>& seq) {
  size_t j = 0;
  for (const std::string& s : seq) {
    if (j < sub.size() && sub[j] == s) ++j;
  }
  return j == sub.size();
}

// ---------------------------------------------------------------------------------------
// PrepareFillSequence.

TEST(PrepareFillSequenceTest, DeterministicPerSeed) {
  const auto pods = MixedPods(20000, 1);
  const auto a = PrepareFillSequence(pods, 24000, 1.3, 42);
  const auto b = PrepareFillSequence(pods, 24000, 1.3, 42);
  EXPECT_EQ(Names(a), Names(b));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].demand, b[i].demand);
  std::set<std::vector<std::string>> distinct;
  for (uint64_t seed = 42; seed < 47; ++seed)
    distinct.insert(Names(PrepareFillSequence(pods, 24000, 1.3, seed)));
  EXPECT_EQ(distinct.size(), 5u);
}

TEST(PrepareFillSequenceTest, NoTuningWhenDemandEqualsTarget) {
  const auto pods = MixedPods(10000, 2);
  const auto seq = PrepareFillSequence(pods, 10000, 1.0, 7);
  ASSERT_EQ(seq.size(), pods.size());
  auto got = Names(seq);
  auto want = Names(pods);
  EXPECT_NE(got, want);  // shuffled
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
}

TEST(PrepareFillSequenceTest, InflatesUniformPodsToExactlyTheTarget) {
  // 5 one-GPU pods on a 10-GPU cluster, target 1.3 * 10000 = 13000: copies are added while
  // total + 1000 <= 13000, so the sequence ends at exactly 13 pods.
  std::vector<Workload> pods;
  for (int i = 0; i < 5; ++i) pods.push_back(Pod("p" + std::to_string(i), 1000, 1, 1000));
  const auto seq = PrepareFillSequence(pods, 10000, 1.3, 3);
  ASSERT_EQ(seq.size(), 13u);
  EXPECT_EQ(TotalMilli(seq), 13000);
  const auto all = Names(seq);
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), 13u);  // copies are renamed
  std::vector<std::string> head(all.begin(), all.begin() + 5);
  std::sort(head.begin(), head.end());
  EXPECT_EQ(head, (std::vector<std::string>{"p0", "p1", "p2", "p3", "p4"}));
}

TEST(PrepareFillSequenceTest, InflationStopsAtTheFirstOvershoot) {
  // Shares 100 and 1000 only: the run ends within one largest pod of the target, and some
  // seeds stop on a 1000 draw while a 100 would still have fitted (no skipping ahead).
  std::vector<Workload> pods;
  for (int i = 0; i < 10; ++i) {
    pods.push_back(Pod("small-" + std::to_string(i), 100, 1, 100));
    pods.push_back(Pod("big-" + std::to_string(i), 100, 1, 1000));
  }
  const int64_t capacity = 20000;
  const double target = 1.3 * capacity;
  int stopped_with_room = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    const auto seq = PrepareFillSequence(pods, capacity, 1.3, seed);
    const int64_t total = TotalMilli(seq);
    EXPECT_LE(static_cast<double>(total), target) << seed;
    EXPECT_GT(static_cast<double>(total + 1000), target) << seed;
    stopped_with_room += static_cast<double>(total + 100) <= target;
    for (size_t i = pods.size(); i < seq.size(); ++i) {
      const std::string base = seq[i].name.substr(0, seq[i].name.find("-tuned-"));
      auto it =
          std::find_if(pods.begin(), pods.end(), [&](const Workload& w) { return w.name == base; });
      ASSERT_NE(it, pods.end()) << seq[i].name;
      EXPECT_EQ(it->demand, seq[i].demand);
    }
  }
  EXPECT_GT(stopped_with_room, 0);
}

TEST(PrepareFillSequenceTest, OvershootTestUsesPerGpuShare) {
  // One 4-GPU pod, 10 GPUs, target 13000. The overshoot test compares total + 1000 (the
  // per-GPU share) with the target: 4000 -> 8000 -> 12000 (12000 + 1000 is not above) ->
  // 16000, then 16000 + 1000 > 13000 stops. Four pods, 16000 milli-GPU.
  const std::vector<Workload> pods = {Pod("quad", 8000, 4, 1000)};
  const auto seq = PrepareFillSequence(pods, 10000, 1.3, 42);
  EXPECT_EQ(seq.size(), 4u);
  EXPECT_EQ(TotalMilli(seq), 16000);
}

TEST(PrepareFillSequenceTest, DeflatesWhenAboveTarget) {
  const auto pods = MixedPods(30000, 3);
  const int64_t capacity = 10000;
  const double target = 1.3 * capacity;
  int64_t largest = 0;
  for (const Workload& w : pods) largest = std::max(largest, w.demand.TotalMilliGpu());
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const auto seq = PrepareFillSequence(pods, capacity, 1.3, seed);
    const int64_t total = TotalMilli(seq);
    EXPECT_LE(static_cast<double>(total), target) << seed;
    EXPECT_GT(static_cast<double>(total + largest), target) << seed;
    // Removal keeps the shuffled order of the rest (the shuffle with target == total).
    const auto shuffled = PrepareFillSequence(pods, TotalMilli(pods), 1.0, seed);
    ASSERT_EQ(shuffled.size(), pods.size());
    EXPECT_TRUE(IsSubsequence(Names(seq), Names(shuffled))) << seed;
    for (const Workload& w : seq) EXPECT_EQ(w.name.find("-tuned-"), std::string::npos);
  }
}

std::vector<Workload> Reversed(std::vector<Workload> v) {
  std::reverse(v.begin(), v.end());
  return v;
}

std::vector<Workload> Shuffled(std::vector<Workload> v, uint64_t seed) {
  Rng rng(seed);
  rng.Shuffle(v);
  return v;
}

TEST(PrepareFillSequenceTest, InputOrderDoesNotMatterWithoutInflation) {
  const auto pods = MixedPods(30000, 4);
  for (int64_t capacity : {TotalMilli(pods), int64_t{10000}}) {  // exact, deflation
    SCOPED_TRACE(capacity);
    const double ratio = capacity == TotalMilli(pods) ? 1.0 : 1.3;
    const auto base = Names(PrepareFillSequence(pods, capacity, ratio, 42));
    EXPECT_EQ(Names(PrepareFillSequence(Reversed(pods), capacity, ratio, 42)), base);
    EXPECT_EQ(Names(PrepareFillSequence(Shuffled(pods, 9), capacity, ratio, 42)), base);
  }
}

// Inflation draws its copies from the name-sorted order, so the same pods in another order give
// the same sequence, tail included.
TEST(PrepareFillSequenceTest, InputOrderDoesNotMatterWithInflation) {
  const auto pods = MixedPods(10000, 5);
  const auto base = PrepareFillSequence(pods, 20000, 1.3, 42);
  ASSERT_GT(base.size(), pods.size());
  for (const auto& other : {Reversed(pods), Shuffled(pods, 9)}) {
    const auto seq = PrepareFillSequence(other, 20000, 1.3, 42);
    EXPECT_EQ(Names(seq), Names(base));
  }
}

TEST(PrepareFillSequenceTest, EmptyInput) {
  EXPECT_TRUE(PrepareFillSequence({}, 10000, 1.3, 1).empty());
}

// ---------------------------------------------------------------------------------------
// RunFill.

std::vector<NodeSpec> SmallCluster() {
  return {Node("g2-a", 96000, 8, "G2"), Node("g2-b", 96000, 8, "G2"), Node("t4-a", 32000, 2, "T4"),
          Node("t4-b", 32000, 2, "T4"), Node("v100", 64000, 4, "V100M32")};  // 24 GPUs
}

std::vector<Workload> SmallTrace() {
  std::vector<Workload> pods;
  for (int i = 0; i < 12; ++i) {
    const std::string s = std::to_string(100 + i);
    pods.push_back(Pod("cpu-" + s, 4000, 0, 0));
    pods.push_back(Pod("share-" + s, 4000, 1, 300 + 50 * i));
    pods.push_back(Pod("one-" + s, 8000, 1, 1000));
    if (i % 3 == 0) pods.push_back(Pod("two-" + s, 8000, 2, 1000));
    if (i % 4 == 0) pods.push_back(Pod("t4-" + s, 2000, 1, 250, ModelMask{1} << Model("T4")));
  }
  return pods;
}

const char* const kPolicies[] = {"random",  "dotprod", "clustering", "packing",
                                 "bestfit", "fgd",     "tessera"};

TEST(RunFillTest, InvariantsOnSmallCluster) {
  const auto nodes = SmallCluster();
  const auto pods = SmallTrace();
  const int64_t cap = 24000;
  for (const char* policy : kPolicies) {
    SCOPED_TRACE(policy);
    FillOptions opt;
    opt.policy = policy;
    opt.seed = 42;
    auto r = RunFill(nodes, pods, opt);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const FillRun& run = *r;
    const auto seq = PrepareFillSequence(pods, cap, 1.3, 42);
    EXPECT_EQ(run.policy, policy);
    EXPECT_EQ(run.pods, static_cast<int64_t>(seq.size()));
    EXPECT_EQ(run.decisions, run.pods);
    EXPECT_GT(run.placed, 0);
    EXPECT_LE(run.placed, run.pods);
    EXPECT_NEAR(run.final_arrival_pct, 100.0 * TotalMilli(seq) / cap, 1e-9);
    EXPECT_GT(run.final_arrival_pct, 125.0);
    EXPECT_DOUBLE_EQ(run.unalloc_pct[0], 100.0);
    for (int b = 0; b < kArrivalBuckets; ++b) {
      SCOPED_TRACE(b);
      if (b > 0) {
        EXPECT_LE(run.unalloc_pct[b], run.unalloc_pct[b - 1]);  // no departures
      }
      EXPECT_GE(run.unalloc_pct[b], 0.0);
      // Fragmented GPU is part of the idle GPU.
      EXPECT_GE(run.frag_pct[b], 0.0);
      EXPECT_LE(run.frag_pct[b], run.unalloc_pct[b] + 1e-9);
      EXPECT_GE(run.frag_ratio_pct[b], 0.0);
      EXPECT_LE(run.frag_ratio_pct[b], 100.0 + 1e-9);
      // Allocation never runs ahead of arrival: at bucket b at most (b + one pod)% arrived
      // until the final arrival (the largest pod asks for 2000).
      if (b <= static_cast<int>(run.final_arrival_pct)) {
        EXPECT_LE(100.0 - run.unalloc_pct[b], b + 2000.0 / cap * 100.0 + 1e-9);
      }
    }
    EXPECT_DOUBLE_EQ(run.unalloc_pct_at_100, run.unalloc_pct[100]);
    EXPECT_DOUBLE_EQ(run.unalloc_pct_at_130, run.unalloc_pct[130]);
    EXPECT_DOUBLE_EQ(run.frag_ratio_at_90, run.frag_ratio_pct[90]);
    EXPECT_LE(100.0 - run.unalloc_pct_at_130, run.final_arrival_pct + 1e-9);

    auto again = RunFill(nodes, pods, opt);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->placed, run.placed);
    EXPECT_EQ(again->unalloc_pct, run.unalloc_pct);
    EXPECT_EQ(again->frag_pct, run.frag_pct);
  }
}

TEST(RunFillTest, DetailAddsUpAndChangesNothing) {
  const auto nodes = SmallCluster();
  const auto pods = SmallTrace();
  for (const char* policy : kPolicies) {
    SCOPED_TRACE(policy);
    FillOptions opt;
    opt.policy = policy;
    auto plain = RunFill(nodes, pods, opt);
    opt.detail = true;
    auto r = RunFill(nodes, pods, opt);
    ASSERT_TRUE(plain.ok() && r.ok());
    EXPECT_FALSE(plain->detail.has_value());
    ASSERT_TRUE(r->detail.has_value());
    EXPECT_EQ(r->placed, plain->placed);
    EXPECT_EQ(r->unalloc_pct, plain->unalloc_pct);
    EXPECT_EQ(r->frag_pct, plain->frag_pct);
    const FillDetail& d = *r->detail;
    int64_t not_placed = 0;
    for (const auto& [reason, n] : d.not_placed) {
      EXPECT_TRUE(reason == "gpu" || reason == "gpu_model" || reason == "cpu" || reason == "memory")
          << reason;
      not_placed += n;
    }
    EXPECT_EQ(not_placed, r->pods - r->placed);
    EXPECT_EQ(std::accumulate(d.latency_count.begin(), d.latency_count.end(), int64_t{0}),
              r->decisions);
    EXPECT_GE(d.latency_sum_seconds, 0.0);
    ASSERT_EQ(d.node_held_milli.size(), nodes.size());
    int64_t held = 0;
    for (size_t n = 0; n < nodes.size(); ++n)
      for (const auto& [kind, milli] : d.node_held_milli[n]) {
        EXPECT_TRUE(kind == "exclusive" || kind == "share") << kind;
        EXPECT_GT(milli, 0);
        EXPECT_LE(milli, nodes[n].gpu_count * 1000);
        held += milli;
      }
    EXPECT_NEAR(100.0 - 100.0 * static_cast<double>(held) / 24000, r->unalloc_pct_at_130, 1e-9);
  }
}

TEST(RunFillTest, MatrixHooksSeeEveryRun) {
  std::mutex mu;
  std::multiset<std::pair<std::string, uint64_t>> seen;
  FillHooks hooks;
  hooks.detail = true;
  hooks.on_run = [&](const FillRun& run) {
    EXPECT_TRUE(run.detail.has_value());
    std::lock_guard<std::mutex> l(mu);
    seen.insert({run.policy, run.seed});
  };
  auto r =
      RunFillMatrix(SmallCluster(), SmallTrace(), {"bestfit", "tessera"}, {1, 2, 3}, 1.3, 2, hooks);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(seen.size(), 6u);
  for (const auto& s : *r)
    for (const auto& run : s.runs) EXPECT_EQ(seen.count({s.policy, run.seed}), 1u);
}

// Past pods are observed before the first arrival and never placed: policies that do not learn
// online (fgd's target is the trace's) run exactly as without them, an empty past changes
// nothing, and tessera, which learns the mix from what it has seen, places differently after a
// past of T4-pinned shares, CPU-heavy whole GPUs and V100-pinned GPU pairs.
TEST(RunFillTest, PastPodsAreObservedNotPlaced) {
  const auto nodes = SmallCluster();
  const auto pods = SmallTrace();
  std::vector<Workload> past;
  for (int i = 0; i < 40; ++i) {
    past.push_back(Pod("past-t4-" + std::to_string(i), 2000, 1, 250, ModelMask{1} << Model("T4")));
    past.push_back(Pod("past-cpu-" + std::to_string(i), 30000, 1, 1000));
    past.push_back(
        Pod("past-v100-" + std::to_string(i), 8000, 2, 1000, ModelMask{1} << Model("V100M32")));
  }
  const std::vector<Workload> none;
  for (const char* policy : kPolicies) {
    SCOPED_TRACE(policy);
    FillOptions opt;
    opt.policy = policy;
    auto plain = RunFill(nodes, pods, opt);
    opt.past = &none;
    auto empty = RunFill(nodes, pods, opt);
    opt.past = &past;
    auto with = RunFill(nodes, pods, opt);
    ASSERT_TRUE(plain.ok() && empty.ok() && with.ok());
    EXPECT_EQ(empty->unalloc_pct, plain->unalloc_pct);
    EXPECT_EQ(with->pods, plain->pods);
    EXPECT_EQ(with->decisions, plain->pods);
    EXPECT_LE(with->placed, with->pods);
    if (std::string(policy) == "tessera") {
      EXPECT_NE(with->unalloc_pct, plain->unalloc_pct);
    } else {
      EXPECT_EQ(with->unalloc_pct, plain->unalloc_pct);
      EXPECT_EQ(with->placed, plain->placed);
    }
  }
  FillHooks shared;
  shared.past = &past;
  auto matrix = RunFillMatrix(nodes, pods, {"tessera"}, {42}, 1.3, 1, shared);
  ASSERT_TRUE(matrix.ok());
  FillOptions opt;
  opt.past = &past;
  auto single = RunFill(nodes, pods, opt);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(matrix->front().runs.front().unalloc_pct, single->unalloc_pct);
}

TEST(RunFillTest, EverythingPlacedWhenItFits) {
  // One-GPU pods only, 90% of capacity: 21 pods of 1000 (21000 + 1000 > 21600), all fit.
  std::vector<Workload> pods;
  for (int i = 0; i < 6; ++i) pods.push_back(Pod("w" + std::to_string(i), 1000, 1, 1000));
  for (const char* policy : kPolicies) {
    SCOPED_TRACE(policy);
    FillOptions opt;
    opt.policy = policy;
    opt.tune_ratio = 0.9;
    auto r = RunFill(SmallCluster(), pods, opt);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->pods, 21);
    EXPECT_EQ(r->placed, 21);
    EXPECT_NEAR(r->final_arrival_pct, 87.5, 1e-9);
    EXPECT_NEAR(r->unalloc_pct_at_130, 12.5, 1e-9);
    // Bucket b holds the state after the first pod whose arrival reached b%: allocation is
    // the arrival, between b% and b% + one pod (1000 / 24000 = 4.17%).
    for (int b = 0; b <= 87; ++b) {
      const double alloc = 100.0 - r->unalloc_pct[b];
      EXPECT_GE(alloc, b - 1e-9) << b;
      EXPECT_LT(alloc, b + 100.0 / 24 + 1e-9) << b;
    }
  }
}

TEST(RunFillTest, FragmentationOfTheEmptyCluster) {
  // Four shapes of equal frequency, p = 0.25 each. On empty nodes every GPU shape fits, so
  // only the CPU-only shape counts: F = 0.25 * idle GPU, i.e. 25% of the cluster.
  std::vector<Workload> pods;
  for (int i = 0; i < 10; ++i) {
    const std::string s = std::to_string(i);
    pods.push_back(Pod("c" + s, 1000, 0, 0));
    pods.push_back(Pod("s" + s, 1000, 1, 500));
    pods.push_back(Pod("o" + s, 1000, 1, 1000));
    pods.push_back(Pod("t" + s, 1000, 2, 1000));
  }
  FillOptions opt;
  opt.policy = "bestfit";
  auto r = RunFill(SmallCluster(), pods, opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NEAR(r->frag_pct[0], 25.0, 1e-9);
  EXPECT_NEAR(r->frag_ratio_pct[0], 25.0, 1e-9);
}

TEST(RunFillTest, Errors) {
  FillOptions opt;
  opt.policy = "no-such-policy";
  auto unknown = RunFill(SmallCluster(), SmallTrace(), opt);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);

  opt.policy = "bestfit";
  auto no_gpu = RunFill({Node("c", 8000, 0, "")}, SmallTrace(), opt);
  ASSERT_FALSE(no_gpu.ok());
  EXPECT_EQ(no_gpu.status().code(), StatusCode::kInvalidArgument);

  auto dup = RunFill({Node("a", 8000, 1, "T4"), Node("a", 8000, 1, "T4")}, SmallTrace(), opt);
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists);
}

TEST(RunFillMatrixTest, MatchesSingleRunsForAnyThreadCount) {
  const auto nodes = SmallCluster();
  const auto pods = SmallTrace();
  const std::vector<std::string> policies = {"packing", "fgd"};
  const std::vector<uint64_t> seeds = {5, 6, 7};
  auto one = RunFillMatrix(nodes, pods, policies, seeds, 1.3, 1);
  auto two = RunFillMatrix(nodes, pods, policies, seeds, 1.3, 2);
  ASSERT_TRUE(one.ok() && two.ok());
  ASSERT_EQ(one->size(), 2u);
  for (size_t p = 0; p < policies.size(); ++p) {
    const FillSummary& s = (*one)[p];
    EXPECT_EQ(s.policy, policies[p]);
    ASSERT_EQ(s.runs.size(), seeds.size());
    double sum = 0;
    for (size_t k = 0; k < seeds.size(); ++k) {
      FillOptions opt;
      opt.policy = policies[p];
      opt.seed = seeds[k];
      auto single = RunFill(nodes, pods, opt);
      ASSERT_TRUE(single.ok());
      EXPECT_EQ(s.runs[k].seed, seeds[k]);
      EXPECT_EQ(s.runs[k].unalloc_pct, single->unalloc_pct);
      EXPECT_EQ((*two)[p].runs[k].unalloc_pct, single->unalloc_pct);
      EXPECT_EQ((*two)[p].runs[k].frag_pct, single->frag_pct);
      sum += single->unalloc_pct_at_100;
    }
    EXPECT_NEAR(s.unalloc_at_100.mean, sum / 3, 1e-9);
  }
  auto bad = RunFillMatrix(nodes, pods, {"bestfit", "nope"}, seeds, 1.3, 2);
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
}

TEST(StatsTest, Of) {
  // {1, 2, 3, 4}: mean 2.5, median (2 + 3) / 2, sample sd sqrt(5 / 3).
  const Stats s = Stats::Of({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_NEAR(s.stddev, 1.2909944, 1e-6);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 4);
  EXPECT_DOUBLE_EQ(Stats::Of({3, 9, 1}).median, 3);
  EXPECT_EQ(Stats::Of({7}).stddev, 0);
}

// ---------------------------------------------------------------------------------------
// The FGD paper's ordering on a subsample of the real default trace.

TEST(RealTraceFillTest, PolicyOrderingOnSubsample) {
  const std::string dir = test::SharedDir() + "/traces/alibaba-gpu-2023";
  const std::string nodes_path = dir + "/openb_node_list_gpu_node.csv";
  const std::string pods_path = dir + "/openb_pod_list_default.csv";
  if (!std::filesystem::exists(nodes_path) || !std::filesystem::exists(pods_path))
    GTEST_SKIP() << "default trace not present under " << dir;
  auto all_nodes = ReadNodesCsv(nodes_path);
  auto all_pods = ReadPodsCsv(pods_path);
  ASSERT_TRUE(all_nodes.ok()) << all_nodes.status().ToString();
  ASSERT_TRUE(all_pods.ok()) << all_pods.status().ToString();
  std::vector<NodeSpec> nodes;
  for (size_t i = 0; i < all_nodes->size(); i += 4) nodes.push_back((*all_nodes)[i]);
  std::vector<Workload> pods;
  for (size_t i = 0; i < all_pods->size(); i += 4) pods.push_back((*all_pods)[i]);

  const std::vector<std::string> policies = {"random",  "dotprod", "clustering",
                                             "packing", "bestfit", "fgd"};
  const auto t0 = std::chrono::steady_clock::now();
  auto r = RunFillMatrix(nodes, pods, policies, {42, 43, 44}, 1.3, 2);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::map<std::string, double> mean;
  for (const FillSummary& s : *r) {
    mean[s.policy] = s.unalloc_at_100.mean;
    for (const FillRun& run : s.runs) EXPECT_GT(run.final_arrival_pct, 125.0) << s.policy;
  }
  std::string table;
  for (const auto& p : policies) table += p + "=" + std::to_string(mean[p]) + " ";
  RecordProperty("unalloc_at_100", table);
  RecordProperty("seconds", std::to_string(seconds));
  EXPECT_GT(mean["random"], mean["dotprod"]) << table;
  EXPECT_GT(mean["dotprod"], std::max(mean["clustering"], mean["packing"])) << table;
  EXPECT_GT(std::min(mean["clustering"], mean["packing"]), mean["bestfit"]) << table;
  EXPECT_GT(mean["bestfit"], mean["fgd"]) << table;
}

}  // namespace
}  // namespace tessera
