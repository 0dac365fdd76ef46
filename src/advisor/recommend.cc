#include "advisor/recommend.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "advisor/numbers.h"
#include "cluster/gpu_catalog.h"
#include "cluster/mig_geometry.h"
#include "core/text.h"

namespace tessera::advisor {

const char* SliceTypeName(SliceType t) {
  switch (t) {
    case SliceType::kRelease:
      return "release";
    case SliceType::kMig:
      return "mig";
    case SliceType::kMps:
      return "mps";
    case SliceType::kTimeSlice:
      return "timeslice";
    case SliceType::kWhole:
      return "whole";
  }
  return "?";
}

const char* AdviceStateName(AdviceState s) {
  switch (s) {
    case AdviceState::kOk:
      return "ok";
    case AdviceState::kTooShort:
      return "history-too-short";
    case AdviceState::kUnattributed:
      return "attribution-impossible";
  }
  return "?";
}

std::string Slice::Describe() const {
  switch (type) {
    case SliceType::kRelease:
      return "release";
    case SliceType::kMig:
      return model + " mig " + mig_profile;
    case SliceType::kMps:
      return model + " mps " + std::to_string(memory_mib) + "MiB " + std::to_string(thread_pct) +
             "%";
    case SliceType::kTimeSlice:
      return model + " timeslice " + std::to_string(memory_mib) + "MiB";
    case SliceType::kWhole:
      return model + " x" + std::to_string(whole_gpus);
  }
  return "?";
}

namespace {

int64_t ModelMemory(const std::string& model) {
  const GpuCatalog& cat = GpuCatalog::Builtin();
  auto id = cat.Find(model);
  return id ? cat.Get(*id).memory_mib : 0;
}

double RelativeCompute(const std::string& model) {
  const GpuCatalog& cat = GpuCatalog::Builtin();
  auto id = cat.Find(model);
  return id ? cat.Get(*id).relative_compute : 1.0;
}

Slice Whole(const std::string& model, int n) {
  Slice s;
  s.type = SliceType::kWhole;
  s.model = model;
  s.whole_gpus = n;
  s.memory_mib = ModelMemory(model) * n;
  s.gpu_fraction = n;
  return s;
}

Slice MigSlice(const std::string& model, const MigGeometry& geo, int idx) {
  const MigProfile& p = geo.profiles[static_cast<size_t>(idx)];
  if (p.compute_slices == geo.compute_slices) return Whole(model, 1);
  Slice s;
  s.type = SliceType::kMig;
  s.model = model;
  s.mig_profile = p.name;
  s.memory_mib = p.memory_mib;
  s.gpu_fraction = std::max(static_cast<double>(p.compute_slices) / geo.compute_slices,
                            static_cast<double>(p.memory_slices) / geo.memory_slices);
  return s;
}

struct Envelope {
  double prediction = 0;
  double slope = 0;
};

// Upper envelope of per-bucket values projected one bucket past the last along a non-negative,
// clamped Theil-Sen trend.
Envelope Project(const std::vector<double>& x, const std::vector<double>& y, double next_x,
                 const AdvisorConfig& cfg) {
  Envelope e;
  if (y.empty()) return e;
  double slope = 0;
  if (static_cast<int64_t>(y.size()) >= cfg.min_trend_periods) {
    std::vector<double> ys = y;
    const double median = Percentile(ys, 0.5);
    double agreement = 0;
    slope = TheilSenSlope(x, y, &agreement);
    slope = agreement >= cfg.trend_min_agreement
                ? std::clamp(slope, 0.0, cfg.max_trend_per_period * median)
                : 0.0;
  }
  double best = 0;
  for (size_t i = 0; i < y.size(); ++i) best = std::max(best, y[i] + slope * (next_x - x[i]));
  e.prediction = best;
  e.slope = slope;
  return e;
}

// Per sample of `samples` (time-ordered): the median memory of the samples within +- half_s.
std::vector<double> Baseline(const std::vector<UsageSample>& samples, int64_t half_s) {
  std::vector<double> out(samples.size());
  size_t lo = 0, hi = 0;
  std::vector<double> win;
  for (size_t i = 0; i < samples.size(); ++i) {
    while (samples[lo].t_s < samples[i].t_s - half_s) ++lo;
    while (hi < samples.size() && samples[hi].t_s <= samples[i].t_s + half_s) ++hi;
    win.clear();
    for (size_t j = lo; j < hi; ++j) win.push_back(samples[j].memory_mib);
    std::nth_element(win.begin(), win.begin() + static_cast<std::ptrdiff_t>(win.size() / 2),
                     win.end());
    out[i] = win[win.size() / 2];
  }
  return out;
}

// Good-Turing estimate of an unseen level: the share of values within `tol` (relative) of no
// other value.
double NewLevelProbability(const std::vector<double>& v, double tol) {
  if (v.size() < 2) return 1.0;
  int singles = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    bool matched = false;
    for (size_t j = 0; j < v.size() && !matched; ++j)
      matched = j != i && std::abs(v[i] - v[j]) <= tol * std::max(v[i], v[j]);
    singles += !matched;
  }
  return static_cast<double>(singles) / static_cast<double>(v.size());
}

UsageStats Stats(std::vector<double> v) {
  UsageStats s;
  if (v.empty()) return s;
  s.p50 = Percentile(v, 0.5);
  s.p95 = Percentile(v, 0.95);
  s.p99 = Percentile(v, 0.99);
  s.peak = v.back();
  return s;
}

std::string Gib(double mib) {
  return FormatDecimal(mib / 1024.0, 1) + " GiB";
}

std::string Pct(double f) {
  return FormatDecimal(f * 100.0, 0) + "%";
}

}  // namespace

