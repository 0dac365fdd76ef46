// The generator (deterministic, known needs) and the closed-loop simulation (packing on fixed
// GPUs, out-of-memory recovery).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "advisor/closed_loop.h"
#include "advisor/evaluate.h"
#include "advisor/generator.h"
#include "advisor/recommend.h"

namespace tessera::advisor {
namespace {

GeneratorConfig Small(uint64_t seed) {
  GeneratorConfig c;
  c.workloads = 40;
  c.days = 3;
  c.step_s = 900;
  c.seed = seed;
  return c;
}

TEST(Generator, DeterministicAndReadable) {
  auto a = GenerateHistory(Small(7));
  auto b = GenerateHistory(Small(7));
  auto c = GenerateHistory(Small(8));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const std::string csv = HistoryCsv(a->history);
  EXPECT_TRUE(csv == HistoryCsv(b->history));
  EXPECT_FALSE(csv == HistoryCsv(c->history));
  auto back = ParseHistoryCsv(csv, "gen.csv");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(HistoryCsv(*back) == csv);
  EXPECT_EQ(a->history.workloads.size(), a->eval.workloads.size());
  std::set<std::string> kinds(a->archetype.begin(), a->archetype.end());
  EXPECT_GE(kinds.size(), 4u);
  // Owners over-ask: every true peak of the following day is within the request.
  for (size_t i = 0; i < a->eval.workloads.size(); ++i) {
    const WorkloadUsage& w = a->eval.workloads[i];
    const Slice req = RequestSlice(w.gpu_model, w.request);
    for (const PodSeries& p : w.pods)
      for (const UsageSample& s : p.samples)
        EXPECT_LE(s.memory_mib, static_cast<double>(req.memory_mib) / std::max(1, req.whole_gpus))
            << w.Key();
  }
}

TEST(Generator, RejectsBadConfigs) {
  GeneratorConfig c;
  c.step_s = 7;
  EXPECT_EQ(GenerateHistory(c).status().message(),
            "generator: step 7 s must be in 10..86400 and divide a day");
  c = GeneratorConfig{};
  c.workloads = 0;
  EXPECT_EQ(GenerateHistory(c).status().message(), "generator: workloads 0 outside 1..100000");
}

LoopWorkload SmallOnWholeA100(const std::string& key, double predicted_mib, double true_peak) {
  LoopWorkload w;
  w.key = key;
  w.model = "A100-80GB";
  w.request.whole_gpus = 1;
  w.advice.state = AdviceState::kOk;
  w.advice.keep = false;
  w.advice.predicted_memory_mib = predicted_mib;
  w.advice.predicted_compute = 0.1;
  w.advice.compute.p50 = 0.1;
  w.advice.memory_limit_mib = static_cast<int64_t>(predicted_mib * 1.05);
  AdvisorConfig cfg;
  cfg.prefer_mig = true;
  w.advice.recommended = *SliceOn("A100-80GB", predicted_mib * 1.05, 0.1, false, cfg);
  w.true_peak_mib = true_peak;
  return w;
}

TEST(ClosedLoop, AutoSizedWorkloadsShareTheGpus) {
  std::vector<LoopWorkload> ws;
  for (int i = 0; i < 6; ++i) ws.push_back(SmallOnWholeA100("w" + std::to_string(i), 8000, 7000));
  auto r = SimulateClosedLoop({"A100-80GB", "A100-80GB"}, ws, AdvisorConfig{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->fit_original, 2);
  // 1g.10gb instances: at most 7 per GPU by compute, 6 placed.
  EXPECT_EQ(r->fit_auto, 6);
  EXPECT_DOUBLE_EQ(r->auto_fit_ratio, 3.0);
  EXPECT_TRUE(r->oom.empty());
  // Not annotated auto: everyone keeps the request.
  for (auto& w : ws) w.auto_rightsize = false;
  r = SimulateClosedLoop({"A100-80GB", "A100-80GB"}, ws, AdvisorConfig{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->fit_auto, 2);
}

TEST(ClosedLoop, OutOfMemoryIsRecoveredWithOneRetry) {
  std::vector<LoopWorkload> ws = {SmallOnWholeA100("ok", 8000, 7000),
                                  SmallOnWholeA100("grows", 8000, 30000)};
  auto r = SimulateClosedLoop({"A100-80GB", "A100-80GB"}, ws, AdvisorConfig{});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->oom.size(), 1u);
  const OomEvent& e = r->oom[0];
  EXPECT_EQ(e.key, "grows");
  EXPECT_EQ(e.granted_mib, 9728);  // the 1g.10gb instance
  EXPECT_EQ(e.true_peak_mib, 30000);
  EXPECT_EQ(e.regranted_mib, 81920);
  EXPECT_EQ(e.retries, 1);
  EXPECT_TRUE(e.recovered);
  EXPECT_EQ(r->max_retries_per_oom, 1);
  EXPECT_EQ(r->unrecovered, 0);
  // No whole GPU left for the re-admission: reported, not hidden.
  r = SimulateClosedLoop({"A100-80GB"}, ws, AdvisorConfig{});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->oom.size(), 1u);
  EXPECT_FALSE(r->oom[0].recovered);
  EXPECT_EQ(r->unrecovered, 1);
}

TEST(ClosedLoop, ReadmissionTakesAnotherModelWhenItsOwnIsFull) {
  std::vector<LoopWorkload> ws = {SmallOnWholeA100("ok", 8000, 7000),
                                  SmallOnWholeA100("grows", 8000, 30000)};
  struct Case {
    const char* other;
    bool recovered;
  };
  // An idle H100 holds the grown grant (at least twice the killed 9728 MiB); a T4 is too small.
  for (const Case& c : {Case{"H100-80GB", true}, Case{"T4", false}}) {
    auto r = SimulateClosedLoop({"A100-80GB", c.other}, ws, AdvisorConfig{});
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->oom.size(), 1u) << c.other;
    EXPECT_EQ(r->oom[0].recovered, c.recovered) << c.other;
    EXPECT_EQ(r->oom[0].retries, 1) << c.other;
    if (c.recovered) {
      EXPECT_GE(r->oom[0].regranted_mib, 2 * 9728);
    }
  }
}

TEST(ClosedLoop, ReserveKeepsAnIdleGpuForReadmissions) {
  std::vector<LoopWorkload> ws;
  for (int i = 0; i < 8; ++i) ws.push_back(SmallOnWholeA100("w" + std::to_string(i), 8000, 7000));
  ws.push_back(SmallOnWholeA100("grows", 8000, 30000));
  AdvisorConfig cfg;
  cfg.oom_reserve_gpus = 1;
  auto r = SimulateClosedLoop({"A100-80GB", "A100-80GB", "A100-80GB"}, ws, cfg);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->fit_auto, 9);  // 7 + 2 instances on two GPUs, the third left idle
  ASSERT_EQ(r->oom.size(), 1u);
  EXPECT_TRUE(r->oom[0].recovered);
  cfg.oom_reserve_gpus = 0;
  r = SimulateClosedLoop({"A100-80GB", "A100-80GB"}, ws, cfg);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->fit_auto, 9);
  EXPECT_EQ(r->unrecovered, 1);  // both GPUs in MIG mode: no room for the grown grant
}

