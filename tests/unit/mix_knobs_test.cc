#include "sim/mix_knobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/random.h"
#include "sim/family.h"

namespace tessera {
namespace {

GeneratorConfig Applied(const MixFlags& flags) {
  GeneratorConfig c;
  Status st = ApplyMixFlags(flags, c);
  EXPECT_TRUE(st.ok()) << st.message();
  return c;
}

double Share(int64_t part, int64_t whole) {
  return static_cast<double>(part) / static_cast<double>(whole);
}

TEST(MixKnobs, NoFlagKeepsTheConfig) {
  const GeneratorConfig base;
  const GeneratorConfig c = Applied(MixFlags{});
  EXPECT_EQ(c.cpu_only_share, base.cpu_only_share);
  EXPECT_EQ(c.gpu_share_share, base.gpu_share_share);
  EXPECT_EQ(c.multi_gpu_share, base.multi_gpu_share);
  EXPECT_EQ(c.pinned_share, base.pinned_share);
  EXPECT_EQ(c.share_milli.size(), base.share_milli.size());
  EXPECT_TRUE(MixFlags{}.empty());
  EXPECT_EQ(MixFlags{}.Text(), "");
}

TEST(MixKnobs, UnnamedClassesShareTheRestByTheirBaseProportions) {
  const GeneratorConfig base;
  MixFlags f;
  f.share_fraction = "0.6";
  const GeneratorConfig c = Applied(f);
  EXPECT_DOUBLE_EQ(c.gpu_share_share, 0.6);
  const double base_rest = 1.0 - base.gpu_share_share;
  EXPECT_NEAR(c.cpu_only_share, 0.4 * base.cpu_only_share / base_rest, 1e-12);
  EXPECT_NEAR(c.multi_gpu_share, 0.4 * base.multi_gpu_share / base_rest, 1e-12);
  EXPECT_EQ(f.Text(), "--share-fraction 0.6");
}

TEST(MixKnobs, AllFourClassesGivenMustSumToOne) {
  MixFlags f;
  f.cpu_only_fraction = "0.1";
  f.share_fraction = "0.2";
  f.whole_fraction = "0.3";
  f.multi_gpu_fraction = "0.4";
  const GeneratorConfig c = Applied(f);
  EXPECT_DOUBLE_EQ(c.cpu_only_share, 0.1);
  EXPECT_DOUBLE_EQ(c.gpu_share_share, 0.2);
  EXPECT_DOUBLE_EQ(c.multi_gpu_share, 0.4);
  f.multi_gpu_fraction = "0.3";
  GeneratorConfig d;
  Status st = ApplyMixFlags(f, d);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("must sum to 1"), std::string::npos) << st.message();
}

TEST(MixKnobs, ShareSizeDistributions) {
  const GeneratorConfig base;
  struct Case {
    std::string text;
    size_t items;
    int lo, hi;
  };
  for (const Case& k : {Case{"small", 251, 50, 300}, Case{"large", 451, 500, 950},
                        Case{"uniform:10-990", 981, 10, 990}, Case{"500:1", 1, 500, 500},
                        Case{"250:1,500:2.5,750:1", 3, 250, 750}}) {
    auto r = ParseShareSizes(k.text, base.share_milli);
    ASSERT_TRUE(r.ok()) << k.text << ": " << r.status().message();
    EXPECT_EQ(r->size(), k.items) << k.text;
    EXPECT_EQ(r->front().value, k.lo) << k.text;
    EXPECT_EQ(r->back().value, k.hi) << k.text;
  }
  auto trace = ParseShareSizes("trace", base.share_milli);
  ASSERT_TRUE(trace.ok());
  EXPECT_EQ(trace->size(), base.share_milli.size());
}

TEST(MixKnobs, BadValuesNameTheFlagAndTheValue) {
  struct Case {
    const char* what;
    MixFlags flags;
    const char* expect;
  };
  auto with = [](auto set) {
    MixFlags f;
    set(f);
    return f;
  };
  const Case cases[] = {
      {"fraction above 1", with([](MixFlags& f) { f.share_fraction = "1.5"; }),
       "--share-fraction: '1.5' is outside the allowed range [0, 1]"},
      {"negative fraction", with([](MixFlags& f) { f.cpu_only_fraction = "-0.1"; }),
       "--cpu-only-fraction: '-0.1'"},
      {"not a number", with([](MixFlags& f) { f.pinned_fraction = "half"; }),
       "--pinned-fraction: 'half'"},
      {"nan", with([](MixFlags& f) { f.whole_fraction = "nan"; }), "--whole-fraction: 'nan'"},
      {"sum above 1", with([](MixFlags& f) {
         f.share_fraction = "0.7";
         f.whole_fraction = "0.5";
       }),
       "sum to 1.2, more than 1"},
      {"all CPU-only", with([](MixFlags& f) { f.cpu_only_fraction = "1"; }),
       "at most 99.9% may be CPU-only"},
      {"share size 1000", with([](MixFlags& f) { f.share_sizes = "1000:1"; }),
       "--share-sizes: '1000:1' has a value outside 1..999"},
      {"share size twice", with([](MixFlags& f) { f.share_sizes = "500:1,500:2"; }),
       "names the value 500 twice"},
      {"zero weight", with([](MixFlags& f) { f.share_sizes = "500:0"; }),
       "has a weight that is not a number in (0, 1e12]"},
      {"unknown name", with([](MixFlags& f) { f.share_sizes = "tiny"; }),
       "--share-sizes: 'tiny' is not a distribution"},
      {"bad uniform", with([](MixFlags& f) { f.share_sizes = "uniform:900-100"; }),
       "must be uniform:LO-HI"},
      {"multi count 1", with([](MixFlags& f) { f.multi_gpu_counts = "1:1"; }),
       "--multi-gpu-counts: '1:1' has a value outside 2..8"},
      {"multi count above the largest node", with([](MixFlags& f) { f.multi_gpu_counts = "16:1"; }),
       "outside 2..8"},
      {"empty list item", with([](MixFlags& f) { f.multi_gpu_counts = "2:1,"; }),
       "is not VALUE:WEIGHT"},
      {"scale too small", with([](MixFlags& f) { f.cpu_per_gpu_scale = "0.01"; }),
       "--cpu-per-gpu-scale: '0.01' is outside the allowed range [0.1, 10]"},
      {"scale inf", with([](MixFlags& f) { f.memory_per_gpu_scale = "inf"; }),
       "--memory-per-gpu-scale: 'inf'"},
  };
  for (const Case& c : cases) {
    GeneratorConfig config;
    const GeneratorConfig before = config;
    Status st = ApplyMixFlags(c.flags, config);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(st.message().find(c.expect), std::string::npos) << c.what << ": " << st.message();
    EXPECT_EQ(config.gpu_share_share, before.gpu_share_share) << c.what << ": changed on error";
    EXPECT_EQ(config.share_milli.size(), before.share_milli.size()) << c.what;
  }
}

TEST(MixKnobs, ScalesChangeGpuProfilesOnly) {
  const GeneratorConfig base;
  MixFlags f;
  f.cpu_per_gpu_scale = "1.5";
  f.memory_per_gpu_scale = "0.5";
  const GeneratorConfig c = Applied(f);
  for (size_t i = 0; i < c.whole_profiles.size(); ++i) {
    EXPECT_EQ(c.whole_profiles[i].cpu_milli,
              std::llround(static_cast<double>(base.whole_profiles[i].cpu_milli) * 1.5));
    EXPECT_EQ(c.whole_profiles[i].memory_mib,
              std::llround(static_cast<double>(base.whole_profiles[i].memory_mib) * 0.5));
  }
  EXPECT_EQ(c.share_profiles[0].cpu_milli,
            std::llround(static_cast<double>(base.share_profiles[0].cpu_milli) * 1.5));
  EXPECT_EQ(c.multi_profiles_per_gpu[0].cpu_milli,
            std::llround(static_cast<double>(base.multi_profiles_per_gpu[0].cpu_milli) * 1.5));
  for (size_t i = 0; i < c.cpu_only_profiles.size(); ++i) {
    EXPECT_EQ(c.cpu_only_profiles[i].cpu_milli, base.cpu_only_profiles[i].cpu_milli);
  }
}

// The knobs show in the generated workload: class shares within sampling error, share sizes
// from the given distribution only, multi-GPU counts and pins as asked.
TEST(MixKnobs, GeneratedWorkloadFollowsTheKnobs) {
  MixFlags f;
  f.cpu_only_fraction = "0.1";
  f.share_fraction = "0.5";
  f.multi_gpu_fraction = "0.1";
  f.share_sizes = "300:1,400:1,700:1";
  f.multi_gpu_counts = "2:1,4:1";
  f.pinned_fraction = "0";
  GeneratorConfig c = Applied(f);
  c.num_nodes = 200;
  auto trace = Generate(c, 7);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  const WorkloadMix m = MixOf(trace->pods);
  ASSERT_GT(m.pods, 1000);
  EXPECT_NEAR(Share(m.cpu_only, m.pods), 0.1, 0.03);
  EXPECT_NEAR(Share(m.share, m.pods), 0.5, 0.03);
  EXPECT_NEAR(Share(m.multi, m.pods), 0.1, 0.03);
  EXPECT_NEAR(Share(m.whole, m.pods), 0.3, 0.03);
  EXPECT_EQ(m.pinned, 0);
  std::set<int> sizes, counts;
  for (const Workload& w : trace->pods) {
    if (w.demand.IsShare()) sizes.insert(w.demand.gpu_milli);
    if (w.demand.num_gpu > 1) counts.insert(w.demand.num_gpu);
  }
  EXPECT_EQ(sizes, (std::set<int>{300, 400, 700}));
  EXPECT_EQ(counts, (std::set<int>{2, 4}));
}

TEST(MixFamily, HasAtLeast24UniquelyNamedMixesThatAllGenerate) {
  const auto& family = DefaultMixFamily();
  ASSERT_GE(family.size(), 24u);
  std::set<std::string> names;
  for (const FamilyMix& m : family) {
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
    GeneratorConfig c;
    c.num_nodes = 30;
    Status st = ApplyMixFlags(m.flags, c);
    ASSERT_TRUE(st.ok()) << m.name << ": " << st.message();
    auto trace = Generate(c, 1);
    EXPECT_TRUE(trace.ok()) << m.name << ": " << trace.status().message();
  }
  EXPECT_EQ(PaperTraceNames().size(), 17u);
}

FamilyMixResult FakeMix(const std::string& name, double c100, double c100sd, double c130,
                        double f100, double f100sd, double f130) {
  FamilyMixResult r;
  r.name = name;
  FillSummary c, f;
  c.policy = "tessera";
  c.unalloc_at_100 = {.mean = c100, .stddev = c100sd};
  c.unalloc_at_130 = {.mean = c130, .stddev = 0.1};
  f.policy = "fgd";
  f.unalloc_at_100 = {.mean = f100, .stddev = f100sd};
  f.unalloc_at_130 = {.mean = f130, .stddev = 0.1};
  r.results = {c, f};
  return r;
}

TEST(MixFamily, SummaryCountsEachBound) {
  const std::vector<FamilyMixResult> results = {
      FakeMix("better", 2.0, 0.2, 0.5, 2.5, 0.2, 0.6),
      FakeMix("worse-at-100", 3.1, 0.2, 0.5, 3.0, 0.2, 0.6),
      FakeMix("end-within-slack", 2.0, 0.2, 0.65, 2.5, 0.2, 0.6),
      FakeMix("end-beyond-slack", 2.0, 0.2, 0.75, 2.5, 0.2, 0.6),
      FakeMix("noisy", 2.0, 0.4, 0.5, 2.5, 0.2, 0.6),
  };
  const FamilySummary s = SummarizeFamily(results, "tessera", "fgd");
  EXPECT_EQ(s.mixes, 5);
  EXPECT_EQ(s.le_at_100, 4);
  EXPECT_EQ(s.above_at_100, std::vector<std::string>{"worse-at-100"});
  EXPECT_EQ(s.within_slack_at_130, 4);
  EXPECT_EQ(s.above_at_130, std::vector<std::string>{"end-beyond-slack"});
  EXPECT_EQ(s.sd_within_limit, 4);
  EXPECT_EQ(s.sd_above, std::vector<std::string>{"noisy"});
  EXPECT_DOUBLE_EQ(s.max_sd_ratio, 2.0);
  EXPECT_FALSE(s.all_bounds_met());
  const FamilySummary ok = SummarizeFamily({results[0], results[2]}, "tessera", "fgd");
  EXPECT_TRUE(ok.all_bounds_met());
  EXPECT_FALSE(SummarizeFamily({}, "tessera", "fgd").all_bounds_met());
  // Pooled spread: sd ratios 1, 1, 1, 1, 2 at 100% arrival, all 1 at the end.
  EXPECT_EQ(s.pooled_sd_ratio_at_100.mixes, 5);
  EXPECT_NEAR(s.pooled_sd_ratio_at_100.geomean, std::pow(2.0, 0.2), 1e-12);
  EXPECT_GE(s.pooled_sd_ratio_at_100.ci_low, 1.0);
  EXPECT_LE(s.pooled_sd_ratio_at_100.ci_high, 2.0);
  EXPECT_LT(s.pooled_sd_ratio_at_100.ci_low, s.pooled_sd_ratio_at_100.ci_high);
  EXPECT_DOUBLE_EQ(s.pooled_sd_ratio_at_130.geomean, 1.0);
  const std::string table = FamilyTable(results, "tessera", "fgd");
  EXPECT_NE(table.find("tessera's sd is 1.15x fgd's at 100%"), std::string::npos) << table;
}

TEST(MixFamily, PooledSdRatioIsTheGeometricMeanWithABootstrapInterval) {
  const PooledSdRatio none = PoolSdRatios({});
  EXPECT_EQ(none.mixes, 0);
  EXPECT_TRUE(std::isnan(none.geomean));
  EXPECT_TRUE(std::isnan(none.ci_low));

  const PooledSdRatio same = PoolSdRatios({std::log(0.5), std::log(0.5), std::log(0.5)});
  EXPECT_NEAR(same.geomean, 0.5, 1e-12);
  EXPECT_NEAR(same.ci_low, 0.5, 1e-12);
  EXPECT_NEAR(same.ci_high, 0.5, 1e-12);

  // Two mixes, ratios 2 and 0.5: a resample's mean is ln 2, 0 or -ln 2, each end of the
  // interval is reached by a quarter of the resamples.
  const PooledSdRatio two = PoolSdRatios({std::log(2.0), std::log(0.5)});
  EXPECT_EQ(two.mixes, 2);
  EXPECT_NEAR(two.geomean, 1.0, 1e-12);
  EXPECT_NEAR(two.ci_low, 0.5, 1e-12);
  EXPECT_NEAR(two.ci_high, 2.0, 1e-12);

  // A family that is tighter on most mixes: the whole interval lies below 1.
  std::vector<double> logs;
  for (int i = 0; i < 40; ++i) logs.push_back(std::log(i % 8 == 0 ? 1.6 : 0.6));
  const PooledSdRatio tight = PoolSdRatios(logs);
  EXPECT_LT(tight.ci_high, 1.0);
  EXPECT_LT(tight.ci_low, tight.geomean);
  EXPECT_GT(tight.ci_high, tight.geomean);
  EXPECT_EQ(PoolSdRatios(logs).ci_low, tight.ci_low);  // deterministic
}

struct TailCase {
  double t;
  int dof;
  double upper_tail;
};

TEST(MixFamily, StudentTUpperTailMatchesTheTables) {
  // Two-sided 5% and one-sided 5% critical values from the published t tables.
  const TailCase cases[] = {
      {12.706, 1, 0.025}, {4.303, 2, 0.025},  {2.306, 8, 0.025},   {2.228, 10, 0.025},
      {1.833, 9, 0.05},   {1.645, 998, 0.05}, {0.0, 5, 0.5},       {-2.228, 10, 0.975},
      {3.355, 8, 0.005},  {1.0, 1, 0.25},     {-12.706, 1, 0.975},
  };
  for (const TailCase& c : cases) {
    EXPECT_NEAR(StudentTUpperTail(c.t, c.dof), c.upper_tail, 2e-4) << c.t << " " << c.dof;
  }
  EXPECT_TRUE(std::isnan(StudentTUpperTail(1.0, 0)));
}

// n normal pairs (c, f) with sd(c) = ratio x sd(f) and correlation rho.
void DrawPairs(Rng& rng, int n, double ratio, double rho, std::vector<double>& c,
               std::vector<double>& f) {
  c.assign(n, 0);
  f.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    const double a = rng.Normal(), b = rng.Normal();
    f[i] = 5.0 + a;
    c[i] = 3.0 + ratio * (rho * a + std::sqrt(1.0 - rho * rho) * b);
  }
}

