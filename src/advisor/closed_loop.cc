#include "advisor/closed_loop.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <tuple>

#include "cluster/gpu_catalog.h"
#include "cluster/mig_geometry.h"

namespace tessera::advisor {
namespace {

enum class Mode { kIdle, kWhole, kMig, kMps, kTimeSlice };

struct GpuState {
  std::string model;
  int64_t memory = 0;
  const MigGeometry* geo = nullptr;
  Mode mode = Mode::kIdle;
  MigLayout layout;
  int threads = 0;
  int64_t used_mib = 0;
  int clients = 0;
};

struct Held {
  std::vector<size_t> gpus;
  MigInstance instance;
  Slice slice;
};

class Pack {
 public:
  Pack(const std::vector<std::string>& models, const AdvisorConfig& cfg) : cfg_(&cfg) {
    const GpuCatalog& cat = GpuCatalog::Builtin();
    for (const std::string& m : models) {
      GpuState g;
      g.model = m;
      g.memory = cat.Get(*cat.Find(m)).memory_mib;
      g.geo = MigGeometryFor(m);
      gpus_.push_back(std::move(g));
    }
  }

  // Places `s`, trying GPU `prefer` first when given; nullopt when nothing has room.
  // reserve: idle GPUs of the slice's model that must stay idle after the placement.
  std::optional<Held> Place(const Slice& s, std::optional<size_t> prefer = std::nullopt,
                            int64_t reserve = 0) {
    int64_t idle = 0;
    for (const GpuState& g : gpus_) idle += g.model == s.model && g.mode == Mode::kIdle;
    // The preferred GPU, then GPUs already shared, then idle ones: a slice opens an idle GPU only
    // when no shared GPU has room, which keeps idle GPUs whole for whole-GPU requests.
    // Among shared GPUs the fullest comes first (best fit), which leaves the larger gaps for
    // the larger slices that follow.
    std::vector<size_t> order;
    if (prefer) order.push_back(*prefer);
    for (int pass = 0; pass < 2; ++pass) {
      const size_t from = order.size();
      for (size_t i = 0; i < gpus_.size(); ++i)
        if ((!prefer || i != *prefer) && (gpus_[i].mode == Mode::kIdle) == (pass == 1))
          order.push_back(i);
      if (pass == 0)
        std::stable_sort(order.begin() + static_cast<std::ptrdiff_t>(from), order.end(),
                         [&](size_t a, size_t b) { return Load(gpus_[a]) > Load(gpus_[b]); });
    }
    Held h;
    h.slice = s;
    if (s.type == SliceType::kWhole) {
      for (size_t i : order) {
        if (gpus_[i].model == s.model && gpus_[i].mode == Mode::kIdle) h.gpus.push_back(i);
        if (static_cast<int>(h.gpus.size()) == s.whole_gpus) break;
      }
      if (static_cast<int>(h.gpus.size()) < s.whole_gpus || idle - s.whole_gpus < reserve)
        return std::nullopt;
      for (size_t i : h.gpus) gpus_[i].mode = Mode::kWhole;
      return h;
    }
    for (size_t i : order) {
      GpuState& g = gpus_[i];
      if (g.model != s.model || (g.mode == Mode::kIdle && idle - 1 < reserve)) continue;
      switch (s.type) {
        case SliceType::kMig: {
          if (!g.geo || (g.mode != Mode::kIdle && g.mode != Mode::kMig)) break;
          const int p = g.geo->Find(s.mig_profile);
          if (p < 0) break;
          for (int start : g.geo->profiles[static_cast<size_t>(p)].starts) {
            const MigInstance inst{p, start};
            if (!CheckMigAdd(*g.geo, g.layout, inst).ok()) continue;
            g.layout.push_back(inst);
            std::sort(g.layout.begin(), g.layout.end(),
                      [](const MigInstance& a, const MigInstance& b) {
                        return std::tie(a.start, a.profile) < std::tie(b.start, b.profile);
                      });
            g.mode = Mode::kMig;
            h.gpus = {i};
            h.instance = inst;
            return h;
          }
          break;
        }
        case SliceType::kMps:
          if (g.mode != Mode::kIdle && g.mode != Mode::kMps) break;
          if (g.threads + s.thread_pct > 100 || g.used_mib + s.memory_mib > g.memory ||
              g.clients + 1 > cfg_->mps_max_clients)
            break;
          g.mode = Mode::kMps;
          g.threads += s.thread_pct;
          g.used_mib += s.memory_mib;
          ++g.clients;
          h.gpus = {i};
          return h;
        case SliceType::kTimeSlice:
          if (g.mode != Mode::kIdle && g.mode != Mode::kTimeSlice) break;
          if (g.used_mib + s.memory_mib > g.memory || g.clients + 1 > cfg_->timeslice_max_replicas)
            break;
          g.mode = Mode::kTimeSlice;
          g.used_mib += s.memory_mib;
          ++g.clients;
          h.gpus = {i};
          return h;
        default:
          break;
      }
    }
    return std::nullopt;
  }

