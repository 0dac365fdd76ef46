#include "agent/kube_pod_source.h"

#include <set>

#include "kube/translate.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;

std::string StringAt(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string BindingTime(const Json& pod) {
  const Json& status = pod.contains("status") ? pod.at("status") : Json::object();
  if (auto c = status.find("conditions"); c != status.end() && c->is_array()) {
    for (const Json& cond : *c) {
      if (!cond.is_object() || StringAt(cond, "type") != "PodScheduled") continue;
      if (StringAt(cond, "status") != "True") break;
      const std::string t = StringAt(cond, "lastTransitionTime");
      if (!t.empty()) return t;
    }
  }
  const Json& meta = pod.contains("metadata") ? pod.at("metadata") : Json::object();
  return StringAt(meta, "creationTimestamp");
}

std::map<std::string, int64_t> Counts(const Json& container) {
  std::map<std::string, int64_t> out;
  auto r = container.find("resources");
  if (r == container.end() || !r->is_object()) return out;
  const Json* list = nullptr;
  for (const char* key : {"limits", "requests"}) {
    auto it = r->find(key);
    if (it != r->end() && it->is_object() && !it->empty()) {
      list = &*it;
      break;
    }
  }
  if (!list) return out;
  for (auto it = list->begin(); it != list->end(); ++it) {
    if (it.key().find('/') == std::string::npos) continue;
    if (it->is_string()) {
      const std::string& q = it->get_ref<const std::string&>();
      if (q.empty() || q.find_first_not_of("0123456789") != std::string::npos) continue;
    }
    auto n = kube::ParseQuantityInt(*it);
    if (n.ok()) out[it.key()] = *n;
  }
  return out;
}

bool Terminal(const Json& pod) {
  auto s = pod.find("status");
  if (s == pod.end() || !s->is_object()) return false;
  const std::string phase = StringAt(*s, "phase");
  return phase == "Succeeded" || phase == "Failed";
}

}  // namespace

Result<BoundPod> PodFromObject(const Json& pod) {
  if (!pod.is_object()) return InvalidArgument("pod object is not a JSON object");
  const Json meta = pod.value("metadata", Json::object());
  BoundPod out;
  out.uid = StringAt(meta, "uid");
  out.ns = StringAt(meta, "namespace");
  out.name = StringAt(meta, "name");
  if (out.uid.empty() || out.name.empty())
    return InvalidArgument("pod object without metadata.uid or metadata.name");
  out.bound_at = BindingTime(pod);
  if (auto a = meta.find("annotations"); a != meta.end() && a->is_object())
    for (auto it = a->begin(); it != a->end(); ++it)
      if (it->is_string()) out.annotations[it.key()] = it->get<std::string>();
  std::set<std::string> started;
  if (auto st = pod.find("status"); st != pod.end() && st->is_object())
    if (auto cs = st->find("containerStatuses"); cs != st->end() && cs->is_array())
      for (const Json& c : *cs)
        if (c.is_object() && !StringAt(c, "containerID").empty())
          started.insert(StringAt(c, "name"));
  const Json spec = pod.value("spec", Json::object());
  if (auto cs = spec.find("containers"); cs != spec.end() && cs->is_array())
    for (const Json& c : *cs) {
      if (!c.is_object()) continue;
      const std::string name = StringAt(c, "name");
      out.containers.push_back({name, Counts(c), started.count(name) > 0});
    }
  return out;
}

Result<std::vector<Json>> KubePodSource::ListPods() {
  auto list = client_.List("/api/v1/pods", {{"fieldSelector", "spec.nodeName=" + node_}});
  if (!list.ok()) return list.status();
  std::vector<Json> out;
  for (const Json& p : list->value("items", Json::array()))
    if (!Terminal(p)) out.push_back(p);
  return out;
}

Result<std::vector<BoundPod>> KubePodSource::ListBoundPods() {
  auto pods = ListPods();
  if (!pods.ok()) return pods.status();
  std::vector<BoundPod> out;
  for (const Json& p : *pods) {
    auto b = PodFromObject(p);
    if (b.ok()) out.push_back(std::move(*b));
  }
  return out;
}

}  // namespace tessera::agent
