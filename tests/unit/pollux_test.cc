#include "sim/pollux.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "sim/pollux_sim.h"
#include "tests/support/test_paths.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Progress model on a small synthetic profile.
//
// placements: "1", "2", "11", "13", "22" at local batch 4 and 8; scalability: 6 nodes with 6 and
// 12 GPUs. Grid (nodes -> GPUs): 1 -> {1, 2}; 2 -> {2 ("11"), 4 (mean of "13" and "22"), ...};
// 6 -> {6, 12}. The largest local batch (the accumulation cap) is 8.

PolluxPlacementRow P(std::vector<int> p, double b, double step, double sync) {
  return {std::move(p), b, step, sync};
}

std::vector<PolluxPlacementRow> ToyPlacements() {
  return {P({1}, 4, 1.0, 0.1),    P({1}, 8, 1.8, 0.1),    P({2}, 4, 1.2, 0.2),
          P({2}, 8, 2.0, 0.2),    P({1, 1}, 4, 1.5, 0.5), P({1, 1}, 8, 2.3, 0.5),
          P({1, 3}, 4, 2.0, 0.6), P({1, 3}, 8, 3.0, 0.6), P({2, 2}, 4, 1.6, 0.4),
          P({2, 2}, 8, 2.4, 0.4)};
}

std::vector<PolluxScalabilityRow> ToyScalability() {
  return {{6, 6, 4, 3.0, 2.0}, {6, 6, 8, 4.0, 2.0}, {6, 12, 4, 5.0, 3.0}, {6, 12, 8, 6.0, 3.0}};
}

std::vector<PolluxValidationRow> Epochs(std::vector<std::pair<double, int64_t>> rows,
                                        double sqr = 1, double var = 0) {
  std::vector<PolluxValidationRow> out;
  for (auto [progress, iteration] : rows) out.push_back({progress, iteration, 0.5, sqr, var});
  return out;
}

PolluxApp ToyApp(const PolluxModelOptions& options = {}) {
  std::map<int64_t, std::vector<PolluxValidationRow>> v;
  v[4] = Epochs({{100, 50}, {200, 100}});
  v[16] = Epochs({{100, 10}, {200, 25}});
  auto app = PolluxApp::Create("toy", ToyPlacements(), ToyScalability(), std::move(v), options);
  EXPECT_TRUE(app.ok()) << app.status().message();
  return std::move(app).value();
}

struct StepCase {
  const char* label;
  std::vector<int> placement;
  double local_bsz;
  double step, sync;
};

void PrintTo(const StepCase& c, std::ostream* os) {
  *os << c.label;
}

class StepTimeTest : public ::testing::TestWithParam<StepCase> {};

