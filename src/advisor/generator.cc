#include "advisor/generator.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "cluster/gpu_catalog.h"
#include "core/random.h"

namespace tessera::advisor {
namespace {

constexpr int64_t kDay = 86400;
constexpr double kPi = 3.14159265358979323846;

struct Gen {
  Rng& rng;
  double U(double lo, double hi) { return lo + (hi - lo) * rng.UniformDouble(); }
  // Triangular noise in [-a, a] (sum of two uniforms: exact arithmetic, no libm).
  double Noise(double a) { return a * (rng.UniformDouble() + rng.UniformDouble() - 1.0); }
  bool Chance(double p) { return rng.UniformDouble() < p; }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[rng.Uniform(v.size())];
  }
};

int64_t MemoryOf(const std::string& model) {
  const GpuCatalog& cat = GpuCatalog::Builtin();
  return cat.Get(*cat.Find(model)).memory_mib;
}

// Daily load in [0, 1]: lowest at 04:00 + shift, highest twelve hours later.
double Diurnal(int64_t t_in_day, double shift_h) {
  const double h = static_cast<double>(t_in_day) / 3600.0 - shift_h;
  return 0.5 - 0.5 * std::cos(2 * kPi * (h - 4.0) / 24.0);
}

double RoundTo(double v, double q) {
  return std::round(v / q) * q;
}

// Sample value functions get (seconds since start, day index) and return (memory, sm).
using SampleFn = std::function<std::pair<double, double>(int64_t, int)>;

struct Draft {
  WorkloadUsage w;
  std::string archetype;
  // One entry per series: pod name per day (empty = not running that day), GPU, source, fn.
  struct Series {
    std::function<std::string(int)> pod_of_day;
    std::string gpu;
    bool device = false;
    SampleFn fn;
    std::function<bool(int64_t)> running;  // seconds since start
  };
  std::vector<Series> series;
  double cap_mib = 0;  // memory clamp
};

}  // namespace

Status ValidateGeneratorConfig(const GeneratorConfig& c) {
  if (c.workloads < 1 || c.workloads > 100000)
    return InvalidArgument("generator: workloads " + std::to_string(c.workloads) +
                           " outside 1..100000");
  if (c.days < 1 || c.days > 366)
    return InvalidArgument("generator: days " + std::to_string(c.days) + " outside 1..366");
  if (c.step_s < 10 || c.step_s > kDay || kDay % c.step_s != 0)
    return InvalidArgument("generator: step " + std::to_string(c.step_s) +
                           " s must be in 10..86400 and divide a day");
  if (c.start_s < 0) return InvalidArgument("generator: negative start time");
  for (double v : {c.growth_share_scale, c.growth_rate_scale, c.spike_rate_scale})
    if (!(v >= 0 && v <= 100)) return InvalidArgument("generator: a scale outside 0..100");
  return Status::Ok();
}

