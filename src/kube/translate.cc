// Pod translation (TranslatePod, TranslateHeldPod): resources, GPU requests, annotations and
// constraints into a PodRequest; demands and slices per GPU model; assignments into slices.
#include "kube/translate.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "cluster/cluster_state.h"
#include "cluster/mig_geometry.h"
#include "kube/json_fields.h"
#include "kube/translate_internal.h"

namespace tessera::kube {

using namespace detail;

namespace {

using namespace json_fields;

// ---- Pod resources ----

struct GpuTotals {
  int64_t cpu_milli = 0;
  int64_t mem_mib = 0;
  int64_t gpu = 0;
  std::map<std::string, int64_t> mig;  // resource name -> count
  int64_t tessera_mem = 0;
  int64_t tessera_compute = 0;
  int64_t hami_mem = 0;
  int64_t hami_pct = 0;
  int64_t hami_cores = 0;
  bool has_tessera = false;
  bool has_hami = false;

  void Add(const GpuTotals& o) {
    cpu_milli += o.cpu_milli;
    mem_mib += o.mem_mib;
    gpu += o.gpu;
    for (const auto& [k, v] : o.mig) mig[k] += v;
    tessera_mem += o.tessera_mem;
    tessera_compute += o.tessera_compute;
    hami_mem += o.hami_mem;
    hami_pct += o.hami_pct;
    hami_cores += o.hami_cores;
    has_tessera |= o.has_tessera;
    has_hami |= o.has_hami;
  }
  void Max(const GpuTotals& o) {
    cpu_milli = std::max(cpu_milli, o.cpu_milli);
    mem_mib = std::max(mem_mib, o.mem_mib);
    gpu = std::max(gpu, o.gpu);
    for (const auto& [k, v] : o.mig) mig[k] = std::max(mig[k], v);
    tessera_mem = std::max(tessera_mem, o.tessera_mem);
    tessera_compute = std::max(tessera_compute, o.tessera_compute);
    hami_mem = std::max(hami_mem, o.hami_mem);
    hami_pct = std::max(hami_pct, o.hami_pct);
    hami_cores = std::max(hami_cores, o.hami_cores);
    has_tessera |= o.has_tessera;
    has_hami |= o.has_hami;
  }
};

bool IsGpuResource(const std::string& name) {
  return name == kResourceGpu || name.rfind(kResourceMigPrefix, 0) == 0 ||
         name == kResourceGpuMemory || name == kResourceGpuCompute || name == kResourceHamiMem ||
         name == kResourceHamiMemPct || name == kResourceHamiCores;
}

}  // namespace

namespace detail {

std::string MigProfileFromResource(const std::string& resource) {
  std::string p = resource.substr(std::string(kResourceMigPrefix).size());
  if (p.size() > 3 && p.compare(p.size() - 3, 3, ".me") == 0) p = p.substr(0, p.size() - 3) + "+me";
  return p;
}

}  // namespace detail

namespace {

std::string KnownMigProfiles() {
  std::set<std::string> names;
  for (const auto& g : AllMigGeometries())
    for (const auto& p : g.profiles) names.insert(p.name);
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

ModelMask ModelsWithProfile(const std::string& profile) {
  ModelMask m = 0;
  const auto& cat = GpuCatalog::Builtin();
  for (GpuModelId id = 0; id < cat.size() && id < 64; ++id) {
    const MigGeometry* geo = MigGeometryFor(id);
    if (geo && geo->Find(profile) >= 0) m |= ModelMask{1} << id;
  }
  return m;
}

std::string Shown(const Json& q) {
  return q.is_string() ? q.get<std::string>() : q.dump();
}

Result<GpuTotals> ContainerTotals(const Json& c, const std::string& where) {
  GpuTotals t;
  const Json* res = Field(c, "resources");
  if (!res) return t;
  if (!res->is_object()) return InvalidArgument(where + ": resources must be an object");
  const Json* limits = Field(*res, "limits");
  const Json* requests = Field(*res, "requests");
  if ((limits && !limits->is_object()) || (requests && !requests->is_object()))
    return InvalidArgument(where + ": resources.limits/requests must be objects");
  std::set<std::string> names;
  for (const Json* m : {limits, requests})
    if (m)
      for (auto it = m->begin(); it != m->end(); ++it) names.insert(it.key());

  for (const std::string& name : names) {
    const Json* lim = limits ? Field(*limits, name.c_str()) : nullptr;
    const Json* req = requests ? Field(*requests, name.c_str()) : nullptr;
    const std::string label = where + ": " + name;
    if (name == "cpu" || name == "memory") {
      const Json* q = req ? req : lim;
      if (!q) continue;
      auto v = name == "cpu" ? ParseQuantityMilli(*q) : ParseQuantityMiB(*q, true);
      if (!v.ok()) return InvalidArgument(label + ": " + v.status().message());
      if (*v < 0) return InvalidArgument(label + " must not be negative");
      (name == "cpu" ? t.cpu_milli : t.mem_mib) = *v;
      continue;
    }
    if (!IsGpuResource(name)) continue;
    const bool is_memory = name == kResourceGpuMemory;
    auto parse = [&](const Json& q) -> Result<int64_t> {
      auto v = is_memory ? ParseQuantityMiB(q, true) : ParseQuantityInt(q);
      if (!v.ok()) return InvalidArgument(label + " " + v.status().message());
      if (*v < 0) return InvalidArgument(label + " must not be negative");
      return v;
    };
    int64_t value = 0;
    if (lim) {
      auto l = parse(*lim);
      if (!l.ok()) return l.status();
      value = *l;
      if (req) {
        auto r = parse(*req);
        if (!r.ok()) return r.status();
        if (*r != *l)
          return InvalidArgument(label + " request " + Shown(*req) + " must equal its limit " +
                                 Shown(*lim));
      }
    } else {
      auto r = parse(*req);
      if (!r.ok()) return r.status();
      value = *r;
    }
    if (name == kResourceGpu) {
      t.gpu = value;
    } else if (name.rfind(kResourceMigPrefix, 0) == 0) {
      const std::string profile = MigProfileFromResource(name);
      if (ModelsWithProfile(profile) == 0)
        return InvalidArgument(label + ": unknown MIG profile \"" + profile +
                               "\" (known: " + KnownMigProfiles() + ")");
      if (value > 0) t.mig[name] = value;
    } else if (name == kResourceGpuMemory) {
      t.tessera_mem = value;
      t.has_tessera |= value > 0;
    } else if (name == kResourceGpuCompute) {
      if (value > 100)
        return InvalidArgument(label + " must be at most 100 (% of one GPU), got " +
                               std::to_string(value));
      t.tessera_compute = value;
      t.has_tessera |= value > 0;
    } else if (name == kResourceHamiMem) {
      t.hami_mem = value;
      t.has_hami |= value > 0;
    } else if (name == kResourceHamiMemPct || name == kResourceHamiCores) {
      if (value > 100)
        return InvalidArgument(label + " must be at most 100 (% of one GPU), got " +
                               std::to_string(value));
      (name == kResourceHamiMemPct ? t.hami_pct : t.hami_cores) = value;
      t.has_hami |= value > 0;
    }
  }
  return t;
}

Result<GpuTotals> PodTotals(const Json& spec) {
  GpuTotals sum, init;
  for (const char* list : {"containers", "initContainers"}) {
    const Json* cs = Field(spec, list);
    if (!cs) continue;
    if (!cs->is_array()) return InvalidArgument(std::string("spec.") + list + " must be a list");
    for (const Json& c : *cs) {
      const std::string kind = list[0] == 'c' ? "container" : "init container";
      const std::string where = kind + " \"" + Str(c, "name") + "\"";
      auto t = ContainerTotals(c, where);
      if (!t.ok()) return t.status();
      if (list[0] == 'c')
        sum.Add(*t);
      else
        init.Max(*t);
    }
  }
  sum.Max(init);
  if (const Json* overhead = Field(spec, "overhead"); overhead && overhead->is_object()) {
    if (const Json* c = Field(*overhead, "cpu")) {
      auto v = ParseQuantityMilli(*c);
      if (!v.ok()) return InvalidArgument("spec.overhead.cpu: " + v.status().message());
      sum.cpu_milli += std::max<int64_t>(0, *v);
    }
    if (const Json* m = Field(*overhead, "memory")) {
      auto v = ParseQuantityMiB(*m, true);
      if (!v.ok()) return InvalidArgument("spec.overhead.memory: " + v.status().message());
      sum.mem_mib += std::max<int64_t>(0, *v);
    }
  }
  return sum;
}

int CeilDiv(int64_t a, int64_t b) {
  return static_cast<int>((a + b - 1) / b);
}

int ShareMilli(const GpuRequest& g, int64_t gpu_memory_mib) {
  int64_t milli = std::max<int64_t>(g.compute_pct * 10, g.memory_pct * 10);
  if (g.memory_mib >= gpu_memory_mib && gpu_memory_mib > 0)
    milli = 1000;  // the whole card or more (also keeps huge requests from overflowing below)
  else if (g.memory_mib > 0 && gpu_memory_mib > 0)
    milli = std::max<int64_t>(milli, (g.memory_mib * 1000 + gpu_memory_mib - 1) / gpu_memory_mib);
  return static_cast<int>(std::clamp<int64_t>(milli, 1, 1000));
}

int64_t ModelMemory(GpuModelId m) {
  if (m == kNoGpuModel || m >= GpuCatalog::Builtin().size()) return kReferenceGpuMemoryMib;
  const int64_t mem = GpuCatalog::Builtin().Get(m).memory_mib;
  return mem > 0 ? mem : kReferenceGpuMemoryMib;
}

std::vector<GpuModelId> ModelsIn(ModelMask mask) {
  std::vector<GpuModelId> out;
  for (GpuModelId id = 0; id < GpuCatalog::Builtin().size() && id < 64; ++id)
    if ((mask >> id) & 1) out.push_back(id);
  return out;
}

// `spec` with the entries of tessera.io/original-resources (`text`) put back into its containers'
// limits and requests (see kAnnotationOriginalResources).
Result<Json> RestoreOriginalResources(const Json& spec, const std::string& text) {
  const Json saved = Json::parse(text, nullptr, false);
  if (!saved.is_object() || saved.empty())
    return InvalidArgument("must be a non-empty JSON object of container names");
  Json out = spec;
  std::set<std::string> found;
  for (const char* list : {"containers", "initContainers"}) {
    auto cs = out.find(list);
    if (cs == out.end() || !cs->is_array()) continue;
    for (Json& c : *cs) {
      if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) continue;
      const std::string name = c["name"].get<std::string>();
      auto entry = saved.find(name);
      if (entry == saved.end()) continue;
      found.insert(name);
      const std::string where = "container \"" + name + "\"";
      if (!entry->is_object()) return InvalidArgument(where + " must map to an object");
      Json& res = c["resources"];
      if (!res.is_object()) res = Json::object();
      bool handle = false;
      for (const char* part : {"limits", "requests"})
        if (res.contains(part) && res[part].is_object() && res[part].contains(kResourceGpuSlice))
          handle = true;
      if (!handle)
        return InvalidArgument(where + " has no " + std::string(kResourceGpuSlice) + " handle");
      for (const auto& [part, entries] : entry->items()) {
        if ((part != "limits" && part != "requests") || !entries.is_object())
          return InvalidArgument(where + ": only \"limits\" and \"requests\" objects are allowed");
        Json& m = res[part];
        if (!m.is_object()) m = Json::object();
        for (const auto& [resource, value] : entries.items()) {
          if (!IsGpuResource(resource))
            return InvalidArgument(where + ": \"" + resource + "\" is not a GPU resource");
          if (m.contains(resource))
            return InvalidArgument(where + " states " + resource + " itself");
          m[resource] = value;
        }
      }
    }
  }
  for (const auto& [name, entry] : saved.items())
    if (!found.count(name)) return InvalidArgument("the pod has no container \"" + name + "\"");
  return out;
}

Result<PodRequest> TranslatePodImpl(const Json& pod) {
  if (!pod.is_object()) return InvalidArgument("pod must be a JSON object");
  PodRequest p;
  const Json empty = Json::object();
  const Json* meta = Field(pod, "metadata");
  const Json* spec_p = Field(pod, "spec");
  if (!meta || !meta->is_object()) return InvalidArgument("pod has no metadata");
  const Json& spec = spec_p && spec_p->is_object() ? *spec_p : empty;
  p.ns = Str(*meta, "namespace", "default");
  p.name = Str(*meta, "name");
  p.uid = Str(*meta, "uid");
  if (p.name.empty()) return InvalidArgument("pod has no metadata.name");
  p.creation_timestamp = Str(*meta, "creationTimestamp");
  p.deleting = Field(*meta, "deletionTimestamp") != nullptr;
  auto labels = StringMap(Field(*meta, "labels"), "metadata.labels");
  if (!labels.ok()) return labels.status();
  p.labels = std::move(*labels);
  auto annotations = StringMap(Field(*meta, "annotations"), "metadata.annotations");
  if (!annotations.ok()) return annotations.status();
  const auto& ann = *annotations;

  p.scheduler_name = Str(spec, "schedulerName", "default-scheduler");
  p.node_name = Str(spec, "nodeName");
  p.priority_class = Str(spec, "priorityClassName");
  auto prio = IntField(spec, "priority", 0, "spec");
  if (!prio.ok()) return prio.status();
  if (*prio < INT32_MIN || *prio > INT32_MAX) return InvalidArgument("spec.priority out of range");
  p.priority = static_cast<int>(*prio);
  if (const Json* st = Field(pod, "status")) p.phase = Str(*st, "phase");

  auto sel = StringMap(Field(spec, "nodeSelector"), "spec.nodeSelector");
  if (!sel.ok()) return sel.status();
  p.node_selector = std::move(*sel);
  auto tol = ParseTolerations(spec);
  if (!tol.ok()) return tol.status();
  p.tolerations = std::move(*tol);
  auto aff = ParseAffinity(spec);
  if (!aff.ok()) return aff.status();
  p.required_affinity = std::move(*aff);

  // Annotations.
  if (auto it = ann.find(kAnnotationQueue); it != ann.end() && !it->second.empty())
    p.queue = it->second;
  if (auto it = ann.find(kAnnotationIsolation); it != ann.end()) {
    auto iso = ParseIsolation(it->second);
    if (!iso.ok())
      return InvalidArgument(std::string("annotation ") + kAnnotationIsolation + ": " +
                             iso.status().message());
    p.isolation = *iso;
  }
  if (auto it = ann.find(kAnnotationGang); it != ann.end()) p.gang = it->second;
  if (auto it = ann.find(kAnnotationMinMember); it != ann.end()) {
    const std::string& v = it->second;
    int64_t n = 0;
    bool ok = !v.empty() && v.size() <= 6 && v.find_first_not_of("0123456789") == std::string::npos;
    if (ok) n = std::stoll(v);
    if (!ok || n < 1)
      return InvalidArgument(std::string("annotation ") + kAnnotationMinMember +
                             " must be a positive integer, got \"" + v + "\"");
    if (p.gang.empty())
      return InvalidArgument(std::string("annotation ") + kAnnotationMinMember + " needs " +
                             kAnnotationGang);
    p.min_member = static_cast<int>(n);
  }
  ModelMask allowed = 0;
  if (auto it = ann.find(kAnnotationGpuModels); it != ann.end() && !it->second.empty()) {
    std::string list = it->second;
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(',', start);
      if (end == std::string::npos) end = list.size();
      std::string name = list.substr(start, end - start);
      name.erase(0, name.find_first_not_of(' '));
      name.erase(name.find_last_not_of(' ') + 1);
      if (!name.empty()) {
        auto id = GpuCatalog::Builtin().Find(name);
        if (!id || *id >= 64)
          return InvalidArgument(std::string("annotation ") + kAnnotationGpuModels +
                                 ": unknown GPU model \"" + name +
                                 "\" (known: " + GpuCatalog::Builtin().KnownNames() + ")");
        allowed |= ModelMask{1} << *id;
      }
      start = end + 1;
    }
  }
  if (auto it = ann.find(kAnnotationAssignment); it != ann.end()) {
    auto a = DecodeAssignment(it->second);
    if (!a.ok())
      return InvalidArgument(std::string("annotation ") + kAnnotationAssignment + ": " +
                             a.status().message());
    p.assignment = std::move(*a);
  }

