// Admission: quotas, borrowing, lending, reclaim, priorities, victim choice, gangs, topology,
// reservations with backfill, fair share, and the absence of preemption loops.
#include "admission/admission.h"

#include <bit>

#include <gtest/gtest.h>

#include "core/random.h"
#include "engine/gpu_select.h"
#include "policies/builtin.h"
#include "tests/unit/admission_test_util.h"

namespace tessera {
namespace {

using namespace admissiontest;  // NOLINT(google-build-using-namespace)

// ---- quota, borrowing, lending -----------------------------------------------------------------

struct QuotaCase {
  const char* name;
  std::optional<Resources> borrowing_limit;  // on team-a
  std::optional<Resources> lending_limit;    // on team-b
  bool cohort;
  int expect_a;  // of 8 one-GPU jobs of team-a, with team-b idle (4 + 4 GPUs of quota)
  const char* reason;
};

TEST(AdmissionQuotaTest, NominalBorrowingAndLending) {
  const QuotaCase cases[] = {
      {"nominal only", std::nullopt, std::nullopt, false, 4,
       "quota of gpu in team-a exhausted (4.00 GPU-eq used of 4.00 GPU-eq, 1.00 GPU-eq asked; "
       "no cohort to borrow from)"},
      {"borrows all that is lent", std::nullopt, std::nullopt, true, 8, ""},
      {"borrowing limit", Resources{2 * kGpu, 1 << 30, 1 << 30}, std::nullopt, true, 6,
       "GPU borrowing limit of gpu in team-a reached"},
      {"lending limit", std::nullopt, Resources{1 * kGpu, 0, 0}, true, 5,
       "cohort org lends 1.00 GPU-eq, 0.00 GPU-eq of it left"},
  };
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.name);
    QueueSpec a = Queue("team-a", tc.cohort ? "org" : "", 4);
    QueueSpec b = Queue("team-b", tc.cohort ? "org" : "", 4);
    a.flavors[0].borrowing_limit = tc.borrowing_limit;
    b.flavors[0].lending_limit = tc.lending_limit;
    if (tc.lending_limit) b.flavors[0].lending_limit->cpu = b.flavors[0].nominal.cpu;
    if (tc.lending_limit) b.flavors[0].lending_limit->memory = b.flavors[0].nominal.memory;
    auto adm = Make({a, b});
    ClusterState c = Cluster(2, 8);
    for (WorkloadId i = 1; i <= 8; ++i) ASSERT_TRUE(adm->Submit(Job(i, "team-a")).ok());
    ASSERT_TRUE(adm->RunCycle(c, 0).ok());
    EXPECT_EQ(Running(*adm, 1, 8), tc.expect_a);
    if (tc.expect_a < 8) {
      Contains(adm->WhyPending(8), tc.reason);
      EXPECT_EQ(adm->WhyPendingReason(8), PendingReason::kQuota);
    }
    EXPECT_TRUE(c.CheckInvariants().ok());
  }
}

TEST(AdmissionQuotaTest, GpuEquivalentsMakeModelsComparable) {
  AdmissionConfig cfg;
  cfg.gpu_equivalents = {{"T4", 0.25}};
  QueueSpec q = Queue("team", "", 1);  // one GPU-equivalent
  auto adm = Make({q}, cfg);
  ClusterState c = Cluster(1, 8, "T4");
  for (WorkloadId i = 1; i <= 6; ++i) ASSERT_TRUE(adm->Submit(Job(i, "team")).ok());
  ASSERT_TRUE(adm->RunCycle(c, 0).ok());
  EXPECT_EQ(Running(*adm, 1, 6), 4);  // four T4s = one GPU-equivalent
  EXPECT_EQ(adm->Queues()[0].usage.gpu, 1000);
  EXPECT_EQ(adm->GpuEquivalentMilli(Model("T4"), 500), 125);
  Contains(adm->WhyPending(5), "1.00 GPU-eq used of 1.00 GPU-eq, 0.25 GPU-eq asked");
}

TEST(AdmissionQuotaTest, PlacementPicksAModelTheQuotaCanPayFor) {
  // 1.5 GPU-eq of quota; the first job takes one H100 (1.0). Of the second job's choices, an
  // H100 would exceed the quota, an A100 (0.5) keeps within it: it must land on the A100.
  AdmissionConfig cfg;
  cfg.gpu_equivalents = {{"A100-80GB", 0.5}};
  QueueSpec q = Queue("team", "", 1);
  q.flavors[0].nominal.gpu = 1500;
  auto adm = Make({q}, cfg);
  ClusterState c;
  for (const char* m : {"H100-80GB", "A100-80GB"}) {
    NodeSpec s;
    s.name = m;
    s.cpu = MilliCpu(64000);
    s.memory = MiB(512 * 1024);
    s.gpu_count = 8;
    s.model = Model(m);
    ASSERT_TRUE(c.AddNode(s).ok());
  }
  JobSpec first = Job(1, "team");
  first.pod.models = ModelMask{1} << Model("H100-80GB");
  ASSERT_TRUE(adm->Submit(first).ok());
  for (WorkloadId i = 2; i <= 3; ++i) ASSERT_TRUE(adm->Submit(Job(i, "team", 1, 1, 0, 1)).ok());
  ASSERT_TRUE(adm->RunCycle(c, 0).ok());
  ASSERT_EQ(adm->state(1), JobState::kRunning);
  ASSERT_EQ(adm->state(2), JobState::kRunning);
  EXPECT_EQ(adm->Placements(2)[0].node, 1u);  // the A100 node
  EXPECT_EQ(adm->Queues()[0].usage.gpu, 1500);
  Contains(adm->WhyPending(3), "quota of gpu in team exhausted (1.50 GPU-eq used of 1.50");
}