// An auto-sized MPS share of `model`: memory limit `limit_mib`, compute need `compute` (with
// the compute headroom), true peak `peak_mib`.
LoopWorkload AutoShare(const std::string& key, const std::string& model, int64_t limit_mib,
                       double compute, double peak_mib) {
  const AdvisorConfig cfg;
  LoopWorkload w;
  w.key = key;
  w.model = model;
  w.request.whole_gpus = 1;
  w.advice.state = AdviceState::kOk;
  w.advice.keep = false;
  w.advice.predicted_memory_mib = static_cast<double>(limit_mib) / 1.05;
  w.advice.predicted_compute = compute - cfg.compute_headroom;
  w.advice.compute.p50 = w.advice.predicted_compute;
  w.advice.memory_limit_mib = limit_mib;
  w.advice.recommended = *SliceOn(model, static_cast<double>(limit_mib), compute, false, cfg);
  w.true_peak_mib = peak_mib;
  return w;
}

// A workload that keeps its request: `mib` MiB and `compute` as an MPS share, or the whole GPU
// when mib is 0.
LoopWorkload Fixed(const std::string& key, const std::string& model, int64_t mib, double compute) {
  LoopWorkload w;
  w.key = key;
  w.model = model;
  w.auto_rightsize = false;
  if (mib == 0) {
    w.request.whole_gpus = 1;
  } else {
    w.request.memory_mib = mib;
    w.request.compute = compute;
  }
  w.true_peak_mib = static_cast<double>(mib) * 0.9;
  return w;
}

