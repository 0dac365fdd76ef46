// What a relist after 410 Gone must report when objects were deleted and created again under the
// same name while the watch was down, which Events preemption writes, and how a refused eviction
// is retried: behaviour the real API server exposed (tests/k8s/watch_expiry_test.py,
// tests/k8s/preemption_test.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/informer.h"
#include "kube/scheduler_core.h"
#include "kube/translate.h"
#include "tests/kube/fake_apiserver.h"
#include "tests/kube/test_objects.h"

namespace tessera::kube {
namespace {

using testing::FakeApiServer;

template <typename Pred>
bool WaitUntil(Pred pred, double timeout_s = 10) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

Json Pod(const std::string& ns, const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"schedulerName", "tessera"},
            {"containers", {{{"name", "main"}, {"image", "trainer:1"}}}}}}};
}

struct Log {
  std::mutex mu;
  std::vector<std::string> lines;
  InformerHandlers Handlers() {
    InformerHandlers h;
    h.on_add = [this](const Json& o) { Add("add " + ObjectKey(o) + " " + Uid(o)); };
    h.on_update = [this](const Json&, const Json& o) {
      Add("update " + ObjectKey(o) + " " + Uid(o));
    };
    h.on_delete = [this](const Json& o) { Add("delete " + ObjectKey(o) + " " + Uid(o)); };
    return h;
  }
  static std::string Uid(const Json& o) { return o["metadata"].value("uid", ""); }
  void Add(std::string s) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(std::move(s));
  }
  std::vector<std::string> Get() {
    std::lock_guard<std::mutex> lock(mu);
    return lines;
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu);
    lines.clear();
  }
};

TEST(InformerRelistTest, AnObjectCreatedAgainUnderItsNameIsADeleteAndAnAddDeletesFirst) {
  FakeApiServer fake;
  ASSERT_TRUE(fake.Start().ok());
  auto client = Client::Create(fake.client_config());
  ASSERT_TRUE(client.ok());
  const std::string pods = "/api/v1/namespaces/ml/pods";
  auto a = fake.Create(pods, Pod("ml", "a"));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(fake.Create(pods, Pod("ml", "b")).ok());
  const std::string old_uid = (*a)["metadata"].value("uid", "");
  Log log;
  Informer inf(**client, "/api/v1/pods", {}, log.Handlers(), 5);
  ASSERT_TRUE(inf.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return fake.counters().active_watches == 1; }));
  log.Clear();

  // While the watch delivers nothing, ml/a is deleted and created again (a new uid), ml/b goes
  // and ml/c comes; then the history is compacted away, so only a relist can find out.
  fake.SetEventDelay(60000);
  // A watch step that read the faults just before (it waits up to 100 ms) must be over.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(fake.Delete(pods + "/a").ok());
  auto a2 = fake.Create(pods, Pod("ml", "a"));
  ASSERT_TRUE(a2.ok());
  const std::string new_uid = (*a2)["metadata"].value("uid", "");
  ASSERT_NE(old_uid, new_uid);
  ASSERT_TRUE(fake.Delete(pods + "/b").ok());
  ASSERT_TRUE(fake.Create(pods, Pod("ml", "c")).ok());
  fake.SetHistoryLimit(0);
  fake.DropAllWatches();
  ASSERT_TRUE(WaitUntil([&] { return inf.stats().gone >= 1 && inf.stats().lists >= 2; }));
  fake.ClearFaults();
  ASSERT_TRUE(WaitUntil([&] { return log.Get().size() >= 4; }));
  const auto lines = log.Get();
  ASSERT_EQ(lines.size(), 4u) << ::testing::PrintToString(lines);
  // Deletes come first, so a handler that accounts resources frees them before it sees the new
  // objects; the recreated object is never reported as an update of the old one.
  const auto pos = [&](const std::string& prefix) {
    return std::find_if(lines.begin(), lines.end(),
                        [&](const std::string& l) { return l.rfind(prefix, 0) == 0; }) -
           lines.begin();
  };
  EXPECT_LT(pos("delete ml/a " + old_uid), 2);
  EXPECT_LT(pos("delete ml/b "), 2);
  EXPECT_GE(pos("add ml/a " + new_uid), 2);
  EXPECT_LT(pos("add ml/a " + new_uid), 4);
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const std::string& l) { return l.rfind("add ml/c ", 0) == 0; }),
            1);
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const std::string& l) { return l.rfind("update", 0) == 0; }),
            0);
  EXPECT_EQ(inf.Get("ml/a").value()["metadata"].value("uid", ""), new_uid);
  inf.Stop();
}