TEST_P(StepTimeTest, MatchesHandComputedValue) {
  const StepCase& c = GetParam();
  auto p = ToyApp().Profile(c.placement, c.local_bsz);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_NEAR(p->step_time, c.step, 1e-12);
  EXPECT_NEAR(p->sync_time, c.sync, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, StepTimeTest,
    ::testing::Values(
        StepCase{"ExactProfiledPoint", {1}, 4, 1.0, 0.1},
        StepCase{"ExactInterpolatedInBatch", {1}, 6, 1.4, 0.1},
        StepCase{"BelowBatchRangeClamps", {1}, 2, 1.0, 0.1},
        StepCase{"AboveBatchRangeClamps", {1}, 20, 1.8, 0.1},
        StepCase{"RotationFindsProfile", {3, 1}, 8, 3.0, 0.6},
        StepCase{"ZerosIgnored", {0, 2, 0, 2}, 4, 1.6, 0.4},
        // 3 nodes, 3 GPUs: between (2 nodes, 2 GPUs) = "11" and (6 nodes, 6 GPUs), x = 1/4.
        StepCase{
            "NodeInterpolation", {1, 1, 1}, 4, 1.5 + 0.25 * (3.0 - 1.5), 0.5 + 0.25 * (2.0 - 0.5)},
        // 4 nodes, 8 GPUs: (2 nodes, 4 GPUs) = mean of "13" and "22" = (1.8, 0.5) at batch 4,
        // and (6 nodes, 12 GPUs) = (5.0, 3.0); x = 1/2.
        StepCase{
            "GridAverageAndNodeInterpolation", {2, 2, 2, 2}, 4, (1.8 + 5.0) / 2, (0.5 + 3.0) / 2},
        // 6 nodes, 9 GPUs: halfway between 6 and 12 GPUs at batch 6 (curves 3.5 and 5.5).
        StepCase{"GpuInterpolation", {1, 1, 1, 2, 2, 2}, 6, 4.5, 2.5},
        // 2 nodes with 2 and 4 GPUs ("24" is not profiled): grid (2, 6) clamps to (2, 4).
        StepCase{"GpuBeyondGridClamps", {2, 4}, 8, 2.7, 0.5},
        // 8 nodes, beyond the largest profiled node count: (6, 8 GPUs), 1/3 of 6 -> 12.
        StepCase{
            "NodesBeyondGridClamp", {1, 1, 1, 1, 1, 1, 1, 1}, 4, 3.0 + 2.0 / 3, 2.0 + 1.0 / 3}),
    [](const auto& info) { return std::string(info.param.label); });

struct IterCase {
  const char* label;
  std::vector<int> placement;
  double batch;
  PolluxModelOptions options;
  double seconds;
  int accum;
};

void PrintTo(const IterCase& c, std::ostream* os) {
  *os << c.label;
}

class IterationTimeTest : public ::testing::TestWithParam<IterCase> {};

TEST_P(IterationTimeTest, AccumulatesBeyondTheCap) {
  const IterCase& c = GetParam();
  auto t = ToyApp(c.options).IterationTime(c.placement, c.batch);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_NEAR(t->seconds, c.seconds, 1e-12);
  EXPECT_EQ(t->accum_steps, c.accum);
}

PolluxModelOptions Cap(double cap) {
  PolluxModelOptions o;
  o.max_local_bsz = cap;
  return o;
}
PolluxModelOptions SingleGpuAccumulation() {
  PolluxModelOptions o;
  o.single_gpu_accumulation = true;
  return o;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, IterationTimeTest,
    ::testing::Values(
        // Local batch 12 / 2 = 6 on "2": (1.2 + 2.0) / 2.
        IterCase{"NoAccumulation", {2}, 12, {}, 1.6, 0},
        IterCase{"ExactlyAtCap", {1}, 8, {}, 1.8, 0},
        // Local 48 / 2 = 24 > 8: k = 2 extra steps of 8, 2.0 + 2 * (2.0 - 0.2).
        IterCase{"TwoExtraSteps", {2}, 48, {}, 2.0 + 2 * 1.8, 2},
        // Local 10 on 1 GPU: k = 1, micro-batch 5: step 1.2, sync 0.1 -> 1.2 + 1.1.
        IterCase{"FractionalMicroBatch", {1}, 10, {}, 1.2 + 1.1, 1},
        // A cap of 4: local 8 takes one extra step of 4: 1.0 + 0.9.
        IterCase{"CapOverride", {1}, 8, Cap(4), 1.0 + 0.9, 1},
        // One GPU, batch 8 > B0 = 4: one extra step of 4 even below the cap.
        IterCase{"SingleGpuAccumulation", {1}, 8, SingleGpuAccumulation(), 1.0 + 0.9, 1},
        IterCase{"SingleGpuAtB0", {1}, 4, SingleGpuAccumulation(), 1.0, 0},
        IterCase{"SingleGpuOptionIgnoresTwoGpus", {2}, 8, SingleGpuAccumulation(), 1.2, 0}),
    [](const auto& info) { return std::string(info.param.label); });

TEST(PolluxModel, IterationsFromTheLastEpoch) {
  const PolluxApp app = ToyApp();
  EXPECT_EQ(app.epochs(), 2);
  EXPECT_DOUBLE_EQ(app.IterationsToComplete(4).value(), 100);
  EXPECT_DOUBLE_EQ(app.IterationsToComplete(16).value(), 25);
  // Log-log halfway between (4, 100) and (16, 25).
  EXPECT_NEAR(app.IterationsToComplete(8).value(), 50, 1e-9);
  auto below = app.IterationsToComplete(2);
  ASSERT_FALSE(below.ok());
  EXPECT_NE(below.status().message().find("outside the profiled range 4..16"), std::string::npos);
  EXPECT_FALSE(app.IterationsToComplete(17).ok());
}

TEST(PolluxModel, ProgressWorkUsesStatisticalEfficiency) {
  std::map<int64_t, std::vector<PolluxValidationRow>> v;
  v[4] = Epochs({{100, 100}, {200, 200}}, 1, 3);
  // Batch 16, scale 4: epoch 1 gain (3 + 1) / (3 / 4 + 1) = 16 / 7; epoch 2 has no noise: 1.
  v[16] = {{100, 40, 0.5, 1, 3}, {200, 80, 0.5, 1, 0}};
  PolluxModelOptions o;
  o.work = PolluxModelOptions::Work::kProgress;
  auto app = PolluxApp::Create("p", ToyPlacements(), {}, v, o);
  ASSERT_TRUE(app.ok()) << app.status().message();
  EXPECT_NEAR(app->IterationsToComplete(4).value(), 200, 1e-9);
  EXPECT_NEAR(app->IterationsToComplete(16).value(), 100 * 7.0 / 16 + 100, 1e-9);
  auto plain = PolluxApp::Create("p", ToyPlacements(), {}, v);
  EXPECT_DOUBLE_EQ(plain->IterationsToComplete(16).value(), 80);
}

TEST(PolluxModel, CanonicalPlacementIsTheSmallestRotation) {
  EXPECT_EQ(CanonicalPlacement(std::vector<int>{4, 4, 2}), (std::vector<int>{2, 4, 4}));
  EXPECT_EQ(CanonicalPlacement(std::vector<int>{2, 1, 2, 1}), (std::vector<int>{1, 2, 1, 2}));
  EXPECT_EQ(CanonicalPlacement(std::vector<int>{3, 0, 1}), (std::vector<int>{1, 3}));
  EXPECT_TRUE(CanonicalPlacement(std::vector<int>{}).empty());
}

TEST(PolluxModel, RejectsBadQueriesAndProfiles) {
  const PolluxApp app = ToyApp();
  EXPECT_FALSE(app.Profile(std::vector<int>{0, 0}, 4).ok());
  EXPECT_FALSE(app.Profile(std::vector<int>{1, -1}, 4).ok());
  EXPECT_FALSE(app.Profile(std::vector<int>{1}, 0).ok());
  EXPECT_FALSE(app.IterationTime(std::vector<int>{}, 8).ok());
  EXPECT_FALSE(app.IterationTime(std::vector<int>{1}, -1).ok());

  std::map<int64_t, std::vector<PolluxValidationRow>> v{{4, Epochs({{1, 1}})}};
  auto twice = PolluxApp::Create("x", {P({1, 2}, 4, 1, 0), P({2, 1}, 4, 1, 0)}, {}, v);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("profiled twice"), std::string::npos);
  v[8] = Epochs({{1, 1}, {2, 2}});
  auto epochs = PolluxApp::Create("x", {P({1}, 4, 1, 0)}, {}, v);
  ASSERT_FALSE(epochs.ok());
  EXPECT_NE(epochs.status().message().find("has 2 epochs, batch 4 has 1"), std::string::npos);
  EXPECT_FALSE(PolluxApp::Create("x", {}, {}, {{4, Epochs({{1, 1}})}}).ok());
  EXPECT_FALSE(PolluxApp::Create("x", {P({1}, 4, 1, 0)}, {}, {}).ok());
}

