// Preemption: the eviction planner (sharing/eviction.h), for whole GPUs and for fractions, and
// the sharing simulation's priority classes (sim/sharing_sim.h).
#include <gtest/gtest.h>

#include <algorithm>

#include "sharing/eviction.h"
#include "sim/sharing_scenario.h"
#include "sim/sharing_sim.h"
#include "tests/support/test_paths.h"

namespace tessera {
namespace {

constexpr int64_t kGiB = 1024;

NodeSpec Node(const std::string& name, int gpus, int64_t cores = 64) {
  NodeSpec s;
  s.name = name;
  s.cpu = MilliCpu(cores * 1000);
  s.memory = MiB(512 * kGiB);
  s.gpu_count = gpus;
  s.model = *GpuCatalog::Builtin().Find("H100-80GB");
  return s;
}

// Two 4-GPU nodes. a: GPU 0 holds shares 1 and 2, GPU 1 share 3, GPU 2 nothing, GPU 3 share 4.
// b: GPUs 0..3 hold whole GPUs 11..14. Every workload takes 4 cores.
class PlanEvictionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(c_.AddNode(Node("a", 4)).ok());
    ASSERT_TRUE(c_.AddNode(Node("b", 4)).ok());
    Share(1, 0);
    Share(2, 0);
    Share(3, 1);
    Share(4, 3);
    for (int g = 0; g < 4; ++g) {
      Demand d{MilliCpu(4000), MiB(kGiB), 1, 1000, 0};
      ASSERT_TRUE(c_.Allocate(11 + g, d, Placement{1, GpuMask{1} << g}).ok());
    }
  }
  void Share(WorkloadId id, int g) {
    Demand d{MilliCpu(4000), MiB(kGiB), 1, 300, 0};
    ASSERT_TRUE(c_.Allocate(id, d, Placement{0, GpuMask{1} << g}).ok());
  }
  static EvictionCandidate Cand(double cost) { return {cost, MilliCpu(4000), MiB(kGiB)}; }
  static SliceDemand Whole(int gpus, int64_t cores = 8) {
    SliceDemand d;
    d.whole_gpus = gpus;
    d.memory_mib = 60 * kGiB;
    d.cpu = MilliCpu(cores * 1000);
    d.host_memory = MiB(64 * kGiB);
    return d;
  }
  ClusterState c_;
};

TEST_F(PlanEvictionTest, ClearsTheGpusWithFewestVictimsThenLeastCost) {
  std::map<WorkloadId, EvictionCandidate> all;
  for (WorkloadId id : {1, 2, 3, 4, 11, 12, 13, 14}) all[id] = Cand(static_cast<double>(id));
  // 2 GPUs: node a's empty GPU 2 and GPU 1 (one victim, cost 3) beat GPU 3 (one, cost 4).
  auto p = PlanEviction(c_, Whole(2), all, nullptr);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->node, 0u);
  EXPECT_EQ(p->gpus, GpuMask{0b0110});
  EXPECT_EQ(p->victims, std::vector<WorkloadId>{3});
  EXPECT_DOUBLE_EQ(p->cost, 3);
  // 4 GPUs: node a needs 4 victims (cost 10), node b 4 (cost 50): a wins on cost.
  p = PlanEviction(c_, Whole(4), all, nullptr);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->node, 0u);
  EXPECT_EQ(p->victims, (std::vector<WorkloadId>{1, 2, 3, 4}));
  // Fewer victims win over a lower cost: 3 GPUs on a need 2 victims, on b 3.
  all[3] = Cand(1000);
  p = PlanEviction(c_, Whole(3), all, nullptr);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->node, 0u);
  EXPECT_EQ(p->victims, (std::vector<WorkloadId>{3, 4}));
}

TEST_F(PlanEvictionTest, OnlyCandidatesAreEvicted) {
  std::map<WorkloadId, EvictionCandidate> some = {{1, Cand(1)},  {3, Cand(1)},  {4, Cand(1)},
                                                  {11, Cand(1)}, {12, Cand(1)}, {13, Cand(1)}};
  // Node a's GPU 0 holds share 2, not a candidate; node b's GPU 3 holds 14.
  auto p = PlanEviction(c_, Whole(4), some, nullptr);
  EXPECT_FALSE(p.has_value());
  p = PlanEviction(c_, Whole(3), some, nullptr);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->node, 0u);
  EXPECT_EQ(p->gpus, GpuMask{0b1110});
  EXPECT_EQ(p->victims, (std::vector<WorkloadId>{3, 4}));
  // The allowed mask limits the nodes.
  const std::vector<uint8_t> only_b = {0, 1};
  p = PlanEviction(c_, Whole(3), some, &only_b);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->node, 1u);
  EXPECT_EQ(p->victims, (std::vector<WorkloadId>{11, 12, 13}));
}

