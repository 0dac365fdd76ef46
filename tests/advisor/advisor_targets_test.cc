// The targets on generated histories the method was not developed on (seeds 101-105):
// 200 workloads, 7 days at 5-minute samples, judged against day 8, closed loop on half the GPUs
// the original requests take (the benchmark's defaults). Release builds only: a sanitizer build
// takes too long for a unit test.
#include <gtest/gtest.h>

#include "advisor/closed_loop.h"
#include "advisor/evaluate.h"
#include "advisor/generator.h"
#include "advisor/recommend.h"

namespace tessera::advisor {
namespace {

TEST(AdvisorTargets, HeldOutSeeds) {
#if !defined(NDEBUG) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "release builds only";
#endif
  const AdvisorConfig cfg;
  for (uint64_t seed = 101; seed <= 105; ++seed) {
    GeneratorConfig gc;
    gc.seed = seed;
    auto gen = GenerateHistory(gc);
    ASSERT_TRUE(gen.ok()) << gen.status().message();
    auto rep = Advise(gen->history, cfg, DefaultPriceTable());
    ASSERT_TRUE(rep.ok()) << rep.status().message();
    const Evaluation ev = Evaluate(*rep, gen->eval, cfg);
    EXPECT_GE(ev.judged, 190) << "seed " << seed;
    // The following day's true peak is covered for at least 99 % of the workloads.
    EXPECT_GE(ev.covered_pct, 99.0) << "seed " << seed;
    // Median over-provision of the resized workloads at most 15 %.
    EXPECT_GT(ev.resized, 100) << "seed " << seed;
    EXPECT_LE(ev.median_overprovision_pct, 15.0) << "seed " << seed;
    EXPECT_GT(rep->gpus_freed, 50.0) << "seed " << seed;
    auto loop = SimulateClosedLoop(LoopGpus(*rep, 0.5), LoopWorkloads(*rep, gen->eval), cfg);
    ASSERT_TRUE(loop.ok());
    // Auto-sized workloads fit at least 1.5x as many as their original requests, at admission
    // and once every out-of-memory kill was handled (displaced workloads left waiting count
    // against it).
    EXPECT_GE(loop->auto_fit_ratio, 1.5) << "seed " << seed;
    EXPECT_GE(loop->running_fit_ratio, 1.5) << "seed " << seed;
    // Every out-of-memory kill is recovered with at most one retry; none is left waiting.
    EXPECT_EQ(loop->unrecovered, 0) << "seed " << seed;
    EXPECT_LE(loop->max_retries_per_oom, 1) << "seed " << seed;
    for (const OomEvent& e : loop->oom) {
      EXPECT_TRUE(e.recovered) << "seed " << seed << " " << e.key;
      EXPECT_LE(e.retries, 1) << "seed " << seed << " " << e.key;
    }
  }
}

}  // namespace
}  // namespace tessera::advisor