// ---------------------------------------------------------------------------------------------
// Readers.

struct ErrorCase {
  const char* label;
  int format;  // 0 placements, 1 scalability, 2 validation, 3 workload
  std::string content;
  const char* where;  // FILE:LINE:COL
  const char* reason;
};

void PrintTo(const ErrorCase& c, std::ostream* os) {
  *os << c.label;
}

Status ParseAs(int format, const std::string& text) {
  switch (format) {
    case 0:
      return ParsePolluxPlacements(text, "t.csv").status();
    case 1:
      return ParsePolluxScalability(text, "t.csv").status();
    case 2:
      return ParsePolluxValidation(text, "t.csv").status();
    default:
      return ParsePolluxWorkload(text, "t.csv").status();
  }
}

class ReaderErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ReaderErrorTest, ReportsLocationAndReason) {
  const ErrorCase& c = GetParam();
  Status st = ParseAs(c.format, c.content);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message().rfind(std::string(c.where) + ": ", 0), 0u) << st.message();
  EXPECT_NE(st.message().find(c.reason), std::string::npos) << st.message();
}

const std::string kPl = "placement,local_bsz,step_time,sync_time\n1,4,0.5,0.1\n";
const std::string kSc = "num_nodes,num_replicas,local_bsz,step_time,sync_time\n6,6,4,1.5,1\n";
const std::string kVa = "progress,iteration,metric,grad_sqr,grad_var\n10.5,10,0.1,1e-3,2\n";
const std::string kWl =
    "name,time,application,num_replicas,batch_size\ncifar10-0,107,cifar10,6,2048\n";

