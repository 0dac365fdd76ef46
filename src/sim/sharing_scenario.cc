#include "sim/sharing_scenario.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/random.h"
#include "sim/csv.h"
#include "sim/json_positions.h"
#include "sim/json_reader.h"

namespace tessera {
namespace {

using nlohmann::json;

constexpr int64_t kMaxHorizonS = 366LL * 86400;
constexpr int kMaxNodes = 10000;
constexpr int kMaxClasses = 100;
constexpr int kMaxPhases = 1000;
constexpr double kMaxRatePerHour = 1e6;
constexpr double kMaxMultiplier = 1000;
constexpr double kMaxCpuCores = 65536;
constexpr double kMaxMemoryGib = 1 << 20;
constexpr double kMaxGpuMemoryGib = 4096;
constexpr double kMinGpuMemoryGib = 0.01;
constexpr int64_t kMaxSeconds = 1000000000;

bool ValidTesseraProtection(const std::string& m) {
  return m == "off" || m == "on";
}

// Validates the parsed document against the schema, with positions for the errors.
class Reader : public JsonSchemaReader {
 public:
  using JsonSchemaReader::JsonSchemaReader;

  Status String(const json& obj, const char* key, const std::string& path, std::string* out) const {
    if (!obj.contains(key)) return Status::Ok();
    const json& v = obj.at(key);
    if (!v.is_string()) return Error(JsonChild(path, key), "must be a string");
    *out = v.get<std::string>();
    return Status::Ok();
  }

