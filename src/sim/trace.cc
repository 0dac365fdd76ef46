#include "sim/trace.h"

#include <charconv>
#include <map>
#include <set>

#include "sim/csv.h"

namespace tessera {
namespace {

class Columns {
 public:
  static Result<Columns> FromHeader(const CsvRow& header, const std::string& source,
                                    const std::vector<std::string>& required,
                                    const std::vector<std::string>& optional) {
    Columns c;
    for (size_t i = 0; i < header.fields.size(); ++i) {
      const std::string& name = header.fields[i].text;
      if (c.index_.count(name))
        return InvalidArgument(Where(source, header.line, header.fields[i].column) +
                               ": duplicate column '" + name + "'");
      c.index_[name] = static_cast<int>(i);
    }
    std::string missing;
    for (const auto& r : required) {
      if (!c.index_.count(r)) missing += (missing.empty() ? "" : ", ") + r;
    }
    if (!missing.empty())
      return InvalidArgument(Where(source, header.line, 1) +
                             ": missing required column(s): " + missing);
    (void)optional;
    c.width_ = header.fields.size();
    return c;
  }
  int Get(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? -1 : it->second;
  }
  size_t width() const { return width_; }

 private:
  std::map<std::string, int> index_;
  size_t width_ = 0;
};

Result<CsvRow> CheckWidth(const CsvRow& row, const Columns& cols, const std::string& source) {
  if (row.fields.size() != cols.width())
    return InvalidArgument(Where(source, row.line, 1) + ": expected " +
                           std::to_string(cols.width()) + " fields, found " +
                           std::to_string(row.fields.size()));
  return row;
}

constexpr int64_t kMaxCpuMilli = 64LL * 1024 * 1000;  // 64k cores
constexpr int64_t kMaxMemMib = 1LL << 40;

}  // namespace

Result<ModelMask> ParseModelList(std::string_view text) {
  ModelMask mask = 0;
  const GpuCatalog& cat = GpuCatalog::Builtin();
  size_t start = 0;
  if (text.empty()) return mask;
  while (start <= text.size()) {
    size_t bar = text.find('|', start);
    std::string_view name = text.substr(start, bar == std::string_view::npos ? bar : bar - start);
    auto id = cat.Find(name);
    if (!id)
      return InvalidArgument("unknown GPU model '" + std::string(name) +
                             "' (known: " + cat.KnownNames() + ")");
    mask |= ModelMask{1} << *id;
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return mask;
}

Result<std::vector<NodeSpec>> ParseNodesCsv(std::string_view content, const std::string& source) {
  auto rows = ParseCsv(SkipUtf8Bom(content), source);
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return InvalidArgument(source + ": empty file, expected a header row");
  auto cols = Columns::FromHeader((*rows)[0], source,
                                  {"sn", "cpu_milli", "memory_mib", "gpu", "model"}, {});
  if (!cols.ok()) return cols.status();
  const int c_sn = cols->Get("sn"), c_cpu = cols->Get("cpu_milli"), c_mem = cols->Get("memory_mib"),
            c_gpu = cols->Get("gpu"), c_model = cols->Get("model");
  std::vector<NodeSpec> out;
  std::set<std::string> names;
  const GpuCatalog& cat = GpuCatalog::Builtin();
  for (size_t r = 1; r < rows->size(); ++r) {
    auto row = CheckWidth((*rows)[r], *cols, source);
    if (!row.ok()) return row.status();
    const auto& f = row->fields;
    NodeSpec n;
    n.name = f[c_sn].text;
    if (n.name.empty()) return CsvFieldError(source, f[c_sn], "sn", "empty node name");
    if (!names.insert(n.name).second)
      return CsvFieldError(source, f[c_sn], "sn", "duplicate node name '" + n.name + "'");
    auto cpu = ParseCsvInt(source, f[c_cpu], "cpu_milli", 1, kMaxCpuMilli);
    if (!cpu.ok()) return cpu.status();
    auto mem = ParseCsvInt(source, f[c_mem], "memory_mib", 1, kMaxMemMib);
    if (!mem.ok()) return mem.status();
    auto gpu = ParseCsvInt(source, f[c_gpu], "gpu", 0, kMaxGpusPerNode);
    if (!gpu.ok()) return gpu.status();
    n.cpu = MilliCpu(*cpu);
    n.memory = MiB(*mem);
    n.gpu_count = static_cast<int>(*gpu);
    const std::string& model = f[c_model].text;
    if (n.gpu_count > 0) {
      if (model.empty())
        return CsvFieldError(source, f[c_model], "model", "GPU node without a model");
      auto id = cat.Find(model);
      if (!id)
        return CsvFieldError(source, f[c_model], "model",
                             "unknown GPU model '" + model + "' (known: " + cat.KnownNames() + ")");
      n.model = *id;
    } else if (!model.empty()) {
      return CsvFieldError(source, f[c_model], "model",
                           "model '" + model + "' on a node with 0 GPUs");
    }
    out.push_back(std::move(n));
  }
  if (out.empty()) return InvalidArgument(source + ": no nodes");
  return out;
}

Result<Demand> ParsePodDemand(const std::string& source, const CsvField& cpu_milli,
                              const CsvField& memory_mib, const CsvField& num_gpu,
                              const CsvField& gpu_milli) {
  auto cpu = ParseCsvInt(source, cpu_milli, "cpu_milli", 0, kMaxCpuMilli);
  if (!cpu.ok()) return cpu.status();
  auto mem = ParseCsvInt(source, memory_mib, "memory_mib", 0, kMaxMemMib);
  if (!mem.ok()) return mem.status();
  auto num = ParseCsvInt(source, num_gpu, "num_gpu", 0, kMaxGpusPerNode);
  if (!num.ok()) return num.status();
  auto milli = ParseCsvInt(source, gpu_milli, "gpu_milli", 0, 1000);
  if (!milli.ok()) return milli.status();
  if ((*num == 0) != (*milli == 0))
    return CsvFieldError(source, gpu_milli, "gpu_milli",
                         "num_gpu " + std::to_string(*num) + " with gpu_milli " +
                             std::to_string(*milli) + ": both must be zero or both positive");
  if (*num > 1 && *milli != 1000)
    return CsvFieldError(
        source, gpu_milli, "gpu_milli",
        "a multi-GPU pod must ask for whole GPUs (1000), got " + std::to_string(*milli));
  return Demand{MilliCpu(*cpu), MiB(*mem), static_cast<int>(*num), static_cast<int>(*milli), 0};
}

Result<std::vector<Workload>> ParsePodsCsv(std::string_view content, const std::string& source) {
  auto rows = ParseCsv(SkipUtf8Bom(content), source);
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return InvalidArgument(source + ": empty file, expected a header row");
  auto cols = Columns::FromHeader((*rows)[0], source,
                                  {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"},
                                  {"gpu_spec", "creation_time", "deletion_time"});
  if (!cols.ok()) return cols.status();
  const int c_name = cols->Get("name"), c_cpu = cols->Get("cpu_milli"),
            c_mem = cols->Get("memory_mib"), c_num = cols->Get("num_gpu"),
            c_milli = cols->Get("gpu_milli"), c_spec = cols->Get("gpu_spec"),
            c_create = cols->Get("creation_time"), c_delete = cols->Get("deletion_time");
  std::vector<Workload> out;
  std::set<std::string> names;
  for (size_t r = 1; r < rows->size(); ++r) {
    auto row = CheckWidth((*rows)[r], *cols, source);
    if (!row.ok()) return row.status();
    const auto& f = row->fields;
    Workload w;
    w.name = f[c_name].text;
    if (w.name.empty()) return CsvFieldError(source, f[c_name], "name", "empty pod name");
    if (!names.insert(w.name).second)
      return CsvFieldError(source, f[c_name], "name", "duplicate pod name '" + w.name + "'");
    auto demand = ParsePodDemand(source, f[c_cpu], f[c_mem], f[c_num], f[c_milli]);
    if (!demand.ok()) return demand.status();
    w.demand = *demand;
    if (c_spec >= 0 && !f[c_spec].text.empty()) {
      auto mask = ParseModelList(f[c_spec].text);
      if (!mask.ok()) return CsvFieldError(source, f[c_spec], "gpu_spec", mask.status().message());
      if (w.demand.num_gpu == 0)
        return CsvFieldError(source, f[c_spec], "gpu_spec", "GPU models given for a CPU-only pod");
      w.demand.models = *mask;
    }
    if (c_create >= 0) {
      auto t = ParseCsvInt(source, f[c_create], "creation_time", 0, INT64_MAX / 4);
      if (!t.ok()) return t.status();
      w.creation = *t;
    }
    if (c_delete >= 0 && !f[c_delete].text.empty()) {
      auto t = ParseCsvInt(source, f[c_delete], "deletion_time", 0, INT64_MAX / 4);
      if (!t.ok()) return t.status();
      if (*t < w.creation)
        return CsvFieldError(
            source, f[c_delete], "deletion_time",
            "deletion " + std::to_string(*t) + " before creation " + std::to_string(w.creation));
      w.deletion = *t;
    }
    out.push_back(std::move(w));
  }
  if (out.empty()) return InvalidArgument(source + ": no pods");
  return out;
}

Result<std::vector<NodeSpec>> ReadNodesCsv(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  return ParseNodesCsv(*text, path);
}

Result<std::vector<Workload>> ReadPodsCsv(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  return ParsePodsCsv(*text, path);
}

}  // namespace tessera
