// Rightsizing at admission (tessera.io/rightsize): the grant of auto pods from the advisor's
// recommendation (floor, never above the request), recommend-only pods, malformed annotations,
// out-of-memory kills growing the owner's next pod and the back-off surviving a restart, and the
// same through the runtime against the fake API server (annotations at binding, Events).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "kube/rightsize.h"
#include "kube/scheduler.h"
#include "kube/scheduler_core.h"
#include "tests/kube/fake_apiserver.h"
#include "tests/kube/rightsize_objects.h"
#include "tests/kube/test_objects.h"

namespace tessera::kube {
namespace {

using kubetest::GpuNodeJson;
using kubetest::MigNodeJson;
using rightsizetest::Core;
using rightsizetest::EventFor;
using rightsizetest::HasEvent;
using rightsizetest::PodJson;

const char* kMps4G = R"({"slice":"mps","model":"H100-80GB","memory_mib":4096,"thread_pct":30})";
const char* kMig1g = R"({"slice":"mig","model":"A100-80GB","mig_profile":"1g.10gb"})";

struct AdmissionCase {
  std::string name;
  Json limits;
  std::string mode;  // tessera.io/rightsize
  std::string recommendation;
  int64_t floor_mib = 1024;
  // Expected:
  std::string event_type, event_reason;
  std::string applied_to;   // tessera.io/rightsize-applied "to" (dump); "" = no annotation
  std::string proposed_to;  // tessera.io/rightsize-proposed "to"
  AssignmentKind kind = AssignmentKind::kExclusive;
};

TEST(RightsizeAdmissionTest, GrantsAtAdmission) {
  const std::vector<AdmissionCase> cases = {
      {"auto-sized-down",
       {{"nvidia.com/gpu", "1"}},
       "auto",
       kMps4G,
       1024,
       "Normal",
       "Rightsized",
       R"({"compute_pct":30,"memory_mib":4096})",
       "",
       AssignmentKind::kMps},
      {"auto-mig",
       {{"nvidia.com/gpu", "1"}},
       "auto",
       kMig1g,
       1024,
       "Normal",
       "Rightsized",
       R"({"mig_profile":"1g.10gb"})",
       "",
       AssignmentKind::kMig},
      {"never-above-ask",
       {{"tessera.io/gpu-memory", "2Gi"}},
       "auto",
       kMps4G,
       1024,
       "Normal",
       "RightsizeKept",
       "",
       "",
       AssignmentKind::kMps},
      {"floor",
       {{"nvidia.com/gpu", "1"}},
       "auto",
       R"({"slice":"mps","model":"H100-80GB","memory_mib":300,"thread_pct":10})",
       2048,
       "Normal",
       "Rightsized",
       R"({"compute_pct":10,"memory_mib":2048})",
       "",
       AssignmentKind::kMps},
      {"recommend-only",
       {{"nvidia.com/gpu", "1"}},
       "recommend",
       kMps4G,
       1024,
       "Normal",
       "RightsizeRecommended",
       "",
       R"({"compute_pct":30,"memory_mib":4096})",
       AssignmentKind::kExclusive},
      {"malformed-json",
       {{"nvidia.com/gpu", "1"}},
       "auto",
       "{\"slice\":",
       1024,
       "Warning",
       "RightsizeSkipped",
       "",
       "",
       AssignmentKind::kExclusive},
      {"unknown-model",
       {{"nvidia.com/gpu", "1"}},
       "auto",
       R"({"slice":"mps","model":"Z9","memory_mib":4096,"thread_pct":30})",
       1024,
       "Warning",
       "RightsizeSkipped",
       "",
       "",
       AssignmentKind::kExclusive},
      {"profile-the-model-lacks",
       {{"nvidia.com/gpu", "1"}},
       "auto",
       R"({"slice":"mig","model":"A100-80GB","mig_profile":"9g.99gb"})",
       1024,
       "Warning",
       "RightsizeSkipped",
       "",
       "",
       AssignmentKind::kExclusive},
      {"wrong-types",
       {{"nvidia.com/gpu", "1"}},
       "auto",
       R"({"slice":"mps","model":"H100-80GB","memory_mib":"lots","thread_pct":30})",
       1024,
       "Warning",
       "RightsizeSkipped",
       "",
       "",
       AssignmentKind::kExclusive},
      {"release",
       {{"nvidia.com/gpu", "1"}},
       "auto",
       R"({"slice":"release","model":"H100-80GB"})",
       1024,
       "Warning",
       "RightsizeSkipped",
       "",
       "",
       AssignmentKind::kExclusive},
      {"unknown-mode",
       {{"nvidia.com/gpu", "1"}},
       "sometimes",
       kMps4G,
       1024,
       "Warning",
       "RightsizeSkipped",
       "",
       "",
       AssignmentKind::kExclusive},
      {"model-not-allowed",
       {{"nvidia.com/gpu", "1"}},
       "auto",
       kMig1g,
       1024,
       "Warning",
       "RightsizeSkipped",
       "",
       "",
       AssignmentKind::kExclusive},
      {"no-recommendation",
       {{"nvidia.com/gpu", "1"}},
       "auto",
       "",
       1024,
       "Normal",
       "RightsizeSkipped",
       "",
       "",
       AssignmentKind::kExclusive},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto core = Core(c.floor_mib);
    core->UpsertNode(GpuNodeJson("h", 2));
    // MIG instances only where the grant is one, so that shares are MPS clients.
    if (c.applied_to.find("mig_profile") != std::string::npos)
      core->UpsertNode(MigNodeJson(
          "m", {"1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6"}));
    Json ann = {{kAnnotationRightsize, c.mode}};
    if (c.name == "model-not-allowed") ann[kAnnotationGpuModels] = "H100-80GB";
    if (!c.recommendation.empty()) ann[kAnnotationRecommendation] = c.recommendation;
    core->UpsertPod(PodJson("p", c.limits, ann));
    const CycleOutput out = core->Cycle(1);
    const PodEventAction* e = EventFor(out, "p");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->type, c.event_type) << e->note;
    EXPECT_EQ(e->reason, c.event_reason) << e->note;
    ASSERT_EQ(out.binds.size(), 1u);
    const auto& ann_out = out.binds[0].annotations;
    auto to_of = [&](const char* key) -> std::string {
      auto it = ann_out.find(key);
      if (it == ann_out.end()) return "";
      return Json::parse(it->second)["to"].dump();
    };
    EXPECT_EQ(to_of(kAnnotationRightsizeApplied), c.applied_to);
    EXPECT_EQ(to_of(kAnnotationRightsizeProposed), c.proposed_to);
    auto a = DecodeAssignment(ann_out.at(kAnnotationAssignment));
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->kind, c.kind) << AssignmentKindName(a->kind);
    const auto st = core->stats();
    EXPECT_EQ(st.rightsize_applied, c.applied_to.empty() ? 0 : 1);
    EXPECT_EQ(st.rightsize_proposed, c.proposed_to.empty() ? 0 : 1);
    EXPECT_EQ(st.rightsize_skipped,
              c.event_type == "Warning" && c.event_reason == "RightsizeSkipped" ? 1 : 0);
  }
}

