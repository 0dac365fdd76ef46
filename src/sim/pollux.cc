#include "sim/pollux.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <set>

#include "sim/csv.h"

namespace tessera {
namespace {

// A decimal number with optional sign, fraction and exponent; no spaces, inf or nan.
Result<double> ParseNumber(const std::string& source, const CsvField& f,
                           const std::string& column) {
  return ParseCsvDecimal(source, f, column, /*allow_plus=*/true);
}

Result<double> ParsePositive(const std::string& source, const CsvField& f,
                             const std::string& column) {
  auto v = ParseNumber(source, f, column);
  if (!v.ok()) return v;
  if (!(*v > 0)) return CsvFieldError(source, f, column, f.text + " is not positive");
  return v;
}

Result<double> ParseNonNegative(const std::string& source, const CsvField& f,
                                const std::string& column) {
  auto v = ParseNumber(source, f, column);
  if (!v.ok()) return v;
  if (*v < 0) return CsvFieldError(source, f, column, "negative value " + f.text);
  return *v + 0.0;  // -0 -> 0
}

// Parses the CSV, checks the header against `expected` and every row's width.
Result<std::vector<CsvRow>> ParseTable(std::string_view content, const std::string& source,
                                       const std::vector<std::string>& expected) {
  auto rows = ParseCsv(SkipUtf8Bom(content), source);
  if (!rows.ok()) return rows.status();
  std::string joined;
  for (const auto& e : expected) joined += (joined.empty() ? "" : ",") + e;
  if (rows->empty())
    return InvalidArgument(Where(source, 1, 1) + ": empty file, expected the header '" + joined +
                           "'");
  const CsvRow& h = (*rows)[0];
  for (size_t i = 0; i < expected.size() || i < h.fields.size(); ++i) {
    if (i >= h.fields.size())
      return InvalidArgument(Where(source, h.line, 1) + ": header lacks column '" + expected[i] +
                             "' (expected '" + joined + "')");
    if (i >= expected.size() || h.fields[i].text != expected[i])
      return InvalidArgument(Where(source, h.line, h.fields[i].column) + ": unexpected column '" +
                             h.fields[i].text + "' (expected the header '" + joined + "')");
  }
  for (size_t r = 1; r < rows->size(); ++r) {
    const CsvRow& row = (*rows)[r];
    if (row.fields.size() != expected.size())
      return InvalidArgument(Where(source, row.line, 1) + ": expected " +
                             std::to_string(expected.size()) + " fields, found " +
                             std::to_string(row.fields.size()));
  }
  rows->erase(rows->begin());
  return rows;
}

Status TimingFields(const std::string& source, const CsvRow& row, size_t first, double& local_bsz,
                    double& step_time, double& sync_time) {
  const auto& f = row.fields;
  auto b = ParsePositive(source, f[first], "local_bsz");
  if (!b.ok()) return b.status();
  auto st = ParsePositive(source, f[first + 1], "step_time");
  if (!st.ok()) return st.status();
  auto sy = ParseNonNegative(source, f[first + 2], "sync_time");
  if (!sy.ok()) return sy.status();
  if (*sy > *st)
    return CsvFieldError(source, f[first + 2], "sync_time",
                         f[first + 2].text + " exceeds step_time " + f[first + 1].text);
  local_bsz = *b, step_time = *st, sync_time = *sy;
  return Status::Ok();
}

bool ValidAppName(const std::string& s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

std::string PlacementString(std::span<const int> p) {
  std::string s;
  for (size_t i = 0; i < p.size(); ++i) s += (i ? "," : "") + std::to_string(p[i]);
  return "{" + s + "}";
}

}  // namespace

Result<std::vector<PolluxPlacementRow>> ParsePolluxPlacements(std::string_view content,
                                                              const std::string& source) {
  auto rows = ParseTable(content, source, {"placement", "local_bsz", "step_time", "sync_time"});
  if (!rows.ok()) return rows.status();
  std::vector<PolluxPlacementRow> out;
  for (const CsvRow& row : *rows) {
    const CsvField& p = row.fields[0];
    PolluxPlacementRow r;
    if (p.text.empty()) return CsvFieldError(source, p, "placement", "empty placement");
    if (p.text.size() > 64)
      return CsvFieldError(source, p, "placement", "more than 64 nodes in '" + p.text + "'");
    for (char c : p.text) {
      if (c < '1' || c > '9')
        return CsvFieldError(source, p, "placement",
                             "'" + p.text + "' is not a digit string (GPUs per node, 1-9 each)");
      r.placement.push_back(c - '0');
    }
    TESSERA_RETURN_IF_ERROR(TimingFields(source, row, 1, r.local_bsz, r.step_time, r.sync_time));
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<PolluxScalabilityRow>> ParsePolluxScalability(std::string_view content,
                                                                 const std::string& source) {
  auto rows = ParseTable(content, source,
                         {"num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"});
  if (!rows.ok()) return rows.status();
  std::vector<PolluxScalabilityRow> out;
  for (const CsvRow& row : *rows) {
    PolluxScalabilityRow r;
    auto n = ParseCsvInt(source, row.fields[0], "num_nodes", 1, kPolluxMaxReplicas);
    if (!n.ok()) return n.status();
    auto g = ParseCsvInt(source, row.fields[1], "num_replicas", 1, kPolluxMaxReplicas);
    if (!g.ok()) return g.status();
    if (*g < *n)
      return CsvFieldError(source, row.fields[1], "num_replicas",
                           std::to_string(*g) + " GPUs on " + std::to_string(*n) +
                               " nodes: every node needs at least one");
    r.num_nodes = static_cast<int>(*n);
    r.num_replicas = static_cast<int>(*g);
    TESSERA_RETURN_IF_ERROR(TimingFields(source, row, 2, r.local_bsz, r.step_time, r.sync_time));
    out.push_back(r);
  }
  return out;
}

Result<std::vector<PolluxValidationRow>> ParsePolluxValidation(std::string_view content,
                                                               const std::string& source) {
  auto rows =
      ParseTable(content, source, {"progress", "iteration", "metric", "grad_sqr", "grad_var"});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return InvalidArgument(Where(source, 2, 1) + ": no epochs after the header");
  std::vector<PolluxValidationRow> out;
  for (const CsvRow& row : *rows) {
    const auto& f = row.fields;
    PolluxValidationRow r;
    auto progress = ParseNonNegative(source, f[0], "progress");
    if (!progress.ok()) return progress.status();
    auto it = ParseCsvInt(source, f[1], "iteration", 1, kPolluxMaxBatch);
    if (!it.ok()) return it.status();
    auto metric = ParseNumber(source, f[2], "metric");
    if (!metric.ok()) return metric.status();
    auto sqr = ParseNonNegative(source, f[3], "grad_sqr");
    if (!sqr.ok()) return sqr.status();
    auto var = ParseNonNegative(source, f[4], "grad_var");
    if (!var.ok()) return var.status();
    if (!out.empty() && *it <= out.back().iteration)
      return CsvFieldError(source, f[1], "iteration",
                           std::to_string(*it) + " does not exceed the previous epoch's " +
                               std::to_string(out.back().iteration));
    if (!out.empty() && *progress < out.back().progress)
      return CsvFieldError(source, f[0], "progress", f[0].text + " is below the previous epoch's");
    r.progress = *progress, r.iteration = *it, r.metric = *metric, r.grad_sqr = *sqr,
    r.grad_var = *var;
    out.push_back(r);
  }
  return out;
}

Result<std::vector<PolluxJobSpec>> ParsePolluxWorkload(std::string_view content,
                                                       const std::string& source) {
  auto rows =
      ParseTable(content, source, {"name", "time", "application", "num_replicas", "batch_size"});
  if (!rows.ok()) return rows.status();
  std::vector<PolluxJobSpec> out;
  std::set<std::string> names;
  for (const CsvRow& row : *rows) {
    const auto& f = row.fields;
    PolluxJobSpec j;
    j.line = row.line;
    j.name = f[0].text;
    if (j.name.empty()) return CsvFieldError(source, f[0], "name", "empty job name");
    if (!names.insert(j.name).second)
      return CsvFieldError(source, f[0], "name", "duplicate job name '" + j.name + "'");
    auto t = ParseNonNegative(source, f[1], "time");
    if (!t.ok()) return t.status();
    if (*t > kPolluxMaxTime)
      return CsvFieldError(source, f[1], "time", f[1].text + " exceeds 1e9 seconds");
    j.time = *t;
    j.application = f[2].text;
    if (!ValidAppName(j.application))
      return CsvFieldError(source, f[2], "application",
                           "'" + j.application + "' is not a profile name ([A-Za-z0-9_-]+)");
    auto g = ParseCsvInt(source, f[3], "num_replicas", 1, kPolluxMaxReplicas);
    if (!g.ok()) return g.status();
    j.num_replicas = static_cast<int>(*g);
    auto b = ParseCsvInt(source, f[4], "batch_size", 1, kPolluxMaxBatch);
    if (!b.ok()) return b.status();
    j.batch_size = *b;
    out.push_back(std::move(j));
  }
  return out;
}

std::vector<int> CanonicalPlacement(std::span<const int> gpus_per_node) {
  std::vector<int> p;
  for (int g : gpus_per_node)
    if (g > 0) p.push_back(g);
  std::vector<int> best = p;
  for (size_t i = 1; i < p.size(); ++i) {
    std::vector<int> rot(p.begin() + static_cast<std::ptrdiff_t>(i), p.end());
    rot.insert(rot.end(), p.begin(), p.begin() + static_cast<std::ptrdiff_t>(i));
    best = std::min(best, rot);
  }
  return best;
}

PolluxModelOptions PolluxSimulatorModel(const std::string& app) {
  PolluxModelOptions o;
  o.work = PolluxModelOptions::Work::kProgress;
  o.single_gpu_accumulation = true;
  if (app == "yolov3") o.max_local_bsz = 8;
  return o;
}

Result<PolluxApp> PolluxApp::Create(std::string name, std::vector<PolluxPlacementRow> placements,
                                    std::vector<PolluxScalabilityRow> scalability,
                                    std::map<int64_t, std::vector<PolluxValidationRow>> validation,
                                    const PolluxModelOptions& options) {
  PolluxApp app;
  app.name_ = std::move(name);
  const std::string& n = app.name_;
  if (placements.empty()) return InvalidArgument("application '" + n + "': no placement profile");
  if (validation.empty())
    return InvalidArgument("application '" + n + "': no validation-<batch>.csv profile");
  if (!(options.max_local_bsz >= 0) || !std::isfinite(options.max_local_bsz))
    return InvalidArgument("application '" + n + "': invalid local batch cap " +
                           std::to_string(options.max_local_bsz));
  app.single_gpu_accumulation_ = options.single_gpu_accumulation;
  // Exact curves and, per (nodes, GPUs, local batch), the sums for the averaged grid.
  std::map<std::tuple<int, int, double>, std::tuple<double, double, int>> sums;
  for (const auto& r : placements) {
    if (r.placement.empty())
      return InvalidArgument("application '" + n + "': placement with no nodes");
    int gpus = 0;
    for (int g : r.placement) {
      if (g <= 0)
        return InvalidArgument("application '" + n + "': placement " +
                               PlacementString(r.placement) + " has a node without GPUs");
      gpus += g;
    }
    Curve& c = app.exact_[CanonicalPlacement(r.placement)];
    if (std::any_of(c.begin(), c.end(), [&](const Point& p) { return p.local_bsz == r.local_bsz; }))
      return InvalidArgument("application '" + n + "': placement " + PlacementString(r.placement) +
                             " at local batch " + std::to_string(r.local_bsz) +
                             " is profiled twice");
    c.push_back({r.local_bsz, r.step_time, r.sync_time});
    auto& s = sums[{static_cast<int>(r.placement.size()), gpus, r.local_bsz}];
    std::get<0>(s) += r.step_time, std::get<1>(s) += r.sync_time, ++std::get<2>(s);
    app.max_local_bsz_ = std::max(app.max_local_bsz_, r.local_bsz);
  }
  std::set<std::tuple<int, int, double>> scal_keys;
  for (const auto& r : scalability) {
    if (r.num_nodes <= 0 || r.num_replicas < r.num_nodes)
      return InvalidArgument("application '" + n + "': scalability row with " +
                             std::to_string(r.num_replicas) + " GPUs on " +
                             std::to_string(r.num_nodes) + " nodes");
    if (!scal_keys.insert({r.num_nodes, r.num_replicas, r.local_bsz}).second)
      return InvalidArgument("application '" + n + "': scalability profile repeats " +
                             std::to_string(r.num_nodes) + " nodes, " +
                             std::to_string(r.num_replicas) + " GPUs, local batch " +
                             std::to_string(r.local_bsz));
    auto& s = sums[{r.num_nodes, r.num_replicas, r.local_bsz}];
    std::get<0>(s) += r.step_time, std::get<1>(s) += r.sync_time, ++std::get<2>(s);
  }
  for (const auto& [key, s] : sums) {
    const auto [nodes, gpus, bsz] = key;
    const double k = std::get<2>(s);
    app.grid_[nodes][gpus].push_back({bsz, std::get<0>(s) / k, std::get<1>(s) / k});
  }
  auto by_bsz = [](const Point& a, const Point& b) { return a.local_bsz < b.local_bsz; };
  for (auto& [key, c] : app.exact_) std::sort(c.begin(), c.end(), by_bsz);
  for (const auto& [batch, rows] : validation) {
    if (batch <= 0)
      return InvalidArgument("application '" + n + "': validation batch size " +
                             std::to_string(batch) + " is not positive");
    if (rows.empty())
      return InvalidArgument("application '" + n + "': validation at batch " +
                             std::to_string(batch) + " has no epochs");
    const int epochs = static_cast<int>(rows.size());
    if (app.epochs_ != 0 && epochs != app.epochs_)
      return InvalidArgument("application '" + n + "': validation at batch " +
                             std::to_string(batch) + " has " + std::to_string(epochs) +
                             " epochs, batch " + std::to_string(app.validation_.begin()->first) +
                             " has " + std::to_string(app.epochs_));
    app.epochs_ = epochs;
    if (rows.back().iteration <= 0)
      return InvalidArgument("application '" + n + "': validation at batch " +
                             std::to_string(batch) + " ends at iteration " +
                             std::to_string(rows.back().iteration));
    double iterations = static_cast<double>(rows.back().iteration);
    if (options.work == PolluxModelOptions::Work::kProgress) {
      const double scale =
          static_cast<double>(batch) / static_cast<double>(validation.begin()->first);
      double prev = 0;
      iterations = 0;
      for (const auto& r : rows) {
        const double denom = r.grad_var / scale + r.grad_sqr;
        const double gain = denom > 0 ? (r.grad_var + r.grad_sqr) / denom : 1.0;
        iterations += (r.progress - prev) / gain;
        prev = r.progress;
      }
      if (!(iterations > 0) || !std::isfinite(iterations))
        return InvalidArgument("application '" + n + "': validation at batch " +
                               std::to_string(batch) + " makes no progress");
    }
    app.validation_[batch] = iterations;
  }
  if (options.max_local_bsz > 0) app.max_local_bsz_ = options.max_local_bsz;
  return app;
}

Result<double> PolluxApp::IterationsToComplete(int64_t batch) const {
  auto hi = validation_.lower_bound(batch);
  if (hi != validation_.end() && hi->first == batch) return hi->second;
  if (hi == validation_.end() || hi == validation_.begin())
    return InvalidArgument("application '" + name_ + "': batch size " + std::to_string(batch) +
                           " is outside the profiled range " + std::to_string(min_batch()) + ".." +
                           std::to_string(max_batch()));
  auto lo = std::prev(hi);
  const double x =
      (std::log(static_cast<double>(batch)) - std::log(static_cast<double>(lo->first))) /
      (std::log(static_cast<double>(hi->first)) - std::log(static_cast<double>(lo->first)));
  const double ly = std::log(lo->second);
  const double hy = std::log(hi->second);
  return std::exp(ly + x * (hy - ly));
}

PolluxStepTime PolluxApp::Eval(const Curve& c, double b) {
  if (b <= c.front().local_bsz) return {c.front().step_time, c.front().sync_time};
  if (b >= c.back().local_bsz) return {c.back().step_time, c.back().sync_time};
  auto hi = std::lower_bound(c.begin(), c.end(), b,
                             [](const Point& p, double v) { return p.local_bsz < v; });
  if (hi->local_bsz == b) return {hi->step_time, hi->sync_time};
  auto lo = std::prev(hi);
  const double x = (b - lo->local_bsz) / (hi->local_bsz - lo->local_bsz);
  return {lo->step_time + x * (hi->step_time - lo->step_time),
          lo->sync_time + x * (hi->sync_time - lo->sync_time)};
}

PolluxStepTime PolluxApp::EvalAtNodes(int nodes, double gpus, double b) const {
  const auto& row = grid_.at(nodes);
  auto hi = row.lower_bound(static_cast<int>(std::ceil(gpus)));
  if (hi == row.end()) return Eval(std::prev(hi)->second, b);
  if (hi == row.begin() || hi->first == gpus) return Eval(hi->second, b);
  auto lo = std::prev(hi);
  const double x = (gpus - lo->first) / (hi->first - lo->first);
  const PolluxStepTime a = Eval(lo->second, b), c = Eval(hi->second, b);
  return {a.step_time + x * (c.step_time - a.step_time),
          a.sync_time + x * (c.sync_time - a.sync_time)};
}

Result<PolluxStepTime> PolluxApp::Profile(std::span<const int> gpus_per_node,
                                          double local_bsz) const {
  if (!(local_bsz > 0) || !std::isfinite(local_bsz))
    return InvalidArgument("application '" + name_ + "': local batch " + std::to_string(local_bsz) +
                           " is not positive");
  int gpus = 0;
  for (int g : gpus_per_node) {
    if (g < 0)
      return InvalidArgument("application '" + name_ + "': placement " +
                             PlacementString(gpus_per_node) + " has a negative GPU count");
    gpus += g;
  }
  if (gpus == 0)
    return InvalidArgument("application '" + name_ + "': placement " +
                           PlacementString(gpus_per_node) + " has no GPUs");
  const std::vector<int> key = CanonicalPlacement(gpus_per_node);
  auto it = exact_.find(key);
  if (it != exact_.end()) return Eval(it->second, local_bsz);
  const int nodes = static_cast<int>(key.size());
  auto hi = grid_.lower_bound(nodes);
  if (hi == grid_.end()) return EvalAtNodes(std::prev(hi)->first, gpus, local_bsz);
  if (hi->first == nodes || hi == grid_.begin()) {
    const double g = hi->first == nodes ? gpus : static_cast<double>(gpus) * hi->first / nodes;
    return EvalAtNodes(hi->first, g, local_bsz);
  }
  auto lo = std::prev(hi);
  const double per_node = static_cast<double>(gpus) / nodes;
  const PolluxStepTime a = EvalAtNodes(lo->first, per_node * lo->first, local_bsz);
  const PolluxStepTime c = EvalAtNodes(hi->first, per_node * hi->first, local_bsz);
  const double x = static_cast<double>(nodes - lo->first) / (hi->first - lo->first);
  return PolluxStepTime{a.step_time + x * (c.step_time - a.step_time),
                        a.sync_time + x * (c.sync_time - a.sync_time)};
}

Result<PolluxIterationCost> PolluxApp::IterationTime(std::span<const int> gpus_per_node,
                                                     double batch) const {
  int gpus = 0;
  for (int g : gpus_per_node) gpus += std::max(g, 0);
  if (gpus == 0)
    return InvalidArgument("application '" + name_ + "': placement " +
                           PlacementString(gpus_per_node) + " has no GPUs");
  if (!(batch > 0) || !std::isfinite(batch))
    return InvalidArgument("application '" + name_ + "': batch size " + std::to_string(batch) +
                           " is not positive");
  const double local = batch / gpus;
  if (local / max_local_bsz_ > kPolluxMaxAccumulation)
    return InvalidArgument("application '" + name_ + "': local batch " + std::to_string(local) +
                           " needs more than " + std::to_string(kPolluxMaxAccumulation) +
                           " accumulation steps");
  int accum = std::max(0, static_cast<int>(std::ceil(local / max_local_bsz_ - 1e-9)) - 1);
  if (single_gpu_accumulation_ && gpus == 1 && batch > static_cast<double>(min_batch()))
    accum = std::max(accum, 1);
  PolluxIterationCost cost;
  cost.accum_steps = accum;
  cost.atomic_bsz = local / (accum + 1);
  auto p = Profile(gpus_per_node, cost.atomic_bsz);
  if (!p.ok()) return p.status();
  cost.seconds = p->step_time + accum * std::max(0.0, p->step_time - p->sync_time);
  return cost;
}

Result<PolluxApp> ReadPolluxApp(const std::string& dir, const std::string& name,
                                const PolluxModelOptions& options) {
  namespace fs = std::filesystem;
  const fs::path base(dir);
  auto text = ReadFileToString((base / "placements.csv").string());
  if (!text.ok()) return text.status();
  auto placements = ParsePolluxPlacements(*text, (base / "placements.csv").string());
  if (!placements.ok()) return placements.status();
  text = ReadFileToString((base / "scalability.csv").string());
  if (!text.ok()) return text.status();
  auto scalability = ParsePolluxScalability(*text, (base / "scalability.csv").string());
  if (!scalability.ok()) return scalability.status();
  std::map<int64_t, std::vector<PolluxValidationRow>> validation;
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(base, ec), end; !ec && it != end; it.increment(ec))
    files.push_back(it->path());
  if (ec) return IoError("cannot list '" + dir + "': " + ec.message());
  std::sort(files.begin(), files.end());
  for (const fs::path& p : files) {
    const std::string file = p.filename().string();
    const std::string prefix = "validation-";
    if (file.rfind(prefix, 0) != 0) continue;
    const std::string digits = file.substr(prefix.size(), file.size() - prefix.size() - 4);
    int64_t batch = 0;
    auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), batch);
    if (file.size() < prefix.size() + 5 || file.substr(file.size() - 4) != ".csv" ||
        digits.empty() || digits[0] == '0' || err != std::errc() ||
        end != digits.data() + digits.size() || batch > kPolluxMaxBatch)
      return InvalidArgument(p.string() +
                             ": expected the name validation-<batch size>.csv, batch a positive "
                             "integer without leading zeros");
    auto v = ReadFileToString(p.string());
    if (!v.ok()) return v.status();
    auto rows = ParsePolluxValidation(*v, p.string());
    if (!rows.ok()) return rows.status();
    validation[batch] = std::move(rows).value();
  }
  auto app = PolluxApp::Create(name, std::move(placements).value(), std::move(scalability).value(),
                               std::move(validation), options);
  if (!app.ok()) return InvalidArgument(dir + ": " + app.status().message());
  return app;
}

Result<PolluxWorkload> ReadPolluxWorkload(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  auto jobs = ParsePolluxWorkload(*text, path);
  if (!jobs.ok()) return jobs.status();
  PolluxWorkload w;
  w.name = std::filesystem::path(path).stem().string();
  w.source = path;
  w.jobs = std::move(jobs).value();
  return w;
}

}  // namespace tessera