std::vector<Slice> SliceCandidates(const std::string& model, double memory_mib, double compute,
                                   bool bursty, const AdvisorConfig& cfg) {
  std::vector<Slice> out;
  const int64_t mem = ModelMemory(model);
  if (mem <= 0 || memory_mib > static_cast<double>(mem) || compute > 1.0) return out;
  if (const MigGeometry* geo = MigGeometryFor(model)) {
    const int slices =
        std::max(1, static_cast<int>(std::ceil(compute * geo->compute_slices - 1e-9)));
    const int idx = geo->SmallestCovering(static_cast<int64_t>(std::ceil(memory_mib)), slices);
    if (idx >= 0) {
      Slice m = MigSlice(model, *geo, idx);
      if (m.type == SliceType::kMig) out.push_back(std::move(m));
    }
  }
  const double mem_frac = memory_mib / static_cast<double>(mem);
  if (mem_frac < cfg.whole_gpu_fraction && compute < cfg.whole_gpu_fraction) {
    Slice s;
    s.model = model;
    s.memory_mib = static_cast<int64_t>(std::ceil(memory_mib));
    if (bursty) {
      s.type = SliceType::kTimeSlice;
      s.gpu_fraction = std::max(mem_frac, compute);
    } else {
      s.type = SliceType::kMps;
      s.thread_pct = std::clamp(static_cast<int>(std::ceil(compute * 100.0 - 1e-9)), 1, 100);
      s.gpu_fraction = std::max(mem_frac, s.thread_pct / 100.0);
    }
    // Without MIG preference the cheaper of the two comes first (MIG on ties).
    if (!cfg.prefer_mig && !out.empty() && s.gpu_fraction < out.front().gpu_fraction - 1e-9)
      out.insert(out.begin(), std::move(s));
    else
      out.push_back(std::move(s));
  }
  out.push_back(Whole(model, 1));
  return out;
}

std::optional<Slice> SliceOn(const std::string& model, double memory_mib, double compute,
                             bool bursty, const AdvisorConfig& cfg) {
  auto c = SliceCandidates(model, memory_mib, compute, bursty, cfg);
  if (c.empty()) return std::nullopt;
  return c.front();
}

Slice RequestSlice(const std::string& model, const GpuRequest& r) {
  if (r.whole_gpus > 0) return Whole(model, r.whole_gpus);
  if (!r.mig_profile.empty()) {
    const MigGeometry* geo = MigGeometryFor(model);
    if (geo && geo->Find(r.mig_profile) >= 0)
      return MigSlice(model, *geo, geo->Find(r.mig_profile));
  }
  const int64_t mem = ModelMemory(model);
  Slice s;
  s.type = SliceType::kMps;
  s.model = model;
  s.memory_mib = r.memory_mib;
  const double mem_frac = mem > 0 ? static_cast<double>(r.memory_mib) / mem : 1.0;
  const double compute = r.compute > 0 ? r.compute : mem_frac;
  s.thread_pct = std::clamp(static_cast<int>(std::ceil(compute * 100.0 - 1e-9)), 1, 100);
  s.gpu_fraction = std::max(mem_frac, s.thread_pct / 100.0);
  return s;
}

