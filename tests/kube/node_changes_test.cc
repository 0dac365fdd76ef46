// SchedulerCore: pods already waiting follow node changes. A real API server creates every node
// with the taint node.kubernetes.io/not-ready:NoSchedule (admission plugin
// TaintNodesByCondition) and the node lifecycle controller removes it a while after the node
// turns Ready; nodes also join and get labelled while pods wait.
#include <gtest/gtest.h>

#include "kube/scheduler_core.h"
#include "tests/kube/test_objects.h"

namespace tessera::kube {
namespace {

Json NodeJson(const std::string& name, int gpus, Json taints = Json::array(),
              Json labels = Json::object()) {
  return kubetest::GpuNodeJson(name, gpus, "H100-80GB", true, std::move(taints), std::move(labels));
}

Json PodJson(const std::string& name, int gpus, Json extra_spec = Json::object(),
             Json annotations = Json::object()) {
  Json spec = {
      {"schedulerName", "tessera"},
      {"containers", Json::array({{{"name", "main"},
                                   {"resources",
                                    {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}},
                                     {"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}})}};
  for (auto& [k, v] : extra_spec.items()) spec[k] = v;
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name}, {"namespace", "ns"}, {"uid", "uid-" + name}, {"annotations", annotations}}},
      {"spec", spec},
      {"status", {{"phase", "Pending"}}}};
}

std::unique_ptr<SchedulerCore> Core() {
  SchedulerConfig cfg;
  cfg.gang_settle_s = 0;
  auto c = SchedulerCore::Create(cfg);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return std::move(c.value());
}

const Json kNotReadyTaint =
    Json::array({{{"key", "node.kubernetes.io/not-ready"}, {"effect", "NoSchedule"}}});

TEST(NodeChangesTest, WaitingPodUsesANodeOnceItsNotReadyTaintIsRemoved) {
  auto core = Core();
  core->UpsertNode(NodeJson("a", 8, kNotReadyTaint));
  core->UpsertPod(PodJson("p", 2));
  CycleOutput out = core->Cycle(1);
  EXPECT_TRUE(out.binds.empty());
  ASSERT_EQ(out.notices.size(), 1u);
  EXPECT_NE(out.notices[0].message.find("excluded"), std::string::npos) << out.notices[0].message;
  // A heartbeat that changes nothing relevant leaves it waiting.
  core->UpsertNode(NodeJson("a", 8, kNotReadyTaint));
  EXPECT_TRUE(core->Cycle(2).binds.empty());
  core->UpsertNode(NodeJson("a", 8));
  out = core->Cycle(3);
  ASSERT_EQ(out.binds.size(), 1u);
  EXPECT_EQ(out.binds[0].node, "a");
}

TEST(NodeChangesTest, WaitingGangUsesNodesThatJoinLater) {
  auto core = Core();
  core->UpsertNode(NodeJson("a", 8));
  for (int i = 0; i < 4; ++i)
    core->UpsertPod(PodJson("g-" + std::to_string(i), 4, Json::object(),
                            {{"tessera.io/gang", "g"}, {"tessera.io/min-member", "4"}}));
  EXPECT_TRUE(core->Cycle(1).binds.empty());  // 16 GPUs asked, 8 exist
  core->UpsertNode(NodeJson("b", 8));
  const CycleOutput out = core->Cycle(2);
  ASSERT_EQ(out.binds.size(), 4u);
  int on_b = 0;
  for (const auto& b : out.binds) on_b += b.node == "b";
  EXPECT_EQ(on_b, 2);
}

TEST(NodeChangesTest, WaitingPodSeesANewNodeLabel) {
  auto core = Core();
  core->UpsertNode(NodeJson("a", 8));
  core->UpsertPod(PodJson("p", 1, {{"nodeSelector", {{"pool", "train"}}}}));
  EXPECT_TRUE(core->Cycle(1).binds.empty());
  core->UpsertNode(NodeJson("a", 8, Json::array(), {{"pool", "train"}}));
  const CycleOutput out = core->Cycle(2);
  ASSERT_EQ(out.binds.size(), 1u);
  EXPECT_EQ(out.binds[0].node, "a");
}

TEST(NodeChangesTest, WaitingPodStopsConsideringANodeThatIsCordoned) {
  auto core = Core();
  core->UpsertNode(NodeJson("a", 1));
  core->UpsertNode(NodeJson("b", 4));
  core->UpsertPod(PodJson("p", 2));  // fits only b
  core->UpsertPod(PodJson("q", 4));  // would fit b too; waits behind p or takes b
  CycleOutput out = core->Cycle(1);
  ASSERT_EQ(out.binds.size(), 1u);
  const std::string waiting = out.binds[0].name == "p" ? "q" : "p";
  // Cordon b and free it: the waiting pod must not go there.
  Json cordoned = NodeJson("b", 4);
  cordoned["spec"]["unschedulable"] = true;
  core->UpsertNode(cordoned);
  core->DeletePod(PodJson(out.binds[0].name, 1));
  EXPECT_TRUE(core->Cycle(2).binds.empty()) << waiting;
}

}  // namespace
}  // namespace tessera::kube