TEST(AdmissionQuotaTest, FlavorsTriedInOrder) {
  ClusterState c;
  for (const char* m : {"H100-80GB", "A100-80GB"}) {
    NodeSpec s;
    s.name = m;
    s.cpu = MilliCpu(64000);
    s.memory = MiB(512 * 1024);
    s.gpu_count = 4;
    s.model = Model(m);
    ASSERT_TRUE(c.AddNode(s).ok());
  }
  QueueSpec q;
  q.name = "team";
  q.flavors = {Flavor("h100", 2, ModelMask{1} << Model("H100-80GB")),
               Flavor("a100", 3, ModelMask{1} << Model("A100-80GB"))};
  auto adm = Make({q});
  for (WorkloadId i = 1; i <= 6; ++i) ASSERT_TRUE(adm->Submit(Job(i, "team")).ok());
  ASSERT_TRUE(adm->RunCycle(c, 0).ok());
  EXPECT_EQ(Running(*adm, 1, 6), 5);
  for (WorkloadId i = 1; i <= 2; ++i) EXPECT_EQ(adm->Placements(i)[0].node, 0u);
  for (WorkloadId i = 3; i <= 5; ++i) EXPECT_EQ(adm->Placements(i)[0].node, 1u);
}

TEST(AdmissionQuotaTest, RejectsBadConfiguration) {
  auto bad = [](std::vector<QueueSpec> qs, AdmissionConfig cfg = {}) {
    auto a = Admission::Create(std::move(qs), std::move(cfg), MakeBestFitScorer(), 1);
    return a.ok() ? std::string() : a.status().message();
  };
  Contains(bad({Queue("a", "", 1), Queue("a", "", 1)}), "duplicate queue 'a'");
  Contains(bad({Queue("a", "", 1, 0)}), "weight must be > 0");
  QueueSpec lend = Queue("a", "org", 1);
  lend.flavors[0].lending_limit = Resources{2 * kGpu, 0, 0};
  Contains(bad({lend}), "lending limit above nominal quota");
  QueueSpec nocohort = Queue("a", "", 1);
  nocohort.flavors[0].borrowing_limit = Resources{};
  Contains(bad({nocohort}), "need a cohort");
  AdmissionConfig cfg;
  cfg.gpu_equivalents = {{"X100", 1}};
  Contains(bad({Queue("a", "", 1)}, cfg), "unknown GPU model 'X100'");
  auto adm = Make({Queue("a", "", 1)});
  EXPECT_FALSE(adm->Submit(Job(1, "nope")).ok());
  JobSpec gang = Job(2, "a", 1, 3);
  gang.min_member = 4;
  EXPECT_FALSE(adm->Submit(gang).ok());
  ASSERT_TRUE(adm->Submit(Job(3, "a")).ok());
  EXPECT_FALSE(adm->Submit(Job(3, "a")).ok());
}

// ---- reclaim and preemption --------------------------------------------------------------------

TEST(AdmissionPreemptionTest, ReclaimWithinOneCycleAndNoLoop) {
  auto adm = Make({Queue("team-a", "org", 4), Queue("team-b", "org", 4)});
  ClusterState c = Cluster(1, 8);
  for (WorkloadId i = 1; i <= 8; ++i) ASSERT_TRUE(adm->Submit(Job(i, "team-a", 1, 1, 0, 0)).ok());
  ASSERT_TRUE(adm->RunCycle(c, 0).ok());
  EXPECT_EQ(Running(*adm, 1, 8), 8);  // borrows team-b's idle quota
  // team-b's demand arrives: reclaimed in the very next cycle.
  for (WorkloadId i = 101; i <= 103; ++i)
    ASSERT_TRUE(adm->Submit(Job(i, "team-b", 1, 1, 0, 100)).ok());
  auto r = adm->RunCycle(c, 100);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Running(*adm, 101, 103), 3);
  ASSERT_EQ(r->preempted.size(), 3u);
  Contains(r->preempted[0].reason, "team-b reclaimed its lent quota of gpu");
  Contains(adm->WhyPending(r->preempted[0].victim), "preempted");
  EXPECT_EQ(adm->WhyPendingReason(r->preempted[0].victim), PendingReason::kOther);
  // Many more cycles: team-a's evicted jobs would have to borrow again, so they never preempt
  // back, and team-b (within nominal) is never reclaimed from.
  int preemptions = 3;
  for (int t = 1; t <= 50; ++t) {
    auto rr = adm->RunCycle(c, 100 + 10.0 * t);
    ASSERT_TRUE(rr.ok());
    preemptions += static_cast<int>(rr->preempted.size());
  }
  EXPECT_EQ(preemptions, 3);
  EXPECT_EQ(Running(*adm, 1, 8), 5);  // 4 nominal + the 1 GPU team-b still lends
  EXPECT_TRUE(c.CheckInvariants().ok());
}

TEST(AdmissionPreemptionTest, PriorityWithinQueueAndMinimumRuntime) {
  AdmissionConfig cfg;
  cfg.min_runtime_s = 60;
  auto adm = Make({Queue("team", "", 8)}, cfg);
  ClusterState c = Cluster(1, 4);
  for (WorkloadId i = 1; i <= 4; ++i) ASSERT_TRUE(adm->Submit(Job(i, "team", 1, 1, 0, i)).ok());
  ASSERT_TRUE(adm->RunCycle(c, 0).ok());
  ASSERT_TRUE(adm->Submit(Job(10, "team", 1, 1, 5, 10)).ok());
  auto r = adm->RunCycle(c, 30);  // victims ran 30 s < 60 s
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->preempted.empty());
  Contains(adm->WhyPending(10), "no placement");
  EXPECT_EQ(adm->WhyPendingReason(10), PendingReason::kNoFit);
  ASSERT_TRUE(adm->Submit(Job(11, "team", 1, 1, 0, 11)).ok());  // equal priority: never preempts
  r = adm->RunCycle(c, 120);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->preempted.size(), 1u);
  EXPECT_EQ(r->preempted[0].preemptor, 10u);
  Contains(r->preempted[0].reason, "priority 5 > 0");
  EXPECT_EQ(adm->state(10), JobState::kRunning);
  EXPECT_EQ(adm->state(11), JobState::kPending);
}

struct PolicyCase {
  const char* name;
  WithinQueuePreemption within;
  ReclaimPreemption reclaim;
  int preemptor_priority;
  bool same_queue;  // the preemptor is in the victims' queue (else: reclaims from another)
  int expect_preempted;
};

