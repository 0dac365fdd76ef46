// The Kubernetes scheduler places GPU slices from the one ledger: MIG layouts come from the
// nodes' inventory, MIG requests and strict-isolation shares get concrete instances
// ("<profile>@<start>" with the GPU's UUID), whole-GPU pods avoid MIG GPUs, and a restarted
// scheduler adopts the instances its predecessor assigned without handing one out twice.
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

TEST(SchedulerSlicesTest, MigRequestsGetDistinctConcreteInstances) {
  auto core = Core();
  core->UpsertNode(MigNodeJson("m", kLayouts));
  for (int i = 0; i < 5; ++i) core->UpsertPod(PodJson("mig" + std::to_string(i), kMig1g));
  core->UpsertPod(PodJson("whole0", {{"nvidia.com/gpu", "1"}}));
  core->UpsertPod(PodJson("whole1", {{"nvidia.com/gpu", "1"}}));
  const CycleOutput out = core->Cycle(1);
  const auto a = Assignments(out);
  std::set<std::string> instances;
  int mig_bound = 0;
  for (int i = 0; i < 5; ++i) {
    auto it = a.find("mig" + std::to_string(i));
    if (it == a.end()) continue;
    ++mig_bound;
    EXPECT_EQ(it->second.kind, AssignmentKind::kMig);
    EXPECT_EQ(it->second.gpus, std::vector<int>{0});
    EXPECT_EQ(it->second.uuids, std::vector<std::string>{"GPU-m-0"});
    EXPECT_EQ(it->second.mig_instance.rfind("1g.10gb@", 0), 0u) << it->second.mig_instance;
    EXPECT_TRUE(instances.insert(it->second.mig_instance).second)
        << it->second.mig_instance << " assigned twice";
  }
  EXPECT_EQ(mig_bound, 4);  // four 1g.10gb instances; the 3g.40gb is not a 1g.10gb
  EXPECT_EQ(instances, (std::set<std::string>{"1g.10gb@0", "1g.10gb@1", "1g.10gb@2", "1g.10gb@3"}));
  // The whole-GPU pod gets GPU 1, never the MIG-enabled GPU 0; the second one waits.
  ASSERT_EQ(a.count("whole0") + a.count("whole1"), 1u);
  const Assignment& w = a.count("whole0") ? a.at("whole0") : a.at("whole1");
  EXPECT_EQ(w.kind, AssignmentKind::kExclusive);
  EXPECT_EQ(w.gpus, std::vector<int>{1});
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
  // The fifth MIG pod waits for a re-layout of GPU 0 that turns the free 3g.40gb into 1g.10gb
  // instances; the busy 1g.10gb instances stay.
  std::string waiting;
  for (int i = 0; i < 5; ++i)
    if (!a.count("mig" + std::to_string(i))) waiting = Notice(out, "mig" + std::to_string(i));
  EXPECT_NE(waiting.find("re-lay out GPU 0"), std::string::npos) << waiting;
  ASSERT_EQ(out.layouts.size(), 1u);
  EXPECT_EQ(out.layouts[0].gpu, 0);
  for (const char* kept : {"1g.10gb@0", "1g.10gb@1", "1g.10gb@2", "1g.10gb@3"})
    EXPECT_NE(out.layouts[0].layout.find(kept), std::string::npos) << out.layouts[0].layout;
  EXPECT_EQ(out.layouts[0].layout.find("3g.40gb"), std::string::npos) << out.layouts[0].layout;
}

TEST(SchedulerSlicesTest, StrictIsolationSharesAreSizedToAMigInstance) {
  auto core = Core();
  core->UpsertNode(MigNodeJson("m", kLayouts));
  core->UpsertPod(
      PodJson("strict", {{"tessera.io/gpu-memory", "30Gi"}}, {{"tessera.io/isolation", "strict"}}));
  core->UpsertPod(
      PodJson("small", {{"tessera.io/gpu-memory", "8Gi"}}, {{"tessera.io/isolation", "strict"}}));
  const auto a = Assignments(core->Cycle(1));
  ASSERT_EQ(a.count("strict"), 1u);
  EXPECT_EQ(a.at("strict").kind, AssignmentKind::kMig);
  EXPECT_EQ(a.at("strict").mig_instance, "3g.40gb@4");  // 30 GiB: only the 40 GB instance
  ASSERT_EQ(a.count("small"), 1u);
  EXPECT_EQ(a.at("small").kind, AssignmentKind::kMig);
  EXPECT_EQ(a.at("small").mig_instance.rfind("1g.10gb@", 0), 0u) << a.at("small").mig_instance;
}