  size_t size() const { return gpus_.size(); }
  const std::string& model(size_t i) const { return gpus_[i].model; }

  // The share of a shared GPU in use: MPS threads or declared memory, whichever is larger.
  static double Load(const GpuState& g) {
    return std::max(g.threads / 100.0, static_cast<double>(g.used_mib) / g.memory);
  }

  void Release(const Held& h) {
    for (size_t i : h.gpus) {
      GpuState& g = gpus_[i];
      switch (h.slice.type) {
        case SliceType::kWhole:
          g.mode = Mode::kIdle;
          break;
        case SliceType::kMig:
          g.layout.erase(std::find(g.layout.begin(), g.layout.end(), h.instance));
          if (g.layout.empty()) g.mode = Mode::kIdle;
          break;
        case SliceType::kMps:
          g.threads -= h.slice.thread_pct;
          g.used_mib -= h.slice.memory_mib;
          if (--g.clients == 0) g.mode = Mode::kIdle;
          break;
        case SliceType::kTimeSlice:
          g.used_mib -= h.slice.memory_mib;
          if (--g.clients == 0) g.mode = Mode::kIdle;
          break;
        default:
          break;
      }
    }
  }

 private:
  const AdvisorConfig* cfg_;
  std::vector<GpuState> gpus_;
};

double ComputeOf(const LoopWorkload& w, const AdvisorConfig& cfg) {
  if (w.advice.idle) return cfg.idle_sm_active;
  return std::min(1.0, w.advice.predicted_compute + cfg.compute_headroom);
}

double RelativeCompute(const std::string& model) {
  const GpuCatalog& cat = GpuCatalog::Builtin();
  return cat.Get(*cat.Find(model)).relative_compute;
}

// A slice of `mem_mib` on `model`, or the request when that is not smaller.
Slice Resized(const LoopWorkload& w, const std::string& model, double mem_mib,
              const AdvisorConfig& cfg) {
  const Slice req = RequestSlice(w.model, w.request);
  const bool bursty = w.advice.compute.p50 <= cfg.timeslice_max_median_compute;
  auto s =
      SliceOn(model, mem_mib, ComputeOf(w, cfg) * RelativeCompute(w.model) / RelativeCompute(model),
              bursty, cfg);
  if (!s || s->memory_mib > req.memory_mib ||
      (s->model == req.model && s->gpu_fraction >= req.gpu_fraction))
    return req;
  if (s->type == SliceType::kMps || s->type == SliceType::kTimeSlice)
    s->memory_mib = static_cast<int64_t>(std::ceil(mem_mib));
  return *s;
}

// The models of the set other than the workload's own that a single-GPU workload may run on:
// its compute, scaled by relative compute, within other_model_max_compute (as the recommender
// requires of another model). The least capable first: the fastest GPUs stay free for the work
// that needs them.
std::vector<std::string> OtherModels(const LoopWorkload& w, const std::set<std::string>& models,
                                     const AdvisorConfig& cfg) {
  std::vector<std::string> out;
  if (RequestSlice(w.model, w.request).whole_gpus > 1) return out;
  for (const std::string& m : models)
    if (m != w.model && ComputeOf(w, cfg) * RelativeCompute(w.model) / RelativeCompute(m) <=
                            cfg.other_model_max_compute)
      out.push_back(m);
  std::stable_sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return RelativeCompute(a) < RelativeCompute(b);
  });
  return out;
}