TEST(ClosedLoop, AdmissionFallsBackToAnotherModelWhereTheComputeFits) {
  struct Case {
    const char* name;
    std::string model, other;
    double compute;
    bool admit_on_other_models;
    int fit_auto;
  };
  // The workload's own GPU is held whole; the other model's GPU is idle. Compute scales by
  // relative compute (A100 4.8x a T4): 10 % of an A100 is 48 % of a T4, 50 % would be 240 %.
  const Case cases[] = {
      {"T4 share onto an A100", "T4", "A100-80GB", 0.25, true, 2},
      {"fallback off", "T4", "A100-80GB", 0.25, false, 1},
      {"A100 share onto a T4", "A100-80GB", "T4", 0.10, true, 2},
      {"too much compute for a T4", "A100-80GB", "T4", 0.50, true, 1},
  };
  for (const Case& c : cases) {
    AdvisorConfig cfg;
    cfg.admit_on_other_models = c.admit_on_other_models;
    const std::vector<LoopWorkload> ws = {Fixed("whole", c.model, 0, 1),
                                          AutoShare("share", c.model, 4200, c.compute, 4000)};
    auto r = SimulateClosedLoop({c.model, c.other}, ws, cfg);
    ASSERT_TRUE(r.ok()) << c.name;
    EXPECT_EQ(r->fit_original, 1) << c.name;
    EXPECT_EQ(r->fit_auto, c.fit_auto) << c.name;
    EXPECT_EQ(r->fit_auto_running, c.fit_auto) << c.name;
  }
}

TEST(ClosedLoop, ReadmissionDisplacesALaterAdmission) {
  // L4 (23034 MiB): "grows" (4000 MiB, true peak 7000) and two later shares on the first GPU;
  // a fixed 16000 MiB share on the second. After the kill no size from 2 x 4000 up has room:
  // displacing "later-a" gives room to half the request (11517 MiB), and "later-a" is admitted
  // again beside the fixed share. Displacing the fixed share instead would give the whole GPU
  // but leave it waiting.
  const std::vector<LoopWorkload> ws = {
      AutoShare("grows", "L4", 4000, 0.20, 7000), AutoShare("later-a", "L4", 6000, 0.30, 5000),
      AutoShare("later-b", "L4", 10000, 0.30, 9000), Fixed("fixed", "L4", 16000, 0.6)};
  auto r = SimulateClosedLoop({"L4", "L4"}, ws, AdvisorConfig{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->fit_auto, 4);
  ASSERT_EQ(r->oom.size(), 1u);
  const OomEvent& e = r->oom[0];
  EXPECT_EQ(e.key, "grows");
  EXPECT_TRUE(e.recovered);
  EXPECT_EQ(e.retries, 1);
  EXPECT_EQ(e.regranted_mib, 11517);
  EXPECT_EQ(e.displaced, std::vector<std::string>{"later-a"});
  EXPECT_EQ(e.displaced_readmitted, 1);
  EXPECT_EQ(r->displaced_waiting, 0);
  EXPECT_EQ(r->fit_auto_running, 4);
  EXPECT_DOUBLE_EQ(r->running_fit_ratio, 2.0);

  // One GPU: the displaced workload finds no room again and waits.
  const std::vector<LoopWorkload> one(ws.begin(), ws.begin() + 3);
  r = SimulateClosedLoop({"L4"}, one, AdvisorConfig{});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->oom.size(), 1u);
  EXPECT_TRUE(r->oom[0].recovered);
  EXPECT_EQ(r->oom[0].displaced, std::vector<std::string>{"later-a"});
  EXPECT_EQ(r->oom[0].displaced_readmitted, 0);
  EXPECT_EQ(r->displaced_waiting, 1);
  EXPECT_EQ(r->fit_auto, 3);
  EXPECT_EQ(r->fit_auto_running, 2);

  // Without preemption the killed workload waits.
  AdvisorConfig cfg;
  cfg.oom_preempt = false;
  r = SimulateClosedLoop({"L4", "L4"}, ws, cfg);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->oom.size(), 1u);
  EXPECT_FALSE(r->oom[0].recovered);
  EXPECT_TRUE(r->oom[0].displaced.empty());
  EXPECT_EQ(r->unrecovered, 1);
  EXPECT_EQ(r->fit_auto_running, 3);
}