TEST(AdmissionPreemptionTest, PriorityPolicyPerQueue) {
  // Four running 1-GPU jobs of priority 5 fill one node: one of team-a (nominal 3) and three of
  // team-b (nominal 1, borrowing 2 from team-a). Then one 1-GPU job arrives at t=10, in team-b
  // (within-queue preemption) or in team-a (reclaim from team-b, which borrows).
  const PolicyCase cases[] = {
      {"within: lower priority evicts priority 5 for 6", WithinQueuePreemption::kLowerPriority,
       ReclaimPreemption::kAny, 6, true, 1},
      {"within: lower priority keeps equal priority", WithinQueuePreemption::kLowerPriority,
       ReclaimPreemption::kAny, 5, true, 0},
      {"within: equal priority but older jobs are kept",
       WithinQueuePreemption::kLowerOrNewerEqualPriority, ReclaimPreemption::kAny, 5, true, 0},
      {"within: never", WithinQueuePreemption::kNever, ReclaimPreemption::kAny, 9, true, 0},
      {"reclaim: any evicts a higher-priority borrower", WithinQueuePreemption::kNever,
       ReclaimPreemption::kAny, 0, false, 1},
      {"reclaim: lower priority keeps it", WithinQueuePreemption::kNever,
       ReclaimPreemption::kLowerPriority, 0, false, 0},
      {"reclaim: lower priority evicts a lower-priority borrower", WithinQueuePreemption::kNever,
       ReclaimPreemption::kLowerPriority, 6, false, 1},
      {"reclaim: never", WithinQueuePreemption::kNever, ReclaimPreemption::kNever, 9, false, 0},
  };
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.name);
    QueueSpec a = Queue("team-a", "org", 3);
    QueueSpec b = Queue("team-b", "org", 1);
    for (QueueSpec* q : {&a, &b}) {
      q->within_queue = tc.within;
      q->reclaim = tc.reclaim;
    }
    auto adm = Make({a, b});
    ClusterState c = Cluster(1, 4);
    // team-b runs 3 jobs (2 borrowed from team-a), team-a runs 1.
    ASSERT_TRUE(adm->Submit(Job(1, "team-a", 1, 1, 5, 0)).ok());
    for (WorkloadId i = 2; i <= 4; ++i) ASSERT_TRUE(adm->Submit(Job(i, "team-b", 1, 1, 5, i)).ok());
    ASSERT_TRUE(adm->RunCycle(c, 0).ok());
    ASSERT_EQ(Running(*adm, 1, 4), 4);
    JobSpec late = Job(10, tc.same_queue ? "team-b" : "team-a", 1, 1, tc.preemptor_priority, 10);
    ASSERT_TRUE(adm->Submit(late).ok());
    auto r = adm->RunCycle(c, 10);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(static_cast<int>(r->preempted.size()), tc.expect_preempted);
    EXPECT_EQ(adm->state(10) == JobState::kRunning, tc.expect_preempted > 0);
    for (const Preemption& p : r->preempted) EXPECT_GE(p.victim, 2u);  // a team-b job
    EXPECT_TRUE(c.CheckInvariants().ok());
  }
}

TEST(AdmissionPreemptionTest, NewerEqualPriorityEvictedOnlyUnderThatPolicy) {
  // Queue of one node, 2 GPUs: job 1 (t=0, 1 GPU) and job 3 (t=20, 1 GPU) run; job 2 arrived at
  // t=10 but was submitted late. Under LowerOrNewerEqualPriority job 2 evicts job 3 (newer),
  // never job 1 (older); under LowerPriority it waits.
  for (auto policy :
       {WithinQueuePreemption::kLowerPriority, WithinQueuePreemption::kLowerOrNewerEqualPriority}) {
    SCOPED_TRACE(Name(policy));
    QueueSpec q = Queue("team", "", 8);
    q.within_queue = policy;
    auto adm = Make({q});
    ClusterState c = Cluster(1, 2);
    ASSERT_TRUE(adm->Submit(Job(1, "team", 1, 1, 0, 0)).ok());
    ASSERT_TRUE(adm->Submit(Job(3, "team", 1, 1, 0, 20)).ok());
    ASSERT_TRUE(adm->RunCycle(c, 20).ok());
    ASSERT_TRUE(adm->Submit(Job(2, "team", 1, 1, 0, 10)).ok());
    auto r = adm->RunCycle(c, 30);
    ASSERT_TRUE(r.ok());
    if (policy == WithinQueuePreemption::kLowerPriority) {
      EXPECT_TRUE(r->preempted.empty());
      EXPECT_EQ(adm->state(2), JobState::kPending);
      continue;
    }
    ASSERT_EQ(r->preempted.size(), 1u);
    EXPECT_EQ(r->preempted[0].victim, 3u);
    Contains(r->preempted[0].reason, "same priority 0, arrived earlier");
    EXPECT_EQ(adm->state(2), JobState::kRunning);
    EXPECT_EQ(adm->state(1), JobState::kRunning);
    // Job 3 is now the newest: it can never evict job 2 back.
    for (int t = 1; t <= 5; ++t) {
      auto rr = adm->RunCycle(c, 30 + 10.0 * t);
      ASSERT_TRUE(rr.ok());
      EXPECT_TRUE(rr->preempted.empty());
    }
  }
}

TEST(AdmissionOrderTest, StrictFifoPerQueue) {
  // One node of 4 GPUs, 3 used. Queue "strict" has a 2-GPU head and a 1-GPU job behind it; the
  // "easy" queue has the same two jobs. Only the easy queue lets its 1-GPU job pass.
  QueueSpec strict = Queue("strict", "", 8);
  strict.queueing = QueueingStrategy::kStrictFifo;
  AdmissionConfig cfg;
  cfg.preemption = false;
  cfg.reservations = false;
  for (const bool strict_queue : {true, false}) {
    SCOPED_TRACE(strict_queue ? "StrictFIFO" : "BestEffortFIFO");
    auto adm = Make({strict, Queue("easy", "", 8)}, cfg);
    ClusterState c = Cluster(1, 4);
    ASSERT_TRUE(adm->Submit(Job(1, "easy", 3, 1, 0, 0)).ok());
    ASSERT_TRUE(adm->RunCycle(c, 0).ok());
    const std::string q = strict_queue ? "strict" : "easy";
    ASSERT_TRUE(adm->Submit(Job(2, q, 2, 1, 0, 1)).ok());
    ASSERT_TRUE(adm->Submit(Job(3, q, 1, 1, 0, 2)).ok());
    ASSERT_TRUE(adm->RunCycle(c, 10).ok());
    EXPECT_EQ(adm->state(2), JobState::kPending);
    EXPECT_EQ(adm->state(3) == JobState::kRunning, !strict_queue);
  }
}

