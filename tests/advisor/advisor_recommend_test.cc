// The recommender: slices per model from the real MIG geometry, never above the request, honest
// states, idle allocations, smaller models, prices, reports.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "advisor/recommend.h"
#include "advisor/report.h"

namespace tessera::advisor {
namespace {

constexpr int64_t kDay = 86400;
constexpr int64_t kStep = 600;

using UsageFn = std::function<std::pair<double, double>(int64_t)>;  // t -> (MiB, sm)

WorkloadUsage Workload(const std::string& owner, const std::string& model, GpuRequest req,
                       int64_t seconds, const UsageFn& fn, const std::string& kind = "Deployment") {
  WorkloadUsage w;
  w.ns = "team";
  w.owner_kind = kind;
  w.owner = owner;
  w.gpu_model = model;
  w.request = std::move(req);
  PodSeries p;
  p.pod = owner + "-0";
  p.gpu = "gpu-" + owner;
  for (int64_t t = 0; t < seconds; t += kStep) {
    auto [m, sm] = fn(t);
    p.samples.push_back({1'000'000 + t, m, sm});
  }
  w.pods.push_back(std::move(p));
  return w;
}

GpuRequest Whole(int n) {
  GpuRequest r;
  r.whole_gpus = n;
  return r;
}

UsageFn Flat(double mib, double sm) {
  return [=](int64_t) { return std::make_pair(mib, sm); };
}

Recommendation Only(const Result<AdvisorReport>& r) {
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok() || r->items.size() != 1) {
    ADD_FAILURE() << "expected one recommendation";
    return {};
  }
  return r->items[0];
}

TEST(SliceOn, UsesEachModelsRealGeometry) {
  struct Case {
    std::string model;
    double mib, compute;
    bool bursty, prefer_mig;
    std::string want;  // Describe()
  };
  const std::vector<Case> cases = {
      {"A100-80GB", 8000, 0.10, false, true, "A100-80GB mig 1g.10gb"},
      {"A100-80GB", 15000, 0.10, false, true, "A100-80GB mig 1g.20gb"},
      {"A100-80GB", 15000, 0.25, false, true, "A100-80GB mig 2g.20gb"},
      {"A100-40GB", 4000, 0.10, false, true, "A100-40GB mig 1g.5gb"},
      {"A100-40GB", 8000, 0.10, false, true, "A100-40GB mig 1g.10gb"},
      {"H100-80GB", 30000, 0.30, false, true, "H100-80GB mig 3g.40gb"},
      {"H100-80GB", 30000, 0.95, false, true, "H100-80GB x1"},
      {"H200", 20000, 0.10, false, true, "H200 mig 1g.35gb"},
      {"A30", 5000, 0.20, false, true, "A30 mig 1g.6gb"},
      {"A30", 10000, 0.30, false, true, "A30 mig 2g.12gb"},
      // 60 % of an A30 needs 3 of its 4 compute slices: only the whole GPU covers it.
      {"A30", 5000, 0.60, false, true, "A30 mps 5000MiB 60%"},
      // Without the MIG preference the smaller share wins, MIG on ties.
      {"A100-80GB", 8000, 0.10, false, false, "A100-80GB mps 8000MiB 10%"},
      {"A100-80GB", 9000, 0.20, false, false, "A100-80GB mps 9000MiB 20%"},
      {"A100-80GB", 15000, 0.25, false, false, "A100-80GB mps 15000MiB 25%"},
      {"A100-80GB", 15000, 0.2857, false, false, "A100-80GB mig 2g.20gb"},
      {"A100-40GB", 4000, 0.1428, false, false, "A100-40GB mig 1g.5gb"},
      {"T4", 4096, 0.30, false, false, "T4 mps 4096MiB 30%"},
      {"T4", 4096, 0.30, true, false, "T4 timeslice 4096MiB"},
      {"T4", 14000, 0.10, false, false, "T4 x1"},
      {"L4", 2000, 0.90, false, false, "L4 x1"},
  };
  for (const Case& c : cases) {
    AdvisorConfig cfg;
    cfg.prefer_mig = c.prefer_mig;
    auto s = SliceOn(c.model, c.mib, c.compute, c.bursty, cfg);
    ASSERT_TRUE(s.has_value()) << c.model << " " << c.mib;
    EXPECT_EQ(s->Describe(), c.want) << c.model << " " << c.mib << " " << c.compute;
  }
  const AdvisorConfig cfg;
  EXPECT_FALSE(SliceOn("T4", 20000, 0.1, false, cfg).has_value());
  EXPECT_FALSE(SliceOn("A100-80GB", 1000, 1.5, false, cfg).has_value());
}

TEST(Advise, StatsAndPrediction) {
  // Memory rises linearly within each day: 1000..1999 MiB; compute 0.2 flat.
  UsageHistory h;
  h.workloads.push_back(Workload("svc", "A100-80GB", Whole(1), 3 * kDay, [](int64_t t) {
    return std::make_pair(1000.0 + static_cast<double>(t % kDay) * 1000.0 / kDay, 0.2);
  }));
  const Recommendation& r = Only(Advise(h, AdvisorConfig{}, DefaultPriceTable()));
  EXPECT_EQ(r.state, AdviceState::kOk);
  EXPECT_NEAR(r.memory_mib.peak, 1993.05, 0.01);
  EXPECT_NEAR(r.memory_mib.p50, 1493.06, 1.0);
  EXPECT_DOUBLE_EQ(r.compute.p99, 0.2);
  // Flat daily peaks: no trend. The drop at midnight reads as a small excursion above the
  // half-hour median, projected onto the highest baseline: within 2 % of the peak.
  EXPECT_DOUBLE_EQ(r.memory_trend_per_period, 0);
  EXPECT_GE(r.predicted_memory_mib, r.memory_mib.peak);
  EXPECT_LE(r.predicted_memory_mib, r.memory_mib.peak * 1.02);
  EXPECT_FALSE(r.keep);
  // Limit: prediction + max(5 %, 256 MiB), plus half the small spread of the daily baselines.
  EXPECT_GE(r.memory_limit_mib, r.predicted_memory_mib + 256);
  EXPECT_LE(r.memory_limit_mib, r.predicted_memory_mib + 256 + 20);
  EXPECT_EQ(r.recommended.Describe(),
            "A100-80GB mps " + std::to_string(r.memory_limit_mib) + "MiB 25%");
}

TEST(Advise, SpikeOnTheHighestBaselineIsCovered) {
  // A daily cycle 2000..4000 MiB; one 600 MiB spike, at night on day 1. The next day's spike may
  // come at the daily high: the prediction covers 4000 + 600, the peaks seen only 2600.
  UsageHistory h;
  h.workloads.push_back(Workload("spiky", "A100-80GB", Whole(1), 4 * kDay, [](int64_t t) {
    const double day_phase = static_cast<double>(t % kDay) / kDay;
    double m = 3000.0 - 1000.0 * std::cos(2 * 3.14159265358979 * day_phase);
    if (t == kDay + 3600) m += 600;
    return std::make_pair(m, 0.3);
  }));
  const Recommendation& r = Only(Advise(h, AdvisorConfig{}, DefaultPriceTable()));
  EXPECT_NEAR(r.memory_mib.peak, 4000, 1);
  EXPECT_NEAR(r.predicted_memory_mib, 4600, 20);  // a median of the curve sits a little lower
  EXPECT_DOUBLE_EQ(r.memory_trend_per_period, 0);
}

TEST(Advise, LevelSwitchingKeepsTheRequest) {
  // Each day loads one model: 8, 20, 8, 30, 8 GiB. Two days sit at a level seen once (40 %), so
  // the next day is not bounded by the history. Off by default.
  const std::vector<double> levels = {8192, 20480, 8192, 30720, 8192};
  EXPECT_FALSE(Only(Advise(
                        [&] {
                          UsageHistory h;
                          h.workloads.push_back(
                              Workload("nb", "A100-80GB", Whole(1), 5 * kDay, [&](int64_t t) {
                                return std::make_pair(levels[static_cast<size_t>(t / kDay)], 0.3);
                              }));
                          return h;
                        }(),
                        AdvisorConfig{}, DefaultPriceTable()))
                   .keep);
  AdvisorConfig cfg;
  cfg.max_new_level_probability = 0.10;
  for (bool switching : {true, false}) {
    UsageHistory h;
    h.workloads.push_back(Workload("nb", "A100-80GB", Whole(1), 5 * kDay, [&](int64_t t) {
      const double level = switching ? levels[static_cast<size_t>(t / kDay)] : 8192.0;
      return std::make_pair(level, 0.3);
    }));
    const Recommendation& r = Only(Advise(h, cfg, DefaultPriceTable()));
    EXPECT_EQ(r.keep, switching);
    EXPECT_EQ(r.reason.find("switch between levels") != std::string::npos, switching) << r.reason;
  }
}

TEST(Advise, GrowthIsProjectedOneDayAhead) {
  struct Case {
    double per_day, trend, predicted;
  };
  // Daily peaks 4000 + g * day over four days. 300/day is projected as is; 500/day is clamped
  // to max_trend_per_period (10 %) of the median peak (nearest rank: 4500): 450.
  for (const Case& c : {Case{300, 300, 4900 + 300}, Case{500, 450, 5500 + 450}}) {
    UsageHistory h;
    h.workloads.push_back(Workload("grow", "A100-80GB", Whole(1), 4 * kDay, [&](int64_t t) {
      const double day = static_cast<double>(t / kDay);
      const bool peak = t % kDay == 12 * 3600;
      return std::make_pair(peak ? 4000 + c.per_day * day : 1000.0, 0.1);
    }));
    const Recommendation& r = Only(Advise(h, AdvisorConfig{}, DefaultPriceTable()));
    EXPECT_NEAR(r.memory_trend_per_period, c.trend, 1e-6);
    EXPECT_NEAR(r.predicted_memory_mib, c.predicted, 1e-6);
  }
}

TEST(Advise, NeverAboveTheRequest) {
  struct Case {
    const char* name;
    GpuRequest req;
    double mib, sm;
    bool keep;
  };
  GpuRequest mem8g;
  mem8g.memory_mib = 8192;
  GpuRequest mem8g_c30 = mem8g;
  mem8g_c30.compute = 0.3;
  GpuRequest mig;
  mig.mig_profile = "1g.10gb";
  const std::vector<Case> cases = {
      {"memory at the request", mem8g, 8000, 0.1, true},
      {"compute above the request", mem8g_c30, 2000, 0.5, true},
      {"MIG request fully used", mig, 9500, 0.1, true},
      {"memory well below", mem8g, 2000, 0.02, false},
      {"whole GPU used whole", Whole(1), 70000, 0.9, true},
  };
  for (const Case& c : cases) {
    UsageHistory h;
    h.workloads.push_back(Workload("w", "A100-80GB", c.req, 2 * kDay, Flat(c.mib, c.sm)));
    const Recommendation& r = Only(Advise(h, AdvisorConfig{}, DefaultPriceTable()));
    EXPECT_EQ(r.keep, c.keep) << c.name << ": " << r.reason;
    EXPECT_LE(r.cost_recommended_per_hour, r.cost_requested_per_hour + 1e-12) << c.name;
    EXPECT_LE(r.recommended.memory_mib, r.requested.memory_mib) << c.name;
    EXPECT_LE(r.memory_limit_mib, r.requested.memory_mib) << c.name;
    if (c.keep) {
      EXPECT_EQ(r.recommended.Describe(), r.requested.Describe()) << c.name;
    }
  }
}

TEST(Advise, HonestStates) {
  UsageHistory h;
  h.workloads.push_back(Workload("short", "A100-80GB", Whole(1), 2 * 3600, Flat(2000, 0.3)));
  h.workloads.push_back(Workload("idle", "A100-80GB", Whole(1), 2 * kDay, Flat(3000, 0.0)));
  for (const char* pod : {"a", "b"}) {
    GpuRequest ts;
    ts.memory_mib = 6144;
    WorkloadUsage w = Workload(std::string("shared-") + pod, "T4", ts, 2 * kDay, Flat(2500, 0.3));
    w.pods[0].gpu = "node1/0";
    w.pods[0].device_source = true;
    h.workloads.push_back(std::move(w));
  }
  MarkSharedDevices(h);
  auto rep = Advise(h, AdvisorConfig{}, DefaultPriceTable());
  ASSERT_TRUE(rep.ok());
  ASSERT_EQ(rep->items.size(), 4u);
  EXPECT_EQ(rep->items[0].state, AdviceState::kTooShort);
  EXPECT_TRUE(rep->items[0].keep);
  EXPECT_EQ(rep->items[0].reason,
            "history too short: 1.8 h over 12 samples, need 24 h and 24 samples: keep the request");
  EXPECT_TRUE(rep->items[1].idle);
  EXPECT_EQ(rep->items[1].recommended.type, SliceType::kRelease);
  EXPECT_EQ(rep->items[2].state, AdviceState::kUnattributed);
  EXPECT_EQ(rep->items[3].state, AdviceState::kUnattributed);
  EXPECT_EQ(rep->items[2].reason,
            "several pods share a time-sliced GPU without per-pod series: keep the request");
  // With the node agent's per-pod memory, memory is known but compute is still per GPU.
  for (auto& w : h.workloads)
    for (auto& p : w.pods) p.memory_per_pod = p.device_source;
  auto agent = Advise(h, AdvisorConfig{}, DefaultPriceTable());
  ASSERT_TRUE(agent.ok());
  EXPECT_EQ(agent->items[2].state, AdviceState::kUnattributed);
  EXPECT_EQ(agent->items[2].reason,
            "several pods share a GPU: the node agent gives each pod's memory but compute only "
            "per GPU: keep the request");
  EXPECT_EQ(rep->too_short, 1);
  EXPECT_EQ(rep->idle, 1);
  EXPECT_EQ(rep->unattributed, 2);
  // The idle whole A100-80GB is freed; nothing else changes.
  EXPECT_NEAR(rep->gpus_freed, 1.0, 1e-9);
  EXPECT_NEAR(rep->savings_per_hour, 5.07, 1e-9);
}

TEST(Advise, SmallWorkloadLeavesTheBigGpuForACheaperModel) {
  UsageHistory h;
  h.workloads.push_back(Workload("small", "A100-80GB", Whole(1), 2 * kDay, Flat(3000, 0.06)));
  h.workloads.push_back(Workload("t4user", "T4", Whole(1), 2 * kDay, Flat(12000, 0.9)));
  auto rep = Advise(h, AdvisorConfig{}, DefaultPriceTable());
  ASSERT_TRUE(rep.ok());
  const Recommendation& r = rep->items[0];
  EXPECT_EQ(r.recommended.model, "T4") << r.reason;
  EXPECT_EQ(r.recommended.type, SliceType::kMps);
  AdvisorConfig same_model;
  same_model.allow_other_models = false;
  auto rep2 = Advise(h, same_model, DefaultPriceTable());
  ASSERT_TRUE(rep2.ok());
  EXPECT_EQ(rep2->items[0].recommended.Describe(), "A100-80GB mps 3256MiB 11%");
}

TEST(Advise, UnknownPriceAndBadConfigAreErrors) {
  UsageHistory h;
  h.workloads.push_back(Workload("w", "L4", Whole(1), 2 * kDay, Flat(3000, 0.5)));
  PriceTable prices;
  prices.usd_per_gpu_hour["T4"] = 0.35;
  auto r = Advise(h, AdvisorConfig{}, prices);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "no price for GPU model 'L4' in the price table");
  AdvisorConfig bad;
  bad.period_s = 0;
  EXPECT_EQ(Advise(h, bad, DefaultPriceTable()).status().code(), StatusCode::kInvalidArgument);
}

