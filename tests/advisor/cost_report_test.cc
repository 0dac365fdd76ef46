// The cost report: GPU-hours allocated, used, idle and unmeasured, memory, cost, waste, the
// breakdowns, the history conversion and the JSON field names.
#include "advisor/cost_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessera::advisor {
namespace {

PriceTable Prices() {
  PriceTable p;
  p.usd_per_gpu_hour = {{"A100-80GB", 2.0}, {"T4", 0.5}};
  return p;
}

// One sample: allocated GPUs, compute GPUs (< 0: no reading), memory MiB (< 0: no reading).
CostSample S(int64_t t, double alloc, double compute, double memory) {
  CostSample s;
  s.t_s = t;
  s.allocated_gpus = alloc;
  s.has_compute = compute >= 0;
  s.compute_gpus = std::max(compute, 0.0);
  s.has_memory = memory >= 0;
  s.memory_mib = std::max(memory, 0.0);
  return s;
}

CostPod Pod(std::string ns, std::string pod, std::string queue, std::string model,
            std::vector<CostSample> samples) {
  return {std::move(ns),    std::move(pod), std::move(queue),
          std::move(model), "exclusive",    std::move(samples)};
}

TEST(CostReport, Totals) {
  struct Case {
    std::string name;
    CostPod pod;
    double alloc, used, idle, unmeasured;                    // GPU-hours
    double mem_alloc, mem_used, mem_unused, mem_unmeasured;  // GiB-hours
    double cost, idle_cost;
  };
  // Step 3600 s: each sample is one hour. A100-80GB: 80 GiB per GPU, $2/h; T4 15 GiB, $0.5/h.
  // clang-format off
  const std::vector<Case> cases = {
      {"two whole GPUs, half then three quarters busy",
       Pod("ml", "train", "team-a", "A100-80GB",
           {S(0, 2, 1.0, 40 * 1024), S(3600, 2, 1.5, 80 * 1024)}),
       4, 2.5, 1.5, 0, 320, 120, 200, 0, 8, 3},
      {"compute and memory above the allocation count as the allocation",
       Pod("ml", "hot", "team-a", "T4", {S(0, 0.5, 0.9, 16 * 1024)}),
       0.5, 0.5, 0, 0, 7.5, 7.5, 0, 0, 0.25, 0},
      {"samples without readings are unmeasured, neither used nor idle",
       Pod("ml", "dark", "team-a", "A100-80GB", {S(0, 1, -1, 8 * 1024), S(3600, 1, 0.25, -1)}),
       2, 0.25, 0.75, 1, 160, 8, 72, 80, 4, 1.5},
      {"samples holding nothing do not count",
       Pod("ml", "gone", "team-a", "T4", {S(0, 0, 0, 0), S(3600, 1, 0, 0)}),
       1, 0, 1, 0, 15, 0, 15, 0, 0.5, 0.5},
  };
  // clang-format on
  for (const Case& c : cases) {
    CostInput in;
    in.source = "test";
    in.step_s = 3600;
    in.pods = {c.pod};
    auto r = ComputeCostReport(in, Prices());
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.status().message();
    const CostTotals& t = r->total;
    EXPECT_NEAR(t.allocated_gpu_hours, c.alloc, 1e-9) << c.name;
    EXPECT_NEAR(t.used_gpu_hours, c.used, 1e-9) << c.name;
    EXPECT_NEAR(t.idle_gpu_hours, c.idle, 1e-9) << c.name;
    EXPECT_NEAR(t.unmeasured_gpu_hours, c.unmeasured, 1e-9) << c.name;
    EXPECT_NEAR(t.allocated_memory_gib_hours, c.mem_alloc, 1e-9) << c.name;
    EXPECT_NEAR(t.used_memory_gib_hours, c.mem_used, 1e-9) << c.name;
    EXPECT_NEAR(t.unused_memory_gib_hours, c.mem_unused, 1e-9) << c.name;
    EXPECT_NEAR(t.unmeasured_memory_gib_hours, c.mem_unmeasured, 1e-9) << c.name;
    EXPECT_NEAR(t.cost_usd, c.cost, 1e-9) << c.name;
    EXPECT_NEAR(t.idle_cost_usd, c.idle_cost, 1e-9) << c.name;
    EXPECT_EQ(t.pods, 1) << c.name;
    ASSERT_TRUE(r->idle_compute_pct.has_value()) << c.name;
    EXPECT_NEAR(*r->idle_compute_pct, 100 * c.idle / (c.used + c.idle), 1e-9) << c.name;
    EXPECT_FALSE(r->unallocated_gpu_pct.has_value()) << c.name;
  }
}

TEST(CostReport, BreakdownsAndWaste) {
  CostInput in;
  in.source = "test";
  in.step_s = 1800;  // half an hour per sample
  in.pods = {
      Pod("ml", "a", "team-a", "A100-80GB", {S(0, 1, 0.5, 0), S(1800, 1, 0.5, 0)}),
      Pod("ml", "b", "team-b", "T4", {S(0, 1, 1, 0)}),
      Pod("web", "c", "", "T4", {S(0, 2, 0, 0)}),
  };
  in.allocated_ratio = {0.5, 0.7};
  auto r = ComputeCostReport(in, Prices());
  ASSERT_TRUE(r.ok()) << r.status().message();
  struct Row {
    const std::vector<CostRow>* rows;
    std::string key;
    int64_t pods;
    double alloc, idle, cost;
  };
  for (const Row& w : std::vector<Row>{{&r->by_queue, "(unknown)", 1, 1, 1, 0.5},
                                       {&r->by_queue, "team-a", 1, 1, 0.5, 2},
                                       {&r->by_queue, "team-b", 1, 0.5, 0, 0.25},
                                       {&r->by_namespace, "ml", 2, 1.5, 0.5, 2.25},
                                       {&r->by_namespace, "web", 1, 1, 1, 0.5},
                                       {&r->by_model, "A100-80GB", 1, 1, 0.5, 2},
                                       {&r->by_model, "T4", 2, 1.5, 1, 0.75}}) {
    const CostRow* found = nullptr;
    for (const auto& row : *w.rows)
      if (row.key == w.key) found = &row;
    ASSERT_NE(found, nullptr) << w.key;
    EXPECT_EQ(found->totals.pods, w.pods) << w.key;
    EXPECT_NEAR(found->totals.allocated_gpu_hours, w.alloc, 1e-9) << w.key;
    EXPECT_NEAR(found->totals.idle_gpu_hours, w.idle, 1e-9) << w.key;
    EXPECT_NEAR(found->totals.cost_usd, w.cost, 1e-9) << w.key;
  }
  EXPECT_EQ(r->by_queue.size(), 3u);
  EXPECT_EQ(r->total.pods, 3);
  EXPECT_NEAR(*r->idle_compute_pct, 100.0 * 1.5 / 2.5, 1e-9);
  EXPECT_NEAR(*r->unused_memory_pct, 100.0, 1e-9);
  ASSERT_TRUE(r->unallocated_gpu_pct.has_value());
  EXPECT_NEAR(*r->unallocated_gpu_pct, 40.0, 1e-9);
}

TEST(CostReport, Errors) {
  struct Case {
    std::string name;
    CostInput in;
    std::string message;
  };
  auto one = [](CostPod p) {
    CostInput in;
    in.source = "src";
    in.step_s = 60;
    in.end_s = 100;
    in.pods = {std::move(p)};
    return in;
  };
  CostInput ratio = one(Pod("ml", "a", "q", "T4", {S(0, 1, 0, 0)}));
  ratio.allocated_ratio = {1.5};
  CostInput step = one(Pod("ml", "a", "q", "T4", {S(0, 1, 0, 0)}));
  step.step_s = 0;
  const std::vector<Case> cases = {
      {"unknown model", one(Pod("ml", "a", "q", "X9", {S(0, 1, 0, 0)})),
       "src: pod ml/a: unknown GPU model 'X9'"},
      {"no price", one(Pod("ml", "a", "q", "H100-80GB", {S(0, 1, 0, 0)})),
       "src: pod ml/a: no price for GPU model 'H100-80GB' in the price table"},
      {"NaN", one(Pod("ml", "a", "q", "T4", {S(0, std::nan(""), 0, 0)})),
       "src: pod ml/a at 0: a value is not a finite number >= 0"},
      {"nothing held", one(Pod("ml", "a", "q", "T4", {S(0, 0, 0, 0)})),
       "src: no pod held a GPU in the window [0, 100]"},
      {"ratio", ratio, "src: an allocated ratio sample is outside 0..1"},
      {"step", step, "src: step must be positive"},
  };
  for (const Case& c : cases) {
    auto r = ComputeCostReport(c.in, Prices());
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().message(), c.message) << c.name;
  }
}