Result<GeneratedHistory> GenerateHistory(const GeneratorConfig& c) {
  TESSERA_RETURN_IF_ERROR(ValidateGeneratorConfig(c));
  Rng rng(c.seed);
  Gen g{rng};
  const std::vector<std::string> namespaces = {"search",   "ads",      "vision", "speech",
                                               "research", "platform", "risk",   "labs"};
  const std::vector<std::string> infer_models = {"T4",        "L4",        "A10G",      "A100-40GB",
                                                 "A100-80GB", "H100-80GB", "A100-80GB", "L4"};
  const std::vector<std::string> train_models = {"A100-80GB", "H100-80GB", "A100-40GB"};
  const std::vector<std::string> nb_models = {"T4", "A100-40GB", "A100-80GB", "L4"};
  const std::vector<std::string> batch_models = {"A100-80GB", "A100-40GB", "L4", "T4", "A30"};
  const int total_days = c.days + 1;
  std::vector<Draft> drafts;
  int shared_gpu = 0;
  for (int i = 0; drafts.size() < static_cast<size_t>(c.workloads); ++i) {
    const double kind = g.U(0, 1);
    Draft d;
    d.w.ns = g.Pick(namespaces);
    const std::string id = std::to_string(i);
    if (kind < 0.40) {
      // Inference service: weights + load-dependent memory on a daily cycle.
      d.archetype = "inference";
      const std::string model = g.Pick(infer_models);
      const double mem = static_cast<double>(MemoryOf(model));
      d.w.owner_kind = "Deployment";
      d.w.owner = "svc-" + id;
      d.w.gpu_model = model;
      d.cap_mib = mem * 0.97;
      const double base = mem * g.U(0.05, 0.45);
      const double dyn = base * g.U(0.10, 0.40);
      const double growth = g.Chance(std::min(1.0, 0.25 * c.growth_share_scale))
                                ? g.U(0.01, 0.03) * c.growth_rate_scale
                                : 0.0;
      const double spike_p = 0.003 * c.spike_rate_scale;
      const double spike_max = g.U(0.08, 0.20);
      const double peak_sm = g.U(0.15, 0.70);
      const double shift = g.U(-3, 3);
      const int replicas = 1 + static_cast<int>(rng.Uniform(3));
      const bool device = g.Chance(0.5);
      for (int r = 0; r < replicas; ++r) {
        Draft::Series s;
        const std::string pod = d.w.owner + "-" + std::to_string(1000 + r * 37 + i % 31);
        s.pod_of_day = [pod](int) { return pod; };
        s.gpu = "gpu-" + id + "-" + std::to_string(r);
        s.device = device;
        s.running = [](int64_t) { return true; };
        s.fn = [&g, base, dyn, growth, spike_max, spike_p, peak_sm, shift](int64_t t, int) {
          const double day_f = static_cast<double>(t) / kDay;
          const double load = std::clamp(Diurnal(t % kDay, shift) + g.Noise(0.08), 0.0, 1.0);
          double m = base * (1 + growth * day_f) + dyn * load * (1 + g.Noise(0.05));
          if (g.Chance(spike_p)) m += base * g.U(0.03, spike_max);
          const double sm = std::clamp(peak_sm * load * (1 + g.Noise(0.1)), 0.0, 1.0);
          return std::make_pair(m, sm);
        };
        d.series.push_back(std::move(s));
      }
    } else if (kind < 0.58) {
      // Training: long-running, near-constant memory with checkpoint bumps, high compute.
      d.archetype = "training";
      const std::string model = g.Pick(train_models);
      const double mem = static_cast<double>(MemoryOf(model));
      d.w.owner_kind = g.Chance(0.3) ? "JobSet" : "Job";
      d.w.owner = "train-" + id;
      d.w.gpu_model = model;
      d.cap_mib = mem * 0.97;
      const double level = mem * g.U(0.25, 0.90);
      const double bump = g.U(0.02, 0.06);
      const int64_t every = 3600 * (2 + static_cast<int64_t>(rng.Uniform(4)));
      const double sm = g.U(0.55, 0.95);
      const int gpus = g.Chance(0.15) ? 2 : 1;
      const std::string pod = d.w.owner + "-worker-0";
      for (int k = 0; k < gpus; ++k) {
        Draft::Series s;
        s.pod_of_day = [pod](int) { return pod; };
        s.gpu = "gpu-" + id + "-" + std::to_string(k);
        s.device = false;
        s.running = [](int64_t) { return true; };
        s.fn = [&g, level, bump, every, sm](int64_t t, int) {
          double m = level * (1 + g.Noise(0.01));
          if (t % every < 600) m *= 1 + bump;
          return std::make_pair(m, std::clamp(sm + g.Noise(0.05), 0.0, 1.0));
        };
        d.series.push_back(std::move(s));
      }
      d.w.request.whole_gpus = gpus;
    } else if (kind < 0.80) {
      // Notebook: sessions on working days load one of a few model sizes; memory is held until
      // the kernel restarts at night. Some notebooks are abandoned: memory held, no compute.
      d.archetype = "notebook";
      const std::string model = g.Pick(nb_models);
      const double mem = static_cast<double>(MemoryOf(model));
      d.w.owner_kind = g.Chance(0.5) ? "Pod" : "StatefulSet";
      d.w.owner = "nb-" + id;
      d.w.gpu_model = model;
      d.cap_mib = mem * 0.97;
      const std::string pod = d.w.owner_kind == "Pod" ? d.w.owner : d.w.owner + "-0";
      Draft::Series s;
      s.pod_of_day = [pod](int) { return pod; };
      s.gpu = "gpu-" + id;
      s.running = [](int64_t) { return true; };
      if (g.Chance(0.3)) {
        d.archetype = "notebook-idle";
        const double held = g.U(400, 4096);
        s.fn = [&g, held](int64_t, int) {
          return std::make_pair(held, std::max(0.0, g.Noise(0.002)));
        };
      } else {
        std::vector<double> sizes;
        const int n = 1 + static_cast<int>(rng.Uniform(3));
        for (int k = 0; k < n; ++k) sizes.push_back(mem * g.U(0.05, 0.5));
        std::vector<double> per_day;
        for (int day = 0; day < total_days; ++day) per_day.push_back(g.Pick(sizes));
        const double burst = g.U(0.3, 0.9);
        s.fn = [&g, per_day, burst](int64_t t, int day) {
          const double h = static_cast<double>(t % kDay) / 3600.0;
          const bool weekday = day % 7 < 5;
          if (!weekday || h < 9 || h >= 19) return std::make_pair(600.0, 0.0);
          const double m = per_day[static_cast<size_t>(day)] * (1 + g.Noise(0.01));
          const double sm = g.Chance(0.25) ? burst * g.U(0.5, 1.0) : g.U(0, 0.02);
          return std::make_pair(m, sm);
        };
      }
      d.series.push_back(std::move(s));
    } else if (kind < 0.96) {
      // Recurring batch job: the same owner every day at the same hour, a new pod per run.
      // One in ten ran only on the last day (history too short).
      d.archetype = "batch";
      const std::string model = g.Pick(batch_models);
      const double mem = static_cast<double>(MemoryOf(model));
      d.w.owner_kind = "Job";
      d.w.owner = "batch-" + id;
      d.w.gpu_model = model;
      d.cap_mib = mem * 0.97;
      const int64_t start_h = static_cast<int64_t>(rng.Uniform(20));
      const int64_t dur = 3600 + static_cast<int64_t>(rng.Uniform(7200));
      const double peak = mem * g.U(0.10, 0.60);
      const double growth = g.Chance(std::min(1.0, 0.3 * c.growth_share_scale))
                                ? g.U(0.01, 0.02) * c.growth_rate_scale
                                : 0.0;
      const double sm = g.U(0.4, 0.9);
      const bool once = g.Chance(0.1);
      const int last_day = c.days - 1;
      if (once) d.archetype = "batch-once";
      Draft::Series s;
      const std::string owner = d.w.owner;
      s.pod_of_day = [owner](int day) { return owner + "-run" + std::to_string(day + 1); };
      s.gpu = "gpu-" + id;
      s.running = [start_h, dur, once, last_day](int64_t t) {
        const int day = static_cast<int>(t / kDay);
        if (once && day != last_day && day != last_day + 1) return false;
        const int64_t in = t % kDay - start_h * 3600;
        return in >= 0 && in < dur;
      };
      s.fn = [&g, peak, growth, sm, start_h, dur](int64_t t, int day) {
        const double frac = static_cast<double>(t % kDay - start_h * 3600) / dur;
        const double ramp = std::min(1.0, 0.3 + frac * 7);
        const double m = peak * (1 + growth * day) * ramp * (1 + g.Noise(0.02));
        return std::make_pair(m, std::clamp(sm + g.Noise(0.1), 0.0, 1.0));
      };
      d.series.push_back(std::move(s));
    } else {
      // Two notebooks time-sliced on one GPU, read from the device only.
      d.archetype = "timesliced";
      const std::string model = g.Chance(0.5) ? "T4" : "A10G";
      const std::string gpu = "ts-gpu-" + std::to_string(shared_gpu++);
      for (int k = 0; k < 2 && drafts.size() < static_cast<size_t>(c.workloads); ++k) {
        Draft p;
        p.archetype = "timesliced";
        p.w.ns = d.w.ns;
        p.w.owner_kind = "Pod";
        p.w.owner = "shared-" + id + "-" + std::to_string(k);
        p.w.gpu_model = model;
        p.w.request.memory_mib = 6144;
        p.cap_mib = 6000;
        Draft::Series s;
        const std::string pod = p.w.owner;
        s.pod_of_day = [pod](int) { return pod; };
        s.gpu = gpu;
        s.device = true;
        s.running = [](int64_t) { return true; };
        const double level = g.U(1500, 2800);
        s.fn = [&g, level](int64_t t, int) {
          const double h = static_cast<double>(t % kDay) / 3600.0;
          return std::make_pair(level * (1 + g.Noise(0.02)),
                                h >= 9 && h < 19 ? g.U(0.05, 0.6) : 0.0);
        };
        p.series.push_back(std::move(s));
        drafts.push_back(std::move(p));
      }
      continue;
    }
    drafts.push_back(std::move(d));
  }

  GeneratedHistory out;
  const int64_t history_end = static_cast<int64_t>(c.days) * kDay;
  for (Draft& d : drafts) {
    WorkloadUsage hist = d.w, eval = d.w;
    double peak = 0, peak_sm = 0;
    for (Draft::Series& s : d.series) {
      std::vector<PodSeries> per_pod_h, per_pod_e;
      for (int64_t t = 0; t < (c.days + 1) * kDay; t += c.step_s) {
        if (!s.running(t)) continue;
        const int day = static_cast<int>(t / kDay);
        auto [m, sm] = s.fn(t, day);
        m = std::clamp(RoundTo(m, 1.0), 0.0, std::floor(d.cap_mib));
        sm = std::clamp(RoundTo(sm, 1e-4), 0.0, 1.0);
        peak = std::max(peak, m);
        peak_sm = std::max(peak_sm, sm);
        auto& dst = t < history_end ? per_pod_h : per_pod_e;
        const std::string pod = s.pod_of_day(day);
        if (dst.empty() || dst.back().pod != pod) {
          PodSeries p;
          p.pod = pod;
          p.gpu = s.gpu;
          p.device_source = s.device;
          dst.push_back(std::move(p));
        }
        dst.back().samples.push_back({c.start_s + t, m, sm});
      }
      for (auto& p : per_pod_h) hist.pods.push_back(std::move(p));
      for (auto& p : per_pod_e) eval.pods.push_back(std::move(p));
    }
    // Requests over-ask: mostly whole GPUs, otherwise 1.3-2x the true peaks (memory rounded up
    // to GiB, compute to 5 %).
    if (d.w.request.whole_gpus == 0 && d.w.request.memory_mib == 0) {
      if (g.Chance(0.7) || d.archetype != "inference") {
        d.w.request.whole_gpus = 1;
      } else {
        const double want = std::ceil(peak * g.U(1.3, 2.0) / 1024.0) * 1024.0;
        d.w.request.memory_mib = std::min(MemoryOf(d.w.gpu_model), static_cast<int64_t>(want));
        d.w.request.compute = std::min(1.0, std::ceil(peak_sm * g.U(1.3, 2.0) * 20.0) / 20.0);
      }
    }
    hist.request = eval.request = d.w.request;
    if (hist.pods.empty() && eval.pods.empty()) continue;
    out.history.workloads.push_back(std::move(hist));
    out.eval.workloads.push_back(std::move(eval));
    out.archetype.push_back(d.archetype);
  }
  // Workloads with no sample in the history (a one-off job of the following day) stay out of it.
  std::vector<WorkloadUsage> h, e;
  std::vector<std::string> a;
  for (size_t i = 0; i < out.history.workloads.size(); ++i) {
    if (out.history.workloads[i].pods.empty()) continue;
    h.push_back(std::move(out.history.workloads[i]));
    e.push_back(std::move(out.eval.workloads[i]));
    a.push_back(out.archetype[i]);
  }
  out.history.workloads = std::move(h);
  out.eval.workloads = std::move(e);
  out.archetype = std::move(a);
  MarkSharedDevices(out.history);
  MarkSharedDevices(out.eval);
  return out;
}

}  // namespace tessera::advisor