struct ExcessCase {
  double ratio;
  double rho;
  int n;
  double min_rate, max_rate;  // share of 4,000 draws with p < 0.05
};

TEST(MixFamily, SdExcessTestHoldsItsLevelAndFindsLargeExcess) {
  const ExcessCase cases[] = {
      // At the limit the test rejects 5% of the time, however the pairs correlate.
      {1.5, 0.0, 10, 0.04, 0.06},
      {1.5, 0.6, 10, 0.04, 0.06},
      {1.5, 0.9, 10, 0.04, 0.06},
      // Below the limit, less often.
      {1.0, 0.3, 10, 0.0, 0.01},
      // Twice the limit: found on 10 pairs more often than not, and nearly always on 40.
      {3.0, 0.0, 10, 0.45, 0.75},
      {3.0, 0.0, 40, 0.95, 1.0},
  };
  Rng rng(2024);
  std::vector<double> c, f;
  for (const ExcessCase& k : cases) {
    int rejected = 0;
    constexpr int kDraws = 4000;
    for (int i = 0; i < kDraws; ++i) {
      DrawPairs(rng, k.n, k.ratio, k.rho, c, f);
      const double p = SdExcessPValue(c, f, 1.5);
      ASSERT_FALSE(std::isnan(p));
      rejected += p < 0.05;
    }
    const double rate = static_cast<double>(rejected) / kDraws;
    EXPECT_GE(rate, k.min_rate) << k.ratio << " " << k.rho << " " << k.n;
    EXPECT_LE(rate, k.max_rate) << k.ratio << " " << k.rho << " " << k.n;
  }
  // Too few pairs, sizes that differ, or a constant combination: no test.
  EXPECT_TRUE(std::isnan(SdExcessPValue({1, 2}, {3, 4}, 1.5)));
  EXPECT_TRUE(std::isnan(SdExcessPValue({1, 2, 3}, {3, 4}, 1.5)));
  EXPECT_TRUE(std::isnan(SdExcessPValue({1, 2, 3}, {2, 4, 6}, 0.5)));  // c - 0.5 f constant
}