TEST_F(PlanEvictionTest, NothingToPlan) {
  std::map<WorkloadId, EvictionCandidate> all;
  for (WorkloadId id : {1, 2, 3, 4, 11, 12, 13, 14}) all[id] = Cand(1);
  EXPECT_FALSE(PlanEviction(c_, Whole(2), {}, nullptr).has_value());   // no candidates
  EXPECT_FALSE(PlanEviction(c_, Whole(5), all, nullptr).has_value());  // no node that large
  SliceDemand t4 = Whole(1);
  t4.models = ModelMask{1} << *GpuCatalog::Builtin().Find("T4");
  EXPECT_FALSE(PlanEviction(c_, t4, all, nullptr).has_value());  // model not allowed
  SliceDemand big = Whole(1);
  big.memory_mib = 200 * kGiB;
  EXPECT_FALSE(PlanEviction(c_, big, all, nullptr).has_value());  // GPUs too small
  // One GPU: node a's cheapest GPU is the empty GPU 2, a plan that evicts nothing, which is
  // never returned; node b's plan evicts one.
  auto p = PlanEviction(c_, Whole(1), all, nullptr);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->victims.size(), 1u);
}

TEST_F(PlanEvictionTest, EvictsMoreWhenTheHostIsShort) {
  std::map<WorkloadId, EvictionCandidate> all;
  for (WorkloadId id : {1, 2, 3, 4, 11, 12, 13, 14}) all[id] = Cand(static_cast<double>(id));
  // Node a has 64 - 16 = 48 cores free. 2 GPUs with 56 cores: GPUs 2 and 1 free 4 more (52),
  // so one more victim of node a, the cheapest left (share 1). Node b: 2 victims free 8 cores,
  // 56 in all, cost 23.
  auto p = PlanEviction(c_, Whole(2, 56), all, nullptr);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->node, 0u);
  EXPECT_EQ(p->gpus, GpuMask{0b0110});
  EXPECT_EQ(p->victims, (std::vector<WorkloadId>{1, 3}));
  // More cores than any node can free: nothing.
  EXPECT_FALSE(PlanEviction(c_, Whole(2, 65), all, nullptr).has_value());
}

// One node with one GPU holding three MPS clients 21, 22, 23; another with two GPUs, each with
// one client. A fraction clears one GPU (fewest victims first), then, with a probe, keeps the
// victims it does not need, the costliest first.
TEST(PlanEvictionFractionTest, ClearsOneGpuThenKeepsWhatItDoesNotNeed) {
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("one", 1)).ok());
  ASSERT_TRUE(c.AddNode(Node("two", 2)).ok());
  auto mps = [&](WorkloadId id, NodeIdx n, int g) {
    SliceDemand d;
    d.memory_mib = 20 * kGiB;
    d.cpu = MilliCpu(1000);
    SliceAssignment a;
    a.kind = SliceKind::kMps;
    a.node = n;
    a.gpus = GpuMask{1} << g;
    a.thread_pct = 20;
    a.memory_mib = 20 * kGiB;
    ASSERT_TRUE(c.Allocate(id, d, a).ok());
  };
  mps(21, 0, 0);
  mps(22, 0, 0);
  mps(23, 0, 0);
  mps(31, 1, 0);
  mps(32, 1, 1);
  std::map<WorkloadId, EvictionCandidate> cands;
  const std::map<WorkloadId, double> cost = {{21, 5}, {22, 1}, {23, 3}, {31, 9}, {32, 8}};
  for (const auto& [id, v] : cost) cands[id] = {v, MilliCpu(1000), MiB(kGiB)};
  SliceDemand share;
  share.memory_mib = 30 * kGiB;
  share.compute_pct = 20;
  // Without a probe: the GPU with the fewest victims, the cheaper of node two's.
  auto p = PlanEviction(c, share, cands, nullptr);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->node, 1u);
  EXPECT_EQ(p->gpus, GpuMask{0b10});
  EXPECT_EQ(p->victims, std::vector<WorkloadId>{32});
  // Node one only: all three go without a probe.
  const std::vector<uint8_t> only_one = {1, 0};
  p = PlanEviction(c, share, cands, &only_one);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->victims, (std::vector<WorkloadId>{21, 22, 23}));
  EXPECT_DOUBLE_EQ(p->cost, 9);
  // A probe under which evicting 22 alone makes room: 21 (cost 5) is kept first, then 23.
  std::vector<std::vector<WorkloadId>> asked;
  auto needs_22 = [&](const std::vector<WorkloadId>& v) {
    asked.push_back(v);
    return std::find(v.begin(), v.end(), 22) != v.end();
  };
  p = PlanEviction(c, share, cands, &only_one, needs_22);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->victims, std::vector<WorkloadId>{22});
  EXPECT_DOUBLE_EQ(p->cost, 1);
  EXPECT_EQ(asked, (std::vector<std::vector<WorkloadId>>{{22, 23}, {22}}));
  // A probe that never fits with fewer: the whole GPU's clients stay victims.
  p = PlanEviction(c, share, cands, &only_one,
                   [](const std::vector<WorkloadId>&) { return false; });
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->victims.size(), 3u);
  // Whole GPUs are never reprieved: the probe is not asked.
  bool called = false;
  SliceDemand whole = share;
  whole.whole_gpus = 1;
  p = PlanEviction(c, whole, cands, &only_one, [&](const std::vector<WorkloadId>&) {
    called = true;
    return true;
  });
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->victims.size(), 3u);
  EXPECT_FALSE(called);
}

