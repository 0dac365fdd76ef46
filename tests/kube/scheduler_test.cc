// The Kubernetes scheduler: decision logic (SchedulerCore, no I/O) and end-to-end runs through
// the real HTTP stack against the fake API server, including restarts, leader handover and
// injected faults.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "kube/informer.h"
#include "kube/scheduler.h"
#include "kube/scheduler_core.h"
#include "tests/kube/fake_apiserver.h"
#include "tests/kube/test_objects.h"

namespace tessera::kube {
namespace {

using kubetest::GpuNodeJson;

Json PodJson(const std::string& ns, const std::string& name, Json limits,
             Json annotations = Json::object(), const std::string& node = "",
             Json extra_spec = Json::object()) {
  Json spec = {
      {"schedulerName", "tessera"},
      {"containers",
       Json::array({{{"name", "main"},
                     {"resources",
                      {{"limits", limits}, {"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}})}};
  if (!node.empty()) spec["nodeName"] = node;
  for (auto& [k, v] : extra_spec.items()) spec[k] = v;
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name}, {"namespace", ns}, {"uid", "uid-" + name}, {"annotations", annotations}}},
      {"spec", spec},
      {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
}

std::unique_ptr<SchedulerCore> Core(SchedulerConfig cfg = {}) {
  cfg.gang_settle_s = 0;
  auto c = SchedulerCore::Create(cfg);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return std::move(c.value());
}

std::map<std::string, BindAction> ByPod(const CycleOutput& out) {
  std::map<std::string, BindAction> m;
  for (const auto& b : out.binds) m[b.ns + "/" + b.name] = b;
  return m;
}

// ---- SchedulerCore ----------------------------------------------------------------------------

TEST(SchedulerCoreTest, BindsWithAssignmentAndHonoursNodeConstraints) {
  auto core = Core();
  core->UpsertNode(GpuNodeJson("a", 4));
  core->UpsertNode(GpuNodeJson("b", 4, "H100-80GB", false));  // NotReady
  core->UpsertNode(
      GpuNodeJson("c", 4, "H100-80GB", true,
                  Json::array({{{"key", "team"}, {"value", "x"}, {"effect", "NoSchedule"}}})));
  core->UpsertPod(PodJson("ml", "whole", {{"nvidia.com/gpu", "2"}}));
  core->UpsertPod(PodJson("ml", "share", {{"tessera.io/gpu-memory", "20Gi"}}));
  core->UpsertPod(
      PodJson("ml", "tolerant", {{"nvidia.com/gpu", "4"}}, Json::object(), "",
              {{"tolerations", Json::array({{{"key", "team"}, {"operator", "Exists"}}})},
               {"nodeSelector", Json::object()}}));
  const auto out = core->Cycle(1);
  const auto binds = ByPod(out);
  ASSERT_EQ(binds.size(), 3u);
  EXPECT_EQ(binds.at("ml/whole").node, "a");
  EXPECT_EQ(binds.at("ml/share").node, "a");
  auto a = DecodeAssignment(binds.at("ml/whole").annotations.at(kAnnotationAssignment));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, AssignmentKind::kExclusive);
  EXPECT_EQ(a->gpus.size(), 2u);
  ASSERT_EQ(a->uuids.size(), 2u);
  EXPECT_EQ(a->uuids[0].rfind("GPU-a-", 0), 0u);
  auto s = DecodeAssignment(binds.at("ml/share").annotations.at(kAnnotationAssignment));
  ASSERT_TRUE(s.ok());
  // The selector makes the share an MPS client with its limits (docs/OPERATIONS.md).
  EXPECT_EQ(s->kind, AssignmentKind::kMps);
  EXPECT_GT(s->mps_thread_pct, 0);
  EXPECT_LT(s->mps_thread_pct, 100);
  EXPECT_GE(s->memory_limit_mib, 20 * 1024);
  // Only node c (tainted, tolerated) has 4 free GPUs left; b is NotReady.
  EXPECT_EQ(binds.at("ml/tolerant").node, "c");
  // An intolerant 4-GPU pod waits, with the reason.
  core->UpsertPod(PodJson("ml", "big", {{"nvidia.com/gpu", "4"}}));
  const auto out2 = core->Cycle(2);
  EXPECT_TRUE(out2.binds.empty());
  ASSERT_FALSE(out2.notices.empty());
  EXPECT_EQ(out2.notices.back().reason, "Unschedulable");
  EXPECT_NE(out2.notices.back().message.find("excluded"), std::string::npos)
      << out2.notices.back().message;
  // The same reason is not repeated.
  EXPECT_TRUE(core->Cycle(3).notices.empty());
}

TEST(SchedulerCoreTest, ReasonsThatOnlyChangeTheirDetailAreResentAtMostEveryInterval) {
  SchedulerConfig cfg;
  cfg.notice_interval_s = 30;
  auto core = Core(cfg);
  core->UpsertNode(GpuNodeJson("a", 8));
  core->UpsertPod(PodJson("ml", "held", {{"nvidia.com/gpu", "6"}}, {}, "a"));
  core->UpsertPod(PodJson("ml", "big", {{"nvidia.com/gpu", "4"}}));
  auto first = core->Cycle(1);
  ASSERT_EQ(first.notices.size(), 1u);
  const std::string before = first.notices[0].message;
  // A second, full node: the same reason with other figures is held back...
  core->UpsertNode(GpuNodeJson("b", 8));
  core->UpsertPod(PodJson("ml", "full", {{"nvidia.com/gpu", "8"}}, {}, "b"));
  auto second = core->Cycle(2);
  EXPECT_TRUE(second.notices.empty()) << second.notices[0].message << " after " << before;
  EXPECT_TRUE(core->Cycle(20).notices.empty());
  // ...until the interval has passed.
  auto later = core->Cycle(31.5);
  ASSERT_EQ(later.notices.size(), 1u);
  EXPECT_NE(later.notices[0].message, before);
  // A reason that says something new goes out at once: a gang's count of missing members.
  const Json gang = {{"tessera.io/gang", "g"}, {"tessera.io/min-member", "8"}};
  core->UpsertPod(PodJson("ml", "m0", {{"nvidia.com/gpu", "1"}}, gang));
  auto one = core->Cycle(33);
  ASSERT_EQ(one.notices.size(), 1u);
  core->UpsertPod(PodJson("ml", "m1", {{"nvidia.com/gpu", "1"}}, gang));
  auto two = core->Cycle(34);
  ASSERT_EQ(two.notices.size(), 2u);
  for (const auto& n : two.notices)
    EXPECT_EQ(n.message.rfind("gang waits for 6 more pods", 0), 0u) << n.message;
}

TEST(SchedulerCoreTest, InvalidRequestsBecomeNotices) {
  auto core = Core();
  core->UpsertNode(GpuNodeJson("a", 4));
  core->UpsertPod(PodJson("ml", "bad", {{"nvidia.com/gpu", "1.5"}}));
  const auto out = core->Cycle(1);
  EXPECT_TRUE(out.binds.empty());
  ASSERT_EQ(out.notices.size(), 1u);
  EXPECT_EQ(out.notices[0].reason, "InvalidRequest");
  EXPECT_NE(out.notices[0].message.find("integer"), std::string::npos) << out.notices[0].message;
}

TEST(SchedulerCoreTest, RebuildsFromAnnotationsWithoutDoubleAssignment) {
  auto first = Core();
  first->UpsertNode(GpuNodeJson("a", 4));
  first->UpsertPod(PodJson("ml", "p1", {{"nvidia.com/gpu", "2"}}));
  const auto binds = first->Cycle(1).binds;
  ASSERT_EQ(binds.size(), 1u);
  const std::string ann = binds[0].annotations.at(kAnnotationAssignment);
  // A new scheduler sees the bound pod (with its annotation) and a new pending pod.
  auto second = Core();
  second->UpsertNode(GpuNodeJson("a", 4));
  second->UpsertPod(
      PodJson("ml", "p1", {{"nvidia.com/gpu", "2"}}, {{kAnnotationAssignment, ann}}, "a"));
  second->UpsertPod(PodJson("ml", "p2", {{"nvidia.com/gpu", "2"}}));
  second->UpsertPod(PodJson("ml", "p3", {{"nvidia.com/gpu", "1"}}));
  const auto out = second->Cycle(2);
  const auto b = ByPod(out);
  ASSERT_EQ(b.count("ml/p2"), 1u);
  EXPECT_EQ(b.count("ml/p3"), 0u);  // 4 GPUs: p1 holds 2, p2 takes 2
  auto a1 = DecodeAssignment(ann);
  auto a2 = DecodeAssignment(b.at("ml/p2").annotations.at(kAnnotationAssignment));
  std::set<int> used(a1->gpus.begin(), a1->gpus.end());
  for (int g : a2->gpus) EXPECT_TRUE(used.insert(g).second) << "GPU " << g << " assigned twice";
  EXPECT_EQ(second->stats().adopted, 1);
  // A bound pod claiming GPUs already taken is reported, not double-counted.
  second->UpsertPod(
      PodJson("ml", "intruder", {{"nvidia.com/gpu", "2"}}, {{kAnnotationAssignment, ann}}, "a"));
  const auto out2 = second->Cycle(3);
  bool reported = false;
  for (const auto& n : out2.notices) reported |= n.reason == "AdoptFailed" && n.name == "intruder";
  EXPECT_TRUE(reported);
  EXPECT_TRUE(second->cluster().CheckInvariants().ok());
}

TEST(SchedulerCoreTest, BoundPodWithAnInvalidAssignmentStillHoldsItsGpus) {
  // Anyone who can edit a pod can write its annotation: a bound pod whose assignment does not
  // decode still holds its GPUs on the node.
  auto core = Core();
  core->UpsertNode(GpuNodeJson("a", 4));
  core->UpsertPod(PodJson("zq", "foreign", {{"nvidia.com/gpu", "3"}},
                          {{kAnnotationAssignment, "not json"}}, "a"));
  EXPECT_EQ(core->stats().invalid, 1);
  core->UpsertPod(PodJson("ml", "one", {{"nvidia.com/gpu", "1"}}));
  core->UpsertPod(PodJson("ml", "another", {{"nvidia.com/gpu", "1"}}));
  const auto b = ByPod(core->Cycle(1));
  EXPECT_EQ(b.size(), 1u);  // 3 of the 4 GPUs are held: room for one of the two
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
}

TEST(SchedulerCoreTest, GangsFormAndALostNodeRequeuesThemWhole) {
  auto core = Core();
  core->UpsertNode(GpuNodeJson("a", 4));
  core->UpsertNode(GpuNodeJson("b", 4));
  for (int i = 0; i < 3; ++i)
    core->UpsertPod(PodJson("ml", "g-" + std::to_string(i), {{"nvidia.com/gpu", "2"}},
                            {{kAnnotationGang, "train"}, {kAnnotationMinMember, "4"}}));
  EXPECT_TRUE(core->Cycle(1).binds.empty());  // 3 of 4 members
  EXPECT_EQ(core->WhyPending("ml/g-0"), "waiting for its gang to form");
  core->UpsertPod(PodJson("ml", "g-3", {{"nvidia.com/gpu", "2"}},
                          {{kAnnotationGang, "train"}, {kAnnotationMinMember, "4"}}));
  const auto out = core->Cycle(2);
  ASSERT_EQ(out.binds.size(), 4u);
  std::set<std::string> nodes;
  for (const auto& b : out.binds) nodes.insert(b.node);
  EXPECT_EQ(nodes.size(), 2u);
  // Confirm the binds, then lose node b: the whole gang goes (pods on a are evicted).
  for (const auto& b : out.binds)
    core->UpsertPod(PodJson("ml", b.name, {{"nvidia.com/gpu", "2"}},
                            {{kAnnotationGang, "train"},
                             {kAnnotationMinMember, "4"},
                             {kAnnotationAssignment, b.annotations.at(kAnnotationAssignment)}},
                            b.node));
  core->DeleteNode(GpuNodeJson("b", 4));
  const auto out2 = core->Cycle(3);
  int evicted_on_a = 0;
  for (const auto& e : out2.evictions) {
    for (const auto& b : out.binds)
      if (b.name == e.name && b.node == "a") ++evicted_on_a;
  }
  EXPECT_EQ(evicted_on_a, 2);
  EXPECT_EQ(core->cluster().num_allocations(), 0u);
  EXPECT_EQ(core->stats().requeued_by_node, 1);
}

TEST(SchedulerCoreTest, PreemptionWaitsForVictimsAndHonoursBlockedEvictions) {
  auto core = Core();
  core->UpsertNode(GpuNodeJson("a", 2));
  Json prio = {{"priority", 10}};
  core->UpsertPod(PodJson("ml", "low", {{"nvidia.com/gpu", "2"}}));
  const auto first = core->Cycle(1);
  ASSERT_EQ(first.binds.size(), 1u);
  core->UpsertPod(PodJson(
      "ml", "low", {{"nvidia.com/gpu", "2"}},
      {{kAnnotationAssignment, first.binds[0].annotations.at(kAnnotationAssignment)}}, "a"));
  core->UpsertPod(PodJson("ml", "high", {{"nvidia.com/gpu", "2"}}, Json::object(), "", prio));
  const auto out = core->Cycle(2);
  ASSERT_EQ(out.evictions.size(), 1u);
  EXPECT_EQ(out.evictions[0].name, "low");
  EXPECT_TRUE(out.binds.empty());  // held until the victim is gone
  // A PodDisruptionBudget blocks the eviction: the victim stays, the preemptor waits again and
  // is not allowed to evict it once more.
  core->EvictionFailed(out.evictions[0], Status(StatusCode::kResourceExhausted, "429 blocked"));
  for (double t = 3; t < 6; ++t) {
    const auto o = core->Cycle(t);
    EXPECT_TRUE(o.evictions.empty());
    EXPECT_TRUE(o.binds.empty());
  }
  EXPECT_TRUE(core->cluster().CheckInvariants().ok());
  EXPECT_EQ(core->cluster().free(0).gpu_total, 0);  // the victim's GPUs are accounted again
  // Once the victim really leaves, the preemptor binds.
  core->DeletePod(PodJson("ml", "low", Json::object()));
  const auto later = core->Cycle(7);
  ASSERT_EQ(later.binds.size(), 1u);
  EXPECT_EQ(later.binds[0].name, "high");
}

TEST(SchedulerConfigTest, ParsesAndRejectsWithPaths) {
  auto ok = ParseSchedulerConfig(R"(
schedulerName: tessera
leaderElection: {enabled: true, namespace: tessera-system}
metricsAddress: "0.0.0.0:10259"
admission: {usageHalfLifeSeconds: 600, gpuEquivalents: {T4: 0.1}}
queues:
  - name: a
    cohort: org
    flavors: [{name: h100, models: [H100-80GB], nominal: {gpu: 8, cpu: 64, memoryGiB: 512}}]
)");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_TRUE(ok->leader_elect);
  EXPECT_EQ(ok->leader.ns, "tessera-system");
  EXPECT_EQ(ok->core.queues.at(0).flavors.at(0).nominal.gpu, 8000);
  EXPECT_EQ(ok->core.queues.at(0).within_queue, WithinQueuePreemption::kLowerPriority);
  auto policy = ParseSchedulerConfig(R"(
queues:
  - {name: a, withinQueue: LowerOrNewerEqualPriority, reclaimWithinCohort: LowerPriority,
     queueingStrategy: StrictFIFO, flavors: [{name: f, nominal: {gpu: 1}}]}
  - {name: b, preemptWithinQueue: false, reclaim: false, flavors: [{name: f, nominal: {gpu: 1}}]}
)");
  ASSERT_TRUE(policy.ok()) << policy.status().message();
  EXPECT_EQ(policy->core.queues[0].within_queue, WithinQueuePreemption::kLowerOrNewerEqualPriority);
  EXPECT_EQ(policy->core.queues[0].reclaim, ReclaimPreemption::kLowerPriority);
  EXPECT_EQ(policy->core.queues[0].queueing, QueueingStrategy::kStrictFifo);
  EXPECT_EQ(policy->core.queues[1].within_queue, WithinQueuePreemption::kNever);
  EXPECT_EQ(policy->core.queues[1].reclaim, ReclaimPreemption::kNever);
  const std::pair<const char*, const char*> bad[] = {
      {"policy: nope", "unknown policy 'nope'"},
      {"queues: [{name: a, flavors: [{name: f, nominal: {gpus: 1}}]}]",
       "queues[0].flavors[0].nominal.gpus: unknown key"},
      {"queues: [{name: a, flavors: [{name: f, models: [X1], nominal: {gpu: 1}}]}]",
       "unknown GPU model 'X1'"},
      {"binding: {threads: 0}", "binding.threads must be 1..256"},
      {"admission: {gpuEquivalents: {T4: -1}}", "weight of T4 must be in (0, 1000]"},
      {"leaderElection: {enabled: true, retryPeriodSeconds: 20}", "retry period < renew deadline"},
      {"schedulerName: [", "line 1"},
      {"queues: [{name: a, withinQueue: Sometimes, flavors: [{name: f, nominal: {gpu: 1}}]}]",
       "queues[0].withinQueue: within-queue preemption: 'Sometimes' is not one of"},
      {"queues: [{name: a, reclaim: true, reclaimWithinCohort: Any, flavors: [{name: f, "
       "nominal: {gpu: 1}}]}]",
       "give either reclaim or reclaimWithinCohort"},
  };
  for (const auto& [text, want] : bad) {
    auto r = ParseSchedulerConfig(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
}

TEST(SchedulerCoreTest, MetricsExposition) {
  auto core = Core();
  core->UpsertNode(GpuNodeJson("a", 2));
  core->UpsertPod(PodJson("ml", "half", {{"tessera.io/gpu-memory", "40Gi"}}));
  core->UpsertPod(PodJson("ml", "big", {{"nvidia.com/gpu", "4"}}));
  (void)core->Cycle(1);
  const std::string m = core->Metrics(11);
  EXPECT_NE(m.find("tessera_pending_pods{queue=\"default\"} 2"), std::string::npos) << m;
  EXPECT_NE(m.find("tessera_pending_oldest_seconds{queue=\"default\"} 10"), std::string::npos) << m;
  EXPECT_NE(m.find("tessera_gpu_allocated_ratio 0.25"), std::string::npos) << m;
  EXPECT_NE(m.find("tessera_gpu_fragmentation_ratio 0.33"), std::string::npos) << m;
  EXPECT_NE(m.find("tessera_queue_used_gpus{queue=\"default\"} 0.5"), std::string::npos) << m;
  EXPECT_EQ(m.find("tessera_queue_nominal_gpus{"), std::string::npos) << m;  // no quota
}

TEST(SchedulerCoreTest, MetricsPodAllocationFollowsTheAssignment) {
  auto core = Core();
  core->UpsertNode(GpuNodeJson("a", 4));
  core->UpsertPod(PodJson("ml", "half", {{"tessera.io/gpu-memory", "40Gi"}}));
  core->UpsertPod(PodJson("ml", "two", {{"nvidia.com/gpu", "2"}}));
  const auto out = core->Cycle(1);
  ASSERT_EQ(out.binds.size(), 2u);
  EXPECT_EQ(core->Metrics(2).find("tessera_pod_allocated_gpus{"), std::string::npos);
  for (const auto& b : out.binds) {
    Json limits =
        b.name == "two" ? Json{{"nvidia.com/gpu", "2"}} : Json{{"tessera.io/gpu-memory", "40Gi"}};
    core->UpsertPod(PodJson("ml", b.name, limits,
                            {{kAnnotationAssignment, b.annotations.at(kAnnotationAssignment)}},
                            b.node));
  }
  const std::string m = core->Metrics(3);
  for (const auto& [pod, want] : std::vector<std::pair<std::string, std::string>>{
           {"two", "queue=\"default\",model=\"H100-80GB\",kind=\"exclusive\"} 2\n"},
           {"half", "queue=\"default\",model=\"H100-80GB\",kind=\"mps\"} 0.5\n"}}) {
    const std::string series =
        "tessera_pod_allocated_gpus{namespace=\"ml\",pod=\"" + pod + "\"," + want;
    EXPECT_NE(m.find(series), std::string::npos) << series << "\n" << m;
  }
}

// ---- end to end through HTTP
// ---------------------------------------------------------------------

struct E2E {
  testing::FakeApiServer server;
  std::unique_ptr<Client> client;
  E2E() {
    EXPECT_TRUE(server.Start().ok());
    auto c = Client::Create(server.client_config());
    EXPECT_TRUE(c.ok());
    client = std::move(c.value());
  }
};

SchedulerRuntimeConfig ThreeQueues() {
  auto cfg = ParseSchedulerConfig(R"(
schedulerName: tessera
policy: bestfit
cycleIntervalSeconds: 0.01
gangSettleSeconds: 0.2
binding: {threads: 8}
queues:
  - name: team-a
    cohort: org
    flavors: [{name: gpu, nominal: {gpu: 600}}]
  - name: team-b
    cohort: org
    flavors: [{name: gpu, nominal: {gpu: 600}}]
  - name: team-c
    cohort: org
    weight: 2
    flavors: [{name: gpu, nominal: {gpu: 350}, borrowingLimit: {gpu: 50}}]
)");
  EXPECT_TRUE(cfg.ok()) << cfg.status().message();
  return cfg.ok() ? *cfg : SchedulerRuntimeConfig{};
}

// Creates 100 nodes x 16 GPUs and 1,000 pods: whole GPUs (1, 2, 4), memory shares, 8-pod gangs,
// in three queues.
void Populate(testing::FakeApiServer& s, int pods = 1000, int first = 0) {
  if (first == 0) {
    for (int n = 0; n < 100; ++n)
      ASSERT_TRUE(s.Create("/api/v1/nodes", GpuNodeJson("node-" + std::to_string(n), 16)).ok());
  }
  const char* queues[] = {"team-a", "team-b", "team-c"};
  int made = first, gang = first;
  pods += first;
  while (made < pods) {
    const int kind = made % 10;
    const std::string q = queues[made % 3];
    if (kind == 9 && made + 8 <= pods) {
      const std::string g = "gang-" + std::to_string(gang++);
      for (int i = 0; i < 8; ++i, ++made)
        ASSERT_TRUE(s.Create("/api/v1/namespaces/ml/pods",
                             PodJson("ml", g + "-" + std::to_string(i), {{"nvidia.com/gpu", "1"}},
                                     {{kAnnotationQueue, q},
                                      {kAnnotationGang, g},
                                      {kAnnotationMinMember, "8"}}))
                        .ok());
      continue;
    }
    Json limits = kind < 3 ? Json{{"nvidia.com/gpu", "1"}}
                  : kind < 5
                      ? Json{{"nvidia.com/gpu", kind == 3 ? "2" : "4"}}
                      : Json{{"tessera.io/gpu-memory", std::to_string(8 + 4 * (kind - 5)) + "Gi"}};
    ASSERT_TRUE(s.Create("/api/v1/namespaces/ml/pods", PodJson("ml", "p-" + std::to_string(made),
                                                               limits, {{kAnnotationQueue, q}}))
                    .ok());
    ++made;
  }
}

// Every pod bound exactly once, GPU assignments consistent with each node's inventory.
void CheckBindings(testing::FakeApiServer& s, size_t expect_bound) {
  size_t bound = 0;
  std::map<std::string, std::map<int, int>> milli;  // node -> gpu -> milli used
  for (const auto& p : s.List("/api/v1/namespaces/ml/pods")) {
    const std::string node = p["spec"].value("nodeName", "");
    if (node.empty()) continue;
    ++bound;
    EXPECT_EQ(s.BindingsOf("ml", p["metadata"]["name"]), 1) << p["metadata"]["name"];
    const auto& ann = p["metadata"]["annotations"];
    ASSERT_TRUE(ann.contains(kAnnotationAssignment)) << p["metadata"]["name"];
    auto a = DecodeAssignment(ann[kAnnotationAssignment].get<std::string>());
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->node, node);
    for (size_t i = 0; i < a->gpus.size(); ++i) {
      EXPECT_GE(a->gpus[i], 0);
      EXPECT_LT(a->gpus[i], 16);
      ASSERT_EQ(a->uuids.size(), a->gpus.size());
      EXPECT_EQ(a->uuids[i], "GPU-" + node + "-" + std::to_string(a->gpus[i]));
      milli[node][a->gpus[i]] += a->kind == AssignmentKind::kShare ? a->gpu_milli
                                 : a->kind == AssignmentKind::kMps ? a->mps_thread_pct * 10
                                                                   : 1000;
    }
  }
  for (const auto& [node, gpus] : milli)
    for (const auto& [g, m] : gpus) EXPECT_LE(m, 1000) << node << " GPU " << g << " over-assigned";
  EXPECT_EQ(bound, expect_bound);
}

void WaitBound(testing::FakeApiServer& s, size_t want, double timeout_s) {
  const auto t0 = std::chrono::steady_clock::now();
  struct Report {
    std::chrono::steady_clock::time_point t0;
    size_t want;
    ~Report() {
      if (getenv("TESSERA_TEST_VERBOSE"))
        fprintf(stderr, "WaitBound(%zu): %.2f s\n", want,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  } report{t0, want};
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < until) {
    size_t bound = 0;
    for (const auto& p : s.List("/api/v1/namespaces/ml/pods"))
      bound += !p["spec"].value("nodeName", "").empty();
    if (bound >= want) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

TEST(SchedulerE2ETest, ThousandPodsOntoHundredNodes) {
  E2E e;
  Populate(e.server);
  Scheduler sched(*e.client, ThreeQueues());
  std::atomic<bool> stop{false};
  std::thread t([&] { EXPECT_TRUE(sched.Run(stop).ok()); });
  WaitBound(e.server, 1000, 60);
  stop = true;
  t.join();
  CheckBindings(e.server, 1000);
  // Queues: team-c may use at most 350 + 50 GPU-equivalents.
  double c_gpus = 0;
  for (const auto& p : e.server.List("/api/v1/namespaces/ml/pods")) {
    if (p["metadata"]["annotations"].value(kAnnotationQueue, "") != "team-c") continue;
    auto a =
        DecodeAssignment(p["metadata"]["annotations"][kAnnotationAssignment].get<std::string>());
    if (a.ok())
      c_gpus += a->kind == AssignmentKind::kShare ? a->gpu_milli / 1000.0 : a->gpus.size();
  }
  EXPECT_LE(c_gpus, 400.0 + 1e-9);
  EXPECT_GT(c_gpus, 0);
  const auto st = sched.stats();
  EXPECT_EQ(st.binds_failed, 0);
}

TEST(SchedulerE2ETest, InformerCachesQueueObjects) {
  E2E e;
  const std::string path = "/apis/tessera.io/v1alpha1/queues";
  auto queue = [](const std::string& name, double gpus) {
    return Json{
        {"apiVersion", "tessera.io/v1alpha1"},
        {"kind", "Queue"},
        {"metadata", {{"name", name}}},
        {"spec", {{"flavors", Json::array({{{"name", "gpu"}, {"nominal", {{"gpu", gpus}}}}})}}}};
  };
  ASSERT_TRUE(e.server.Create(path, queue("team-a", 4)).ok());
  std::atomic<int> updates{0};
  InformerHandlers h;
  h.on_update = [&](const Json&, const Json&) { ++updates; };
  Informer inf(*e.client, path, {}, h);
  ASSERT_TRUE(inf.Start().ok());
  ASSERT_TRUE(e.server.Create(path, queue("team-b", 8)).ok());
  ASSERT_TRUE(e.server.MergePatch(path + "/team-a", {{"spec", {{"weight", 2}}}}).ok());
  for (int i = 0; i < 200 && (inf.size() < 2 || updates.load() < 1); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  inf.Stop();
  ASSERT_EQ(inf.size(), 2u);
  auto a = inf.Get("team-a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ((*a)["spec"].value("weight", 0.0), 2.0);
  auto qa = QueueFromObject(*a);
  ASSERT_TRUE(qa.ok()) << qa.status().message();
  EXPECT_EQ(qa->weight, 2.0);
  EXPECT_EQ(qa->flavors.at(0).nominal.gpu, 4000);
}

TEST(SchedulerE2ETest, QueueObjectsSetQuotas) {
  E2E e;
  ASSERT_TRUE(e.server.Create("/api/v1/nodes", GpuNodeJson("node-0", 8)).ok());
  ASSERT_TRUE(
      e.server
          .Create("/apis/tessera.io/v1alpha1/queues",
                  {{"apiVersion", "tessera.io/v1alpha1"},
                   {"kind", "Queue"},
                   {"metadata", {{"name", "team-x"}}},
                   {"spec",
                    {{"weight", 1},
                     {"flavors", Json::array({{{"name", "gpu"}, {"nominal", {{"gpu", 2}}}}})},
                     {"preemption", {{"withinQueue", "Never"}}}}}})
          .ok());
  // A Queue object that the CRD's schema lets through but admission refuses (weight 0) is
  // skipped with a message; it must not stop the scheduler.
  ASSERT_TRUE(
      e.server
          .Create("/apis/tessera.io/v1alpha1/queues",
                  {{"apiVersion", "tessera.io/v1alpha1"},
                   {"kind", "Queue"},
                   {"metadata", {{"name", "zero-w"}}},
                   {"spec",
                    {{"weight", 0},
                     {"flavors", Json::array({{{"name", "gpu"}, {"nominal", {{"gpu", 2}}}}})}}}})
          .ok());
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(e.server
                    .Create("/api/v1/namespaces/ml/pods",
                            PodJson("ml", "x-" + std::to_string(i), {{"nvidia.com/gpu", "1"}},
                                    {{kAnnotationQueue, "team-x"}}))
                    .ok());
  SchedulerRuntimeConfig cfg;
  cfg.cycle_interval_s = 0.01;
  Scheduler sched(*e.client, cfg);
  std::atomic<bool> stop{false};
  std::thread t([&] { EXPECT_TRUE(sched.Run(stop).ok()); });
  WaitBound(e.server, 2, 30);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  t.join();
  size_t bound = 0;
  std::string waiting;
  for (const auto& p : e.server.List("/api/v1/namespaces/ml/pods")) {
    if (!p["spec"].value("nodeName", "").empty()) {
      ++bound;
      continue;
    }
    for (const auto& c : p["status"].value("conditions", Json::array()))
      if (c.value("type", "") == "PodScheduled") waiting = c.value("message", "");
  }
  EXPECT_EQ(bound, 2u);  // the Queue object's quota of 2 GPUs
  EXPECT_NE(waiting.find("quota of gpu in team-x exhausted"), std::string::npos) << waiting;
  // Invalid Queue objects are reported, not used.
  auto bad = QueueFromObject({{"metadata", {{"name", "q"}}}, {"spec", {{"weight", 0}}}});
  EXPECT_FALSE(bad.ok());
  // The priority policy of a Queue object: preemption and queueing strategy.
  auto policy = QueueFromObject(
      {{"metadata", {{"name", "q"}}},
       {"spec",
        {{"flavors", Json::array({{{"name", "gpu"}, {"nominal", {{"gpu", 2}}}}})},
         {"queueingStrategy", "StrictFIFO"},
         {"preemption",
          {{"withinQueue", "LowerOrNewerEqualPriority"}, {"reclaimWithinCohort", "Never"}}}}}});
  ASSERT_TRUE(policy.ok()) << policy.status().message();
  EXPECT_EQ(policy->within_queue, WithinQueuePreemption::kLowerOrNewerEqualPriority);
  EXPECT_EQ(policy->reclaim, ReclaimPreemption::kNever);
  EXPECT_EQ(policy->queueing, QueueingStrategy::kStrictFifo);
}

TEST(SchedulerE2ETest, UnschedulableConditionKeepsOtherConditions) {
  E2E e;
  ASSERT_TRUE(e.server.Create("/api/v1/nodes", GpuNodeJson("node-0", 8)).ok());
  const std::string pod = "/api/v1/namespaces/ml/pods/too-big";
  ASSERT_TRUE(
      e.server
          .Create("/api/v1/namespaces/ml/pods", PodJson("ml", "too-big", {{"nvidia.com/gpu", "9"}}))
          .ok());
  // A condition another controller wrote (a readiness gate, say) before Tessera looks.
  const Json foreign = {{"type", "example.com/Audited"}, {"status", "True"}};
  ASSERT_TRUE(e.server.MergePatch(pod + "/status", {{"status", {{"conditions", {foreign}}}}}).ok());
  SchedulerRuntimeConfig cfg;
  cfg.cycle_interval_s = 0.01;
  Scheduler sched(*e.client, cfg);
  std::atomic<bool> stop{false};
  std::thread t([&] { EXPECT_TRUE(sched.Run(stop).ok()); });
  Json conditions;
  for (int i = 0; i < 500; ++i) {
    auto p = e.server.Get(pod);
    ASSERT_TRUE(p.has_value());
    conditions = (*p)["status"].value("conditions", Json::array());
    bool unschedulable = false;
    for (const auto& c : conditions)
      unschedulable |= c.value("type", "") == "PodScheduled" && c.value("status", "") == "False";
    if (unschedulable) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  t.join();
  ASSERT_EQ(conditions.size(), 2u) << conditions.dump();
  const bool first = conditions[0] == foreign;  // the order of merged items is not specified
  EXPECT_EQ(conditions[first ? 0 : 1], foreign);
  EXPECT_EQ(conditions[first ? 1 : 0]["type"], "PodScheduled");
  EXPECT_EQ(conditions[first ? 1 : 0]["reason"], "Unschedulable");
}

TEST(SchedulerE2ETest, RestartAndHandoverUnderFaults) {
  E2E e;
  Populate(e.server, 200);
  e.server.SetFailureRate(0.05);
  e.server.SetDropWatchesAfterEvents(150);
  auto cfg = ThreeQueues();
  cfg.leader_elect = true;
  cfg.leader.ns = "kube-system";
  cfg.leader.lease_duration_s = 1.5;
  cfg.leader.renew_deadline_s = 1.0;
  cfg.leader.retry_period_s = 0.2;
  // Replica A schedules part of the work, then stops (its lease is released).
  cfg.leader.identity = "replica-a";
  {
    Scheduler a(*e.client, cfg);
    std::atomic<bool> stop{false};
    std::thread t([&] { (void)a.Run(stop); });
    WaitBound(e.server, 200, 60);
    stop = true;
    t.join();
  }
  // Replicas B and C race for the lease; only the holder binds; the first one is stopped
  // mid-run and the other takes over.
  auto cb = cfg;
  cb.leader.identity = "replica-b";
  auto cc = cfg;
  cc.leader.identity = "replica-c";
  Scheduler b(*e.client, cb), c(*e.client, cc);
  std::atomic<bool> stop_b{false}, stop_c{false};
  std::thread tb([&] { (void)b.Run(stop_b); });
  std::thread tc([&] { (void)c.Run(stop_c); });
  Populate(e.server, 200, 200);
  WaitBound(e.server, 400, 60);
  const bool b_leads = b.stats().leading;
  EXPECT_NE(b_leads, c.stats().leading);  // exactly one leader
  (b_leads ? stop_b : stop_c) = true;
  (b_leads ? tb : tc).join();
  Populate(e.server, 200, 400);
  WaitBound(e.server, 600, 60);
  e.server.ClearFaults();
  (b_leads ? stop_c : stop_b) = true;
  (b_leads ? tc : tb).join();
  CheckBindings(e.server, 600);
}

}  // namespace
}  // namespace tessera::kube