FamilyMixResult WithRuns(FamilyMixResult r, const std::vector<double>& c,
                         const std::vector<double>& f) {
  for (FillSummary& s : r.results) {
    const std::vector<double>& v = s.policy == "tessera" ? c : f;
    for (size_t i = 0; i < v.size(); ++i) {
      FillRun run;
      run.policy = s.policy;
      run.seed = 42 + i;
      run.unalloc_pct_at_100 = v[i];
      run.unalloc_pct_at_130 = v[i] / 2 + (i % 2);
      s.runs.push_back(run);
    }
    std::vector<double> at_100, at_130;
    for (const FillRun& run : s.runs) {
      at_100.push_back(run.unalloc_pct_at_100);
      at_130.push_back(run.unalloc_pct_at_130);
    }
    s.unalloc_at_100 = Stats::Of(at_100);
    s.unalloc_at_130 = Stats::Of(at_130);
  }
  return r;
}

TEST(MixFamily, SummaryTestsTheSpreadOnRunsPairedBySeed) {
  // "wide": the candidate's values are 4x the reference's deviations, on the same seeds.
  const std::vector<double> f = {5.0, 5.3, 4.8, 5.1, 4.9, 5.2, 4.7, 5.0, 5.4, 4.6};
  std::vector<double> wide;
  for (double x : f) wide.push_back(1.0 + 4.0 * (x - 5.0) + (x > 5.0 ? 0.05 : -0.05));
  const std::vector<FamilyMixResult> results = {
      WithRuns(FakeMix("same", 0, 0, 0, 0, 0, 0), f, f),
      WithRuns(FakeMix("wide", 0, 0, 0, 0, 0, 0), wide, f),
      FakeMix("no-runs", 2.0, 0.2, 0.5, 2.5, 0.2, 0.6),
  };
  const FamilySummary s = SummarizeFamily(results, "tessera", "fgd");
  EXPECT_EQ(s.sd_tests, 4);  // two points of the two mixes with runs
  EXPECT_EQ(s.sd_excess_min.mix, "wide");
  EXPECT_EQ(s.sd_excess_min.point, 100);
  EXPECT_LT(s.sd_excess_min.p, 0.001);
  EXPECT_GE(s.sd_excess_significant, 1);
  ASSERT_FALSE(s.sd_excess_above.empty());
  EXPECT_EQ(s.sd_excess_above[0].mix, "wide");
  EXPECT_GT(s.sd_excess_above[0].ratio, 1.5);
  const std::string table = FamilyTable(results, "tessera", "fgd");
  EXPECT_NE(table.find("Paired test of sd > 1.5x fgd's"), std::string::npos) << table;
  EXPECT_NE(table.find("smallest p 0.00 (wide at 100%)"), std::string::npos) << table;
  // Without runs nothing is tested, and the table says nothing of it.
  const FamilySummary none = SummarizeFamily({results[2]}, "tessera", "fgd");
  EXPECT_EQ(none.sd_tests, 0);
  EXPECT_TRUE(std::isnan(none.sd_excess_min.p));
  EXPECT_EQ(FamilyTable({results[2]}, "tessera", "fgd").find("Paired test"), std::string::npos);
}

