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

// A node with one MIG GPU (0) and one non-MIG GPU (1), each A100-80GB, with per-GPU extras.
Json ModeNode(const Json& gpu0, const Json& gpu1) {
  Json g0 = {{"model", "A100-80GB"},
             {"uuid", "GPU-a100-0"},
             {"mig", true},
             {"mig_layout", "3g.40gb@0 2g.20gb@4 1g.10gb@6"}};
  Json g1 = {{"model", "A100-80GB"}, {"uuid", "GPU-a100-1"}, {"mig", false}};
  if (gpu0.is_object()) g0.update(gpu0);
  if (gpu1.is_object()) g1.update(gpu1);
  return {{"gpus", Json::array({g0, g1})}};
}

// "current/pending" MIG mode of a GPU in the fake's state file, "" before any NVML change.
std::string Mode(const FakeNode& fake, int gpu) {
  const Json s = fake.State();
  if (!s.is_array()) return "";
  const Json& g = s.at(static_cast<size_t>(gpu));
  return std::string(g.at("mig").get<bool>() ? "on" : "off") + "/" +
         (g.at("mig_pending").get<bool>() ? "on" : "off");
}

struct ModeCase {
  const char* name;
  Json gpu0, gpu1;
  GpuLayoutSpec spec;
  LayoutState state;
  std::string message;
  std::string layout;     // status layout
  std::string mode;       // Mode() afterwards of the spec's GPU
  std::string instances;  // FakeNode::Instances() afterwards of the spec's GPU
};

TEST(MigApply, SwitchesMigMode) {
  const std::string three = "3g.40gb@0 2g.20gb@4 1g.10gb@6";
  const std::string reset1 =
      " is set but takes effect only after a GPU reset (NVML: Reset required); with the GPU idle "
      "run `nvidia-smi -r -i 1` (or reboot the node)";
  const std::vector<ModeCase> cases = {
      {"enable an idle GPU, then lay it out",
       {},
       {},
       Spec(1, 2, three),
       LayoutState::kApplied,
       "MIG mode on; created 3g.40gb@0; created 2g.20gb@4; created 1g.10gb@6",
       three,
       "on/on",
       three},
      {"enable with no instances",
       {},
       {},
       Spec(1, 2, ""),
       LayoutState::kApplied,
       "MIG mode on",
       "",
       "on/on",
       ""},
      {"disable: free instances are destroyed first",
       {},
       {},
       Spec(0, 2, "", false),
       LayoutState::kApplied,
       "destroyed 3g.40gb@0; destroyed 2g.20gb@4; destroyed 1g.10gb@6; MIG mode off",
       "",
       "off/off",
       ""},
      {"disable an empty MIG GPU",
       {{"mig_layout", ""}},
       {},
       Spec(0, 2, "", false),
       LayoutState::kApplied,
       "MIG mode off",
       "",
       "off/off",
       ""},
      {"enable refused while processes run",
       {},
       {{"processes", {{{"pid", 78}}, {{"pid", 77}}}}},
       Spec(1, 2, three),
       LayoutState::kFailed,
       "GPU 1 (A100-80GB): not changed, turning MIG on needs the GPU idle; in use by pid 77, 78",
       "",
       "",
       ""},
      {"disable refused while processes run",
       {{"processes", {{{"pid", 5}, {"mig", "1g.10gb@6"}}}}},
       {},
       Spec(0, 2, "", false),
       LayoutState::kFailed,
       "GPU 0 (A100-80GB): not changed, turning MIG off needs the GPU idle; in use by pid 5",
       three,
       "",
       ""},
      {"enable pending a reset",
       {},
       {{"mig_mode_change", "pending_reset"}},
       Spec(1, 2, three),
       LayoutState::kFailed,
       "GPU 1 (A100-80GB): PendingReset: MIG mode on" + reset1,
       "",
       "off/on",
       ""},
      {"disable pending a reset",
       {{"mig_layout", ""}, {"mig_mode_change", "pending_reset"}},
       {},
       Spec(0, 2, "", false),
       LayoutState::kFailed,
       "GPU 0 (A100-80GB): PendingReset: MIG mode off is set but takes effect only after a GPU "
       "reset (NVML: Reset required); with the GPU idle run `nvidia-smi -r -i 0` (or reboot the "
       "node)",
       "",
       "on/off",
       ""},
      {"NVML refuses the change",
       {},
       {{"fail", {{"nvmlDeviceSetMigMode", "NVML_ERROR_NO_PERMISSION"}}}},
       Spec(1, 2, three),
       LayoutState::kFailed,
       "GPU 1 (A100-80GB): setting MIG mode on: nvmlDeviceSetMigMode(gpu 1): Insufficient "
       "Permissions",
       "",
       "",
       ""},
      {"NVML fails after the instances are gone",
       {{"fail", {{"nvmlDeviceSetMigMode", "NVML_ERROR_UNKNOWN"}}}},
       {},
       Spec(0, 2, "", false),
       LayoutState::kFailed,
       "GPU 0 (A100-80GB): setting MIG mode off: nvmlDeviceSetMigMode(gpu 0): Unknown Error",
       "",
       "on/on",
       ""},
      {"on as asked cancels a pending disable",
       {{"mig_pending", false}},
       {},
       Spec(0, 2, "3g.40gb@0 2g.20gb@4 1g.10gb@6"),
       LayoutState::kApplied,
       "cancelled the pending MIG disable",
       three,
       "on/on",
       three},
      {"off as asked cancels a pending enable",
       {},
       {{"mig_pending", true}},
       Spec(1, 2, "", false),
       LayoutState::kApplied,
       "MIG is off; cancelled the pending enable",
       "",
       "off/off",
       ""},
  };
  for (const ModeCase& c : cases) {
    SCOPED_TRACE(c.name);
    FakeNode fake(ModeNode(c.gpu0, c.gpu1));
    auto nvml = Open();
    ASSERT_TRUE(nvml);
    const std::string dir = TempPath("state");
    MigApplyOptions opts;
    opts.state_dir = dir;
    GpuLayoutStatus st = ApplyGpuLayout(*nvml, c.spec, opts);
    EXPECT_EQ(LayoutStateName(st.state), std::string(LayoutStateName(c.state))) << st.message;
    EXPECT_EQ(st.observed_revision, 2);
    EXPECT_EQ(st.message, c.message);
    EXPECT_EQ(st.layout, c.layout);
    EXPECT_EQ(Mode(fake, c.spec.index), c.mode);
    EXPECT_EQ(fake.Instances(c.spec.index), c.instances);
    EXPECT_FALSE(ReadMigJournal(dir, c.spec.index).ok()) << "the outcome is final";
  }
}

