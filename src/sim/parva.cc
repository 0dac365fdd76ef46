#include "sim/parva.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <tuple>

#include "sim/csv.h"

namespace tessera {
namespace {

constexpr char kNa[] = "N/A";
constexpr int kMaxProcs = 64;
constexpr int kMaxBatch = 1 << 20;
constexpr int kMaxNodes = 1 << 20;

Result<int> ParseInt(const std::string& source, const CsvField& f, const std::string& column,
                     int min, int max) {
  auto v = ParseCsvInt(source, f, column, INT64_MIN, INT64_MAX);
  if (!v.ok()) return v.status();
  if (*v < 0 && min >= 0)
    return CsvFieldError(source, f, column, "negative value " + std::to_string(*v));
  if (*v < min || *v > max)
    return CsvFieldError(source, f, column,
                         std::to_string(*v) + " outside the allowed range " + std::to_string(min) +
                             ".." + std::to_string(max));
  return static_cast<int>(*v);
}

// A decimal number: digits with an optional fraction and exponent; no sign, spaces, inf or nan.
Result<double> ParseNonNegative(const std::string& source, const CsvField& f,
                                const std::string& column) {
  auto parsed = ParseCsvDecimal(source, f, column, /*allow_plus=*/false);
  if (!parsed.ok()) return parsed;
  const std::string& t = f.text;
  const double v = *parsed;
  if (t[0] == '-' && v != 0) return CsvFieldError(source, f, column, "negative value " + t);
  if (t[0] == '-') return CsvFieldError(source, f, column, "'" + t + "' has a sign");
  return v;
}

Status CheckHeader(const std::vector<CsvRow>& rows, const std::string& source,
                   const std::string& expected) {
  if (rows.empty())
    return InvalidArgument(Where(source, 1, 1) + ": empty file, expected the header '" + expected +
                           "'");
  std::vector<std::string> names;
  size_t pos = 0;
  while (true) {
    const size_t comma = expected.find(',', pos);
    names.push_back(expected.substr(pos, comma == std::string::npos ? comma : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  const CsvRow& h = rows[0];
  for (size_t i = 0; i < std::min(names.size(), h.fields.size()); ++i) {
    if (h.fields[i].text != names[i])
      return InvalidArgument(Where(source, h.line, h.fields[i].column) + ": header field " +
                             std::to_string(i + 1) + " is '" + h.fields[i].text + "', expected '" +
                             names[i] + "' (header '" + expected + "')");
  }
  if (h.fields.size() < names.size())
    return InvalidArgument(Where(source, h.line, 1) + ": missing column '" +
                           names[h.fields.size()] + "' (header '" + expected + "')");
  if (h.fields.size() > names.size())
    return InvalidArgument(Where(source, h.line, h.fields[names.size()].column) +
                           ": unexpected column '" + h.fields[names.size()].text + "' (header '" +
                           expected + "')");
  return Status::Ok();
}

Status CheckWidth(const CsvRow& row, size_t width, const std::string& source) {
  if (row.fields.size() == width) return Status::Ok();
  return InvalidArgument(Where(source, row.line, 1) + ": expected " + std::to_string(width) +
                         " fields, found " + std::to_string(row.fields.size()));
}

bool ValidSize(int gpcs) {
  return gpcs == 1 || gpcs == 2 || gpcs == 3 || gpcs == 4 || gpcs == 7;
}

Result<int> ParseSize(const std::string& source, const CsvField& f, const std::string& column) {
  auto v = ParseInt(source, f, column, 1, 7);
  if (!v.ok()) return v.status();
  if (!ValidSize(*v))
    return CsvFieldError(source, f, column,
                         "MIG instance size " + std::to_string(*v) +
                             " does not exist on an A100 (1, 2, 3, 4 or 7 GPCs)");
  return *v;
}

std::string Decimal(double v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) return "0";
  return std::string(buf, p);
}

std::string Known(const std::vector<std::string>& models) {
  std::string out;
  for (const std::string& m : models) out += (out.empty() ? "" : ", ") + m;
  return out;
}

}  // namespace

Result<InferenceProfile> ParseParvaProfile(std::string_view content, const std::string& source,
                                           const std::string& model) {
  auto rows = ParseCsv(SkipUtf8Bom(content), source);
  if (!rows.ok()) return rows.status();
  TESSERA_RETURN_IF_ERROR(CheckHeader(*rows, source, kParvaProfileHeader));
  if (rows->size() == 1)
    return InvalidArgument(Where(source, (*rows)[0].line, 1) +
                           ": no profile rows after the header");
  InferenceProfile out;
  out.model = model;
  std::map<std::tuple<int, int, int>, int> seen;  // (size, batch, procs) -> line
  for (size_t r = 1; r < rows->size(); ++r) {
    const CsvRow& row = (*rows)[r];
    TESSERA_RETURN_IF_ERROR(CheckWidth(row, 5, source));
    const auto& f = row.fields;
    auto size = ParseSize(source, f[0], "Mig instance");
    if (!size.ok()) return size.status();
    auto batch = ParseInt(source, f[1], "Batch size", 1, kMaxBatch);
    if (!batch.ok()) return batch.status();
    auto procs = ParseInt(source, f[2], "Workload Number", 1, kMaxProcs);
    if (!procs.ok()) return procs.status();
    auto tput = ParseNonNegative(source, f[3], "Throughput");
    if (!tput.ok()) return tput.status();
    auto lat = ParseNonNegative(source, f[4], "Latency");
    if (!lat.ok()) return lat.status();
    if ((*tput == 0) != (*lat == 0)) {
      const CsvField& zero = *tput == 0 ? f[3] : f[4];
      return CsvFieldError(source, zero, *tput == 0 ? "Throughput" : "Latency",
                           "zero while the other of throughput and latency is not (both 0 marks a "
                           "configuration that was not measured)");
    }
    const auto key = std::make_tuple(*size, *batch, *procs);
    if (auto [it, fresh] = seen.emplace(key, row.line); !fresh)
      return InvalidArgument(Where(source, row.line, 1) + ": configuration (" +
                             std::to_string(*size) + " GPCs, batch " + std::to_string(*batch) +
                             ", " + std::to_string(*procs) + " processes) repeats line " +
                             std::to_string(it->second));
    out.rows.push_back({*size, *batch, *procs, *tput, *lat, *tput != 0});
  }
  return out;
}

Result<std::vector<InferenceProfile>> ReadParvaProfileDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> files;
  fs::directory_iterator it(dir, ec);
  if (ec) return IoError("cannot read directory '" + dir + "': " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return IoError("cannot read directory '" + dir + "': " + ec.message());
    if (it->path().extension() == ".csv" && !it->path().stem().empty()) files.push_back(it->path());
  }
  if (ec) return IoError("cannot read directory '" + dir + "': " + ec.message());
  if (files.empty()) return InvalidArgument(dir + ": no <model>.csv profile files");
  std::sort(files.begin(), files.end());
  std::vector<InferenceProfile> out;
  for (const fs::path& p : files) {
    auto text = ReadFileToString(p.string());
    if (!text.ok()) return text.status();
    auto prof = ParseParvaProfile(*text, p.string(), p.stem().string());
    if (!prof.ok()) return prof.status();
    out.push_back(std::move(*prof));
  }
  return out;
}

std::string ParvaProfileCsv(const InferenceProfile& profile) {
  std::string out = std::string(kParvaProfileHeader) + "\n";
  for (const InferenceProfileRow& r : profile.rows) {
    out += std::to_string(r.gpcs) + "," + std::to_string(r.batch) + "," + std::to_string(r.procs) +
           "," + (r.measured ? Decimal(r.throughput) : "0") + "," +
           (r.measured ? Decimal(r.latency_s) : "0") + "\n";
  }
  return out;
}

Result<SloTable> ParseParvaSlo(std::string_view content, const std::string& source,
                               const std::vector<std::string>& models) {
  auto rows = ParseCsv(SkipUtf8Bom(content), source);
  if (!rows.ok()) return rows.status();
  if (rows->empty())
    return InvalidArgument(Where(source, 1, 1) + ": empty file, expected one row per scenario");
  SloTable out;
  out.source = source;
  out.models = models;
  for (const CsvRow& row : *rows) {
    TESSERA_RETURN_IF_ERROR(CheckWidth(row, models.size(), source));
    std::vector<SloCell> cells;
    for (size_t i = 0; i < row.fields.size(); ++i) {
      const CsvField& f = row.fields[i];
      SloCell cell;
      cell.line = f.line;
      cell.column = f.column;
      if (f.text != kNa) {
        auto v = ParseNonNegative(source, f, models[i]);
        if (!v.ok()) return v.status();
        if (*v == 0)
          return CsvFieldError(source, f, models[i],
                               "must be positive (N/A marks a service absent from the scenario)");
        cell.value = *v;
      }
      cells.push_back(cell);
    }
    out.rows.push_back(std::move(cells));
  }
  return out;
}

Result<SloTable> ReadParvaSlo(const std::string& path, const std::vector<std::string>& models) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  return ParseParvaSlo(*text, path, models);
}

std::string ParvaSloCsv(const SloTable& table) {
  std::string out;
  for (const auto& row : table.rows) {
    for (size_t i = 0; i < row.size(); ++i)
      out += (i ? "," : "") + (row[i].value ? Decimal(*row[i].value) : std::string(kNa));
    out += "\n";
  }
  return out;
}

std::vector<std::string> ParvaModelNames(const std::vector<InferenceProfile>& profiles) {
  std::vector<std::string> out;
  for (const InferenceProfile& p : profiles) out.push_back(p.model);
  return out;
}

Result<std::vector<InferenceService>> ParvaScenario(const std::vector<InferenceProfile>& profiles,
                                                    const SloTable& rates,
                                                    const SloTable& latencies, int scenario) {
  const size_t n = std::min(rates.rows.size(), latencies.rows.size());
  if (scenario < 1 || static_cast<size_t>(scenario) > n)
    return InvalidArgument("scenario " + std::to_string(scenario) +
                           " does not exist: " + rates.source + " has " +
                           std::to_string(rates.rows.size()) + " and " + latencies.source +
                           " has " + std::to_string(latencies.rows.size()) + " scenarios");
  const auto& rate_row = rates.rows[scenario - 1];
  const auto& lat_row = latencies.rows[scenario - 1];
  if (rate_row.size() != profiles.size() || lat_row.size() != profiles.size())
    return InvalidArgument("scenario " + std::to_string(scenario) + ": the SLO tables have " +
                           std::to_string(rate_row.size()) + " and " +
                           std::to_string(lat_row.size()) + " columns for " +
                           std::to_string(profiles.size()) + " profiled models");
  std::vector<InferenceService> out;
  for (size_t i = 0; i < profiles.size(); ++i) {
    const SloCell& r = rate_row[i];
    const SloCell& l = lat_row[i];
    if (r.value.has_value() != l.value.has_value()) {
      const bool rate_given = r.value.has_value();
      const SloTable& given = rate_given ? rates : latencies;
      const SloTable& missing = rate_given ? latencies : rates;
      const SloCell& g = rate_given ? r : l;
      const SloCell& m = rate_given ? l : r;
      return InvalidArgument(Where(given.source, g.line, g.column) + ": column '" +
                             profiles[i].model + "': " + (rate_given ? "rate" : "latency SLO") +
                             " given but the " + (rate_given ? "latency SLO" : "rate") +
                             " is N/A at " + Where(missing.source, m.line, m.column));
    }
    if (!r.value) continue;
    out.push_back({profiles[i].model, *r.value, *l.value});
  }
  return out;
}

Result<std::vector<ParvaDeployRow>> ParseParvaDeploy(std::string_view content,
                                                     const std::string& source,
                                                     const std::vector<std::string>& models) {
  auto rows = ParseCsv(SkipUtf8Bom(content), source);
  if (!rows.ok()) return rows.status();
  TESSERA_RETURN_IF_ERROR(CheckHeader(*rows, source, kParvaDeployHeader));
  if (rows->size() == 1)
    return InvalidArgument(Where(source, (*rows)[0].line, 1) + ": no segments after the header");
  std::vector<ParvaDeployRow> out;
  for (size_t r = 1; r < rows->size(); ++r) {
    const CsvRow& row = (*rows)[r];
    TESSERA_RETURN_IF_ERROR(CheckWidth(row, 7, source));
    const auto& f = row.fields;
    ParvaDeployRow d;
    d.line = row.line;
    auto node = ParseInt(source, f[0], "Num instance", 0, kMaxNodes);
    if (!node.ok()) return node.status();
    auto gpu = ParseInt(source, f[1], "Num GPU", 0, kParvaGpusPerNode - 1);
    if (!gpu.ok()) return gpu.status();
    d.model = f[2].text;
    if (std::find(models.begin(), models.end(), d.model) == models.end())
      return CsvFieldError(source, f[2], "Model",
                           "unknown model '" + d.model + "' (known: " + Known(models) + ")");
    auto placement = ParseInt(source, f[3], "Placement", 0, 7);
    if (!placement.ok()) return placement.status();
    auto size = ParseSize(source, f[4], "Instance size");
    if (!size.ok()) return size.status();
    auto batch = ParseInt(source, f[5], "Batch size", 1, kMaxBatch);
    if (!batch.ok()) return batch.status();
    auto procs = ParseInt(source, f[6], "Num proc", 1, kMaxProcs);
    if (!procs.ok()) return procs.status();
    d.node = *node;
    d.gpu = *gpu;
    d.placement = *placement;
    d.gpcs = *size;
    d.batch = *batch;
    d.procs = *procs;
    out.push_back(std::move(d));
  }
  return out;
}

Result<std::vector<ParvaDeployRow>> ReadParvaDeploy(const std::string& path,
                                                    const std::vector<std::string>& models) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  return ParseParvaDeploy(*text, path, models);
}