FamilyMixResult FakeReplay(const std::string& name, double c_alloc, double c_p95, double f_alloc,
                           double f_p95) {
  FamilyMixResult r;
  r.name = name;
  ReplaySummary c, f;
  c.policy = "tessera";
  c.gpu_alloc_arrival_window_pct = {.mean = c_alloc};
  c.wait_p95_s = {.mean = c_p95};
  f.policy = "fgd";
  f.gpu_alloc_arrival_window_pct = {.mean = f_alloc};
  f.wait_p95_s = {.mean = f_p95};
  r.replay = {c, f};
  return r;
}

TEST(MixFamily, ReplaySummaryComparesAllocationAndWait) {
  const ReplayFamilySummary s = SummarizeReplayFamily(
      {FakeReplay("better", 50, 10, 48, 20), FakeReplay("less-allocated", 47, 10, 48, 20),
       FakeReplay("waits-longer", 50, 30, 48, 20)},
      "tessera", "fgd");
  EXPECT_EQ(s.mixes, 3);
  EXPECT_EQ(s.alloc_ge, 2);
  EXPECT_EQ(s.alloc_below, std::vector<std::string>{"less-allocated"});
  EXPECT_EQ(s.p95_le, 2);
  EXPECT_EQ(s.p95_above, std::vector<std::string>{"waits-longer"});
  EXPECT_DOUBLE_EQ(s.mean_alloc_diff, (2.0 - 1.0 + 2.0) / 3);
  const std::string table = FamilyTable({FakeReplay("m", 50, 10, 48, 20)}, "tessera", "fgd");
  EXPECT_NE(table.find("tessera GPU % (arrivals)"), std::string::npos) << table;
  EXPECT_NE(table.find("| m | 50.00 ± 0.00 | 48.00 ± 0.00 | 10 ± 0 | 20 ± 0 |"), std::string::npos)
      << table;
}

}  // namespace
}  // namespace tessera