TEST(AdmissionPreemptionTest, VictimsMinimiseLostGpuTimeAndGangsGoWhole) {
  auto adm = Make({Queue("team", "", 16)});
  ClusterState c = Cluster(1, 8);
  ASSERT_TRUE(adm->Submit(Job(1, "team", 1, 4, 0, 0)).ok());  // 4-pod gang, started at 0
  ASSERT_TRUE(adm->RunCycle(c, 0).ok());
  ASSERT_TRUE(adm->Submit(Job(2, "team", 1, 1, 0, 1)).ok());  // started at 500: less lost
  ASSERT_TRUE(adm->Submit(Job(3, "team", 1, 1, 0, 2)).ok());
  ASSERT_TRUE(adm->Submit(Job(4, "team", 2, 1, 0, 3)).ok());
  ASSERT_TRUE(adm->RunCycle(c, 500).ok());
  ASSERT_EQ(Running(*adm, 1, 4), 4);
  // A high-priority 2-GPU job: evicting job 2 and 3 loses 2 x 500 GPU-s, less than job 4
  // (2 GPUs x 500 s, same) or the gang (4 x 1000); ties go to the lower priority, then the
  // latest start; the gang is never split.
  ASSERT_TRUE(adm->Submit(Job(9, "team", 2, 1, 7, 600)).ok());
  auto r = adm->RunCycle(c, 1000);
  ASSERT_TRUE(r.ok());
  ASSERT_FALSE(r->preempted.empty());
  for (const auto& p : r->preempted) EXPECT_NE(p.victim, 1u);
  int lost_pods = 0;
  for (const auto& p : r->preempted) lost_pods += p.victim == 4 ? 2 : 1;
  EXPECT_EQ(lost_pods, 2);
  EXPECT_EQ(adm->Placements(1).size(), 4u);
  EXPECT_EQ(adm->state(9), JobState::kRunning);
}

// ---- gangs, topology, reservations ----------------------------------------------------------

TEST(AdmissionGangTest, AllOrNothing) {
  auto adm = Make({Queue("team", "", 64)});
  ClusterState c = Cluster(1, 4);
  ASSERT_TRUE(adm->Submit(Job(1, "team", 1, 1)).ok());
  ASSERT_TRUE(adm->RunCycle(c, 0).ok());
  AdmissionConfig none;
  JobSpec gang = Job(2, "team", 1, 4, 0, 1);
  ASSERT_TRUE(adm->Submit(gang).ok());
  ASSERT_TRUE(adm->RunCycle(c, 1).ok());
  EXPECT_EQ(adm->state(2), JobState::kPending);
  EXPECT_EQ(c.num_allocations(), 1u);  // nothing of the gang is held
  Contains(adm->WhyPending(2), "gang placed 3 of 4 pods");
  // min_member 3: admitted with the 3 pods that fit.
  JobSpec partial = Job(3, "team", 1, 4, 0, 2);
  partial.min_member = 3;
  ASSERT_TRUE(adm->Cancel(2).ok());
  ASSERT_TRUE(adm->Submit(partial).ok());
  ASSERT_TRUE(adm->RunCycle(c, 2).ok());
  EXPECT_EQ(adm->state(3), JobState::kRunning);
  EXPECT_EQ(adm->Placements(3).size(), 3u);
}

TEST(AdmissionGangTest, TopologyConstraints) {
  ClusterState c;
  for (int i = 0; i < 4; ++i) {
    NodeSpec s;
    s.name = "n" + std::to_string(i);
    s.cpu = MilliCpu(64000);
    s.memory = MiB(512 * 1024);
    s.gpu_count = 4;
    s.model = Model("H100-80GB");
    s.labels = {{"rack", i < 2 ? "r1" : "r2"}};
    ASSERT_TRUE(c.AddNode(s).ok());
  }
  auto adm = Make({Queue("team", "", 64)});
  // Two GPUs busy on each node (outside admission): 8 free GPUs, but no node has 3.
  Demand two;
  two.cpu = MilliCpu(1000);
  two.memory = MiB(1024);
  two.num_gpu = 2;
  two.gpu_milli = 1000;
  for (NodeIdx n = 0; n < 4; ++n) ASSERT_TRUE(c.Allocate(1000000 + n, two, {n, 0b11}).ok());
  JobSpec same = Job(10, "team", 1, 3, 0, 1);
  same.topology = TopologyKind::kSameNode;
  ASSERT_TRUE(adm->Submit(same).ok());
  JobSpec rack = Job(11, "team", 1, 4, 0, 2);
  rack.topology = TopologyKind::kSameLabel;
  rack.topology_label = "rack";
  ASSERT_TRUE(adm->Submit(rack).ok());
  AdmissionConfig cfg;
  ASSERT_TRUE(adm->RunCycle(c, 1).ok());
  EXPECT_EQ(adm->state(10), JobState::kPending);
  Contains(adm->WhyPending(10), "single node");
  ASSERT_EQ(adm->state(11), JobState::kRunning);
  std::set<std::string> racks;
  for (const auto& p : adm->Placements(11)) racks.insert(c.spec(p.node).labels.at("rack"));
  EXPECT_EQ(racks.size(), 1u);
}

