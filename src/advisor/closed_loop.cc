#include "advisor/closed_loop.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

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
  Pack(const std::vector<std::string>& models, const AdvisorConfig& cfg) : cfg_(cfg) {
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
              g.clients + 1 > cfg_.mps_max_clients)
            break;
          g.mode = Mode::kMps;
          g.threads += s.thread_pct;
          g.used_mib += s.memory_mib;
          ++g.clients;
          h.gpus = {i};
          return h;
        case SliceType::kTimeSlice:
          if (g.mode != Mode::kIdle && g.mode != Mode::kTimeSlice) break;
          if (g.used_mib + s.memory_mib > g.memory || g.clients + 1 > cfg_.timeslice_max_replicas)
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
  const AdvisorConfig& cfg_;
  std::vector<GpuState> gpus_;
};

double ComputeOf(const LoopWorkload& w, const AdvisorConfig& cfg) {
  if (w.advice.idle) return cfg.idle_sm_active;
  return std::min(1.0, w.advice.predicted_compute + cfg.compute_headroom);
}

// A slice of `mem_mib` on `model`, or the request when that is not smaller.
Slice Resized(const LoopWorkload& w, const std::string& model, double mem_mib,
              const AdvisorConfig& cfg) {
  const Slice req = RequestSlice(w.model, w.request);
  const double rel_from =
      GpuCatalog::Builtin().Get(*GpuCatalog::Builtin().Find(w.model)).relative_compute;
  const double rel_to =
      GpuCatalog::Builtin().Get(*GpuCatalog::Builtin().Find(model)).relative_compute;
  const bool bursty = w.advice.compute.p50 <= cfg.timeslice_max_median_compute;
  auto s = SliceOn(model, mem_mib, ComputeOf(w, cfg) * rel_from / rel_to, bursty, cfg);
  if (!s || s->memory_mib > req.memory_mib ||
      (s->model == req.model && s->gpu_fraction >= req.gpu_fraction))
    return req;
  if (s->type == SliceType::kMps || s->type == SliceType::kTimeSlice)
    s->memory_mib = static_cast<int64_t>(std::ceil(mem_mib));
  return *s;
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
  for (size_t i = 0; i < workloads.size(); ++i) {
    // On the same GPUs a workload is sized on its own model first: a cheaper model is where new
    // capacity should be bought, and taking it here crowds out that model's own workloads.
    const Slice grant = GrantFor(workloads[i], cfg);
    if (grant.model != workloads[i].model) {
      const double limit =
          static_cast<double>(std::max(workloads[i].advice.memory_limit_mib, cfg.auto_floor_mib));
      held[i] = pack.Place(Resized(workloads[i], workloads[i].model, limit, cfg), std::nullopt,
                           cfg.oom_reserve_gpus);
    }
    if (!held[i]) held[i] = pack.Place(grant, std::nullopt, cfg.oom_reserve_gpus);
    if (held[i]) ++r.fit_auto;
  }
  r.auto_fit_ratio = r.fit_original > 0 ? static_cast<double>(r.fit_auto) / r.fit_original : 0;
  for (size_t i = 0; i < workloads.size(); ++i) {
    const LoopWorkload& w = workloads[i];
    if (!held[i]) continue;
    const Slice req = RequestSlice(w.model, w.request);
    const double per_gpu_cap = static_cast<double>(req.memory_mib) / std::max(1, req.whole_gpus);
    const Slice& grant = held[i]->slice;
    const double granted = static_cast<double>(grant.memory_mib) / std::max(1, grant.whole_gpus);
    if (w.true_peak_mib <= granted) continue;
    OomEvent ev;
    ev.key = w.key;
    ev.granted_mib = static_cast<int64_t>(granted);
    ev.true_peak_mib = static_cast<int64_t>(std::ceil(w.true_peak_mib));
    const size_t own = held[i]->gpus.empty() ? 0 : held[i]->gpus[0];
    double killed_at = granted;
    while (true) {
      ++ev.retries;
      ev.backoff_periods += cfg.oom_backoff_periods << std::min(ev.retries - 1, 16);
      pack.Release(*held[i]);
      held[i].reset();
      // The largest size with room: the request, halving down to killed_at * oom_growth.
      const double floor_mib = std::min(per_gpu_cap, killed_at * cfg.oom_growth);
      std::vector<double> mems;  // below the request, largest first
      for (double m = per_gpu_cap / 2; m > floor_mib; m /= 2) mems.push_back(m);
      if (floor_mib < per_gpu_cap) mems.push_back(floor_mib);
      std::vector<Slice> sizes = {req};
      for (double m : mems) sizes.push_back(Resized(w, w.model, m, cfg));
      for (const Slice& size : sizes) {
        held[i] = pack.Place(size, own);
        if (held[i]) break;
      }
      // No room on its own model: the same sizes on another model of the set, where the
      // recommender would also have placed it (compute within other_model_max_compute).
      for (const std::string& m : models) {
        if (held[i] || req.whole_gpus > 1) break;
        if (m == w.model) continue;
        const double rel_from = cat.Get(*cat.Find(w.model)).relative_compute;
        const double rel_to = cat.Get(*cat.Find(m)).relative_compute;
        if (ComputeOf(w, cfg) * rel_from / rel_to > cfg.other_model_max_compute) continue;
        std::vector<double> other = {per_gpu_cap};
        other.insert(other.end(), mems.begin(), mems.end());
        for (double mem : other) {
          const Slice size = Resized(w, m, mem, cfg);
          if (size.model == m) held[i] = pack.Place(size);
          if (held[i]) break;
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
  return r;
}

}  // namespace tessera::advisor