TEST(SchedulerSlicesTest, StandardSharesBecomeMpsClientsWithTheirLimits) {
  auto core = Core();
  core->UpsertNode(MigNodeJson("m", {"", ""}));
  core->UpsertPod(PodJson("mem", {{"tessera.io/gpu-memory", "12Gi"}}));
  core->UpsertPod(PodJson("cmp", {{"tessera.io/gpu-compute", "30"}}));
  core->UpsertPod(
      PodJson("both", {{"tessera.io/gpu-memory", "20Gi"}, {"tessera.io/gpu-compute", "40"}}));
  const auto a = Assignments(core->Cycle(1));
  ASSERT_EQ(a.size(), 3u);
  std::set<int> gpus;
  for (const auto& [name, as] : a) {
    EXPECT_EQ(as.kind, AssignmentKind::kMps) << name;
    ASSERT_EQ(as.gpus.size(), 1u) << name;
    ASSERT_EQ(as.uuids.size(), 1u) << name;
    gpus.insert(as.gpus[0]);
  }
  EXPECT_EQ(gpus.size(), 1u) << "MPS clients share one GPU before opening another";
  EXPECT_GE(a.at("mem").memory_limit_mib, 12 * 1024);
  EXPECT_GE(a.at("cmp").mps_thread_pct, 30);
  EXPECT_GE(a.at("both").mps_thread_pct, 40);
  EXPECT_GE(a.at("both").memory_limit_mib, 20 * 1024);
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
  const GpuSlices& g = core->cluster().gpu(0, *gpus.begin());
  EXPECT_EQ(g.mode, GpuMode::kMps);
  EXPECT_EQ(g.clients, 3);
  // A whole-GPU pod cannot take the MPS GPU.
  core->UpsertPod(PodJson("whole", {{"nvidia.com/gpu", "1"}}));
  const auto b = Assignments(core->Cycle(2));
  ASSERT_EQ(b.count("whole"), 1u);
  EXPECT_NE(b.at("whole").gpus, std::vector<int>{*gpus.begin()});
}

TEST(SchedulerSlicesTest, MpsLimitsStayWithinTheMemoryTheNodeReports) {
  // The inventory reports 81,559 MiB (NVML's total), below the catalog's 80 GiB: five 16 GiB
  // clients (81,920 MiB) do not fit on the one GPU, four do.
  auto core = Core();
  core->UpsertNode(kubetest::GpuNodeJson("a", 1));
  for (int i = 0; i < 5; ++i)
    core->UpsertPod(PodJson("p" + std::to_string(i), {{"tessera.io/gpu-memory", "16Gi"}}));
  const auto a = Assignments(core->Cycle(1));
  EXPECT_EQ(a.size(), 4u);
  EXPECT_EQ(core->cluster().gpu(0, 0).memory_mib, 81559);
  int64_t limits = 0;
  for (const auto& [name, as] : a) limits += as.memory_limit_mib;
  EXPECT_LE(limits, 81559);
}

TEST(SchedulerSlicesTest, SharesStayMilliSharesWhenSelectionIsOff) {
  auto core = Core(true, /*select_shares=*/false);
  core->UpsertNode(MigNodeJson("m", {"", ""}));
  core->UpsertPod(PodJson("mem", {{"tessera.io/gpu-memory", "12Gi"}}));
  core->UpsertPod(
      PodJson("strict", {{"tessera.io/gpu-memory", "12Gi"}}, {{"tessera.io/isolation", "strict"}}));
  const CycleOutput out = core->Cycle(1);
  auto a = Assignments(out);
  ASSERT_EQ(a.count("mem"), 1u);
  EXPECT_EQ(a.at("mem").kind, AssignmentKind::kShare);
  EXPECT_GT(a.at("mem").gpu_milli, 0);
  // Strict isolation is a slice either way. The only slice in place is the idle GPU left
  // whole, so the cycle carves a MIG instance instead (the rule the sharing simulation uses),
  // and the pod is placed nowhere until the node reports the layout applied.
  EXPECT_EQ(a.count("strict"), 0u);
  ASSERT_EQ(out.layouts.size(), 1u);
  EXPECT_NE(out.layouts[0].layout.find("1g.20gb"), std::string::npos) << out.layouts[0].layout;
  EXPECT_NE(core->WhyPending("ml/strict").find("re-lay out GPU"), std::string::npos)
      << core->WhyPending("ml/strict");
  EXPECT_EQ(Assignments(core->Cycle(2)).count("strict"), 0u);
  ASSERT_TRUE(core->LayoutReported("m", out.layouts[0].gpu, out.layouts[0].revision, true, ""));
  a = Assignments(core->Cycle(3));
  ASSERT_EQ(a.count("strict"), 1u);
  EXPECT_EQ(a.at("strict").kind, AssignmentKind::kMig);
  EXPECT_EQ(a.at("strict").mig_instance.rfind("1g.20gb@", 0), 0u) << a.at("strict").mig_instance;
}