TEST(RightsizeAdmissionTest, PlanGrantNeverExceedsTheAsk) {
  auto rec = DecodeRecommendation(kMig1g);
  ASSERT_TRUE(rec.ok());
  GpuRequest whole;
  whole.whole_gpus = 1;
  GpuRequest small;
  small.memory_mib = 5000;
  const struct {
    GpuRequest ask;
    int level;
    std::string want_to, reason;
  } cases[] = {
      {whole, 0, R"({"mig_profile":"1g.10gb"})", "recommendation"},
      {whole, 1, R"({"mig_profile":"1g.20gb"})", "oom-grown"},
      {whole, 2, R"({"gpus":1})", "oom-request"},
      {small, 0, R"({"memory_mib":5000})", "request-cap"},
  };
  for (const auto& c : cases) {
    const Grant g = PlanGrant(c.ask, *rec, c.level, 1024);
    EXPECT_EQ(GpuRequestJson(g.request).dump(), c.want_to) << c.level;
    EXPECT_EQ(g.reason, c.reason);
    EXPECT_TRUE(WithinAsk(g.request, c.ask, rec->model_id));
  }
}

// A bound, rightsized pod of the owner as the API server shows it after the bind, killed out of
// memory (lastState) when `oom`.
Json BoundPod(const std::string& name, const BindAction& b, bool oom, const Json& ann) {
  Json a = ann;
  for (const auto& [k, v] : b.annotations) a[k] = v;
  Json pod = PodJson(name, {{"nvidia.com/gpu", "1"}}, a, b.node);
  if (oom)
    pod["status"]["containerStatuses"] = Json::array(
        {{{"name", "main"},
          {"restartCount", 1},
          {"state", {{"running", Json::object()}}},
          {"lastState", {{"terminated", {{"reason", "OOMKilled"}, {"exitCode", 137}}}}}}});
  return pod;
}

