// A family of workload mixes for checking a policy's robustness: `tessera sim family`.
//
// Each generated mix is the default generator config (sim/generator.h) with a few mix knobs
// (sim/mix_knobs.h) set, written as the flags of `tessera generate`; the definitions are fixed
// here (docs/POLICIES.md, "Workload-mix family") and do not depend on any result. Trace mixes
// are the 17 pod files of the FGD paper on its GPU node list. Every mix runs the fill protocol
// (sim/fill.h, RunFillMatrix: policy x seed on a pool of threads) and is summarised by the mean
// and standard deviation of the unallocated GPU % at 100% arrival and at the end of the run.
// The summary compares a candidate policy with a reference (tessera vs fgd by default).
// Thread-safety: pure functions of their arguments (RunFamilyMix starts its own threads).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "sim/fill.h"
#include "sim/fill_bound.h"
#include "sim/generator.h"
#include "sim/mix_knobs.h"
#include "sim/replay.h"

namespace tessera {

struct FamilyMix {
  std::string name;
  std::string description;
  MixFlags flags;
};

// The generated mixes, in a fixed order, names unique.
const std::vector<FamilyMix>& DefaultMixFamily();
// The 17 pod files of the FGD paper, as trace names ("default", "cpu050", ...): the file is
// openb_pod_list_<name>.csv.
const std::vector<std::string>& PaperTraceNames();
inline constexpr const char* kPaperNodeFile = "openb_node_list_gpu_node.csv";

enum class FamilyMode { kFill, kReplay };

struct FamilyOptions {
  // kFill: the fill protocol (sim/fill.h). kReplay: the dynamic replay (sim/replay.h) with
  // arrivals compressed by time_scale (generated mixes) or trace_time_scale (trace files).
  FamilyMode mode = FamilyMode::kFill;
  double time_scale = 1, trace_time_scale = 1;
  std::vector<std::string> policies = {"fgd", "tessera"};
  std::vector<uint64_t> seeds = {42, 43, 44, 45, 46, 47, 48, 49, 50, 51};
  double tune_ratio = 1.3;
  unsigned threads = 0;
  int generated_nodes = 400;                  // cluster size of the generated mixes
  uint64_t gen_seed = kDefaultGeneratorSeed;  // workload seed of the generated mixes
  // Generated mixes in fill mode: a second sample of the mix, drawn with this workload seed,
  // is the past workload every run observes first (FillOptions::past). Trace files have
  // no second sample and run without one.
  std::optional<uint64_t> past_gen_seed;
  // Fill mode: also compute each seed's fluid lower bound on the unallocated GPU % (sim/
  // fill_bound.h), reported beside the policies.
  bool bound = false;
};

struct FamilyMixResult {
  std::string name;
  std::string kind;  // "generated" or "trace"
  std::string description;
  std::string flags;  // generated: the `tessera generate` flags; trace: the pod file
  // Generated mixes: the resolved knobs.
  std::optional<GeneratorConfig> config;
  int64_t nodes = 0, gpus = 0;
  WorkloadMix mix;                    // measured on the workload
  int64_t past_pods = 0;              // pods of the past workload (FamilyOptions::past_gen_seed)
  std::vector<FillSummary> results;   // kFill
  std::vector<ReplaySummary> replay;  // kReplay
  std::vector<FillBoundRun> bounds;   // kFill with FamilyOptions::bound: one per seed
  double wall_seconds = 0;            // wall time of the mix (generation and all experiments)
};

// Generates the mix (config: default with the mix's flags, options.generated_nodes nodes,
// options.gen_seed) and runs it.
Result<FamilyMixResult> RunFamilyMix(const FamilyMix& mix, const FamilyOptions& options);
// Runs a trace mix from its nodes and pods.
Result<FamilyMixResult> RunTraceMix(const std::string& name, const std::string& pod_file,
                                    const std::vector<NodeSpec>& nodes,
                                    const std::vector<Workload>& pods,
                                    const FamilyOptions& options);

// The acceptance bounds of the summary: the candidate's mean at the end of the run may exceed
// the reference's by this many points, and its seed standard deviation may be this many times
// the reference's (at 100% arrival and at the end).
inline constexpr double kFamilyEndSlackPoints = 0.1;
inline constexpr double kFamilySdRatioLimit = 1.5;
// A reference within this many points of the fluid bound leaves no gap worth a share.
inline constexpr double kFamilyGapFloorPoints = 0.1;

// Geometric mean over mixes of candidate sd / reference sd, and its 95% interval from 10,000
// bootstrap resamples of the mixes (fixed seed: the same results give the same interval). Mixes
// where either sd is 0 are left out; `mixes` counts the rest. With no mix left, all are NaN.
struct PooledSdRatio {
  int mixes = 0;
  double geomean = std::numeric_limits<double>::quiet_NaN();
  double ci_low = std::numeric_limits<double>::quiet_NaN();
  double ci_high = std::numeric_limits<double>::quiet_NaN();
};
// `log_ratios`: ln(candidate sd / reference sd), one per mix.
PooledSdRatio PoolSdRatios(const std::vector<double>& log_ratios);

// P(T >= t) for Student's t with `dof` >= 1 degrees of freedom (exact finite series for integer
// degrees of freedom; Abramowitz and Stegun 26.7.3-4).
double StudentTUpperTail(double t, int dof);
// Pitman-Morgan test on runs paired by seed (the same arrivals for both policies): the
// one-sided p-value of "the candidate's sd is above `limit` x the reference's" against the null
// hypothesis that it is at most that. With U = c + limit f and V = c - limit f,
// cov(U, V) = var c - limit^2 var f, so the ratio exceeds the limit exactly when U and V
// correlate positively; their correlation r gives t = r sqrt(n - 2) / sqrt(1 - r^2) with
// n - 2 degrees of freedom. Assumes the pairs are jointly normal. NaN with fewer than 3 pairs,
// sizes that differ, or a constant U or V.
double SdExcessPValue(const std::vector<double>& candidate, const std::vector<double>& reference,
                      double limit);
// One mix and point (100: at 100% arrival; 130: at the end of the run) of that test.
struct SdExcessTest {
  std::string mix;
  int point = 100;
  double ratio = 0;  // candidate sd / reference sd
  double p = std::numeric_limits<double>::quiet_NaN();
};

struct FamilySummary {
  std::string candidate, reference;
  int mixes = 0;                // mixes with both policies
  int le_at_100 = 0;            // candidate mean <= reference mean at 100% arrival
  int le_at_130 = 0;            // ... at the end of the run
  int within_slack_at_130 = 0;  // candidate mean <= reference mean + kFamilyEndSlackPoints
  int sd_within_limit = 0;      // candidate sd <= kFamilySdRatioLimit x reference sd, both points
  int worse_beyond_noise = 0;   // candidate worse at 100% or at the end by more than hypot(sd)
  // Mixes failing each bound, by name.
  std::vector<std::string> above_at_100, above_at_130, sd_above;
  // Mean over mixes of (candidate - reference) / reference, in % (0 when the reference is 0).
  double mean_rel_diff_pct_at_100 = 0, mean_rel_diff_pct_at_130 = 0;
  // Mean over mixes of candidate - reference, in points of unallocated GPU %.
  double mean_diff_at_100 = 0, mean_diff_at_130 = 0;
  // Largest sd ratio candidate / reference over the mixes (reference sd 0: ignored unless the
  // candidate's is above 0, then infinity).
  double max_sd_ratio = 0;
  // The spread of the candidate against the reference over all mixes, at 100% arrival and
  // at the end: the geometric mean of the per-mix sd ratios, with a 95% bootstrap interval
  // over the mixes. At 10 seeds one mix's ratio is itself uncertain by a factor of about 1.4
  // either way, so the per-mix bound fails by chance (two policies of equal spread exceed
  // 1.5x on about 12% of mixes); the pooled ratio is the steadier answer to "is the candidate
  // less predictable than the reference". Informational: not one of the bounds.
  PooledSdRatio pooled_sd_ratio_at_100, pooled_sd_ratio_at_130;
  // The spread bound tested on the runs paired by seed (SdExcessPValue at kFamilySdRatioLimit),
  // at both points of every mix whose two policies ran the same seeds: how many points were
  // tested, how many give p < 0.05, the point with the smallest p, and the test of every point
  // above the limit. Were every ratio exactly at the limit, about 5% of the tests would give
  // p < 0.05 by chance; a ratio above the limit on 10 seeds with a large p is not evidence
  // that the candidate spreads more than the limit allows. Informational: not one of the bounds.
  int sd_tests = 0;
  int sd_excess_significant = 0;
  SdExcessTest sd_excess_min;  // p NaN when nothing was tested
  std::vector<SdExcessTest> sd_excess_above;
  // With bounds (FamilyOptions::bound): over the mixes where the reference's mean is at least
  // kFamilyGapFloorPoints above the bound's, the mean share (%) of that gap the candidate
  // closes, (reference - candidate) / (reference - bound), at 100% arrival and at the end; and
  // how many mixes count (0: the share is 0). Informational.
  int gap_mixes_at_100 = 0, gap_mixes_at_130 = 0;
  double gap_closed_pct_at_100 = 0, gap_closed_pct_at_130 = 0;
  // All three bounds hold on every mix.
  bool all_bounds_met() const {
    return mixes > 0 && le_at_100 == mixes && within_slack_at_130 == mixes &&
           sd_within_limit == mixes;
  }
};
FamilySummary SummarizeFamily(const std::vector<FamilyMixResult>& results,
                              const std::string& candidate, const std::string& reference);

// One row per mix: its knobs, each policy's mean ± sd at 100% and at the end, the candidate
// minus the reference, and seconds per experiment; then the summary.
std::string FamilyTable(const std::vector<FamilyMixResult>& results, const std::string& candidate,
                        const std::string& reference);
// Replay mode: GPU allocation over the arrival window (higher is better) and p95 wait (lower
// is better) of the candidate against the reference, mix by mix.
struct ReplayFamilySummary {
  std::string candidate, reference;
  int mixes = 0;
  int alloc_ge = 0;  // candidate mean arrival-window allocation >= reference's
  int p95_le = 0;    // candidate mean p95 wait <= reference's
  int p99_le = 0;    // candidate mean p99 wait <= reference's
  int never_placed_le = 0;
  std::vector<std::string> alloc_below, p95_above;
  double mean_alloc_diff = 0;  // points of GPU %, candidate - reference
  double mean_p95_diff_s = 0;
};
ReplayFamilySummary SummarizeReplayFamily(const std::vector<FamilyMixResult>& results,
                                          const std::string& candidate,
                                          const std::string& reference);

// {"options": ..., "mixes": [{name, kind, description, flags, knobs, mix, nodes, gpus,
//   policies: {P: {unalloc_pct_at_100: {mean, sd}, unalloc_pct_at_130: {mean, sd},
//   seconds_per_experiment, runs: [{seed, unalloc_pct_at_100, unalloc_pct_at_130}]}},
//   bound (with FamilyOptions::bound), wall_seconds}], "summary": {...}}; in replay mode each
//   policy has
// {gpu_alloc_time_weighted_pct, gpu_alloc_arrival_window_pct, wait_p95_s, wait_p50_s, wait_p99_s,
// mean_wait_s, never_placed, peak_pending: {mean, sd}} and the summary is the ReplayFamilySummary.
// The fill summary carries FamilySummary's counts and lists, and pooled_sd_ratio_at_100 and
// pooled_sd_ratio_at_130 as {mixes, geomean, ci95: [low, high]} (null where undefined), and
// sd_excess_test as {tests, p_below_0_05, smallest_p, above_limit: [...]}, each test
// {mix, point, sd_ratio, p} (smallest_p null when nothing was tested). FamilyTable likewise.
std::string FamilyJson(const std::vector<FamilyMixResult>& results, const FamilyOptions& options,
                       const std::string& candidate, const std::string& reference);

}  // namespace tessera