TEST(CostReport, FromHistory) {
  struct Case {
    std::string name;
    GpuRequest request;
    std::string model;
    bool shared;
    int64_t window_s;
    double alloc, used, unmeasured;  // GPU-hours
  };
  GpuRequest whole;
  whole.whole_gpus = 1;
  GpuRequest mig;
  mig.mig_profile = "3g.40gb";
  GpuRequest share;
  share.memory_mib = 3840;  // a quarter of a T4's 15 GiB
  // Three samples an hour apart, SM active 0.1, 0.2, 0.3; step 3600.
  const std::vector<Case> cases = {
      {"a whole GPU", whole, "A100-80GB", false, 0, 3, 0.6, 0},
      {"a MIG instance holds 3 of 7 slices", mig, "A100-80GB", false, 0, 9.0 / 7, 0.6, 0},
      {"a memory share: compute counts up to its quarter", share, "T4", false, 0, 0.75, 0.55, 0},
      {"the window keeps the last two hours", whole, "A100-80GB", false, 7200, 2, 0.5, 0},
      {"a shared device is unmeasured", whole, "A100-80GB", true, 0, 3, 0, 3},
  };
  for (const Case& c : cases) {
    UsageHistory h;
    WorkloadUsage w;
    w.ns = "ml";
    w.owner_kind = "Pod";
    w.owner = "p";
    w.gpu_model = c.model;
    w.request = c.request;
    PodSeries ps;
    ps.pod = "p";
    ps.gpu = "g0";
    ps.shared_device = c.shared;
    for (int i = 0; i < 3; ++i) ps.samples.push_back({1000 + 3600 * i, 1024.0, 0.1 * (i + 1)});
    w.pods.push_back(ps);
    h.workloads.push_back(w);
    CostInput in = CostInputFromHistory(h, c.window_s, 3600, "h.csv");
    EXPECT_EQ(in.end_s, 1000 + 7200) << c.name;
    auto r = ComputeCostReport(in, Prices());
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.status().message();
    EXPECT_NEAR(r->total.allocated_gpu_hours, c.alloc, 1e-9) << c.name;
    EXPECT_NEAR(r->total.unmeasured_gpu_hours, c.unmeasured, 1e-9) << c.name;
    EXPECT_NEAR(r->total.used_gpu_hours, c.used, 1e-9) << c.name;
    EXPECT_EQ(r->by_queue.at(0).key, "(unknown)") << c.name;
  }
}

