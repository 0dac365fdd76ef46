// Admission after a restart and when nodes change: adopted running work (also beyond its node's
// free CPU and memory), lost nodes, and node restrictions.
#include <gtest/gtest.h>

#include "admission/admission.h"
#include "engine/gpu_select.h"
#include "tests/unit/admission_test_util.h"

namespace tessera {
namespace {

using namespace admissiontest;  // NOLINT(google-build-using-namespace)

// ---- restart, lost nodes, node restrictions ---------------------------------------------------

// Counts what the placement policy is shown; places on the first fitting GPUs.
class RecordingScorer final : public Scorer {
 public:
  RecordingScorer(int* arrivals, int* past) : arrivals_(arrivals), past_(past) {}
  std::string_view name() const override { return "recording"; }
  void Observe(const Demand&) override { ++*arrivals_; }
  void ObservePast(const Demand&) override { ++*past_; }
  NodeScore Score(const ClusterState& state, NodeIdx n, const Demand& d) override {
    return {0, SelectFirstFit(state.free(n), d)};
  }

 private:
  int* arrivals_;
  int* past_;
};

TEST(AdmissionRecoveryTest, AdoptedPodsAreThePolicysPastAndArrivalsAreNot) {
  int arrivals = 0, past = 0;
  auto a = Admission::Create({Queue("team", "", 4)}, {},
                             std::make_unique<RecordingScorer>(&arrivals, &past), 1);
  ASSERT_TRUE(a.ok()) << a.status().message();
  Admission& adm = **a;
  ClusterState c = Cluster(1, 4);
  ASSERT_TRUE(
      adm.Adopt(c, Job(1, "team", 1, 2), {Placement{0, 0b0001}, Placement{0, 0b0010}}, 10).ok());
  EXPECT_EQ(past, 2);
  EXPECT_EQ(arrivals, 0);
  // A refused adoption (GPU 0 is taken) shows the policy nothing.
  EXPECT_FALSE(adm.Adopt(c, Job(2, "team"), {Placement{0, 0b0001}}, 10).ok());
  EXPECT_EQ(past, 2);
  ASSERT_TRUE(adm.Submit(Job(3, "team", 1, 3)).ok());
  EXPECT_EQ(past, 2);
  EXPECT_EQ(arrivals, 3);
}

TEST(AdmissionRecoveryTest, AdoptRebuildsUsageAndRefusesDoubleAssignment) {
  auto adm = Make({Queue("team", "", 4)});
  ClusterState c = Cluster(1, 4);
  ASSERT_TRUE(adm->Adopt(c, Job(1, "team", 2, 1), {Placement{0, 0b0011}}, 10).ok());
  EXPECT_EQ(adm->state(1), JobState::kRunning);
  EXPECT_EQ(adm->Queues()[0].usage.gpu, 2 * kGpu);
  // GPU 1 is already assigned: refused, nothing changes.
  Status st = adm->Adopt(c, Job(2, "team", 1, 2), {Placement{0, 0b0100}, Placement{0, 0b0010}}, 10);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  Contains(st.message(), "cannot be adopted");
  EXPECT_EQ(c.num_allocations(), 1u);
  EXPECT_EQ(adm->state(2), JobState::kFinished);  // unknown to admission
  EXPECT_EQ(adm->Queues()[0].usage.gpu, 2 * kGpu);
  // New work sees the adopted usage.
  for (WorkloadId i = 3; i <= 5; ++i) ASSERT_TRUE(adm->Submit(Job(i, "team")).ok());
  ASSERT_TRUE(adm->RunCycle(c, 20).ok());
  EXPECT_EQ(Running(*adm, 3, 5), 2);
  EXPECT_TRUE(c.CheckInvariants().ok());
}

// Running work is adopted beyond its node's free CPU and memory: the ledger counts its full
// request (the node's balance goes below 0, it is full, the GPUs are held), the queue is charged
// the request, and finishing gives back exactly what was counted.
TEST(AdmissionRecoveryTest, AdoptBeyondTheNodesFreeHostHoldsItsGpus) {
  auto adm = Make({Queue("team", "", 4)});
  ClusterState c = Cluster(1, 4);
  JobSpec hog = Job(1, "team", 0);
  hog.pod.cpu = MilliCpu(63500);
  hog.pod.memory = MiB(511 * 1024);
  ASSERT_TRUE(adm->Adopt(c, hog, {Placement{0, 0}}, 10).ok());
  JobSpec big = Job(2, "team", 2);
  big.pod.cpu = MilliCpu(4000);
  big.pod.memory = MiB(4096);
  ASSERT_TRUE(adm->Adopt(c, big, {Placement{0, 0b0011}}, 10).ok());
  EXPECT_EQ(c.free(0).cpu, 0);
  EXPECT_EQ(c.free(0).memory, 0);
  EXPECT_EQ(c.cpu_balance(0), -3500);
  EXPECT_EQ(c.memory_balance(0), -3 * 1024);
  EXPECT_EQ(c.free(0).gpu[0], 0);
  EXPECT_EQ(c.free(0).gpu[1], 0);
  EXPECT_EQ(adm->Queues()[0].usage.cpu, 63500 + 4000);
  // A GPU held twice is still refused.
  EXPECT_FALSE(adm->Adopt(c, Job(3, "team"), {Placement{0, 0b0010}}, 10).ok());
  ASSERT_TRUE(adm->Finish(c, 2).ok());
  EXPECT_EQ(c.free(0).cpu, 500);
  EXPECT_EQ(c.free(0).memory, 1024);
  ASSERT_TRUE(adm->Finish(c, 1).ok());
  EXPECT_EQ(c.free(0).cpu, 64000);
  EXPECT_EQ(adm->Queues()[0].usage.cpu, 0);
  EXPECT_TRUE(c.CheckInvariants().ok());
}

// A preemption attempt that evicts pods of an over-committed node and still finds no room puts
// them back as they ran, though the node's balance stays below 0 (a later pod gets none of
// their GPUs).
TEST(AdmissionRecoveryTest, AFailedPreemptionPutsAnOverCommittedPodBackWithItsGpus) {
  auto adm = Make({Queue("team", "", 16)});
  ClusterState c = Cluster(2, 4);
  JobSpec hog = Job(1, "team", 1);
  hog.pod.cpu = MilliCpu(63500);
  ASSERT_TRUE(adm->Adopt(c, hog, {Placement{0, 0b0001}}, 0).ok());
  JobSpec big = Job(2, "team", 2);
  big.pod.cpu = MilliCpu(4000);  // 500 free
  ASSERT_TRUE(adm->Adopt(c, big, {Placement{0, 0b0110}}, 8000).ok());
  ASSERT_TRUE(adm->Adopt(c, Job(3, "team", 1, 1, 9), {Placement{0, 0b1000}}, 0).ok());
  JobSpec full = Job(4, "team", 0, 1, 9);  // n1's CPU, out of reach
  full.pod.cpu = MilliCpu(64000);
  ASSERT_TRUE(adm->Adopt(c, full, {Placement{1, 0}}, 0).ok());
  // Two pods of 2 GPUs at priority 5: evicting jobs 2 then 1 (the cheaper first) frees three
  // GPUs of n0, not four, so nothing is evicted and both are put back, 1 then 2.
  ASSERT_TRUE(adm->Submit(Job(5, "team", 2, 2, 5, 9000)).ok());
  auto r = adm->RunCycle(c, 10000);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->preempted.empty());
  EXPECT_EQ(adm->state(5), JobState::kPending);
  EXPECT_EQ(adm->state(2), JobState::kRunning);
  EXPECT_EQ(c.num_allocations(), 4u);
  EXPECT_EQ(c.cpu_balance(0), 64000 - 63500 - 4000 - 1000);
  EXPECT_EQ(c.free(0).cpu, 0);
  for (int g = 0; g < 4; ++g) EXPECT_EQ(c.free(0).gpu[g], 0) << "GPU " << g;
  // The next pod finds no GPU of n0 free.
  ASSERT_TRUE(adm->Submit(Job(6, "team", 1, 1, 0, 9500)).ok());
  ASSERT_TRUE(adm->RunCycle(c, 10001).ok());
  EXPECT_EQ(adm->state(6), JobState::kPending);
  EXPECT_TRUE(c.CheckInvariants().ok());
}

TEST(AdmissionRecoveryTest, LostNodeRequeuesWholeGangs) {
  auto adm = Make({Queue("team", "", 64)});
  ClusterState c = Cluster(2, 4);
  JobSpec gang = Job(1, "team", 2, 4);  // 4 pods x 2 GPUs: both nodes
  ASSERT_TRUE(adm->Submit(gang).ok());
  ASSERT_TRUE(adm->RunCycle(c, 0).ok());
  ASSERT_EQ(adm->state(1), JobState::kRunning);
  const auto requeued = adm->RequeueNode(c, 1, "node n1 disappeared");
  ASSERT_EQ(requeued, std::vector<WorkloadId>{1});
  EXPECT_EQ(adm->state(1), JobState::kPending);
  EXPECT_EQ(c.num_allocations(), 0u);  // the pods on n0 were released too
  EXPECT_EQ(adm->WhyPending(1), "node n1 disappeared");
  EXPECT_EQ(adm->WhyPendingReason(1), PendingReason::kOther);
  EXPECT_EQ(adm->PendingJobs(), std::vector<WorkloadId>{1});
}

TEST(AdmissionRecoveryTest, AllowedNodesRestrictPlacement) {
  auto adm = Make({Queue("team", "", 64)});
  ClusterState c = Cluster(3, 4);
  JobSpec j = Job(1, "team", 1, 1);
  j.allowed_nodes = std::make_shared<std::vector<uint8_t>>(std::vector<uint8_t>{0, 0, 1});
  ASSERT_TRUE(adm->Submit(j).ok());
  JobSpec none = Job(2, "team", 1, 1);
  none.allowed_nodes = std::make_shared<std::vector<uint8_t>>(std::vector<uint8_t>{0, 0, 0});
  ASSERT_TRUE(adm->Submit(none).ok());
  ASSERT_TRUE(adm->RunCycle(c, 0).ok());
  ASSERT_EQ(adm->state(1), JobState::kRunning);
  EXPECT_EQ(adm->Placements(1)[0].node, 2u);
  Contains(adm->WhyPending(2), "3 excluded (node constraints, topology or reservation)");
}

}  // namespace
}  // namespace tessera