  // A number, or [low, high] with low <= high; integers only when `integer`.
  Status Range(const json& obj, const char* key, const std::string& parent, double lo, double hi,
               bool lo_open, bool integer, SharingRange* out) const {
    if (!obj.contains(key)) return Status::Ok();
    const std::string path = JsonChild(parent, key);
    const json& v = obj.at(key);
    auto one = [&](const json& x, const std::string& p, double* d) -> Status {
      if (integer) {
        int64_t i = 0;
        TESSERA_RETURN_IF_ERROR(Int(x, p, static_cast<int64_t>(lo), static_cast<int64_t>(hi), &i));
        *d = static_cast<double>(i);
        return Status::Ok();
      }
      return Number(x, p, lo, hi, lo_open, d);
    };
    if (v.is_number()) {
      TESSERA_RETURN_IF_ERROR(one(v, path, &out->lo));
      out->hi = out->lo;
      return Status::Ok();
    }
    if (!v.is_array() || v.size() != 2)
      return Error(path, "must be a number or a [low, high] pair");
    TESSERA_RETURN_IF_ERROR(one(v[0], JsonIndex(path, 0), &out->lo));
    TESSERA_RETURN_IF_ERROR(one(v[1], JsonIndex(path, 1), &out->hi));
    if (out->lo > out->hi)
      return Error(
          path, "low end " + FormatNumber(out->lo) + " exceeds high end " + FormatNumber(out->hi));
    return Status::Ok();
  }
};

Status ReadNodeGroup(const Reader& r, const json& v, const std::string& path, SharingNodeGroup* g) {
  TESSERA_RETURN_IF_ERROR(
      r.Object(v, path,
               {"name_prefix", "count", "gpu_model", "gpus_per_node", "cpu_cores", "memory_gib",
                "static_mig_layout", "static_mig_gpus"},
               {"name_prefix", "count", "gpu_model", "gpus_per_node", "cpu_cores", "memory_gib"}));
  TESSERA_RETURN_IF_ERROR(r.String(v, "name_prefix", path, &g->name_prefix));
  if (g->name_prefix.empty() || g->name_prefix.size() > 63)
    return r.Error(JsonChild(path, "name_prefix"), "must be 1..63 characters");
  TESSERA_RETURN_IF_ERROR(r.IntKey(v, "count", path, 1, kMaxNodes, &g->count));
  std::string model;
  TESSERA_RETURN_IF_ERROR(r.String(v, "gpu_model", path, &model));
  const GpuCatalog& cat = GpuCatalog::Builtin();
  const auto id = cat.Find(model);
  if (!id)
    return r.Error(JsonChild(path, "gpu_model"),
                   "unknown GPU model '" + model + "' (known: " + cat.KnownNames() + ")");
  if (cat.Get(*id).memory_mib <= 0)
    return r.Error(JsonChild(path, "gpu_model"),
                   "GPU model '" + model + "' has no known memory size; sharing needs one");
  g->model = *id;
  TESSERA_RETURN_IF_ERROR(
      r.IntKey(v, "gpus_per_node", path, 1, kMaxGpusPerNode, &g->gpus_per_node));
  double cores = 0, mem = 0;
  TESSERA_RETURN_IF_ERROR(r.NumberKey(v, "cpu_cores", path, 0, kMaxCpuCores, true, &cores));
  TESSERA_RETURN_IF_ERROR(r.NumberKey(v, "memory_gib", path, 0, kMaxMemoryGib, true, &mem));
  g->cpu_milli = std::llround(cores * 1000);
  g->memory_mib = std::llround(mem * 1024);
  if (g->cpu_milli < 1) return r.Error(JsonChild(path, "cpu_cores"), "must be at least 0.001");
  if (g->memory_mib < 1) return r.Error(JsonChild(path, "memory_gib"), "must be at least 1 MiB");
  std::string layout;
  TESSERA_RETURN_IF_ERROR(r.String(v, "static_mig_layout", path, &layout));
  if (v.contains("static_mig_layout")) {
    const MigGeometry* geo = MigGeometryFor(g->model);
    if (!geo)
      return r.Error(JsonChild(path, "static_mig_layout"), "GPU model '" + model + "' has no MIG");
    auto parsed = ParseMigLayout(*geo, layout);
    if (!parsed.ok())
      return r.Error(JsonChild(path, "static_mig_layout"), parsed.status().message());
    if (parsed->empty())
      return r.Error(JsonChild(path, "static_mig_layout"), "a static layout needs an instance");
    g->static_mig_layout = *parsed;
    g->static_mig_gpus = g->gpus_per_node;
  }
  if (v.contains("static_mig_gpus")) {
    if (g->static_mig_layout.empty())
      return r.Error(JsonChild(path, "static_mig_gpus"), "needs a static_mig_layout");
    TESSERA_RETURN_IF_ERROR(
        r.IntKey(v, "static_mig_gpus", path, 0, g->gpus_per_node, &g->static_mig_gpus));
  }
  return Status::Ok();
}

Status ReadIsolation(const Reader& r, const json& v, const std::string& path, SharingClass* c) {
  if (!v.is_object()) return r.Error(path, "must be an object of weights by isolation class");
  if (v.empty()) return r.Error(path, "needs at least one isolation class");
  double w[3] = {0, 0, 0};
  double total = 0;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    const json& x = it.value();
    const std::string p = JsonChild(path, k);
    auto iso = ParseIsolation(k);
    if (!iso.ok()) return r.KeyError(p, iso.status().message());
    TESSERA_RETURN_IF_ERROR(r.Number(x, p, 0, 1e9, false, &w[static_cast<int>(*iso)]));
    total += w[static_cast<int>(*iso)];
  }
  if (!(total > 0)) return r.Error(path, "needs a positive weight");
  for (int i = 0; i < 3; ++i) c->isolation_weight[i] = w[i];
  return Status::Ok();
}

Status ReadClass(const Reader& r, const json& v, const std::string& path, SharingClass* c) {
  TESSERA_RETURN_IF_ERROR(r.Object(
      v, path,
      {"name", "arrivals_per_hour", "memory_gib", "compute_pct", "whole_gpus", "isolation",
       "duration_s", "patience_s", "cpu_cores", "host_memory_gib", "gpu_models", "priority"},
      {"name", "arrivals_per_hour", "memory_gib", "duration_s"}));
  TESSERA_RETURN_IF_ERROR(r.String(v, "name", path, &c->name));
  if (c->name.empty()) return r.Error(JsonChild(path, "name"), "must not be empty");
  TESSERA_RETURN_IF_ERROR(
      r.NumberKey(v, "arrivals_per_hour", path, 0, kMaxRatePerHour, false, &c->arrivals_per_hour));
  TESSERA_RETURN_IF_ERROR(r.Range(v, "memory_gib", path, kMinGpuMemoryGib, kMaxGpuMemoryGib, false,
                                  false, &c->memory_gib));
  if (v.contains("whole_gpus")) {
    const json& w = v.at("whole_gpus");
    const std::string p = JsonChild(path, "whole_gpus");
    if (w.is_array()) {
      if (w.empty()) return r.Error(p, "needs at least one GPU count");
      for (size_t i = 0; i < w.size(); ++i) {
        int64_t n = 0;
        TESSERA_RETURN_IF_ERROR(r.Int(w[i], JsonIndex(p, i), 1, kMaxGpusPerNode, &n));
        c->whole_gpus.push_back(static_cast<int>(n));
      }
    } else {
      int64_t n = 0;
      TESSERA_RETURN_IF_ERROR(r.Int(w, p, 1, kMaxGpusPerNode, &n));
      c->whole_gpus.push_back(static_cast<int>(n));
    }
    if (v.contains("compute_pct"))
      return r.KeyError(JsonChild(path, "compute_pct"),
                        "whole-GPU workloads take whole GPUs; compute_pct applies to fractions");
  }
  TESSERA_RETURN_IF_ERROR(r.Range(v, "compute_pct", path, 1, 100, false, true, &c->compute_pct));
  if (v.contains("isolation"))
    TESSERA_RETURN_IF_ERROR(ReadIsolation(r, v.at("isolation"), JsonChild(path, "isolation"), c));
  TESSERA_RETURN_IF_ERROR(
      r.Range(v, "duration_s", path, 1, kMaxSeconds, false, true, &c->duration_s));
  TESSERA_RETURN_IF_ERROR(r.IntKey(v, "patience_s", path, 0, kMaxSeconds, &c->patience_s));
  int64_t priority = 0;
  TESSERA_RETURN_IF_ERROR(r.IntKey(v, "priority", path, -kMaxPriority, kMaxPriority, &priority));
  c->priority = static_cast<int>(priority);
  c->cpu_cores = {1, 1};
  c->host_memory_gib = {4, 4};
  TESSERA_RETURN_IF_ERROR(
      r.Range(v, "cpu_cores", path, 0, kMaxCpuCores, false, false, &c->cpu_cores));
  TESSERA_RETURN_IF_ERROR(
      r.Range(v, "host_memory_gib", path, 0, kMaxMemoryGib, false, false, &c->host_memory_gib));
  if (v.contains("gpu_models")) {
    const json& m = v.at("gpu_models");
    const std::string p = JsonChild(path, "gpu_models");
    if (!m.is_array() || m.empty()) return r.Error(p, "must be a non-empty array of model names");
    const GpuCatalog& cat = GpuCatalog::Builtin();
    for (size_t i = 0; i < m.size(); ++i) {
      if (!m[i].is_string()) return r.Error(JsonIndex(p, i), "must be a string");
      const auto id = cat.Find(m[i].get<std::string>());
      if (!id)
        return r.Error(JsonIndex(p, i), "unknown GPU model '" + m[i].get<std::string>() +
                                            "' (known: " + cat.KnownNames() + ")");
      c->gpu_models |= ModelMask{1} << *id;
    }
  }
  return Status::Ok();
}

Status ReadPhase(const Reader& r, const json& v, const std::string& path,
                 const std::vector<SharingClass>& classes, int64_t horizon, SharingPhase* ph) {
  TESSERA_RETURN_IF_ERROR(r.Object(v, path, {"name", "start_s", "rate_multipliers"}, {"start_s"}));
  TESSERA_RETURN_IF_ERROR(r.String(v, "name", path, &ph->name));
  TESSERA_RETURN_IF_ERROR(r.IntKey(v, "start_s", path, 0, horizon - 1, &ph->start_s));
  ph->multipliers.assign(classes.size(), 1.0);
  if (!v.contains("rate_multipliers")) return Status::Ok();
  const json& m = v.at("rate_multipliers");
  const std::string mp = JsonChild(path, "rate_multipliers");
  if (!m.is_object()) return r.Error(mp, "must be an object of multipliers by class name");
  for (auto it = m.begin(); it != m.end(); ++it) {
    const std::string& k = it.key();
    const json& x = it.value();
    const std::string p = JsonChild(mp, k);
    const auto cls = std::find_if(classes.begin(), classes.end(),
                                  [&](const SharingClass& c) { return c.name == k; });
    if (cls == classes.end()) return r.KeyError(p, "no workload class named '" + k + "'");
    TESSERA_RETURN_IF_ERROR(
        r.Number(x, p, 0, kMaxMultiplier, false, &ph->multipliers[cls - classes.begin()]));
  }
  return Status::Ok();
}

ModelMask MemoryMask(int64_t peak_mib, ModelMask allowed) {
  const GpuCatalog& cat = GpuCatalog::Builtin();
  ModelMask mask = 0;
  for (size_t m = 0; m < cat.size() && m < 64; ++m) {
    if (allowed != 0 && !((allowed >> m) & 1)) continue;
    if (cat.Get(static_cast<GpuModelId>(m)).memory_mib >= peak_mib) mask |= ModelMask{1} << m;
  }
  return mask;
}

int64_t MemMib(double gib) {
  return std::llround(gib * 1024);
}
int64_t CpuMilli(double cores) {
  return std::llround(cores * 1000);
}

Status CheckPlaceable(const Reader& r, const SharingScenario& s, size_t ci) {
  const SharingClass& c = s.classes[ci];
  const int gpus =
      c.whole_gpus.empty() ? 1 : *std::max_element(c.whole_gpus.begin(), c.whole_gpus.end());
  const ModelMask mask = MemoryMask(MemMib(c.memory_gib.hi), c.gpu_models);
  for (const SharingNodeGroup& g : s.node_groups) {
    if (((mask >> g.model) & 1) && g.gpus_per_node >= gpus &&
        g.cpu_milli >= CpuMilli(c.cpu_cores.hi) && g.memory_mib >= MemMib(c.host_memory_gib.hi))
      return Status::Ok();
  }
  return r.Error(JsonIndex("workloads.classes", ci),
                 "no node group can host the largest workload of class '" + c.name + "' (" +
                     FormatNumber(c.memory_gib.hi) + " GiB GPU memory x " + std::to_string(gpus) +
                     " GPU(s), " + FormatNumber(c.cpu_cores.hi) + " cores, " +
                     FormatNumber(c.host_memory_gib.hi) + " GiB host memory" +
                     (c.gpu_models ? ", allowed models" : "") + ")");
}

std::string Stem(std::string_view filename) {
  std::string s(filename);
  const size_t slash = s.find_last_of('/');
  if (slash != std::string::npos) s = s.substr(slash + 1);
  const size_t dot = s.rfind('.');
  if (dot != std::string::npos && dot > 0) s = s.substr(0, dot);
  return s;
}

}  // namespace