  // Resources.
  Json restored;
  const Json* resources_spec = &spec;
  if (auto it = ann.find(kAnnotationOriginalResources); it != ann.end()) {
    auto r = RestoreOriginalResources(spec, it->second);
    if (!r.ok())
      return InvalidArgument(std::string("annotation ") + kAnnotationOriginalResources + ": " +
                             r.status().message());
    restored = std::move(*r);
    resources_spec = &restored;
  }
  auto totals = PodTotals(*resources_spec);
  if (!totals.ok()) return totals.status();
  const GpuTotals& t = *totals;
  p.demand.cpu = MilliCpu(t.cpu_milli);
  p.demand.memory = MiB(t.mem_mib);
  p.slices.cpu = MilliCpu(t.cpu_milli);
  p.slices.host_memory = MiB(t.mem_mib);
  p.slices.isolation = p.isolation;

  GpuRequest& g = p.gpu;
  if (t.has_tessera && t.has_hami)
    return InvalidArgument(
        "the pod mixes Tessera share resources (tessera.io/gpu-memory, tessera.io/gpu-compute) "
        "with HAMi ones (nvidia.com/gpumem, nvidia.com/gpumem-percentage, nvidia.com/gpucores); "
        "use one style");
  if (t.hami_mem > 0 && t.hami_pct > 0)
    return InvalidArgument(
        "nvidia.com/gpumem and nvidia.com/gpumem-percentage are alternatives; set one");
  const bool share = t.has_tessera || t.has_hami;
  int64_t mig_count = 0;
  for (const auto& [name, n] : t.mig) mig_count += n;
  if (!t.mig.empty()) {
    const std::string first = t.mig.begin()->first;
    if (t.mig.size() > 1 || mig_count > 1)
      return InvalidArgument("at most one MIG instance per pod is supported; got " +
                             std::to_string(mig_count) + " (" + first + " ...)");
    if (t.gpu > 0 || share)
      return InvalidArgument(first +
                             " cannot be combined with nvidia.com/gpu or GPU share resources; a "
                             "MIG instance is the pod's whole GPU request");
    g.mig_profile = MigProfileFromResource(first);
  }
  if (share && t.gpu > 1) {
    const char* what = t.has_tessera ? "tessera.io/gpu-memory / tessera.io/gpu-compute"
                                     : "nvidia.com/gpumem / nvidia.com/gpucores";
    return InvalidArgument("nvidia.com/gpu: " + std::to_string(t.gpu) +
                           " cannot be combined with " + what +
                           ": a share is part of one GPU; ask for whole GPUs or one share "
                           "(nvidia.com/gpu: 1 or none)");
  }
  if (t.tessera_compute + t.hami_cores > 100 || t.hami_pct > 100)
    return InvalidArgument("the containers' GPU compute adds up to more than 100% of one GPU");
  if (!share && t.gpu > kMaxGpusPerNode)
    return InvalidArgument("nvidia.com/gpu: " + std::to_string(t.gpu) + " exceeds the " +
                           std::to_string(kMaxGpusPerNode) + " GPUs a node can have");
  if (share) {
    g.memory_mib = t.tessera_mem + t.hami_mem;
    g.memory_pct = static_cast<int>(t.hami_pct);
    g.compute_pct = static_cast<int>(t.tessera_compute + t.hami_cores);
  } else if (g.mig_profile.empty()) {
    g.whole_gpus = static_cast<int>(t.gpu);
  }
  if (!g.any()) return p;