TEST(CostReport, JsonFieldNames) {
  CostInput in;
  in.source = "test";
  in.step_s = 3600;
  in.pods = {Pod("ml", "a", "team-a", "T4", {S(0, 1, 0.25, 1024)})};
  auto r = ComputeCostReport(in, Prices());
  ASSERT_TRUE(r.ok());
  const auto j = nlohmann::json::parse(CostReportJson(*r));
  for (const char* k : {"source", "start_s", "end_s", "step_s", "total", "by_queue", "by_namespace",
                        "by_model", "waste"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k :
       {"pods", "allocated_gpu_hours", "used_gpu_hours", "idle_gpu_hours", "unmeasured_gpu_hours",
        "allocated_memory_gib_hours", "used_memory_gib_hours", "unused_memory_gib_hours",
        "unmeasured_memory_gib_hours", "cost_usd", "idle_cost_usd"}) {
    EXPECT_TRUE(j["total"].contains(k)) << k;
    EXPECT_TRUE(j["by_queue"][0].contains(k)) << k;
  }
  EXPECT_EQ(j["by_queue"][0]["key"], "team-a");
  EXPECT_DOUBLE_EQ(j["total"]["idle_gpu_hours"].get<double>(), 0.75);
  EXPECT_TRUE(j["waste"]["unallocated_gpu_pct"].is_null());
  EXPECT_DOUBLE_EQ(j["waste"]["idle_compute_pct"].get<double>(), 75);
  const std::string table = CostReportTable(*r);
  EXPECT_NE(table.find("team-a"), std::string::npos) << table;
  EXPECT_NE(table.find("unallocated GPUs unknown"), std::string::npos) << table;
}

}  // namespace
}  // namespace tessera::advisor