INSTANTIATE_TEST_SUITE_P(
    Cases, ReaderErrorTest,
    ::testing::Values(
        ErrorCase{"Empty", 0, "", "t.csv:1:1", "empty file, expected the header"},
        ErrorCase{"WrongHeader", 0, "placement,local_bsz,step,sync_time\n", "t.csv:1:21",
                  "unexpected column 'step'"},
        ErrorCase{"ShortHeader", 1, "num_nodes,num_replicas,local_bsz,step_time\n", "t.csv:1:1",
                  "header lacks column 'sync_time'"},
        ErrorCase{"ExtraColumn", 3, "name,time,application,num_replicas,batch_size,x\n",
                  "t.csv:1:47", "unexpected column 'x'"},
        ErrorCase{"BomSkipped", 2, "\xEF\xBB\xBFprogress,iteration,metric,grad_sq,grad_var\n",
                  "t.csv:1:27", "unexpected column 'grad_sq'"},
        ErrorCase{"RowWidth", 0, kPl + "2,4,0.5\n", "t.csv:3:1", "expected 4 fields, found 3"},
        ErrorCase{"PlacementLetter", 0, kPl + "1a,4,0.5,0.1\n", "t.csv:3:1",
                  "column 'placement': '1a' is not a digit string"},
        ErrorCase{"PlacementZero", 0, kPl + "10,4,0.5,0.1\n", "t.csv:3:1", "is not a digit string"},
        ErrorCase{"PlacementEmpty", 0, kPl + ",4,0.5,0.1\n", "t.csv:3:1", "empty placement"},
        ErrorCase{"LocalBatchText", 0, kPl + "2,four,0.5,0.1\n", "t.csv:3:3",
                  "column 'local_bsz': 'four' is not a number"},
        ErrorCase{"LocalBatchZero", 0, kPl + "2,0,0.5,0.1\n", "t.csv:3:3", "0 is not positive"},
        ErrorCase{"StepNegative", 0, kPl + "2,4,-0.5,0\n", "t.csv:3:5",
                  "column 'step_time': -0.5 is not positive"},
        ErrorCase{"SyncNegative", 0, kPl + "2,4,0.5,-0.1\n", "t.csv:3:9",
                  "column 'sync_time': negative value -0.1"},
        ErrorCase{"SyncAboveStep", 0, kPl + "2,4,0.5,0.7\n", "t.csv:3:9",
                  "0.7 exceeds step_time 0.5"},
        ErrorCase{"NotFinite", 0, kPl + "2,4,inf,0\n", "t.csv:3:5", "'inf' is not a number"},
        ErrorCase{"Overflow", 0, kPl + "2,4,1e999,0\n", "t.csv:3:5", "'1e999' is out of range"},
        ErrorCase{"ScalNodesZero", 1, kSc + "0,6,4,1,0\n", "t.csv:3:1",
                  "column 'num_nodes': 0 outside the allowed range"},
        ErrorCase{"ScalFewerGpusThanNodes", 1, kSc + "8,6,4,1,0\n", "t.csv:3:3",
                  "6 GPUs on 8 nodes"},
        ErrorCase{"ScalFraction", 1, kSc + "8,8.5,4,1,0\n", "t.csv:3:3",
                  "column 'num_replicas': '8.5' is not an integer"},
        ErrorCase{"ValidationNoRows", 2, "progress,iteration,metric,grad_sqr,grad_var\n",
                  "t.csv:2:1", "no epochs"},
        ErrorCase{"ValidationIterationRepeats", 2, kVa + "20,10,0.2,1,1\n", "t.csv:3:4",
                  "10 does not exceed the previous epoch's 10"},
        ErrorCase{"ValidationProgressFalls", 2, kVa + "9,20,0.2,1,1\n", "t.csv:3:1",
                  "below the previous epoch's"},
        ErrorCase{"ValidationIterationZero", 2,
                  "progress,iteration,metric,grad_sqr,grad_var\n0,0,0,0,0\n", "t.csv:2:3",
                  "column 'iteration': 0 outside the allowed range"},
        ErrorCase{"ValidationNegativeVariance", 2, kVa + "20,20,0.2,1,-1\n", "t.csv:3:13",
                  "column 'grad_var': negative value -1"},
        ErrorCase{"WorkloadDuplicate", 3, kWl + "cifar10-0,108,cifar10,6,2048\n", "t.csv:3:1",
                  "duplicate job name 'cifar10-0'"},
        ErrorCase{"WorkloadEmptyName", 3, kWl + ",108,cifar10,6,2048\n", "t.csv:3:1",
                  "empty job name"},
        ErrorCase{"WorkloadNegativeTime", 3, kWl + "j,-1,cifar10,6,2048\n", "t.csv:3:3",
                  "column 'time': negative value -1"},
        ErrorCase{"WorkloadHugeTime", 3, kWl + "j,2e9,cifar10,6,2048\n", "t.csv:3:3",
                  "exceeds 1e9 seconds"},
        ErrorCase{"WorkloadPathInApp", 3, kWl + "j,1,../x,6,2048\n", "t.csv:3:5",
                  "column 'application': '../x' is not a profile name"},
        ErrorCase{"WorkloadZeroGpus", 3, kWl + "j,1,cifar10,0,2048\n", "t.csv:3:13",
                  "column 'num_replicas': 0 outside the allowed range 1..4096"},
        ErrorCase{"WorkloadBatchFraction", 3, kWl + "j,1,cifar10,6,20.5\n", "t.csv:3:15",
                  "column 'batch_size': '20.5' is not an integer"},
        ErrorCase{"UnterminatedQuote", 3, kWl + "\"j,1,cifar10,6,2\n", "t.csv:3:1",
                  "unterminated quote"}),
    [](const auto& info) { return std::string(info.param.label); });