TEST(MigApply, PendingResetIsReportedAgainWithoutChanges) {
  FakeNode fake(ModeNode({}, {{"mig_mode_change", "pending_reset"}}));
  auto nvml = Open();
  ASSERT_TRUE(nvml);
  GpuLayoutStatus first = ApplyGpuLayout(*nvml, Spec(1, 2, "7g.80gb@0"));
  EXPECT_EQ(first.state, LayoutState::kFailed);
  const std::string after_first = fake.State().dump();
  EXPECT_EQ(Mode(fake, 1), "off/on");
  EXPECT_EQ(Mode(fake, 0), "on/on") << "the other GPU is untouched";
  EXPECT_EQ(fake.Instances(0), "3g.40gb@0 2g.20gb@4 1g.10gb@6");

  GpuLayoutStatus again = ApplyGpuLayout(*nvml, Spec(1, 3, "7g.80gb@0"));
  EXPECT_EQ(again.state, LayoutState::kFailed);
  EXPECT_EQ(again.message,
            "GPU 1 (A100-80GB): PendingReset: MIG mode on is set but takes effect only after a "
            "GPU reset; with the GPU idle run `nvidia-smi -r -i 1` (or reboot the node)");
  EXPECT_EQ(fake.State().dump(), after_first);
  const Json js = GpuLayoutStatusJson(again);
  EXPECT_EQ(js["state"], "Failed") << "a state the scheduler reverts on";
}

struct KillCase {
  const char* name;
  GpuLayoutSpec spec;
  std::string kill_after;
  std::string layout_killed;  // FakeNode::Instances() after the kill
  std::string resumed;        // message of the restarted run
  std::string mode, instances;
};

TEST(MigApply, InterruptedMigModeChangeConverges) {
  const std::vector<KillCase> cases = {
      {"enable, killed before the layout", Spec(1, 8, "7g.80gb@0"), "set MIG mode on", "",
       "resumed revision 8 interrupted after: set MIG mode on; created 7g.80gb@0", "on/on",
       "7g.80gb@0"},
      {"enable, killed between instances", Spec(1, 8, "4g.40gb@0 3g.40gb@4"),
       "create compute instance of 4g.40gb@0", "4g.40gb@0",
       "resumed revision 8 interrupted after: create compute instance of 4g.40gb@0; created "
       "3g.40gb@4",
       "on/on", "4g.40gb@0 3g.40gb@4"},
      {"disable, killed between the destroys", Spec(0, 8, "", false),
       "destroy GPU instance 2g.20gb@4", "1g.10gb@6",
       "resumed revision 8 interrupted after: destroy GPU instance 2g.20gb@4; destroyed "
       "1g.10gb@6; MIG mode off",
       "off/off", ""},
      {"disable, killed after the mode change", Spec(0, 8, "", false), "set MIG mode off", "",
       "resumed revision 8 interrupted after: set MIG mode off; MIG is off", "off/off", ""},
  };
  for (const KillCase& c : cases) {
    SCOPED_TRACE(c.name);
    FakeNode fake(ModeNode({}, {}));
    const std::string dir = TempPath("state");
    {
      auto nvml = Open();
      ASSERT_TRUE(nvml);
      MigApplyOptions opts;
      opts.state_dir = dir;
      opts.after_step = [&](const std::string& step) {
        return step == c.kill_after ? Internal("agent killed") : Status::Ok();
      };
      GpuLayoutStatus st = ApplyGpuLayout(*nvml, c.spec, opts);
      EXPECT_EQ(st.state, LayoutState::kApplying) << st.message;
    }
    EXPECT_EQ(fake.Instances(c.spec.index), c.layout_killed);
    auto journal = ReadMigJournal(dir, c.spec.index);
    ASSERT_TRUE(journal.ok());
    EXPECT_EQ(journal->step, c.kill_after);

    auto nvml = Open();  // a restarted agent: the fake reloads its state file
    ASSERT_TRUE(nvml);
    MigApplyOptions opts;
    opts.state_dir = dir;
    GpuLayoutStatus st = ApplyGpuLayout(*nvml, c.spec, opts);
    EXPECT_EQ(st.state, LayoutState::kApplied) << st.message;
    EXPECT_EQ(st.message, c.resumed);
    EXPECT_EQ(Mode(fake, c.spec.index), c.mode);
    EXPECT_EQ(fake.Instances(c.spec.index), c.instances);
    EXPECT_FALSE(ReadMigJournal(dir, c.spec.index).ok());
  }
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
