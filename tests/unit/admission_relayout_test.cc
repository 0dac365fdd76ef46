// Admission with a layout planner: a single-pod slice job whose only slice in place is a whole
// GPU waits for a MIG re-layout instead (the rule of MigPlanner::PlanBetterThan), the cycle
// lists it once per GPU, and frozen GPUs are never proposed.
#include <gtest/gtest.h>

#include "admission/admission.h"
#include "policies/builtin.h"

namespace tessera {
namespace {

ClusterState TwoGpuH100() {
  ClusterState c;
  NodeSpec s;
  s.name = "n0";
  s.cpu = MilliCpu(64000);
  s.memory = MiB(512 * 1024);
  s.gpu_count = 2;
  s.model = *GpuCatalog::Builtin().Find("H100-80GB");
  EXPECT_TRUE(c.AddNode(s).ok());
  return c;
}

JobSpec StrictShare(WorkloadId id) {
  JobSpec j;
  j.id = id;
  j.name = "job-" + std::to_string(id);
  j.queue = "team";
  j.pod.cpu = MilliCpu(1000);
  j.pod.memory = MiB(1024);
  j.pod.num_gpu = 1;
  j.pod.gpu_milli = 100;
  SliceDemand d;
  d.memory_mib = 8 * 1024;
  d.isolation = Isolation::kStrict;
  d.cpu = MilliCpu(1000);
  d.host_memory = MiB(1024);
  j.slice = d;
  return j;
}

std::unique_ptr<Admission> Make() {
  QueueSpec q;
  q.name = "team";
  FlavorQuota f;
  f.name = "gpu";
  f.nominal = {100 * 1000, 1000 * 1000, int64_t{1} << 40};
  q.flavors = {f};
  auto adm = Admission::Create({q}, {}, MakeBestFitScorer(), 1);
  EXPECT_TRUE(adm.ok()) << adm.status().message();
  return std::move(*adm);
}

TEST(AdmissionRelayoutTest, WithoutAPlannerAStrictShareTakesAWholeGpu) {
  auto adm = Make();
  ClusterState c = TwoGpuH100();
  ASSERT_TRUE(adm->Submit(StrictShare(1)).ok());
  auto res = adm->RunCycle(c, 0);
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE(res->relayouts.empty());
  ASSERT_EQ(adm->state(1), JobState::kRunning);
  EXPECT_EQ(adm->Slices(1).at(0).kind, SliceKind::kExclusive);
}

TEST(AdmissionRelayoutTest, AStrictShareWaitsForAReLayoutOncePerGpuAndThenRunsOnIt) {
  auto adm = Make();
  MigPlanner planner;
  adm->SetLayoutPlanner(&planner);
  ClusterState c = TwoGpuH100();
  for (WorkloadId id : {1, 2, 3}) ASSERT_TRUE(adm->Submit(StrictShare(id)).ok());
  auto res = adm->RunCycle(c, 0);
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE(res->admitted.empty());
  EXPECT_TRUE(res->preempted.empty());
  EXPECT_EQ(c.num_allocations(), 0u);
  // Two GPUs: two proposals, on different GPUs. The third job has no GPU left to re-lay out,
  // and both whole GPUs are promised to the re-layouts: it waits.
  ASSERT_EQ(res->relayouts.size(), 2u);
  EXPECT_EQ(adm->state(3), JobState::kPending);
  EXPECT_NE(res->relayouts[0].reconfig.gpu, res->relayouts[1].reconfig.gpu);
  for (const LayoutProposal& p : res->relayouts) {
    EXPECT_EQ(adm->state(p.job), JobState::kPending);
    EXPECT_NE(adm->WhyPending(p.job).find("waiting for a MIG re-layout"), std::string::npos)
        << adm->WhyPending(p.job);
    EXPECT_TRUE(p.reconfig.mig_after);
  }
  // The node applies the first layout; the next cycle places its job on the new instance.
  const LayoutProposal first = res->relayouts[0];
  ASSERT_TRUE(
      c.SetMigLayout(first.reconfig.node, first.reconfig.gpu, true, first.reconfig.after).ok());
  std::vector<GpuMask> frozen(1, GpuMask{1} << res->relayouts[1].reconfig.gpu);
  adm->SetFrozenGpus(frozen);
  res = adm->RunCycle(c, 1);
  ASSERT_TRUE(res.ok());
  ASSERT_EQ(adm->state(first.job), JobState::kRunning) << adm->WhyPending(first.job);
  EXPECT_EQ(adm->Slices(first.job).at(0).kind, SliceKind::kMig);
  EXPECT_EQ(adm->Slices(first.job).at(0).gpus, GpuMask{1} << first.reconfig.gpu);
  // The frozen GPU is proposed to no one.
  for (const LayoutProposal& p : res->relayouts)
    EXPECT_FALSE((frozen[0] >> p.reconfig.gpu) & 1) << p.reconfig.gpu;
  EXPECT_TRUE(c.CheckInvariants().ok());
}

TEST(AdmissionRelayoutTest, FrozenGpusAreNeverProposed) {
  auto adm = Make();
  MigPlanner planner;
  adm->SetLayoutPlanner(&planner);
  adm->SetFrozenGpus({GpuMask{3}});
  ClusterState c = TwoGpuH100();
  ASSERT_TRUE(adm->Submit(StrictShare(1)).ok());
  auto res = adm->RunCycle(c, 0);
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE(res->relayouts.empty());
  // No re-layout is possible, so the whole GPU in place is taken.
  ASSERT_EQ(adm->state(1), JobState::kRunning) << adm->WhyPending(1);
  EXPECT_EQ(adm->Slices(1).at(0).kind, SliceKind::kExclusive);
}

}  // namespace
}  // namespace tessera