TEST(AdmissionGangTest, ReservationHoldsNodesAndBackfillUsesTheRest) {
  auto adm = Make({Queue("team", "", 64)});
  ClusterState c = Cluster(3, 4);
  // One long 1-GPU job on each of n0 and n1.
  ASSERT_TRUE(adm->Submit(Job(1, "team", 1, 1, 0, 0)).ok());
  ASSERT_TRUE(adm->Submit(Job(2, "team", 1, 1, 0, 0)).ok());
  ASSERT_TRUE(adm->Submit(Job(3, "team", 4, 1, 0, 0)).ok());  // fills a node
  ASSERT_TRUE(adm->RunCycle(c, 0).ok());
  ASSERT_EQ(Running(*adm, 1, 3), 3);
  // A gang of 2 x 4 GPUs cannot start: it reserves two nodes.
  ASSERT_TRUE(adm->Submit(Job(10, "team", 4, 2, 0, 1)).ok());
  ASSERT_TRUE(adm->RunCycle(c, 1).ok());
  EXPECT_EQ(adm->state(10), JobState::kPending);
  const std::string why = adm->WhyPending(10);
  Contains(why, "gang of 2 holds a reservation on");
  const auto q = adm->Queues()[0];
  EXPECT_EQ(q.reserved.gpu, 8 * kGpu);  // the queue accounts for the reservation
  // Small jobs backfill only where they do not delay the gang.
  for (WorkloadId i = 20; i < 30; ++i) ASSERT_TRUE(adm->Submit(Job(i, "team", 1, 1, 0, 2)).ok());
  ASSERT_TRUE(adm->RunCycle(c, 2).ok());
  for (WorkloadId i = 20; i < 30; ++i) {
    if (adm->state(i) != JobState::kRunning) continue;
    const NodeIdx n = adm->Placements(i)[0].node;
    EXPECT_EQ(why.find(c.spec(n).name + ","), std::string::npos)
        << "backfilled onto a reserved node";
  }
  // When the reserved nodes free, the gang starts before any later small job.
  for (WorkloadId i = 1; i <= 3; ++i) ASSERT_TRUE(adm->Finish(c, i).ok());
  ASSERT_TRUE(adm->RunCycle(c, 3).ok());
  EXPECT_EQ(adm->state(10), JobState::kRunning);
  EXPECT_EQ(adm->Placements(10).size(), 2u);
  EXPECT_EQ(adm->Queues()[0].reserved.gpu, 0);
  EXPECT_TRUE(c.CheckInvariants().ok());
}

// ---- ordering and fair share ----------------------------------------------------------------

TEST(AdmissionOrderTest, WeightedFairShareInOneCycle) {
  AdmissionConfig cfg;
  cfg.usage_half_life_s = 0;
  // Three teams borrowing from one pool (a queue that owns the GPUs and runs nothing).
  auto adm = Make({Queue("a", "org", 0, 1), Queue("b", "org", 0, 1), Queue("c", "org", 0, 2),
                   Queue("pool", "org", 8)},
                  cfg);
  ClusterState c = Cluster(1, 8);
  WorkloadId id = 1;
  for (const char* q : {"a", "b", "c"})
    for (int k = 0; k < 10; ++k) ASSERT_TRUE(adm->Submit(Job(id++, q, 1, 1, 0, 0)).ok());
  ASSERT_TRUE(adm->RunCycle(c, 0).ok());
  EXPECT_EQ(Running(*adm, 1, 10), 2);
  EXPECT_EQ(Running(*adm, 11, 20), 2);
  EXPECT_EQ(Running(*adm, 21, 30), 4);
}

TEST(AdmissionOrderTest, PriorityFirstThenFifoWithoutFairSharing) {
  AdmissionConfig cfg;
  cfg.fair_sharing = false;
  auto adm = Make({Queue("a", "org", 4), Queue("b", "org", 4)}, cfg);
  ClusterState c = Cluster(1, 2);
  ASSERT_TRUE(adm->Submit(Job(1, "a", 1, 1, 0, 5)).ok());
  ASSERT_TRUE(adm->Submit(Job(2, "b", 1, 1, 0, 1)).ok());
  ASSERT_TRUE(adm->Submit(Job(3, "a", 1, 1, 3, 9)).ok());
  ASSERT_TRUE(adm->RunCycle(c, 10).ok());
  EXPECT_EQ(adm->state(3), JobState::kRunning);  // priority
  EXPECT_EQ(adm->state(2), JobState::kRunning);  // then arrival
  EXPECT_EQ(adm->state(1), JobState::kPending);
}

TEST(AdmissionOrderTest, StrictFifoBlocksBehindTheHead) {
  AdmissionConfig cfg;
  cfg.strict_fifo = true;
  cfg.preemption = false;
  cfg.reservations = false;
  auto adm = Make({Queue("a", "", 8)}, cfg);
  ClusterState c = Cluster(1, 2);
  ASSERT_TRUE(adm->Submit(Job(1, "a", 1, 1, 0, 0)).ok());
  ASSERT_TRUE(adm->RunCycle(c, 0).ok());
  ASSERT_TRUE(adm->Submit(Job(2, "a", 2, 1, 0, 1)).ok());  // does not fit
  ASSERT_TRUE(adm->Submit(Job(3, "a", 1, 1, 0, 2)).ok());  // would fit, but waits behind 2
  ASSERT_TRUE(adm->RunCycle(c, 3).ok());
  EXPECT_EQ(adm->state(3), JobState::kPending);
}

TEST(AdmissionOrderTest, SetPriorityReordersPendingAndExposesRunningJobs) {
  auto adm = Make({Queue("team", "", 64)});
  ClusterState c = Cluster(1, 4);
  ASSERT_TRUE(adm->Submit(Job(1, "team", 4, 1, 0, 0)).ok());
  ASSERT_TRUE(adm->Submit(Job(2, "team", 4, 1, 0, 1)).ok());
  ASSERT_TRUE(adm->SetPriority(2, 3).ok());  // pending: now ahead of job 1
  ASSERT_TRUE(adm->RunCycle(c, 0).ok());
  EXPECT_EQ(adm->state(2), JobState::kRunning);
  EXPECT_EQ(adm->state(1), JobState::kPending);
  // Lowered below the waiting job, the running one becomes a within-queue victim.
  ASSERT_TRUE(adm->SetPriority(2, -1).ok());
  auto r = adm->RunCycle(c, 60);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->preempted.size(), 1u);
  EXPECT_EQ(r->preempted[0].victim, 2u);
  EXPECT_EQ(adm->state(1), JobState::kRunning);
  ASSERT_TRUE(adm->Finish(c, 1).ok());
  EXPECT_EQ(adm->SetPriority(1, 0).code(), StatusCode::kNotFound);
  EXPECT_EQ(adm->SetPriority(99, 0).code(), StatusCode::kNotFound);
}