  // GPU demand.
  ModelMask models = allowed;
  if (!g.mig_profile.empty()) {
    const ModelMask with = ModelsWithProfile(g.mig_profile);
    models = allowed ? (allowed & with) : with;
    if (models == 0)
      return InvalidArgument(
          "none of the models in annotation tessera.io/gpu-models offers MIG "
          "profile " +
          g.mig_profile);
  }
  p.demand.models = models;
  p.slices.models = models;
  p.demand.num_gpu = 1;
  if (g.whole_gpus > 0) {
    p.demand.num_gpu = g.whole_gpus;
    p.demand.gpu_milli = 1000;
    p.slices.whole_gpus = g.whole_gpus;
  } else if (!g.mig_profile.empty()) {
    int milli = 0;
    for (GpuModelId m : ModelsIn(models)) milli = std::max(milli, DemandOn(p, m).gpu_milli);
    p.demand.gpu_milli = milli;
    p.slices.mig_profile = g.mig_profile;
  } else {
    int64_t ref = kReferenceGpuMemoryMib;
    if (models) {
      ref = INT64_MAX;
      for (GpuModelId m : ModelsIn(models)) ref = std::min(ref, ModelMemory(m));
    }
    p.demand.gpu_milli = ShareMilli(g, ref);
    p.slices.memory_mib = std::max<int64_t>(g.memory_mib, (g.memory_pct * ref + 99) / 100);
    p.slices.compute_pct = g.compute_pct;
  }
  Status v = ValidateSliceDemand(p.slices);
  if (!v.ok()) return InvalidArgument("invalid GPU request: " + v.message());
  return p;
}

}  // namespace

