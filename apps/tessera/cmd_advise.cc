// `tessera advise`: GPU rightsizing recommendations from an offline usage history
// (src/advisor, docs/ADVISOR.md).
//
//   tessera advise --history FILE [--prices FILE] [--window 7d] [--json FILE] [--patches FILE]
//   tessera advise --prometheus URL [--window 7d | --start T --end T] [--step 300] [...]
//   tessera advise --generate-history FILE [--workloads 200] [--days 7] [--seed 42] [--step 300]
//
// The first two print a table and optionally write the full JSON report and `kubectl apply
// --server-side`-able annotations per resized owner. The third writes a generated history (with
// known needs) in the history format. With --prometheus the usage comes from the DCGM exporter's
// series in that Prometheus (apps/tessera/advise_prometheus.h). Every input is checked before any
// output file is written; a bad input gives one line "tessera: <message>" on stderr, exit code 1,
// and no file.
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>

#include "advisor/config.h"
#include "advisor/generator.h"
#include "advisor/recommend.h"
#include "advisor/report.h"
#include "advisor/usage.h"
#include "apps/tessera/advise_prometheus.h"
#include "apps/tessera/cli_util.h"
#include "apps/tessera/commands.h"
#include "core/text.h"
#include "sim/csv.h"
#include "sim/report.h"