std::string ParvaDeployCsv(const std::vector<ParvaDeployRow>& rows) {
  std::string out = std::string(kParvaDeployHeader) + "\n";
  for (const ParvaDeployRow& d : rows) {
    out += std::to_string(d.node) + "," + std::to_string(d.gpu) + "," + d.model + "," +
           std::to_string(d.placement) + "," + std::to_string(d.gpcs) + "," +
           std::to_string(d.batch) + "," + std::to_string(d.procs) + "\n";
  }
  return out;
}

std::vector<ParvaDeployRow> ParvaDeployFromPlan(const InferencePlan& plan) {
  std::vector<std::pair<std::pair<int, int>, ParvaDeployRow>> keyed;
  for (const InferenceServicePlan& s : plan.services) {
    for (const InferenceSegment& seg : s.segments) {
      ParvaDeployRow d;
      d.node = seg.gpu / kParvaGpusPerNode;
      d.gpu = seg.gpu % kParvaGpusPerNode;
      d.model = s.model;
      d.placement = seg.start;
      d.gpcs = seg.gpcs;
      d.batch = seg.batch;
      d.procs = seg.procs;
      keyed.push_back({{seg.gpu, seg.start}, std::move(d)});
    }
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<ParvaDeployRow> out;
  for (auto& [key, d] : keyed) out.push_back(std::move(d));
  return out;
}

}  // namespace tessera