// The slices an admission tries, in order. A grant on another (cheaper) model is sized on the
// workload's own model first: a cheaper model is where new capacity should be bought, and taking
// it here crowds out that model's own workloads. Then the grant; then, for a resized single-GPU
// share when admit_on_other_models, the same memory limit on the set's other models.
std::vector<Slice> AdmissionSizes(const LoopWorkload& w, const std::set<std::string>& models,
                                  const AdvisorConfig& cfg) {
  const Slice grant = GrantFor(w, cfg);
  const Slice req = RequestSlice(w.model, w.request);
  const bool resized = grant.type != req.type || grant.model != req.model ||
                       grant.memory_mib != req.memory_mib || grant.mig_profile != req.mig_profile;
  // The memory limit the grant sets (a MIG instance may hold more than the need).
  const double limit =
      grant.type == SliceType::kMig || grant.model != w.model
          ? static_cast<double>(std::max(w.advice.memory_limit_mib, cfg.auto_floor_mib))
          : static_cast<double>(grant.memory_mib);
  std::vector<Slice> out;
  if (grant.model != w.model) out.push_back(Resized(w, w.model, limit, cfg));
  out.push_back(grant);
  if (!resized || grant.type == SliceType::kWhole || !cfg.admit_on_other_models) return out;
  for (const std::string& m : OtherModels(w, models, cfg)) {
    if (m == grant.model) continue;
    Slice s = Resized(w, m, limit, cfg);
    if (s.model == m) out.push_back(std::move(s));
  }
  return out;
}

// The slices a re-admission after a kill at `killed_at` MiB tries: memory from the owner's
// request halving down to oom_growth x killed_at, each on its own model (the request at full
// size) and then on the set's other models. Largest first: the kill says the need is unknown,
// and a larger grant anywhere bounds the retries better than a smaller one on its own model.
std::vector<Slice> ReadmissionSizes(const LoopWorkload& w, double killed_at,
                                    const std::set<std::string>& models, const AdvisorConfig& cfg) {
  const Slice req = RequestSlice(w.model, w.request);
  const double cap = static_cast<double>(req.memory_mib) / std::max(1, req.whole_gpus);
  const double floor_mib = std::min(cap, killed_at * cfg.oom_growth);
  std::vector<double> mems = {cap};
  for (double m = cap / 2; m > floor_mib; m /= 2) mems.push_back(m);
  if (floor_mib < cap) mems.push_back(floor_mib);
  const std::vector<std::string> others = OtherModels(w, models, cfg);
  std::vector<Slice> out;
  for (double m : mems) {
    out.push_back(m == cap ? req : Resized(w, w.model, m, cfg));
    for (const std::string& o : others) {
      Slice s = Resized(w, o, m, cfg);
      if (s.model == o) out.push_back(std::move(s));
    }
  }
  return out;
}

// The first of `sizes` with room (slices on the workload's model try GPU `prefer` first).
std::optional<Held> PlaceFirst(Pack& pack, const std::vector<Slice>& sizes,
                               const std::string& own_model, std::optional<size_t> prefer,
                               int64_t reserve) {
  for (const Slice& s : sizes)
    if (auto h = pack.Place(s, s.model == own_model ? prefer : std::nullopt, reserve)) return h;
  return std::nullopt;
}

struct Displacement {
  Pack pack;
  Held placed;
  std::vector<size_t> displaced;
  std::vector<std::optional<Held>> again;  // per displaced: its new placement, or none (waits)
  int waiting = 0;
  size_t size_index = 0;
  double share = 0;
};

