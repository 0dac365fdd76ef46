// Admission charges a slice job's quota by the slice it holds (SliceMilli), not by its request:
// a MIG instance by its compute slices, an MPS client by the larger of its threads and its
// memory limit; a slice too large for the quota is undone and the job waits with the reason.
#include <gtest/gtest.h>

#include "admission/admission.h"
#include "policies/builtin.h"

namespace tessera {
namespace {

GpuModelId H100() {
  return *GpuCatalog::Builtin().Find("H100-80GB");
}

ClusterState OneNode(const char* mig_layout) {
  ClusterState c;
  NodeSpec s;
  s.name = "n0";
  s.cpu = MilliCpu(64000);
  s.memory = MiB(512 * 1024);
  s.gpu_count = 1;
  s.model = H100();
  EXPECT_TRUE(c.AddNode(s).ok());
  if (mig_layout[0] != '\0') {
    auto layout = ParseMigLayout(*MigGeometryFor(H100()), mig_layout);
    EXPECT_TRUE(layout.ok());
    EXPECT_TRUE(c.SetMigLayout(0, 0, true, *layout).ok());
  }
  return c;
}

struct ChargeCase {
  const char* name;
  const char* mig_layout;  // "" = MIG off
  SliceDemand slice;
  int64_t quota_milli;
  bool runs;
  SliceKind kind;         // when it runs
  int64_t charged_milli;  // when it runs
  const char* why;        // when it waits
};

SliceDemand Share(int64_t memory_mib, int compute_pct) {
  SliceDemand d;
  d.memory_mib = memory_mib;
  d.compute_pct = compute_pct;
  d.isolation = Isolation::kStandard;
  d.cpu = MilliCpu(1000);
  d.host_memory = MiB(1024);
  return d;
}

SliceDemand Mig(const char* profile) {
  SliceDemand d;
  d.mig_profile = profile;
  d.isolation = Isolation::kStrict;
  d.cpu = MilliCpu(1000);
  d.host_memory = MiB(1024);
  return d;
}

TEST(AdmissionSliceChargeTest, QuotaIsChargedWithTheSliceHeld) {
  const ChargeCase cases[] = {
      // 40 GiB of an 80 GiB GPU pinned: half a GPU, although the threads are 10%.
      {"MPS bound by its memory limit", "", Share(40 * 1024, 10), 1000, true, SliceKind::kMps, 500,
       ""},
      // 60% of the threads with 8 GiB: the threads are the larger share.
      {"MPS bound by its threads", "", Share(8 * 1024, 60), 1000, true, SliceKind::kMps, 600, ""},
      {"MIG 3g.40gb is 3/7 of the GPU", "3g.40gb@0 3g.40gb@4", Mig("3g.40gb"), 1000, true,
       SliceKind::kMig, 428, ""},
      {"MIG 1g.10gb is 1/7 of the GPU", "1g.10gb@0 1g.10gb@1 3g.40gb@4", Mig("1g.10gb"), 1000, true,
       SliceKind::kMig, 142, ""},
      // The estimate (100 milli) fits a 0.4 GPU quota; the 40 GiB MPS client it becomes does not.
      {"a slice above the quota waits", "", Share(40 * 1024, 10), 400, false, SliceKind::kMps, 0,
       "quota of gpu in team exhausted"},
  };
  for (const ChargeCase& tc : cases) {
    SCOPED_TRACE(tc.name);
    QueueSpec q;
    q.name = "team";
    FlavorQuota f;
    f.name = "gpu";
    f.nominal = {tc.quota_milli, 1000 * 1000, 1 << 30};
    q.flavors = {f};
    auto adm = Admission::Create({q}, {}, MakeBestFitScorer(), 1);
    ASSERT_TRUE(adm.ok()) << adm.status().message();
    ClusterState c = OneNode(tc.mig_layout);
    JobSpec j;
    j.id = 1;
    j.name = "job-1";
    j.queue = "team";
    j.pod.cpu = MilliCpu(1000);
    j.pod.memory = MiB(1024);
    j.pod.num_gpu = 1;
    j.pod.gpu_milli = 100;  // the request's estimate
    j.slice = tc.slice;
    ASSERT_TRUE((*adm)->Submit(j).ok());
    ASSERT_TRUE((*adm)->RunCycle(c, 0).ok());
    const std::vector<QueueStatus> qs = (*adm)->Queues();
    ASSERT_EQ(qs.size(), 1u);
    if (!tc.runs) {
      EXPECT_EQ((*adm)->state(1), JobState::kPending);
      EXPECT_NE((*adm)->WhyPending(1).find(tc.why), std::string::npos) << (*adm)->WhyPending(1);
      EXPECT_EQ(qs[0].usage.gpu, 0);
      EXPECT_EQ(c.num_allocations(), 0u);  // the slice was undone
      EXPECT_TRUE(c.CheckInvariants().ok());
      continue;
    }
    ASSERT_EQ((*adm)->state(1), JobState::kRunning) << (*adm)->WhyPending(1);
    const auto slices = (*adm)->Slices(1);
    ASSERT_EQ(slices.size(), 1u);
    EXPECT_EQ(slices[0].kind, tc.kind);
    EXPECT_EQ(qs[0].usage.gpu, tc.charged_milli);
    // Finishing returns exactly what was charged.
    ASSERT_TRUE((*adm)->Finish(c, 1).ok());
    EXPECT_EQ((*adm)->Queues()[0].usage.gpu, 0);
  }
}

TEST(AdmissionSliceChargeTest, SliceMilliPerKind) {
  ClusterState c = OneNode("3g.40gb@0 2g.20gb@4 1g.10gb@6");
  const GpuSlices& mig = c.gpu(0, 0);
  SliceAssignment a;
  a.node = 0;
  a.gpus = 1;
  a.kind = SliceKind::kMig;
  a.mig_start = 4;
  EXPECT_EQ(SliceMilli(mig, a), 285);
  a.mig_start = 5;  // no instance starts there: counted as the whole GPU
  EXPECT_EQ(SliceMilli(mig, a), 1000);
  a.kind = SliceKind::kMigMps;  // half the threads of the 3g.40gb instance
  a.mig_start = 0;
  a.thread_pct = 50;
  a.memory_mib = 1024;
  EXPECT_EQ(SliceMilli(mig, a), 214);
  ClusterState plain = OneNode("");
  const GpuSlices& gpu = plain.gpu(0, 0);
  SliceAssignment t;
  t.node = 0;
  t.gpus = 1;
  t.kind = SliceKind::kTimeSlice;
  t.memory_mib = gpu.memory_mib / 4;
  EXPECT_EQ(SliceMilli(gpu, t), 250);
  t.kind = SliceKind::kShare;
  t.gpu_milli = 300;
  EXPECT_EQ(SliceMilli(gpu, t), 300);
  t.kind = SliceKind::kExclusive;
  t.gpus = 0b11;
  EXPECT_EQ(SliceMilli(gpu, t), 2000);
}

}  // namespace
}  // namespace tessera
