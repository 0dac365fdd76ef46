// MIG apply over the fake libnvidia-ml.so.1: convergence, idempotence, busy instances, bad
// specs, interrupted runs and half-made GPU instances, checked in the fake's MIG state file.
#include "agent/mig_apply.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/nvml.h"
#include "tests/agent/fake_node.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;
using testing_support::FakeNode;
using testing_support::TempPath;

Json Node(Json gpu0_procs = Json::array()) {
  Json gpus = Json::array();
  gpus.push_back({{"model", "A100-80GB"},
                  {"uuid", "GPU-a100-0"},
                  {"mig", true},
                  {"mig_layout", "3g.40gb@0 2g.20gb@4 1g.10gb@6"},
                  {"processes", gpu0_procs}});
  gpus.push_back({{"model", "A100-80GB"}, {"uuid", "GPU-a100-1"}, {"mig", false}});
  gpus.push_back({{"model", "T4"}, {"uuid", "GPU-t4-2"}});
  return {{"gpus", gpus}};
}

GpuLayoutSpec Spec(int index, int64_t revision, const std::string& layout, bool mig = true) {
  GpuLayoutSpec s;
  s.index = index;
  s.revision = revision;
  s.mig_enabled = mig;
  s.layout = layout;
  return s;
}

std::unique_ptr<GpuBackend> Open() {
  auto nvml = OpenNvml();
  EXPECT_TRUE(nvml.ok()) << nvml.status().message();
  return nvml.ok() ? std::move(*nvml) : nullptr;
}

TEST(MigApply, ConvergesAndIsIdempotent) {
  FakeNode fake(Node());
  auto nvml = Open();
  ASSERT_TRUE(nvml);
  const auto spec = Spec(0, 7, "3g.40gb@0 1g.10gb@4 1g.10gb@5 1g.10gb@6");
  const auto t0 = std::chrono::steady_clock::now();
  GpuLayoutStatus st = ApplyGpuLayout(*nvml, spec);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  RecordProperty("apply_ms", std::to_string(ms));
  EXPECT_EQ(st.state, LayoutState::kApplied) << st.message;
  EXPECT_EQ(st.observed_revision, 7);
  EXPECT_EQ(st.layout, "3g.40gb@0 1g.10gb@4 1g.10gb@5 1g.10gb@6");
  EXPECT_EQ(st.message, "destroyed 2g.20gb@4; created 1g.10gb@4; created 1g.10gb@5");
  EXPECT_EQ(fake.Instances(0), "3g.40gb@0 1g.10gb@4 1g.10gb@5 1g.10gb@6");
  const std::string before = fake.State().dump();

  GpuLayoutStatus again = ApplyGpuLayout(*nvml, spec);
  EXPECT_EQ(again.state, LayoutState::kApplied);
  EXPECT_EQ(again.message, "already in place");
  EXPECT_EQ(fake.State().dump(), before);

  const Json js = GpuLayoutStatusJson(st, "2026-01-01T00:00:00Z");
  EXPECT_EQ(js["observedRevision"], 7);
  EXPECT_EQ(js["state"], "Applied");
  EXPECT_EQ(js["layout"], "3g.40gb@0 1g.10gb@4 1g.10gb@5 1g.10gb@6");
  EXPECT_EQ(js["lastTransitionTime"], "2026-01-01T00:00:00Z");
}

TEST(MigApply, EmptyLayoutDestroysEverything) {
  FakeNode fake(Node());
  auto nvml = Open();
  ASSERT_TRUE(nvml);
  GpuLayoutStatus st = ApplyGpuLayout(*nvml, Spec(0, 1, ""));
  EXPECT_EQ(st.state, LayoutState::kApplied) << st.message;
  EXPECT_EQ(st.layout, "");
  EXPECT_EQ(fake.Instances(0), "");
}

