#include "kube/rightsize.h"

#include <algorithm>
#include <cmath>

#include "cluster/gpu_catalog.h"
#include "cluster/mig_geometry.h"
#include "kube/json_fields.h"

namespace tessera::kube {

using json_fields::Field;
using json_fields::Path;
using json_fields::Str;

namespace {

int64_t ModelMemory(GpuModelId model) {
  if (model == kNoGpuModel) return kReferenceGpuMemoryMib;
  const int64_t m = GpuCatalog::Builtin().Get(model).memory_mib;
  return m > 0 ? m : kReferenceGpuMemoryMib;
}

bool IsGpuResource(const std::string& name) {
  return name == kResourceGpu || name.rfind(kResourceMigPrefix, 0) == 0 ||
         name == kResourceGpuMemory || name == kResourceGpuCompute || name == kResourceHamiMem ||
         name == kResourceHamiMemPct || name == kResourceHamiCores;
}

// The MIG profile after `profile` on `geo`: the smallest one with more memory (or as much memory
// and more compute); "" after the largest.
std::string NextMigProfile(const MigGeometry& geo, const std::string& profile) {
  const int cur = geo.Find(profile);
  if (cur < 0) return "";
  const MigProfile& c = geo.profiles[cur];
  int best = -1;
  for (size_t i = 0; i < geo.profiles.size(); ++i) {
    const MigProfile& p = geo.profiles[i];
    if (p.media_extensions) continue;
    const bool larger = p.memory_mib > c.memory_mib ||
                        (p.memory_mib == c.memory_mib && p.compute_slices > c.compute_slices);
    if (!larger) continue;
    if (best < 0 || p.memory_mib < geo.profiles[best].memory_mib ||
        (p.memory_mib == geo.profiles[best].memory_mib &&
         p.compute_slices < geo.profiles[best].compute_slices))
      best = static_cast<int>(i);
  }
  return best < 0 ? "" : geo.profiles[best].name;
}

std::string MigResourceName(const std::string& profile) {
  std::string r = profile;
  std::replace(r.begin(), r.end(), '+', '.');
  return std::string(kResourceMigPrefix) + r;
}

}  // namespace

Result<RightsizeMode> RightsizeModeOf(const Json& pod) {
  const Json* a = Path(pod, {"metadata", "annotations"});
  const Json* v = a ? Field(*a, kAnnotationRightsize) : nullptr;
  if (!v) return RightsizeMode::kOff;
  const std::string s = v->is_string() ? v->get<std::string>() : "";
  if (s == "auto") return RightsizeMode::kAuto;
  if (s == "recommend") return RightsizeMode::kRecommend;
  if (s == "off" || s.empty()) return RightsizeMode::kOff;
  return InvalidArgument(std::string("annotation ") + kAnnotationRightsize +
                         " must be auto, recommend or off, got \"" + s + "\"");
}

Result<RecommendedSlice> DecodeRecommendation(std::string_view text) {
  const std::string what = std::string("annotation ") + kAnnotationRecommendation;
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(what + " is not a JSON object");
  RecommendedSlice r;
  auto slice = json_fields::StrField(j, "slice", what);
  if (!slice.ok()) return slice.status();
  auto model = json_fields::StrField(j, "model", what);
  if (!model.ok()) return model.status();
  auto id = GpuCatalog::Builtin().Find(*model);
  if (!id) return InvalidArgument(what + ": unknown GPU model \"" + *model + "\"");
  r.model = *model;
  r.model_id = *id;
  const int64_t model_mem = GpuCatalog::Builtin().Get(*id).memory_mib;
  auto memory = json_fields::IntField(j, "memory_mib", 0, what);
  if (!memory.ok()) return memory.status();
  if (*slice == "mig") {
    auto profile = json_fields::StrField(j, "mig_profile", what);
    if (!profile.ok()) return profile.status();
    const MigGeometry* geo = MigGeometryFor(*id);
    if (!geo || geo->Find(*profile) < 0)
      return InvalidArgument(what + ": " + *model + " has no MIG profile \"" + *profile + "\"");
    r.request.mig_profile = *profile;
  } else if (*slice == "mps" || *slice == "timeslice") {
    if (*memory <= 0 || (model_mem > 0 && *memory > model_mem))
      return InvalidArgument(what + ": memory_mib must be within 1.." + std::to_string(model_mem) +
                             " for " + *model);
    r.request.memory_mib = *memory;
    if (*slice == "mps") {
      auto pct = json_fields::IntField(j, "thread_pct", 0, what);
      if (!pct.ok()) return pct.status();
      if (*pct < 1 || *pct > 100) return InvalidArgument(what + ": thread_pct must be 1..100");
      r.request.compute_pct = static_cast<int>(*pct);
      r.compute = static_cast<double>(*pct) / 100.0;
    } else if (auto f = j.find("gpu_fraction");
               f != j.end() && f->is_number() && f->get<double>() > 0 && f->get<double>() <= 1) {
      r.compute = f->get<double>();
    }
  } else if (*slice == "whole") {
    auto gpus = json_fields::IntField(j, "gpus", 0, what);
    if (!gpus.ok()) return gpus.status();
    if (*gpus < 1 || *gpus > kMaxGpusPerNode)
      return InvalidArgument(what + ": gpus must be 1.." + std::to_string(kMaxGpusPerNode));
    r.request.whole_gpus = static_cast<int>(*gpus);
  } else if (*slice == "release") {
    return InvalidArgument(what + " releases the GPU; a pod is admitted with a GPU or not at all");
  } else {
    return InvalidArgument(what + ": unknown slice \"" + *slice +
                           "\" (known: mig, mps, timeslice, whole, release)");
  }
  return r;
}

GpuSize SizeOn(const GpuRequest& r, GpuModelId model) {
  const int64_t mem = ModelMemory(model);
  GpuSize s;
  if (!r.mig_profile.empty()) {
    const MigGeometry* geo = MigGeometryFor(model);
    const int i = geo ? geo->Find(r.mig_profile) : -1;
    if (i < 0) return {mem, 1.0};
    const MigProfile& p = geo->profiles[i];
    return {p.memory_mib, static_cast<double>(p.compute_slices) / geo->compute_slices};
  }
  if (r.is_share()) {
    s.memory_mib = r.memory_mib > 0   ? r.memory_mib
                   : r.memory_pct > 0 ? mem * r.memory_pct / 100
                                      : mem;
    s.fraction = std::max(static_cast<double>(s.memory_mib) / mem, r.compute_pct / 100.0);
    if (r.whole_gpus > 1) s.memory_mib *= r.whole_gpus, s.fraction *= r.whole_gpus;
    return s;
  }
  return {mem * r.whole_gpus, static_cast<double>(r.whole_gpus)};
}

bool WithinAsk(const GpuRequest& r, const GpuRequest& ask, GpuModelId model) {
  const GpuSize a = SizeOn(ask, model), b = SizeOn(r, model);
  return b.memory_mib <= a.memory_mib && b.fraction <= a.fraction + 1e-9;
}

Grant PlanGrant(const GpuRequest& ask, const RecommendedSlice& rec, int oom_level,
                int64_t floor_mib) {
  Grant g;
  auto finish = [&](GpuRequest r, std::string reason) {
    if (!WithinAsk(r, ask, rec.model_id)) {
      r = ask;
      if (reason == "recommendation" || reason == "floor") reason = "request-cap";
    }
    g.request = r;
    g.changed = !(r == ask);
    g.reason = std::move(reason);
    return g;
  };
  if (oom_level >= 2) return finish(ask, "oom-request");
  GpuRequest r = rec.request;
  std::string reason = "recommendation";
  const int64_t mem = SizeOn(r, rec.model_id).memory_mib;
  if (mem < floor_mib) {
    if (!r.mig_profile.empty()) {
      const MigGeometry* geo = MigGeometryFor(rec.model_id);
      const int cur = geo->Find(r.mig_profile);
      const int i = geo->SmallestCovering(floor_mib, geo->profiles[cur].compute_slices);
      if (i >= 0) {
        r.mig_profile = geo->profiles[i].name;
      } else {
        r = GpuRequest{};
        r.whole_gpus = 1;
      }
    } else if (r.is_share()) {
      r.memory_mib = floor_mib;
    }
    reason = "floor";
  }
  if (oom_level == 1) {
    reason = "oom-grown";
    if (!r.mig_profile.empty()) {
      const std::string next = NextMigProfile(*MigGeometryFor(rec.model_id), r.mig_profile);
      if (next.empty()) {
        r = GpuRequest{};
        r.whole_gpus = 1;
      } else {
        r.mig_profile = next;
      }
    } else if (r.is_share()) {
      const int64_t grown = (SizeOn(r, rec.model_id).memory_mib * 3 + 1) / 2;
      r.memory_mib = std::min(grown, ModelMemory(rec.model_id));
      r.memory_pct = 0;
    } else {
      return finish(ask, "oom-request");
    }
  }
  return finish(r, reason);
}

std::vector<GpuModelId> OtherModelsFor(const RecommendedSlice& rec, const GpuRequest& g,
                                       const Demand& allowed, double max_compute) {
  std::vector<GpuModelId> out;
  if (!(max_compute > 0) || !(rec.compute > 0) || rec.model_id == kNoGpuModel ||
      !g.mig_profile.empty() || g.whole_gpus > 0 || g.memory_pct > 0 || g.memory_mib <= 0)
    return out;
  const GpuCatalog& cat = GpuCatalog::Builtin();
  const double own = cat.Get(rec.model_id).relative_compute;
  for (size_t i = 0; i < cat.size(); ++i) {
    const auto m = static_cast<GpuModelId>(i);
    const GpuModelInfo& info = cat.Get(m);
    if (m == rec.model_id || !allowed.AllowsModel(m) || info.memory_mib < g.memory_mib ||
        !(info.relative_compute > 0))
      continue;
    const double need = rec.compute * own / info.relative_compute;
    if (need > max_compute + 1e-9) continue;
    if (g.compute_pct > 0 && need * 100.0 > g.compute_pct + 1e-9) continue;
    out.push_back(m);
  }
  return out;
}

Json WithGpuRequest(const Json& pod, const GpuRequest& r, const std::string& models) {
  Json out = pod;
  if (!out.is_object()) return out;
  Json& spec = out["spec"];
  if (!spec.is_object()) spec = Json::object();
  for (const char* list : {"containers", "initContainers"}) {
    auto cs = spec.find(list);
    if (cs == spec.end() || !cs->is_array()) continue;
    for (Json& c : *cs) {
      if (!c.is_object()) continue;
      auto res = c.find("resources");
      if (res == c.end() || !res->is_object()) continue;
      for (const char* part : {"limits", "requests"}) {
        auto m = res->find(part);
        if (m == res->end() || !m->is_object()) continue;
        for (auto it = m->begin(); it != m->end();) {
          if (IsGpuResource(it.key()))
            it = m->erase(it);
          else
            ++it;
        }
      }
    }
  }
  Json& cs = spec["containers"];
  if (!cs.is_array() || cs.empty()) cs = Json::array({Json{{"name", "main"}}});
  if (!cs[0].is_object()) cs[0] = Json{{"name", "main"}};
  Json& res = cs[0]["resources"];
  if (!res.is_object()) res = Json::object();
  Json& limits = res["limits"];
  if (!limits.is_object()) limits = Json::object();
  if (!r.mig_profile.empty()) {
    limits[MigResourceName(r.mig_profile)] = "1";
  } else if (r.is_share()) {
    if (r.whole_gpus > 0) limits[kResourceGpu] = std::to_string(r.whole_gpus);
    if (r.memory_mib > 0) limits[kResourceGpuMemory] = std::to_string(r.memory_mib) + "Mi";
    if (r.memory_pct > 0) limits[kResourceHamiMemPct] = std::to_string(r.memory_pct);
    if (r.compute_pct > 0) limits[kResourceGpuCompute] = std::to_string(r.compute_pct);
  } else if (r.whole_gpus > 0) {
    limits[kResourceGpu] = std::to_string(r.whole_gpus);
  }
  Json& md = out["metadata"];
  if (!md.is_object()) md = Json::object();
  if (!md["annotations"].is_object()) md["annotations"] = Json::object();
  md["annotations"][kAnnotationGpuModels] = models;
  md["annotations"].erase(kAnnotationOriginalResources);  // the grant replaces the original ask
  return out;
}

Json GpuRequestJson(const GpuRequest& r) {
  Json j = Json::object();
  if (r.whole_gpus > 0) j["gpus"] = r.whole_gpus;
  if (!r.mig_profile.empty()) j["mig_profile"] = r.mig_profile;
  if (r.memory_mib > 0) j["memory_mib"] = r.memory_mib;
  if (r.memory_pct > 0) j["memory_pct"] = r.memory_pct;
  if (r.compute_pct > 0) j["compute_pct"] = r.compute_pct;
  return j;
}

Result<GpuRequest> GpuRequestFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("GPU request must be an object");
  GpuRequest r;
  const std::string what = "GPU request";
  auto gpus = json_fields::IntField(j, "gpus", 0, what);
  auto mem = json_fields::IntField(j, "memory_mib", 0, what);
  auto pct = json_fields::IntField(j, "memory_pct", 0, what);
  auto compute = json_fields::IntField(j, "compute_pct", 0, what);
  auto profile = json_fields::StrField(j, "mig_profile", what);
  for (const Status& s : {gpus.status(), mem.status(), pct.status(), compute.status()})
    if (!s.ok()) return s;
  if (!profile.ok()) return profile.status();
  if (*gpus < 0 || *gpus > kMaxGpusPerNode || *mem < 0 || *mem > (int64_t{1} << 30) || *pct < 0 ||
      *pct > 100 || *compute < 0 || *compute > 100)
    return InvalidArgument("GPU request out of range");
  r.whole_gpus = static_cast<int>(*gpus);
  r.memory_mib = *mem;
  r.memory_pct = static_cast<int>(*pct);
  r.compute_pct = static_cast<int>(*compute);
  r.mig_profile = *profile;
  if (!r.any()) return InvalidArgument("GPU request is empty");
  return r;
}