Result<SharingScenario> ParseSharingScenario(std::string_view text, std::string_view filename) {
  text = SkipUtf8Bom(text);
  const std::string file(filename);
  json doc;
  TESSERA_RETURN_IF_ERROR(ParseJsonText(text, file, &doc));
  JsonPositions index;
  size_t dup_at = 0;
  const std::string dup = index.Build(text, &dup_at);
  if (!dup.empty())
    return InvalidArgument(file + ":" + LineCol(text, dup_at) + ": " + dup + ": duplicate key");
  const Reader r(text, file, index);

  SharingScenario s;
  TESSERA_RETURN_IF_ERROR(
      r.Object(doc, "", {"name", "seed", "horizon_s", "nodes", "strategies", "workloads"},
               {"horizon_s", "nodes", "workloads"}));
  s.name = Stem(filename);
  TESSERA_RETURN_IF_ERROR(r.String(doc, "name", "", &s.name));
  if (doc.contains("seed")) {
    const json& v = doc.at("seed");
    if (!v.is_number_unsigned()) return r.Error("seed", "must be a non-negative integer");
    s.seed = v.get<uint64_t>();
  }
  TESSERA_RETURN_IF_ERROR(r.IntKey(doc, "horizon_s", "", 1, kMaxHorizonS, &s.horizon_s));

  const json& nodes = doc.at("nodes");
  if (!nodes.is_array() || nodes.empty())
    return r.Error("nodes", "must be a non-empty array of node groups");
  std::set<std::string> prefixes;
  int64_t total_nodes = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string p = JsonIndex("nodes", i);
    SharingNodeGroup g;
    TESSERA_RETURN_IF_ERROR(ReadNodeGroup(r, nodes[i], p, &g));
    if (!prefixes.insert(g.name_prefix).second)
      return r.Error(JsonChild(p, "name_prefix"), "duplicate name prefix '" + g.name_prefix + "'");
    total_nodes += g.count;
    if (total_nodes > kMaxNodes)
      return r.Error(JsonChild(p, "count"),
                     "more than " + std::to_string(kMaxNodes) + " nodes in all");
    s.node_groups.push_back(std::move(g));
  }
  std::set<std::string> names;
  for (const auto& spec : SharingNodeSpecs(s)) {
    if (!names.insert(spec.name).second)
      return r.Error("nodes", "node name '" + spec.name + "' occurs twice (overlapping prefixes)");
  }

  if (doc.contains("strategies")) {
    const json& st = doc.at("strategies");
    TESSERA_RETURN_IF_ERROR(r.Object(
        st, "strategies", {"timeslice_replicas", "mps_clients", "tessera_protection"}, {}));
    TESSERA_RETURN_IF_ERROR(
        r.IntKey(st, "timeslice_replicas", "strategies", 1, 48, &s.timeslice_replicas));
    TESSERA_RETURN_IF_ERROR(r.IntKey(st, "mps_clients", "strategies", 1, 48, &s.mps_clients));
    TESSERA_RETURN_IF_ERROR(
        r.String(st, "tessera_protection", "strategies", &s.tessera_protection));
    if (!ValidTesseraProtection(s.tessera_protection))
      return r.Error(JsonChild("strategies", "tessera_protection"), "must be \"off\" or \"on\"");
  }

  const json& wl = doc.at("workloads");
  TESSERA_RETURN_IF_ERROR(r.Object(wl, "workloads", {"phases", "classes"}, {"classes"}));
  const json& classes = wl.at("classes");
  if (!classes.is_array() || classes.empty() || classes.size() > kMaxClasses)
    return r.Error("workloads.classes",
                   "must be an array of 1.." + std::to_string(kMaxClasses) + " workload classes");
  for (size_t i = 0; i < classes.size(); ++i) {
    const std::string p = JsonIndex("workloads.classes", i);
    SharingClass c;
    TESSERA_RETURN_IF_ERROR(ReadClass(r, classes[i], p, &c));
    for (const SharingClass& o : s.classes) {
      if (o.name == c.name)
        return r.Error(JsonChild(p, "name"), "duplicate class '" + c.name + "'");
    }
    s.classes.push_back(std::move(c));
    TESSERA_RETURN_IF_ERROR(CheckPlaceable(r, s, i));
  }

  if (wl.contains("phases")) {
    const json& phases = wl.at("phases");
    if (!phases.is_array() || phases.empty() || phases.size() > kMaxPhases)
      return r.Error("workloads.phases",
                     "must be an array of 1.." + std::to_string(kMaxPhases) + " phases");
    for (size_t i = 0; i < phases.size(); ++i) {
      const std::string p = JsonIndex("workloads.phases", i);
      SharingPhase ph;
      TESSERA_RETURN_IF_ERROR(ReadPhase(r, phases[i], p, s.classes, s.horizon_s, &ph));
      if (i == 0 && ph.start_s != 0)
        return r.Error(JsonChild(p, "start_s"), "the first phase starts at 0");
      if (i > 0 && ph.start_s <= s.phases.back().start_s)
        return r.Error(JsonChild(p, "start_s"), "phases must start in increasing order");
      s.phases.push_back(std::move(ph));
    }
  } else {
    s.phases.push_back(SharingPhase{"all", 0, std::vector<double>(s.classes.size(), 1.0)});
  }

  const double expected = ExpectedSharingArrivals(s);
  if (expected > static_cast<double>(kMaxSharingWorkloads))
    return r.Error("workloads",
                   "about " + FormatNumber(std::round(expected)) +
                       " workloads expected over the horizon, more than the limit of " +
                       std::to_string(kMaxSharingWorkloads));
  return s;
}