Json PodJson(const std::string& name, const std::string& uid, int gpus, int priority,
             const std::string& node = "", const std::string& assignment = "") {
  Json spec = {
      {"schedulerName", "tessera"},
      {"priority", priority},
      {"containers", Json::array({{{"name", "main"},
                                   {"resources",
                                    {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}},
                                     {"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}})}};
  Json annotations = Json::object();
  if (!node.empty()) spec["nodeName"] = node;
  if (!assignment.empty()) annotations[kAnnotationAssignment] = assignment;
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name}, {"namespace", "ml"}, {"uid", uid}, {"annotations", annotations}}},
          {"spec", spec},
          {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
}

TEST(PreemptionEventsTest, NoPreemptedNoticeBeforeTheApiServerAcceptsTheEviction) {
  SchedulerConfig cfg;
  cfg.gang_settle_s = 0;
  auto core = SchedulerCore::Create(cfg);
  ASSERT_TRUE(core.ok());
  SchedulerCore& c = **core;
  c.UpsertNode(kubetest::GpuNodeJson("a", 2));
  c.UpsertPod(PodJson("low", "u-low", 2, 0));
  const auto first = c.Cycle(1);
  ASSERT_EQ(first.binds.size(), 1u);
  c.UpsertPod(
      PodJson("low", "u-low", 2, 0, "a", first.binds[0].annotations.at(kAnnotationAssignment)));
  c.UpsertPod(PodJson("high", "u-high", 2, 10));
  const auto out = c.Cycle(2);
  ASSERT_EQ(out.evictions.size(), 1u);
  EXPECT_FALSE(out.evictions[0].reason.empty());  // the runtime's Preempted Event says why
  for (const auto& n : out.notices) EXPECT_NE(n.reason, "Preempted") << n.name;
  // A refused eviction is reported as such, and never as a preemption.
  c.EvictionFailed(out.evictions[0], Status(StatusCode::kResourceExhausted, "HTTP 429"));
  const auto after = c.Cycle(3);
  bool blocked = false;
  for (const auto& n : after.notices) {
    EXPECT_NE(n.reason, "Preempted") << n.name;
    blocked |= n.name == "low" && n.reason == "EvictionBlocked";
  }
  EXPECT_TRUE(blocked);
}

TEST(PreemptionEventsTest, ARefusedVictimIsTriedAgainAfterABackoffThatDoubles) {
  SchedulerConfig cfg;
  cfg.gang_settle_s = 0;
  auto core = SchedulerCore::Create(cfg);
  ASSERT_TRUE(core.ok());
  SchedulerCore& c = **core;
  c.UpsertNode(kubetest::GpuNodeJson("a", 2));
  c.UpsertPod(PodJson("low", "u-low", 2, 0));
  const auto first = c.Cycle(1);
  ASSERT_EQ(first.binds.size(), 1u);
  c.UpsertPod(
      PodJson("low", "u-low", 2, 0, "a", first.binds[0].annotations.at(kAnnotationAssignment)));
  c.UpsertPod(PodJson("high", "u-high", 2, 10));
  auto out = c.Cycle(2);
  ASSERT_EQ(out.evictions.size(), 1u);
  c.EvictionFailed(out.evictions[0], Status(StatusCode::kResourceExhausted, "HTTP 429"));
  const double wait = SchedulerCore::kEvictionRetrySeconds;
  for (double t = 3; t < 2 + wait; t += 1) {
    out = c.Cycle(t);
    EXPECT_TRUE(out.evictions.empty()) << t;
    EXPECT_TRUE(out.binds.empty()) << t;
  }
  EXPECT_TRUE(c.cluster().CheckInvariants().ok());
  // The budget may allow it now: the preemptor evicts the same victim once more.
  out = c.Cycle(2 + wait + 1);
  ASSERT_EQ(out.evictions.size(), 1u);
  EXPECT_EQ(out.evictions[0].name, "low");
  EXPECT_TRUE(c.cluster().CheckInvariants().ok());
  // Refused again: the next attempt waits twice as long.
  c.EvictionFailed(out.evictions[0], Status(StatusCode::kResourceExhausted, "HTTP 429"));
  const double refused = 2 + wait + 1;
  for (double t = refused + 1; t < refused + 2 * wait; t += 5)
    EXPECT_TRUE(c.Cycle(t).evictions.empty()) << t;
  EXPECT_EQ(c.cluster().free(0).gpu_total, 0);  // the victim holds its GPUs meanwhile
  out = c.Cycle(refused + 2 * wait + 1);
  ASSERT_EQ(out.evictions.size(), 1u);
  // This time the API server accepts: once the victim is gone, the preemptor binds.
  c.DeletePod(PodJson("low", "u-low", 2, 0, "a"));
  out = c.Cycle(refused + 2 * wait + 2);
  ASSERT_EQ(out.binds.size(), 1u);
  EXPECT_EQ(out.binds[0].name, "high");
  EXPECT_TRUE(c.cluster().CheckInvariants().ok());
}

}  // namespace
}  // namespace tessera::kube
