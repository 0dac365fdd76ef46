// The closed loop's rules in the scheduler (docs/ADVISOR.md, "Closed loop"): a rightsized share
// whose recommended model is full runs on another model the pod allows within the compute bound,
// and the out-of-memory retry of a rightsized owner that fits nowhere preempts rightsized pods
// bound after the killed one (never earlier, higher-priority or non-rightsized pods), in the core
// and through the runtime against the fake API server.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <tuple>

#include "cluster/gpu_catalog.h"
#include "kube/rightsize.h"
#include "kube/scheduler.h"
#include "kube/scheduler_core.h"
#include "tests/kube/fake_apiserver.h"
#include "tests/kube/rightsize_objects.h"
#include "tests/kube/test_objects.h"

namespace tessera::kube {
namespace {

using kubetest::GpuNodeJson;
using rightsizetest::Core;
using rightsizetest::EventFor;
using rightsizetest::HasEvent;
using rightsizetest::PodJson;

struct OtherModelsCase {
  std::string name;
  std::string recommendation;
  double max_compute = 0.8;
  std::string pod_models;  // tessera.io/gpu-models of the pod; "" = any
  // Expected, among T4, P100, A10G, H100-80GB, G1 (other models are not checked):
  std::vector<std::string> want;
};

TEST(RightsizeOtherModelsTest, SameMemoryLimitWhereTheScaledComputeFits) {
  const std::vector<OtherModelsCase> cases = {
      // 0.3 of an L4 is 0.57 of a T4 and 1.9 of a P100; G1 discloses no memory.
      {"timeslice",
       R"({"slice":"timeslice","model":"L4","memory_mib":4096,"gpu_fraction":0.3})",
       0.8,
       "",
       {"T4", "A10G", "H100-80GB"}},
      {"bound",
       R"({"slice":"timeslice","model":"L4","memory_mib":4096,"gpu_fraction":0.3})",
       0.5,
       "",
       {"A10G", "H100-80GB"}},
      {"disabled",
       R"({"slice":"timeslice","model":"L4","memory_mib":4096,"gpu_fraction":0.3})",
       0,
       "",
       {}},
      // The thread % is not rescaled: only models where 30 % covers the need.
      {"mps-not-on-slower",
       R"({"slice":"mps","model":"L4","memory_mib":4096,"thread_pct":30})",
       0.8,
       "",
       {"H100-80GB"}},
      {"memory-beyond-t4",
       R"({"slice":"timeslice","model":"L4","memory_mib":20000,"gpu_fraction":0.3})",
       0.8,
       "",
       {"A10G", "H100-80GB"}},
      {"pod-restricts",
       R"({"slice":"timeslice","model":"L4","memory_mib":4096,"gpu_fraction":0.3})",
       0.8,
       "L4,T4",
       {"T4"}},
      {"compute-unknown", R"({"slice":"timeslice","model":"L4","memory_mib":4096})", 0.8, "", {}},
      {"mig", R"({"slice":"mig","model":"A100-80GB","mig_profile":"1g.10gb"})", 0.8, "", {}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto rec = DecodeRecommendation(c.recommendation);
    ASSERT_TRUE(rec.ok()) << rec.status().message();
    Json ann = Json::object();
    if (!c.pod_models.empty()) ann[kAnnotationGpuModels] = c.pod_models;
    auto pod = TranslatePod(PodJson("p", {{"nvidia.com/gpu", "1"}}, ann));
    ASSERT_TRUE(pod.ok());
    std::vector<std::string> got;
    for (GpuModelId m : OtherModelsFor(*rec, rec->request, pod->demand, c.max_compute)) {
      const std::string& n = GpuCatalog::Builtin().Get(m).name;
      if (n == "T4" || n == "P100" || n == "A10G" || n == "H100-80GB" || n == "G1")
        got.push_back(n);
    }
    std::vector<std::string> want = c.want;
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want);
  }
}

// The recommended model is full: the grant lands on another model with the same memory limit,
// or waits when the bound forbids it.
TEST(RightsizeOtherModelsTest, FullRecommendedModelAdmitsOnAnother) {
  const struct {
    std::string name;
    double max_compute;
    double gpu_fraction;
    bool lands;
  } cases[] = {{"lands-on-t4", 0.8, 0.3, true},
               {"disabled", 0, 0.3, false},
               {"too-much-compute-for-t4", 0.8, 0.5, false}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    SchedulerConfig cfg;
    cfg.rightsize_other_model_max_compute = c.max_compute;
    auto core = SchedulerCore::Create(cfg);
    ASSERT_TRUE(core.ok());
    (*core)->UpsertNode(GpuNodeJson("l", 1, "L4"));
    (*core)->UpsertNode(GpuNodeJson("t", 1, "T4"));
    (*core)->UpsertPod(PodJson("fill", {{"nvidia.com/gpu", "1"}}, {{kAnnotationGpuModels, "L4"}}));
    auto out = (*core)->Cycle(1);
    ASSERT_EQ(out.binds.size(), 1u);
    EXPECT_EQ(out.binds[0].node, "l");
    const Json rec = {{"slice", "timeslice"},
                      {"model", "L4"},
                      {"memory_mib", 4096},
                      {"gpu_fraction", c.gpu_fraction}};
    (*core)->UpsertPod(
        PodJson("p", {{"nvidia.com/gpu", "1"}},
                {{kAnnotationRightsize, "auto"}, {kAnnotationRecommendation, rec.dump()}}));
    out = (*core)->Cycle(2);
    if (!c.lands) {
      EXPECT_TRUE(out.binds.empty());
      continue;
    }
    ASSERT_EQ(out.binds.size(), 1u);
    EXPECT_EQ(out.binds[0].node, "t");
    const Json applied = Json::parse(out.binds[0].annotations.at(kAnnotationRightsizeApplied));
    EXPECT_EQ(applied["to"]["memory_mib"], 4096);
    EXPECT_EQ(applied["model"], "L4");
    EXPECT_NE(applied["other_models"].dump().find("\"T4\""), std::string::npos) << applied;
    const PodEventAction* e = EventFor(out, "p");
    ASSERT_NE(e, nullptr);
    EXPECT_NE(e->note.find("may also run on"), std::string::npos) << e->note;
    // A restarted scheduler reads the models back from the annotation.
    auto restarted = Core();
    restarted->UpsertNode(GpuNodeJson("l", 1, "L4"));
    restarted->UpsertNode(GpuNodeJson("t", 1, "T4"));
    Json bound =
        PodJson("p", {{"nvidia.com/gpu", "1"}},
                {{kAnnotationRightsize, "auto"}, {kAnnotationRecommendation, rec.dump()}}, "t");
    for (const auto& [k, v] : out.binds[0].annotations) bound["metadata"]["annotations"][k] = v;
    restarted->UpsertPod(bound);
    EXPECT_EQ(restarted->stats().adopted, 1);
    EXPECT_EQ(restarted->stats().adopt_failures, 0);
  }
}

// A pod of Deployment `deployment` (ReplicaSet <deployment>-7f9c) in namespace ml.
Json OwnedPod(const std::string& name, const std::string& deployment, Json limits, Json ann,
              int priority = 0) {
  Json pod = PodJson(name, std::move(limits), std::move(ann));
  pod["metadata"]["ownerReferences"][0]["name"] = deployment + "-7f9c";
  pod["spec"]["priority"] = priority;
  return pod;
}

Json MpsRec(int64_t memory_mib) {
  return Json{
      {"slice", "mps"}, {"model", "H100-80GB"}, {"memory_mib", memory_mib}, {"thread_pct", 30}}
      .dump();
}

Json AsBound(Json pod, const BindAction& b) {
  pod["spec"]["nodeName"] = b.node;
  for (const auto& [k, v] : b.annotations) pod["metadata"]["annotations"][k] = v;
  pod["status"]["phase"] = "Running";
  return pod;
}

// A tessera.io/rightsize: auto pod's annotations with an MPS recommendation of `mib`.
Json AutoAnn(int64_t mib) {
  return Json{{kAnnotationRightsize, "auto"}, {kAnnotationRecommendation, MpsRec(mib)}};
}

// Submits `pod`, runs one cycle at `now` (then advanced) and confirms its bind; the pod as bound.
Json Admit(SchedulerCore& core, double& now, const Json& pod) {
  core.UpsertPod(pod);
  for (const auto& b : core.Cycle(now++).binds)
    if (b.name == pod["metadata"]["name"]) {
      Json bound = AsBound(pod, b);
      core.UpsertPod(bound);
      return bound;
    }
  ADD_FAILURE() << "not bound: " << pod["metadata"]["name"];
  return pod;
}

// `pod` with its container killed out of memory once and running again.
Json OomKilled(Json pod) {
  pod["status"]["containerStatuses"] =
      Json::array({{{"name", "main"},
                    {"restartCount", 1},
                    {"state", {{"running", Json::object()}}},
                    {"lastState", {{"terminated", {{"reason", "OOMKilled"}}}}}}});
  return pod;
}

struct OomPreemptCase {
  std::string name;
  bool late_first = false;      // "late" is bound before the killed pod
  int late_priority = 0;        // the retry's is 0
  bool late_rightsized = true;  // else it asks its share itself
  bool spare_node = false;      // another node has room
  // Expected:
  std::vector<std::string> evicted;
  bool retry_binds_at_once = false;
};

// One H100 holds "early" (16 GiB, bound before the killed pod), the killed llm-1 (32 GiB) and
// "late" (24 GiB). llm-1 is killed out of memory and deleted; its retry llm-2 (48 GiB) fits only
// if a pod leaves. Evicting "early" alone would make room too: the rule, not the size, protects
// it.
TEST(RightsizeOomPreemptTest, RetryPreemptsOnlyLaterRightsizedPodsOfNoHigherPriority) {
  const std::vector<OomPreemptCase> cases = {
      {"preempts-later", false, 0, true, false, {"late"}, false},
      {"not-earlier", true, 0, true, false, {}, false},
      {"not-higher-priority", false, 10, true, false, {}, false},
      {"not-non-rightsized", false, 0, false, false, {}, false},
      {"no-preemption-when-it-fits", false, 0, true, true, {}, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto core = Core();
    core->UpsertNode(GpuNodeJson("h", 1));
    double now = 1;
    auto admit = [&](const Json& pod) { return Admit(*core, now, pod); };
    const Json gpu1 = {{"nvidia.com/gpu", "1"}};
    const Json late_pod =
        c.late_rightsized
            ? OwnedPod("late", "web", gpu1, AutoAnn(24576), c.late_priority)
            : OwnedPod("late", "web",
                       {{"tessera.io/gpu-memory", "24Gi"}, {"tessera.io/gpu-compute", "30"}},
                       Json::object(), c.late_priority);
    admit(OwnedPod("early", "web", gpu1, AutoAnn(16384)));
    if (c.late_first) admit(late_pod);
    Json killed = admit(OwnedPod("llm-1", "llm", gpu1, AutoAnn(32768)));
    if (!c.late_first) admit(late_pod);
    killed = OomKilled(killed);
    core->UpsertPod(killed);
    core->DeletePod(killed);
    if (c.spare_node) core->UpsertNode(GpuNodeJson("h2", 1));
    core->UpsertPod(OwnedPod("llm-2", "llm", gpu1, AutoAnn(32768)));
    CycleOutput out = core->Cycle(now++);
    std::vector<std::string> evicted;
    for (const auto& e : out.evictions) {
      evicted.push_back(e.name);
      EXPECT_EQ(e.reason, "making room for the out-of-memory retry of Deployment ml/llm");
    }
    EXPECT_EQ(evicted, c.evicted);
    EXPECT_EQ(core->stats().rightsize_oom_preemptions, static_cast<int64_t>(c.evicted.size()));
    EXPECT_NE(core->Metrics(now).find("tessera_rightsize_oom_preemptions_total " +
                                      std::to_string(c.evicted.size())),
              std::string::npos);
    const bool bound_now = std::any_of(out.binds.begin(), out.binds.end(),
                                       [](const BindAction& b) { return b.name == "llm-2"; });
    EXPECT_EQ(bound_now, c.retry_binds_at_once);
    if (c.evicted.empty()) {
      if (!c.retry_binds_at_once) {
        EXPECT_TRUE(core->Cycle(now++).evictions.empty());
      }
      continue;
    }
    EXPECT_TRUE(std::any_of(out.events.begin(), out.events.end(), [](const PodEventAction& e) {
      return e.name == "llm-2" && e.reason == "RightsizeOomPreempting" &&
             e.note.find("ml/late") != std::string::npos;
    }));
    // Once the victim is gone, the retry binds at its grown grant.
    core->DeletePod(late_pod);
    out = core->Cycle(now++);
    ASSERT_EQ(out.binds.size(), 1u);
    EXPECT_EQ(out.binds[0].name, "llm-2");
    EXPECT_EQ(
        Json::parse(out.binds[0].annotations.at(kAnnotationRightsizeApplied))["to"]["memory_mib"],
        49152);
  }
}

// Through the runtime: the retry of a pod killed out of memory evicts a rightsized pod bound
// after the killed one (a Preempted Event says why) and binds once it is gone; the pod bound
// before stays.
TEST(RightsizeE2ETest, OomRetryPreemptsALaterPod) {
  testing::FakeApiServer server;
  ASSERT_TRUE(server.Start().ok());
  auto client = Client::Create(server.client_config());
  ASSERT_TRUE(client.ok());
  const std::string pods = "/api/v1/namespaces/ml/pods";
  ASSERT_TRUE(server.Create("/api/v1/nodes", GpuNodeJson("h", 1)).ok());
  SchedulerRuntimeConfig cfg;
  cfg.cycle_interval_s = 0.01;
  Scheduler sched(**client, cfg);
  std::atomic<bool> stop{false};
  std::thread t([&] { EXPECT_TRUE(sched.Run(stop).ok()); });
  auto wait_for = [&](const std::function<bool()>& done) {
    for (int i = 0; i < 500; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  auto bound = [&](const std::string& name) {
    auto p = server.Get(pods + "/" + name);
    return p && !(*p)["spec"].value("nodeName", "").empty();
  };
  const Json gpu1 = {{"nvidia.com/gpu", "1"}};
  // Admitted one after the other: early, llm-1, late.
  for (const auto& [name, owner, mib] :
       {std::tuple{"early", "web", 16384}, {"llm-1", "llm", 32768}, {"late", "web", 24576}}) {
    ASSERT_TRUE(server.Create(pods, OwnedPod(name, owner, gpu1, AutoAnn(mib))).ok());
    ASSERT_TRUE(wait_for([&] { return bound(name); })) << name;
  }
  const Json oom = {
      {"status",
       {{"phase", "Running"},
        {"containerStatuses",
         Json::array({{{"name", "main"},
                       {"restartCount", 1},
                       {"state", {{"running", Json::object()}}},
                       {"lastState", {{"terminated", {{"reason", "OOMKilled"}}}}}}})}}}};
  ASSERT_TRUE(server.MergePatch(pods + "/llm-1/status", oom).ok());
  ASSERT_TRUE(wait_for([&] { return HasEvent(server, "llm-1", "RightsizeOomKilled"); }));
  // Its container would restart in place at 32 GiB: the scheduler evicts it, and the
  // ReplicaSet's replacement is the retry.
  ASSERT_TRUE(wait_for([&] {
    return !server.Get(pods + "/llm-1").has_value() &&
           HasEvent(server, "llm-1", kEventRightsizeOomRestart);
  }));
  ASSERT_TRUE(server.Create(pods, OwnedPod("llm-2", "llm", gpu1, AutoAnn(32768))).ok());
  const bool done = wait_for([&] { return bound("llm-2"); });
  stop = true;
  t.join();
  ASSERT_TRUE(done);
  EXPECT_FALSE(server.Get(pods + "/late").has_value());
  EXPECT_TRUE(server.Get(pods + "/early").has_value());
  bool preempted = false;
  for (const auto& e : server.List("/apis/events.k8s.io/v1/namespaces/ml/events"))
    preempted |=
        e.value("reason", "") == "Preempted" && e["regarding"].value("name", "") == "late" &&
        e.value("note", "").find("out-of-memory retry of Deployment ml/llm") != std::string::npos;
  EXPECT_TRUE(preempted);
  const Json a2 = (*server.Get(pods + "/llm-2"))["metadata"]["annotations"];
  EXPECT_EQ(a2.value(kAnnotationOomRetries, ""), "1");
  EXPECT_EQ(Json::parse(a2.value(kAnnotationRightsizeApplied, "{}"))["to"].value("memory_mib", 0),
            49152);
}

// The killed pod is evicted to restart elsewhere: while it is still there, its owner's retry
// waits for its room instead of preempting; once it is gone the retry binds in that room.
TEST(RightsizeOomPreemptTest, RetryWaitsForItsEvictedKilledPodInsteadOfPreempting) {
  auto core = Core();
  core->UpsertNode(GpuNodeJson("h", 1));
  double now = 1;
  const Json gpu1 = {{"nvidia.com/gpu", "1"}};
  auto admit = [&](const Json& pod) { return Admit(*core, now, pod); };
  // 24 + 32 GiB on the 80 GiB H100; the retry of llm-1 asks 36 GiB.
  Json killed = admit(OwnedPod("llm-1", "llm", gpu1, AutoAnn(24576)));
  admit(OwnedPod("late", "web", gpu1, AutoAnn(32768)));
  killed = OomKilled(killed);
  core->UpsertPod(killed);
  core->UpsertPod(OwnedPod("llm-2", "llm", gpu1, AutoAnn(24576)));
  CycleOutput out = core->Cycle(now++);
  ASSERT_EQ(out.evictions.size(), 1u);
  EXPECT_EQ(out.evictions[0].name, "llm-1");
  EXPECT_EQ(out.evictions[0].event_reason, kEventRightsizeOomRestart);
  EXPECT_TRUE(out.binds.empty());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(core->Cycle(now++).evictions.empty());
  EXPECT_EQ(core->stats().rightsize_oom_preemptions, 0);
  core->DeletePod(killed);
  out = core->Cycle(now++);
  EXPECT_TRUE(out.evictions.empty());
  ASSERT_EQ(out.binds.size(), 1u);
  EXPECT_EQ(out.binds[0].name, "llm-2");
  EXPECT_EQ(core->stats().rightsize_oom_preemptions, 0);
}

// A refused eviction of the killed pod leaves it running at its grant: the retry may then
// preempt a later pod.
TEST(RightsizeOomPreemptTest, RetryPreemptsOnceTheKilledPodsEvictionIsRefused) {
  auto core = Core();
  core->UpsertNode(GpuNodeJson("h", 1));
  double now = 1;
  const Json gpu1 = {{"nvidia.com/gpu", "1"}};
  auto admit = [&](const Json& pod) { return Admit(*core, now, pod); };
  // 24 + 32 GiB; the retry asks 36 GiB: with llm-1 staying, evicting "late" makes room.
  Json killed = admit(OwnedPod("llm-1", "llm", gpu1, AutoAnn(24576)));
  admit(OwnedPod("late", "web", gpu1, AutoAnn(32768)));
  killed = OomKilled(killed);
  core->UpsertPod(killed);
  core->UpsertPod(OwnedPod("llm-2", "llm", gpu1, AutoAnn(24576)));
  CycleOutput out = core->Cycle(now++);
  ASSERT_EQ(out.evictions.size(), 1u);
  EXPECT_EQ(out.evictions[0].name, "llm-1");
  core->EvictionFailed(out.evictions[0], Status(StatusCode::kResourceExhausted, "HTTP 429"));
  out = core->Cycle(now++);
  std::vector<std::string> evicted;
  for (const auto& e : out.evictions) evicted.push_back(e.name);
  EXPECT_EQ(evicted, std::vector<std::string>{"late"});
  EXPECT_EQ(core->stats().rightsize_oom_preemptions, 1);
}

}  // namespace
}  // namespace tessera::kube