namespace tessera {
Result<int64_t> ParseDuration(const std::string& flag, const std::string& text) {
  if (text.empty()) return InvalidArgument(flag + ": empty duration (use e.g. 7d, 36h, 3600s)");
  int64_t unit = 1;
  std::string digits = text;
  switch (text.back()) {
    case 's':
      digits.pop_back();
      break;
    case 'm':
      unit = 60, digits.pop_back();
      break;
    case 'h':
      unit = 3600, digits.pop_back();
      break;
    case 'd':
      unit = 86400, digits.pop_back();
      break;
    default:
      break;
  }
  constexpr int64_t kYear = 366 * 86400;
  auto v = ParseIntFlag(flag, digits, 0, kYear / unit);
  if (!v.ok())
    return InvalidArgument(flag + ": " + QuotedValue(text) +
                           " is not a duration of at most 366 days (use e.g. 7d, 36h, 3600s)");
  return *v * unit;
}

Status CheckOutputDir(const std::string& flag, const std::string& path) {
  if (path.empty()) return Status::Ok();
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
    return IoError(flag + ": cannot write '" + path + "': no directory '" + dir.string() + "'");
  return Status::Ok();
}

Result<PrometheusQuery> PrometheusRangeFlags(const PrometheusRangeArgs& a, int64_t window_s) {
  constexpr int64_t kMaxPoints = 11000;
  PrometheusQuery q;
  q.url = a.url;
  auto step = ParseIntFlag("--step", a.step, 1, 86400);
  if (!step.ok()) return step.status();
  q.step_s = *step;
  auto timeout = ParseNumberFlag("--timeout", a.timeout, 1, 3600);
  if (!timeout.ok()) return timeout.status();
  q.timeout_s = *timeout;
  constexpr int64_t kMaxTime = int64_t{1} << 40;
  if (!a.end.empty()) {
    auto end = ParseIntFlag("--end", a.end, 0, kMaxTime);
    if (!end.ok()) return end.status();
    q.end_s = *end;
  } else {
    q.end_s = static_cast<int64_t>(std::time(nullptr));
  }
  if (!a.start.empty()) {
    if (window_s > 0) return InvalidArgument("--start and --window exclude each other");
    auto start = ParseIntFlag("--start", a.start, 0, kMaxTime);
    if (!start.ok()) return start.status();
    q.start_s = *start;
  } else {
    q.start_s = q.end_s - (window_s > 0 ? window_s : 7 * 86400);
  }
  if (q.start_s >= q.end_s)
    return InvalidArgument("the range start " + std::to_string(q.start_s) +
                           " is not before its end " + std::to_string(q.end_s));
  if ((q.end_s - q.start_s) / q.step_s + 1 > kMaxPoints)
    return InvalidArgument("--step: " + std::to_string(q.step_s) + " s gives more than " +
                           std::to_string(kMaxPoints) +
                           " samples per series over the range; use a larger step");
  return q;
}

namespace {

struct AdviseArgs {
  std::string history, prices, window = "0", min_history = "1d", json, patches;
  std::string prometheus, start, end, timeout = "60";
  std::string generate, workloads = "200", days = "7", seed = "42", step = "300";
};

// "90s", "30m", "36h", "7d" or plain seconds; 0 = unlimited where allowed.
int RunGenerate(const AdviseArgs& a) {
  advisor::GeneratorConfig g;
  auto w = ParseIntFlag("--workloads", a.workloads, 1, 100000);
  if (!w.ok()) return Fail(w.status());
  auto d = ParseIntFlag("--days", a.days, 1, 366);
  if (!d.ok()) return Fail(d.status());
  auto s = ParseSeedFlag("--seed", a.seed);
  if (!s.ok()) return Fail(s.status());
  auto st = ParseIntFlag("--step", a.step, 10, 86400);
  if (!st.ok()) return Fail(st.status());
  g.workloads = static_cast<int>(*w);
  g.days = static_cast<int>(*d);
  g.seed = *s;
  g.step_s = *st;
  Status dir = CheckOutputDir("--generate-history", a.generate);
  if (!dir.ok()) return Fail(dir);
  auto gen = advisor::GenerateHistory(g);
  if (!gen.ok()) return Fail(gen.status());
  Status out = WriteFileAtomic(a.generate, advisor::HistoryCsv(gen->history));
  if (!out.ok()) return Fail(out);
  std::printf("wrote %zu workloads over %lld days to %s\n", gen->history.workloads.size(),
              static_cast<long long>(*d), a.generate.c_str());
  return 0;
}

// The range to query: [--start, --end] in Unix seconds, or the last --window (default 7d) up to
// --end (default now); at most kMaxPoints samples per series, Prometheus' own limit.
int RunAdvise(const AdviseArgs& a) {
  if (!a.generate.empty()) {
    if (!a.history.empty() || !a.prometheus.empty())
      return Fail(InvalidArgument("--generate-history excludes --history and --prometheus"));
    return RunGenerate(a);
  }
  if (!a.history.empty() && !a.prometheus.empty())
    return Fail(InvalidArgument("--history and --prometheus exclude each other"));
  if (a.history.empty() && a.prometheus.empty())
    return Fail(
        InvalidArgument("give --history FILE or --prometheus URL (or --generate-history FILE)"));
  if (a.prometheus.empty() && (!a.start.empty() || !a.end.empty()))
    return Fail(InvalidArgument("--start and --end need --prometheus"));
  advisor::AdvisorConfig cfg;
  auto window = ParseDuration("--window", a.window);
  if (!window.ok()) return Fail(window.status());
  cfg.window_s = *window;
  PrometheusQuery query;
  if (!a.prometheus.empty()) {
    auto q = PrometheusRangeFlags({a.prometheus, a.start, a.end, a.step, a.timeout}, *window);
    if (!q.ok()) return Fail(q.status());
    query = *q;
    cfg.window_s = 0;  // the query's range is the window
  }
  auto min_history = ParseDuration("--min-history", a.min_history);
  if (!min_history.ok()) return Fail(min_history.status());
  cfg.min_history_s = *min_history;
  Status dir = CheckOutputDir("--json", a.json);
  if (!dir.ok()) return Fail(dir);
  dir = CheckOutputDir("--patches", a.patches);
  if (!dir.ok()) return Fail(dir);
  advisor::PriceTable prices = advisor::DefaultPriceTable();
  if (!a.prices.empty()) {
    auto text = ReadFileToString(a.prices);
    if (!text.ok()) return Fail(text.status());
    auto parsed = advisor::ParsePriceTable(*text, a.prices);
    if (!parsed.ok()) return Fail(parsed.status());
    prices = std::move(*parsed);
  }
  advisor::UsageHistory history;
  if (!a.prometheus.empty()) {
    auto fetched = FetchDcgmHistory(query);
    if (!fetched.ok()) return Fail(fetched.status());
    for (const std::string& w : fetched->warnings)
      std::fprintf(stderr, "tessera advise: Prometheus warning: %s\n", w.c_str());
    if (fetched->skipped_non_finite > 0 || fetched->unmatched_samples > 0)
      std::fprintf(stderr,
                   "tessera advise: skipped %lld non-finite samples and %lld samples without "
                   "both memory and compute\n",
                   static_cast<long long>(fetched->skipped_non_finite),
                   static_cast<long long>(fetched->unmatched_samples));
    history = std::move(fetched->history);
  } else {
    auto text = ReadFileToString(a.history);
    if (!text.ok()) return Fail(text.status());
    auto parsed = advisor::ParseHistoryCsv(*text, a.history);
    if (!parsed.ok()) return Fail(parsed.status());
    history = std::move(*parsed);
  }
  auto report = advisor::Advise(history, cfg, prices);
  if (!report.ok()) return Fail(report.status());
  const std::string json = a.json.empty() ? "" : advisor::ReportJson(*report);
  const std::string patches = a.patches.empty() ? "" : advisor::ReportPatches(*report);
  if (!a.json.empty()) {
    Status st = WriteFileAtomic(a.json, json);
    if (!st.ok()) return Fail(st);
  }
  if (!a.patches.empty()) {
    Status st = WriteFileAtomic(a.patches, patches);
    if (!st.ok()) return Fail(st);
  }
  std::fputs(advisor::ReportTable(*report).c_str(), stdout);
  return 0;
}

}  // namespace

void AddAdviseCommand(CLI::App& app, int& rc) {
  auto args = std::make_shared<AdviseArgs>();
  AdviseArgs& a = *args;
  auto* c = app.add_subcommand(
      "advise", "GPU rightsizing recommendations from observed usage (docs/ADVISOR.md)");
  c->add_option("--history", a.history, "Usage history CSV (format in docs/ADVISOR.md)")
      ->type_name("FILE");
  c->add_option("--prometheus", a.prometheus,
                "Instead of --history: the DCGM exporter's series in this Prometheus "
                "(http://host:9090)")
      ->type_name("URL");
  c->add_option("--start", a.start, "With --prometheus: range start, Unix seconds")
      ->type_name("SECONDS");
  c->add_option("--end", a.end, "With --prometheus: range end, Unix seconds (default: now)")
      ->type_name("SECONDS");
  c->add_option("--timeout", a.timeout, "With --prometheus: seconds per request")
      ->type_name("SECONDS")
      ->default_val("60");
  c->add_option("--prices", a.prices,
                "Price table CSV gpu_model,usd_per_hour (default: built-in list prices)")
      ->type_name("FILE");
  c->add_option("--window", a.window,
                "Use only the last DURATION of the history (0 = all; with --prometheus the "
                "range queried, default 7d)")
      ->type_name("DURATION")
      ->default_val("0");
  c->add_option("--min-history", a.min_history,
                "History a workload needs before it is resized, e.g. 1d, 36h")
      ->type_name("DURATION")
      ->default_val("1d");
  c->add_option("--json", a.json, "Write the full report as JSON")->type_name("FILE");
  c->add_option("--patches", a.patches,
                "Write owner annotations for `kubectl apply --server-side -f`")
      ->type_name("FILE");
  c->add_option("--generate-history", a.generate,
                "Instead: write a generated history (known needs) to FILE")
      ->type_name("FILE");
  c->add_option("--workloads", a.workloads, "With --generate-history: workloads, 1..100000")
      ->type_name("INT")
      ->default_val("200");
  c->add_option("--days", a.days, "With --generate-history: days, 1..366")
      ->type_name("INT")
      ->default_val("7");
  c->add_option("--seed", a.seed, "With --generate-history: seed")
      ->type_name("INT")
      ->default_val("42");
  c->add_option("--step", a.step,
                "Sampling step in seconds: of the generated history (10..86400) or of the "
                "Prometheus range queries (1..86400)")
      ->type_name("INT")
      ->default_val("300");
  c->callback([args, &rc] { rc = RunAdvise(*args); });
}

}  // namespace tessera
