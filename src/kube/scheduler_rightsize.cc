// SchedulerCore's rightsizing at admission (tessera.io/rightsize, src/kube/rightsize.h): the
// grant of auto pods, the proposals of recommend pods, out-of-memory kills and the owner's
// back-off, rebuilt from the pods' annotations and statuses after a restart.
#include <algorithm>

#include "cluster/gpu_catalog.h"

#include "kube/rightsize.h"
#include "kube/scheduler_core.h"
#include "kube/scheduler_core_internal.h"

namespace tessera::kube {

namespace {

std::string Describe(const GpuRequest& r) {
  if (!r.mig_profile.empty()) return "MIG " + r.mig_profile;
  if (r.is_share()) {
    std::string s;
    if (r.memory_mib > 0) s = std::to_string(r.memory_mib) + " MiB";
    if (r.memory_pct > 0) s = std::to_string(r.memory_pct) + "% memory";
    if (r.compute_pct > 0)
      s += (s.empty() ? "" : ", ") + std::to_string(r.compute_pct) + "% compute";
    return "share " + s;
  }
  return std::to_string(r.whole_gpus) + (r.whole_gpus == 1 ? " GPU" : " GPUs");
}

// A Prometheus label value: backslash, double quote and newline escaped.
std::string LabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

std::string OwnerText(const PodOwnerRef& o) {
  return o.kind + " " + o.ns + "/" + o.name;
}

// Out-of-memory kills a pod's tessera.io/rightsize-oom-retries says its owner had; 0 if absent
// or malformed.
int RetriesOf(const Json& pod) {
  const std::string v = PodAnnotation(pod, kAnnotationOomRetries);
  if (v.empty() || v.size() > 3 || v.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoi(v);
}

}  // namespace

void SchedulerCore::RightsizeEvent(const PodEntry& p, const char* type, const char* reason,
                                   const std::string& note) {
  deferred_events_.push_back({p.req.ns, p.req.name, p.req.uid, type, reason, note});
}

void SchedulerCore::ObserveRightsize(const Json& pod) {
  const bool applied = !PodAnnotation(pod, kAnnotationRightsizeApplied).empty();
  const int retries = RetriesOf(pod);
  if (!applied && retries == 0) return;
  const PodOwnerRef owner = OwnerOf(pod);
  const std::string key = owner.Key() + "\n" + PodAnnotation(pod, kAnnotationRecommendation);
  int& level = oom_level_[key];
  level = std::max(level, retries);
  if (!applied) return;
  const auto kills = OomKills(pod);
  if (kills.empty()) return;
  level = std::max(level, retries + 1);
  const Json* md =
      pod.contains("metadata") && pod["metadata"].is_object() ? &pod["metadata"] : nullptr;
  const auto field = [&](const char* k) {
    return md && md->contains(k) && (*md)[k].is_string() ? (*md)[k].get<std::string>() : "";
  };
  const std::string uid = field("uid");
  int64_t seq = 0;
  if (auto it = pods_.find(field("namespace") + "/" + field("name"));
      it != pods_.end() && it->second->req.uid == uid)
    seq = it->second->admitted_seq;
  int64_t& killed = oom_killed_seq_[key];
  killed = std::max(killed, seq);
  bool fresh = false;
  for (const std::string& k : kills) {
    if (!oom_seen_.insert(uid + "/" + k).second) continue;
    fresh = true;
    ++stats_.rightsize_oom_kills;
    ++oom_kills_by_owner_[{owner.ns, owner.kind, owner.name}];
    const std::string container = k.substr(0, k.rfind('#'));
    deferred_events_.push_back({owner.ns, field("name"), uid, "Warning", "RightsizeOomKilled",
                                "container \"" + container +
                                    "\" was killed out of memory at its rightsized grant; " +
                                    "the next pod of " + OwnerText(owner) + " gets " +
                                    (retries + 1 >= 2 ? "its owner's request" : "a larger grant")});
  }
  if (fresh && RestartsInPlaceUnderController(pod)) {
    ++stats_.rightsize_oom_evictions;
    oom_restarting_[owner.ns + "/" + field("name")] = OwnerText(owner);
    held_evictions_.push_back(
        {owner.ns, field("name"), uid,
         "killed out of memory at its rightsized grant; a restart in this pod would keep that "
         "grant, so it is evicted and " +
             OwnerText(owner) + "'s next pod gets " +
             (retries + 1 >= 2 ? "its owner's request" : "a larger grant"),
         kEventRightsizeOomRestart});
  }
}

void SchedulerCore::Regrant(const Json& pod, PodRequest& req, const PodEntry* p) const {
  if (!req.wants_gpu()) return;
  std::optional<GpuRequest> to;
  std::string model;
  if (const std::string a = PodAnnotation(pod, kAnnotationRightsizeApplied); !a.empty()) {
    const Json j = Json::parse(a, nullptr, false);
    if (j.is_object() && j.contains("to") && j.contains("model") && j["model"].is_string()) {
      auto r = GpuRequestFromJson(j["to"]);
      auto id = GpuCatalog::Builtin().Find(j["model"].get<std::string>());
      // Anyone who may edit the pod may write the annotation: a grant above the request is
      // ignored.
      if (r.ok() && id && WithinAsk(*r, req.gpu, *id)) {
        to = *r;
        model = j["model"].get<std::string>();
        if (auto o = j.find("other_models"); o != j.end() && o->is_array())
          for (const Json& m : *o) {
            if (!m.is_string()) continue;
            auto oid = GpuCatalog::Builtin().Find(m.get<std::string>());
            if (oid && *oid != *id && req.demand.AllowsModel(*oid))
              model += "," + m.get<std::string>();
          }
      }
    }
  }
  if (!to && p && p->granted) {
    to = p->granted;
    model = p->granted_model;
  }
  if (!to) return;
  auto granted = TranslatePod(WithGpuRequest(pod, *to, model));
  if (!granted.ok()) return;
  granted->node_name = req.node_name;
  granted->assignment = req.assignment;
  req = std::move(*granted);
}

void SchedulerCore::DecideRightsize(PodEntry& p) {
  if (!p.rightsize_src || p.rightsize_decided) return;
  p.rightsize_decided = true;
  const std::shared_ptr<const Json> src = std::move(p.rightsize_src);
  const Json& pod = *src;
  auto mode = RightsizeModeOf(pod);
  if (!mode.ok()) {
    ++stats_.rightsize_skipped;
    RightsizeEvent(p, "Warning", "RightsizeSkipped", mode.status().message());
    return;
  }
  if (*mode == RightsizeMode::kOff || !p.req.wants_gpu()) return;
  const std::string rec_text = PodAnnotation(pod, kAnnotationRecommendation);
  if (rec_text.empty()) {
    RightsizeEvent(p, "Normal", "RightsizeSkipped",
                   std::string("no ") + kAnnotationRecommendation + " yet; the request (" +
                       Describe(p.req.gpu) + ") stays");
    return;
  }
  auto rec = DecodeRecommendation(rec_text);
  if (!rec.ok()) {
    ++stats_.rightsize_skipped;
    RightsizeEvent(p, "Warning", "RightsizeSkipped",
                   rec.status().message() + "; the request (" + Describe(p.req.gpu) + ") stays");
    return;
  }
  if (!p.req.demand.AllowsModel(rec->model_id)) {
    ++stats_.rightsize_skipped;
    RightsizeEvent(p, "Warning", "RightsizeSkipped",
                   "the recommendation is for " + rec->model +
                       ", which the pod's request does not allow; the request (" +
                       Describe(p.req.gpu) + ") stays");
    return;
  }
  const PodOwnerRef owner = OwnerOf(pod);
  const bool is_auto = *mode == RightsizeMode::kAuto;
  p.rightsize_auto = is_auto;
  const int level = is_auto ? oom_level_[owner.Key() + "\n" + rec_text] : 0;
  const Grant g = PlanGrant(p.req.gpu, *rec, level, config_.rightsize_floor_mib);
  Json record = {{"mode", is_auto ? "auto" : "recommend"},
                 {"model", rec->model},
                 {"from", GpuRequestJson(p.req.gpu)},
                 {"to", GpuRequestJson(g.request)},
                 {"reason", g.reason}};
  const std::string change = Describe(p.req.gpu) + " -> " + Describe(g.request) + " on " +
                             rec->model + " (" + g.reason + ")";
  if (!is_auto) {
    if (g.changed) {
      ++stats_.rightsize_proposed;
      p.rightsize_annotations[kAnnotationRightsizeProposed] = record.dump();
      RightsizeEvent(p, "Normal", "RightsizeRecommended", "would grant " + change);
    } else {
      RightsizeEvent(p, "Normal", "RightsizeRecommended",
                     "would keep the request: " + Describe(p.req.gpu) + " (" + g.reason + ")");
    }
    return;
  }
  if (level > 0) {
    ++stats_.rightsize_oom_retries;
    ++oom_retries_by_owner_[{owner.ns, owner.kind, owner.name}];
    p.rightsize_annotations[kAnnotationOomRetries] = std::to_string(level);
    p.oom_retry_of = OwnerText(owner);
    auto killed = oom_killed_seq_.find(owner.Key() + "\n" + rec_text);
    p.oom_killed_seq = killed != oom_killed_seq_.end() ? killed->second : 0;
  }
  if (!g.changed) {
    RightsizeEvent(p, "Normal", "RightsizeKept",
                   "the request stays: " + Describe(p.req.gpu) + " (" + g.reason + ")");
    return;
  }
  // The same memory limit may run on other models the pod allows where the recommendation's
  // compute fits (config_.rightsize_other_model_max_compute); the engine picks among them all.
  std::string models = rec->model;
  Json others = Json::array();
  for (GpuModelId m :
       OtherModelsFor(*rec, g.request, p.req.demand, config_.rightsize_other_model_max_compute)) {
    const std::string& name = GpuCatalog::Builtin().Get(m).name;
    models += "," + name;
    others.push_back(name);
  }
  if (!others.empty()) record["other_models"] = others;
  auto granted = TranslatePod(WithGpuRequest(pod, g.request, models));
  if (!granted.ok()) {
    ++stats_.rightsize_skipped;
    RightsizeEvent(p, "Warning", "RightsizeSkipped",
                   "the grant " + Describe(g.request) + " is not a valid request (" +
                       granted.status().message() + "); the request stays");
    return;
  }
  p.req = std::move(*granted);
  p.granted = g.request;
  p.granted_model = models;
  p.rightsize_annotations[kAnnotationRightsizeApplied] = record.dump();
  ++stats_.rightsize_applied;
  RightsizeEvent(p, "Normal", "Rightsized",
                 "GPU request " + change +
                     (others.empty() ? std::string()
                                     : "; the same memory limit may also run on " +
                                           models.substr(rec->model.size() + 1)));
}

std::string SchedulerCore::RightsizeMetrics() const {
  std::string out;
  out +=
      "# HELP tessera_rightsize_applied_total Pods whose GPU request rightsizing changed (auto) "
      "or would change (recommend).\n"
      "# TYPE tessera_rightsize_applied_total counter\n";
  out += "tessera_rightsize_applied_total{mode=\"auto\"} " +
         std::to_string(stats_.rightsize_applied) + "\n";
  out += "tessera_rightsize_applied_total{mode=\"recommend\"} " +
         std::to_string(stats_.rightsize_proposed) + "\n";
  out +=
      "# HELP tessera_rightsize_skipped_total Pods whose rightsizing was skipped because an "
      "annotation was malformed.\n"
      "# TYPE tessera_rightsize_skipped_total counter\n";
  out += "tessera_rightsize_skipped_total " + std::to_string(stats_.rightsize_skipped) + "\n";
  out +=
      "# HELP tessera_rightsize_oom_evictions_total Rightsized pods evicted after an "
      "out-of-memory kill so that their controller's next pod is sized again.\n"
      "# TYPE tessera_rightsize_oom_evictions_total counter\n";
  out += "tessera_rightsize_oom_evictions_total " + std::to_string(stats_.rightsize_oom_evictions) +
         "\n";
  auto series = [&](const char* name, const char* help,
                    const std::map<OwnerLabels, int64_t>& by_owner) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n";
    for (const auto& [o, n] : by_owner)
      out += std::string(name) + "{namespace=\"" + LabelValue(std::get<0>(o)) + "\",owner_kind=\"" +
             LabelValue(std::get<1>(o)) + "\",owner=\"" + LabelValue(std::get<2>(o)) + "\"} " +
             std::to_string(n) + "\n";
  };
  out +=
      "# HELP tessera_rightsize_oom_preemptions_total Pods evicted to make room for the "
      "out-of-memory retry of a rightsized owner.\n"
      "# TYPE tessera_rightsize_oom_preemptions_total counter\n";
  out += "tessera_rightsize_oom_preemptions_total " +
         std::to_string(stats_.rightsize_oom_preemptions) + "\n";
  series("tessera_rightsize_oom_kills_total",
         "Out-of-memory kills of rightsized containers, per owner.", oom_kills_by_owner_);
  series("tessera_rightsize_oom_retries_total",
         "Pods admitted at a grown grant or at their request after out-of-memory kills of their "
         "owner's rightsized pods, per owner.",
         oom_retries_by_owner_);
  return out;
}

}  // namespace tessera::kube