PodOwnerRef OwnerOf(const Json& pod) {
  PodOwnerRef o;
  const Json empty = Json::object();
  const Json* md = Field(pod, "metadata");
  const Json& m = md && md->is_object() ? *md : empty;
  o.ns = Str(m, "namespace", "default");
  const Json* labels = Field(m, "labels");
  auto label = [&](const char* k) { return labels ? Str(*labels, k) : std::string(); };
  if (const Json* refs = Field(m, "ownerReferences"); refs && refs->is_array()) {
    for (const Json& ref : *refs) {
      const Json* c = Field(ref, "controller");
      if (!c || !c->is_boolean() || !c->get<bool>()) continue;
      const std::string kind = Str(ref, "kind"), name = Str(ref, "name");
      if (name.empty()) break;
      if (kind == "ReplicaSet") {
        const std::string hash = label("pod-template-hash");
        if (!hash.empty() && name.size() > hash.size() + 1 &&
            name.compare(name.size() - hash.size() - 1, std::string::npos, "-" + hash) == 0)
          return {o.ns, "Deployment", name.substr(0, name.size() - hash.size() - 1)};
        return {o.ns, "ReplicaSet", name};
      }
      if (kind == "Job") {
        const std::string js = label("jobset.sigs.k8s.io/jobset-name");
        if (!js.empty()) return {o.ns, "JobSet", js};
      }
      return {o.ns, kind, name};
    }
  }
  const Json* ann = Field(m, "annotations");
  if (const std::string gang = ann ? Str(*ann, kAnnotationGang) : ""; !gang.empty())
    return {o.ns, "WorkloadGroup", gang};
  return {o.ns, "Pod", Str(m, "name")};
}