// Room for one of `sizes` (largest first) for workload `i` by displacing workloads admitted
// after it from one GPU: per size and GPU of its model, the later-admitted workloads holding the
// GPU, the smallest share first (the latest on ties), are released one by one until the size
// fits; the displaced are then admitted again (their `admission` sizes) where they find room.
// The choice leaves the fewest displaced waiting, then gives the largest size, then displaces the
// fewest and the smallest share. nullopt when no GPU gives room.
std::optional<Displacement> Displace(const Pack& pack, const std::vector<std::optional<Held>>& held,
                                     size_t i, const std::vector<Slice>& sizes,
                                     const std::string& own_model, std::optional<size_t> own,
                                     const std::vector<std::vector<Slice>>& admission,
                                     const std::vector<LoopWorkload>& workloads) {
  auto better = [](const Displacement& a, const Displacement& b) {
    return std::make_tuple(a.waiting, a.size_index, a.displaced.size(), a.share) <
           std::make_tuple(b.waiting, b.size_index, b.displaced.size(), b.share);
  };
  std::optional<Displacement> best;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const Slice& size = sizes[k];
    for (size_t g = 0; g < pack.size(); ++g) {
      if (pack.model(g) != size.model) continue;
      std::vector<size_t> on;
      for (size_t j = i + 1; j < held.size(); ++j)
        if (held[j] &&
            std::find(held[j]->gpus.begin(), held[j]->gpus.end(), g) != held[j]->gpus.end())
          on.push_back(j);
      std::stable_sort(on.begin(), on.end(), [&](size_t a, size_t b) {
        if (held[a]->slice.gpu_fraction != held[b]->slice.gpu_fraction)
          return held[a]->slice.gpu_fraction < held[b]->slice.gpu_fraction;
        return a > b;
      });
      Displacement d{pack, {}, {}, {}, 0, k, 0};
      std::optional<Held> placed;
      for (size_t j : on) {
        d.pack.Release(*held[j]);
        d.displaced.push_back(j);
        d.share += held[j]->slice.gpu_fraction;
        placed = d.pack.Place(size, size.model == own_model && own ? own : std::optional(g));
        if (placed) break;
      }
      if (!placed) continue;
      d.placed = *placed;
      std::vector<size_t> order = d.displaced;
      std::sort(order.begin(), order.end());
      d.again.assign(d.displaced.size(), std::nullopt);
      for (size_t j : order) {
        const size_t at = static_cast<size_t>(std::find(d.displaced.begin(), d.displaced.end(), j) -
                                              d.displaced.begin());
        d.again[at] = PlaceFirst(d.pack, admission[j], workloads[j].model, std::nullopt, 0);
        d.waiting += !d.again[at].has_value();
      }
      if (!best || better(d, *best)) best = std::move(d);
    }
  }
  return best;
}

}  // namespace

Slice GrantFor(const LoopWorkload& w, const AdvisorConfig& cfg) {
  const Slice req = RequestSlice(w.model, w.request);
  if (!w.auto_rightsize || w.advice.state != AdviceState::kOk || w.advice.keep) return req;
  const Slice& rec = w.advice.recommended;
  if (rec.type == SliceType::kRelease) {
    // Idle but running: the memory it holds, with headroom, and next to no compute.
    const double held = std::max(w.advice.predicted_memory_mib * (1.0 + cfg.memory_headroom),
                                 w.advice.predicted_memory_mib + cfg.memory_headroom_min_mib);
    return Resized(w, w.model, std::max(held, static_cast<double>(cfg.auto_floor_mib)), cfg);
  }
  if (rec.type == SliceType::kWhole || rec.memory_mib >= cfg.auto_floor_mib) return rec;
  return Resized(w, rec.model, static_cast<double>(cfg.auto_floor_mib), cfg);
}

