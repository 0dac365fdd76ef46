// Multi-GPU demand forecast (sharing/multi_gpu_forecast.h) and the allocator's node protection
// (SharingConfig::protect_nodes).
#include <gtest/gtest.h>

#include <cmath>

#include "cluster/gpu_slices.h"
#include "sharing/allocator.h"
#include "sharing/multi_gpu_forecast.h"

namespace tessera {
namespace {

constexpr int64_t kGiB = 1024;
constexpr double kHour = 3600;

NodeSpec Node(const std::string& name, const char* model, int gpus) {
  NodeSpec s;
  s.name = name;
  s.cpu = MilliCpu(256000);
  s.memory = MiB(2048 * kGiB);
  s.gpu_count = gpus;
  s.model = *GpuCatalog::Builtin().Find(model);
  return s;
}

SliceDemand Small(int64_t gib) {
  SliceDemand d;
  d.memory_mib = gib * kGiB;
  d.compute_pct = 10;
  d.isolation = Isolation::kStrict;
  d.cpu = MilliCpu(1000);
  d.host_memory = MiB(4 * kGiB);
  return d;
}

SliceDemand Multi(int gpus) {
  SliceDemand d;
  d.whole_gpus = gpus;
  d.memory_mib = 60 * kGiB;
  d.isolation = Isolation::kStrict;
  d.cpu = MilliCpu(8000);
  d.host_memory = MiB(64 * kGiB);
  return d;
}

// ---- forecast ----------------------------------------------------------------------------------

TEST(MultiGpuForecastTest, NothingObservedForecastsNothing) {
  MultiGpuForecast f(4 * kHour, 4 * kHour);
  EXPECT_FALSE(f.seen_any());
  EXPECT_EQ(f.GpusNeeded(10 * kHour), 0.0);
  f.Arrival(1, 0);  // single-GPU and fractional work is not multi-GPU demand
  f.Arrival(0, kHour);
  EXPECT_FALSE(f.seen_any());
  EXPECT_EQ(f.GpusNeeded(2 * kHour), 0.0);
}

// A steady stream: the rate approaches the true one, per GPU count, and the forecast is Little's
// law with the prior as the run time while no job has finished.
TEST(MultiGpuForecastTest, SteadyStreamGivesLittlesLaw) {
  struct Case {
    double per_hour;
    int gpus;
    double half_life_h;
  };
  for (const Case& c : {Case{1, 4, 4}, Case{2, 2, 4}, Case{0.5, 8, 12}, Case{3, 8, 1}}) {
    MultiGpuForecast f(c.half_life_h * kHour, 5 * kHour);
    const double step = kHour / c.per_hour;
    double t = 0;
    for (; t < 10 * c.half_life_h * kHour; t += step) f.Arrival(c.gpus, t);
    const double now = t - step / 2;  // between arrivals: no phase bias on average
    EXPECT_NEAR(f.Rate(c.gpus, now) * kHour, c.per_hour, 0.1 * c.per_hour)
        << c.per_hour << "/h x " << c.gpus;
    EXPECT_EQ(f.Rate(c.gpus + 1, now), 0.0);
    EXPECT_NEAR(f.GpusNeeded(now), f.Rate(c.gpus, now) * 5 * kHour * c.gpus, 1e-9);
  }
}

TEST(MultiGpuForecastTest, EarlyEstimateIsNotBiasedLowAndDecaysWithoutArrivals) {
  MultiGpuForecast f(4 * kHour, 4 * kHour);
  for (int i = 0; i < 4; ++i) f.Arrival(2, i * kHour);  // 1/h for 4 h, under one half-life
  const double early = f.Rate(2, 4 * kHour) * kHour;
  EXPECT_GT(early, 0.6);
  EXPECT_LT(early, 1.4);
  // Once the span covers several half-lives, one half-life without arrivals halves the rate,
  // and six bring it near zero.
  for (int i = 4; i < 40; ++i) f.Arrival(2, i * kHour);
  EXPECT_NEAR(f.Rate(2, 44 * kHour) / f.Rate(2, 40 * kHour), 0.5, 0.01);
  EXPECT_LT(f.Rate(2, 64 * kHour) * kHour, 0.05);
}

TEST(MultiGpuForecastTest, RunTimeLearnsFromFinishedAndRunningJobs) {
  MultiGpuForecast f(4 * kHour, 4 * kHour);
  EXPECT_DOUBLE_EQ(f.ExpectedDurationS(0), 4 * kHour);  // the prior alone
  f.Started(1, 0);
  f.Started(2, 0);
  f.Finished(1, 10 * kHour);
  // (prior 4 + finished 10 + running 10) / (1 + 1 finished)
  EXPECT_DOUBLE_EQ(f.ExpectedDurationS(10 * kHour), 12 * kHour);
  f.Finished(2, 16 * kHour);
  EXPECT_DOUBLE_EQ(f.ExpectedDurationS(20 * kHour), 10 * kHour);
  f.Finished(3, 20 * kHour);  // unknown job: ignored
  EXPECT_DOUBLE_EQ(f.ExpectedDurationS(20 * kHour), 10 * kHour);
}

// ---- allocator ---------------------------------------------------------------------------------

TEST(NodeProtectionTest, ConfigRanges) {
  struct Case {
    double half_life, prior, share;
    bool ok;
  };
  for (const Case& c : {Case{4 * kHour, 4 * kHour, 0.75, true}, Case{600, 60, 0, true},
                        Case{7 * 86400, 30 * 86400, 1, true}, Case{599, 4 * kHour, 0.5, false},
                        Case{8 * 86400, 4 * kHour, 0.5, false}, Case{kHour, 59, 0.5, false},
                        Case{kHour, 31 * 86400, 0.5, false}, Case{kHour, kHour, -0.1, false},
                        Case{kHour, kHour, 1.1, false}, Case{kHour, kHour, std::nan(""), false}}) {
    SharingConfig cfg;
    cfg.protect_half_life_s = c.half_life;
    cfg.protect_duration_prior_s = c.prior;
    cfg.max_protected_share = c.share;
    EXPECT_EQ(ValidateSharingConfig(cfg).ok(), c.ok)
        << c.half_life << " " << c.prior << " " << c.share;
  }
}

// Four 8-GPU A100-80GB nodes and four 4-GPU L4 nodes.
ClusterState MixedCluster() {
  ClusterState c;
  for (int i = 0; i < 4; ++i)
    EXPECT_TRUE(c.AddNode(Node("a100-" + std::to_string(i), "A100-80GB", 8)).ok());
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(c.AddNode(Node("l4-" + std::to_string(i), "L4", 4)).ok());
  return c;
}

SharingConfig Protecting() {
  SharingConfig cfg;
  cfg.protect_nodes = true;
  return cfg;
}

TEST(NodeProtectionTest, NoProtectionWithoutMultiGpuDemand) {
  for (bool protect : {false, true}) {
    ClusterState c = MixedCluster();
    SharingConfig cfg;
    cfg.protect_nodes = protect;
    SharingAllocator alloc(cfg);
    for (int i = 0; i < 200; ++i) {
      const SliceDemand d = Small(4 + i % 5);
      alloc.Observe(d, i * 60.0);
      ASSERT_TRUE(alloc.Place(c, i + 1, d).placed);
      EXPECT_EQ(alloc.protected_nodes(), 0u);
      EXPECT_EQ(alloc.forecast_gpus(), 0.0);
    }
  }
}

TEST(NodeProtectionTest, OffByDefaultEvenWithMultiGpuDemand) {
  ClusterState c = MixedCluster();
  SharingAllocator alloc;
  for (int i = 0; i < 4; ++i) alloc.Observe(Multi(8), i * kHour);
  EXPECT_TRUE(alloc.Place(c, 1, Small(4)).placed);
  EXPECT_EQ(alloc.protected_nodes(), 0u);
}

// Once multi-GPU demand is observed, nodes of the models it may use are protected: small work
// goes elsewhere, multi-GPU jobs land on protected nodes, and protection ends when the demand
// stops (the forecast decays).
TEST(NodeProtectionTest, ProtectsOnceObservedAndReleasesWhenDemandEnds) {
  ClusterState c = MixedCluster();
  SharingAllocator alloc(Protecting());
  WorkloadId next = 1;
  // A steady stream of 4-GPU jobs, 1 per hour, for 12 hours: forecast ~ 1/h x 4 h x 4 GPUs.
  double t = 0;
  for (; t < 12 * kHour; t += kHour) alloc.Observe(Multi(4), t);
  alloc.AdvanceClock(t);
  PlaceOutcome o = alloc.Place(c, next++, Small(4));
  ASSERT_TRUE(o.placed) << o.reason;
  EXPECT_NEAR(alloc.forecast_gpus(), 16, 4);
  const size_t protected_now = alloc.protected_nodes();
  EXPECT_GE(protected_now, 2u);
  EXPECT_LE(protected_now, 3u);  // at most 0.75 of the four eligible nodes
  for (NodeIdx n = 4; n < 8; ++n) EXPECT_FALSE(alloc.is_protected(n)) << "L4 cannot host it";
  EXPECT_FALSE(alloc.is_protected(o.assignment.node)) << o.explanation;
  // Small strict work fills the unprotected A100s' MIG instances, never a protected node.
  for (int i = 0; i < 40; ++i) {
    o = alloc.Place(c, next++, Small(8));
    if (!o.placed) break;
    EXPECT_FALSE(alloc.is_protected(o.assignment.node)) << o.explanation;
  }
  // A multi-GPU job takes a protected node.
  o = alloc.Place(c, 1000, Multi(4));
  ASSERT_TRUE(o.placed) << o.reason;
  EXPECT_TRUE(alloc.is_protected(o.assignment.node));
  // The stream stops; a day later nothing is protected.
  alloc.AdvanceClock(t + 36 * kHour);
  EXPECT_TRUE(alloc.Place(c, next++, Small(4)).placed);
  EXPECT_LT(alloc.forecast_gpus(), 4);
  EXPECT_LE(alloc.protected_nodes(), 1u);  // at most the node the 4-GPU job runs on
  ASSERT_TRUE(c.Release(1000).ok());
  alloc.AdvanceClock(t + 72 * kHour);
  EXPECT_TRUE(alloc.Place(c, next++, Small(4)).placed);
  EXPECT_EQ(alloc.protected_nodes(), 0u);
  EXPECT_TRUE(c.CheckInvariants().ok());
}

TEST(NodeProtectionTest, ShareCapsProtection) {
  for (double share : {0.0, 0.25, 0.5, 1.0}) {
    ClusterState c = MixedCluster();
    SharingConfig cfg = Protecting();
    cfg.max_protected_share = share;
    SharingAllocator alloc(cfg);
    for (int i = 0; i < 48; ++i) alloc.Observe(Multi(8), i * 900.0);  // heavy demand
    ASSERT_TRUE(alloc.Place(c, 1, Small(4)).placed);
    EXPECT_EQ(alloc.protected_nodes(), static_cast<size_t>(share * 4)) << share;
  }
}

}  // namespace
}  // namespace tessera