namespace {

Recommendation AdviseOne(const WorkloadUsage& w, int64_t lo, int64_t hi,
                         const std::set<std::string>& models, const AdvisorConfig& cfg,
                         const PriceTable& prices) {
  Recommendation r;
  r.key = w.Key();
  r.ns = w.ns;
  r.owner_kind = w.owner_kind;
  r.owner = w.owner;
  r.model = w.gpu_model;
  r.request = w.request;
  r.requested = RequestSlice(w.gpu_model, w.request);
  r.recommended = r.requested;
  r.keep = true;
  r.memory_limit_mib = r.requested.memory_mib / std::max(1, r.requested.whole_gpus);
  std::set<std::string> pods;
  std::vector<double> mem, comp;
  int64_t first = INT64_MAX, last = INT64_MIN;
  // Buckets: index 0 is the last full period before hi.
  std::map<int64_t, std::pair<double, std::vector<double>>> buckets;
  std::map<int64_t, double> base_peak;                     // bucket -> largest baseline
  double spike = 0;                                        // largest excursion above the baseline
  std::map<std::string, std::set<std::string>> busy_gpus;  // pod -> GPUs with non-idle use
  for (const PodSeries& p : w.pods) {
    const std::vector<double> base = Baseline(p.samples, cfg.spike_window_s / 2);
    for (size_t k = 0; k < p.samples.size(); ++k) {
      const UsageSample& s = p.samples[k];
      if (s.t_s <= lo || s.t_s > hi) continue;
      double& bp = base_peak[(hi - s.t_s) / cfg.period_s];
      bp = std::max(bp, base[k]);
      spike = std::max(spike, s.memory_mib - base[k]);
      pods.insert(p.pod);
      mem.push_back(s.memory_mib);
      comp.push_back(s.sm_active);
      first = std::min(first, s.t_s);
      last = std::max(last, s.t_s);
      const int64_t b = (hi - s.t_s) / cfg.period_s;
      auto& bucket = buckets[b];
      bucket.first = std::max(bucket.first, s.memory_mib);
      bucket.second.push_back(s.sm_active);
      if (s.sm_active > cfg.idle_sm_active) busy_gpus[p.pod].insert(p.gpu);
    }
  }
  r.pods = static_cast<int>(pods.size());
  r.samples = static_cast<int64_t>(mem.size());
  r.covered_s = mem.empty() ? 0 : last - first;
  r.memory_mib = Stats(mem);
  r.compute = Stats(comp);
  for (const auto& [pod, gpus] : busy_gpus)
    r.gpus_used = std::max(r.gpus_used, static_cast<int>(gpus.size()));
  auto price = [&](const Slice& s) {
    if (s.type == SliceType::kRelease) return 0.0;
    auto p = prices.Price(s.model);
    return p.ok() ? *p * s.gpu_fraction : 0.0;
  };
  r.cost_requested_per_hour = price(r.requested);
  r.cost_recommended_per_hour = r.cost_requested_per_hour;
  if (w.AttributionImpossible()) {
    r.state = AdviceState::kUnattributed;
    const bool memory_known = std::all_of(w.pods.begin(), w.pods.end(), [](const PodSeries& p) {
      return !p.shared_device || p.memory_per_pod;
    });
    r.reason = memory_known
                   ? "several pods share a GPU: the node agent gives each pod's memory but "
                     "compute only per GPU: keep the request"
                   : "several pods share a time-sliced GPU without per-pod series: keep the "
                     "request";
    return r;
  }
  if (r.covered_s < cfg.min_history_s || r.samples < cfg.min_samples) {
    r.state = AdviceState::kTooShort;
    r.reason = "history too short: " + FormatDecimal(r.covered_s / 3600.0, 1) + " h over " +
               std::to_string(r.samples) + " samples, need " +
               FormatDecimal(cfg.min_history_s / 3600.0, 1) + " h and " +
               std::to_string(cfg.min_samples) + " samples: keep the request";
    return r;
  }
  std::vector<double> bx, bmem, bcomp;
  for (auto it = buckets.rbegin(); it != buckets.rend(); ++it) {
    bx.push_back(-static_cast<double>(it->first));
    bmem.push_back(it->second.first);
    bcomp.push_back(Percentile(it->second.second, cfg.compute_quantile));
  }
  std::vector<double> bbase;
  for (auto it = base_peak.rbegin(); it != base_peak.rend(); ++it) bbase.push_back(it->second);
  // Two readings of the periods: their peaks, and their spike-free baselines. Each is projected
  // along its own trend (growth may show in the level or only in the peaks); the prediction
  // covers both, the baseline one with the largest spike of the window landing on it.
  const Envelope be = Project(bx, bbase, 1.0, cfg);
  Envelope me = Project(bx, bmem, 1.0, cfg);
  me.prediction = std::max(me.prediction, be.prediction + spike);
  me.slope = std::max(me.slope, be.slope);
  const Envelope ce = Project(bx, bcomp, 1.0, cfg);
  r.predicted_memory_mib = me.prediction;
  r.memory_trend_per_period = me.slope;
  r.predicted_compute = std::min(1.0, ce.prediction);
  if (r.compute.p99 <= cfg.idle_sm_active) {
    r.idle = true;
    r.keep = false;
    r.recommended = Slice{};
    r.recommended.type = SliceType::kRelease;
    r.recommended.model = w.gpu_model;
    r.cost_recommended_per_hour = 0;
    r.memory_limit_mib = 0;
    r.reason = "idle: p99 SM activity " + Pct(r.compute.p99) + " over " +
               FormatDecimal(r.covered_s / 3600.0, 0) + " h while holding " +
               Gib(r.memory_mib.peak) + ": release";
    return r;
  }
  const double p_new = NewLevelProbability(bbase, cfg.level_tolerance);
  if (p_new > cfg.max_new_level_probability) {
    r.reason = "peak " + Gib(r.memory_mib.peak) + ": the period peaks switch between levels (" +
               Pct(p_new) + " of periods at a level seen once), the next one is not bounded by " +
               "the history: keep the request";
    return r;
  }
  // Spread of the spike-free period peaks about their trend (spikes are covered above).
  std::vector<double> peaks;
  for (size_t i = 0; i < bbase.size(); ++i) peaks.push_back(bbase[i] - be.slope * bx[i]);
  const double spread = Percentile(peaks, 1.0) - Percentile(peaks, 0.5);
  const double mem_need = std::max(r.predicted_memory_mib * (1.0 + cfg.memory_headroom),
                                   r.predicted_memory_mib + cfg.memory_headroom_min_mib) +
                          cfg.memory_spread_weight * spread;
  const double comp_need = std::min(1.0, r.predicted_compute + cfg.compute_headroom);
  const bool bursty = r.compute.p50 <= cfg.timeslice_max_median_compute;
  const double req_mem_cap =
      static_cast<double>(r.requested.memory_mib) / std::max(1, r.requested.whole_gpus);
  const double req_comp_cap =
      w.request.whole_gpus > 0 ? 1.0 : (w.request.compute > 0 ? w.request.compute : 1.0);
  const std::string what = "peak " + Gib(r.memory_mib.peak) + ", predicted " +
                           Gib(r.predicted_memory_mib) + " and " + Pct(r.predicted_compute) +
                           " of a " + w.gpu_model;
  if (mem_need > req_mem_cap || (w.request.compute > 0 && comp_need > req_comp_cap + 1e-9)) {
    r.reason = what + ": the need reaches the request, keep it";
    return r;
  }
  std::optional<Slice> best;
  double best_cost = 0;
  if (w.request.whole_gpus > 1 || r.gpus_used > 1) {
    best = Whole(w.gpu_model, std::min(w.request.whole_gpus, r.gpus_used));
    best_cost = price(*best);
  } else {
    const double rel = RelativeCompute(w.gpu_model);
    for (const std::string& m : models) {
      const bool same = m == w.gpu_model;
      if (!same && !cfg.allow_other_models) continue;
      if (!prices.Price(m).ok()) continue;
      const double c = comp_need * rel / RelativeCompute(m);
      if (!same && c > cfg.other_model_max_compute) continue;
      std::optional<Slice> s;
      for (Slice& cand : SliceCandidates(m, mem_need, c, bursty, cfg)) {
        if (cand.memory_mib > r.requested.memory_mib) continue;
        if (same && cand.gpu_fraction >= r.requested.gpu_fraction - 1e-9) continue;
        s = std::move(cand);
        break;
      }
      if (!s) continue;
      const double cost = price(*s);
      // Ties keep the workload on its own model.
      if (!best || cost < best_cost - 1e-9 || (same && cost <= best_cost + 1e-9)) {
        best = s;
        best_cost = cost;
      }
    }
  }
  if (!best || best_cost >= r.cost_requested_per_hour - 1e-9 ||
      best->memory_mib > r.requested.memory_mib) {
    r.reason = what + ": no cheaper slice covers it, keep the request";
    return r;
  }
  r.keep = false;
  r.recommended = *best;
  if (best->type != SliceType::kWhole) {
    // The limit the workload runs under: the prediction with headroom (MIG instances and whole
    // GPUs give their memory).
    if (best->type != SliceType::kMig)
      r.recommended.memory_mib = static_cast<int64_t>(std::ceil(mem_need));
  }
  r.cost_recommended_per_hour = best_cost;
  r.memory_limit_mib = best->type == SliceType::kWhole
                           ? r.recommended.memory_mib / std::max(1, best->whole_gpus)
                           : static_cast<int64_t>(std::ceil(mem_need));
  r.reason = what + " -> " + r.recommended.Describe() + " (+" + Pct(cfg.memory_headroom) +
             " memory headroom" + (best->model != w.gpu_model ? ", cheaper model" : "") + ")";
  return r;
}

// Most pods of the workload sampled at one timestamp in the window.
int Replicas(const WorkloadUsage& w, int64_t lo, int64_t hi) {
  std::map<int64_t, std::set<std::string>> at;
  for (const PodSeries& p : w.pods)
    for (const UsageSample& s : p.samples)
      if (s.t_s > lo && s.t_s <= hi) at[s.t_s].insert(p.pod);
  size_t n = 0;
  for (const auto& [t, pods] : at) n = std::max(n, pods.size());
  return static_cast<int>(n);
}

}  // namespace