Result<LoopResult> SimulateClosedLoop(const std::vector<std::string>& gpus,
                                      const std::vector<LoopWorkload>& workloads,
                                      const AdvisorConfig& cfg) {
  TESSERA_RETURN_IF_ERROR(ValidateConfig(cfg));
  const GpuCatalog& cat = GpuCatalog::Builtin();
  for (const std::string& m : gpus) {
    auto id = cat.Find(m);
    if (!id || cat.Get(*id).memory_mib <= 0)
      return InvalidArgument("closed loop: unknown GPU model '" + m + "'");
  }
  for (const LoopWorkload& w : workloads) {
    auto id = cat.Find(w.model);
    if (!id || cat.Get(*id).memory_mib <= 0)
      return InvalidArgument("closed loop: workload " + w.key + " has unknown GPU model '" +
                             w.model + "'");
  }
  const std::set<std::string> models(gpus.begin(), gpus.end());
  LoopResult r;
  r.gpus = static_cast<int>(gpus.size());
  r.workloads = static_cast<int>(workloads.size());
  {
    Pack original(gpus, cfg);
    for (const LoopWorkload& w : workloads)
      if (original.Place(RequestSlice(w.model, w.request))) ++r.fit_original;
  }
  Pack pack(gpus, cfg);
  std::vector<std::optional<Held>> held(workloads.size());
  std::vector<std::vector<Slice>> admission(workloads.size());
  for (size_t i = 0; i < workloads.size(); ++i) {
    admission[i] = AdmissionSizes(workloads[i], models, cfg);
    held[i] =
        PlaceFirst(pack, admission[i], workloads[i].model, std::nullopt, cfg.oom_reserve_gpus);
    if (held[i]) ++r.fit_auto;
  }
  r.auto_fit_ratio = r.fit_original > 0 ? static_cast<double>(r.fit_auto) / r.fit_original : 0;
  for (size_t i = 0; i < workloads.size(); ++i) {
    const LoopWorkload& w = workloads[i];
    if (!held[i]) continue;
    const Slice& grant = held[i]->slice;
    const double granted = static_cast<double>(grant.memory_mib) / std::max(1, grant.whole_gpus);
    if (w.true_peak_mib <= granted) continue;
    OomEvent ev;
    ev.key = w.key;
    ev.granted_mib = static_cast<int64_t>(granted);
    ev.true_peak_mib = static_cast<int64_t>(std::ceil(w.true_peak_mib));
    const std::optional<size_t> own =
        held[i]->gpus.empty() ? std::nullopt : std::optional<size_t>(held[i]->gpus[0]);
    double killed_at = granted;
    while (true) {
      ++ev.retries;
      ev.backoff_periods += cfg.oom_backoff_periods << std::min(ev.retries - 1, 16);
      pack.Release(*held[i]);
      held[i].reset();
      const std::vector<Slice> sizes = ReadmissionSizes(w, killed_at, models, cfg);
      held[i] = PlaceFirst(pack, sizes, w.model, own, 0);
      if (!held[i] && cfg.oom_preempt) {
        // No room: the workload keeps its place in the admission order and displaces workloads
        // admitted after it (Displace).
        if (auto d = Displace(pack, held, i, sizes, w.model, own, admission, workloads)) {
          pack = std::move(d->pack);
          held[i] = d->placed;
          for (size_t k = 0; k < d->displaced.size(); ++k) {
            const size_t j = d->displaced[k];
            held[j] = d->again[k];
            ev.displaced.push_back(workloads[j].key);
            ev.displaced_readmitted += held[j].has_value();
          }
          r.displaced_waiting += d->waiting;
        }
      }
      if (!held[i]) break;  // no room even for the grown grant: it waits
      const Slice& now = held[i]->slice;
      ev.regranted_mib = now.memory_mib / std::max(1, now.whole_gpus);
      if (w.true_peak_mib <= static_cast<double>(ev.regranted_mib) || ev.retries >= 16) break;
      killed_at = static_cast<double>(ev.regranted_mib);
    }
    ev.recovered = held[i].has_value() && w.true_peak_mib <= static_cast<double>(ev.regranted_mib);
    if (!ev.recovered) ++r.unrecovered;
    r.max_retries_per_oom = std::max(r.max_retries_per_oom, ev.retries);
    r.oom.push_back(ev);
  }
  for (size_t i = 0; i < workloads.size(); ++i) {
    if (!held[i]) continue;
    const Slice& s = held[i]->slice;
    if (workloads[i].true_peak_mib <= static_cast<double>(s.memory_mib) / std::max(1, s.whole_gpus))
      ++r.fit_auto_running;
  }
  r.running_fit_ratio =
      r.fit_original > 0 ? static_cast<double>(r.fit_auto_running) / r.fit_original : 0;
  return r;
}

}  // namespace tessera::advisor