TEST(RightsizeOomTest, NextPodGrowsThenGetsTheAskAndStateSurvivesRestart) {
  const Json ann = {{kAnnotationRightsize, "auto"}, {kAnnotationRecommendation, kMps4G}};
  auto core = Core();
  core->UpsertNode(GpuNodeJson("h", 4));
  core->UpsertPod(PodJson("p1", {{"nvidia.com/gpu", "1"}}, ann));
  auto out = core->Cycle(1);
  ASSERT_EQ(out.binds.size(), 1u);
  const BindAction b1 = out.binds[0];
  EXPECT_EQ(b1.annotations.count(kAnnotationOomRetries), 0u);
  // p1 runs, then is killed out of memory at its 4 GiB grant.
  core->UpsertPod(BoundPod("p1", b1, false, ann));
  core->UpsertPod(BoundPod("p1", b1, true, ann));
  out = core->Cycle(2);
  const PodEventAction* kill = EventFor(out, "p1");
  ASSERT_NE(kill, nullptr);
  EXPECT_EQ(kill->reason, "RightsizeOomKilled");
  EXPECT_EQ(core->stats().rightsize_oom_kills, 1);
  // The same status seen again is the same kill.
  core->UpsertPod(BoundPod("p1", b1, true, ann));
  EXPECT_EQ(core->stats().rightsize_oom_kills, 1);

  // The owner's next pod: memory x1.5.
  core->UpsertPod(PodJson("p2", {{"nvidia.com/gpu", "1"}}, ann));
  out = core->Cycle(3);
  ASSERT_EQ(out.binds.size(), 1u);
  const BindAction b2 = out.binds[0];
  EXPECT_EQ(b2.annotations.at(kAnnotationOomRetries), "1");
  const Json applied2 = Json::parse(b2.annotations.at(kAnnotationRightsizeApplied));
  EXPECT_EQ(applied2["to"]["memory_mib"], 6144);
  EXPECT_EQ(applied2["reason"], "oom-grown");
  EXPECT_NE(core->Metrics(3).find("tessera_rightsize_oom_retries_total{namespace=\"ml\","
                                  "owner_kind=\"Deployment\",owner=\"llm\"} 1"),
            std::string::npos)
      << core->Metrics(3);

  // The scheduler restarts: a new core sees the pods as listed; p2 is killed too.
  auto restarted = Core();
  restarted->UpsertNode(GpuNodeJson("h", 4));
  restarted->UpsertPod(BoundPod("p1", b1, true, ann));
  restarted->UpsertPod(BoundPod("p2", b2, true, ann));
  // Grants are accounted as granted: 4 GiB + 6 GiB on GPUs of node h.
  EXPECT_EQ(restarted->stats().adopted, 2);
  restarted->UpsertPod(PodJson("p3", {{"nvidia.com/gpu", "1"}}, ann));
  out = restarted->Cycle(1);
  ASSERT_EQ(out.binds.size(), 1u);
  EXPECT_EQ(out.binds[0].annotations.at(kAnnotationOomRetries), "2");
  EXPECT_EQ(out.binds[0].annotations.count(kAnnotationRightsizeApplied), 0u);
  auto a3 = DecodeAssignment(out.binds[0].annotations.at(kAnnotationAssignment));
  ASSERT_TRUE(a3.ok());
  EXPECT_EQ(a3->kind, AssignmentKind::kExclusive);
  const PodEventAction* kept = EventFor(out, "p3");
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->reason, "RightsizeKept");
  EXPECT_NE(kept->note.find("oom-request"), std::string::npos) << kept->note;

  // Only p1's history after a restart: the next pod is grown, not at the ask.
  auto only_first = Core();
  only_first->UpsertNode(GpuNodeJson("h", 4));
  only_first->UpsertPod(BoundPod("p1", b1, true, ann));
  only_first->UpsertPod(PodJson("p4", {{"nvidia.com/gpu", "1"}}, ann));
  out = only_first->Cycle(1);
  ASSERT_EQ(out.binds.size(), 1u);
  EXPECT_EQ(out.binds[0].annotations.at(kAnnotationOomRetries), "1");

  // A new recommendation (the history has learned the peak) starts over.
  Json fresh = ann;
  fresh[kAnnotationRecommendation] =
      R"({"slice":"mps","model":"H100-80GB","memory_mib":8192,"thread_pct":30})";
  restarted->UpsertPod(PodJson("p5", {{"nvidia.com/gpu", "1"}}, fresh));
  out = restarted->Cycle(2);
  ASSERT_EQ(out.binds.size(), 1u);
  EXPECT_EQ(out.binds[0].annotations.count(kAnnotationOomRetries), 0u);
  EXPECT_EQ(
      Json::parse(out.binds[0].annotations.at(kAnnotationRightsizeApplied))["to"]["memory_mib"],
      8192);
}