TEST(PolluxReaders, ParseValidFiles) {
  auto pl = ParsePolluxPlacements(kPl + "1244,8,2.5,1e-1\r\n", "t.csv");
  ASSERT_TRUE(pl.ok()) << pl.status().message();
  ASSERT_EQ(pl->size(), 2u);
  EXPECT_EQ((*pl)[1].placement, (std::vector<int>{1, 2, 4, 4}));
  EXPECT_DOUBLE_EQ((*pl)[1].sync_time, 0.1);
  auto sc = ParsePolluxScalability(kSc, "t.csv");
  ASSERT_TRUE(sc.ok());
  EXPECT_EQ((*sc)[0].num_replicas, 6);
  auto va = ParsePolluxValidation(kVa + "20,30,-1.5,0,0\n", "t.csv");
  ASSERT_TRUE(va.ok()) << va.status().message();
  EXPECT_EQ((*va)[1].iteration, 30);
  EXPECT_DOUBLE_EQ((*va)[1].metric, -1.5);
  auto wl = ParsePolluxWorkload(kWl + "ncf-2,135.5,ncf,1,32768\n", "t.csv");
  ASSERT_TRUE(wl.ok()) << wl.status().message();
  ASSERT_EQ(wl->size(), 2u);
  EXPECT_EQ((*wl)[1].line, 3);
  EXPECT_DOUBLE_EQ((*wl)[1].time, 135.5);
  EXPECT_EQ((*wl)[1].batch_size, 32768);
}

class PolluxDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           (std::string("pollux_test_") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    Write("placements.csv", kPl);
    Write("scalability.csv", kSc);
    Write("validation-4.csv", kVa);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  fs::path dir_;
};

TEST_F(PolluxDirTest, ReadsAnAppFolder) {
  Write("validation-16.csv", kVa);
  auto app = ReadPolluxApp(dir_.string(), "toy");
  ASSERT_TRUE(app.ok()) << app.status().message();
  EXPECT_EQ(app->min_batch(), 4);
  EXPECT_EQ(app->max_batch(), 16);
}

TEST_F(PolluxDirTest, RejectsBadValidationName) {
  Write("validation-08.csv", kVa);
  auto app = ReadPolluxApp(dir_.string(), "toy");
  ASSERT_FALSE(app.ok());
  EXPECT_NE(app.status().message().find("validation-08.csv: expected the name"), std::string::npos);
}

TEST_F(PolluxDirTest, ErrorInsideAProfileNamesTheFile) {
  Write("validation-8.csv", kVa + "5,20,0,0,0\n");
  auto app = ReadPolluxApp(dir_.string(), "toy");
  ASSERT_FALSE(app.ok());
  EXPECT_NE(app.status().message().find("validation-8.csv:3:1: column 'progress'"),
            std::string::npos)
      << app.status().message();
}

TEST_F(PolluxDirTest, MissingProfileIsAnError) {
  fs::remove(dir_ / "scalability.csv");
  EXPECT_FALSE(ReadPolluxApp(dir_.string(), "toy").ok());
}