// ---- Public: pods ----

Result<PodRequest> TranslateHeldPod(const Json& pod, Status* annotation_error) {
  auto p = TranslatePod(pod);
  if (p.ok()) return p;
  const Json* md = Field(pod, "metadata");
  const Json* ann = md ? Field(*md, "annotations") : nullptr;
  const Json* spec = Field(pod, "spec");
  const Json* node = spec ? Field(*spec, "nodeName") : nullptr;
  if (!ann || !ann->is_object() || !ann->contains(kAnnotationAssignment) || !node ||
      !node->is_string() || node->get<std::string>().empty())
    return p;
  Json without = pod;
  without["metadata"]["annotations"].erase(kAnnotationAssignment);
  auto q = TranslatePod(without);
  if (!q.ok()) return p;
  if (annotation_error) *annotation_error = p.status();
  return q;
}

Result<PodRequest> TranslatePod(const Json& pod) {
  try {
    return TranslatePodImpl(pod);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("malformed pod: ") + e.what());
  }
}

Demand DemandOn(const PodRequest& p, GpuModelId model) {
  Demand d = p.demand;
  if (!p.wants_gpu() || p.gpu.whole_gpus > 0) return d;
  if (!p.gpu.mig_profile.empty()) {
    const MigGeometry* geo = MigGeometryFor(model);
    const int idx = geo ? geo->Find(p.gpu.mig_profile) : -1;
    if (idx >= 0)
      d.gpu_milli = std::min(
          1000, CeilDiv(int64_t{1000} * geo->profiles[idx].compute_slices, geo->compute_slices));
    return d;
  }
  d.gpu_milli = ShareMilli(p.gpu, ModelMemory(model));
  return d;
}