JobSpec LayoutJob(WorkloadId id, int pods, std::vector<std::vector<int>> layouts,
                  int priority = 0) {
  JobSpec j = Job(id, "team", 1, pods, priority, static_cast<double>(id));
  j.node_layouts = std::make_shared<const std::vector<std::vector<int>>>(std::move(layouts));
  return j;
}

std::vector<int> GpusPerNode(const Admission& a, WorkloadId job, size_t nodes) {
  std::vector<int> per(nodes, 0);
  for (const Placement& p : a.Placements(job)) per[p.node] += std::popcount(p.gpus);
  return per;
}

TEST(AdmissionGangTest, NodeLayoutsFirstThatFitsTightestNodes) {
  auto adm = Make({Queue("team", "", 64)});
  ClusterState c = Cluster(3, 4);
  // Fill n1 with 1 GPU and n2 with 2: free 4 / 3 / 2.
  JobSpec a = LayoutJob(1, 1, {{1}});
  a.allowed_nodes = std::make_shared<std::vector<uint8_t>>(std::vector<uint8_t>{0, 1, 0});
  JobSpec b = LayoutJob(2, 2, {{2}});
  b.allowed_nodes = std::make_shared<std::vector<uint8_t>>(std::vector<uint8_t>{0, 0, 1});
  ASSERT_TRUE(adm->Submit(a).ok());
  ASSERT_TRUE(adm->Submit(b).ok());
  ASSERT_TRUE(adm->RunCycle(c, 0).ok());
  // {5} fits nowhere; {3,3} needs two nodes with 3 free: n0 (tightest is n1, then n0).
  ASSERT_TRUE(adm->Submit(LayoutJob(3, 6, {{5, 1}, {3, 3}, {4, 2}})).ok());
  ASSERT_TRUE(adm->RunCycle(c, 1).ok());
  ASSERT_EQ(adm->state(3), JobState::kRunning);
  EXPECT_EQ(GpusPerNode(*adm, 3, 3), (std::vector<int>{3, 3, 0}));
  // Free 1 / 0 / 2: a 3-pod gang fits as 2 + 1 only; 1 goes on n0 (tightest), 2 on n2.
  ASSERT_TRUE(adm->Submit(LayoutJob(4, 3, {{3}, {2, 1}})).ok());
  ASSERT_TRUE(adm->Submit(LayoutJob(5, 1, {{1}})).ok());
  ASSERT_TRUE(adm->RunCycle(c, 2).ok());
  ASSERT_EQ(adm->state(4), JobState::kRunning);
  EXPECT_EQ(GpusPerNode(*adm, 4, 3), (std::vector<int>{1, 0, 2}));
  EXPECT_EQ(adm->state(5), JobState::kPending);
  Contains(adm->WhyPending(5), "none of its 1 node layouts fits the free nodes");
  EXPECT_TRUE(c.CheckInvariants().ok());
}

TEST(AdmissionGangTest, NodeLayoutsRejectBadShapes) {
  auto adm = Make({Queue("team", "", 64)});
  EXPECT_FALSE(adm->Submit(LayoutJob(1, 4, {{2, 1}})).ok());  // sums to 3
  EXPECT_FALSE(adm->Submit(LayoutJob(2, 4, {{4, 0}})).ok());  // empty part
  EXPECT_FALSE(adm->Submit(LayoutJob(3, 4, {{}})).ok());      // no part
  JobSpec topo = LayoutJob(4, 4, {{4}});
  topo.topology = TopologyKind::kSameNode;
  EXPECT_FALSE(adm->Submit(topo).ok());
  JobSpec partial = LayoutJob(5, 4, {{4}});
  partial.min_member = 2;
  EXPECT_FALSE(adm->Submit(partial).ok());
  EXPECT_TRUE(adm->Submit(LayoutJob(6, 4, {{2, 2}, {4}})).ok());
}

TEST(AdmissionPreemptionTest, NodeLayoutJobEvictsOnlyWhatItNeeds) {
  auto adm = Make({Queue("team", "", 64)});
  ClusterState c = Cluster(2, 4);
  // Four 2-GPU jobs of priority 0 fill both nodes.
  for (WorkloadId i = 1; i <= 4; ++i) ASSERT_TRUE(adm->Submit(LayoutJob(i, 2, {{2}})).ok());
  ASSERT_TRUE(adm->RunCycle(c, 0).ok());
  ASSERT_EQ(Running(*adm, 1, 4), 4);
  // A 4-GPU gang that accepts only one node needs both jobs of one node gone.
  ASSERT_TRUE(adm->Submit(LayoutJob(10, 4, {{4}}, 5)).ok());
  auto r = adm->RunCycle(c, 100);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->preempted.size(), 2u);
  ASSERT_EQ(adm->state(10), JobState::kRunning);
  const std::vector<int> per = GpusPerNode(*adm, 10, 2);
  EXPECT_TRUE(per == (std::vector<int>{4, 0}) || per == (std::vector<int>{0, 4}));
  // Too big for the cluster even with every victim gone: nothing is evicted.
  ASSERT_TRUE(adm->Submit(LayoutJob(11, 12, {{4, 4, 4}}, 9)).ok());
  r = adm->RunCycle(c, 200);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->preempted.empty());
  EXPECT_EQ(adm->state(11), JobState::kPending);
  EXPECT_EQ(Running(*adm, 1, 10), 3);
  EXPECT_TRUE(c.CheckInvariants().ok());
}

// ---- failures remembered within a cycle
// ----------------------------------------------------------