Result<SharingScenario> ReadSharingScenario(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  return ParseSharingScenario(*text, path);
}

std::vector<NodeSpec> SharingNodeSpecs(const SharingScenario& s) {
  std::vector<NodeSpec> out;
  for (const SharingNodeGroup& g : s.node_groups) {
    for (int i = 0; i < g.count; ++i) {
      NodeSpec n;
      n.name = g.name_prefix + "-" + std::to_string(i);
      n.cpu = MilliCpu(g.cpu_milli);
      n.memory = MiB(g.memory_mib);
      n.gpu_count = g.gpus_per_node;
      n.model = g.model;
      out.push_back(std::move(n));
    }
  }
  return out;
}

int SharingGpuCount(const SharingScenario& s) {
  int n = 0;
  for (const SharingNodeGroup& g : s.node_groups) n += g.count * g.gpus_per_node;
  return n;
}

double ExpectedSharingArrivals(const SharingScenario& s) {
  double total = 0;
  for (size_t p = 0; p < s.phases.size(); ++p) {
    const int64_t end = p + 1 < s.phases.size() ? s.phases[p + 1].start_s : s.horizon_s;
    const double hours = static_cast<double>(end - s.phases[p].start_s) / 3600.0;
    for (size_t c = 0; c < s.classes.size(); ++c)
      total += s.classes[c].arrivals_per_hour * s.phases[p].multipliers[c] * hours;
  }
  return total;
}