TEST(PolluxReaders, SummaryJson) {
  auto r = ParsePolluxSummary(R"({"jcts": {}, "avgs": {"workload-1": 10.5}, "mean": 10.5})",
                              "s.json", "tiresias");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->avg_jct.at("workload-1"), 10.5);
  EXPECT_FALSE(ParsePolluxSummary("{", "s.json", "x").ok());
  EXPECT_FALSE(ParsePolluxSummary(R"({"avgs": {"w": -1}, "mean": 1})", "s.json", "x").ok());
  EXPECT_FALSE(ParsePolluxSummary(R"({"avgs": {}})", "s.json", "x").ok());
}

// ---------------------------------------------------------------------------------------------
// Policies on tiny workloads. Apps "wN" run N iterations of 1 s on any placement (one profile
// point, so every placement clamps to it). "fast4" runs 1 s/iteration on one node of 4 GPUs and
// 2 s split 2+2; "fast22" the reverse.

PolluxApp FlatApp(const std::string& name, int64_t iterations, double step4 = 1,
                  double step22 = 1) {
  std::map<int64_t, std::vector<PolluxValidationRow>> v{{1, Epochs({{1, iterations}})}};
  auto app = PolluxApp::Create(
      name, {P({1}, 1, 1, 0), P({2}, 1, 1, 0), P({4}, 1, step4, 0), P({2, 2}, 1, step22, 0)}, {},
      v);
  EXPECT_TRUE(app.ok()) << app.status().message();
  return std::move(app).value();
}

PolluxApps ToyApps() {
  PolluxApps apps;
  for (int64_t n : {600, 650, 6000, 20000, 40000})
    apps.emplace("w" + std::to_string(n), FlatApp("w" + std::to_string(n), n));
  apps.emplace("fast4", FlatApp("fast4", 600, 1, 2));
  apps.emplace("fast22", FlatApp("fast22", 600, 2, 1));
  return apps;
}

struct JobLine {
  const char* name;
  double time;
  const char* app;
  int gpus;
};

PolluxWorkload Workload(const std::vector<JobLine>& lines) {
  PolluxWorkload w;
  w.name = "toy";
  w.source = "toy.csv";
  int line = 2;
  for (const auto& l : lines) w.jobs.push_back({l.name, l.time, l.app, l.gpus, 1, line++});
  return w;
}

struct PolicyCase {
  const char* label;
  PolluxPolicy policy;
  int nodes;
  std::vector<JobLine> jobs;
  std::vector<double> jcts;  // in job order
  int preemptions;
};

void PrintTo(const PolicyCase& c, std::ostream* os) {
  *os << c.label;
}

class PolicyTest : public ::testing::TestWithParam<PolicyCase> {};