TEST(SchedulerSlicesTest, AStrictShareTakesAWholeIdleGpuWhenReLayoutIsOff) {
  auto core = Core(/*relayout=*/false, /*select_shares=*/false);
  core->UpsertNode(MigNodeJson("m", {"", ""}));
  core->UpsertPod(
      PodJson("strict", {{"tessera.io/gpu-memory", "12Gi"}}, {{"tessera.io/isolation", "strict"}}));
  const CycleOutput out = core->Cycle(1);
  const auto a = Assignments(out);
  ASSERT_EQ(a.count("strict"), 1u);
  EXPECT_EQ(a.at("strict").kind, AssignmentKind::kExclusive);
  EXPECT_TRUE(out.layouts.empty());
}

// A node without the agent's inventory (GPU Feature Discovery labels only) has no one to apply
// a layout: a strict share gets the idle GPU whole there, and no layout action is written.
TEST(SchedulerSlicesTest, ANodeWithoutTheAgentIsNeverReLaidOut) {
  auto core = Core();
  Json node = MigNodeJson("m", {""});
  node["metadata"]["annotations"] = Json::object();
  node["metadata"]["labels"] = {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}};
  core->UpsertNode(node);
  ASSERT_EQ(core->cluster().num_nodes(), 1u);
  core->UpsertPod(
      PodJson("strict", {{"tessera.io/gpu-memory", "12Gi"}}, {{"tessera.io/isolation", "strict"}}));
  const CycleOutput out = core->Cycle(1);
  EXPECT_TRUE(out.layouts.empty());
  const auto a = Assignments(out);
  ASSERT_EQ(a.count("strict"), 1u);
  EXPECT_EQ(a.at("strict").kind, AssignmentKind::kExclusive);
}

TEST(SchedulerSlicesTest, ARestartedSchedulerNeverAssignsAnInstanceTwice) {
  auto first = Core();
  first->UpsertNode(MigNodeJson("m", kLayouts));
  first->UpsertPod(PodJson("p0", kMig1g));
  first->UpsertPod(PodJson("p1", kMig1g));
  const CycleOutput out1 = first->Cycle(1);
  ASSERT_EQ(out1.binds.size(), 2u);
  std::map<std::string, std::string> ann;
  for (const auto& b : out1.binds) ann[b.name] = b.annotations.at(kAnnotationAssignment);

  auto second = Core();
  second->UpsertNode(MigNodeJson("m", kLayouts));
  for (const auto& [name, a] : ann)
    second->UpsertPod(PodJson(name, kMig1g, {{kAnnotationAssignment, a}}, "m"));
  // A pod bound by another scheduler with only a profile (no instance) holds one too.
  second->UpsertPod(PodJson("legacy", kMig1g,
                            {{kAnnotationAssignment, R"({"node":"m","kind":"mig",)"
                                                     R"("mig_instance":"1g.10gb"})"}},
                            "m"));
  for (int i = 2; i < 5; ++i) second->UpsertPod(PodJson("p" + std::to_string(i), kMig1g));
  const CycleOutput out2 = second->Cycle(2);
  const auto a2 = Assignments(out2);
  EXPECT_EQ(second->stats().adopted, 3);
  std::set<std::string> held;
  for (const auto& [name, a] : ann) held.insert(DecodeAssignment(a)->mig_instance);
  ASSERT_EQ(a2.size(), 1u);  // 4 instances: 2 adopted, 1 legacy, 1 left
  for (const auto& [name, a] : a2)
    EXPECT_EQ(held.count(a.mig_instance), 0u) << a.mig_instance << " assigned twice";
  EXPECT_TRUE(second->cluster().CheckInvariants().ok());

  // A bound pod claiming an instance already held is reported, not double-counted.
  second->UpsertPod(PodJson("intruder", kMig1g, {{kAnnotationAssignment, ann.at("p0")}}, "m"));
  const CycleOutput out3 = second->Cycle(3);
  EXPECT_NE(Notice(out3, "intruder").find("AdoptFailed"), std::string::npos)
      << Notice(out3, "intruder");
  EXPECT_TRUE(second->cluster().CheckInvariants().ok());
}