// Victims of equal cost are told apart by where their slices lie, not by id: callers that
// number the same workloads differently choose the same ones.
TEST(PlanEvictionFractionTest, EqualCostsAreOrderedBySliceNotId) {
  for (const bool swap_ids : {false, true}) {
    SCOPED_TRACE(swap_ids);
    ClusterState c;
    ASSERT_TRUE(c.AddNode(Node("n", 3, 16)).ok());
    const WorkloadId on1 = swap_ids ? 40 : 41, on2 = swap_ids ? 41 : 40;
    for (const auto& [id, g] : {std::pair{on1, 1}, std::pair{on2, 2}}) {
      Demand d{MilliCpu(4000), MiB(kGiB), 1, 300, 0};
      ASSERT_TRUE(c.Allocate(id, d, Placement{0, GpuMask{1} << g}).ok());
    }
    std::map<WorkloadId, EvictionCandidate> cands = {{40, {2, MilliCpu(4000), MiB(kGiB)}},
                                                     {41, {2, MilliCpu(4000), MiB(kGiB)}}};
    // GPU 0 is empty; 12 of 16 cores are needed and 8 are free: one victim, the one on GPU 1.
    SliceDemand d;
    d.memory_mib = 10 * kGiB;
    d.cpu = MilliCpu(12000);
    auto p = PlanEviction(c, d, cands, nullptr);
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->gpus, GpuMask{1});
    EXPECT_EQ(p->victims, std::vector<WorkloadId>{on1});
  }
}

// Equal slices of equal cost (two MPS clients alike on one GPU) are told apart by when each
// entered the queue: the newer is evicted, whichever id it has. The scheduler gives a pod it
// re-creates after an eviction a new id, the simulation keeps the workload's.
TEST(PlanEvictionFractionTest, EqualSlicesEvictTheNewerWhateverItsId) {
  for (const bool swap_ids : {false, true}) {
    SCOPED_TRACE(swap_ids);
    const WorkloadId older = swap_ids ? 51 : 50, newer = swap_ids ? 50 : 51;
    ClusterState c;
    ASSERT_TRUE(c.AddNode(Node("n", 2, 16)).ok());
    for (WorkloadId id : {older, newer}) {
      SliceDemand d;
      d.memory_mib = 10 * kGiB;
      d.cpu = MilliCpu(4000);
      SliceAssignment a;
      a.kind = SliceKind::kMps;
      a.gpus = GpuMask{1} << 1;
      a.thread_pct = 20;
      a.memory_mib = 10 * kGiB;
      ASSERT_TRUE(c.Allocate(id, d, a).ok());
    }
    std::map<WorkloadId, EvictionCandidate> cands;
    cands[older] = {3, MilliCpu(4000), MiB(kGiB), /*since=*/100};
    cands[newer] = {3, MilliCpu(4000), MiB(kGiB), /*since=*/200};
    // GPU 0 is empty; 12 of 16 cores are needed and 8 are free: one victim for host room.
    SliceDemand host;
    host.memory_mib = 10 * kGiB;
    host.cpu = MilliCpu(12000);
    auto p = PlanEviction(c, host, cands, nullptr);
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->victims, std::vector<WorkloadId>{newer});
    // Only GPU 1 may serve (GPU 0 held by a whole-GPU workload that is no candidate): both
    // clients are cleared, then the older is reprieved first; one victim is enough.
    ASSERT_TRUE(c.Allocate(60, Demand{MilliCpu(0), MiB(0), 1, 1000, 0}, Placement{0, 1}).ok());
    SliceDemand gpu;
    gpu.memory_mib = 70 * kGiB;
    p = PlanEviction(c, gpu, cands, nullptr,
                     [](const std::vector<WorkloadId>& v) { return v.size() == 1; });
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->victims, std::vector<WorkloadId>{newer});
  }
}