std::vector<std::string> OomKills(const Json& pod) {
  std::vector<std::string> out;
  const Json* status = Field(pod, "status");
  if (!status) return out;
  for (const char* list : {"containerStatuses", "initContainerStatuses"}) {
    const Json* cs = Field(*status, list);
    if (!cs || !cs->is_array()) continue;
    for (const Json& c : *cs) {
      const std::string name = Str(c, "name");
      const Json* rc = Field(c, "restartCount");
      const int64_t restarts = rc && rc->is_number_integer() ? rc->get<int64_t>() : 0;
      // A terminated state is the latest run; the last state is the run before it.
      if (const Json* now = Path(c, {"state", "terminated"});
          now && Str(*now, "reason") == "OOMKilled")
        out.push_back(name + "#" + std::to_string(restarts));
      if (const Json* last = Path(c, {"lastState", "terminated"});
          last && Str(*last, "reason") == "OOMKilled")
        out.push_back(name + "#" + std::to_string(restarts - 1));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool RestartsInPlaceUnderController(const Json& pod) {
  const Json* md = Field(pod, "metadata");
  if (!md || !md->is_object() || Field(*md, "deletionTimestamp")) return false;
  if (const Json* spec = Field(pod, "spec"); spec && Str(*spec, "restartPolicy") == "Never")
    return false;
  const Json* refs = Field(*md, "ownerReferences");
  if (!refs || !refs->is_array()) return false;
  for (const Json& ref : *refs) {
    const Json* c = Field(ref, "controller");
    if (c && c->is_boolean() && c->get<bool>() && !Str(ref, "name").empty()) return true;
  }
  return false;
}

std::string PodAnnotation(const Json& pod, const char* key) {
  const Json* a = Path(pod, {"metadata", "annotations"});
  return a ? Str(*a, key) : "";
}

}  // namespace tessera::kube