TEST(SchedulerSlicesTest, InventoryLayoutChangesReachTheLedgerUnlessTheyDestroyBusyInstances) {
  auto core = Core(/*relayout=*/false);
  core->UpsertNode(MigNodeJson("m", {"", ""}));
  core->UpsertPod(PodJson("mig", kMig1g));
  EXPECT_TRUE(core->Cycle(1).binds.empty());  // no MIG GPU yet
  core->UpsertNode(MigNodeJson("m", kLayouts));
  const auto a = Assignments(core->Cycle(2));
  ASSERT_EQ(a.count("mig"), 1u);
  EXPECT_TRUE(core->cluster().gpu(0, 0).mig_enabled());
  // The node now reports MIG off on GPU 0 while the pod still holds an instance: the ledger keeps
  // the layout.
  core->UpsertNode(MigNodeJson("m", {"", ""}));
  EXPECT_TRUE(core->cluster().gpu(0, 0).mig_enabled());
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
}

int64_t LayoutConflicts(const SchedulerCore& core) {
  const std::string m = core.Metrics(0);
  const std::string name = "\ntessera_mig_layout_conflicts ";
  const size_t at = m.find(name);
  return at == std::string::npos ? -1 : std::stoll(m.substr(at + name.size()));
}

// A restarted scheduler may read a node report that does not show an instance a bound pod
// holds (the report lags, or is wrong). The pod's assignment wins while it runs: its GPU is
// not handed out again, and the report takes over once the pod is gone.
// The assignment a first scheduler writes for pod p0 asking one 1g.10gb on node m (kLayouts):
// instance 1g.10gb@0 of GPU 0.
std::string FirstMigAssignment() {
  auto first = Core();
  first->UpsertNode(MigNodeJson("m", kLayouts));
  first->UpsertPod(PodJson("p0", kMig1g));
  const CycleOutput out = first->Cycle(1);
  if (out.binds.size() != 1) return "";
  return out.binds[0].annotations.at(kAnnotationAssignment);
}

TEST(SchedulerSlicesTest, ABoundPodKeepsItsInstanceWhenTheReportOmitsIt) {
  const std::string a0 = FirstMigAssignment();
  ASSERT_TRUE(DecodeAssignment(a0).ok()) << "no bind";
  ASSERT_EQ(DecodeAssignment(a0)->mig_instance, "1g.10gb@0");

  auto second = Core(/*relayout=*/false);
  second->UpsertNode(MigNodeJson("m", {"", ""}));  // MIG off on both GPUs
  const Json p0 = PodJson("p0", kMig1g, {{kAnnotationAssignment, a0}}, "m");
  second->UpsertPod(p0);
  for (const char* w : {"w0", "w1"}) second->UpsertPod(PodJson(w, {{"nvidia.com/gpu", "1"}}));
  second->UpsertPod(PodJson("m1", {{"nvidia.com/mig-3g.40gb", "1"}}));
  const CycleOutput out2 = second->Cycle(2);
  EXPECT_EQ(second->stats().adopted, 1);
  EXPECT_EQ(second->stats().adopt_failures, 0);
  EXPECT_EQ(Notice(out2, "p0")
                .rfind("SliceMissing: this pod holds MIG instance 1g.10gb@0 on GPU "
                       "0 of node m, which the node's report does not show",
                       0),
            0u)
      << Notice(out2, "p0");
  EXPECT_EQ(Notice(second->Cycle(2.5), "p0"), "");  // told once
  const auto a2 = Assignments(out2);
  // One whole GPU is left (GPU 1); GPU 0 holds p0's instance, and the free room beside it is
  // not known to exist on the node, so nothing else gets it.
  ASSERT_EQ(a2.size(), 1u) << out2.binds[0].name;
  EXPECT_EQ(a2.begin()->second.gpus, std::vector<int>{1});
  EXPECT_EQ(a2.begin()->second.kind, AssignmentKind::kExclusive);
  EXPECT_TRUE(second->cluster().gpu(0, 0).mig_enabled());
  EXPECT_EQ(LayoutConflicts(*second), 1);
  EXPECT_TRUE(second->cluster().CheckInvariants().ok());

  // The report catches up: the ledger takes its layout (which holds p0's instance) and the
  // 3g.40gb it shows goes to the waiting pod.
  second->UpsertNode(MigNodeJson("m", kLayouts));
  const auto a3 = Assignments(second->Cycle(3));
  ASSERT_EQ(a3.count("m1"), 1u);
  EXPECT_EQ(a3.at("m1").mig_instance, "3g.40gb@4");
  EXPECT_EQ(LayoutConflicts(*second), 0);

  // A report that stays wrong: once p0 is gone, the ledger follows the report.
  auto third = Core(/*relayout=*/false);
  third->UpsertNode(MigNodeJson("m", {"", ""}));
  third->UpsertPod(p0);
  third->Cycle(4);
  EXPECT_TRUE(third->cluster().gpu(0, 0).mig_enabled());
  third->DeletePod(p0);
  third->UpsertPod(PodJson("w2", {{"nvidia.com/gpu", "2"}}));
  const auto a5 = Assignments(third->Cycle(5));
  ASSERT_EQ(a5.count("w2"), 1u);
  EXPECT_EQ(a5.at("w2").gpus, (std::vector<int>{0, 1}));
  EXPECT_FALSE(third->cluster().gpu(0, 0).mig_enabled());
  EXPECT_EQ(LayoutConflicts(*third), 0);
}

