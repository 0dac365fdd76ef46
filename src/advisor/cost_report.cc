#include "advisor/cost_report.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "advisor/numbers.h"
#include "cluster/gpu_catalog.h"
#include "cluster/mig_geometry.h"
#include "core/text.h"

namespace tessera::advisor {
namespace {

using nlohmann::json;

bool Bad(double v) {
  return !std::isfinite(v) || v < 0;
}

void Add(CostTotals& t, const CostTotals& d) {
  t.allocated_gpu_hours += d.allocated_gpu_hours;
  t.used_gpu_hours += d.used_gpu_hours;
  t.idle_gpu_hours += d.idle_gpu_hours;
  t.unmeasured_gpu_hours += d.unmeasured_gpu_hours;
  t.allocated_memory_gib_hours += d.allocated_memory_gib_hours;
  t.used_memory_gib_hours += d.used_memory_gib_hours;
  t.unused_memory_gib_hours += d.unused_memory_gib_hours;
  t.unmeasured_memory_gib_hours += d.unmeasured_memory_gib_hours;
  t.cost_usd += d.cost_usd;
  t.idle_cost_usd += d.idle_cost_usd;
}

std::vector<CostRow> Rows(const std::map<std::string, CostTotals>& m) {
  std::vector<CostRow> out;
  for (const auto& [k, t] : m) out.push_back({k, t});
  return out;
}

std::optional<double> Pct(double part, double whole) {
  if (whole <= 0) return std::nullopt;
  return 100.0 * part / whole;
}

json TotalsJson(const CostTotals& t) {
  return {{"pods", t.pods},
          {"allocated_gpu_hours", t.allocated_gpu_hours},
          {"used_gpu_hours", t.used_gpu_hours},
          {"idle_gpu_hours", t.idle_gpu_hours},
          {"unmeasured_gpu_hours", t.unmeasured_gpu_hours},
          {"allocated_memory_gib_hours", t.allocated_memory_gib_hours},
          {"used_memory_gib_hours", t.used_memory_gib_hours},
          {"unused_memory_gib_hours", t.unused_memory_gib_hours},
          {"unmeasured_memory_gib_hours", t.unmeasured_memory_gib_hours},
          {"cost_usd", t.cost_usd},
          {"idle_cost_usd", t.idle_cost_usd}};
}

json OptJson(const std::optional<double>& v) {
  return v ? json(*v) : json(nullptr);
}

std::string OptText(const std::optional<double>& v) {
  return v ? FormatDecimal(*v, 1) + " %" : "unknown";
}

}  // namespace

Result<CostReport> ComputeCostReport(const CostInput& in, const PriceTable& prices) {
  if (in.step_s <= 0) return InvalidArgument(in.source + ": step must be positive");
  const GpuCatalog& catalog = GpuCatalog::Builtin();
  const double hours = static_cast<double>(in.step_s) / 3600.0;
  std::map<std::string, CostTotals> queue, ns, model;
  std::map<std::string, std::set<std::string>> queue_pods, ns_pods, model_pods;
  CostReport r;
  r.source = in.source;
  r.start_s = in.start_s;
  r.end_s = in.end_s;
  r.step_s = in.step_s;
  std::set<std::string> all_pods;
  for (const CostPod& p : in.pods) {
    const std::string who = p.ns + "/" + p.pod;
    auto id = catalog.Find(p.model);
    if (!id)
      return InvalidArgument(in.source + ": pod " + who + ": unknown GPU model '" + p.model + "'");
    auto price = prices.Price(p.model);
    if (!price.ok()) return NotFound(in.source + ": pod " + who + ": " + price.status().message());
    const double gib_per_gpu = static_cast<double>(catalog.Get(*id).memory_mib) / 1024.0;
    CostTotals d;
    for (const CostSample& s : p.samples) {
      if (Bad(s.allocated_gpus) || Bad(s.compute_gpus) || Bad(s.memory_mib))
        return InvalidArgument(in.source + ": pod " + who + " at " + std::to_string(s.t_s) +
                               ": a value is not a finite number >= 0");
      if (s.allocated_gpus <= 0) continue;
      const double alloc = s.allocated_gpus * hours;
      d.allocated_gpu_hours += alloc;
      if (s.has_compute) {
        const double used = std::min(s.compute_gpus, s.allocated_gpus) * hours;
        d.used_gpu_hours += used;
        d.idle_gpu_hours += alloc - used;
      } else {
        d.unmeasured_gpu_hours += alloc;
      }
      const double mem = s.allocated_gpus * gib_per_gpu * hours;
      d.allocated_memory_gib_hours += mem;
      if (s.has_memory) {
        const double used = std::min(s.memory_mib / 1024.0 * hours, mem);
        d.used_memory_gib_hours += used;
        d.unused_memory_gib_hours += mem - used;
      } else {
        d.unmeasured_memory_gib_hours += mem;
      }
    }
    if (d.allocated_gpu_hours <= 0) continue;
    d.cost_usd = d.allocated_gpu_hours * *price;
    d.idle_cost_usd = d.idle_gpu_hours * *price;
    const std::string q = p.queue.empty() ? "(unknown)" : p.queue;
    Add(queue[q], d);
    Add(ns[p.ns], d);
    Add(model[p.model], d);
    Add(r.total, d);
    queue_pods[q].insert(who);
    ns_pods[p.ns].insert(who);
    model_pods[p.model].insert(who);
    all_pods.insert(who);
  }
  if (all_pods.empty())
    return NotFound(in.source + ": no pod held a GPU in the window [" + std::to_string(in.start_s) +
                    ", " + std::to_string(in.end_s) + "]");
  for (auto& [k, t] : queue) t.pods = static_cast<int64_t>(queue_pods[k].size());
  for (auto& [k, t] : ns) t.pods = static_cast<int64_t>(ns_pods[k].size());
  for (auto& [k, t] : model) t.pods = static_cast<int64_t>(model_pods[k].size());
  r.total.pods = static_cast<int64_t>(all_pods.size());
  r.by_queue = Rows(queue);
  r.by_namespace = Rows(ns);
  r.by_model = Rows(model);
  r.idle_compute_pct = Pct(r.total.idle_gpu_hours, r.total.used_gpu_hours + r.total.idle_gpu_hours);
  r.unused_memory_pct = Pct(r.total.unused_memory_gib_hours,
                            r.total.used_memory_gib_hours + r.total.unused_memory_gib_hours);
  if (!in.allocated_ratio.empty()) {
    double sum = 0;
    for (double v : in.allocated_ratio) {
      if (!std::isfinite(v) || v < 0 || v > 1)
        return InvalidArgument(in.source + ": an allocated ratio sample is outside 0..1");
      sum += v;
    }
    r.unallocated_gpu_pct = 100.0 * (1.0 - sum / static_cast<double>(in.allocated_ratio.size()));
  }
  return r;
}

CostInput CostInputFromHistory(const UsageHistory& h, int64_t window_s, int64_t step_s,
                               const std::string& source) {
  CostInput in;
  in.source = source;
  in.step_s = step_s;
  int64_t first = -1, last = -1;
  for (const auto& w : h.workloads) {
    if (w.pods.empty()) continue;
    first = first < 0 ? w.FirstT() : std::min(first, w.FirstT());
    last = std::max(last, w.LastT());
  }
  in.end_s = std::max<int64_t>(last, 0);
  in.start_s = window_s > 0 ? in.end_s - window_s : std::max<int64_t>(first, 0);
  const GpuCatalog& catalog = GpuCatalog::Builtin();
  for (const auto& w : h.workloads) {
    auto id = catalog.Find(w.gpu_model);
    double per_series = 0;
    if (w.request.whole_gpus > 0) {
      per_series = 1;
    } else if (id && !w.request.mig_profile.empty()) {
      const MigGeometry* geo = MigGeometryFor(*id);
      const int idx = geo ? geo->Find(w.request.mig_profile) : -1;
      if (idx >= 0 && geo->compute_slices > 0)
        per_series = static_cast<double>(geo->profiles[idx].compute_slices) / geo->compute_slices;
    } else if (id && catalog.Get(*id).memory_mib > 0) {
      per_series = std::max(static_cast<double>(w.request.memory_mib) /
                                static_cast<double>(catalog.Get(*id).memory_mib),
                            w.request.compute);
    }
    per_series = std::min(per_series, 1.0);
    for (const auto& ps : w.pods) {
      CostPod p;
      p.ns = w.ns;
      p.pod = ps.pod;
      p.model = w.gpu_model;
      p.kind = w.request.whole_gpus > 0         ? "exclusive"
               : !w.request.mig_profile.empty() ? "mig"
                                                : "share";
      for (const auto& s : ps.samples) {
        if (window_s > 0 && s.t_s <= in.start_s) continue;
        CostSample c;
        c.t_s = s.t_s;
        c.allocated_gpus = per_series;
        c.has_compute = c.has_memory = !ps.shared_device;
        c.compute_gpus = s.sm_active;
        c.memory_mib = s.memory_mib;
        p.samples.push_back(c);
      }
      // One pod on several GPUs has one series per GPU: they merge into one pod entry.
      auto same = std::find_if(in.pods.begin(), in.pods.end(), [&](const CostPod& o) {
        return o.ns == p.ns && o.pod == p.pod && o.model == p.model;
      });
      if (same == in.pods.end()) {
        in.pods.push_back(std::move(p));
      } else {
        same->samples.insert(same->samples.end(), p.samples.begin(), p.samples.end());
      }
    }
  }
  return in;
}

std::string CostReportTable(const CostReport& r) {
  std::string out = "GPU cost report, " + r.source + ", [" + std::to_string(r.start_s) + ", " +
                    std::to_string(r.end_s) + "], step " + std::to_string(r.step_s) + " s\n";
  auto section = [&](const char* title, const std::vector<CostRow>& rows) {
    out += Printf("\n%-24s %5s %11s %10s %10s %10s %11s %11s\n", title, "pods", "alloc GPU-h",
                  "used GPU-h", "idle GPU-h", "unmeas.", "cost USD", "idle USD");
    auto line = [&](const std::string& key, const CostTotals& t) {
      out += Printf("%-24s %5lld %11.2f %10.2f %10.2f %10.2f %11.2f %11.2f\n", key.c_str(),
                    static_cast<long long>(t.pods), t.allocated_gpu_hours, t.used_gpu_hours,
                    t.idle_gpu_hours, t.unmeasured_gpu_hours, t.cost_usd, t.idle_cost_usd);
    };
    for (const auto& row : rows) line(row.key, row.totals);
    line("total", r.total);
  };
  section("queue", r.by_queue);
  section("namespace", r.by_namespace);
  section("GPU model", r.by_model);
  out += "\nwaste: idle compute " + OptText(r.idle_compute_pct) + " of measured allocated " +
         "GPU-hours (" + FormatDecimal(r.total.idle_gpu_hours, 2) + " GPU-h, $" +
         FormatDecimal(r.total.idle_cost_usd, 2) + "); unused memory " +
         OptText(r.unused_memory_pct) + " of measured allocated memory (" +
         FormatDecimal(r.total.unused_memory_gib_hours, 1) + " GiB-h); unallocated GPUs " +
         OptText(r.unallocated_gpu_pct) + "\n";
  if (r.total.unmeasured_gpu_hours > 0 || r.total.unmeasured_memory_gib_hours > 0)
    out += "unmeasured: " + FormatDecimal(r.total.unmeasured_gpu_hours, 2) +
           " allocated GPU-h without an attributable compute reading, " +
           FormatDecimal(r.total.unmeasured_memory_gib_hours, 1) +
           " GiB-h without a memory reading (no series, or a GPU shared by several pods)\n";
  return out;
}

std::string CostReportJson(const CostReport& r) {
  json j = {{"source", r.source},
            {"start_s", r.start_s},
            {"end_s", r.end_s},
            {"step_s", r.step_s},
            {"total", TotalsJson(r.total)}};
  for (const auto& [name, rows] :
       {std::pair<const char*, const std::vector<CostRow>*>{"by_queue", &r.by_queue},
        {"by_namespace", &r.by_namespace},
        {"by_model", &r.by_model}}) {
    json a = json::array();
    for (const auto& row : *rows) {
      json e = TotalsJson(row.totals);
      e["key"] = row.key;
      a.push_back(std::move(e));
    }
    j[name] = std::move(a);
  }
  j["waste"] = {{"idle_compute_pct", OptJson(r.idle_compute_pct)},
                {"unused_memory_pct", OptJson(r.unused_memory_pct)},
                {"unallocated_gpu_pct", OptJson(r.unallocated_gpu_pct)}};
  return j.dump(2) + "\n";
}

}  // namespace tessera::advisor
