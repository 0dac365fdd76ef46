// `tessera advise`: GPU rightsizing recommendations from an offline usage history
// (src/advisor, docs/ADVISOR.md).
//
//   tessera advise --history FILE [--prices FILE] [--window 7d] [--json FILE] [--patches FILE]
//   tessera advise --generate-history FILE [--workloads 200] [--days 7] [--seed 42] [--step 300]
//
// The first prints a table and optionally writes the full JSON report and `kubectl apply
// --server-side`-able annotations per resized owner. The second writes a generated history (with
// known needs) in the history format. Every input is checked before any output file is written;
// a bad input gives one line "tessera: <message>" on stderr, exit code 1, and no file.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "advisor/config.h"
#include "advisor/generator.h"
#include "advisor/recommend.h"
#include "advisor/report.h"
#include "advisor/usage.h"
#include "apps/tessera/cli_util.h"
#include "apps/tessera/commands.h"
#include "core/text.h"
#include "sim/csv.h"
#include "sim/report.h"

namespace tessera {
namespace {

struct AdviseArgs {
  std::string history, prices, window = "0", min_history = "1d", json, patches;
  std::string generate, workloads = "200", days = "7", seed = "42", step = "300";
};

// "90s", "30m", "36h", "7d" or plain seconds; 0 = unlimited where allowed.
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

int RunAdvise(const AdviseArgs& a) {
  if (!a.generate.empty()) {
    if (!a.history.empty())
      return Fail(InvalidArgument("--history and --generate-history exclude each other"));
    return RunGenerate(a);
  }
  if (a.history.empty())
    return Fail(InvalidArgument("give --history FILE (or --generate-history FILE)"));
  advisor::AdvisorConfig cfg;
  auto window = ParseDuration("--window", a.window);
  if (!window.ok()) return Fail(window.status());
  cfg.window_s = *window;
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
  auto text = ReadFileToString(a.history);
  if (!text.ok()) return Fail(text.status());
  auto history = advisor::ParseHistoryCsv(*text, a.history);
  if (!history.ok()) return Fail(history.status());
  auto report = advisor::Advise(*history, cfg, prices);
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
  c->add_option("--prices", a.prices,
                "Price table CSV gpu_model,usd_per_hour (default: built-in list prices)")
      ->type_name("FILE");
  c->add_option("--window", a.window, "Use only the last DURATION of the history (0 = all)")
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
  c->add_option("--step", a.step, "With --generate-history: sampling step in seconds, 10..86400")
      ->type_name("INT")
      ->default_val("300");
  c->callback([args, &rc] { rc = RunAdvise(*args); });
}

}  // namespace tessera
