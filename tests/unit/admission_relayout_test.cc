// Admission with a layout planner: a single-pod slice job whose only slice in place is a whole
// GPU waits for a MIG re-layout instead (the rule of MigPlanner::PlanBetterThan); later jobs of
// the cycle whose slice lies in that new layout wait for it too, on their own instances; a
// waiting job keeps its host CPU for the rest of the cycle; once the layout is made, the job is
// tried first, on the slice it was given; frozen GPUs are never proposed.
#include <gtest/gtest.h>

#include <set>

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

TEST(AdmissionRelayoutTest, StrictSharesWaitForOneReLayoutTogetherAndThenRunOnIt) {
  auto adm = Make();
  MigPlanner planner;
  adm->SetLayoutPlanner(&planner);
  ClusterState c = TwoGpuH100();
  for (WorkloadId id : {1, 2, 3}) ASSERT_TRUE(adm->Submit(StrictShare(id)).ok());
  auto res = adm->RunCycle(c, 0);
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE(res->admitted.empty());
  EXPECT_TRUE(res->preempted.empty());
  // The cycle's layouts and holds are undone when it ends.
  EXPECT_EQ(c.num_allocations(), 0u);
  EXPECT_FALSE(c.gpu(0, 0).mig_enabled());
  EXPECT_FALSE(c.gpu(0, 1).mig_enabled());
  // The first job's layout has room for all three: they all wait for it, each on its own
  // instance, and the second GPU stays as it is.
  ASSERT_EQ(res->relayouts.size(), 3u);
  const MigReconfig r = res->relayouts[0].reconfig;
  EXPECT_TRUE(r.mig_after);
  std::set<int> starts;
  for (const LayoutProposal& p : res->relayouts) {
    EXPECT_EQ(adm->state(p.job), JobState::kPending);
    EXPECT_NE(adm->WhyPending(p.job).find("waiting for a MIG re-layout"), std::string::npos)
        << adm->WhyPending(p.job);
    EXPECT_EQ(p.reconfig.gpu, r.gpu);
    EXPECT_EQ(p.reconfig.after, r.after);
    ASSERT_TRUE(p.slice.has_value());
    EXPECT_EQ(p.slice->kind, SliceKind::kMig);
    EXPECT_EQ(p.slice->gpus, GpuMask{1} << r.gpu);
    starts.insert(p.slice->mig_start);
  }
  EXPECT_EQ(starts.size(), 3u);
  // The node applies the layout; the next cycle places each job on the instance it was given.
  ASSERT_TRUE(c.SetMigLayout(r.node, r.gpu, true, r.after).ok());
  for (const LayoutProposal& p : res->relayouts)
    ASSERT_TRUE(adm->SetLayoutReady(p.job, p.slice).ok());
  const std::vector<LayoutProposal> proposals = res->relayouts;
  res = adm->RunCycle(c, 1);
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE(res->relayouts.empty());
  for (const LayoutProposal& p : proposals) {
    ASSERT_EQ(adm->state(p.job), JobState::kRunning) << adm->WhyPending(p.job);
    EXPECT_EQ(adm->Slices(p.job).at(0), *p.slice);
  }
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

TEST(AdmissionRelayoutTest, AJobWaitingForAReLayoutKeepsItsHostCpuForTheRestOfTheCycle) {
  auto adm = Make();
  MigPlanner planner;
  adm->SetLayoutPlanner(&planner);
  ClusterState c = TwoGpuH100();
  JobSpec strict = StrictShare(1);
  strict.pod.cpu = strict.slice->cpu = MilliCpu(40000);
  ASSERT_TRUE(adm->Submit(strict).ok());
  // A later CPU-only job that the node could hold only with the strict job's CPU.
  JobSpec cpu_only;
  cpu_only.id = 2;
  cpu_only.name = "cpu-only";
  cpu_only.queue = "team";
  cpu_only.arrival = 1;
  cpu_only.pod.cpu = MilliCpu(30000);
  cpu_only.pod.memory = MiB(1024);
  ASSERT_TRUE(adm->Submit(cpu_only).ok());
  auto res = adm->RunCycle(c, 1);
  ASSERT_TRUE(res.ok());
  ASSERT_EQ(res->relayouts.size(), 1u);
  EXPECT_EQ(res->relayouts[0].job, 1u);
  EXPECT_EQ(adm->state(2), JobState::kPending);
  // The hold ends with the cycle: the ledger holds nothing.
  EXPECT_EQ(c.num_allocations(), 0u);
  EXPECT_EQ(c.free_cpu(0), 64000);
  EXPECT_TRUE(c.CheckInvariants().ok());
}

TEST(AdmissionRelayoutTest, AJobWhoseLayoutIsReadyIsTriedBeforeEveryOther) {
  for (const bool ready : {false, true}) {
    SCOPED_TRACE(ready ? "layout ready" : "not marked");
    auto adm = Make();
    MigPlanner planner;
    adm->SetLayoutPlanner(&planner);
    ClusterState c = TwoGpuH100();
    JobSpec waiting = StrictShare(1);
    waiting.arrival = 10;
    waiting.pod.cpu = waiting.slice->cpu = MilliCpu(40000);
    ASSERT_TRUE(adm->Submit(waiting).ok());
    auto res = adm->RunCycle(c, 10);
    ASSERT_TRUE(res.ok());
    ASSERT_EQ(res->relayouts.size(), 1u);
    const MigReconfig r = res->relayouts[0].reconfig;
    ASSERT_TRUE(c.SetMigLayout(r.node, r.gpu, true, r.after).ok());
    // A job that comes first in queue order (an earlier arrival, e.g. a pod the scheduler
    // learned of late) is submitted meanwhile; the node's CPU holds only one of the two.
    JobSpec urgent = StrictShare(2);
    urgent.arrival = 5;
    urgent.pod.cpu = urgent.slice->cpu = MilliCpu(40000);
    ASSERT_TRUE(adm->Submit(urgent).ok());
    if (ready) {
      ASSERT_TRUE(adm->SetLayoutReady(1).ok());
    }
    adm->SetFrozenGpus({GpuMask{1} << (1 - r.gpu)});
    res = adm->RunCycle(c, 11);
    ASSERT_TRUE(res.ok());
    EXPECT_EQ(adm->state(1), ready ? JobState::kRunning : JobState::kPending) << adm->WhyPending(1);
    EXPECT_EQ(adm->state(2), ready ? JobState::kPending : JobState::kRunning);
    if (ready) {
      EXPECT_EQ(adm->Slices(1).at(0).gpus, GpuMask{1} << r.gpu);
    }
  }
  auto adm = Make();
  EXPECT_FALSE(adm->SetLayoutReady(7).ok());
}

}  // namespace
}  // namespace tessera