namespace {

int64_t UniformInt(Rng& rng, int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  return lo + static_cast<int64_t>(rng.Uniform(static_cast<uint64_t>(hi - lo) + 1));
}

int64_t LogUniformInt(Rng& rng, int64_t lo, int64_t hi) {
  const double u = rng.UniformDouble();
  if (hi <= lo) return lo;
  const double l = std::log(static_cast<double>(lo)), h = std::log(static_cast<double>(hi));
  return std::clamp<int64_t>(std::llround(std::exp(l + u * (h - l))), lo, hi);
}

Isolation DrawIsolation(Rng& rng, const double (&w)[3]) {
  double x = rng.UniformDouble() * (w[0] + w[1] + w[2]);
  for (int i = 0; i < 3; ++i) {
    if (x < w[i]) return static_cast<Isolation>(i);
    x -= w[i];
  }
  for (int i = 2; i >= 0; --i) {
    if (w[i] > 0) return static_cast<Isolation>(i);
  }
  return Isolation::kStandard;
}

SharingWorkload Draw(Rng& rng, const SharingClass& c, int cls, SimTime arrival) {
  SharingWorkload w;
  w.cls = cls;
  w.arrival_s = arrival;
  w.patience_s = c.patience_s;
  SliceDemand& d = w.demand;
  d.memory_mib = UniformInt(rng, MemMib(c.memory_gib.lo), MemMib(c.memory_gib.hi));
  d.compute_pct = static_cast<int>(UniformInt(rng, static_cast<int64_t>(c.compute_pct.lo),
                                              static_cast<int64_t>(c.compute_pct.hi)));
  if (!c.whole_gpus.empty()) d.whole_gpus = c.whole_gpus[rng.Uniform(c.whole_gpus.size())];
  d.isolation = DrawIsolation(rng, c.isolation_weight);
  w.duration_s = LogUniformInt(rng, static_cast<int64_t>(c.duration_s.lo),
                               static_cast<int64_t>(c.duration_s.hi));
  d.cpu = MilliCpu(UniformInt(rng, CpuMilli(c.cpu_cores.lo), CpuMilli(c.cpu_cores.hi)));
  d.host_memory = MiB(UniformInt(rng, MemMib(c.host_memory_gib.lo), MemMib(c.host_memory_gib.hi)));
  d.models = MemoryMask(d.memory_mib, c.gpu_models);
  return w;
}

}  // namespace