Result<AdvisorReport> Advise(const UsageHistory& h, const AdvisorConfig& cfg,
                             const PriceTable& prices) {
  TESSERA_RETURN_IF_ERROR(ValidateConfig(cfg));
  AdvisorReport rep;
  std::set<std::string> models;
  int64_t end = INT64_MIN, start = INT64_MAX;
  for (const WorkloadUsage& w : h.workloads) {
    auto p = prices.Price(w.gpu_model);
    if (!p.ok()) return p.status();
    models.insert(w.gpu_model);
    if (w.SampleCount() == 0) continue;
    end = std::max(end, w.LastT());
    start = std::min(start, w.FirstT());
  }
  if (end == INT64_MIN) return InvalidArgument("history has no samples");
  const int64_t lo = cfg.window_s > 0 ? end - cfg.window_s : start - 1;
  rep.window_start = std::max(lo + 1, start);
  rep.window_end = end;
  for (const WorkloadUsage& w : h.workloads) {
    Recommendation r = AdviseOne(w, lo, end, models, cfg, prices);
    if (r.samples == 0) continue;
    const int replicas = std::max(1, Replicas(w, lo, end));
    rep.gpus_requested += r.requested.gpu_fraction * replicas;
    rep.gpus_recommended +=
        (r.recommended.type == SliceType::kRelease ? 0 : r.recommended.gpu_fraction) * replicas;
    rep.cost_requested_per_hour += r.cost_requested_per_hour * replicas;
    rep.cost_recommended_per_hour += r.cost_recommended_per_hour * replicas;
    rep.idle += r.idle;
    rep.too_short += r.state == AdviceState::kTooShort;
    rep.unattributed += r.state == AdviceState::kUnattributed;
    rep.resized += !r.keep;
    rep.items.push_back(std::move(r));
  }
  rep.gpus_freed = rep.gpus_requested - rep.gpus_recommended;
  rep.savings_per_hour = rep.cost_requested_per_hour - rep.cost_recommended_per_hour;
  return rep;
}

}  // namespace tessera::advisor