struct RememberCase {
  const char* name;
  int cpu_first, gpus_first;  // the first job, which cannot be placed
  int cpu_later, gpus_later;  // a later job of the same queue
  bool later_runs;
  const char* later_reason;  // "" when it runs
};

TEST(AdmissionCycleTest, FailedPlacementsAreRememberedOnlyForJobsAskingNoLess) {
  // Two nodes with 4 GPUs and 8 cores each; seven 1-GPU jobs of one core leave one GPU free.
  const RememberCase cases[] = {
      {"larger GPU ask fails without a new attempt", 1, 2, 1, 3, false,
       "(found this cycle for job-8, which asks no more)"},
      {"same ask fails without a new attempt", 1, 2, 1, 2, false,
       "(found this cycle for job-8, which asks no more)"},
      {"more CPU does not matter when GPUs refused it", 1, 2, 6, 2, false,
       "(found this cycle for job-8, which asks no more)"},
      {"smaller GPU ask is still tried and runs", 1, 2, 1, 1, true, ""},
      {"CPU-bound failure does not cover a smaller CPU ask", 8, 1, 1, 1, true, ""},
      {"CPU-bound failure covers a larger CPU ask", 7, 1, 8, 1, false,
       "(found this cycle for job-8, which asks no more)"},
  };
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.name);
    AdmissionConfig cfg;
    cfg.reservations = false;  // multi-GPU pods would otherwise hold nodes
    auto adm = Make({Queue("team", "", 64)}, cfg);
    ClusterState c;
    for (int i = 0; i < 2; ++i) {
      NodeSpec s;
      s.name = "n" + std::to_string(i);
      s.cpu = MilliCpu(8000);
      s.memory = MiB(512 * 1024);
      s.gpu_count = 4;
      s.model = Model("H100-80GB");
      ASSERT_TRUE(c.AddNode(s).ok());
    }
    for (WorkloadId i = 1; i <= 7; ++i) ASSERT_TRUE(adm->Submit(Job(i, "team", 1, 1, 0, 0)).ok());
    JobSpec first = Job(8, "team", tc.gpus_first, 1, 0, 1);
    first.pod.cpu = MilliCpu(1000 * tc.cpu_first);
    JobSpec later = Job(9, "team", tc.gpus_later, 1, 0, 2);
    later.pod.cpu = MilliCpu(1000 * tc.cpu_later);
    ASSERT_TRUE(adm->Submit(first).ok());
    ASSERT_TRUE(adm->Submit(later).ok());
    ASSERT_TRUE(adm->RunCycle(c, 0).ok());
    EXPECT_EQ(Running(*adm, 1, 7), 7);
    EXPECT_EQ(adm->state(8), JobState::kPending);
    EXPECT_EQ(adm->state(9) == JobState::kRunning, tc.later_runs) << adm->WhyPending(9);
    if (!tc.later_runs) {
      Contains(adm->WhyPending(9), "no placement: 0/2 nodes fit");
      Contains(adm->WhyPending(9), tc.later_reason);
    }
    EXPECT_TRUE(c.CheckInvariants().ok());
  }
}

TEST(AdmissionCycleTest, PreemptionFreesRoomForJobsThatFailedEarlierInTheCycle) {
  // A full node of two low-priority 2-GPU jobs. Job 3 (1 GPU, priority 5) finds no node, then
  // preempts one 2-GPU job and takes one of its GPUs. Job 4, of job 3's shape, must not be
  // refused by the failure remembered before the preemption: it takes the other freed GPU
  // (with only one preemption attempt allowed per cycle, it cannot preempt by itself).
  AdmissionConfig cfg;
  cfg.max_preemption_attempts_per_cycle = 1;
  auto adm = Make({Queue("team", "", 64)}, cfg);
  ClusterState c = Cluster(1, 4);
  for (WorkloadId i = 1; i <= 2; ++i) ASSERT_TRUE(adm->Submit(Job(i, "team", 2, 1, 0, 0)).ok());
  ASSERT_TRUE(adm->RunCycle(c, 0).ok());
  ASSERT_EQ(Running(*adm, 1, 2), 2);
  ASSERT_TRUE(adm->Submit(Job(3, "team", 1, 1, 5, 10)).ok());
  ASSERT_TRUE(adm->Submit(Job(4, "team", 1, 1, 5, 11)).ok());
  auto r = adm->RunCycle(c, 10);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->preempted.size(), 1u);
  EXPECT_EQ(r->preempted[0].preemptor, 3u);
  EXPECT_EQ(adm->state(3), JobState::kRunning);
  EXPECT_EQ(adm->state(4), JobState::kRunning) << adm->WhyPending(4);
  EXPECT_TRUE(c.CheckInvariants().ok());
}

TEST(AdmissionCycleTest, RememberedFailureLeavesAReservedJobItsOwnNodes) {
  // Job 9 (2 GPUs) holds a reservation on one full node; two GPUs free up there. In the next
  // cycle job 10, of the same shape and higher priority, finds no unreserved node and is
  // remembered; job 9 must still be admitted on its own reserved node.
  AdmissionConfig cfg;
  cfg.preemption = false;
  auto adm = Make({Queue("team", "", 64)}, cfg);
  ClusterState c = Cluster(2, 4);
  for (WorkloadId i = 1; i <= 8; ++i) ASSERT_TRUE(adm->Submit(Job(i, "team", 1, 1, 0, 0)).ok());
  ASSERT_TRUE(adm->Submit(Job(9, "team", 2, 1, 0, 1)).ok());
  ASSERT_TRUE(adm->RunCycle(c, 0).ok());
  ASSERT_EQ(Running(*adm, 1, 8), 8);
  const std::string why = adm->WhyPending(9);
  Contains(why, "holds a reservation on n");
  const NodeIdx reserved = why.find("reservation on n0") != std::string::npos ? 0 : 1;
  int freed = 0;
  for (WorkloadId i = 1; i <= 8 && freed < 2; ++i) {
    if (adm->Placements(i)[0].node != reserved) continue;
    ASSERT_TRUE(adm->Finish(c, i).ok());
    ++freed;
  }
  ASSERT_TRUE(adm->Submit(Job(10, "team", 2, 1, 5, 10)).ok());
  ASSERT_TRUE(adm->RunCycle(c, 10).ok());
  EXPECT_EQ(adm->state(10), JobState::kPending);
  ASSERT_EQ(adm->state(9), JobState::kRunning) << adm->WhyPending(9);
  EXPECT_EQ(adm->Placements(9)[0].node, reserved);
  EXPECT_TRUE(c.CheckInvariants().ok());
}