// ---- the sharing simulation with priorities ---------------------------------------------------

// One node of two H100s; class 0 "low" and class 1 "high", whole GPUs.
SharingScenario TwoClasses(int low_priority, int high_priority) {
  auto s = ParseSharingScenario(
      R"({"horizon_s": 20000, "nodes": [{"name_prefix": "n", "count": 1,)"
      R"( "gpu_model": "H100-80GB", "gpus_per_node": 2, "cpu_cores": 64, "memory_gib": 512}],)"
      R"( "workloads": {"classes": [)"
      R"({"name": "low", "arrivals_per_hour": 1, "memory_gib": 10, "whole_gpus": 1,)"
      R"( "duration_s": 60, "priority": )" +
          std::to_string(low_priority) +
          R"(}, {"name": "high", "arrivals_per_hour": 1, "memory_gib": 60, "whole_gpus": 2,)"
          R"( "duration_s": 60, "priority": )" +
          std::to_string(high_priority) + "}]}}",
      "t.json");
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : SharingScenario{};
}

SharingWorkload Job(WorkloadId id, int cls, SimTime at, SimTime duration, SimTime patience) {
  SharingWorkload w;
  w.id = id;
  w.cls = cls;
  w.arrival_s = at;
  w.duration_s = duration;
  w.patience_s = patience;
  w.demand.whole_gpus = cls == 0 ? 1 : 2;
  w.demand.memory_mib = (cls == 0 ? 10 : 60) * kGiB;
  w.demand.isolation = Isolation::kStrict;
  w.demand.cpu = MilliCpu(1000);
  w.demand.host_memory = MiB(4 * kGiB);
  return w;
}

TEST(SharingPreemptionTest, ScenarioPriority) {
  EXPECT_FALSE(SharingPreemption(TwoClasses(0, 0)));
  const SharingScenario s = TwoClasses(0, 5);
  EXPECT_TRUE(SharingPreemption(s));
  EXPECT_EQ(s.classes[1].priority, 5);
  auto bad = ParseSharingScenario(
      R"({"horizon_s": 10, "nodes": [{"name_prefix": "n", "count": 1, "gpu_model": "T4",)"
      R"( "gpus_per_node": 1, "cpu_cores": 8, "memory_gib": 64}], "workloads": {"classes":)"
      R"( [{"name": "c", "arrivals_per_hour": 1, "memory_gib": 1, "duration_s": 1,)"
      R"( "priority": 2000000000}]}})",
      "t.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("priority"), std::string::npos) << bad.status().message();
}

// Two low jobs hold both GPUs until 1000 s; the high job arrives at 10 s.
TEST(SharingPreemptionTest, HigherPriorityEvictsAndTheVictimsRunAgain) {
  const std::vector<SharingWorkload> ws = {Job(0, 0, 0, 1000, 5000), Job(1, 0, 0, 1000, 5000),
                                           Job(2, 1, 10, 100, 5000)};
  for (const char* strategy : {"exclusive", "tessera"}) {
    SCOPED_TRACE(strategy);
    // Equal priorities: the high job waits for the low ones.
    auto equal = SimulateSharing(TwoClasses(0, 0), ws, strategy);
    ASSERT_TRUE(equal.ok()) << equal.status().message();
    EXPECT_EQ(equal->placed, 3);
    EXPECT_EQ(equal->preemptions, 0);
    EXPECT_DOUBLE_EQ(equal->p99_wait_s, 990 - 0.02 * 990);  // waits 0, 0, 990
    // Higher priority: it starts at once; both victims wait 100 s and run again in full.
    auto pre = SimulateSharing(TwoClasses(0, 1), ws, strategy);
    ASSERT_TRUE(pre.ok()) << pre.status().message();
    EXPECT_EQ(pre->placed, 3);
    EXPECT_EQ(pre->preemptions, 2);
    EXPECT_EQ(pre->preempted_not_replaced, 0);
    EXPECT_EQ(pre->placed_by_class, (std::vector<int64_t>{2, 1}));
    EXPECT_EQ(pre->placed_workloads, (std::vector<uint8_t>{1, 1, 1}));
    EXPECT_DOUBLE_EQ(pre->p99_wait_s, 0);  // first waits only
    // Busy GPU-seconds: 2 x 10 before, 2 x 100 for the high job, 2 x 1000 after.
    EXPECT_DOUBLE_EQ(pre->gpus_busy_avg, (20.0 + 200 + 2000) / 20000);
    // Lower priority never evicts higher.
    auto inverted = SimulateSharing(TwoClasses(1, 0), ws, strategy);
    ASSERT_TRUE(inverted.ok());
    EXPECT_EQ(inverted->preemptions, 0);
  }
}

// A victim whose new wait outlasts its patience is lost, and `placed` no longer counts it.
TEST(SharingPreemptionTest, AVictimThatGivesUpIsNotPlaced) {
  const std::vector<SharingWorkload> ws = {Job(0, 0, 0, 1000, 50), Job(1, 0, 0, 1000, 5000),
                                           Job(2, 1, 10, 100, 5000)};
  auto m = SimulateSharing(TwoClasses(0, 1), ws, "tessera");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->preemptions, 2);
  EXPECT_EQ(m->preempted_not_replaced, 1);
  EXPECT_EQ(m->placed, 2);
  EXPECT_EQ(m->abandoned, 1);
  EXPECT_EQ(m->placed_workloads, (std::vector<uint8_t>{0, 1, 1}));
}

