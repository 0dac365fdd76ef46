#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cluster/mig_geometry.h"
#include "sharing/inference_planner.h"
#include "sim/parva.h"
#include "tests/support/test_paths.h"

namespace tessera {
namespace {

// ---------------------------------------------------------------------------------------------
// (a) The planner on small synthetic profiles, with hand-computed results.

InferenceProfileRow Row(int gpcs, int batch, int procs, double throughput, double latency_s) {
  return {gpcs, batch, procs, throughput, latency_s, true};
}

struct RuleCase {
  double latency_s;
  double slo_ms;
  bool eligible;
};

TEST(InferenceRuleTest, StrictBelowFortyFivePercentOfTruncatedSlo) {
  const RuleCase cases[] = {
      {0.044, 100, true},      // 44 ms < 0.9 * 100 / 2 = 45
      {0.045, 100, false},     // 45 is not below 45
      {0.0452, 100.9, false},  // the SLO is read as 100: 45.2 >= 45
      {0.0452, 101, true},     // 45.2 < 45.45
      {0.188, 418.5, true},    // 188 < 188.1 (418.5 read as 418)
      {0.1882, 418.5, false},  // 188.2 >= 188.1, although below 0.9 * 418.5 / 2 = 188.325
  };
  for (const RuleCase& c : cases) {
    EXPECT_EQ(InferenceRowEligible(c.latency_s, c.slo_ms), c.eligible)
        << c.latency_s << " s against " << c.slo_ms << " ms";
  }
}

struct PlanCase {
  const char* label;
  std::vector<InferenceProfile> profiles;
  std::vector<InferenceService> services;
  bool single_3g = false;
  int gpus;
  int gpcs;
  // Per service: its segments as "profile bB xK", sorted.
  std::vector<std::vector<std::string>> segments;
  std::vector<double> capacity;
  std::vector<std::string> layouts;  // per GPU, MigLayoutString; empty = not checked
};

void PrintTo(const PlanCase& c, std::ostream* os) {
  *os << c.label;
}

std::vector<PlanCase> PlanCases() {
  const InferenceProfile single{"m", {Row(1, 1, 3, 100, 0.010)}};
  return {
      {"capacity_is_throughput_times_procs",
       {single},
       {{"m", 250, 100}},
       false,
       1,
       1,
       {{"1g.10gb b1 x3"}},
       {300},
       {"1g.10gb@0"}},
      {"latency_rule_filters_rows",
       {{"m", {Row(1, 1, 1, 100, 0.010), Row(1, 8, 1, 400, 0.050)}}},
       {{"m", 90, 100}},  // 50 ms >= 45 ms: only batch 1
       false,
       1,
       1,
       {{"1g.10gb b1 x1"}},
       {100},
       {}},
      {"looser_slo_admits_bigger_batch",
       {{"m", {Row(1, 1, 1, 100, 0.010), Row(1, 8, 1, 400, 0.050)}}},
       {{"m", 90, 112}},  // 50 ms < 50.4 ms: batch 8, the larger capacity
       false,
       1,
       1,
       {{"1g.10gb b8 x1"}},
       {400},
       {}},
      {"slo_truncated_to_whole_ms",
       {{"m", {Row(1, 1, 1, 100, 0.010), Row(1, 8, 1, 400, 0.0452)}}},
       {{"m", 90, 100.9}},
       false,
       1,
       1,
       {{"1g.10gb b1 x1"}},
       {100},
       {}},
      {"strict_less_than",
       {{"m", {Row(1, 1, 1, 100, 0.010), Row(1, 8, 1, 400, 0.045)}}},
       {{"m", 90, 100}},
       false,
       1,
       1,
       {{"1g.10gb b1 x1"}},
       {100},
       {}},
      {"not_measured_and_too_many_procs_ignored",
       {{"m", {{1, 1, 1, 0, 0, false}, Row(1, 2, 1, 50, 0.010), Row(1, 4, 6, 1000, 0.010)}}},
       {{"m", 40, 100}},
       false,
       1,
       1,
       {{"1g.10gb b2 x1"}},
       {50},
       {}},
      {"fewest_gpcs_first",  // 3 x 1g (3 GPCs, margin 0) beats 2 x 2g (4 GPCs)
       {{"m", {Row(1, 1, 1, 100, 0.010), Row(2, 1, 1, 150, 0.010)}}},
       {{"m", 300, 100}},
       false,
       1,
       3,
       {{"1g.10gb b1 x1", "1g.10gb b1 x1", "1g.10gb b1 x1"}},
       {300},
       {"1g.10gb@0 1g.10gb@1 1g.10gb@2"}},
      {"equal_gpcs_larger_margin",  // 7 x 1g = 700 (margin 0) or one 7g = 800
       {{"m", {Row(1, 1, 1, 100, 0.010), Row(7, 1, 1, 800, 0.010)}}},
       {{"m", 700, 100}},
       false,
       1,
       7,
       {{"7g.80gb b1 x1"}},
       {800},
       {"7g.80gb@0"}},
      {"equal_margin_fewer_instances",  // 2 x 1g or one 2g: both 200, 2 GPCs, margin 0
       {{"m", {Row(1, 1, 1, 100, 0.010), Row(2, 1, 1, 200, 0.010)}}},
       {{"m", 200, 100}},
       false,
       1,
       2,
       {{"2g.20gb b1 x1"}},
       {200},
       {"2g.20gb@0"}},
      {"four_plus_three",  // 4g + 3g = 700 beats 7g = 650 on margin, both 7 GPCs
       {{"m", {Row(3, 1, 1, 300, 0.010), Row(4, 1, 1, 400, 0.010), Row(7, 1, 1, 650, 0.010)}}},
       {{"m", 650, 100}},
       false,
       1,
       7,
       {{"3g.40gb b1 x1", "4g.40gb b1 x1"}},
       {700},
       {"4g.40gb@0 3g.40gb@4"}},
      {"two_3g_share_a_real_a100",
       {{"m", {Row(3, 1, 1, 100, 0.010)}}},
       {{"m", 200, 100}},
       false,
       1,
       6,
       {{"3g.40gb b1 x1", "3g.40gb b1 x1"}},
       {200},
       {"3g.40gb@0 3g.40gb@4"}},
      {"single_3g_as_parvagpu_assumes",
       {{"m", {Row(3, 1, 1, 100, 0.010)}}},
       {{"m", 200, 100}},
       true,
       2,
       6,
       {{"3g.40gb b1 x1", "3g.40gb b1 x1"}},
       {200},
       {"3g.40gb@4", "3g.40gb@4"}},
      {"services_never_share_an_instance",
       {{"a", {Row(1, 1, 1, 100, 0.010)}}, {"b", {Row(1, 1, 1, 100, 0.010)}}},
       {{"a", 50, 100}, {"b", 50, 100}},
       false,
       1,
       2,
       {{"1g.10gb b1 x1"}, {"1g.10gb b1 x1"}},
       {100, 100},
       {"1g.10gb@0 1g.10gb@1"}},
      {"eighth_segment_needs_a_second_gpu",
       {{"m", {Row(1, 1, 1, 100, 0.010)}}},
       {{"m", 750, 100}},
       false,
       2,
       8,
       {std::vector<std::string>(8, "1g.10gb b1 x1")},
       {800},
       {}},
  };
}

class PlanTableTest : public ::testing::TestWithParam<PlanCase> {};

TEST_P(PlanTableTest, MatchesHandComputedPlan) {
  const PlanCase& c = GetParam();
  InferencePlanOptions opt;
  opt.single_3g_per_gpu = c.single_3g;
  auto plan = PlanInference(c.profiles, c.services, opt);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->all_slo_met);
  EXPECT_TRUE(plan->exact);
  EXPECT_EQ(plan->gpus, c.gpus);
  EXPECT_EQ(plan->gpcs_used, c.gpcs);
  const MigGeometry& geo = *MigGeometryFor("A100-80GB");
  ASSERT_EQ(plan->gpu_layouts.size(), static_cast<size_t>(plan->gpus));
  for (size_t g = 0; g < plan->gpu_layouts.size(); ++g) {
    EXPECT_TRUE(CheckMigLayout(geo, plan->gpu_layouts[g]).ok());
    if (!c.layouts.empty()) {
      EXPECT_EQ(MigLayoutString(geo, plan->gpu_layouts[g]), c.layouts[g]);
    }
  }
  std::set<std::pair<int, int>> instances;
  ASSERT_EQ(plan->services.size(), c.services.size());
  for (size_t i = 0; i < c.services.size(); ++i) {
    const InferenceServicePlan& s = plan->services[i];
    EXPECT_TRUE(s.slo_met) << s.reason;
    EXPECT_DOUBLE_EQ(s.capacity, c.capacity[i]);
    EXPECT_NEAR(s.margin_pct, 100.0 * (c.capacity[i] - s.rate) / s.rate, 1e-9);
    std::vector<std::string> got;
    for (const InferenceSegment& seg : s.segments) {
      got.push_back(seg.profile_name + " b" + std::to_string(seg.batch) + " x" +
                    std::to_string(seg.procs));
      EXPECT_TRUE(instances.insert({seg.gpu, seg.start}).second)
          << "instance gpu " << seg.gpu << " start " << seg.start << " used twice";
      const MigLayout& layout = plan->gpu_layouts.at(seg.gpu);
      EXPECT_NE(std::find(layout.begin(), layout.end(), MigInstance{seg.profile, seg.start}),
                layout.end());
    }
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, c.segments[i]);
  }
  size_t total_instances = 0;
  for (const MigLayout& l : plan->gpu_layouts) total_instances += l.size();
  EXPECT_EQ(total_instances, instances.size()) << "an instance without a segment";
}