TEST(AdmissionCycleTest, RememberedFailuresNeverChangeADecision) {
  // Two admissions in lockstep on random clusters and workloads, one remembering failures
  // within a cycle and one trying every job: every cycle must admit and preempt the same jobs
  // onto the same GPUs. Mixed models and weights, shares, multi-GPU pods, gangs with and
  // without topology (more than 16 racks, so the try cap matters), node restrictions,
  // priorities, reclaim and reservations.
  const GpuCatalog& cat = GpuCatalog::Builtin();
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(seed);
    ClusterState base;
    for (int i = 0; i < 72; ++i) {
      NodeSpec s;
      s.name = "n" + std::to_string(i);
      s.cpu = MilliCpu(16000 + 16000 * static_cast<int64_t>(rng.Uniform(3)));
      s.memory = MiB(256 * 1024);
      s.gpu_count = rng.Uniform(4) == 0 ? 4 : 8;
      s.model = *cat.Find(rng.Uniform(3) == 0 ? "A100-80GB" : "H100-80GB");
      s.labels["rack"] = "r" + std::to_string(i / 3);
      ASSERT_TRUE(base.AddNode(s).ok());
    }
    std::vector<QueueSpec> queues;
    for (int q = 0; q < 6; ++q) {
      QueueSpec spec = Queue("q" + std::to_string(q), q < 3 ? "org-a" : "org-b",
                             40 + static_cast<int64_t>(rng.Uniform(80)));
      if (q == 1) spec.within_queue = WithinQueuePreemption::kLowerOrNewerEqualPriority;
      if (q == 4) spec.reclaim = ReclaimPreemption::kLowerPriority;
      queues.push_back(spec);
    }
    auto make = [&](bool remember) {
      AdmissionConfig cfg;
      cfg.remember_failures = remember;
      cfg.gpu_equivalents = {{"A100-80GB", 0.5}};
      PolicyConfig pc;
      pc.name = kDefaultPolicy;
      auto scorer = BuiltinPolicies().Create(pc);
      EXPECT_TRUE(scorer.ok());
      auto a = Admission::Create(queues, cfg, std::move(scorer).value(), seed);
      EXPECT_TRUE(a.ok()) << a.status().message();
      return std::move(a).value();
    };
    auto on = make(true);
    auto off = make(false);
    ClusterState c_on = base, c_off = base;
    auto some_nodes = std::make_shared<std::vector<uint8_t>>(72, 0);
    for (int n = 0; n < 72; n += 2) (*some_nodes)[n] = 1;
    std::vector<std::pair<double, WorkloadId>> ends;
    WorkloadId next = 1;
    int admitted = 0, preempted = 0, remembered = 0;
    for (int cycle = 0; cycle < 60; ++cycle) {
      const double now = 10.0 * cycle;
      for (const auto& [end, id] : ends) {
        if (end > now || on->state(id) != JobState::kRunning) continue;
        ASSERT_EQ(off->state(id), JobState::kRunning);
        ASSERT_TRUE(on->Finish(c_on, id).ok());
        ASSERT_TRUE(off->Finish(c_off, id).ok());
      }
      for (int k = 0; k < 12; ++k) {
        JobSpec j =
            Job(next++, queues[rng.Uniform(6)].name, 1, 1, rng.Uniform(5) == 0 ? 5 : 0, now);
        const uint64_t shape = rng.Uniform(10);
        if (shape == 0) j.pod.gpu_milli = 500;
        if (shape == 1) j.pod.num_gpu = 2;
        if (shape == 2) j.pod.num_gpu = 4;
        if (shape == 3) j.pod.num_gpu = 8;
        if (shape == 4) j.pods = 4;
        if (shape == 5) {
          j.pods = 4;
          j.topology = TopologyKind::kSameLabel;
          j.topology_label = "rack";
        }
        if (shape == 6) {
          j.pods = 2;
          j.topology = TopologyKind::kSameNode;
        }
        if (rng.Uniform(8) == 0) j.allowed_nodes = some_nodes;
        j.pod.cpu = MilliCpu(1000 * static_cast<int64_t>(1 + rng.Uniform(12)));
        ASSERT_TRUE(on->Submit(j).ok());
        ASSERT_TRUE(off->Submit(j).ok());
        ends.push_back({now + 30.0 + 10.0 * static_cast<double>(rng.Uniform(30)), j.id});
      }
      auto r_on = on->RunCycle(c_on, now);
      auto r_off = off->RunCycle(c_off, now);
      ASSERT_TRUE(r_on.ok());
      ASSERT_TRUE(r_off.ok());
      ASSERT_EQ(r_on->admitted, r_off->admitted) << "cycle " << cycle;
      ASSERT_EQ(r_on->preempted.size(), r_off->preempted.size()) << "cycle " << cycle;
      for (size_t i = 0; i < r_on->preempted.size(); ++i)
        ASSERT_EQ(r_on->preempted[i].victim, r_off->preempted[i].victim);
      for (WorkloadId id : r_on->admitted) ASSERT_EQ(on->Placements(id), off->Placements(id));
      admitted += static_cast<int>(r_on->admitted.size());
      preempted += static_cast<int>(r_on->preempted.size());
      for (WorkloadId id : on->PendingJobs())
        remembered += on->WhyPending(id).find("which asks no more") != std::string::npos;
    }
    EXPECT_TRUE(c_on.CheckInvariants().ok());
    // The comparison means something only if the run admits, preempts and remembers.
    EXPECT_GT(admitted, 300);
    EXPECT_GT(preempted, 0);
    // (Remembered pending reasons, summed over cycles: 67 to 1,526 on these seeds.)
    EXPECT_GT(remembered, 50);
  }
}

}  // namespace
}  // namespace tessera
