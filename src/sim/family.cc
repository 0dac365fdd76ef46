#include "sim/family.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <numbers>

#include "core/random.h"
#include "core/text.h"

namespace tessera {
namespace {

const FillSummary* Find(const FamilyMixResult& r, const std::string& policy) {
  for (const FillSummary& s : r.results) {
    if (s.policy == policy) return &s;
  }
  return nullptr;
}

const ReplaySummary* FindReplay(const FamilyMixResult& r, const std::string& policy) {
  for (const ReplaySummary& s : r.replay) {
    if (s.policy == policy) return &s;
  }
  return nullptr;
}

// The two policies' values of `field`, paired by seed (seeds run by both, in the candidate's
// order).
void PairBySeed(const FillSummary& c, const FillSummary& f, double FillRun::*field,
                std::vector<double>& cv, std::vector<double>& fv) {
  cv.clear();
  fv.clear();
  for (const FillRun& a : c.runs) {
    for (const FillRun& b : f.runs) {
      if (b.seed != a.seed) continue;
      cv.push_back(a.*field);
      fv.push_back(b.*field);
      break;
    }
  }
}

double PerExperiment(const FillSummary& s) {
  return s.runs.empty() ? 0.0 : s.wall_seconds / static_cast<double>(s.runs.size());
}

double Frac(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

Result<FamilyMixResult> Run(FamilyMixResult r, const std::vector<NodeSpec>& nodes,
                            const std::vector<Workload>& pods, const FamilyOptions& o,
                            std::chrono::steady_clock::time_point t0,
                            const std::vector<Workload>* past_pods = nullptr) {
  r.nodes = static_cast<int64_t>(nodes.size());
  for (const NodeSpec& n : nodes) r.gpus += n.gpu_count;
  r.mix = MixOf(pods);
  if (o.mode == FamilyMode::kReplay) {
    const double scale = r.kind == "trace" ? o.trace_time_scale : o.time_scale;
    auto scaled = CompressArrivals(pods, scale);
    if (!scaled.ok())
      return Status(scaled.status().code(), r.name + ": " + scaled.status().message());
    auto replay = RunReplayMatrix(nodes, *scaled, o.policies, o.seeds, o.threads);
    if (!replay.ok())
      return Status(replay.status().code(), r.name + ": " + replay.status().message());
    r.replay = std::move(replay).value();
  } else {
    FillHooks shared;
    shared.past = past_pods;
    auto results = RunFillMatrix(nodes, pods, o.policies, o.seeds, o.tune_ratio, o.threads, shared);
    if (!results.ok())
      return Status(results.status().code(), r.name + ": " + results.status().message());
    r.results = std::move(results).value();
    if (o.bound) {
      auto bounds = ComputeFillBounds(nodes, pods, o.tune_ratio, o.seeds, o.threads);
      if (!bounds.ok())
        return Status(bounds.status().code(), r.name + ": " + bounds.status().message());
      r.bounds = std::move(bounds).value();
    }
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace

Result<FamilyMixResult> RunFamilyMix(const FamilyMix& mix, const FamilyOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  GeneratorConfig config;
  config.num_nodes = o.generated_nodes;
  Status st = ApplyMixFlags(mix.flags, config);
  if (!st.ok()) return Status(st.code(), "mix '" + mix.name + "': " + st.message());
  auto trace = Generate(config, o.gen_seed);
  if (!trace.ok())
    return Status(trace.status().code(), "mix '" + mix.name + "': " + trace.status().message());
  FamilyMixResult r;
  r.name = mix.name;
  r.kind = "generated";
  r.description = mix.description;
  r.flags = mix.flags.Text();
  r.config = config;
  std::optional<GeneratedTrace> past;
  if (o.past_gen_seed && o.mode == FamilyMode::kFill) {
    auto drawn = Generate(config, *o.past_gen_seed);
    if (!drawn.ok())
      return Status(drawn.status().code(), "mix '" + mix.name + "': " + drawn.status().message());
    past = std::move(drawn).value();
    r.past_pods = static_cast<int64_t>(past->pods.size());
  }
  return Run(std::move(r), trace->nodes, trace->pods, o, t0, past ? &past->pods : nullptr);
}

Result<FamilyMixResult> RunTraceMix(const std::string& name, const std::string& pod_file,
                                    const std::vector<NodeSpec>& nodes,
                                    const std::vector<Workload>& pods, const FamilyOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  FamilyMixResult r;
  r.name = name;
  r.kind = "trace";
  r.description = "Alibaba openb trace file";
  r.flags = pod_file;
  return Run(std::move(r), nodes, pods, o, t0);
}

PooledSdRatio PoolSdRatios(const std::vector<double>& log_ratios) {
  PooledSdRatio p;
  p.mixes = static_cast<int>(log_ratios.size());
  if (log_ratios.empty()) return p;
  p.geomean = std::exp(Stats::Of(log_ratios).mean);
  constexpr int kResamples = 10000;
  const size_t n = log_ratios.size();
  Rng rng(0x5eed5d);
  std::vector<double> means(kResamples);
  for (double& m : means) {
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += log_ratios[rng.Uniform(n)];
    m = sum / static_cast<double>(n);
  }
  std::sort(means.begin(), means.end());
  p.ci_low = std::exp(means[kResamples * 25 / 1000]);
  p.ci_high = std::exp(means[kResamples * 975 / 1000 - 1]);
  return p;
}

double StudentTUpperTail(double t, int dof) {
  if (dof < 1 || std::isnan(t)) return std::numeric_limits<double>::quiet_NaN();
  // A = P(|T| <= t) as a finite series in cos(theta), theta = atan(t / sqrt(dof)); A is odd
  // in t, so (1 - A) / 2 is the upper tail for either sign.
  const double theta = std::atan(t / std::sqrt(static_cast<double>(dof)));
  const double c2 = std::cos(theta) * std::cos(theta);
  double a;
  if (dof % 2 == 1) {
    double sum = 0;
    if (dof > 1) {
      double term = std::cos(theta);
      sum = term;
      for (int k = 3; k <= dof - 2; k += 2) {
        term *= c2 * (k - 1) / k;
        sum += term;
      }
    }
    a = 2.0 / std::numbers::pi * (theta + std::sin(theta) * sum);
  } else {
    double term = 1, sum = 1;
    for (int k = 2; k <= dof - 2; k += 2) {
      term *= c2 * (k - 1) / k;
      sum += term;
    }
    a = std::sin(theta) * sum;
  }
  return std::clamp((1.0 - a) / 2.0, 0.0, 1.0);
}

double SdExcessPValue(const std::vector<double>& candidate, const std::vector<double>& reference,
                      double limit) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const size_t n = candidate.size();
  if (n < 3 || reference.size() != n) return nan;
  std::vector<double> u(n), v(n);
  for (size_t i = 0; i < n; ++i) {
    u[i] = candidate[i] + limit * reference[i];
    v[i] = candidate[i] - limit * reference[i];
  }
  const double mu = Stats::Of(u).mean, mv = Stats::Of(v).mean;
  double suv = 0, suu = 0, svv = 0;
  for (size_t i = 0; i < n; ++i) {
    suv += (u[i] - mu) * (v[i] - mv);
    suu += (u[i] - mu) * (u[i] - mu);
    svv += (v[i] - mv) * (v[i] - mv);
  }
  if (!(suu > 0) || !(svv > 0)) return nan;
  const double r = std::clamp(suv / std::sqrt(suu * svv), -1.0, 1.0);
  if (r >= 1.0) return 0.0;
  if (r <= -1.0) return 1.0;
  const double t = r * std::sqrt(static_cast<double>(n - 2)) / std::sqrt(1.0 - r * r);
  return StudentTUpperTail(t, static_cast<int>(n - 2));
}

FamilySummary SummarizeFamily(const std::vector<FamilyMixResult>& results,
                              const std::string& candidate, const std::string& reference) {
  FamilySummary s;
  std::vector<double> log_ratio_100, log_ratio_130;
  std::vector<double> paired_c, paired_f;
  auto add_log_ratio = [](const Stats& c, const Stats& f, std::vector<double>& out) {
    if (c.stddev > 0 && f.stddev > 0) out.push_back(std::log(c.stddev / f.stddev));
  };
  s.candidate = candidate;
  s.reference = reference;
  for (const FamilyMixResult& r : results) {
    const FillSummary* c = Find(r, candidate);
    const FillSummary* f = Find(r, reference);
    if (!c || !f) continue;
    ++s.mixes;
    s.le_at_100 += c->unalloc_at_100.mean <= f->unalloc_at_100.mean;
    s.le_at_130 += c->unalloc_at_130.mean <= f->unalloc_at_130.mean;
    auto worse = [](const Stats& a, const Stats& b) {
      return a.mean - b.mean > std::hypot(a.stddev, b.stddev);
    };
    s.worse_beyond_noise +=
        worse(c->unalloc_at_100, f->unalloc_at_100) || worse(c->unalloc_at_130, f->unalloc_at_130);
    if (c->unalloc_at_100.mean > f->unalloc_at_100.mean) s.above_at_100.push_back(r.name);
    if (c->unalloc_at_130.mean <= f->unalloc_at_130.mean + kFamilyEndSlackPoints) {
      ++s.within_slack_at_130;
    } else {
      s.above_at_130.push_back(r.name);
    }
    auto ratio = [](const Stats& a, const Stats& b) {
      if (b.stddev > 0) return a.stddev / b.stddev;
      return a.stddev > 0 ? std::numeric_limits<double>::infinity() : 0.0;
    };
    add_log_ratio(c->unalloc_at_100, f->unalloc_at_100, log_ratio_100);
    add_log_ratio(c->unalloc_at_130, f->unalloc_at_130, log_ratio_130);
    const double sd_ratio = std::max(ratio(c->unalloc_at_100, f->unalloc_at_100),
                                     ratio(c->unalloc_at_130, f->unalloc_at_130));
    s.max_sd_ratio = std::max(s.max_sd_ratio, sd_ratio);
    if (sd_ratio <= kFamilySdRatioLimit) {
      ++s.sd_within_limit;
    } else {
      s.sd_above.push_back(r.name);
    }
    for (int point : {100, 130}) {
      const Stats& cs = point == 100 ? c->unalloc_at_100 : c->unalloc_at_130;
      const Stats& fs = point == 100 ? f->unalloc_at_100 : f->unalloc_at_130;
      PairBySeed(*c, *f, point == 100 ? &FillRun::unalloc_pct_at_100 : &FillRun::unalloc_pct_at_130,
                 paired_c, paired_f);
      const double p = SdExcessPValue(paired_c, paired_f, kFamilySdRatioLimit);
      if (std::isnan(p)) continue;
      const SdExcessTest test{r.name, point, ratio(cs, fs), p};
      ++s.sd_tests;
      s.sd_excess_significant += p < 0.05;
      if (!(s.sd_excess_min.p <= p)) s.sd_excess_min = test;
      if (test.ratio > kFamilySdRatioLimit) s.sd_excess_above.push_back(test);
    }
    auto rel = [](double a, double b) { return b > 0 ? (a - b) / b * 100.0 : 0.0; };
    s.mean_rel_diff_pct_at_100 += rel(c->unalloc_at_100.mean, f->unalloc_at_100.mean);
    s.mean_rel_diff_pct_at_130 += rel(c->unalloc_at_130.mean, f->unalloc_at_130.mean);
    s.mean_diff_at_100 += c->unalloc_at_100.mean - f->unalloc_at_100.mean;
    s.mean_diff_at_130 += c->unalloc_at_130.mean - f->unalloc_at_130.mean;
    if (!r.bounds.empty()) {
      const FillBoundStats b = SummarizeFillBounds(r.bounds);
      auto closed = [](const Stats& cand, const Stats& ref, const Stats& bound, int& mixes,
                       double& sum) {
        const double gap = ref.mean - bound.mean;
        if (gap < kFamilyGapFloorPoints) return;
        ++mixes;
        sum += (ref.mean - cand.mean) / gap * 100.0;
      };
      closed(c->unalloc_at_100, f->unalloc_at_100, b.at_100, s.gap_mixes_at_100,
             s.gap_closed_pct_at_100);
      closed(c->unalloc_at_130, f->unalloc_at_130, b.at_130, s.gap_mixes_at_130,
             s.gap_closed_pct_at_130);
    }
  }
  if (s.gap_mixes_at_100 > 0) s.gap_closed_pct_at_100 /= s.gap_mixes_at_100;
  if (s.gap_mixes_at_130 > 0) s.gap_closed_pct_at_130 /= s.gap_mixes_at_130;
  s.pooled_sd_ratio_at_100 = PoolSdRatios(log_ratio_100);
  s.pooled_sd_ratio_at_130 = PoolSdRatios(log_ratio_130);
  if (s.mixes > 0) {
    const double n = s.mixes;
    s.mean_rel_diff_pct_at_100 /= n;
    s.mean_rel_diff_pct_at_130 /= n;
    s.mean_diff_at_100 /= n;
    s.mean_diff_at_130 /= n;
  }
  return s;
}

ReplayFamilySummary SummarizeReplayFamily(const std::vector<FamilyMixResult>& results,
                                          const std::string& candidate,
                                          const std::string& reference) {
  ReplayFamilySummary s;
  s.candidate = candidate;
  s.reference = reference;
  for (const FamilyMixResult& r : results) {
    const ReplaySummary* c = FindReplay(r, candidate);
    const ReplaySummary* f = FindReplay(r, reference);
    if (!c || !f) continue;
    ++s.mixes;
    const double alloc =
        c->gpu_alloc_arrival_window_pct.mean - f->gpu_alloc_arrival_window_pct.mean;
    const double p95 = c->wait_p95_s.mean - f->wait_p95_s.mean;
    if (alloc >= 0) {
      ++s.alloc_ge;
    } else {
      s.alloc_below.push_back(r.name);
    }
    if (p95 <= 0) {
      ++s.p95_le;
    } else {
      s.p95_above.push_back(r.name);
    }
    s.never_placed_le += c->never_placed.mean <= f->never_placed.mean;
    s.p99_le += c->wait_p99_s.mean <= f->wait_p99_s.mean;
    s.mean_alloc_diff += alloc;
    s.mean_p95_diff_s += p95;
  }
  if (s.mixes > 0) {
    s.mean_alloc_diff /= s.mixes;
    s.mean_p95_diff_s /= s.mixes;
  }
  return s;
}

namespace {

std::string Names(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& n : v) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? std::string("none") : out;
}

std::string ReplayTable(const std::vector<FamilyMixResult>& results, const std::string& candidate,
                        const std::string& reference) {
  const std::vector<ReplaySummary>& first = results.front().replay;
  std::string head = "| mix |", rule = "|---|";
  for (const ReplaySummary& s : first) {
    head += " " + s.policy + " GPU % (arrivals) |";
    rule += "---:|";
  }
  for (const ReplaySummary& s : first) {
    head += " " + s.policy + " p95 wait s |";
    rule += "---:|";
  }
  for (const ReplaySummary& s : first) {
    head += " " + s.policy + " p99 wait s |";
    rule += "---:|";
  }
  for (const ReplaySummary& s : first) {
    head += " " + s.policy + " never placed |";
    rule += "---:|";
  }
  head += " knobs |";
  rule += "---|";
  std::string out = head + "\n" + rule + "\n";
  for (const FamilyMixResult& r : results) {
    std::string row = "| " + r.name + " |";
    for (const ReplaySummary& s : r.replay)
      row += Printf(" %.2f ± %.2f |", s.gpu_alloc_arrival_window_pct.mean,
                    s.gpu_alloc_arrival_window_pct.stddev);
    for (const ReplaySummary& s : r.replay)
      row += Printf(" %.0f ± %.0f |", s.wait_p95_s.mean, s.wait_p95_s.stddev);
    for (const ReplaySummary& s : r.replay)
      row += Printf(" %.0f ± %.0f |", s.wait_p99_s.mean, s.wait_p99_s.stddev);
    for (const ReplaySummary& s : r.replay) row += Printf(" %.1f |", s.never_placed.mean);
    row += " " + (r.flags.empty() ? std::string("(defaults)") : r.flags) + " |";
    out += row + "\n";
  }
  const ReplayFamilySummary s = SummarizeReplayFamily(results, candidate, reference);
  if (s.mixes > 0) {
    out += Printf(
        "\n%s's GPU allocation over the arrival window >= %s's on %d of %d mixes (below: %s), mean "
        "difference %+.2f points; p95 wait <= %s's on %d of %d (above: %s), mean difference "
        "%+.0f s; p99 wait <= on %d of %d; never placed <= on %d of %d.\n",
        candidate.c_str(), reference.c_str(), s.alloc_ge, s.mixes, Names(s.alloc_below).c_str(),
        s.mean_alloc_diff, reference.c_str(), s.p95_le, s.mixes, Names(s.p95_above).c_str(),
        s.mean_p95_diff_s, s.p99_le, s.mixes, s.never_placed_le, s.mixes);
  }
  return out;
}

}  // namespace

std::string FamilyTable(const std::vector<FamilyMixResult>& results, const std::string& candidate,
                        const std::string& reference) {
  if (results.empty()) return "no mix\n";
  if (!results.front().replay.empty()) return ReplayTable(results, candidate, reference);
  const std::vector<FillSummary>& first = results.front().results;
  std::string head = "| mix |", rule = "|---|";
  for (const FillSummary& s : first) {
    head += " " + s.policy + " @100 |";
    rule += "---:|";
  }
  for (const FillSummary& s : first) {
    head += " " + s.policy + " @" + Printf("%.0f", s.tune_ratio * 100) + " |";
    rule += "---:|";
  }
  const bool bounds = !results.front().bounds.empty();
  if (bounds) {
    head += " bound @100 | bound @end | share packing @100 |";
    rule += "---:|---:|---:|";
  }
  const bool diff = Find(results.front(), candidate) && Find(results.front(), reference);
  if (diff) {
    head += " " + candidate + "-" + reference + " @100 | @end |";
    rule += "---:|---:|";
  }
  head += " s/exp | knobs |";
  rule += "---:|---|";
  std::string out = head + "\n" + rule + "\n";
  for (const FamilyMixResult& r : results) {
    std::string row = "| " + r.name + " |";
    for (const FillSummary& s : r.results)
      row += Printf(" %.2f ± %.2f |", s.unalloc_at_100.mean, s.unalloc_at_100.stddev);
    for (const FillSummary& s : r.results)
      row += Printf(" %.2f ± %.2f |", s.unalloc_at_130.mean, s.unalloc_at_130.stddev);
    if (bounds) {
      if (r.bounds.empty()) {
        row += " | | |";
      } else {
        const FillBoundStats b = SummarizeFillBounds(r.bounds);
        row += Printf(" %.2f ± %.2f |", b.at_100.mean, b.at_100.stddev);
        row += Printf(" %.2f ± %.2f |", b.at_130.mean, b.at_130.stddev);
        row += b.share_packing_at_100 ? Printf(" %.2f |", b.share_packing_at_100->mean)
                                      : std::string(" - |");
      }
    }
    if (diff) {
      const FillSummary* c = Find(r, candidate);
      const FillSummary* f = Find(r, reference);
      auto cell = [](const Stats& a, const Stats& b) {
        const double d = a.mean - b.mean;
        const bool noisy = std::fabs(d) <= std::hypot(a.stddev, b.stddev);
        return Printf(" %s%+.2f%s |", d > 0 && !noisy ? "**" : "", d, d > 0 && !noisy ? "**" : "");
      };
      row += c && f ? cell(c->unalloc_at_100, f->unalloc_at_100) +
                          cell(c->unalloc_at_130, f->unalloc_at_130)
                    : " | |";
    }
    double per = 0;
    for (const FillSummary& s : r.results) per += PerExperiment(s);
    row += Printf(" %.2f |", r.results.empty() ? 0.0 : per / static_cast<double>(r.results.size()));
    row += " " + (r.flags.empty() ? std::string("(defaults)") : r.flags) + " |";
    out += row + "\n";
  }
  if (diff) {
    const FamilySummary s = SummarizeFamily(results, candidate, reference);
    out += Printf(
        "\n%s <= %s on %d of %d mixes at 100%% arrival and %d of %d at the end of the run; "
        "worse by more than the seed spread (hypot of the two sd) on %d. Mean %s - %s: %+.2f "
        "points (%+.1f%% relative) at 100%%, %+.2f points (%+.1f%%) at the end. Bold: worse "
        "beyond the seed spread.\n",
        candidate.c_str(), reference.c_str(), s.le_at_100, s.mixes, s.le_at_130, s.mixes,
        s.worse_beyond_noise, candidate.c_str(), reference.c_str(), s.mean_diff_at_100,
        s.mean_rel_diff_pct_at_100, s.mean_diff_at_130, s.mean_rel_diff_pct_at_130);
    out += Printf(
        "Bounds: mean <= %s's at 100%% on %d of %d (above: %s); mean <= %s's + %.1f at the "
        "end on %d of %d (above: %s); sd <= %.1fx %s's on %d of %d (above: %s; largest ratio "
        "%.2f). All bounds met: %s.\n",
        reference.c_str(), s.le_at_100, s.mixes, Names(s.above_at_100).c_str(), reference.c_str(),
        kFamilyEndSlackPoints, s.within_slack_at_130, s.mixes, Names(s.above_at_130).c_str(),
        kFamilySdRatioLimit, reference.c_str(), s.sd_within_limit, s.mixes,
        Names(s.sd_above).c_str(), s.max_sd_ratio, s.all_bounds_met() ? "yes" : "no");
    const PooledSdRatio& p100 = s.pooled_sd_ratio_at_100;
    const PooledSdRatio& p130 = s.pooled_sd_ratio_at_130;
    if (p100.mixes > 0 && p130.mixes > 0) {
      out += Printf(
          "Seed spread over all mixes (geometric mean of the sd ratios, 95%% bootstrap "
          "interval): %s's sd is %.2fx %s's at 100%% (%.2f-%.2f, %d mixes) and %.2fx at the end "
          "(%.2f-%.2f, %d mixes).\n",
          candidate.c_str(), p100.geomean, reference.c_str(), p100.ci_low, p100.ci_high, p100.mixes,
          p130.geomean, p130.ci_low, p130.ci_high, p130.mixes);
    }
    if (s.sd_tests > 0) {
      auto at = [](const SdExcessTest& t) {
        return t.mix + (t.point == 100 ? " at 100%" : " at the end");
      };
      std::string above;
      for (const SdExcessTest& t : s.sd_excess_above)
        above += (above.empty() ? "" : ", ") + at(t) + Printf(" (%.2fx) p %.2f", t.ratio, t.p);
      out += Printf(
          "Paired test of sd > %.1fx %s's (Pitman-Morgan over the seeds, one-sided, %d tests): "
          "p < 0.05 on %d (about %.1f if every ratio were exactly %.1fx); smallest p %.2f (%s); "
          "above the limit: %s.\n",
          kFamilySdRatioLimit, reference.c_str(), s.sd_tests, s.sd_excess_significant,
          0.05 * s.sd_tests, kFamilySdRatioLimit, s.sd_excess_min.p, at(s.sd_excess_min).c_str(),
          above.empty() ? "none" : above.c_str());
    }
    if (bounds) {
      out += Printf(
          "Against the fluid bound (mixes where %s is at least %.1f above it): %s closes "
          "%.1f%% of %s's gap at 100%% (%d mixes) and %.1f%% at the end (%d mixes).\n",
          reference.c_str(), kFamilyGapFloorPoints, candidate.c_str(), s.gap_closed_pct_at_100,
          reference.c_str(), s.gap_mixes_at_100, s.gap_closed_pct_at_130, s.gap_mixes_at_130);
    }
  }
  return out;
}

std::string FamilyJson(const std::vector<FamilyMixResult>& results, const FamilyOptions& o,
                       const std::string& candidate, const std::string& reference) {
  using nlohmann::json;
  json j;
  j["options"] = {{"policies", o.policies},     {"seeds", o.seeds},
                  {"tune_ratio", o.tune_ratio}, {"generated_nodes", o.generated_nodes},
                  {"gen_seed", o.gen_seed},     {"threads", o.threads}};
  j["options"]["bound"] = o.bound;
  j["options"]["past_gen_seed"] = o.past_gen_seed ? json(*o.past_gen_seed) : json(nullptr);
  json mixes = json::array();
  for (const FamilyMixResult& r : results) {
    json m = {
        {"name", r.name},   {"kind", r.kind}, {"description", r.description},  {"flags", r.flags},
        {"nodes", r.nodes}, {"gpus", r.gpus}, {"wall_seconds", r.wall_seconds}};
    m["past_pods"] = r.past_pods;
    if (r.config) {
      const GeneratorConfig& c = *r.config;
      json sizes = json::array(), counts = json::array();
      for (const WeightedInt& w : c.share_milli) sizes.push_back({w.value, w.weight});
      for (const WeightedInt& w : c.multi_gpu_count) counts.push_back({w.value, w.weight});
      m["knobs"] = {
          {"cpu_only_fraction", c.cpu_only_share},
          {"share_fraction", c.gpu_share_share},
          {"whole_fraction",
           std::max(0.0, 1.0 - c.cpu_only_share - c.gpu_share_share - c.multi_gpu_share)},
          {"multi_gpu_fraction", c.multi_gpu_share},
          {"pinned_fraction", c.pinned_share},
          {"mean_share_milli", WeightedMean(c.share_milli)},
          {"share_sizes", sizes},
          {"multi_gpu_counts", counts},
      };
    } else {
      m["knobs"] = nullptr;
    }
    const WorkloadMix& w = r.mix;
    const int64_t gpu_pods = w.share + w.whole + w.multi;
    m["mix"] = {{"pods", w.pods},
                {"gpu_demand", static_cast<double>(w.gpu_milli) / 1000.0},
                {"cpu_only_fraction", Frac(w.cpu_only, w.pods)},
                {"share_fraction", Frac(w.share, w.pods)},
                {"whole_fraction", Frac(w.whole, w.pods)},
                {"multi_gpu_fraction", Frac(w.multi, w.pods)},
                {"pinned_fraction_of_gpu_pods", Frac(w.pinned, gpu_pods)}};
    json policies = json::object();
    auto stat = [](const Stats& st) { return json{{"mean", st.mean}, {"sd", st.stddev}}; };
    for (const ReplaySummary& s : r.replay) {
      policies[s.policy] = {{"gpu_alloc_time_weighted_pct", stat(s.gpu_alloc_time_weighted_pct)},
                            {"gpu_alloc_arrival_window_pct", stat(s.gpu_alloc_arrival_window_pct)},
                            {"wait_p95_s", stat(s.wait_p95_s)},
                            {"wait_p50_s", stat(s.wait_p50_s)},
                            {"wait_p99_s", stat(s.wait_p99_s)},
                            {"mean_wait_s", stat(s.mean_wait_s)},
                            {"never_placed", stat(s.never_placed)},
                            {"peak_pending", stat(s.peak_pending)},
                            {"experiments", s.runs.size()},
                            {"seconds_per_experiment", s.wall_seconds.mean}};
    }
    for (const FillSummary& s : r.results) {
      json runs = json::array();
      for (const FillRun& run : s.runs)
        runs.push_back({{"seed", run.seed},
                        {"unalloc_pct_at_100", run.unalloc_pct_at_100},
                        {"unalloc_pct_at_130", run.unalloc_pct_at_130}});
      policies[s.policy] = {{"unalloc_pct_at_100",
                             {{"mean", s.unalloc_at_100.mean}, {"sd", s.unalloc_at_100.stddev}}},
                            {"unalloc_pct_at_130",
                             {{"mean", s.unalloc_at_130.mean}, {"sd", s.unalloc_at_130.stddev}}},
                            {"experiments", s.runs.size()},
                            {"seconds_per_experiment", PerExperiment(s)},
                            {"runs", runs}};
    }
    m["policies"] = policies;
    if (!r.bounds.empty()) {
      const FillBoundStats b = SummarizeFillBounds(r.bounds);
      m["bound"] = {
          {"unalloc_pct_at_100", stat(b.at_100)},
          {"unalloc_pct_at_130", stat(b.at_130)},
          {"share_packing_pct_at_100",
           b.share_packing_at_100 ? stat(*b.share_packing_at_100) : nlohmann::json(nullptr)}};
    }
    mixes.push_back(m);
  }
  j["mixes"] = mixes;
  j["options"]["mode"] = o.mode == FamilyMode::kReplay ? "replay" : "fill";
  if (o.mode == FamilyMode::kReplay) {
    j["options"]["time_scale"] = o.time_scale;
    j["options"]["trace_time_scale"] = o.trace_time_scale;
    const ReplayFamilySummary s = SummarizeReplayFamily(results, candidate, reference);
    j["summary"] = {{"candidate", s.candidate},
                    {"reference", s.reference},
                    {"mixes", s.mixes},
                    {"candidate_alloc_ge_reference", s.alloc_ge},
                    {"candidate_p95_le_reference", s.p95_le},
                    {"candidate_never_placed_le_reference", s.never_placed_le},
                    {"candidate_p99_le_reference", s.p99_le},
                    {"alloc_below", s.alloc_below},
                    {"p95_above", s.p95_above},
                    {"mean_alloc_difference_points", s.mean_alloc_diff},
                    {"mean_p95_difference_s", s.mean_p95_diff_s}};
    return j.dump(2) + "\n";
  }
  const FamilySummary s = SummarizeFamily(results, candidate, reference);
  auto finite = [](double x) { return std::isfinite(x) ? json(x) : json(); };
  auto pooled = [&](const PooledSdRatio& p) {
    return json{{"mixes", p.mixes},
                {"geomean", finite(p.geomean)},
                {"ci95", json::array({finite(p.ci_low), finite(p.ci_high)})}};
  };
  auto test_json = [&](const SdExcessTest& t) {
    return json{
        {"mix", t.mix}, {"point", t.point}, {"sd_ratio", finite(t.ratio)}, {"p", finite(t.p)}};
  };
  json above = json::array();
  for (const SdExcessTest& t : s.sd_excess_above) above.push_back(test_json(t));
  const json sd_test = {{"tests", s.sd_tests},
                        {"p_below_0_05", s.sd_excess_significant},
                        {"smallest_p", s.sd_tests > 0 ? test_json(s.sd_excess_min) : json()},
                        {"above_limit", above}};
  j["summary"] = {{"candidate", s.candidate},
                  {"reference", s.reference},
                  {"mixes", s.mixes},
                  {"candidate_le_reference_at_100", s.le_at_100},
                  {"candidate_le_reference_at_130", s.le_at_130},
                  {"candidate_worse_beyond_noise", s.worse_beyond_noise},
                  {"mean_relative_difference_pct_at_100", s.mean_rel_diff_pct_at_100},
                  {"mean_relative_difference_pct_at_130", s.mean_rel_diff_pct_at_130},
                  {"mean_difference_points_at_100", s.mean_diff_at_100},
                  {"mean_difference_points_at_130", s.mean_diff_at_130},
                  {"candidate_within_slack_at_130", s.within_slack_at_130},
                  {"slack_points_at_130", kFamilyEndSlackPoints},
                  {"candidate_sd_within_limit", s.sd_within_limit},
                  {"sd_ratio_limit", kFamilySdRatioLimit},
                  {"max_sd_ratio", std::isfinite(s.max_sd_ratio) ? json(s.max_sd_ratio) : json()},
                  {"pooled_sd_ratio_at_100", pooled(s.pooled_sd_ratio_at_100)},
                  {"pooled_sd_ratio_at_130", pooled(s.pooled_sd_ratio_at_130)},
                  {"above_at_100", s.above_at_100},
                  {"above_at_130_beyond_slack", s.above_at_130},
                  {"sd_above_limit", s.sd_above},
                  {"sd_excess_test", sd_test},
                  {"all_bounds_met", s.all_bounds_met()}};
  if (o.bound) {
    j["summary"]["gap_closed_pct_at_100"] = s.gap_closed_pct_at_100;
    j["summary"]["gap_closed_pct_at_130"] = s.gap_closed_pct_at_130;
    j["summary"]["gap_mixes_at_100"] = s.gap_mixes_at_100;
    j["summary"]["gap_mixes_at_130"] = s.gap_mixes_at_130;
  }
  return j.dump(2) + "\n";
}

}  // namespace tessera