TEST(ClosedLoop, EarlierAdmissionsAreNeverDisplaced) {
  // "grows" is admitted last: the shares before it keep their room and it waits.
  const std::vector<LoopWorkload> ws = {AutoShare("a", "L4", 10000, 0.30, 9000),
                                        AutoShare("b", "L4", 9000, 0.30, 8000),
                                        AutoShare("grows", "L4", 4000, 0.20, 7000)};
  auto r = SimulateClosedLoop({"L4"}, ws, AdvisorConfig{});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->oom.size(), 1u);
  EXPECT_FALSE(r->oom[0].recovered);
  EXPECT_TRUE(r->oom[0].displaced.empty());
  EXPECT_EQ(r->fit_auto_running, 2);
}

TEST(ClosedLoop, UnknownModelIsAnError) {
  EXPECT_EQ(SimulateClosedLoop({"A200"}, {}, AdvisorConfig{}).status().message(),
            "closed loop: unknown GPU model 'A200'");
}

TEST(ClosedLoop, GeneratedCaseRecoversEveryOomWithOneRetry) {
  // Some of these seeds hold an out-of-memory kill on the following day in this small case.
  size_t ooms = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    auto gen = GenerateHistory(Small(seed));
    ASSERT_TRUE(gen.ok());
    AdvisorConfig cfg;
    auto rep = Advise(gen->history, cfg, DefaultPriceTable());
    ASSERT_TRUE(rep.ok()) << rep.status().message();
    const Evaluation ev = Evaluate(*rep, gen->eval, cfg);
    EXPECT_GT(ev.judged, 30);
    EXPECT_GE(ev.covered_pct, 90.0);
    // The defaults pack fully and make room for re-admissions by displacing later admissions;
    // a reserved idle GPU gives the room instead.
    for (int64_t reserve : {0, 1}) {
      cfg.oom_reserve_gpus = reserve;
      auto loop = SimulateClosedLoop(LoopGpus(*rep, 0.5), LoopWorkloads(*rep, gen->eval), cfg);
      ASSERT_TRUE(loop.ok());
      if (reserve == 0) {
        EXPECT_GT(loop->fit_auto_running, loop->fit_original) << "seed " << seed;
      }
      ooms += loop->oom.size();
      // Fully packed, the largest size with room may stay below a peak far beyond the grant (a
      // notebook loading a model 6x the last, seed 6): a second retry; a reserve holds more.
      EXPECT_LE(loop->max_retries_per_oom, reserve == 0 ? 2 : 1)
          << "seed " << seed << " reserve " << reserve;
      EXPECT_EQ(loop->unrecovered, 0) << "seed " << seed << " reserve " << reserve;
      for (const OomEvent& e : loop->oom) EXPECT_TRUE(e.recovered) << e.key;
    }
  }
  EXPECT_GT(ooms, 0u);
}

}  // namespace
}  // namespace tessera::advisor
