// The Kubernetes scheduler's two-phase MIG re-layouts (a pod binds only after its node reports
// the layout applied; a failed or late apply reverts) and preemption of slices by priority,
// including victims on over-committed nodes.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "kube/scheduler_core.h"
#include "tests/kube/slices_test_util.h"
#include "tests/kube/test_objects.h"

namespace tessera::kube {
namespace {

using kubetest::MigNodeJson;
using namespace slicetest;  // NOLINT(google-build-using-namespace)

// Two phases: the plan holds the GPU, the pod is bound only once the node reports the layout.
TEST(SchedulerRelayoutTest, BindsOnlyAfterTheNodeReportsTheLayoutApplied) {
  auto core = Core();
  core->UpsertNode(MigNodeJson("m", {""}));
  core->UpsertPod(PodJson("big", {{"nvidia.com/mig-3g.40gb", "1"}}));
  const CycleOutput out1 = core->Cycle(1);
  EXPECT_TRUE(out1.binds.empty());
  ASSERT_EQ(out1.layouts.size(), 1u);
  const LayoutAction act = out1.layouts[0];
  EXPECT_EQ(act.node, "m");
  EXPECT_TRUE(act.mig_enabled);
  EXPECT_NE(act.layout.find("3g.40gb@"), std::string::npos) << act.layout;
  // Meanwhile the GPU is held: a whole-GPU pod does not get it, and no second plan is made.
  core->UpsertPod(PodJson("whole", {{"nvidia.com/gpu", "1"}}));
  const CycleOutput out2 = core->Cycle(2);
  EXPECT_TRUE(out2.binds.empty());
  EXPECT_TRUE(out2.layouts.empty());
  EXPECT_FALSE(core->cluster().gpu(0, 0).mig_enabled());                   // not before the report
  EXPECT_FALSE(core->LayoutReported("m", 0, act.revision + 1, true, ""));  // unknown revision
  EXPECT_TRUE(core->LayoutReported("m", 0, act.revision, true, ""));
  EXPECT_TRUE(core->cluster().gpu(0, 0).mig_enabled());
  const auto a = Assignments(core->Cycle(3));
  ASSERT_EQ(a.count("big"), 1u);
  EXPECT_EQ(a.at("big").kind, AssignmentKind::kMig);
  EXPECT_EQ(a.at("big").uuids, std::vector<std::string>{"GPU-m-0"});
  EXPECT_EQ(a.at("big").mig_instance.rfind("3g.40gb@", 0), 0u);
  EXPECT_NE(act.layout.find(a.at("big").mig_instance), std::string::npos);
  EXPECT_EQ(a.count("whole"), 0u);  // GPU 0 is a MIG GPU now
  EXPECT_EQ(core->stats().relayouts_applied, 1);
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
  const std::string m = core->Metrics(3);
  EXPECT_NE(m.find("tessera_mig_relayouts_total{result=\"applied\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("tessera_mig_relayouts_in_flight 0"), std::string::npos) << m;
  // One 3g.40gb (3 of 7 compute slices, in milli-GPU) in use on the only GPU.
  EXPECT_NE(m.find("tessera_gpu_allocated_ratio 0.428000"), std::string::npos) << m;
}

// Pods whose slices lie in the same new layout wait for one re-layout together and are bound,
// once it is applied, on the instances the plan gave them.
TEST(SchedulerRelayoutTest, PodsThatFitOneNewLayoutWaitForItTogether) {
  auto core = Core();
  core->UpsertNode(MigNodeJson("m", {"", ""}));
  for (const char* name : {"a", "b", "c"}) core->UpsertPod(PodJson(name, kMig1g));
  const CycleOutput out1 = core->Cycle(1);
  EXPECT_TRUE(out1.binds.empty());
  ASSERT_EQ(out1.layouts.size(), 1u);
  for (const char* name : {"ml/a", "ml/b", "ml/c"})
    EXPECT_NE(core->WhyPending(name).find("to re-lay out GPU"), std::string::npos)
        << name << ": " << core->WhyPending(name);
  ASSERT_TRUE(core->LayoutReported("m", out1.layouts[0].gpu, out1.layouts[0].revision, true, ""));
  const auto a = Assignments(core->Cycle(2));
  ASSERT_EQ(a.size(), 3u);
  std::set<std::string> instances;
  for (const auto& [name, as] : a) {
    EXPECT_EQ(as.kind, AssignmentKind::kMig) << name;
    EXPECT_EQ(as.gpus, std::vector<int>{out1.layouts[0].gpu}) << name;
    instances.insert(as.mig_instance);
  }
  EXPECT_EQ(instances.size(), 3u);
  EXPECT_EQ(core->stats().relayouts_planned, 1);
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
}

// While a pod waits for its node's re-layout, the node keeps the pod's host CPU and memory:
// a pod arriving meanwhile that would take them is not bound there.
TEST(SchedulerRelayoutTest, ThePodsHostCpuStaysFreeWhileItsLayoutIsMade) {
  auto core = Core();
  core->UpsertNode(MigNodeJson("m", {"", ""}));
  Json big = PodJson("big", {{"nvidia.com/mig-3g.40gb", "1"}});
  big["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "40";
  core->UpsertPod(big);
  const CycleOutput out1 = core->Cycle(1);
  ASSERT_EQ(out1.layouts.size(), 1u);
  Json cpu_heavy = PodJson("cpu-heavy", {{"nvidia.com/gpu", "1"}});
  cpu_heavy["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "30";
  core->UpsertPod(cpu_heavy);
  EXPECT_EQ(Assignments(core->Cycle(2)).count("cpu-heavy"), 0u);
  ASSERT_TRUE(core->LayoutReported("m", out1.layouts[0].gpu, out1.layouts[0].revision, true, ""));
  const auto a = Assignments(core->Cycle(3));
  ASSERT_EQ(a.count("big"), 1u);
  EXPECT_EQ(a.at("big").kind, AssignmentKind::kMig);
  EXPECT_EQ(a.count("cpu-heavy"), 0u);
  EXPECT_NE(core->WhyPending("ml/cpu-heavy").find("host CPU"), std::string::npos)
      << core->WhyPending("ml/cpu-heavy");
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
}

// A whole-GPU pod that fits nowhere gets MIG turned off on empty MIG GPUs of one node (the
// sharing simulation's PlanWholeGpus), in two phases, and is bound once every GPU it needs is
// reported applied. A GPU with an instance in use is never touched.
TEST(SchedulerRelayoutTest, MigIsTurnedOffOnEmptyGpusForAWholeGpuPod) {
  auto core = Core();
  core->UpsertNode(MigNodeJson("m", {"1g.10gb@0 3g.40gb@4", "3g.40gb@0 3g.40gb@4", "3g.40gb@4"}));
  core->UpsertPod(PodJson("small", {{"nvidia.com/mig-1g.10gb", "1"}}));
  ASSERT_EQ(Assignments(core->Cycle(1)).count("small"), 1u);  // GPU 0 is busy from now on
  core->UpsertPod(PodJson("two", {{"nvidia.com/gpu", "2"}}));
  const CycleOutput out = core->Cycle(2);
  EXPECT_TRUE(out.binds.empty());
  ASSERT_EQ(out.layouts.size(), 2u);
  std::set<int> gpus;
  for (const LayoutAction& act : out.layouts) {
    EXPECT_EQ(act.node, "m");
    EXPECT_FALSE(act.mig_enabled);
    EXPECT_TRUE(act.layout.empty()) << act.layout;
    gpus.insert(act.gpu);
  }
  EXPECT_EQ(gpus, (std::set<int>{1, 2}));
  EXPECT_NE(core->WhyPending("ml/two").find("to turn MIG off on GPU"), std::string::npos)
      << core->WhyPending("ml/two");
  // Bound only when both are applied; no second plan meanwhile.
  ASSERT_TRUE(core->LayoutReported("m", out.layouts[0].gpu, out.layouts[0].revision, true, ""));
  const CycleOutput mid = core->Cycle(3);
  EXPECT_TRUE(mid.binds.empty());
  EXPECT_TRUE(mid.layouts.empty());
  ASSERT_TRUE(core->LayoutReported("m", out.layouts[1].gpu, out.layouts[1].revision, true, ""));
  const auto a = Assignments(core->Cycle(4));
  ASSERT_EQ(a.count("two"), 1u);
  EXPECT_EQ(a.at("two").kind, AssignmentKind::kExclusive);
  EXPECT_EQ(a.at("two").gpus, (std::vector<int>{1, 2}));
  EXPECT_TRUE(core->cluster().gpu(0, 0).mig_enabled());
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
}

// A GPU on a node another job's reservation holds is never re-laid out for a pod: the cycle
// would not place the pod there, so the layout would be made again and again.
TEST(SchedulerRelayoutTest, NoReLayoutOnANodeAnotherJobHasReserved) {
  auto core = Core();
  core->UpsertNode(MigNodeJson("m", {"", ""}));
  core->UpsertPod(PodJson("one", {{"nvidia.com/gpu", "1"}}));
  ASSERT_EQ(core->Cycle(1).binds.size(), 1u);
  core->UpsertPod(PodJson("two", {{"nvidia.com/gpu", "2"}}));
  EXPECT_TRUE(core->Cycle(2).binds.empty());
  EXPECT_NE(core->WhyPending("ml/two").find("reservation"), std::string::npos)
      << core->WhyPending("ml/two");
  core->UpsertPod(PodJson("big", {{"nvidia.com/mig-3g.40gb", "1"}}));
  for (double t = 3; t < 6; ++t) {
    const CycleOutput out = core->Cycle(t);
    EXPECT_TRUE(out.layouts.empty()) << out.layouts[0].node << " " << out.layouts[0].layout;
    EXPECT_TRUE(out.binds.empty());
  }
  EXPECT_EQ(core->stats().relayouts_planned, 0);
  // A node nobody holds gets the re-layout.
  core->UpsertNode(MigNodeJson("free", {""}));
  const CycleOutput out = core->Cycle(6);
  ASSERT_EQ(out.layouts.size(), 1u);
  EXPECT_EQ(out.layouts[0].node, "free");
}

struct RevertCase {
  const char* name;
  bool timeout;  // else the node reports a failure
  const char* expect;
};

class SchedulerRelayoutRevertTest : public testing::TestWithParam<RevertCase> {};

TEST_P(SchedulerRelayoutRevertTest, AFailedOrLateApplyRevertsAndTellsThePod) {
  auto core = Core();
  core->UpsertNode(MigNodeJson("m", {""}));
  core->UpsertPod(PodJson("big", {{"nvidia.com/mig-3g.40gb", "1"}}));
  const CycleOutput out1 = core->Cycle(1);
  ASSERT_EQ(out1.layouts.size(), 1u);
  double now = 2;
  if (GetParam().timeout) {
    now = 1 + 60 + 1;  // past mig_relayout_timeout_s
  } else {
    EXPECT_TRUE(
        core->LayoutReported("m", 0, out1.layouts[0].revision, false, "NVML: GPU instance in use"));
  }
  core->UpsertPod(PodJson("whole", {{"nvidia.com/gpu", "1"}}));
  const CycleOutput out2 = core->Cycle(now);
  const std::string n = Notice(out2, "big");
  EXPECT_NE(n.find("MigRelayoutFailed"), std::string::npos) << n;
  EXPECT_NE(n.find(GetParam().expect), std::string::npos) << n;
  // The GPU is free again (the whole-GPU pod takes it), still without MIG, and is not planned
  // again while it backs off.
  EXPECT_FALSE(core->cluster().gpu(0, 0).mig_enabled());
  const auto a = Assignments(out2);
  EXPECT_EQ(a.count("whole"), 1u);
  EXPECT_TRUE(out2.layouts.empty());
  EXPECT_EQ(core->stats().relayouts_failed, 1);
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
}

INSTANTIATE_TEST_SUITE_P(Outcomes, SchedulerRelayoutRevertTest,
                         testing::Values(RevertCase{"failure", false, "GPU instance in use"},
                                         RevertCase{"timeout", true,
                                                    "not reported applied within 60 s"}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(SchedulerRelayoutTest, ALostNodeEndsItsReLayouts) {
  auto core = Core();
  const Json node = MigNodeJson("m", {""});
  core->UpsertNode(node);
  core->UpsertPod(PodJson("big", {{"nvidia.com/mig-3g.40gb", "1"}}));
  const CycleOutput out1 = core->Cycle(1);
  ASSERT_EQ(out1.layouts.size(), 1u);
  core->DeleteNode(node);
  EXPECT_FALSE(core->LayoutReported("m", 0, out1.layouts[0].revision, true, ""));
  EXPECT_EQ(core->cluster().num_allocations(), 0u);  // the placeholders are gone
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
}

// A pod of whole GPUs at a higher priority evicts the MIG slices of lower-priority pods on the
// GPUs PlanEviction clears, then waits for MIG to be turned off there before it binds. At equal
// priority nothing is evicted.
TEST(SchedulerPreemptionTest, AWholeGpuPodEvictsLowerPrioritySlicesThenWaitsForTheLayout) {
  for (int priority : {0, 10}) {
    SCOPED_TRACE(priority);
    auto core = Core();
    core->UpsertNode(MigNodeJson("m", {"3g.40gb@0 3g.40gb@4", "3g.40gb@0 3g.40gb@4"}));
    for (int i = 0; i < 4; ++i)
      core->UpsertPod(PodJson("low" + std::to_string(i), {{"nvidia.com/mig-3g.40gb", "1"}}));
    const CycleOutput first = core->Cycle(1);
    ASSERT_EQ(first.binds.size(), 4u);
    for (const BindAction& b : first.binds)  // the binds are confirmed
      core->UpsertPod(PodJson(b.name, {{"nvidia.com/mig-3g.40gb", "1"}}, b.annotations, b.node));
    Json train = PodJson("train", {{"nvidia.com/gpu", "2"}});
    train["spec"]["priority"] = priority;
    core->UpsertPod(train);
    const CycleOutput out = core->Cycle(100);
    EXPECT_TRUE(out.binds.empty());
    if (priority == 0) {
      EXPECT_TRUE(out.evictions.empty());
      EXPECT_TRUE(out.layouts.empty());
      continue;
    }
    std::set<std::string> evicted;
    for (const EvictAction& e : out.evictions) evicted.insert(e.name);
    EXPECT_EQ(evicted, (std::set<std::string>{"low0", "low1", "low2", "low3"}));
    ASSERT_EQ(out.layouts.size(), 2u);
    for (const LayoutAction& act : out.layouts) EXPECT_FALSE(act.mig_enabled);
    // The victims go; the node reports MIG off on both GPUs; the pod binds to both, whole.
    for (int i = 0; i < 4; ++i) {
      const std::string name = "low" + std::to_string(i);
      core->DeletePod(PodJson(name, {{"nvidia.com/mig-3g.40gb", "1"}}, Json::object(), "m"));
    }
    for (const LayoutAction& act : out.layouts)
      ASSERT_TRUE(core->LayoutReported("m", act.gpu, act.revision, true, ""));
    const auto a = Assignments(core->Cycle(101));
    ASSERT_EQ(a.count("train"), 1u);
    EXPECT_EQ(a.at("train").kind, AssignmentKind::kExclusive);
    EXPECT_EQ(a.at("train").gpus, (std::vector<int>{0, 1}));
    EXPECT_TRUE(core->cluster().CheckInvariants().ok());
  }
}

// A MIG pod of higher priority evicts only what it needs: of two lower-priority pods on the
// GPU's two 3g.40gb instances (equal lost work), PlanEviction clears the GPU and then keeps
// the pod on the first instance. The pod binds to the instance freed.
TEST(SchedulerPreemptionTest, AFractionEvictsOneOfTheSlicesOnItsGpu) {
  const Json mig3g = {{"nvidia.com/mig-3g.40gb", "1"}};
  for (int priority : {0, 10}) {
    SCOPED_TRACE(priority);
    auto core = Core();
    core->UpsertNode(MigNodeJson("m", {"3g.40gb@0 3g.40gb@4"}));
    core->UpsertPod(PodJson("low0", mig3g));
    core->UpsertPod(PodJson("low1", mig3g));
    const CycleOutput first = core->Cycle(1);
    ASSERT_EQ(first.binds.size(), 2u);
    std::map<std::string, std::string> instance;
    for (const BindAction& b : first.binds) {
      core->UpsertPod(PodJson(b.name, mig3g, b.annotations, b.node));
      instance[b.name] = DecodeAssignment(b.annotations.at(kAnnotationAssignment))->mig_instance;
    }
    Json high = PodJson("high", mig3g);
    high["spec"]["priority"] = priority;
    core->UpsertPod(high);
    const CycleOutput out = core->Cycle(100);
    EXPECT_TRUE(out.binds.empty());
    if (priority == 0) {
      EXPECT_TRUE(out.evictions.empty());
      continue;
    }
    ASSERT_EQ(out.evictions.size(), 1u);
    const std::string victim = out.evictions[0].name;
    EXPECT_EQ(instance.at(victim), "3g.40gb@4");
    core->DeletePod(PodJson(victim, mig3g, Json::object(), "m"));
    const auto a = Assignments(core->Cycle(101));
    ASSERT_EQ(a.count("high"), 1u);
    EXPECT_EQ(a.at("high").mig_instance, "3g.40gb@4");
    EXPECT_TRUE(core->cluster().CheckInvariants().ok());
  }
}

// A victim on an over-committed node frees only what brings the node's balance above 0.
// Evicting it would not make room for the pod of higher priority, so nothing is evicted, and
// the attempt leaves it in the ledger with its GPU: a later pod does not get that GPU.
TEST(SchedulerPreemptionTest, AVictimOnAnOverCommittedNodeFreesLessThanItAsks) {
  auto core = Core(/*relayout=*/false);
  core->UpsertNode(MigNodeJson("m", {"", ""}));
  Json hog = PodJson("hog", Json::object(), Json::object(), "m");
  hog["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "60";
  hog["spec"]["priority"] = 100;
  core->UpsertPod(hog);
  Json g = PodJson("g", {{"nvidia.com/gpu", "1"}},
                   {{kAnnotationAssignment,
                     R"({"node":"m","kind":"exclusive","gpus":[0],"uuids":["GPU-m-0"]})"}},
                   "m");
  g["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "5";  // 4 free: balance -1
  core->UpsertPod(g);
  ASSERT_TRUE(core->Cycle(1).binds.empty());
  ASSERT_EQ(core->stats().adopted, 2);
  Json vip = PodJson("vip", {{"nvidia.com/gpu", "1"}});
  vip["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "5";
  vip["spec"]["priority"] = 10;
  core->UpsertPod(vip);
  const CycleOutput out = core->Cycle(100);
  EXPECT_TRUE(out.binds.empty());
  EXPECT_TRUE(out.evictions.empty());
  EXPECT_EQ(core->cluster().num_allocations(), 2u);
  EXPECT_FALSE(core->cluster().gpu(0, 0).Idle());
  EXPECT_EQ(core->cluster().free(0).cpu, 0);
  core->UpsertPod(PodJson("w", {{"nvidia.com/gpu", "1"}}));
  EXPECT_TRUE(core->Cycle(101).binds.empty());  // no CPU left on m
  EXPECT_FALSE(core->cluster().gpu(0, 0).Idle());
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
}

// Of two victims, the cheaper sits on an over-committed node where evicting it would not make
// room: the pod of higher priority evicts the other, on a node where that is enough.
TEST(SchedulerPreemptionTest, AVictimThatWouldNotMakeRoomIsPassedOver) {
  auto core = Core(/*relayout=*/false);
  core->UpsertNode(MigNodeJson("m", {"", ""}));
  core->UpsertNode(MigNodeJson("m2", {"", "", "", ""}));
  Json hog = PodJson("hog", Json::object(), Json::object(), "m");
  hog["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "60";
  hog["spec"]["priority"] = 100;
  core->UpsertPod(hog);

  core->UpsertPod(BoundWholePod("g", "m", {0}, "5"));        // m: 4 CPUs free for 5: balance -1
  core->UpsertPod(BoundWholePod("g2", "m2", {0, 1}, "62"));  // m2: 2 CPUs free, GPUs 2 and 3 idle
  ASSERT_TRUE(core->Cycle(1).binds.empty());
  ASSERT_EQ(core->stats().adopted, 3);
  Json vip = PodJson("vip", {{"nvidia.com/gpu", "1"}});
  vip["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "5";
  vip["spec"]["priority"] = 10;
  core->UpsertPod(vip);
  const CycleOutput out = core->Cycle(100);
  ASSERT_EQ(out.evictions.size(), 1u);
  EXPECT_EQ(out.evictions[0].name, "g2");
  EXPECT_FALSE(core->cluster().gpu(0, 0).Idle());  // g keeps its GPU
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
}

}  // namespace
}  // namespace tessera::kube