struct OomEvictCase {
  std::string name;
  std::function<void(Json&)> edit;  // applied to the killed pod as listed
  bool evicted;
};

// A rightsized pod killed out of memory keeps its grant if the kubelet restarts the container in
// the same pod; it is evicted exactly when a controller would replace it with a new pod.
TEST(RightsizeOomTest, KilledPodIsEvictedOnlyWhenItWouldRestartInPlace) {
  const Json ann = {{kAnnotationRightsize, "auto"}, {kAnnotationRecommendation, kMps4G}};
  const std::vector<OomEvictCase> cases = {
      {"deployment pod, default restart policy", [](Json&) {}, true},
      {"restartPolicy Always", [](Json& p) { p["spec"]["restartPolicy"] = "Always"; }, true},
      {"job pod, restartPolicy OnFailure",
       [](Json& p) {
         p["spec"]["restartPolicy"] = "OnFailure";
         p["metadata"]["ownerReferences"][0]["kind"] = "Job";
         p["metadata"]["ownerReferences"][0]["name"] = "train";
       },
       true},
      {"restartPolicy Never: the controller makes a new pod anyway",
       [](Json& p) { p["spec"]["restartPolicy"] = "Never"; }, false},
      {"bare pod: nothing would replace it",
       [](Json& p) { p["metadata"].erase("ownerReferences"); }, false},
      {"owner that is not the controller",
       [](Json& p) { p["metadata"]["ownerReferences"][0]["controller"] = false; }, false},
      {"already being deleted",
       [](Json& p) { p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"; }, false},
      {"not rightsized (no grant was applied)",
       [](Json& p) { p["metadata"]["annotations"].erase(kAnnotationRightsizeApplied); }, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto core = Core();
    core->UpsertNode(GpuNodeJson("h", 4));
    core->UpsertPod(PodJson("p1", {{"nvidia.com/gpu", "1"}}, ann));
    auto out = core->Cycle(1);
    ASSERT_EQ(out.binds.size(), 1u);
    const BindAction b1 = out.binds[0];
    Json killed = BoundPod("p1", b1, true, ann);
    c.edit(killed);
    core->UpsertPod(killed);
    out = core->Cycle(2);
    if (!c.evicted) {
      EXPECT_TRUE(out.evictions.empty());
      EXPECT_EQ(core->stats().rightsize_oom_evictions, 0);
      continue;
    }
    ASSERT_EQ(out.evictions.size(), 1u);
    EXPECT_EQ(out.evictions[0].name, "p1");
    EXPECT_EQ(out.evictions[0].event_reason, kEventRightsizeOomRestart);
    EXPECT_NE(out.evictions[0].reason.find("a larger grant"), std::string::npos)
        << out.evictions[0].reason;
    EXPECT_EQ(core->stats().rightsize_oom_evictions, 1);
    EXPECT_NE(core->Metrics(2).find("tessera_rightsize_oom_evictions_total 1"), std::string::npos);
    // The same kill seen again is not evicted twice.
    core->UpsertPod(killed);
    EXPECT_TRUE(core->Cycle(3).evictions.empty());
    // A PodDisruptionBudget refuses the eviction: the pod keeps its allocation and says why.
    const int64_t bound = core->stats().pods_bound;
    core->EvictionFailed(out.evictions[0],
                         Status(StatusCode::kResourceExhausted, "HTTP 429: disruption budget"));
    out = core->Cycle(4);
    EXPECT_EQ(core->stats().pods_bound, bound);
    ASSERT_EQ(out.notices.size(), 1u);
    EXPECT_EQ(out.notices[0].reason, "EvictionBlocked");
    EXPECT_NE(out.notices[0].message.find("restarts in place"), std::string::npos);
    // Another pod that would need the whole node still does not fit next to it.
    core->UpsertPod(PodJson("big", {{"nvidia.com/gpu", "4"}}, Json::object()));
    EXPECT_TRUE(core->Cycle(5).binds.empty());
  }
}

// A pod as the webhook leaves a tessera.io/rightsize: auto pod asking `gpus` whole GPUs: one
// tessera.io/gpu-slice device, the ask in tessera.io/original-resources.
Json RewrittenPod(const std::string& name, int gpus, Json ann, const std::string& node = "") {
  ann[kAnnotationOriginalResources] =
      Json{{"main", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}.dump();
  return PodJson(name, {{kResourceGpuSlice, "1"}}, ann, node);
}

TEST(RightsizeWebhookTest, RewrittenPodsAreSizedFromTheOriginalAsk) {
  struct Case {
    const char* name;
    int gpus;                    // the original ask
    std::string recommendation;  // "" = none
    std::string event_reason;
    std::string applied_from, applied_to;  // "" = no tessera.io/rightsize-applied
    AssignmentKind kind;
    size_t assigned_gpus;
  };
  const std::vector<Case> cases = {
      {"sized down", 1, kMps4G, "Rightsized", R"({"gpus":1})",
       R"({"compute_pct":30,"memory_mib":4096})", AssignmentKind::kMps, 1},
      {"two GPUs sized down", 2, kMps4G, "Rightsized", R"({"gpus":2})",
       R"({"compute_pct":30,"memory_mib":4096})", AssignmentKind::kMps, 1},
      {"never above the ask", 1, R"({"slice":"whole","model":"H100-80GB","gpus":2})",
       "RightsizeKept", "", "", AssignmentKind::kExclusive, 1},
      {"no recommendation: the ask", 2, "", "RightsizeSkipped", "", "", AssignmentKind::kExclusive,
       2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto core = Core();
    core->UpsertNode(GpuNodeJson("h", 2));
    Json ann = {{kAnnotationRightsize, "auto"}};
    if (!c.recommendation.empty()) ann[kAnnotationRecommendation] = c.recommendation;
    core->UpsertPod(RewrittenPod("p", c.gpus, ann));
    const CycleOutput out = core->Cycle(1);
    const PodEventAction* e = EventFor(out, "p");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->reason, c.event_reason) << e->note;
    ASSERT_EQ(out.binds.size(), 1u);
    const auto& b = out.binds[0].annotations;
    auto applied = b.find(kAnnotationRightsizeApplied);
    if (c.applied_to.empty()) {
      EXPECT_EQ(applied, b.end());
    } else {
      ASSERT_NE(applied, b.end());
      const Json j = Json::parse(applied->second);
      EXPECT_EQ(j["from"].dump(), c.applied_from);
      EXPECT_EQ(j["to"].dump(), c.applied_to);
    }
    auto a = DecodeAssignment(b.at(kAnnotationAssignment));
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->kind, c.kind) << AssignmentKindName(a->kind);
    EXPECT_EQ(a->gpus.size(), c.assigned_gpus);
  }
}

TEST(RightsizeWebhookTest, MoreRewrittenPodsThanGpusAndTheOomBackoffReachesTheAsk) {
  const Json ann = {{kAnnotationRightsize, "auto"}, {kAnnotationRecommendation, kMps4G}};
  auto core = Core();
  core->UpsertNode(GpuNodeJson("h", 1));
  // Three pods that each asked for the node's only GPU all fit as 4 GiB MPS clients.
  for (const char* name : {"a", "b", "c"}) core->UpsertPod(RewrittenPod(name, 1, ann));
  auto out = core->Cycle(1);
  ASSERT_EQ(out.binds.size(), 3u);
  std::vector<BindAction> bound = out.binds;
  for (const BindAction& b : bound) {
    auto a = DecodeAssignment(b.annotations.at(kAnnotationAssignment));
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->kind, AssignmentKind::kMps);
  }
  // A restarted scheduler accounts them at their grants (not at the ask, which would not fit).
  auto restarted = Core();
  restarted->UpsertNode(GpuNodeJson("h", 1));
  for (const BindAction& b : bound) {
    Json a = ann;
    for (const auto& [k, v] : b.annotations) a[k] = v;
    restarted->UpsertPod(RewrittenPod(b.name, 1, a, b.node));
  }
  EXPECT_EQ(restarted->stats().adopted, 3);

  // Out-of-memory kills of the owner's rewritten pods: grown once, then the ask (one whole GPU).
  auto oom = [&](const std::string& name, const BindAction& b) {
    Json a = ann;
    for (const auto& [k, v] : b.annotations) a[k] = v;
    Json pod = RewrittenPod(name, 1, a, b.node);
    pod["status"]["containerStatuses"] = Json::array(
        {{{"name", "main"},
          {"restartCount", 1},
          {"state", {{"running", Json::object()}}},
          {"lastState", {{"terminated", {{"reason", "OOMKilled"}, {"exitCode", 137}}}}}}});
    return pod;
  };
  auto back = Core();
  back->UpsertNode(GpuNodeJson("h", 4));
  back->UpsertPod(RewrittenPod("p1", 1, ann));
  out = back->Cycle(1);
  ASSERT_EQ(out.binds.size(), 1u);
  back->UpsertPod(oom("p1", out.binds[0]));
  back->UpsertPod(RewrittenPod("p2", 1, ann));
  out = back->Cycle(2);
  ASSERT_EQ(out.binds.size(), 1u);
  EXPECT_EQ(Json::parse(out.binds[0].annotations.at(kAnnotationRightsizeApplied))["reason"],
            "oom-grown");
  back->UpsertPod(oom("p2", out.binds[0]));
  back->UpsertPod(RewrittenPod("p3", 1, ann));
  out = back->Cycle(3);
  ASSERT_EQ(out.binds.size(), 1u);
  EXPECT_EQ(out.binds[0].annotations.count(kAnnotationRightsizeApplied), 0u);
  auto a3 = DecodeAssignment(out.binds[0].annotations.at(kAnnotationAssignment));
  ASSERT_TRUE(a3.ok());
  EXPECT_EQ(a3->kind, AssignmentKind::kExclusive);
  EXPECT_EQ(a3->gpus.size(), 1u);
}

TEST(RightsizeOomTest, OwnerOfFollowsTheAdvisorsGrouping) {
  Json pod = PodJson("p", {{"nvidia.com/gpu", "1"}}, Json::object());
  EXPECT_EQ(OwnerOf(pod).Key(), "ml/Deployment/llm");
  pod["metadata"]["ownerReferences"][0]["kind"] = "Job";
  pod["metadata"]["ownerReferences"][0]["name"] = "train-0";
  EXPECT_EQ(OwnerOf(pod).Key(), "ml/Job/train-0");
  pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] = "train";
  EXPECT_EQ(OwnerOf(pod).Key(), "ml/JobSet/train");
  pod["metadata"].erase("ownerReferences");
  pod["metadata"]["annotations"][kAnnotationGang] = "g";
  EXPECT_EQ(OwnerOf(pod).Key(), "ml/WorkloadGroup/g");
  pod["metadata"]["annotations"].erase(kAnnotationGang);
  EXPECT_EQ(OwnerOf(pod).Key(), "ml/Pod/p");
}

TEST(RightsizeConfigTest, FloorIsParsedAndValidated) {
  auto ok = ParseSchedulerConfig("rightsizeFloorMiB: 2048\n");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->core.rightsize_floor_mib, 2048);
  EXPECT_EQ(SchedulerConfig{}.rightsize_floor_mib, 1024);
  SchedulerConfig bad;
  bad.rightsize_floor_mib = -1;
  EXPECT_FALSE(bad.Validate().ok());
  bad.rightsize_floor_mib = 1 << 20;
  EXPECT_FALSE(bad.Validate().ok());
  auto other = ParseSchedulerConfig("rightsizeOtherModelMaxCompute: 0.5\n");
  ASSERT_TRUE(other.ok()) << other.status().message();
  EXPECT_EQ(other->core.rightsize_other_model_max_compute, 0.5);
  EXPECT_EQ(SchedulerConfig{}.rightsize_other_model_max_compute, 0.8);
  SchedulerConfig bad_other;
  bad_other.rightsize_other_model_max_compute = 1.5;
  EXPECT_FALSE(bad_other.Validate().ok());
}