SliceDemand SliceDemandOn(const PodRequest& p, GpuModelId model) {
  SliceDemand s = p.slices;
  if (p.gpu.memory_pct > 0)
    s.memory_mib =
        std::max<int64_t>(p.gpu.memory_mib, (p.gpu.memory_pct * ModelMemory(model) + 99) / 100);
  return s;
}

bool WantsSlice(const PodRequest& p, bool select_shares) {
  return !p.gpu.mig_profile.empty() || (select_shares && p.gpu.whole_gpus > 0) ||
         (p.gpu.is_share() && (select_shares || p.isolation == Isolation::kStrict));
}

Assignment AssignmentFor(const NodeInfo& node, const SliceAssignment& s,
                         const GpuSlices& first_gpu) {
  Assignment a;
  a.node = node.spec.name;
  switch (s.kind) {
    case SliceKind::kExclusive:
      a.kind = AssignmentKind::kExclusive;
      break;
    case SliceKind::kShare:
      a.kind = AssignmentKind::kShare;
      a.gpu_milli = s.gpu_milli;
      break;
    case SliceKind::kMig:
      a.kind = AssignmentKind::kMig;
      break;
    case SliceKind::kMps:
      a.kind = AssignmentKind::kMps;
      break;
    case SliceKind::kTimeSlice:
      a.kind = AssignmentKind::kTimeSlice;
      a.memory_limit_mib = s.memory_mib;
      break;
    case SliceKind::kMigMps:
      a.kind = AssignmentKind::kMigMps;
      break;
  }
  for (int g = 0; g < kMaxGpusPerNode; ++g) {
    if (!((s.gpus >> g) & 1)) continue;
    a.gpus.push_back(g);
    for (const auto& inv : node.inventory)
      if (inv.index == g) a.uuids.push_back(inv.uuid);
  }
  if (a.uuids.size() != a.gpus.size()) a.uuids.clear();
  if (s.kind == SliceKind::kMig || s.kind == SliceKind::kMigMps) {
    const MigSlot* slot = first_gpu.Instance(s.mig_start);
    const MigGeometry* geo = MigGeometryFor(first_gpu.model);
    const std::string profile = slot && geo ? geo->profiles[slot->instance.profile].name : "?";
    a.mig_instance = profile + "@" + std::to_string(s.mig_start);
  }
  if (s.kind == SliceKind::kMps || s.kind == SliceKind::kMigMps) {
    a.mps_thread_pct = s.thread_pct;
    a.memory_limit_mib = s.memory_mib;
  }
  return a;
}