TEST_P(PolicyTest, ExactJcts) {
  const PolicyCase& c = GetParam();
  PolluxSimConfig cfg;
  cfg.nodes = c.nodes;
  const PolluxApps apps = ToyApps();
  auto r = SimulatePollux(apps, Workload(c.jobs), c.policy, cfg);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->jobs.size(), c.jcts.size());
  for (size_t i = 0; i < c.jcts.size(); ++i)
    EXPECT_NEAR(r->jobs[i].jct, c.jcts[i], 1e-6) << r->jobs[i].name;
  EXPECT_EQ(r->preemptions, c.preemptions);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PolicyTest,
    ::testing::Values(
        // One node of 4 GPUs. Every start costs 30 s; rounds every 60 s.
        PolicyCase{"FifoArrivalOrder",
                   PolluxPolicy::kFifo,
                   1,
                   {{"a", 0, "w600", 4}, {"b", 0, "w600", 4}, {"c", 0, "w600", 1}},
                   {630, 1290, 1950},
                   0},
        // b does not fit next to a; c does and passes it (BestEffortFIFO).
        PolicyCase{"FifoBestEffortPasses",
                   PolluxPolicy::kFifo,
                   1,
                   {{"a", 0, "w600", 3}, {"b", 0, "w600", 4}, {"c", 0, "w600", 1}},
                   {630, 1290, 630},
                   0},
        PolicyCase{"FifoStrictBlocks",
                   PolluxPolicy::kFifoStrict,
                   1,
                   {{"a", 0, "w600", 3}, {"b", 0, "w600", 4}, {"c", 0, "w600", 1}},
                   {630, 1290, 1950},
                   0},
        // Gang: b needs 3 GPUs and never starts on the 2 left by a.
        PolicyCase{"GangNeverPartial",
                   PolluxPolicy::kTiresias,
                   1,
                   {{"a", 0, "w600", 2}, {"b", 0, "w600", 3}},
                   {630, 1290},
                   0},
        // l (4 GPUs) reaches 16 GPU-hours at t = 14,400 and is demoted; s (queue 0) preempts
        // it, runs 14,400 + 30 + 600; l resumes at 15,060 with 20,000 - 14,370 = 5,630 s left.
        PolicyCase{"TiresiasDemotesAfter16GpuHours",
                   PolluxPolicy::kTiresias,
                   1,
                   {{"l", 0, "w20000", 4}, {"s", 100, "w600", 4}},
                   {15060 + 30 + 5630, 14400 + 630 - 100},
                   1},
        // On 2 GPUs the same 16 GPU-hours take 28,800 s.
        PolicyCase{"TiresiasDemotionCountsGpuTime",
                   PolluxPolicy::kTiresias,
                   1,
                   {{"l", 0, "w40000", 2}, {"s", 100, "w600", 4}},
                   {29460 + 30 + (40000 - 28770), 28800 + 630 - 100},
                   1},
        // Arrival order within queue 0, no preemption before demotion.
        PolicyCase{"TiresiasFifoWithinQueue",
                   PolluxPolicy::kTiresias,
                   1,
                   {{"a", 0, "w6000", 4}, {"b", 10, "w600", 4}},
                   {6030, 6060 + 630 - 10},
                   0},
        // Tiresias packs b (4 GPUs) on the free node: 1 s/iteration.
        PolicyCase{"TiresiasConsolidates",
                   PolluxPolicy::kTiresias,
                   2,
                   {{"a", 0, "w600", 2}, {"b", 0, "fast4", 4}},
                   {630, 630},
                   0},
        PolicyCase{"TiresiasConsolidatesEvenWhenSlower",
                   PolluxPolicy::kTiresias,
                   2,
                   {{"b", 0, "fast22", 4}},
                   {30 + 1200},
                   0},
        // Tessera picks the faster 2+2 split.
        PolicyCase{
            "TesseraFastestSplit", PolluxPolicy::kTessera, 2, {{"b", 0, "fast22", 4}}, {630}, 0},
        // At t = 120, s (630 x 4 GPU-s predicted) beats l ((5,910 - 30) x 4): l is preempted,
        // resumes at 780 and pays a second start.
        PolicyCase{"TesseraShortestFirstPreempts",
                   PolluxPolicy::kTessera,
                   1,
                   {{"l", 0, "w6000", 4}, {"s", 100, "w600", 4}},
                   {780 + 30 + 5910, 120 + 630 - 100},
                   1},
        // l has 560 s left at t = 120: (560 - 30) x 4 < 630 x 4, so it keeps its GPUs.
        PolicyCase{"TesseraKeepsANearlyDoneJob",
                   PolluxPolicy::kTessera,
                   1,
                   {{"l", 0, "w650", 4}, {"s", 100, "w600", 4}},
                   {680, 720 + 630 - 100},
                   0}),
    [](const auto& info) { return std::string(info.param.label); });

TEST(PolluxSim, ReportsStatistics) {
  PolluxSimConfig cfg;
  cfg.nodes = 1;
  auto r = SimulatePollux(ToyApps(),
                          Workload({{"a", 0, "w600", 4}, {"b", 0, "w600", 4}, {"c", 0, "w600", 1}}),
                          PolluxPolicy::kFifo, cfg);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->avg_jct, (630 + 1290 + 1950) / 3.0);
  EXPECT_DOUBLE_EQ(r->p50_jct, 1290);
  EXPECT_DOUBLE_EQ(r->p99_jct, 1950);
  EXPECT_DOUBLE_EQ(r->makespan, 1950);
  EXPECT_DOUBLE_EQ(r->jobs[1].start, 660);
  // Held: 630 x 4 twice and 630 x 1, over 4 GPUs x 1,950 s.
  EXPECT_NEAR(r->gpu_util, (630.0 * 9) / (4 * 1950), 1e-12);
}

TEST(PolluxSim, RejectsImpossibleJobs) {
  PolluxSimConfig cfg;
  cfg.nodes = 1;
  auto big = SimulatePollux(ToyApps(), Workload({{"a", 0, "w600", 4}, {"b", 0, "w600", 5}}),
                            PolluxPolicy::kFifo, cfg);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().message(), "toy.csv:3:1: job 'b': 5 GPUs exceed the cluster's 4");
  auto unknown =
      SimulatePollux(ToyApps(), Workload({{"a", 0, "nope", 1}}), PolluxPolicy::kFifo, cfg);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("toy.csv:2:1: job 'a': no profile"), std::string::npos);
  EXPECT_FALSE(ParsePolluxPolicy("sjf").ok());
  EXPECT_EQ(ParsePolluxPolicy("tiresias").value(), PolluxPolicy::kTiresias);
}