Result<std::vector<SharingWorkload>> GenerateSharingWorkloads(const SharingScenario& s,
                                                              uint64_t seed) {
  std::vector<SharingWorkload> out;
  for (size_t ci = 0; ci < s.classes.size(); ++ci) {
    const SharingClass& c = s.classes[ci];
    Rng rng(seed ^ (0x9e3779b97f4a7c15ULL * (ci + 1)));
    auto phase_end = [&](size_t p) {
      return static_cast<double>(p + 1 < s.phases.size() ? s.phases[p + 1].start_s : s.horizon_s);
    };
    double t = 0;
    size_t p = 0;
    while (true) {
      double e = -std::log(1.0 - rng.UniformDouble());
      for (; p < s.phases.size(); ++p) {
        const double end = phase_end(p);
        const double rate = c.arrivals_per_hour * s.phases[p].multipliers[ci] / 3600.0;
        if (rate > 0 && e <= rate * (end - t)) {
          t += e / rate;
          break;
        }
        if (rate > 0) e -= rate * (end - t);
        t = end;
      }
      if (p >= s.phases.size() || t >= static_cast<double>(s.horizon_s)) break;
      const SimTime at = std::min<SimTime>(static_cast<SimTime>(std::floor(t)), s.horizon_s - 1);
      out.push_back(Draw(rng, c, static_cast<int>(ci), at));
      if (out.size() > static_cast<size_t>(kMaxSharingWorkloads))
        return ResourceExhausted("scenario '" + s.name + "' generates more than " +
                                 std::to_string(kMaxSharingWorkloads) + " workloads");
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const SharingWorkload& a, const SharingWorkload& b) {
    return a.arrival_s != b.arrival_s ? a.arrival_s < b.arrival_s : a.cls < b.cls;
  });
  for (size_t i = 0; i < out.size(); ++i) out[i].id = i;
  return out;
}

}  // namespace tessera