// Through the runtime: the bind writes the annotation, the decision is an Event.
TEST(RightsizeE2ETest, AnnotationAndEventReachTheApiServer) {
  testing::FakeApiServer server;
  ASSERT_TRUE(server.Start().ok());
  auto client = Client::Create(server.client_config());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(server.Create("/api/v1/nodes", GpuNodeJson("h", 2)).ok());
  ASSERT_TRUE(
      server
          .Create("/api/v1/namespaces/ml/pods",
                  PodJson("llm-1", {{"nvidia.com/gpu", "1"}},
                          {{kAnnotationRightsize, "auto"}, {kAnnotationRecommendation, kMps4G}}))
          .ok());
  SchedulerRuntimeConfig cfg;
  cfg.cycle_interval_s = 0.01;
  Scheduler sched(**client, cfg);
  std::atomic<bool> stop{false};
  std::thread t([&] { EXPECT_TRUE(sched.Run(stop).ok()); });
  Json pod;
  bool evented = false;
  for (int i = 0; i < 500 && !(evented && pod.is_object()); ++i) {
    auto p = server.Get("/api/v1/namespaces/ml/pods/llm-1");
    if (p && !(*p)["spec"].value("nodeName", "").empty()) pod = *p;
    for (const auto& e : server.List("/apis/events.k8s.io/v1/namespaces/ml/events"))
      evented |= e.value("reason", "") == "Rightsized";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  t.join();
  ASSERT_TRUE(pod.is_object());
  EXPECT_TRUE(evented);
  const auto& ann = pod["metadata"]["annotations"];
  ASSERT_TRUE(ann.contains(kAnnotationRightsizeApplied));
  const Json applied = Json::parse(ann[kAnnotationRightsizeApplied].get<std::string>());
  EXPECT_EQ(applied["from"], Json({{"gpus", 1}}));
  EXPECT_EQ(applied["to"]["memory_mib"], 4096);
  auto a = DecodeAssignment(ann[kAnnotationAssignment].get<std::string>());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, AssignmentKind::kMps);
  EXPECT_EQ(a->memory_limit_mib, 4096);
}