std::optional<SliceAssignment> SliceFor(const Assignment& a, const NodeInfo& node, NodeIdx n) {
  SliceAssignment s;
  s.node = n;
  for (int g : a.gpus) {
    if (g < 0 || g >= node.spec.gpu_count) return std::nullopt;
    s.gpus |= GpuMask{1} << g;
  }
  if (s.gpus == 0) return std::nullopt;
  auto mig_start = [&]() -> int {
    const size_t at = a.mig_instance.find('@');
    if (at == std::string::npos) return -1;
    int v = -1;
    const char* b = a.mig_instance.data() + at + 1;
    const char* e = a.mig_instance.data() + a.mig_instance.size();
    if (std::from_chars(b, e, v).ptr != e) return -1;
    return v;
  };
  switch (a.kind) {
    case AssignmentKind::kExclusive:
      s.kind = SliceKind::kExclusive;
      return s;
    case AssignmentKind::kShare:
      s.kind = SliceKind::kShare;
      s.gpu_milli = a.gpu_milli;
      return s;
    case AssignmentKind::kMig:
    case AssignmentKind::kMigMps:
      s.kind = a.kind == AssignmentKind::kMig ? SliceKind::kMig : SliceKind::kMigMps;
      s.mig_start = mig_start();
      if (s.mig_start < 0) return std::nullopt;
      if (s.kind == SliceKind::kMigMps) {
        s.thread_pct = a.mps_thread_pct;
        s.memory_mib = a.memory_limit_mib;
      }
      return s;
    case AssignmentKind::kMps:
      s.kind = SliceKind::kMps;
      s.thread_pct = a.mps_thread_pct;
      s.memory_mib = a.memory_limit_mib;
      return s;
    case AssignmentKind::kTimeSlice:
      s.kind = SliceKind::kTimeSlice;
      s.memory_mib = a.memory_limit_mib;
      return s;
  }
  return std::nullopt;
}