// ---------------------------------------------------------------------------------------------
// The real benchmark (skipped without the data). The whole 8-workload run takes well under a
// second in release builds and a few seconds under AddressSanitizer, so all workloads are used.

struct Bench {
  PolluxApps apps;
  std::vector<PolluxWorkload> workloads;
};

std::string BenchDir() {
  return test::SharedDir() + "/benchmarks/pollux";
}

Bench LoadBench(bool simulator_model) {
  Bench b;
  for (int i = 1; i <= 8; ++i) {
    auto w = ReadPolluxWorkload(BenchDir() + "/workloads/workload-" + std::to_string(i) + ".csv");
    EXPECT_TRUE(w.ok()) << w.status().message();
    if (w.ok()) b.workloads.push_back(std::move(w).value());
  }
  for (const char* app : {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}) {
    auto a = ReadPolluxApp(BenchDir() + "/traces/" + app, app,
                           simulator_model ? PolluxSimulatorModel(app) : PolluxModelOptions{});
    EXPECT_TRUE(a.ok()) << a.status().message();
    if (a.ok()) b.apps.emplace(app, std::move(a).value());
  }
  return b;
}

double MeanAvg(const std::vector<PolluxRunResult>& runs, PolluxPolicy p) {
  double sum = 0;
  int n = 0;
  for (const auto& r : runs)
    if (r.policy == p) sum += r.avg_jct, ++n;
  return sum / n;
}

TEST(PolluxBenchmark, ReproducesTiresiasAndTesseraBeatsIt) {
  if (!fs::exists(BenchDir() + "/workloads/workload-1.csv")) GTEST_SKIP() << "no " << BenchDir();
  const auto t0 = std::chrono::steady_clock::now();
  const Bench b = LoadBench(true);
  ASSERT_EQ(b.workloads.size(), 8u);
  auto runs = RunPolluxMatrix(b.apps, b.workloads,
                              {PolluxPolicy::kTiresias, PolluxPolicy::kTessera}, {}, 2);
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  const double tiresias = MeanAvg(*runs, PolluxPolicy::kTiresias);
  const double tessera = MeanAvg(*runs, PolluxPolicy::kTessera);
  EXPECT_GE(tiresias, 4038.2 * 0.9);
  EXPECT_LE(tiresias, 4038.2 * 1.1);
  EXPECT_LE(tessera, 3600);
  for (const auto& r : *runs) {
    EXPECT_EQ(r.jobs.size(), 160u);
    for (const auto& j : r.jobs) EXPECT_GT(j.jct, 30) << j.name;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 60);
}

TEST(PolluxBenchmark, TesseraAlsoWinsUnderTheProfileModel) {
  if (!fs::exists(BenchDir() + "/workloads/workload-1.csv")) GTEST_SKIP() << "no " << BenchDir();
  const Bench b = LoadBench(false);
  auto runs = RunPolluxMatrix(b.apps, b.workloads, {PolluxPolicy::kTessera}, {}, 2);
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  EXPECT_LE(MeanAvg(*runs, PolluxPolicy::kTessera), 3600);
}

TEST(PolluxBenchmark, ResultsDoNotDependOnThreads) {
  if (!fs::exists(BenchDir() + "/workloads/workload-1.csv")) GTEST_SKIP() << "no " << BenchDir();
  Bench b = LoadBench(true);
  b.workloads.resize(3);
  const std::vector<PolluxPolicy> policies = {PolluxPolicy::kFifo, PolluxPolicy::kTiresias,
                                              PolluxPolicy::kTessera};
  auto one = RunPolluxMatrix(b.apps, b.workloads, policies, {}, 1);
  auto three = RunPolluxMatrix(b.apps, b.workloads, policies, {}, 3);
  ASSERT_TRUE(one.ok() && three.ok());
  const std::string json = PolluxJson(*one, {}, {});
  EXPECT_EQ(json, PolluxJson(*three, {}, {}));
  const auto j = nlohmann::json::parse(json);
  EXPECT_TRUE(j["policies"]["tiresias"]["mean_avg_jct_s"].is_number());
  EXPECT_TRUE(j["policies"]["tessera"]["avg_jct_s"]["workload-3"].is_number());
  EXPECT_EQ(j["policies"]["fifo"]["workloads"]["workload-1"]["jcts_s"].size(), 160u);
}

}  // namespace
}  // namespace tessera