// One H100; two low fractions of 30 GiB hold it from 0 s and 1 s; a high one of 30 GiB arrives
// at 10 s. The GPU's memory takes two of them: the high one evicts only the later low one (the
// less lost work), which runs again once the high one is done.
TEST(SharingPreemptionTest, AFractionEvictsOnlyWhatItNeeds) {
  auto scenario = [](int high_priority) {
    auto s = ParseSharingScenario(
        R"({"horizon_s": 20000, "nodes": [{"name_prefix": "n", "count": 1,)"
        R"( "gpu_model": "H100-80GB", "gpus_per_node": 1, "cpu_cores": 64, "memory_gib": 512}],)"
        R"( "workloads": {"classes": [)"
        R"({"name": "low", "arrivals_per_hour": 1, "memory_gib": 30, "compute_pct": 20,)"
        R"( "duration_s": 60}, {"name": "high", "arrivals_per_hour": 1, "memory_gib": 30,)"
        R"( "compute_pct": 20, "duration_s": 60, "priority": )" +
            std::to_string(high_priority) + "}]}}",
        "t.json");
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? *s : SharingScenario{};
  };
  auto fraction = [](WorkloadId id, int cls, SimTime at, SimTime duration) {
    SharingWorkload w = Job(id, cls, at, duration, 5000);
    w.demand.whole_gpus = 0;
    w.demand.memory_mib = 30 * kGiB;
    w.demand.compute_pct = 20;
    w.demand.isolation = Isolation::kStandard;
    return w;
  };
  const std::vector<SharingWorkload> ws = {fraction(0, 0, 0, 1000), fraction(1, 0, 1, 1000),
                                           fraction(2, 1, 10, 100)};
  auto equal = SimulateSharing(scenario(0), ws, "tessera");
  ASSERT_TRUE(equal.ok()) << equal.status().message();
  EXPECT_EQ(equal->preemptions, 0);
  EXPECT_EQ(equal->placed, 3);
  auto m = SimulateSharing(scenario(1), ws, "tessera");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->preemptions, 1);
  EXPECT_EQ(m->placed, 3);
  EXPECT_EQ(m->preempted_not_replaced, 0);
  EXPECT_EQ(m->memory_oversubscribed, 0);
  EXPECT_EQ(m->isolation_violations, 0);
  // The first low one ran throughout: 1000 s, the high one 100 s, the second 9 s, then 1000 s.
  EXPECT_NE(m->placement_of[2].find("t=10 "), std::string::npos) << m->placement_of[2];
}

// The bench scenario with training above the rest: the issue's bar, with isolation intact.
TEST(SharingPreemptionTest, TrainingPriorityOnTheMixedScenario) {
  auto s = ReadSharingScenario(test::SourceDir() + "/bench/scenarios/sharing-mixed-priority.json");
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto r = CompareSharing(*s, s->seed, {"tessera"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const SharingMetrics& m = r->front();
  int64_t training = -1;
  for (size_t i = 0; i < s->classes.size(); ++i)
    if (s->classes[i].name == "training") training = m.placed_by_class[i];
  EXPECT_GE(training, 20);
  EXPECT_GE(m.placed, 4516);
  EXPECT_GT(m.preemptions, 0);
  EXPECT_EQ(m.isolation_violations, 0);
  EXPECT_EQ(m.memory_oversubscribed, 0);
  EXPECT_EQ(m.disturbed, 0);
}

}  // namespace
}  // namespace tessera