// Runs a scheduler against `server` until `done` holds (at most 5 s); returns whether it did.
bool RunSchedulerUntil(testing::FakeApiServer& server, const std::function<bool()>& done) {
  auto client = Client::Create(server.client_config());
  if (!client.ok()) return false;
  SchedulerRuntimeConfig cfg;
  cfg.cycle_interval_s = 0.01;
  Scheduler sched(**client, cfg);
  std::atomic<bool> stop{false};
  std::thread t([&] { EXPECT_TRUE(sched.Run(stop).ok()); });
  bool ok = false;
  for (int i = 0; i < 500 && !ok; ++i) {
    ok = done();
    if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  t.join();
  return ok;
}

// The back-off lives in the pods: a scheduler started after the kill grows the next pod.
TEST(RightsizeE2ETest, OomBackoffSurvivesARestart) {
  testing::FakeApiServer server;
  ASSERT_TRUE(server.Start().ok());
  const Json ann = {{kAnnotationRightsize, "auto"}, {kAnnotationRecommendation, kMps4G}};
  const std::string pods = "/api/v1/namespaces/ml/pods";
  ASSERT_TRUE(server.Create("/api/v1/nodes", GpuNodeJson("h", 2)).ok());
  ASSERT_TRUE(server.Create(pods, PodJson("llm-1", {{"nvidia.com/gpu", "1"}}, ann)).ok());
  auto bound = [&](const std::string& name) {
    auto p = server.Get(pods + "/" + name);
    return p && !(*p)["spec"].value("nodeName", "").empty();
  };
  ASSERT_TRUE(RunSchedulerUntil(server, [&] { return bound("llm-1"); }));
  // Killed out of memory while no scheduler runs.
  const Json oom = {
      {"status",
       {{"phase", "Running"},
        {"containerStatuses",
         Json::array({{{"name", "main"},
                       {"restartCount", 1},
                       {"state", {{"running", Json::object()}}},
                       {"lastState", {{"terminated", {{"reason", "OOMKilled"}}}}}}})}}}};
  ASSERT_TRUE(server.MergePatch(pods + "/llm-1/status", oom).ok());
  ASSERT_TRUE(server.Create(pods, PodJson("llm-2", {{"nvidia.com/gpu", "1"}}, ann)).ok());
  ASSERT_TRUE(RunSchedulerUntil(server, [&] {
    return bound("llm-2") && HasEvent(server, "llm-1", "RightsizeOomKilled") &&
           HasEvent(server, "llm-1", kEventRightsizeOomRestart);
  }));
  // The killed pod would restart in place at 4 GiB: it was evicted through the Eviction API.
  EXPECT_GE(server.counters().evictions, 1);
  const Json a2 = (*server.Get(pods + "/llm-2"))["metadata"]["annotations"];
  EXPECT_EQ(a2.value(kAnnotationOomRetries, ""), "1");
  const Json applied = Json::parse(a2.value(kAnnotationRightsizeApplied, "{}"));
  EXPECT_EQ(applied.value("reason", ""), "oom-grown");
  EXPECT_EQ(applied["to"].value("memory_mib", 0), 6144);
}

}  // namespace
}  // namespace tessera::kube