TEST(Advise, WindowDropsOldSamples) {
  // A 60 GiB peak on day 1 only; with a 2-day window it is out of sight.
  UsageHistory h;
  h.workloads.push_back(Workload("w", "A100-80GB", Whole(1), 4 * kDay, [](int64_t t) {
    return std::make_pair(t < kDay ? 61440.0 : 4000.0, 0.1);
  }));
  AdvisorConfig all, recent;
  recent.window_s = 2 * kDay;
  EXPECT_NEAR(Only(Advise(h, all, DefaultPriceTable())).memory_mib.peak, 61440, 1e-9);
  EXPECT_NEAR(Only(Advise(h, recent, DefaultPriceTable())).memory_mib.peak, 4000, 1e-9);
}

TEST(Report, TableJsonAndPatches) {
  UsageHistory h;
  h.workloads.push_back(Workload("svc", "A100-80GB", Whole(1), 2 * kDay, Flat(3000, 0.06)));
  h.workloads.push_back(
      Workload("grp", "A100-80GB", Whole(1), 2 * kDay, Flat(3000, 0.06), "WorkloadGroup"));
  h.workloads.push_back(Workload("busy", "A100-80GB", Whole(1), 2 * kDay, Flat(70000, 0.9)));
  auto rep = Advise(h, AdvisorConfig{}, DefaultPriceTable());
  ASSERT_TRUE(rep.ok());
  const std::string patches = ReportPatches(*rep);
  EXPECT_NE(patches.find("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: svc\n"
                         "  namespace: team\n  annotations:\n"
                         "    tessera.io/rightsize-recommendation: '{\"gpu_fraction\":0.11,"
                         "\"memory_mib\":3256,\"model\":\"A100-80GB\",\"predicted_compute\":0.06,"
                         "\"predicted_memory_mib\":3000.0,\"slice\":\"mps\",\"thread_pct\":11}'\n"),
            std::string::npos)
      << patches;
  EXPECT_NE(patches.find("spec:\n  template:\n    metadata:\n      annotations:\n"
                         "        tessera.io/rightsize-recommendation: '{\"gpu_fraction\":0.11,"),
            std::string::npos)
      << patches;
  EXPECT_NE(patches.find("# WorkloadGroup team/grp: annotate its pods"), std::string::npos);
  EXPECT_EQ(patches.find("name: busy"), std::string::npos);
  const std::string json = ReportJson(*rep);
  EXPECT_NE(json.find("\"gpus_freed\": 1.78"), std::string::npos) << json;
  const std::string table = ReportTable(*rep);
  EXPECT_NE(table.find("team/Deployment/svc"), std::string::npos);
  EXPECT_NE(table.find("3 workloads: 2 resized"), std::string::npos) << table;
}

}  // namespace
}  // namespace tessera::advisor