TEST(MigApply, BusyInstanceFailsAndChangesNothing) {
  FakeNode fake(Node({{{"pid", 4242}, {"used_mib", 1024}, {"mig", "2g.20gb@4"}},
                      {{"pid", 4241}, {"used_mib", 1024}, {"mig", "2g.20gb@4"}},
                      {{"pid", 999}, {"used_mib", 1024}, {"mig", "3g.40gb@0"}}}));
  auto nvml = Open();
  ASSERT_TRUE(nvml);
  const std::string journal_dir = TempPath("state");
  MigApplyOptions opts;
  opts.state_dir = journal_dir;
  GpuLayoutStatus st = ApplyGpuLayout(*nvml, Spec(0, 3, "3g.40gb@0 1g.10gb@4 1g.10gb@5"), opts);
  EXPECT_EQ(st.state, LayoutState::kFailed);
  EXPECT_EQ(st.message,
            "GPU 0 (A100-80GB): not changed, instances to destroy are in use: 2g.20gb@4 (GI 2) "
            "by pid 4241, 4242");
  EXPECT_EQ(st.layout, "3g.40gb@0 2g.20gb@4 1g.10gb@6");
  EXPECT_TRUE(fake.State().is_null()) << "no NVML change was made";
  EXPECT_FALSE(ReadMigJournal(journal_dir, 0).ok());
}

TEST(MigApply, NvmlRefusalIsFailedWithTheLayoutLeft) {
  Json cfg = Node();
  cfg["fail"] = {{"nvmlGpuInstanceDestroy", "NVML_ERROR_IN_USE"}};
  FakeNode fake(cfg);
  auto nvml = Open();
  ASSERT_TRUE(nvml);
  const std::string dir = TempPath("state");
  MigApplyOptions opts;
  opts.state_dir = dir;
  GpuLayoutStatus st = ApplyGpuLayout(*nvml, Spec(0, 6, "7g.80gb@0"), opts);
  EXPECT_EQ(st.state, LayoutState::kFailed);
  EXPECT_EQ(st.message.rfind("GPU 0 (A100-80GB): destroying 3g.40gb@0 (GI 1): ", 0), 0u)
      << st.message;
  EXPECT_EQ(st.layout, "3g.40gb@0 2g.20gb@4 1g.10gb@6");
  EXPECT_EQ(fake.Instances(0), "3g.40gb@0! 2g.20gb@4 1g.10gb@6");
  EXPECT_FALSE(ReadMigJournal(dir, 0).ok()) << "the outcome is final for the revision";
}

struct BadCase {
  const char* name;
  GpuLayoutSpec spec;
  const char* message;
};