INSTANTIATE_TEST_SUITE_P(Cases, PlanTableTest, ::testing::ValuesIn(PlanCases()),
                         [](const auto& info) { return std::string(info.param.label); });

TEST(InferencePlanTest, InfeasibleServiceReportedNotMet) {
  const std::vector<InferenceProfile> profiles = {{"fast", {Row(1, 1, 1, 100, 0.010)}},
                                                  {"slow", {Row(1, 1, 1, 100, 0.060)}}};
  auto plan = PlanInference(profiles, {{"slow", 10, 100}, {"fast", 10, 100}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_FALSE(plan->all_slo_met);
  const InferenceServicePlan& slow = plan->services[0];
  EXPECT_FALSE(slow.slo_met);
  EXPECT_TRUE(slow.segments.empty());
  EXPECT_NE(slow.reason.find("latency rule"), std::string::npos) << slow.reason;
  EXPECT_NE(slow.reason.find("< 45 ms"), std::string::npos) << slow.reason;
  EXPECT_NE(slow.reason.find("60 ms"), std::string::npos) << slow.reason;
  EXPECT_TRUE(plan->services[1].slo_met);
  EXPECT_EQ(plan->gpus, 1);
  EXPECT_EQ(plan->gpcs_used, 1);
}

TEST(InferencePlanTest, ServiceWithoutMeasuredRows) {
  const std::vector<InferenceProfile> profiles = {{"m", {{1, 1, 1, 0, 0, false}}}};
  auto plan = PlanInference(profiles, {{"m", 10, 100}});
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->services[0].slo_met);
  EXPECT_NE(plan->services[0].reason.find("no measured profile row"), std::string::npos);
  EXPECT_EQ(plan->gpus, 0);
}

TEST(InferencePlanTest, RejectsBadInput) {
  const std::vector<InferenceProfile> profiles = {{"m", {Row(1, 1, 1, 100, 0.010)}}};
  InferencePlanOptions t4;
  t4.gpu_model = "T4";
  EXPECT_EQ(PlanInference(profiles, {{"m", 10, 100}}, t4).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanInference(profiles, {{"other", 10, 100}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanInference(profiles, {{"m", 0, 100}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanInference(profiles, {{"m", 10, -1}}).status().code(), StatusCode::kInvalidArgument);
  InferencePlanOptions small;
  small.max_gpus = 2;
  auto big = PlanInference(profiles, {{"m", 1500, 100}}, small);  // 15 x 1g: 3 GPUs
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
}

TEST(InferencePlanTest, SameInputSameOutput) {
  const std::vector<InferenceProfile> profiles = {
      {"a", {Row(1, 1, 1, 110, 0.010), Row(2, 4, 2, 120, 0.020), Row(3, 8, 3, 130, 0.030)}},
      {"b", {Row(1, 1, 2, 70, 0.010), Row(4, 2, 1, 500, 0.030), Row(7, 8, 1, 900, 0.040)}}};
  const std::vector<InferenceService> services = {{"a", 1234, 200}, {"b", 2345, 150}};
  auto p1 = PlanInference(profiles, services);
  auto p2 = PlanInference(profiles, services);
  ASSERT_TRUE(p1.ok() && p2.ok());
  EXPECT_EQ(ParvaDeployCsv(ParvaDeployFromPlan(*p1)), ParvaDeployCsv(ParvaDeployFromPlan(*p2)));
  EXPECT_TRUE(p1->all_slo_met);
}

// ---------------------------------------------------------------------------------------------
// (b) The ParvaGPU benchmark: plan every scenario, write the deployment CSV and verify it with a
// checker that shares no code with the planner or the readers.

namespace check {

const char* const kModels[] = {"bert",        "densenet121", "densenet169", "densenet201",
                               "inceptionv3", "mobilenetv2", "resnet101",   "resnet152",
                               "resnet50",    "vgg16",       "vgg19"};
const int kParvaGpus[] = {2, 3, 5, 7, 13, 16};

// A100 MIG placements from the reference: size in GPCs -> allowed starts and memory slices.
struct Placement {
  int gpcs;
  std::vector<int> starts;
  int memory;
};
const Placement kA100[] = {
    {1, {0, 1, 2, 3, 4, 5, 6}, 1}, {2, {0, 2, 4}, 2}, {3, {0, 4}, 4}, {4, {0}, 4}, {7, {0}, 8}};

std::vector<std::vector<std::string>> Rows(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> out;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> fields;
    std::stringstream ss(line);
    std::string f;
    while (std::getline(ss, f, ',')) fields.push_back(f);
    if (line.back() == ',') fields.push_back("");
    out.push_back(fields);
  }
  return out;
}

struct Measured {
  double throughput;
  double latency_s;
};

// (model, size, batch, procs) -> measured row.
std::map<std::tuple<std::string, int, int, int>, Measured> Profiles(const std::string& dir) {
  std::map<std::tuple<std::string, int, int, int>, Measured> out;
  for (const char* m : kModels) {
    const auto rows = Rows(dir + "/prof_data/" + m + ".csv");
    for (size_t r = 1; r < rows.size(); ++r) {
      const double t = std::atof(rows[r][3].c_str());
      const double l = std::atof(rows[r][4].c_str());
      if (t == 0 && l == 0) continue;
      out[{m, std::atoi(rows[r][0].c_str()), std::atoi(rows[r][1].c_str()),
           std::atoi(rows[r][2].c_str())}] = {t, l};
    }
  }
  return out;
}

// Returns the number of GPUs of a deployment CSV (checks recorded with EXPECT).
int Verify(const std::string& dir, const std::string& deploy_path, int scenario) {
  const auto profiles = Profiles(dir);
  const auto rates = Rows(dir + "/SLO/SLO_req_rate.csv");
  const auto lats = Rows(dir + "/SLO/SLO_latency.csv");
  const auto rows = Rows(deploy_path);
  EXPECT_FALSE(rows.empty());
  if (rows.empty()) return 0;
  EXPECT_EQ(rows[0], (std::vector<std::string>{"Num instance", "Num GPU", "Model", "Placement",
                                               "Instance size", "Batch size", "Num proc"}));
  std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> gpus;  // -> (start, size)
  std::map<std::string, double> capacity;
  for (size_t r = 1; r < rows.size(); ++r) {
    const auto& f = rows[r];
    EXPECT_EQ(f.size(), 7u);
    if (f.size() != 7) continue;
    const int node = std::atoi(f[0].c_str()), gpu = std::atoi(f[1].c_str());
    const std::string model = f[2];
    const int start = std::atoi(f[3].c_str()), size = std::atoi(f[4].c_str());
    const int batch = std::atoi(f[5].c_str()), procs = std::atoi(f[6].c_str());
    EXPECT_TRUE(gpu >= 0 && gpu < 8) << "row " << r;
    gpus[{node, gpu}].push_back({start, size});
    const auto it = profiles.find({model, size, batch, procs});
    EXPECT_NE(it, profiles.end()) << "row " << r << ": no measured profile row";
    if (it == profiles.end()) continue;
    int column = -1;
    for (int c = 0; c < 11; ++c) {
      if (model == kModels[c]) column = c;
    }
    const std::string& lat_text = lats[scenario - 1][column];
    EXPECT_NE(lat_text, "N/A") << model << " is not in scenario " << scenario;
    const int slo = std::atoi(lat_text.c_str());  // ParvaGPU reads the SLO as an integer
    EXPECT_LT(it->second.latency_s * 1000.0, 0.9 * slo / 2.0) << "row " << r;
    capacity[model] += it->second.throughput * procs;
  }
  for (int c = 0; c < 11; ++c) {
    if (rates[scenario - 1][c] == "N/A") continue;
    EXPECT_GE(capacity[kModels[c]], std::atof(rates[scenario - 1][c].c_str())) << kModels[c];
  }
  for (const auto& [id, instances] : gpus) {
    uint32_t used = 0;
    int compute = 0;
    for (const auto& [start, size] : instances) {
      const Placement* p = nullptr;
      for (const Placement& q : kA100) {
        if (q.gpcs == size) p = &q;
      }
      EXPECT_NE(p, nullptr) << "size " << size;
      if (p == nullptr) continue;
      EXPECT_NE(std::find(p->starts.begin(), p->starts.end(), start), p->starts.end())
          << size << "g at " << start;
      const uint32_t mask = ((1u << p->memory) - 1u) << start;
      EXPECT_EQ(used & mask, 0u) << "overlap on GPU " << id.first << "/" << id.second;
      EXPECT_LE(start + p->memory, 8);
      used |= mask;
      compute += size;
    }
    EXPECT_LE(compute, 7);
  }
  return static_cast<int>(gpus.size());
}

}  // namespace check

const std::string kParvaDir = test::SharedDir() + "/benchmarks/parvagpu";

TEST(ParvaBenchmarkTest, EveryScenarioMeetsSlosOnFewerGpus) {
  if (!std::filesystem::is_directory(kParvaDir)) GTEST_SKIP() << kParvaDir << " not present";
  auto profiles = ReadParvaProfileDir(kParvaDir + "/prof_data");
  ASSERT_TRUE(profiles.ok()) << profiles.status().ToString();
  const auto models = ParvaModelNames(*profiles);
  auto rates = ReadParvaSlo(kParvaDir + "/SLO/SLO_req_rate.csv", models);
  ASSERT_TRUE(rates.ok()) << rates.status().ToString();
  auto lats = ReadParvaSlo(kParvaDir + "/SLO/SLO_latency.csv", models);
  ASSERT_TRUE(lats.ok()) << lats.status().ToString();
  const std::filesystem::path tmp = std::filesystem::temp_directory_path() /
                                    ("tessera_inference_plan_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp);
  int total = 0;
  for (int k = 1; k <= 6; ++k) {
    SCOPED_TRACE("scenario " + std::to_string(k));
    auto services = ParvaScenario(*profiles, *rates, *lats, k);
    ASSERT_TRUE(services.ok()) << services.status().ToString();
    auto plan = PlanInference(*profiles, *services);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_TRUE(plan->all_slo_met);
    const std::string path = (tmp / ("SLO" + std::to_string(k) + ".csv")).string();
    {
      std::ofstream out(path);
      out << ParvaDeployCsv(ParvaDeployFromPlan(*plan));
    }
    const int gpus = check::Verify(kParvaDir, path, k);
    EXPECT_EQ(gpus, plan->gpus);
    EXPECT_LE(gpus, check::kParvaGpus[k - 1]);
    // The baseline count, from ParvaGPU's own deployment file.
    const std::string theirs = kParvaDir + "/deployment/SLO" + std::to_string(k) + "/SLO" +
                               std::to_string(k) + "_ParvaGPU_deploy.csv";
    std::set<std::pair<std::string, std::string>> their_gpus;
    const auto their_rows = check::Rows(theirs);
    for (size_t r = 1; r < their_rows.size(); ++r)
      their_gpus.insert({their_rows[r].at(0), their_rows[r].at(1)});
    EXPECT_EQ(static_cast<int>(their_gpus.size()), check::kParvaGpus[k - 1]);
    total += gpus;
  }
  EXPECT_LE(total, 44);
  std::filesystem::remove_all(tmp);
}

TEST(ParvaBenchmarkTest, ReadsParvaGpuDeployments) {
  if (!std::filesystem::is_directory(kParvaDir)) GTEST_SKIP() << kParvaDir << " not present";
  auto profiles = ReadParvaProfileDir(kParvaDir + "/prof_data");
  ASSERT_TRUE(profiles.ok()) << profiles.status().ToString();
  ASSERT_EQ(profiles->size(), 11u);
  int not_measured = 0;
  for (const InferenceProfile& p : *profiles) {
    EXPECT_EQ(p.rows.size(), 225u) << p.model;
    for (const InferenceProfileRow& r : p.rows) not_measured += r.measured ? 0 : 1;
  }
  EXPECT_GT(not_measured, 0);
  for (int k = 1; k <= 6; ++k) {
    const std::string path = kParvaDir + "/deployment/SLO" + std::to_string(k) + "/SLO" +
                             std::to_string(k) + "_ParvaGPU_deploy.csv";
    auto rows = ReadParvaDeploy(path, ParvaModelNames(*profiles));
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    std::set<std::pair<int, int>> gpus;
    for (const ParvaDeployRow& r : *rows) gpus.insert({r.node, r.gpu});
    EXPECT_EQ(static_cast<int>(gpus.size()), check::kParvaGpus[k - 1]);
  }
}

// ---------------------------------------------------------------------------------------------
// (c) Readers: round trips and errors.

const std::string kProfileHeader = "Mig instance,Batch size,Workload Number,Throughput,Latency\n";
const std::string kDeployHeader =
    "Num instance,Num GPU,Model,Placement,Instance size,Batch size,Num proc\n";
const std::vector<std::string> kSloModels = {"a", "b"};
const std::vector<std::string> kDeployModels = {"bert", "resnet50"};

TEST(ParvaReaderTest, ProfileRoundTrip) {
  auto p = ParseParvaProfile(kProfileHeader + "1,1,1,196.762,0.005\r\n7,256,5,0,0\r\n3,8,2,1e3,2\n",
                             "p.csv", "m");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->rows.size(), 3u);
  EXPECT_EQ(p->model, "m");
  EXPECT_DOUBLE_EQ(p->rows[0].throughput, 196.762);
  EXPECT_DOUBLE_EQ(p->rows[0].latency_s, 0.005);
  EXPECT_TRUE(p->rows[0].measured);
  EXPECT_FALSE(p->rows[1].measured);
  EXPECT_EQ(p->rows[1].procs, 5);
  EXPECT_DOUBLE_EQ(p->rows[2].throughput, 1000);
  auto back = ParseParvaProfile(ParvaProfileCsv(*p), "q.csv", "m");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->rows.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back->rows[i].throughput, p->rows[i].throughput);
    EXPECT_EQ(back->rows[i].latency_s, p->rows[i].latency_s);
    EXPECT_EQ(back->rows[i].measured, p->rows[i].measured);
  }
}

TEST(ParvaReaderTest, SloAndScenario) {
  auto rates = ParseParvaSlo("19,N/A\n46,728\n", "r.csv", kSloModels);
  ASSERT_TRUE(rates.ok()) << rates.status().ToString();
  auto lats = ParseParvaSlo("6434,N/A\n418.5,126", "l.csv", kSloModels);
  ASSERT_TRUE(lats.ok()) << lats.status().ToString();
  EXPECT_FALSE(rates->rows[0][1].value.has_value());
  EXPECT_EQ(ParvaSloCsv(*rates), "19,N/A\n46,728\n");
  const std::vector<InferenceProfile> profiles = {{"a", {}}, {"b", {}}};
  auto s1 = ParvaScenario(profiles, *rates, *lats, 1);
  ASSERT_TRUE(s1.ok());
  ASSERT_EQ(s1->size(), 1u);
  EXPECT_EQ((*s1)[0].model, "a");
  EXPECT_EQ((*s1)[0].slo_ms, 6434);
  auto s2 = ParvaScenario(profiles, *rates, *lats, 2);
  ASSERT_TRUE(s2.ok());
  ASSERT_EQ(s2->size(), 2u);
  EXPECT_EQ((*s2)[0].slo_ms, 418.5);
  EXPECT_EQ((*s2)[1].rate, 728);
  EXPECT_FALSE(ParvaScenario(profiles, *rates, *lats, 3).ok());
  EXPECT_FALSE(ParvaScenario(profiles, *rates, *lats, 0).ok());

  auto half = ParseParvaSlo("19,5\n46,728\n", "h.csv", kSloModels);
  ASSERT_TRUE(half.ok());
  auto bad = ParvaScenario(profiles, *half, *lats, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("h.csv:1:4: column 'b': rate given"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("l.csv:1:6"), std::string::npos) << bad.status().message();
}

TEST(ParvaReaderTest, DeployRoundTrip) {
  const std::string text = kDeployHeader + "0,0,resnet50,4,3,64,2\n1,7,bert,6,1,128,3\n";
  auto rows = ParseParvaDeploy(text, "d.csv", kDeployModels);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1].node, 1);
  EXPECT_EQ((*rows)[1].gpu, 7);
  EXPECT_EQ((*rows)[1].placement, 6);
  EXPECT_EQ((*rows)[1].line, 3);
  EXPECT_EQ(ParvaDeployCsv(*rows), text);
}

struct ReaderCase {
  const char* label;
  char format;  // 'p' profile, 's' SLO, 'd' deployment
  std::string content;
  const char* where;
  const char* reason;
};

void PrintTo(const ReaderCase& c, std::ostream* os) {
  *os << c.label;
}

std::vector<ReaderCase> ReaderCases() {
  const std::string& h = kProfileHeader;
  const std::string& d = kDeployHeader;
  return {
      {"profile_empty", 'p', "", "p.csv:1:1", "empty file"},
      {"profile_wrong_header", 'p',
       "Mig instance,Batch,Workload Number,Throughput,Latency\n1,1,1,1,1\n", "p.csv:1:14",
       "header field 2 is 'Batch'"},
      {"profile_missing_column", 'p', "Mig instance,Batch size,Workload Number,Throughput\n",
       "p.csv:1:1", "missing column 'Latency'"},
      {"profile_extra_column", 'p',
       "Mig instance,Batch size,Workload Number,Throughput,Latency,x\n", "p.csv:1:60",
       "unexpected column 'x'"},
      {"profile_no_rows", 'p', h, "p.csv:1:1", "no profile rows"},
      {"profile_bad_number", 'p', h + "1,1,1,abc,0.1\n", "p.csv:2:7",
       "column 'Throughput': 'abc' is not a number"},
      {"profile_na_not_allowed", 'p', h + "1,1,1,N/A,0.1\n", "p.csv:2:7", "'N/A' is not a number"},
      {"profile_negative_latency", 'p', h + "1,1,1,10,-0.1\n", "p.csv:2:10",
       "column 'Latency': negative value -0.1"},
      {"profile_infinite", 'p', h + "1,1,1,inf,0.1\n", "p.csv:2:7", "'inf' is not a number"},
      {"profile_out_of_range", 'p', h + "1,1,1,1e999,0.1\n", "p.csv:2:7", "out of range"},
      {"profile_half_zero", 'p', h + "1,1,1,0,0.1\n", "p.csv:2:7",
       "column 'Throughput': zero while"},
      {"profile_bad_size", 'p', h + "1,1,1,1,1\n5,1,1,10,0.1\n", "p.csv:3:1",
       "column 'Mig instance': MIG instance size 5"},
      {"profile_batch_zero", 'p', h + "1,0,1,10,0.1\n", "p.csv:2:3",
       "column 'Batch size': 0 outside the allowed range"},
      {"profile_negative_procs", 'p', h + "1,1,-2,10,0.1\n", "p.csv:2:5",
       "column 'Workload Number': negative value -2"},
      {"profile_short_row", 'p', h + "1,1,1,10\n", "p.csv:2:1", "expected 5 fields, found 4"},
      {"profile_repeated", 'p', h + "1,1,1,10,0.1\n1,1,1,11,0.1\n", "p.csv:3:1", "repeats line 2"},
      {"profile_unterminated_quote", 'p', h + "1,1,\"1,10,0.1\n", "p.csv:2:5",
       "unterminated quote"},
      {"slo_empty", 's', "", "s.csv:1:1", "empty file"},
      {"slo_width", 's', "1,2,3\n", "s.csv:1:1", "expected 2 fields, found 3"},
      {"slo_zero", 's', "0,1\n", "s.csv:1:1", "column 'a': must be positive"},
      {"slo_negative", 's', "1,-2\n", "s.csv:1:3", "column 'b': negative value -2"},
      {"slo_lowercase_na", 's', "n/a,1\n", "s.csv:1:1", "column 'a': 'n/a' is not a number"},
      {"slo_second_row", 's', "1,2\n3,x\n", "s.csv:2:3", "column 'b': 'x' is not a number"},
      {"slo_space", 's', "1, 2\n", "s.csv:1:3", "' 2' is not a number"},
      {"deploy_header", 'd', "Num instance,Num GPU,Model\n", "d.csv:1:1",
       "missing column 'Placement'"},
      {"deploy_no_rows", 'd', d, "d.csv:1:1", "no segments"},
      {"deploy_unknown_model", 'd', d + "0,0,alexnet,0,1,1,1\n", "d.csv:2:5",
       "column 'Model': unknown model 'alexnet'"},
      {"deploy_gpu_8", 'd', d + "0,8,bert,0,1,1,1\n", "d.csv:2:3",
       "column 'Num GPU': 8 outside the allowed range 0..7"},
      {"deploy_negative_node", 'd', d + "-1,0,bert,0,1,1,1\n", "d.csv:2:1",
       "column 'Num instance': negative value -1"},
      {"deploy_size_6", 'd', d + "0,0,bert,0,6,1,1\n", "d.csv:2:12",
       "column 'Instance size': MIG instance size 6"},
      {"deploy_zero_procs", 'd', d + "0,0,bert,0,1,1,0\n", "d.csv:2:16", "column 'Num proc'"},
      {"deploy_decimal", 'd', d + "0,0,bert,0.5,1,1,1\n", "d.csv:2:10",
       "column 'Placement': '0.5' is not an integer"},
  };
}

class ParvaReaderErrorTest : public ::testing::TestWithParam<ReaderCase> {};

TEST_P(ParvaReaderErrorTest, ReportsLocationAndReason) {
  const ReaderCase& c = GetParam();
  Status st;
  if (c.format == 'p') st = ParseParvaProfile(c.content, "p.csv", "m").status();
  if (c.format == 's') st = ParseParvaSlo(c.content, "s.csv", kSloModels).status();
  if (c.format == 'd') st = ParseParvaDeploy(c.content, "d.csv", kDeployModels).status();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message().rfind(std::string(c.where) + ": ", 0), 0u) << st.message();
  EXPECT_NE(st.message().find(c.reason), std::string::npos) << st.message();
}

INSTANTIATE_TEST_SUITE_P(Cases, ParvaReaderErrorTest, ::testing::ValuesIn(ReaderCases()),
                         [](const auto& info) { return std::string(info.param.label); });

TEST(ParvaReaderTest, ProfileDirectoryErrors) {
  EXPECT_EQ(ReadParvaProfileDir("/nonexistent/tessera/dir").status().code(), StatusCode::kIoError);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("tessera_parva_dir_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  EXPECT_EQ(ReadParvaProfileDir(dir.string()).status().code(), StatusCode::kInvalidArgument);
  {
    std::ofstream(dir / "b.csv") << kProfileHeader << "1,1,1,10,0.1\n";
    std::ofstream(dir / "a.csv") << kProfileHeader << "1,1,1,10,x\n";
  }
  auto bad = ReadParvaProfileDir(dir.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("a.csv:2:10: column 'Latency'"), std::string::npos)
      << bad.status().message();
  { std::ofstream(dir / "a.csv") << kProfileHeader << "2,1,1,10,0.1\n"; }
  auto good = ReadParvaProfileDir(dir.string());
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(ParvaModelNames(*good), (std::vector<std::string>{"a", "b"}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera
