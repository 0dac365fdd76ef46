#include "sim/queue_scenario.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cluster/gpu_catalog.h"
#include "sim/csv.h"
#include "sim/json_positions.h"
#include "sim/json_reader.h"
#include "sim/trace.h"

namespace tessera {
namespace {

using nlohmann::json;

constexpr int kMaxJsonDepth = 64;
constexpr int kMaxFlavors = 16;
constexpr double kMaxGpuQuota = 1e7;     // GPU-equivalents
constexpr double kMaxCpuQuota = 1e9;     // cores
constexpr double kMaxMemoryQuota = 1e9;  // GiB
constexpr double kMaxWeight = 1e6;
constexpr double kMaxSeconds = 1e10;
constexpr double kMaxCycleS = 86400;
constexpr double kMaxGpuEquivalent = 1000;
constexpr int64_t kMaxPriority = 1000000000;

// Depth check before indexing: nothing reasonable nests deeper. Empty, or the error with *at.
std::string CheckNesting(std::string_view t, size_t* at) {
  size_t depth = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '"') {
      for (++i; i < t.size() && t[i] != '"'; ++i) i += t[i] == '\\';
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth) {
        *at = i;
        return "nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels";
      }
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return "";
}

// Schema checks with positions for the errors.
class Reader : public JsonSchemaReader {
 public:
  using JsonSchemaReader::JsonSchemaReader;

  Status String(const json& obj, const char* key, const std::string& path, size_t max_len,
                std::string* out) const {
    if (!obj.contains(key)) return Status::Ok();
    const json& v = obj.at(key);
    const std::string p = JsonChild(path, key);
    if (!v.is_string()) return Error(p, "must be a string");
    const std::string s = v.get<std::string>();
    if (s.empty() || s.size() > max_len)
      return Error(p, "must be 1.." + std::to_string(max_len) + " characters");
    *out = s;
    return Status::Ok();
  }

  Status Model(const json& v, const std::string& path, GpuModelId* out) const {
    if (!v.is_string()) return Error(path, "must be a GPU model name");
    const GpuCatalog& cat = GpuCatalog::Builtin();
    const auto id = cat.Find(v.get<std::string>());
    if (!id)
      return Error(path, "unknown GPU model '" + v.get<std::string>() +
                             "' (known: " + cat.KnownNames() + ")");
    *out = *id;
    return Status::Ok();
  }
};

// Expands "{i}" (node index in the group) and "{i/K}" (index divided by K) in a label value.
Result<std::string> ExpandLabel(const std::string& value, int index) {
  std::string out;
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] != '{') {
      out += value[i];
      continue;
    }
    const size_t close = value.find('}', i);
    const std::string ph = value.substr(i, close == std::string::npos ? close : close - i + 1);
    if (ph == "{i}") {
      out += std::to_string(index);
    } else if (ph.size() > 4 && ph.compare(0, 3, "{i/") == 0 && close != std::string::npos) {
      int k = 0;
      const char* b = ph.data() + 3;
      const char* e = ph.data() + ph.size() - 1;
      auto [p, ec] = std::from_chars(b, e, k);
      if (ec != std::errc() || p != e || k < 1)
        return InvalidArgument("placeholder '" + ph + "' needs a positive divisor");
      out += std::to_string(index / k);
    } else {
      return InvalidArgument("unknown placeholder '" + ph + "' (known: {i}, {i/K})");
    }
    i = close;
  }
  return out;
}

Status ReadNodeGroup(const Reader& r, const json& v, const std::string& path,
                     std::vector<NodeSpec>* nodes) {
  TESSERA_RETURN_IF_ERROR(r.Object(
      v, path, {"name_prefix", "count", "gpu_model", "gpus", "cpu_cores", "memory_gib", "labels"},
      {"name_prefix", "count", "cpu_cores", "memory_gib"}));
  std::string prefix;
  TESSERA_RETURN_IF_ERROR(r.String(v, "name_prefix", path, 63, &prefix));
  int64_t count = 0, gpus = 0;
  TESSERA_RETURN_IF_ERROR(r.IntKey(v, "count", path, 1, kMaxQueueNodes, &count));
  TESSERA_RETURN_IF_ERROR(r.IntKey(v, "gpus", path, 0, kMaxGpusPerNode, &gpus));
  GpuModelId model = kNoGpuModel;
  if (v.contains("gpu_model")) {
    if (gpus == 0) return r.Error(JsonChild(path, "gpu_model"), "a GPU model on nodes with 0 gpus");
    TESSERA_RETURN_IF_ERROR(r.Model(v.at("gpu_model"), JsonChild(path, "gpu_model"), &model));
  } else if (gpus > 0) {
    return r.Error(path, "missing required key 'gpu_model' (the group has GPUs)");
  }
  double cores = 0, mem = 0;
  TESSERA_RETURN_IF_ERROR(r.NumberKey(v, "cpu_cores", path, 0, 65536, true, &cores));
  TESSERA_RETURN_IF_ERROR(r.NumberKey(v, "memory_gib", path, 0, 1 << 20, true, &mem));
  const int64_t cpu_milli = std::llround(cores * 1000);
  const int64_t mem_mib = std::llround(mem * 1024);
  if (cpu_milli < 1) return r.Error(JsonChild(path, "cpu_cores"), "must be at least 0.001");
  if (mem_mib < 1) return r.Error(JsonChild(path, "memory_gib"), "must be at least 1 MiB");
  std::vector<std::pair<std::string, std::string>> labels;
  if (v.contains("labels")) {
    const json& l = v.at("labels");
    const std::string lp = JsonChild(path, "labels");
    if (!l.is_object()) return r.Error(lp, "must be an object of label values by key");
    for (auto it = l.begin(); it != l.end(); ++it) {
      const std::string p = JsonChild(lp, it.key());
      if (it.key().empty() || it.key().size() > 253)
        return r.KeyError(p, "label keys must be 1..253 characters");
      if (!it.value().is_string()) return r.Error(p, "must be a string");
      const std::string value = it.value().get<std::string>();
      auto probe = ExpandLabel(value, 0);
      if (!probe.ok()) return r.Error(p, probe.status().message());
      labels.emplace_back(it.key(), value);
    }
  }
  for (int i = 0; i < count; ++i) {
    NodeSpec n;
    n.name = prefix + "-" + std::to_string(i);
    n.cpu = MilliCpu(cpu_milli);
    n.memory = MiB(mem_mib);
    n.gpu_count = static_cast<int>(gpus);
    n.model = model;
    for (const auto& [key, value] : labels) n.labels[key] = *ExpandLabel(value, i);
    nodes->push_back(std::move(n));
  }
  return Status::Ok();
}

// A quota object {gpu, cpu, memory_gib}; `fallback` supplies omitted resources.
Status ReadResources(const Reader& r, const json& v, const std::string& path, bool gpu_required,
                     const Resources& fallback, Resources* out) {
  TESSERA_RETURN_IF_ERROR(r.Object(v, path, {"gpu", "cpu", "memory_gib"},
                                   gpu_required ? std::initializer_list<const char*>{"gpu"}
                                                : std::initializer_list<const char*>{}));
  *out = fallback;
  double x = 0;
  if (v.contains("gpu")) {
    TESSERA_RETURN_IF_ERROR(r.NumberKey(v, "gpu", path, 0, kMaxGpuQuota, false, &x));
    out->gpu = std::llround(x * 1000);
  }
  if (v.contains("cpu")) {
    TESSERA_RETURN_IF_ERROR(r.NumberKey(v, "cpu", path, 0, kMaxCpuQuota, false, &x));
    out->cpu = std::llround(x * 1000);
  }
  if (v.contains("memory_gib")) {
    TESSERA_RETURN_IF_ERROR(r.NumberKey(v, "memory_gib", path, 0, kMaxMemoryQuota, false, &x));
    out->memory = std::llround(x * 1024);
  }
  return Status::Ok();
}

Status ReadFlavor(const Reader& r, const json& v, const std::string& path, FlavorQuota* f) {
  TESSERA_RETURN_IF_ERROR(
      r.Object(v, path, {"name", "models", "nominal", "borrowing_limit", "lending_limit"},
               {"name", "nominal"}));
  TESSERA_RETURN_IF_ERROR(r.String(v, "name", path, 63, &f->name));
  if (v.contains("models")) {
    const json& m = v.at("models");
    const std::string mp = JsonChild(path, "models");
    if (!m.is_array()) return r.Error(mp, "must be an array of GPU model names");
    for (size_t i = 0; i < m.size(); ++i) {
      GpuModelId id = 0;
      TESSERA_RETURN_IF_ERROR(r.Model(m[i], JsonIndex(mp, i), &id));
      f->models |= ModelMask{1} << id;
    }
  }
  const Resources unlimited{kUnlimitedQuota, kUnlimitedQuota, kUnlimitedQuota};
  TESSERA_RETURN_IF_ERROR(ReadResources(r, v.at("nominal"), JsonChild(path, "nominal"), true,
                                        {0, kUnlimitedQuota, kUnlimitedQuota}, &f->nominal));
  if (v.contains("borrowing_limit")) {
    Resources b;
    TESSERA_RETURN_IF_ERROR(ReadResources(
        r, v.at("borrowing_limit"), JsonChild(path, "borrowing_limit"), false, unlimited, &b));
    f->borrowing_limit = b;
  }
  if (v.contains("lending_limit")) {
    Resources l;
    const std::string lp = JsonChild(path, "lending_limit");
    TESSERA_RETURN_IF_ERROR(ReadResources(r, v.at("lending_limit"), lp, false, f->nominal, &l));
    const char* names[] = {"gpu", "cpu", "memory_gib"};
    const int64_t lend[] = {l.gpu, l.cpu, l.memory};
    const int64_t nom[] = {f->nominal.gpu, f->nominal.cpu, f->nominal.memory};
    for (int i = 0; i < 3; ++i) {
      if (lend[i] > nom[i])
        return r.Error(JsonChild(lp, names[i]), "lends more than the nominal quota");
    }
    f->lending_limit = l;
  }
  return Status::Ok();
}

// The boolean keys are the short form: preempt_within_queue true/false = LowerPriority/Never,
// reclaim true/false = Any/Never.
Status ReadPriorityPolicy(const Reader& r, const json& v, const std::string& path, QueueSpec* q) {
  for (const auto& [flag, named] : {std::pair{"preempt_within_queue", "within_queue_preemption"},
                                    std::pair{"reclaim", "reclaim_within_cohort"}}) {
    if (v.contains(flag) && v.contains(named))
      return r.KeyError(JsonChild(path, named),
                        std::string("give either ") + flag + " or " + named + ", not both");
  }
  bool within = true, reclaim = true;
  TESSERA_RETURN_IF_ERROR(r.Bool(v, "preempt_within_queue", path, &within));
  TESSERA_RETURN_IF_ERROR(r.Bool(v, "reclaim", path, &reclaim));
  if (!within) q->within_queue = WithinQueuePreemption::kNever;
  if (!reclaim) q->reclaim = ReclaimPreemption::kNever;
  std::string text;
  auto named = [&](const char* key, auto parse, auto* out) -> Status {
    text.clear();
    TESSERA_RETURN_IF_ERROR(r.String(v, key, path, 64, &text));
    if (text.empty()) return Status::Ok();
    auto value = parse(text);
    if (!value.ok()) return r.Error(JsonChild(path, key), value.status().message());
    *out = *value;
    return Status::Ok();
  };
  TESSERA_RETURN_IF_ERROR(
      named("within_queue_preemption", ParseWithinQueuePreemption, &q->within_queue));
  TESSERA_RETURN_IF_ERROR(named("reclaim_within_cohort", ParseReclaimPreemption, &q->reclaim));
  return named("queueing_strategy", ParseQueueingStrategy, &q->queueing);
}

Status ReadQueue(const Reader& r, const json& v, const std::string& path,
                 const std::vector<std::string>& cohorts, QueueSpec* q) {
  TESSERA_RETURN_IF_ERROR(
      r.Object(v, path,
               {"name", "cohort", "flavors", "weight", "preempt_within_queue", "reclaim",
                "within_queue_preemption", "reclaim_within_cohort", "queueing_strategy"},
               {"name", "flavors"}));
  TESSERA_RETURN_IF_ERROR(r.String(v, "name", path, 253, &q->name));
  TESSERA_RETURN_IF_ERROR(r.String(v, "cohort", path, 253, &q->cohort));
  if (!q->cohort.empty() && std::find(cohorts.begin(), cohorts.end(), q->cohort) == cohorts.end())
    return r.Error(JsonChild(path, "cohort"),
                   "cohort '" + q->cohort + "' is not declared in \"cohorts\"");
  TESSERA_RETURN_IF_ERROR(r.NumberKey(v, "weight", path, 0, kMaxWeight, true, &q->weight));
  TESSERA_RETURN_IF_ERROR(ReadPriorityPolicy(r, v, path, q));
  const json& fl = v.at("flavors");
  const std::string fp = JsonChild(path, "flavors");
  if (!fl.is_array() || fl.empty() || fl.size() > kMaxFlavors)
    return r.Error(fp, "must be an array of 1.." + std::to_string(kMaxFlavors) + " flavors");
  for (size_t i = 0; i < fl.size(); ++i) {
    FlavorQuota f;
    TESSERA_RETURN_IF_ERROR(ReadFlavor(r, fl[i], JsonIndex(fp, i), &f));
    for (const FlavorQuota& o : q->flavors) {
      if (o.name == f.name)
        return r.Error(JsonChild(JsonIndex(fp, i), "name"), "duplicate flavor '" + f.name + "'");
    }
    q->flavors.push_back(std::move(f));
  }
  return Status::Ok();
}

Status ReadAdmission(const Reader& r, const json& v, AdmissionConfig* c) {
  const std::string path = "admission";
  TESSERA_RETURN_IF_ERROR(
      r.Object(v, path,
               {"usage_half_life_s", "backfill", "reservations", "preemption", "fair_sharing",
                "strict_fifo", "min_runtime_s", "gpu_equivalents"},
               {}));
  TESSERA_RETURN_IF_ERROR(
      r.NumberKey(v, "usage_half_life_s", path, 0, kMaxSeconds, false, &c->usage_half_life_s));
  TESSERA_RETURN_IF_ERROR(r.Bool(v, "backfill", path, &c->backfill));
  TESSERA_RETURN_IF_ERROR(r.Bool(v, "reservations", path, &c->reservations));
  TESSERA_RETURN_IF_ERROR(r.Bool(v, "preemption", path, &c->preemption));
  TESSERA_RETURN_IF_ERROR(r.Bool(v, "fair_sharing", path, &c->fair_sharing));
  TESSERA_RETURN_IF_ERROR(r.Bool(v, "strict_fifo", path, &c->strict_fifo));
  TESSERA_RETURN_IF_ERROR(
      r.NumberKey(v, "min_runtime_s", path, 0, kMaxSeconds, false, &c->min_runtime_s));
  if (v.contains("gpu_equivalents")) {
    const json& g = v.at("gpu_equivalents");
    const std::string gp = JsonChild(path, "gpu_equivalents");
    if (!g.is_object()) return r.Error(gp, "must be an object of weights by GPU model");
    const GpuCatalog& cat = GpuCatalog::Builtin();
    for (auto it = g.begin(); it != g.end(); ++it) {
      const std::string p = JsonChild(gp, it.key());
      if (!cat.Find(it.key()))
        return r.KeyError(p,
                          "unknown GPU model '" + it.key() + "' (known: " + cat.KnownNames() + ")");
      double w = 0;
      TESSERA_RETURN_IF_ERROR(r.Number(it.value(), p, 0, kMaxGpuEquivalent, true, &w));
      c->gpu_equivalents[it.key()] = w;
    }
  }
  return Status::Ok();
}

std::string Stem(std::string_view filename) {
  return std::filesystem::path(std::string(filename)).stem().string();
}

Result<double> NumberField(const std::string& source, const CsvField& f, const std::string& column,
                           double lo, double hi, bool lo_open) {
  double v = 0;
  const char* b = f.text.data();
  const char* e = b + f.text.size();
  if (f.text.empty()) return CsvFieldError(source, f, column, "empty value, expected a number");
  auto [p, ec] = std::from_chars(b, e, v, std::chars_format::fixed | std::chars_format::scientific);
  if (ec != std::errc() || p != e || !std::isfinite(v))
    return CsvFieldError(source, f, column, "'" + f.text + "' is not a number");
  if (v < lo || (lo_open && v == lo) || v > hi)
    return CsvFieldError(source, f, column,
                         f.text + " outside the allowed range " + (lo_open ? "(" : "[") +
                             FormatNumber(lo) + ", " + FormatNumber(hi) + "]");
  return v;
}

const std::vector<std::string> kRequiredColumns = {
    "name", "queue", "arrival_s", "duration_s", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"};
const std::vector<std::string> kOptionalColumns = {"pods",     "min_member", "gpu_model",
                                                   "priority", "topology",   "gang_timeout_s"};

}  // namespace

Result<QueueCluster> ParseQueueCluster(std::string_view text, std::string_view filename) {
  text = SkipUtf8Bom(text);
  const std::string file(filename);
  json doc;
  TESSERA_RETURN_IF_ERROR(ParseJsonText(text, file, &doc));
  size_t at = 0;
  std::string bad = CheckNesting(text, &at);
  JsonPositions pos;
  if (bad.empty()) {
    bad = pos.Build(text, &at);
    if (!bad.empty()) bad += ": duplicate key";
  }
  if (!bad.empty()) return InvalidArgument(file + ":" + LineCol(text, at) + ": " + bad);
  const Reader r(text, file, pos);

  QueueCluster c;
  TESSERA_RETURN_IF_ERROR(
      r.Object(doc, "", {"name", "cycle_s", "nodes", "nodes_csv", "cohorts", "queues", "admission"},
               {"queues"}));
  c.name = Stem(filename);
  TESSERA_RETURN_IF_ERROR(r.String(doc, "name", "", 253, &c.name));
  TESSERA_RETURN_IF_ERROR(r.NumberKey(doc, "cycle_s", "", 0, kMaxCycleS, true, &c.cycle_s));

  if (doc.contains("nodes") == doc.contains("nodes_csv"))
    return r.Error(doc.contains("nodes") ? "nodes_csv" : "",
                   "needs exactly one of \"nodes\" (node groups) and "
                   "\"nodes_csv\" (a node CSV)");
  if (doc.contains("nodes_csv")) {
    TESSERA_RETURN_IF_ERROR(r.String(doc, "nodes_csv", "", 4096, &c.nodes_csv));
  } else {
    const json& groups = doc.at("nodes");
    if (!groups.is_array() || groups.empty())
      return r.Error("nodes", "must be a non-empty array of node groups");
    std::set<std::string> names;
    for (size_t i = 0; i < groups.size(); ++i) {
      const std::string p = JsonIndex("nodes", i);
      const size_t before = c.nodes.size();
      TESSERA_RETURN_IF_ERROR(ReadNodeGroup(r, groups[i], p, &c.nodes));
      if (c.nodes.size() > static_cast<size_t>(kMaxQueueNodes))
        return r.Error(JsonChild(p, "count"),
                       "more than " + std::to_string(kMaxQueueNodes) + " nodes in all");
      for (size_t n = before; n < c.nodes.size(); ++n) {
        if (!names.insert(c.nodes[n].name).second)
          return r.Error(JsonChild(p, "name_prefix"),
                         "node name '" + c.nodes[n].name + "' occurs twice");
      }
    }
  }

  if (doc.contains("cohorts")) {
    const json& co = doc.at("cohorts");
    if (!co.is_array()) return r.Error("cohorts", "must be an array of cohort names");
    for (size_t i = 0; i < co.size(); ++i) {
      const std::string p = JsonIndex("cohorts", i);
      if (!co[i].is_string() || co[i].get<std::string>().empty() ||
          co[i].get<std::string>().size() > 253)
        return r.Error(p, "must be a name of 1..253 characters");
      const std::string name = co[i].get<std::string>();
      if (std::find(c.cohorts.begin(), c.cohorts.end(), name) != c.cohorts.end())
        return r.Error(p, "duplicate cohort '" + name + "'");
      c.cohorts.push_back(name);
    }
  }

  const json& queues = doc.at("queues");
  if (!queues.is_array() || queues.empty() || queues.size() > static_cast<size_t>(kMaxQueues))
    return r.Error("queues", "must be an array of 1.." + std::to_string(kMaxQueues) + " queues");
  for (size_t i = 0; i < queues.size(); ++i) {
    QueueSpec q;
    TESSERA_RETURN_IF_ERROR(ReadQueue(r, queues[i], JsonIndex("queues", i), c.cohorts, &q));
    for (const QueueSpec& o : c.queues) {
      if (o.name == q.name)
        return r.Error(JsonChild(JsonIndex("queues", i), "name"),
                       "duplicate queue '" + q.name + "'");
    }
    c.queues.push_back(std::move(q));
  }

  if (doc.contains("admission"))
    TESSERA_RETURN_IF_ERROR(ReadAdmission(r, doc.at("admission"), &c.admission));
  return c;
}

Result<QueueCluster> ReadQueueCluster(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  auto c = ParseQueueCluster(*text, path);
  if (!c.ok() || c->nodes_csv.empty()) return c;
  const std::filesystem::path csv = std::filesystem::path(path).parent_path() / c->nodes_csv;
  auto nodes = ReadNodesCsv(csv.string());
  if (!nodes.ok()) return nodes.status();
  if (nodes->size() > static_cast<size_t>(kMaxQueueNodes))
    return InvalidArgument(csv.string() + ": more than " + std::to_string(kMaxQueueNodes) +
                           " nodes");
  c->nodes = std::move(nodes).value();
  return c;
}

std::vector<std::string> QueueNames(const QueueCluster& cluster) {
  std::vector<std::string> out;
  for (const QueueSpec& q : cluster.queues) out.push_back(q.name);
  return out;
}

Result<std::vector<QueueJob>> ParseQueueWorkload(std::string_view text, const std::string& source,
                                                 const std::vector<std::string>& queues) {
  auto rows = ParseCsv(SkipUtf8Bom(text), source);
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return InvalidArgument(source + ": empty file, expected a header row");
  const CsvRow& header = (*rows)[0];
  std::map<std::string, int> col;
  for (size_t i = 0; i < header.fields.size(); ++i) {
    const CsvField& f = header.fields[i];
    const bool known = std::find(kRequiredColumns.begin(), kRequiredColumns.end(), f.text) !=
                           kRequiredColumns.end() ||
                       std::find(kOptionalColumns.begin(), kOptionalColumns.end(), f.text) !=
                           kOptionalColumns.end();
    if (!known)
      return InvalidArgument(Where(source, f.line, f.column) + ": unknown column '" + f.text + "'");
    if (!col.emplace(f.text, static_cast<int>(i)).second)
      return InvalidArgument(Where(source, f.line, f.column) + ": duplicate column '" + f.text +
                             "'");
  }
  std::string missing;
  for (const std::string& c : kRequiredColumns) {
    if (!col.count(c)) missing += (missing.empty() ? "" : ", ") + c;
  }
  if (!missing.empty())
    return InvalidArgument(Where(source, header.line, 1) +
                           ": missing required column(s): " + missing);
  if (rows->size() - 1 > static_cast<size_t>(kMaxQueueJobs))
    return InvalidArgument(source + ": more than " + std::to_string(kMaxQueueJobs) + " jobs");
  const std::set<std::string> known_queues(queues.begin(), queues.end());
  auto get = [&](const std::string& name) { return col.count(name) ? col.at(name) : -1; };
  const int c_name = get("name"), c_queue = get("queue"), c_arrival = get("arrival_s"),
            c_duration = get("duration_s"), c_pods = get("pods"), c_min = get("min_member"),
            c_cpu = get("cpu_milli"), c_mem = get("memory_mib"), c_num = get("num_gpu"),
            c_milli = get("gpu_milli"), c_model = get("gpu_model"), c_prio = get("priority"),
            c_topo = get("topology"), c_timeout = get("gang_timeout_s");

  std::vector<QueueJob> out;
  std::set<std::string> names;
  for (size_t r = 1; r < rows->size(); ++r) {
    const CsvRow& row = (*rows)[r];
    if (row.fields.size() != header.fields.size())
      return InvalidArgument(Where(source, row.line, 1) + ": expected " +
                             std::to_string(header.fields.size()) + " fields, found " +
                             std::to_string(row.fields.size()));
    const auto& f = row.fields;
    auto present = [&](int c) { return c >= 0 && !f[c].text.empty(); };
    QueueJob job;
    JobSpec& s = job.spec;
    s.id = static_cast<WorkloadId>(r);
    s.name = f[c_name].text;
    if (s.name.empty()) return CsvFieldError(source, f[c_name], "name", "empty job name");
    if (!names.insert(s.name).second)
      return CsvFieldError(source, f[c_name], "name", "duplicate job name '" + s.name + "'");
    s.queue = f[c_queue].text;
    if (s.queue.empty()) return CsvFieldError(source, f[c_queue], "queue", "empty queue name");
    if (!known_queues.empty() && !known_queues.count(s.queue))
      return CsvFieldError(source, f[c_queue], "queue", "no queue named '" + s.queue + "'");
    auto arrival = NumberField(source, f[c_arrival], "arrival_s", 0, kMaxSeconds, false);
    if (!arrival.ok()) return arrival.status();
    s.arrival = *arrival;
    auto duration = NumberField(source, f[c_duration], "duration_s", 0, kMaxSeconds, true);
    if (!duration.ok()) return duration.status();
    job.duration_s = *duration;
    if (present(c_pods)) {
      auto pods = ParseCsvInt(source, f[c_pods], "pods", 1, static_cast<int64_t>(kPodsPerJob) - 1);
      if (!pods.ok()) return pods.status();
      s.pods = static_cast<int>(*pods);
    }
    if (present(c_min)) {
      auto min = ParseCsvInt(source, f[c_min], "min_member", 0, s.pods);
      if (!min.ok()) return min.status();
      s.min_member = static_cast<int>(*min);
    }
    auto demand = ParsePodDemand(source, f[c_cpu], f[c_mem], f[c_num], f[c_milli]);
    if (!demand.ok()) return demand.status();
    s.pod = *demand;
    if (present(c_model)) {
      auto mask = ParseModelList(f[c_model].text);
      if (!mask.ok())
        return CsvFieldError(source, f[c_model], "gpu_model", mask.status().message());
      if (s.pod.num_gpu == 0)
        return CsvFieldError(source, f[c_model], "gpu_model",
                             "GPU models given for a CPU-only job");
      s.pod.models = *mask;
    }
    if (present(c_prio)) {
      auto prio = ParseCsvInt(source, f[c_prio], "priority", -kMaxPriority, kMaxPriority);
      if (!prio.ok()) return prio.status();
      s.priority = static_cast<int>(*prio);
    }
    if (present(c_topo)) {
      const std::string& t = f[c_topo].text;
      if (t == "same-node") {
        s.topology = TopologyKind::kSameNode;
      } else if (t.rfind("label:", 0) == 0 && t.size() > 6) {
        s.topology = TopologyKind::kSameLabel;
        s.topology_label = t.substr(6);
      } else {
        return CsvFieldError(source, f[c_topo], "topology",
                             "'" + t + "' is not empty, 'same-node' or 'label:<key>'");
      }
    }
    if (present(c_timeout)) {
      auto timeout = NumberField(source, f[c_timeout], "gang_timeout_s", 0, kMaxSeconds, false);
      if (!timeout.ok()) return timeout.status();
      s.gang_timeout_s = *timeout;
    }
    out.push_back(std::move(job));
  }
  if (out.empty()) return InvalidArgument(source + ": no jobs");
  return out;
}

Status CompressQueueArrivals(std::vector<QueueJob>& jobs, double factor) {
  if (!std::isfinite(factor) || factor < 1)
    return InvalidArgument("time scale " + FormatNumber(factor) + " must be a finite number >= 1");
  for (QueueJob& j : jobs) j.spec.arrival /= factor;
  return Status::Ok();
}

uint64_t QueueHash(std::string_view name) {
  uint64_t h = 14695981039346656037ULL;
  for (const char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ULL;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

Result<std::vector<QueueJob>> QueueJobsFromTrace(const std::vector<Workload>& pods,
                                                 const std::vector<std::string>& queues) {
  if (queues.empty()) return InvalidArgument("trace mode needs at least one queue");
  if (pods.size() > static_cast<size_t>(kMaxQueueJobs))
    return InvalidArgument("more than " + std::to_string(kMaxQueueJobs) + " pods");
  std::vector<QueueJob> out;
  out.reserve(pods.size());
  for (size_t i = 0; i < pods.size(); ++i) {
    const Workload& w = pods[i];
    if (w.deletion < 0)
      return InvalidArgument("pod '" + w.name +
                             "' has no deletion_time; the queue simulation needs a duration");
    QueueJob job;
    job.spec.id = static_cast<WorkloadId>(i + 1);
    job.spec.name = w.name;
    job.spec.queue = queues[QueueHash(w.name) % queues.size()];
    job.spec.arrival = static_cast<double>(w.creation);
    job.spec.pod = w.demand;
    job.duration_s = std::max<double>(1, static_cast<double>(w.deletion - w.creation));
    out.push_back(std::move(job));
  }
  return out;
}

Result<std::vector<QueueJob>> ReadQueueWorkload(const std::string& path,
                                                const QueueCluster& cluster) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  const size_t eol = text->find('\n');
  auto head = ParseCsv(SkipUtf8Bom(std::string_view(*text).substr(0, eol)), path);
  if (!head.ok()) return head.status();
  bool has_queue = false, has_creation = false;
  if (!head->empty()) {
    for (const CsvField& f : (*head)[0].fields) {
      has_queue |= f.text == "queue";
      has_creation |= f.text == "creation_time";
    }
  }
  if (has_queue) return ParseQueueWorkload(*text, path, QueueNames(cluster));
  if (!has_creation)
    return InvalidArgument(Where(path, 1, 1) +
                           ": neither a queue workload (no 'queue' column) nor an Alibaba pod "
                           "trace (no 'creation_time' column)");
  auto pods = ParsePodsCsv(*text, path);
  if (!pods.ok()) return pods.status();
  auto jobs = QueueJobsFromTrace(*pods, QueueNames(cluster));
  if (!jobs.ok()) return InvalidArgument(path + ": " + jobs.status().message());
  return jobs;
}

}  // namespace tessera