std::string DescribeHold(SliceKind kind, const MigGeometry* geo, const MigInstance* inst) {
  if (geo && inst && (kind == SliceKind::kMig || kind == SliceKind::kMigMps))
    return "MIG instance " + MigLayoutString(*geo, {*inst});
  return std::string(SliceKindName(kind)) + " use of the GPU with MIG off";
}

std::vector<std::pair<int, std::string>> ConformToAssignment(ClusterState& cluster,
                                                             const SliceAssignment& s,
                                                             const std::string& mig_instance) {
  std::vector<std::pair<int, std::string>> changed;
  const bool mig = s.kind == SliceKind::kMig || s.kind == SliceKind::kMigMps;
  if (s.node >= cluster.num_nodes()) return changed;
  std::optional<MigInstance> inst;
  const MigGeometry* geo = MigGeometryFor(cluster.spec(s.node).model);
  if (mig) {
    if (!geo) return changed;
    auto parsed = ParseMigLayout(*geo, mig_instance);
    if (!parsed.ok() || parsed->size() != 1 || parsed->front().start != s.mig_start) return changed;
    inst = parsed->front();
  }
  const std::string holds = DescribeHold(s.kind, geo, inst ? &*inst : nullptr);
  for (int g = 0; g < cluster.gpu_count(s.node); ++g) {
    if (!((s.gpus >> g) & 1)) continue;
    auto done = cluster.ConformGpu(s.node, g, inst);
    if (done.ok() && *done) changed.emplace_back(g, holds);
  }
  return changed;
}

}  // namespace tessera::kube
