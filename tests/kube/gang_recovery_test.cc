// SchedulerCore: gangs whose members are partly bound already. A leader that dies while binding
// a gang leaves some members bound and the rest pending; a member whose bind fails is retried
// alone. Bound members count towards min-member, and a gang short of members says so.
#include <gtest/gtest.h>

#include <set>

#include "kube/client.h"
#include "kube/scheduler_core.h"
#include "tests/kube/test_objects.h"

namespace tessera::kube {
namespace {

using kubetest::GpuNodeJson;

Json GangPod(const std::string& name, int min_member, const std::string& node = "",
             const std::string& assignment = "") {
  Json annotations = {{"tessera.io/gang", "g"},
                      {"tessera.io/min-member", std::to_string(min_member)}};
  if (!assignment.empty()) annotations[kAnnotationAssignment] = assignment;
  Json spec = {
      {"schedulerName", "tessera"},
      {"containers", Json::array({{{"name", "main"},
                                   {"resources",
                                    {{"limits", {{"nvidia.com/gpu", "1"}}},
                                     {"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}})}};
  if (!node.empty()) spec["nodeName"] = node;
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name}, {"namespace", "ns"}, {"uid", "uid-" + name}, {"annotations", annotations}}},
      {"spec", spec},
      {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
}

std::unique_ptr<SchedulerCore> Core() {
  SchedulerConfig cfg;
  cfg.gang_settle_s = 0;
  auto c = SchedulerCore::Create(cfg);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return std::move(c.value());
}

TEST(GangRecoveryTest, GangPartlyBoundByAnEarlierLeaderIsCompleted) {
  auto core = Core();
  core->UpsertNode(GpuNodeJson("a", 4));
  core->UpsertNode(GpuNodeJson("b", 4));
  // An earlier leader bound 3 of 8 members onto a (GPUs 0..2), then died.
  for (int i = 0; i < 3; ++i) {
    Assignment a;
    a.node = "a";
    a.kind = AssignmentKind::kExclusive;
    a.gpus = {i};
    a.uuids = {"GPU-a-" + std::to_string(i)};
    core->UpsertPod(GangPod("m-" + std::to_string(i), 8, "a", EncodeAssignment(a)));
  }
  for (int i = 3; i < 8; ++i) core->UpsertPod(GangPod("m-" + std::to_string(i), 8));
  const CycleOutput out = core->Cycle(1);
  ASSERT_EQ(out.binds.size(), 5u);
  std::set<std::string> used = {"a/0", "a/1", "a/2"};
  for (const auto& b : out.binds) {
    auto a = DecodeAssignment(b.annotations.at(kAnnotationAssignment));
    ASSERT_TRUE(a.ok());
    for (int g : a->gpus)
      EXPECT_TRUE(used.insert(b.node + "/" + std::to_string(g)).second)
          << b.name << " got " << b.node << " GPU " << g << " twice";
  }
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
}

TEST(GangRecoveryTest, GangShortOfMembersSaysHowManyAreMissing) {
  auto core = Core();
  core->UpsertNode(GpuNodeJson("a", 8));
  for (int i = 0; i < 5; ++i) core->UpsertPod(GangPod("m-" + std::to_string(i), 8));
  CycleOutput out = core->Cycle(1);
  EXPECT_TRUE(out.binds.empty());
  ASSERT_EQ(out.notices.size(), 5u);
  EXPECT_EQ(out.notices[0].reason, "Unschedulable");
  EXPECT_NE(out.notices[0].message.find("gang waits for 3 more pods"), std::string::npos)
      << out.notices[0].message;
  EXPECT_TRUE(core->Cycle(2).notices.empty());  // said once
  for (int i = 5; i < 8; ++i) core->UpsertPod(GangPod("m-" + std::to_string(i), 8));
  EXPECT_EQ(core->Cycle(3).binds.size(), 8u);
}

TEST(GangRecoveryTest, MemberWhoseBindFailedIsRetried) {
  auto core = Core();
  core->UpsertNode(GpuNodeJson("a", 8));
  for (int i = 0; i < 4; ++i) core->UpsertPod(GangPod("m-" + std::to_string(i), 4));
  const CycleOutput out = core->Cycle(1);
  ASSERT_EQ(out.binds.size(), 4u);
  // Three binds land; the fourth fails for good (retries exhausted).
  for (int i = 0; i < 3; ++i) {
    const BindAction& b = out.binds[i];
    core->UpsertPod(GangPod(b.name, 4, b.node, b.annotations.at(kAnnotationAssignment)));
  }
  core->BindFailed(out.binds[3], HttpError(500, "etcdserver: request timed out"));
  const CycleOutput again = core->Cycle(2);
  ASSERT_EQ(again.binds.size(), 1u);
  EXPECT_EQ(again.binds[0].name, out.binds[3].name);
}

}  // namespace
}  // namespace tessera::kube
