// `tessera report`: GPU-hours allocated, used and idle, their cost and the cluster's waste
// (advisor/cost_report.h), from a Prometheus server or an offline usage history.
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "advisor/config.h"
#include "advisor/cost_report.h"
#include "advisor/prometheus.h"
#include "advisor/usage.h"
#include "apps/tessera/advise_prometheus.h"
#include "apps/tessera/cli_util.h"
#include "apps/tessera/commands.h"
#include "sim/csv.h"
#include "sim/report.h"

namespace tessera {
namespace {

struct ReportArgs {
  std::string history, prometheus, prices, window = "0", start, end, step = "300", timeout = "60",
                                           json;
};

struct Use {
  double compute = 0, memory = 0;
  bool compute_known = true, memory_known = true;
};

// Allocation from the scheduler's tessera_pod_allocated_gpus, usage from DCGM and the node agent
// (FetchDcgmHistory), the cluster's allocated ratio from tessera_gpu_allocated_ratio.
Result<advisor::CostInput> FromPrometheus(const PrometheusQuery& q) {
  using advisor::DcgmField;
  auto ranges = FetchRanges(q, {DcgmField::kPodAllocatedGpus, DcgmField::kAllocatedRatio});
  if (!ranges.ok()) return ranges.status();
  const std::string source = "Prometheus at " + q.url;
  const std::string span =
      " in the window [" + std::to_string(q.start_s) + ", " + std::to_string(q.end_s) + "]";
  for (const advisor::PromRange& r : *ranges)
    for (const advisor::PromSeries& s : r.series)
      if (s.skipped_non_finite > 0)
        return InvalidArgument(source + ": " + std::to_string(s.skipped_non_finite) +
                               " NaN or infinite samples in " + advisor::DcgmFieldName(s.field) +
                               (s.pod.empty() ? "" : " of pod " + s.ns + "/" + s.pod));
  const advisor::PromRange& alloc = (*ranges)[0];
  if (alloc.series.empty())
    return NotFound(source + ": no tessera_pod_allocated_gpus series" + span +
                    " (is Tessera's scheduler scraped?)");
  auto usage = FetchDcgmHistory(q);
  if (!usage.ok()) return usage.status();
  if (usage->skipped_non_finite > 0)
    return InvalidArgument(source + ": " + std::to_string(usage->skipped_non_finite) +
                           " NaN or infinite samples in the GPU usage series");
  std::map<std::tuple<std::string, std::string, int64_t>, Use> use;
  for (const auto& w : usage->history.workloads)
    for (const auto& ps : w.pods)
      for (const auto& s : ps.samples) {
        Use& u = use[{w.ns, ps.pod, s.t_s}];
        u.compute += s.sm_active;
        u.memory += s.memory_mib;
        if (ps.shared_device) {
          u.compute_known = false;
          if (!ps.memory_per_pod) u.memory_known = false;
        }
      }
  advisor::CostInput in;
  in.source = source;
  in.start_s = q.start_s;
  in.end_s = q.end_s;
  in.step_s = q.step_s;
  for (const advisor::PromSeries& s : alloc.series) {
    advisor::CostPod p;
    p.ns = s.ns;
    p.pod = s.pod;
    p.queue = s.queue;
    p.model = s.model_name;
    p.kind = s.kind;
    for (const advisor::PromSample& x : s.samples) {
      advisor::CostSample c;
      c.t_s = std::llround(x.t_s);
      c.allocated_gpus = x.value;
      auto u = use.find({s.ns, s.pod, c.t_s});
      if (u != use.end()) {
        c.has_compute = u->second.compute_known;
        c.has_memory = u->second.memory_known;
        c.compute_gpus = u->second.compute;
        c.memory_mib = u->second.memory;
      }
      p.samples.push_back(c);
    }
    in.pods.push_back(std::move(p));
  }
  for (const advisor::PromSeries& s : (*ranges)[1].series)
    for (const advisor::PromSample& x : s.samples) in.allocated_ratio.push_back(x.value);
  return in;
}

int RunReport(const ReportArgs& a) {
  if (!a.history.empty() && !a.prometheus.empty())
    return Fail(InvalidArgument("--history and --prometheus exclude each other"));
  if (a.history.empty() && a.prometheus.empty())
    return Fail(InvalidArgument("give --history FILE or --prometheus URL"));
  if (a.prometheus.empty() && (!a.start.empty() || !a.end.empty()))
    return Fail(InvalidArgument("--start and --end need --prometheus"));
  auto window = ParseDuration("--window", a.window);
  if (!window.ok()) return Fail(window.status());
  Status dir = CheckOutputDir("--json", a.json);
  if (!dir.ok()) return Fail(dir);
  advisor::PriceTable prices = advisor::DefaultPriceTable();
  if (!a.prices.empty()) {
    auto text = ReadFileToString(a.prices);
    if (!text.ok()) return Fail(text.status());
    auto parsed = advisor::ParsePriceTable(*text, a.prices);
    if (!parsed.ok()) return Fail(parsed.status());
    prices = std::move(*parsed);
  }
  advisor::CostInput in;
  if (!a.prometheus.empty()) {
    auto q = PrometheusRangeFlags({a.prometheus, a.start, a.end, a.step, a.timeout}, *window);
    if (!q.ok()) return Fail(q.status());
    auto fetched = FromPrometheus(*q);
    if (!fetched.ok()) return Fail(fetched.status());
    in = std::move(*fetched);
  } else {
    auto step = ParseIntFlag("--step", a.step, 1, 86400);
    if (!step.ok()) return Fail(step.status());
    auto text = ReadFileToString(a.history);
    if (!text.ok()) return Fail(text.status());
    auto parsed = advisor::ParseHistoryCsv(*text, a.history);
    if (!parsed.ok()) return Fail(parsed.status());
    in = advisor::CostInputFromHistory(*parsed, *window, *step, a.history);
  }
  auto report = advisor::ComputeCostReport(in, prices);
  if (!report.ok()) return Fail(report.status());
  if (!a.json.empty()) {
    Status st = WriteFileAtomic(a.json, advisor::CostReportJson(*report));
    if (!st.ok()) return Fail(st);
  }
  std::fputs(advisor::CostReportTable(*report).c_str(), stdout);
  return 0;
}

}  // namespace

void AddReportCommand(CLI::App& app, int& rc) {
  auto args = std::make_shared<ReportArgs>();
  ReportArgs& a = *args;
  auto* c = app.add_subcommand(
      "report",
      "GPU-hours allocated, used and idle per queue, namespace and model, with cost and "
      "waste (docs/ADVISOR.md)");
  c->add_option("--history", a.history, "Usage history CSV (the format of `tessera advise`)")
      ->type_name("FILE");
  c->add_option("--prometheus", a.prometheus,
                "Instead of --history: Tessera's, the node agent's and the DCGM exporter's "
                "series in this Prometheus (http://host:9090)")
      ->type_name("URL");
  c->add_option("--start", a.start, "With --prometheus: range start, Unix seconds")
      ->type_name("SECONDS");
  c->add_option("--end", a.end, "With --prometheus: range end, Unix seconds (default: now)")
      ->type_name("SECONDS");
  c->add_option("--timeout", a.timeout, "With --prometheus: seconds per request")
      ->type_name("SECONDS")
      ->default_val("60");
  c->add_option("--window", a.window,
                "Only the last DURATION (0 = the whole history; with --prometheus the range "
                "queried, default 7d)")
      ->type_name("DURATION")
      ->default_val("0");
  c->add_option("--step", a.step,
                "Seconds each sample stands for, and the Prometheus query step (1..86400)")
      ->type_name("INT")
      ->default_val("300");
  c->add_option("--prices", a.prices,
                "Price table CSV gpu_model,usd_per_hour (default: built-in list prices)")
      ->type_name("FILE");
  c->add_option("--json", a.json, "Write the report as JSON")->type_name("FILE");
  c->callback([args, &rc] { rc = RunReport(*args); });
}

}  // namespace tessera
