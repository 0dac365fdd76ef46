// SchedulerCore's Prometheus exposition: pending pods by reason, scheduling latency, decisions,
// preemptions and allocation per node.
#include <gtest/gtest.h>

#include <functional>
#include <sstream>

#include "kube/scheduler.h"
#include "kube/scheduler_core.h"
#include "tests/kube/test_objects.h"

namespace tessera::kube {
namespace {

using kubetest::GpuNodeJson;
using kubetest::MigNodeJson;

Json PodJson(const std::string& name, Json limits, Json annotations = Json::object(),
             const std::string& node = "", int priority = 0) {
  Json spec = {
      {"schedulerName", "tessera"},
      {"priority", priority},
      {"containers",
       Json::array({{{"name", "main"},
                     {"resources",
                      {{"limits", limits}, {"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}})}};
  if (!node.empty()) spec["nodeName"] = node;
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}, {"annotations", annotations}}},
      {"spec", spec},
      {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
}

std::unique_ptr<SchedulerCore> Core(const std::string& yaml = "") {
  SchedulerConfig cfg;
  if (!yaml.empty()) {
    auto parsed = ParseSchedulerConfig(yaml);
    EXPECT_TRUE(parsed.ok()) << parsed.status().message();
    if (parsed.ok()) cfg = parsed->core;
  }
  cfg.gang_settle_s = 0;
  auto c = SchedulerCore::Create(cfg);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return std::move(c.value());
}

// The value of one series ("name{labels}" exactly as exposed); -1 when absent.
double Value(const std::string& metrics, const std::string& series) {
  std::istringstream in(metrics);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return -1;
}

// Confirms the binds of `out` as the informer would: the pods are bound where asked.
void Confirm(SchedulerCore& core, const CycleOutput& out, const Json& limits) {
  for (const auto& b : out.binds)
    core.UpsertPod(PodJson(b.name, limits,
                           {{kAnnotationAssignment, b.annotations.at(kAnnotationAssignment)}},
                           b.node));
}

struct ReasonCase {
  std::string name;
  std::string config;
  std::string queue;
  // Sets up the core; returns the number of pods expected to wait for `reason`.
  std::function<int(SchedulerCore&)> setup;
  std::string reason;
};

void PrintTo(const ReasonCase& c, std::ostream* os) {
  *os << c.name;
}

const Json kGpu1 = {{"nvidia.com/gpu", "1"}};
const Json kGpu2 = {{"nvidia.com/gpu", "2"}};

class PendingReasonTest : public testing::TestWithParam<ReasonCase> {};

TEST_P(PendingReasonTest, EveryPendingPodHasExactlyOneReason) {
  const ReasonCase& c = GetParam();
  auto core = Core(c.config);
  const int want = c.setup(*core);
  const std::string m = core->Metrics(100);
  const std::string queue = c.queue.empty() ? "default" : c.queue;
  double total = 0;
  for (const char* r : SchedulerCore::kPendingReasons) {
    const double v =
        Value(m, "tessera_pending_pods_by_reason{queue=\"" + queue + "\",reason=\"" + r + "\"}");
    ASSERT_GE(v, 0) << r << "\n" << m;
    EXPECT_EQ(v, r == c.reason ? want : 0) << r << "\n" << m;
    total += v;
  }
  EXPECT_EQ(total, Value(m, "tessera_pending_pods{queue=\"" + queue + "\"}")) << m;
}

INSTANTIATE_TEST_SUITE_P(
    Reasons, PendingReasonTest,
    testing::Values(
        ReasonCase{"quota", "queues: [{name: a, flavors: [{name: f, nominal: {gpu: 1}}]}]", "a",
                   [](SchedulerCore& core) {
                     core.UpsertNode(GpuNodeJson("n", 4));
                     core.UpsertPod(PodJson("p", kGpu2, {{kAnnotationQueue, "a"}}));
                     (void)core.Cycle(1);
                     return 1;
                   },
                   "quota"},
        ReasonCase{"no_fit", "", "",
                   [](SchedulerCore& core) {
                     core.UpsertNode(GpuNodeJson("n", 2));
                     core.UpsertPod(PodJson("p", {{"nvidia.com/gpu", "4"}}));
                     core.UpsertPod(PodJson("q", {{"nvidia.com/gpu", "3"}}));
                     (void)core.Cycle(1);
                     return 2;
                   },
                   "no_fit"},
        ReasonCase{"gang", "", "",
                   [](SchedulerCore& core) {
                     core.UpsertNode(GpuNodeJson("n", 4));
                     core.UpsertPod(PodJson("p", kGpu1,
                                            {{kAnnotationGang, "g"}, {kAnnotationMinMember, "3"}}));
                     core.UpsertPod(PodJson("q", kGpu1,
                                            {{kAnnotationGang, "g"}, {kAnnotationMinMember, "3"}}));
                     (void)core.Cycle(1);
                     return 2;
                   },
                   "gang"},
        ReasonCase{"not_yet_considered", "", "",
                   [](SchedulerCore& core) {
                     core.UpsertNode(GpuNodeJson("n", 4));
                     core.UpsertPod(PodJson("p", kGpu1));
                     return 1;
                   },
                   "other"},
        ReasonCase{"binding", "", "",
                   [](SchedulerCore& core) {
                     core.UpsertNode(GpuNodeJson("n", 4));
                     core.UpsertPod(PodJson("p", kGpu1));
                     EXPECT_EQ(core.Cycle(1).binds.size(), 1u);
                     return 1;
                   },
                   "binding"},
        ReasonCase{"preempting", "", "",
                   [](SchedulerCore& core) {
                     core.UpsertNode(GpuNodeJson("n", 2));
                     core.UpsertPod(PodJson("low", kGpu2));
                     Confirm(core, core.Cycle(1), kGpu2);
                     core.UpsertPod(PodJson("high", kGpu2, Json::object(), "", 10));
                     const CycleOutput out = core.Cycle(2);
                     EXPECT_EQ(out.evictions.size(), 1u);
                     EXPECT_TRUE(out.binds.empty());
                     return 1;
                   },
                   "preempting"},
        ReasonCase{"mig_relayout", "", "",
                   [](SchedulerCore& core) {
                     core.UpsertNode(MigNodeJson("m", {""}));
                     core.UpsertPod(PodJson("p", {{"nvidia.com/mig-3g.40gb", "1"}}));
                     EXPECT_EQ(core.Cycle(1).layouts.size(), 1u);
                     return 1;
                   },
                   "mig_relayout"}),
    [](const testing::TestParamInfo<ReasonCase>& i) { return i.param.name; });

TEST(SchedulerMetricsTest, LatencyDecisionsAndPreemptions) {
  auto core = Core();
  core->UpsertPod(PodJson("low", kGpu2));
  (void)core->Cycle(10);  // first seen pending at 10, no node yet
  std::string m = core->Metrics(10);
  EXPECT_EQ(Value(m, "tessera_scheduling_latency_seconds_count"), 0) << m;
  EXPECT_EQ(Value(m, "tessera_scheduling_decisions_total{result=\"unschedulable\"}"), 1) << m;
  core->UpsertNode(GpuNodeJson("n", 2));
  core->UpsertPod(PodJson("big", {{"nvidia.com/gpu", "4"}}));
  const CycleOutput first = core->Cycle(12);  // low binds after 2 s; big fits nowhere
  ASSERT_EQ(first.binds.size(), 1u);
  Confirm(*core, first, kGpu2);
  m = core->Metrics(12);
  EXPECT_EQ(Value(m, "tessera_scheduling_latency_seconds_count"), 1) << m;
  EXPECT_EQ(Value(m, "tessera_scheduling_latency_seconds_sum"), 2) << m;
  EXPECT_EQ(Value(m, "tessera_scheduling_latency_seconds_bucket{le=\"1\"}"), 0) << m;
  EXPECT_EQ(Value(m, "tessera_scheduling_latency_seconds_bucket{le=\"2.5\"}"), 1) << m;
  EXPECT_EQ(Value(m, "tessera_scheduling_latency_seconds_bucket{le=\"+Inf\"}"), 1) << m;
  EXPECT_EQ(Value(m, "tessera_scheduling_decisions_total{result=\"bound\"}"), 1) << m;
  EXPECT_EQ(Value(m, "tessera_scheduling_decisions_total{result=\"unschedulable\"}"), 2) << m;
  EXPECT_EQ(Value(m, "tessera_preemptions_total"), 0) << m;
  EXPECT_EQ(Value(m, "tessera_policy_mix_changes_total"), 0) << m;
  EXPECT_EQ(Value(m, "tessera_node_gpu_allocated_ratio{node=\"n\",model=\"H100-80GB\"}"), 1) << m;
  // The same reason again is no new decision.
  (void)core->Cycle(13);
  EXPECT_EQ(
      Value(core->Metrics(13), "tessera_scheduling_decisions_total{result=\"unschedulable\"}"), 2);
  // A higher-priority pod preempts low; its bind waits until low is gone.
  core->DeletePod(PodJson("big", Json::object()));
  core->UpsertPod(PodJson("high", kGpu2, Json::object(), "", 10));
  const CycleOutput pre = core->Cycle(20);
  ASSERT_EQ(pre.evictions.size(), 1u);
  m = core->Metrics(20);
  EXPECT_EQ(Value(m, "tessera_preemptions_total"), 1) << m;
  EXPECT_EQ(Value(m, "tessera_scheduling_latency_seconds_count"), 1) << m;
  core->DeletePod(PodJson("low", Json::object()));
  const CycleOutput later = core->Cycle(30);  // high: first seen pending at 20, bound at 30
  ASSERT_EQ(later.binds.size(), 1u);
  m = core->Metrics(30);
  EXPECT_EQ(Value(m, "tessera_scheduling_latency_seconds_count"), 2) << m;
  EXPECT_EQ(Value(m, "tessera_scheduling_latency_seconds_sum"), 12) << m;
  EXPECT_EQ(Value(m, "tessera_scheduling_latency_seconds_bucket{le=\"5\"}"), 1) << m;
  EXPECT_EQ(Value(m, "tessera_scheduling_latency_seconds_bucket{le=\"10\"}"), 2) << m;
  EXPECT_EQ(Value(m, "tessera_scheduling_decisions_total{result=\"bound\"}"), 2) << m;
}

TEST(SchedulerMetricsTest, NodeAllocationPerNode) {
  auto core = Core();
  core->UpsertNode(GpuNodeJson("a", 4));
  core->UpsertNode(GpuNodeJson("b", 2, "A100-80GB"));
  core->UpsertPod(PodJson("p", {{"nvidia.com/gpu", "3"}}));
  Confirm(*core, core->Cycle(1), {{"nvidia.com/gpu", "3"}});
  const std::string m = core->Metrics(2);
  EXPECT_EQ(Value(m, "tessera_node_gpu_allocated_ratio{node=\"a\",model=\"H100-80GB\"}"), 0.75)
      << m;
  EXPECT_EQ(Value(m, "tessera_node_gpu_allocated_ratio{node=\"b\",model=\"A100-80GB\"}"), 0) << m;
}

}  // namespace
}  // namespace tessera::kube