// A bound pod whose named GPU is held by another pod is reported once, and adopted once the
// other pod is gone.
TEST(SchedulerSlicesTest, AnAdoptionThatFailsIsReportedOnceAndRetried) {
  auto core = Core(/*relayout=*/false);
  core->UpsertNode(MigNodeJson("m", {"", ""}));
  const std::string gpu0 = R"({"node":"m","kind":"exclusive","gpus":[0],"uuids":["GPU-m-0"]})";
  const Json a = PodJson("a", {{"nvidia.com/gpu", "1"}}, {{kAnnotationAssignment, gpu0}}, "m");
  const Json b = PodJson("b", {{"nvidia.com/gpu", "1"}}, {{kAnnotationAssignment, gpu0}}, "m");
  core->UpsertPod(a);
  core->UpsertPod(b);
  const CycleOutput out1 = core->Cycle(1);
  EXPECT_NE(Notice(out1, "b").find("AdoptFailed"), std::string::npos) << Notice(out1, "b");
  EXPECT_EQ(Notice(core->Cycle(2), "b"), "");
  EXPECT_EQ(core->stats().adopt_failures, 1);
  EXPECT_EQ(core->stats().adopted, 1);
  core->DeletePod(a);
  core->Cycle(3);
  EXPECT_EQ(core->stats().adopted, 2);
  core->UpsertPod(PodJson("c", {{"nvidia.com/gpu", "1"}}));
  const auto got = Assignments(core->Cycle(4));
  ASSERT_EQ(got.count("c"), 1u);
  EXPECT_EQ(got.at("c").gpus, std::vector<int>{1});  // GPU 0 is b's
}

// An adoption that fails changes nothing in the ledger, not even the layout the pod's
// assignment needs, and is tried again only once something on its node changed.
TEST(SchedulerSlicesTest, AFailedAdoptionLeavesTheLedgerAsItWasUntilTheNodeChanges) {
  auto core = Core(/*relayout=*/false);
  core->UpsertNode(MigNodeJson("m", {kLayouts[0], ""}));  // MIG on GPU 0, off on GPU 1
  const std::string gpu1 = R"({"node":"m","kind":"exclusive","gpus":[1],"uuids":["GPU-m-1"]})";
  const std::string both =
      R"({"node":"m","kind":"exclusive","gpus":[0,1],"uuids":["GPU-m-0","GPU-m-1"]})";
  const Json a = PodJson("a", {{"nvidia.com/gpu", "1"}}, {{kAnnotationAssignment, gpu1}}, "m");
  core->UpsertPod(a);
  ASSERT_EQ(core->stats().adopted, 1);
  // b names GPU 0 with MIG off, which the ledger could give it, and GPU 1, which a holds.
  core->UpsertPod(PodJson("b", {{"nvidia.com/gpu", "2"}}, {{kAnnotationAssignment, both}}, "m"));
  EXPECT_EQ(core->stats().adopted, 1);
  EXPECT_TRUE(core->cluster().gpu(0, 0).mig_enabled());  // as the report says
  EXPECT_EQ(LayoutConflicts(*core), 0);
  const uint64_t stamp = core->cluster().free(0).stamp;
  const CycleOutput c1 = core->Cycle(1);
  EXPECT_NE(Notice(c1, "b").find("AdoptFailed"), std::string::npos) << Notice(c1, "b");
  for (double t : {2.0, 3.0, 4.0}) {
    EXPECT_EQ(Notice(core->Cycle(t), "b"), "");
    EXPECT_EQ(core->cluster().free(0).stamp, stamp) << "the ledger's node changed at " << t;
  }
  EXPECT_EQ(core->stats().adopt_failures, 1);

  // GPU 1 is free again: b is adopted on both GPUs, and told the report shows MIG on GPU 0.
  core->DeletePod(a);
  const CycleOutput c5 = core->Cycle(5);
  EXPECT_NE(Notice(c5, "b").find("SliceMissing"), std::string::npos) << Notice(c5, "b");
  EXPECT_EQ(core->stats().adopted, 2);
  EXPECT_FALSE(core->cluster().gpu(0, 0).mig_enabled());
  EXPECT_EQ(LayoutConflicts(*core), 1);
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
}