TEST(MigApply, BadSpecsFailWithOneMessageAndChangeNothing) {
  const std::vector<BadCase> cases = {
      {"malformed token", Spec(0, 2, "3g.40gb@0 2g.20gb"),
       "GPU 0 (A100-80GB): malformed layout token '2g.20gb': expected <profile>@<start>"},
      {"bad start", Spec(0, 2, "3g.40gb@x"),
       "GPU 0 (A100-80GB): malformed layout token '3g.40gb@x': expected <profile>@<start>"},
      {"unknown profile", Spec(0, 2, "3g.40gb@0 5g.50gb@4"),
       "GPU 0 (A100-80GB): unknown MIG profile '5g.50gb' for A100-80GB (known: "},
      {"illegal start", Spec(0, 2, "3g.40gb@2"),
       "GPU 0 (A100-80GB): illegal layout: 3g.40gb@2: allowed starts on A100-80GB are 0,4"},
      {"overlap", Spec(0, 2, "4g.40gb@0 3g.40gb@0"), "GPU 0 (A100-80GB): illegal layout: "},
      {"no such GPU", Spec(9, 2, "7g.80gb@0"),
       "GPU 9 does not exist on this node (3 GPU(s), indexes 0-2)"},
      {"no MIG model", Spec(2, 2, "1g.10gb@0"), "GPU 2 (T4) has no MIG mode in the catalog"},
      {"MIG off", Spec(1, 2, "7g.80gb@0"),
       "GPU 1 (A100-80GB): MIG is disabled; enabling it needs the GPU idle and reset"},
      {"turn MIG off", Spec(0, 2, "", false),
       "GPU 0 (A100-80GB): MIG is enabled; turning it off needs the GPU idle and reset"},
      {"layout with MIG off", Spec(1, 2, "7g.80gb@0", false),
       "GPU 1 (A100-80GB): a layout is given with migEnabled false"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    FakeNode fake(Node());
    auto nvml = Open();
    ASSERT_TRUE(nvml);
    GpuLayoutStatus st = ApplyGpuLayout(*nvml, c.spec);
    EXPECT_EQ(st.state, LayoutState::kFailed);
    EXPECT_EQ(st.observed_revision, 2);
    EXPECT_EQ(st.message.rfind(c.message, 0), 0u) << st.message;
    EXPECT_TRUE(fake.State().is_null()) << "no NVML change was made";
  }
}

TEST(MigApply, MigOffAsAskedIsApplied) {
  FakeNode fake(Node());
  auto nvml = Open();
  ASSERT_TRUE(nvml);
  GpuLayoutStatus st = ApplyGpuLayout(*nvml, Spec(1, 4, "", false));
  EXPECT_EQ(st.state, LayoutState::kApplied) << st.message;
  EXPECT_EQ(st.layout, "");
}

TEST(MigApply, InterruptedRunIsResumedFromTheJournal) {
  FakeNode fake(Node());
  const std::string dir = TempPath("state");
  const auto spec = Spec(0, 5, "7g.80gb@0");
  {
    auto nvml = Open();
    ASSERT_TRUE(nvml);
    MigApplyOptions opts;
    opts.state_dir = dir;
    opts.after_step = [](const std::string& step) {
      return step == "destroy GPU instance 2g.20gb@4" ? Internal("agent killed") : Status::Ok();
    };
    GpuLayoutStatus st = ApplyGpuLayout(*nvml, spec, opts);
    EXPECT_EQ(st.state, LayoutState::kApplying);
    EXPECT_EQ(st.layout, "1g.10gb@6");
  }
  EXPECT_EQ(fake.Instances(0), "1g.10gb@6");
  auto journal = ReadMigJournal(dir, 0);
  ASSERT_TRUE(journal.ok());
  EXPECT_EQ(journal->revision, 5);
  EXPECT_EQ(journal->uuid, "GPU-a100-0");
  EXPECT_EQ(journal->step, "destroy GPU instance 2g.20gb@4");

  auto nvml = Open();  // a restarted agent: the fake reloads its state file
  ASSERT_TRUE(nvml);
  MigApplyOptions opts;
  opts.state_dir = dir;
  GpuLayoutStatus st = ApplyGpuLayout(*nvml, spec, opts);
  EXPECT_EQ(st.state, LayoutState::kApplied) << st.message;
  EXPECT_EQ(st.message,
            "resumed revision 5 interrupted after: destroy GPU instance 2g.20gb@4; destroyed "
            "1g.10gb@6; created 7g.80gb@0");
  EXPECT_EQ(fake.Instances(0), "7g.80gb@0");
  EXPECT_FALSE(ReadMigJournal(dir, 0).ok());
}

TEST(MigApply, HalfMadeInstancesAreCompletedOrDestroyed) {
  const std::string four = "3g.40gb@0 1g.10gb@4 1g.10gb@5 1g.10gb@6";
  Json failing = Node();
  failing["fail"] = {{"nvmlGpuInstanceCreateComputeInstance", "NVML_ERROR_UNKNOWN"}};
  FakeNode fake(failing);
  {
    auto nvml = Open();
    ASSERT_TRUE(nvml);
    GpuLayoutStatus st = ApplyGpuLayout(*nvml, Spec(0, 2, four));
    EXPECT_EQ(st.state, LayoutState::kFailed);
    EXPECT_EQ(
        st.message.rfind("GPU 0 (A100-80GB): creating the compute instance of 1g.10gb@4: ", 0), 0u)
        << st.message;
  }
  EXPECT_EQ(fake.Instances(0), "3g.40gb@0 1g.10gb@4! 1g.10gb@6");
  fake.Write(Node());
  {
    auto nvml = Open();
    ASSERT_TRUE(nvml);
    GpuLayoutStatus st = ApplyGpuLayout(*nvml, Spec(0, 3, four));
    EXPECT_EQ(st.state, LayoutState::kApplied) << st.message;
    EXPECT_EQ(st.message, "completed 1g.10gb@4; created 1g.10gb@5");
    EXPECT_EQ(fake.Instances(0), four);
  }
  fake.Write(failing);
  {
    auto nvml = Open();
    ASSERT_TRUE(nvml);
    (void)ApplyGpuLayout(*nvml, Spec(0, 4, "3g.40gb@0 2g.20gb@4 1g.10gb@6"));
  }
  EXPECT_EQ(fake.Instances(0), "3g.40gb@0 2g.20gb@4! 1g.10gb@6");
  fake.Write(Node());
  auto nvml = Open();
  ASSERT_TRUE(nvml);
  GpuLayoutStatus st = ApplyGpuLayout(*nvml, Spec(0, 5, four));
  EXPECT_EQ(st.state, LayoutState::kApplied) << st.message;
  EXPECT_EQ(st.message, "destroyed 2g.20gb@4; created 1g.10gb@4; created 1g.10gb@5");
  EXPECT_EQ(fake.Instances(0), four);
}

TEST(MigApplyObject, AppliesNewRevisionsAndKeepsTheRest) {
  FakeNode fake(Node());
  auto nvml = Open();
  ASSERT_TRUE(nvml);
  const Json obj = {{"metadata", {{"name", "gpu-a"}}},
                    {"spec",
                     {{"nodeName", "gpu-a"},
                      {"gpus",
                       {{"0", {{"revision", 9}, {"migEnabled", true}, {"layout", "7g.80gb@0"}}},
                        {"1", {{"revision", 3}, {"migEnabled", false}}},
                        {"5", {{"revision", 4}, {"migEnabled", true}, {"layout", "7g.80gb@0"}}},
                        {"x", {{"revision", 4}, {"migEnabled", true}}},
                        {"2", {{"migEnabled", true}, {"layout", "1g.10gb@0"}}}}}}},
                    {"status",
                     {{"gpus",
                       {{"1", {{"observedRevision", 3}, {"state", "Applied"}, {"layout", ""}}},
                        {"7", {{"observedRevision", 1}, {"state", "Failed"}}}}}}}};
  MigApplyOptions opts;
  opts.now = [] { return std::string("2026-01-02T03:04:05Z"); };
  std::vector<std::string> keys;
  const Json status = ApplyMigLayoutObject(*nvml, obj, opts, &keys);
  EXPECT_EQ(keys, (std::vector<std::string>{"0", "2", "5", "x"}));
  const Json& g = status.at("gpus");
  EXPECT_EQ(g["0"]["state"], "Applied");
  EXPECT_EQ(g["0"]["observedRevision"], 9);
  EXPECT_EQ(g["0"]["layout"], "7g.80gb@0");
  EXPECT_EQ(g["0"]["lastTransitionTime"], "2026-01-02T03:04:05Z");
  EXPECT_EQ(g["1"], obj["status"]["gpus"]["1"]);
  EXPECT_EQ(g["7"], obj["status"]["gpus"]["7"]);
  EXPECT_EQ(g["5"]["state"], "Failed");
  EXPECT_EQ(g["5"]["observedRevision"], 4);
  EXPECT_EQ(g["5"]["message"], "GPU 5 does not exist on this node (3 GPU(s), indexes 0-2)");
  EXPECT_EQ(g["x"]["message"], "spec.gpus key 'x' is not a GPU index");
  EXPECT_EQ(g["x"]["observedRevision"], 4);
  EXPECT_EQ(g["2"]["message"], "spec.gpus.2.revision is missing");
  EXPECT_EQ(g["2"]["observedRevision"], 0);
  EXPECT_EQ(fake.Instances(0), "7g.80gb@0");
}

}  // namespace
}  // namespace tessera::agent