// Running work is adopted even where its node's CPU is already taken in the ledger (the node's
// allocatable shrank, or another pod asks for more than it has): its GPUs are held, nothing new
// goes to the node, and it is told once.
TEST(SchedulerSlicesTest, ABoundPodBeyondItsNodesFreeCpuIsAdoptedWithItsGpus) {
  auto core = Core(/*relayout=*/false);
  core->UpsertNode(MigNodeJson("m", {"", ""}));
  Json hog = PodJson("hog", Json::object(), Json::object(), "m");
  hog["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "64";  // all of the node's CPU
  core->UpsertPod(hog);
  const std::string gpu0 = R"({"node":"m","kind":"exclusive","gpus":[0],"uuids":["GPU-m-0"]})";
  core->UpsertPod(PodJson("g", {{"nvidia.com/gpu", "1"}}, {{kAnnotationAssignment, gpu0}}, "m"));
  core->UpsertPod(PodJson("w", {{"nvidia.com/gpu", "1"}}));
  const CycleOutput c1 = core->Cycle(1);
  EXPECT_EQ(core->stats().adopted, 2);
  EXPECT_EQ(core->stats().adopt_failures, 0);
  EXPECT_EQ(Notice(c1, "g").rfind("NodeOvercommitted: this pod runs on node m beyond what the "
                                  "scheduler counts free there (1 CPU asked, 0 free)",
                                  0),
            0u)
      << Notice(c1, "g");
  EXPECT_FALSE(core->cluster().gpu(0, 0).Idle());
  EXPECT_EQ(core->cluster().free(0).cpu, 0);
  EXPECT_TRUE(c1.binds.empty());  // no CPU for w
  EXPECT_EQ(Gauge(*core, "tessera_overcommitted_pods"), 1);
  EXPECT_EQ(Notice(core->Cycle(2), "g"), "");  // told once

  // Once the hog is gone, w gets the GPU g does not hold, and the node's CPU comes back exactly.
  core->DeletePod(hog);
  const auto a3 = Assignments(core->Cycle(3));
  ASSERT_EQ(a3.count("w"), 1u);
  EXPECT_EQ(a3.at("w").gpus, std::vector<int>{1});
  EXPECT_EQ(Gauge(*core, "tessera_overcommitted_pods"), 1);  // g still holds only what was free
  core->DeletePod(PodJson("g", {{"nvidia.com/gpu", "1"}}, Json::object(), "m"));
  EXPECT_EQ(Gauge(*core, "tessera_overcommitted_pods"), 0);
  EXPECT_EQ(core->cluster().free(0).cpu, 63000);  // w's 1 CPU
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
}

// An over-committed node takes a pod only once what its pods ask leaves room, as the kubelet
// counts: a pod that ran beyond it keeps counting its full request after others leave.
TEST(SchedulerSlicesTest, AnOverCommittedNodeCountsEveryPodsFullRequest) {
  auto core = Core(/*relayout=*/false);
  Json node = MigNodeJson("m", {"", "", ""});
  node["status"]["allocatable"]["cpu"] = "5";
  core->UpsertNode(node);
  for (int i = 0; i < 2; ++i) {
    const std::string name = "run" + std::to_string(i);
    Json p = PodJson(
        name, {{"nvidia.com/gpu", "1"}},
        {{kAnnotationAssignment, R"({"node":"m","kind":"exclusive","gpus":[)" + std::to_string(i) +
                                     R"(],"uuids":["GPU-m-)" + std::to_string(i) + R"("]})"}},
        "m");
    p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3";
    core->UpsertPod(p);
  }
  Json late = PodJson("late", {{"nvidia.com/gpu", "1"}});
  late["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3";
  core->UpsertPod(late);
  EXPECT_TRUE(core->Cycle(1).binds.empty());
  EXPECT_EQ(core->stats().adopted, 2);
  EXPECT_EQ(core->cluster().cpu_balance(0), -1000);
  EXPECT_EQ(Gauge(*core, "tessera_overcommitted_nodes"), 1);
  // run0 leaves: 5 - 3 = 2 CPUs are free, not the 3 late asks (run1 still asks 3).
  core->DeletePod(PodJson("run0", {{"nvidia.com/gpu", "1"}}, Json::object(), "m"));
  EXPECT_TRUE(core->Cycle(2).binds.empty());
  EXPECT_EQ(core->cluster().free(0).cpu, 2000);
  EXPECT_EQ(Gauge(*core, "tessera_overcommitted_nodes"), 0);
  // The node's allocatable grows: late fits, on the GPU run1 does not hold.
  node["status"]["allocatable"]["cpu"] = "8";
  core->UpsertNode(node);
  const auto a = Assignments(core->Cycle(3));
  ASSERT_EQ(a.count("late"), 1u);
  EXPECT_NE(a.at("late").gpus, std::vector<int>{1});
  EXPECT_EQ(core->cluster().free(0).cpu, 2000);
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
}

// A node's allocatable CPU and memory are followed while the scheduler runs: shrunk below what
// its pods ask, the node takes no new pod and counts as over-committed; grown back, it does.
TEST(SchedulerSlicesTest, ANodesAllocatableIsFollowed) {
  auto core = Core(/*relayout=*/false);
  Json node = MigNodeJson("m", {"", ""});
  core->UpsertNode(node);
  core->UpsertPod(PodJson("a", {{"nvidia.com/gpu", "1"}}));
  const CycleOutput first = core->Cycle(1);
  ASSERT_EQ(first.binds.size(), 1u);
  core->UpsertPod(
      PodJson("a", {{"nvidia.com/gpu", "1"}}, first.binds[0].annotations, first.binds[0].node));
  node["status"]["allocatable"]["memory"] = "512Mi";  // a asks 1Gi
  core->UpsertNode(node);
  EXPECT_EQ(core->cluster().memory_balance(0), -512);
  EXPECT_EQ(core->cluster().spec(0).memory.v, 512);
  EXPECT_EQ(Gauge(*core, "tessera_overcommitted_nodes"), 1);
  core->UpsertPod(PodJson("b", {{"nvidia.com/gpu", "1"}}));
  EXPECT_TRUE(core->Cycle(2).binds.empty());
  node["status"]["allocatable"]["memory"] = "512Gi";
  core->UpsertNode(node);
  EXPECT_EQ(Gauge(*core, "tessera_overcommitted_nodes"), 0);
  const auto a = Assignments(core->Cycle(3));
  ASSERT_EQ(a.count("b"), 1u);
  EXPECT_EQ(core->cluster().free(0).memory, 510 * 1024);
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
}

// A GPU the node's inventory reports unhealthy takes no new pod; a pod bound there before is
// still adopted with it. Reported healthy again, the GPU takes pods.
TEST(SchedulerSlicesTest, AnUnhealthyGpuTakesNoNewPod) {
  auto core = Core(/*relayout=*/false);
  auto node = [](bool healthy0) {
    Json n = MigNodeJson("m", {"", "", ""});
    std::vector<GpuInventoryEntry> inv;
    for (int g = 0; g < 3; ++g)
      inv.push_back(
          {g, "GPU-m-" + std::to_string(g), "A100-80GB", 81920, false, "", g != 0 || healthy0});
    n["metadata"]["annotations"][kAnnotationInventory] = EncodeInventory(inv);
    return n;
  };

  core->UpsertNode(node(false));
  core->UpsertPod(BoundWholePod("old", "m", {1}));
  core->UpsertPod(PodJson("a", {{"nvidia.com/gpu", "1"}}));
  const auto first = Assignments(core->Cycle(1));
  EXPECT_EQ(core->stats().adopted, 1);
  ASSERT_EQ(first.count("a"), 1u);
  EXPECT_EQ(first.at("a").gpus, std::vector<int>{2});
  core->UpsertPod(BoundWholePod("a", "m", {2}));
  core->UpsertPod(PodJson("b", {{"tessera.io/gpu-memory", "10Gi"}}));
  EXPECT_TRUE(Assignments(core->Cycle(2)).empty());  // GPUs 1 and 2 are whole, 0 is unhealthy
  EXPECT_TRUE(core->cluster().gpu(0, 0).Idle());
  // A bound pod that names the unhealthy GPU is adopted with it.
  core->UpsertPod(BoundWholePod("older", "m", {0}));
  core->Cycle(3);
  EXPECT_EQ(core->stats().adopted, 2);
  EXPECT_FALSE(core->cluster().gpu(0, 0).Idle());
  core->DeletePod(BoundWholePod("older", "m", {0}));
  EXPECT_TRUE(Assignments(core->Cycle(4)).empty());
  core->UpsertNode(node(true));
  const auto healed = Assignments(core->Cycle(5));
  ASSERT_EQ(healed.count("b"), 1u);
  EXPECT_EQ(healed.at("b").gpus, std::vector<int>{0});
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
}

// A bound pod of a queue that no longer has a flavor for its node's GPU model (the queues were
// changed before a restart) still holds its GPUs: it is counted outside every queue.
TEST(SchedulerSlicesTest, ABoundPodWhoseQueueLostItsFlavorIsAdoptedOutsideTheQueue) {
  SchedulerConfig cfg;
  cfg.gang_settle_s = 0;
  QueueSpec q;
  q.name = "default";
  FlavorQuota t4;
  t4.name = "t4";
  t4.models = ModelMask{1} << *GpuCatalog::Builtin().Find("T4");
  t4.nominal = {8000, 64000, 512 * 1024};
  q.flavors = {t4};
  cfg.queues = {q};
  auto made = SchedulerCore::Create(cfg);
  ASSERT_TRUE(made.ok()) << made.status().message();
  SchedulerCore& core = **made;
  core.UpsertNode(MigNodeJson("m", {"", ""}));
  const std::string gpu0 = R"({"node":"m","kind":"exclusive","gpus":[0],"uuids":["GPU-m-0"]})";
  core.UpsertPod(PodJson("g", {{"nvidia.com/gpu", "1"}}, {{kAnnotationAssignment, gpu0}}, "m"));
  const CycleOutput c1 = core.Cycle(1);
  EXPECT_EQ(core.stats().adopted, 1);
  EXPECT_EQ(
      Notice(c1, "g").rfind("OutsideQueue: queue default has no flavor for A100-80GB GPUs", 0), 0u)
      << Notice(c1, "g");
  EXPECT_FALSE(core.cluster().gpu(0, 0).Idle());
  EXPECT_EQ(Gauge(core, "tessera_pods_outside_queue"), 1);
  int64_t queue_gpu = -1;
  for (const QueueStatus& st : core.admission().Queues())
    if (st.name == "default") queue_gpu = st.usage.gpu;
  EXPECT_EQ(queue_gpu, 0);
}

// An instance the node's report drops while its pod runs stays in the ledger until the pod
// goes, then the ledger follows the report: the instance is not handed out again.
TEST(SchedulerSlicesTest, AnInstanceTheReportDroppedIsGoneOnceItsPodIs) {
  auto core = Core(/*relayout=*/false);
  core->UpsertNode(MigNodeJson("m", kLayouts));
  core->UpsertPod(PodJson("p0", kMig1g));
  const CycleOutput out1 = core->Cycle(1);
  ASSERT_EQ(out1.binds.size(), 1u);
  const Json bound =
      PodJson("p0", kMig1g,
              {{kAnnotationAssignment, out1.binds[0].annotations.at(kAnnotationAssignment)}}, "m");
  core->UpsertPod(bound);
  core->UpsertNode(MigNodeJson("m", {"", ""}));
  const CycleOutput out2 = core->Cycle(2);
  EXPECT_NE(Notice(out2, "p0").find("SliceMissing: this pod holds MIG instance 1g.10gb@0"),
            std::string::npos)
      << Notice(out2, "p0");
  EXPECT_EQ(Notice(core->Cycle(2.5), "p0"), "");  // told once
  EXPECT_TRUE(core->cluster().gpu(0, 0).mig_enabled());
  EXPECT_EQ(LayoutConflicts(*core), 1);
  core->DeletePod(bound);
  core->UpsertPod(PodJson("p1", kMig1g));
  const CycleOutput out3 = core->Cycle(3);
  EXPECT_TRUE(out3.binds.empty());  // no MIG GPU on the node any more
  EXPECT_FALSE(core->cluster().gpu(0, 0).mig_enabled());
  EXPECT_EQ(LayoutConflicts(*core), 0);
}

// A pod no instance and no re-layout can serve is told what the layouts hold and why no GPU
// can be re-laid out.
TEST(SchedulerSlicesTest, WaitingReasonsNameTheProfileAndTheBlockedReLayouts) {
  auto core = Core();
  core->UpsertNode(MigNodeJson(
      "m", {"1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6", ""}));
  for (int i = 0; i < 7; ++i) core->UpsertPod(PodJson("mig" + std::to_string(i), kMig1g));
  core->UpsertPod(PodJson("whole", {{"nvidia.com/gpu", "1"}}));
  ASSERT_EQ(core->Cycle(1).binds.size(), 8u);
  core->UpsertPod(PodJson("late", kMig1g));
  const CycleOutput out = core->Cycle(2);
  EXPECT_TRUE(out.binds.empty());
  EXPECT_TRUE(out.layouts.empty());
  const std::string n = Notice(out, "late");
  EXPECT_NE(n.find("no free 1g.10gb on A100-80GB nodes: 7 such instances in the layouts of 1 "
                   "MIG-enabled GPUs, 7 in use"),
            std::string::npos)
      << n;
  EXPECT_NE(n.find("no MIG re-layout can help: 1 MIG-enabled GPUs could be re-laid out but hold "
                   "running instances in the way, 1 GPUs without MIG are in use"),
            std::string::npos)
      << n;
}

}  // namespace
}  // namespace tessera::kube
