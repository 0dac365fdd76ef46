#include "tests/kube/fake_apiserver.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <deque>
#include <limits>

#include <httplib.h>

namespace tessera::kube::testing {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double Unit(uint64_t x) {
  return static_cast<double>(Mix(x) >> 11) * 0x1.0p-53;
}

std::string Rfc3339Now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

struct ApiPath {
  std::string gv;        // "/api/v1" or "/apis/<group>/<version>"
  std::string ns;        // "" = cluster-scoped or all namespaces
  std::string resource;  // plural
  std::string name;      // "" = collection
  std::string sub;       // subresource
};

bool IsMergePatch(const std::string& content_type) {
  return content_type.rfind("application/merge-patch+json", 0) == 0;
}

bool IsStrategicMergePatch(const std::string& content_type) {
  return content_type.rfind("application/strategic-merge-patch+json", 0) == 0;
}

// Strategic merge patches apply to built-in kinds only (the API server answers 415 for custom
// resources): the core group and groups without a dot or under k8s.io.
bool IsBuiltinGroup(const std::string& gv) {
  if (gv.rfind("/api/", 0) == 0) return true;
  const std::string rest = gv.substr(std::string("/apis/").size());
  const std::string group = rest.substr(0, rest.find('/'));
  const std::string suffix = ".k8s.io";
  return group.find('.') == std::string::npos ||
         (group.size() > suffix.size() &&
          group.compare(group.size() - suffix.size(), suffix.size(), suffix) == 0);
}

// The part of strategic merge patch that matters here: RFC 7396, except that a "conditions"
// list is merged item by item on its merge key "type" (as for pod, node and other built-in
// statuses), so patching one condition keeps the others. Other lists are replaced.
void StrategicMerge(Json& target, const Json& patch) {
  if (!patch.is_object()) {
    target = patch;
    return;
  }
  if (!target.is_object()) target = Json::object();
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    if (it->is_null()) {
      target.erase(it.key());
      continue;
    }
    auto have = target.find(it.key());
    if (it.key() == "conditions" && it->is_array() && have != target.end() && have->is_array()) {
      for (const Json& item : *it) {
        const std::string type =
            item.is_object() && item.contains("type") && item["type"].is_string()
                ? item["type"].get<std::string>()
                : std::string();
        auto same = std::find_if(have->begin(), have->end(), [&](const Json& c) {
          return !type.empty() && c.is_object() && c.contains("type") && c["type"] == type;
        });
        if (same != have->end())
          StrategicMerge(*same, item);
        else
          have->push_back(item);
      }
      continue;
    }
    StrategicMerge(target[it.key()], *it);
  }
}

std::optional<ApiPath> ParsePath(const std::string& path) {
  std::vector<std::string> seg;
  size_t i = 0;
  while (i < path.size()) {
    const size_t j = path.find('/', i);
    const size_t end = j == std::string::npos ? path.size() : j;
    if (end > i) seg.push_back(path.substr(i, end - i));
    i = end + 1;
  }
  ApiPath p;
  size_t k;
  if (seg.size() >= 3 && seg[0] == "api") {
    p.gv = "/api/" + seg[1];
    k = 2;
  } else if (seg.size() >= 4 && seg[0] == "apis") {
    p.gv = "/apis/" + seg[1] + "/" + seg[2];
    k = 3;
  } else {
    return std::nullopt;
  }
  if (seg.size() - k >= 3 && seg[k] == "namespaces") {
    p.ns = seg[k + 1];
    k += 2;
  }
  const size_t rest = seg.size() - k;
  if (rest < 1 || rest > 3) return std::nullopt;
  p.resource = seg[k];
  if (rest >= 2) p.name = seg[k + 1];
  if (rest == 3) p.sub = seg[k + 2];
  return p;
}

std::string ApiVersionOf(const std::string& gv) {
  return gv.rfind("/api/", 0) == 0 ? gv.substr(5) : gv.substr(6);
}

std::string KindOf(const std::string& resource) {
  static const std::map<std::string, std::string> kKinds = {
      {"pods", "Pod"},
      {"nodes", "Node"},
      {"events", "Event"},
      {"leases", "Lease"},
      {"namespaces", "Namespace"},
      {"bindings", "Binding"},
      {"configmaps", "ConfigMap"},
      {"services", "Service"},
      {"poddisruptionbudgets", "PodDisruptionBudget"},
      {"resourceclaims", "ResourceClaim"},
      {"resourceslices", "ResourceSlice"},
      {"deviceclasses", "DeviceClass"}};
  const auto it = kKinds.find(resource);
  if (it != kKinds.end()) return it->second;
  std::string k = resource;
  if (!k.empty() && k.back() == 's') k.pop_back();
  if (!k.empty()) k[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(k[0])));
  return k;
}

std::string Key(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

const Json* Find(const Json& obj, std::string_view dotted) {
  const Json* cur = &obj;
  size_t i = 0;
  while (true) {
    if (!cur->is_object()) return nullptr;
    const size_t dot = dotted.find('.', i);
    const std::string part(dotted.substr(i, dot == std::string_view::npos ? dot : dot - i));
    const auto it = cur->find(part);
    if (it == cur->end()) return nullptr;
    cur = &*it;
    if (dot == std::string_view::npos) return cur;
    i = dot + 1;
  }
}

std::string FieldValue(const Json& obj, const std::string& field) {
  const Json* v = Find(obj, field);
  if (v == nullptr || v->is_null()) return "";
  if (v->is_string()) return v->get<std::string>();
  if (v->is_boolean()) return v->get<bool>() ? "true" : "false";
  return v->dump();
}

std::string Str(const Json& obj, std::string_view dotted) {
  const Json* v = Find(obj, dotted);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

struct Requirement {
  enum Op { kEq, kNeq, kExists, kNotExists } op;
  std::string key, value;
};

struct Selector {
  std::vector<Requirement> fields, labels;

  bool Matches(const Json& obj) const {
    for (const auto& r : fields) {
      const bool eq = FieldValue(obj, r.key) == r.value;
      if (eq != (r.op == Requirement::kEq)) return false;
    }
    if (labels.empty()) return true;
    const Json* l = Find(obj, "metadata.labels");
    for (const auto& r : labels) {
      const Json* v = nullptr;
      if (l != nullptr && l->is_object()) {
        const auto it = l->find(r.key);
        if (it != l->end() && it->is_string()) v = &*it;
      }
      switch (r.op) {
        case Requirement::kEq:
          if (v == nullptr || *v != r.value) return false;
          break;
        case Requirement::kNeq:
          if (v != nullptr && *v == r.value) return false;
          break;
        case Requirement::kExists:
          if (v == nullptr) return false;
          break;
        case Requirement::kNotExists:
          if (v != nullptr) return false;
          break;
      }
    }
    return true;
  }
};

std::string Trim(std::string s) {
  const auto b = s.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(' ') - b + 1);
}

// Returns an error message, or "" on success.
std::string ParseRequirements(const std::string& text, bool field, std::vector<Requirement>* out) {
  if (text.find_first_of("()") != std::string::npos)
    return "set-based selectors are not supported by the fake API server";
  size_t i = 0;
  while (i <= text.size()) {
    const size_t comma = text.find(',', i);
    const std::string term =
        Trim(text.substr(i, comma == std::string::npos ? std::string::npos : comma - i));
    i = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (term.empty()) continue;
    Requirement r;
    size_t at;
    if ((at = term.find("!=")) != std::string::npos) {
      r.op = Requirement::kNeq;
      r.key = Trim(term.substr(0, at));
      r.value = Trim(term.substr(at + 2));
    } else if ((at = term.find("==")) != std::string::npos) {
      r.op = Requirement::kEq;
      r.key = Trim(term.substr(0, at));
      r.value = Trim(term.substr(at + 2));
    } else if ((at = term.find('=')) != std::string::npos) {
      r.op = Requirement::kEq;
      r.key = Trim(term.substr(0, at));
      r.value = Trim(term.substr(at + 1));
    } else if (field) {
      return "invalid field selector: '" + term + "'";
    } else if (term[0] == '!') {
      r.op = Requirement::kNotExists;
      r.key = Trim(term.substr(1));
    } else {
      r.op = Requirement::kExists;
      r.key = term;
    }
    if (r.key.empty()) return "invalid selector: '" + term + "'";
    out->push_back(std::move(r));
  }
  return "";
}

bool FieldSupported(const std::string& resource, const std::string& field) {
  if (field == "metadata.name" || field == "metadata.namespace") return true;
  if (resource == "pods") {
    static const char* kPodFields[] = {
        "spec.nodeName",    "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
        "spec.hostNetwork", "status.phase",       "status.podIP",       "status.nominatedNodeName"};
    for (const char* f : kPodFields)
      if (field == f) return true;
    return false;
  }
  if (resource == "nodes") return field == "spec.unschedulable";
  return resource == "events";
}

struct Stored {
  Json obj;
  std::string text;  // obj serialised once
};
using StoredPtr = std::shared_ptr<const Stored>;

StoredPtr MakeStored(Json obj) {
  auto s = std::make_shared<Stored>();
  s->text = obj.dump();
  s->obj = std::move(obj);
  return s;
}

struct Resource {
  std::string gv, plural, kind;
  std::map<std::string, StoredPtr> objects;  // by "ns/name" or "name"
};

struct Event {
  uint64_t rv;
  const Resource* res;
  std::string ns;
  const char* type;
  StoredPtr obj, old;
  Clock::time_point at;
};

struct Snapshot {
  uint64_t id;
  uint64_t rv;
  const Resource* res;
  std::vector<StoredPtr> items;
  Clock::time_point created;
};

struct Budget {
  std::string name, ns;
  std::map<std::string, std::string> selector;
  int min_available;
};

struct Faults {
  int64_t drop_after_events = 0;
  double drop_after_s = 0;
  double delay_ms = 0;
  double failure_rate = 0;
  double throttle_rate = 0;
  int retry_after_s = 1;
  bool gone_as_http = false;
  double bookmark_interval_s = 1;
};

// The outcome of an operation: an object (2xx) or an API Status.
struct Op {
  int code = 200;
  std::string reason, message;
  Json details;
  StoredPtr obj;  // the object to answer with (2xx), unless `success_status`
  bool success_status = false;

  static Op Error(int code, std::string reason, std::string message) {
    Op op;
    op.code = code;
    op.reason = std::move(reason);
    op.message = std::move(message);
    return op;
  }
  bool ok() const { return code < 300; }
};

std::string StatusJson(int code, const std::string& reason, const std::string& message,
                       const Json& details = nullptr) {
  Json s = {{"kind", "Status"},
            {"apiVersion", "v1"},
            {"metadata", Json::object()},
            {"status", code < 300 ? "Success" : "Failure"},
            {"code", code}};
  if (!message.empty()) s["message"] = message;
  if (!reason.empty()) s["reason"] = reason;
  if (!details.is_null()) s["details"] = details;
  return s.dump();
}

Op NotFoundOp(const ApiPath& p) {
  Op op = Op::Error(404, "NotFound", p.resource + " \"" + p.name + "\" not found");
  op.details = {{"name", p.name}, {"kind", p.resource}};
  return op;
}

Op ConflictOp(const std::string& resource, const std::string& name, const std::string& why) {
  Op op = Op::Error(409, "Conflict",
                    "Operation cannot be fulfilled on " + resource + " \"" + name + "\": " + why);
  op.details = {{"name", name}, {"kind", resource}};
  return op;
}

Status ToStatus(const Op& op) {
  return HttpError(op.code, op.message, -1, op.reason);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct FakeApiServer::Impl {
  explicit Impl(FakeApiServerOptions o) : options(o) {
    faults.gone_as_http = o.gone_as_http;
    faults.bookmark_interval_s = o.bookmark_interval_s;
    history_limit = o.history_limit;
    rng_state = o.seed;
  }

  // ---- store (all *Locked functions need mu) ----

  Resource& ResourceLocked(const ApiPath& p) {
    Resource& r = resources[p.gv + "|" + p.resource];
    if (r.plural.empty()) {
      r.gv = p.gv;
      r.plural = p.resource;
      r.kind = KindOf(p.resource);
    }
    return r;
  }

  std::string RandomSuffix(size_t n) {
    static const char kChars[] = "bcdfghjklmnpqrstvwxz2456789";
    std::string s;
    for (size_t i = 0; i < n; ++i) s += kChars[Mix(rng_state++) % (sizeof kChars - 1)];
    return s;
  }

  std::string NewUid() {
    const uint64_t a = Mix(rng_state++), b = Mix(rng_state++);
    char buf[40];
    std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                  static_cast<unsigned>((a >> 16) & 0xffff),
                  static_cast<unsigned>(0x4000 | (a & 0x0fff)),
                  static_cast<unsigned>(0x8000 | ((b >> 48) & 0x3fff)),
                  static_cast<unsigned long long>(b & 0xffffffffffffULL));
    return buf;
  }

  // Assigns the next version to `obj`, stores it (or removes it for DELETED) and records the
  // event.
  StoredPtr CommitLocked(Resource& r, const std::string& key, const std::string& ns, Json obj,
                         const char* type, StoredPtr old) {
    const uint64_t rv = ++current_rv;
    obj["metadata"]["resourceVersion"] = std::to_string(rv);
    StoredPtr s = MakeStored(std::move(obj));
    if (std::string_view(type) == "DELETED") {
      r.objects.erase(key);
    } else {
      r.objects[key] = s;
    }
    events.push_back(Event{rv, &r, ns, type, s, std::move(old), Clock::now()});
    CompactLocked();
    cv.notify_all();
    return s;
  }

  void CompactLocked() {
    while (events.size() > history_limit) {
      compacted_rv = events.front().rv;
      events.pop_front();
    }
    if (events.empty()) compacted_rv = current_rv;
  }

  Op CreateLocked(const ApiPath& p, Json obj, bool replace) {
    if (!obj.is_object()) return Op::Error(400, "BadRequest", "the body must be a JSON object");
    Json& md = obj["metadata"];
    if (!md.is_object()) md = Json::object();
    const std::string body_ns = md.contains("namespace") && md["namespace"].is_string()
                                    ? md["namespace"].get<std::string>()
                                    : "";
    if (!p.ns.empty() && !body_ns.empty() && body_ns != p.ns)
      return Op::Error(400, "BadRequest",
                       "the namespace of the provided object does not match the namespace sent "
                       "on the request");
    if (!p.ns.empty()) md["namespace"] = p.ns;
    std::string name =
        md.contains("name") && md["name"].is_string() ? md["name"].get<std::string>() : "";
    if (name.empty() && md.contains("generateName") && md["generateName"].is_string()) {
      const std::string prefix = md["generateName"].get<std::string>();
      // As the API server: the prefix must be a valid name once a trailing '-' is masked.
      if ((p.resource == "pods" || p.resource == "events") &&
          !ValidateDns1123Subdomain("metadata.generateName",
                                    prefix.empty() || prefix.back() != '-'
                                        ? prefix
                                        : prefix.substr(0, prefix.size() - 1) + "a")
               .ok())
        return Op::Error(422, "Invalid",
                         p.resource + " \"" + prefix +
                             "\" is invalid: metadata.generateName: "
                             "Invalid value: a lowercase RFC 1123 subdomain must end with an "
                             "alphanumeric character");
      name = prefix + RandomSuffix(5);
      md["name"] = name;
    }
    if (name.empty())
      return Op::Error(422, "Invalid", p.resource + ": metadata.name or generateName is required");
    if ((p.resource == "pods" || p.resource == "events") &&
        !ValidateDns1123Subdomain("metadata.name", name).ok())
      return Op::Error(422, "Invalid",
                       p.resource + " \"" + name +
                           "\" is invalid: metadata.name: Invalid value: "
                           "a lowercase RFC 1123 subdomain");
    if (p.gv == "/apis/events.k8s.io/v1" && p.resource == "events") {
      for (const char* f :
           {"eventTime", "reportingController", "reportingInstance", "action", "reason"}) {
        if (Str(obj, f).empty())
          return Op::Error(422, "Invalid",
                           "Event \"" + name + "\" is invalid: " + f + ": Required value");
      }
    }
    Resource& r = ResourceLocked(p);
    if (obj.contains("kind") && obj["kind"].is_string() && obj["kind"] != "") r.kind = obj["kind"];
    const std::string key = Key(p.ns, name);
    const auto existing = r.objects.find(key);
    StoredPtr old;
    if (existing != r.objects.end()) {
      if (!replace) {
        Op op = Op::Error(409, "AlreadyExists", p.resource + " \"" + name + "\" already exists");
        op.details = {{"name", name}, {"kind", p.resource}};
        return op;
      }
      old = existing->second;
    }
    if (!obj.contains("apiVersion")) obj["apiVersion"] = ApiVersionOf(p.gv);
    if (!obj.contains("kind")) obj["kind"] = r.kind;
    if (old) {
      md["uid"] = old->obj["metadata"].value("uid", "");
      md["creationTimestamp"] = old->obj["metadata"].value("creationTimestamp", "");
    } else {
      if (!md.contains("uid") || !md["uid"].is_string() || md["uid"] == "") md["uid"] = NewUid();
      md["creationTimestamp"] = Rfc3339Now();
    }
    if (p.gv == "/api/v1" && p.resource == "pods") {
      Json& spec = obj["spec"];
      if (!spec.is_object()) spec = Json::object();
      if (Str(spec, "schedulerName").empty()) spec["schedulerName"] = "default-scheduler";
      Json& status = obj["status"];
      if (!status.is_object()) status = Json::object();
      if (Str(status, "phase").empty()) status["phase"] = "Pending";
    }
    Op op;
    op.code = old ? 200 : 201;
    op.obj = CommitLocked(r, key, p.ns, std::move(obj), old ? "MODIFIED" : "ADDED", old);
    return op;
  }

  // Applies `next` as the new state of an existing object: immutable metadata is kept and a set
  // resourceVersion must match. Through the API (`api`), only .status changes through the status
  // subresource and the main resource of pods and nodes keeps the old .status.
  Op UpdateLocked(const ApiPath& p, Json next, bool api) {
    if (!next.is_object()) return Op::Error(400, "BadRequest", "the body must be a JSON object");
    Resource& r = ResourceLocked(p);
    const std::string key = Key(p.ns, p.name);
    const auto it = r.objects.find(key);
    if (it == r.objects.end()) return NotFoundOp(p);
    const StoredPtr old = it->second;
    const Json& old_md = old->obj["metadata"];
    Json& md = next["metadata"];
    if (!md.is_object()) md = Json::object();
    const std::string name = Str(next, "metadata.name");
    if (!name.empty() && name != p.name)
      return Op::Error(400, "BadRequest",
                       "the name of the object (" + name +
                           ") does not match the name on the URL (" + p.name + ")");
    const std::string rv = Str(next, "metadata.resourceVersion");
    if (!rv.empty() && rv != old_md.value("resourceVersion", "")) {
      ++counters.conflicts;
      return ConflictOp(p.resource, p.name,
                        "the object has been modified; please apply your changes to the latest "
                        "version and try again");
    }
    const std::string uid = Str(next, "metadata.uid");
    if (!uid.empty() && uid != old_md.value("uid", "")) {
      ++counters.conflicts;
      return ConflictOp(p.resource, p.name,
                        "Precondition failed: UID in precondition: " + uid +
                            ", UID in object meta: " + old_md.value("uid", ""));
    }
    Json result;
    if (p.sub == "status") {
      result = old->obj;
      if (next.contains("status")) {
        result["status"] = std::move(next["status"]);
      } else {
        result.erase("status");
      }
    } else {
      result = std::move(next);
      if (api && p.gv == "/api/v1" && (p.resource == "pods" || p.resource == "nodes")) {
        if (old->obj.contains("status")) {
          result["status"] = old->obj["status"];
        } else {
          result.erase("status");
        }
      }
      for (const char* f : {"name", "namespace", "uid", "creationTimestamp"}) {
        if (old_md.contains(f)) {
          result["metadata"][f] = old_md[f];
        } else {
          result["metadata"].erase(f);
        }
      }
      if (!result.contains("apiVersion")) result["apiVersion"] = old->obj.value("apiVersion", "");
      if (!result.contains("kind")) result["kind"] = old->obj.value("kind", "");
    }
    result["metadata"]["resourceVersion"] = old_md.value("resourceVersion", "");
    Op op;
    if (result == old->obj) {
      op.obj = old;
      return op;
    }
    op.obj = CommitLocked(r, key, p.ns, std::move(result), "MODIFIED", old);
    return op;
  }

  Op PatchLocked(const ApiPath& p, const Json& patch, bool api, bool strategic = false) {
    if (!patch.is_object()) return Op::Error(400, "BadRequest", "the patch must be a JSON object");
    Resource& r = ResourceLocked(p);
    const auto it = r.objects.find(Key(p.ns, p.name));
    if (it == r.objects.end()) return NotFoundOp(p);
    Json next = it->second->obj;
    if (strategic)
      StrategicMerge(next, patch);
    else
      next.merge_patch(patch);
    const std::string rv = Str(patch, "metadata.resourceVersion");
    if (rv.empty()) next["metadata"]["resourceVersion"] = "";
    return UpdateLocked(p, std::move(next), api);
  }

  Op DeleteLocked(const ApiPath& p, const Json& options) {
    Resource& r = ResourceLocked(p);
    const std::string key = Key(p.ns, p.name);
    const auto it = r.objects.find(key);
    if (it == r.objects.end()) return NotFoundOp(p);
    const StoredPtr old = it->second;
    if (options.is_object()) {
      const std::string uid = Str(options, "preconditions.uid");
      const std::string rv = Str(options, "preconditions.resourceVersion");
      if ((!uid.empty() && uid != Str(old->obj, "metadata.uid")) ||
          (!rv.empty() && rv != Str(old->obj, "metadata.resourceVersion"))) {
        ++counters.conflicts;
        return ConflictOp(p.resource, p.name,
                          "Precondition failed: the object's uid or resourceVersion differs");
      }
    }
    Op op;
    op.obj = CommitLocked(r, key, p.ns, old->obj, "DELETED", old);
    return op;
  }

  Op BindLocked(const ApiPath& pod_path, const Json& binding) {
    if (!binding.is_object()) return Op::Error(400, "BadRequest", "the body must be a Binding");
    const std::string key = Key(pod_path.ns, pod_path.name);
    ++binding_attempts[key];
    const std::string target = Str(binding, "target.name");
    const std::string kind = Str(binding, "target.kind");
    if (target.empty()) return Op::Error(422, "Invalid", "Binding: target.name: Required value");
    if (!kind.empty() && kind != "Node")
      return Op::Error(422, "Invalid", "Binding: target.kind: must be empty or 'Node'");
    Resource& r = ResourceLocked(pod_path);
    const auto it = r.objects.find(key);
    if (it == r.objects.end()) return NotFoundOp(pod_path);
    const StoredPtr old = it->second;
    const Json& pod = old->obj;
    const std::string& name = pod_path.name;
    const std::string uid = Str(binding, "metadata.uid");
    const auto conflict = [&](const std::string& why) {
      ++counters.conflicts;
      return ConflictOp("pods/binding", name, why);
    };
    if (!uid.empty() && uid != Str(pod, "metadata.uid"))
      return conflict("Precondition failed: UID in precondition: " + uid +
                      ", UID in object meta: " + Str(pod, "metadata.uid"));
    if (!Str(pod, "metadata.deletionTimestamp").empty())
      return conflict("pod " + name + " is being deleted, cannot be assigned to a host");
    const std::string bound = Str(pod, "spec.nodeName");
    if (!bound.empty())
      return conflict("pod " + name + " is already assigned to node \"" + bound + "\"");
    const Json* gates = Find(pod, "spec.schedulingGates");
    if (gates != nullptr && gates->is_array() && !gates->empty())
      return conflict("pod " + name + " has non-empty .spec.schedulingGates");

    Json next = pod;
    next["spec"]["nodeName"] = target;
    if (const Json* ann = Find(binding, "metadata.annotations");
        ann != nullptr && ann->is_object()) {
      Json& dst = next["metadata"]["annotations"];
      if (!dst.is_object()) dst = Json::object();
      for (const auto& [k, v] : ann->items()) dst[k] = v;
    }
    Json& status = next["status"];
    if (!status.is_object()) status = Json::object();
    Json& conditions = status["conditions"];
    if (!conditions.is_array()) conditions = Json::array();
    const Json cond = {{"type", "PodScheduled"},
                       {"status", "True"},
                       {"lastProbeTime", nullptr},
                       {"lastTransitionTime", Rfc3339Now()}};
    bool replaced = false;
    for (Json& c : conditions) {
      if (c.is_object() && c.value("type", "") == "PodScheduled") {
        c = cond;
        replaced = true;
      }
    }
    if (!replaced) conditions.push_back(cond);
    CommitLocked(r, key, pod_path.ns, std::move(next), "MODIFIED", old);
    ++counters.bindings;
    ++bindings[key];
    Op op;
    op.code = 201;
    op.success_status = true;
    return op;
  }

  Op EvictLocked(const ApiPath& pod_path) {
    Resource& r = ResourceLocked(pod_path);
    const std::string key = Key(pod_path.ns, pod_path.name);
    const auto it = r.objects.find(key);
    if (it == r.objects.end()) return NotFoundOp(pod_path);
    const Json& pod = it->second->obj;
    const auto terminal = [](const Json& p) {
      const std::string phase = Str(p, "status.phase");
      return phase == "Succeeded" || phase == "Failed";
    };
    const auto selected = [](const Budget& b, const Json& p) {
      const Json* labels = Find(p, "metadata.labels");
      for (const auto& [k, v] : b.selector) {
        if (labels == nullptr || !labels->is_object()) return false;
        const auto l = labels->find(k);
        if (l == labels->end() || !l->is_string() || *l != v) return false;
      }
      return true;
    };
    if (!terminal(pod)) {
      for (const Budget& b : budgets) {
        if (b.ns != pod_path.ns || !selected(b, pod)) continue;
        int healthy = 0;
        const std::string prefix = pod_path.ns + "/";
        for (auto p = r.objects.lower_bound(prefix);
             p != r.objects.end() && p->first.compare(0, prefix.size(), prefix) == 0; ++p) {
          if (selected(b, p->second->obj) && !terminal(p->second->obj) &&
              Str(p->second->obj, "metadata.deletionTimestamp").empty())
            ++healthy;
        }
        if (healthy - 1 < b.min_available) {
          ++counters.evictions_blocked;
          Op op = Op::Error(429, "TooManyRequests",
                            "Cannot evict pod as it would violate the pod's disruption budget.");
          op.details = {
              {"causes",
               {{{"reason", "DisruptionBudget"},
                 {"message", "The disruption budget " + b.name + " needs " +
                                 std::to_string(b.min_available) + " healthy pods and has " +
                                 std::to_string(healthy) + " currently"}}}}};
          return op;
        }
      }
    }
    const StoredPtr old = it->second;
    CommitLocked(r, key, pod_path.ns, old->obj, "DELETED", old);
    ++counters.evictions;
    Op op;
    op.code = 201;
    op.success_status = true;
    return op;
  }

  // Objects of `p`'s collection matching `sel`, in key order.
  std::vector<StoredPtr> SelectLocked(const ApiPath& p, const Selector& sel) {
    std::vector<StoredPtr> out;
    const auto rit = resources.find(p.gv + "|" + p.resource);
    if (rit == resources.end()) return out;
    const auto& objects = rit->second.objects;
    auto it = p.ns.empty() ? objects.begin() : objects.lower_bound(p.ns + "/");
    const std::string prefix = p.ns + "/";
    for (; it != objects.end(); ++it) {
      if (!p.ns.empty() && it->first.compare(0, prefix.size(), prefix) != 0) break;
      if (sel.Matches(it->second->obj)) out.push_back(it->second);
    }
    return out;
  }

  // ---- HTTP ----

  void Reply(httplib::Response& res, const Op& op) {
    res.status = op.code;
    if (!op.ok()) {
      res.set_content(StatusJson(op.code, op.reason, op.message, op.details), "application/json");
    } else if (op.success_status || !op.obj) {
      res.set_content(StatusJson(op.code, "", ""), "application/json");
    } else {
      res.set_content(op.obj->text, "application/json");
    }
  }

  void ReplyError(httplib::Response& res, int code, const std::string& reason,
                  const std::string& message) {
    Reply(res, Op::Error(code, reason, message));
  }

  Faults CurrentFaults() {
    std::lock_guard<std::mutex> lock(fault_mu);
    return faults;
  }

  // True when the request was answered by an injected fault.
  bool InjectFault(httplib::Response& res) {
    const Faults f = CurrentFaults();
    if (f.failure_rate <= 0 && f.throttle_rate <= 0) return false;
    const uint64_t n = request_seq.fetch_add(1);
    const uint64_t base = options.seed * 0x100000001b3ULL + n * 3;
    if (f.throttle_rate > 0 && Unit(base) < f.throttle_rate) {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++counters.injected_throttles;
      }
      res.set_header("Retry-After", std::to_string(f.retry_after_s));
      ReplyError(res, 429, "TooManyRequests",
                 "injected: too many requests, please try again later");
      return true;
    }
    if (f.failure_rate > 0 && Unit(base + 1) < f.failure_rate) {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++counters.injected_errors;
      }
      if (Mix(base + 2) & 1) {
        ReplyError(res, 503, "ServiceUnavailable", "injected: service unavailable");
      } else {
        ReplyError(res, 500, "InternalError", "injected: internal error");
      }
      return true;
    }
    return false;
  }

  bool ParseSelectors(const httplib::Request& req, const ApiPath& p, Selector* sel,
                      httplib::Response& res) {
    std::string err;
    if (req.has_param("fieldSelector")) {
      err = ParseRequirements(req.get_param_value("fieldSelector"), true, &sel->fields);
      for (const auto& r : sel->fields) {
        if (err.empty() && !FieldSupported(p.resource, r.key))
          err = "field label not supported: " + r.key;
      }
    }
    if (err.empty() && req.has_param("labelSelector"))
      err = ParseRequirements(req.get_param_value("labelSelector"), false, &sel->labels);
    if (!err.empty()) {
      ReplyError(res, 400, "BadRequest", err);
      return false;
    }
    return true;
  }

  void HandleList(const httplib::Request& req, const ApiPath& p, httplib::Response& res) {
    Selector sel;
    if (!ParseSelectors(req, p, &sel, res)) return;
    int64_t limit = 0;
    if (req.has_param("limit")) limit = std::atoll(req.get_param_value("limit").c_str());
    const std::string cont = req.get_param_value("continue");
    std::shared_ptr<const Snapshot> snap;
    size_t offset = 0;
    std::vector<StoredPtr> items;
    uint64_t rv;
    std::string kind;
    {
      std::lock_guard<std::mutex> lock(mu);
      ++counters.list_pages;
      kind = ResourceLocked(p).kind;
      if (!cont.empty()) {
        const size_t dot = cont.find('.');
        const uint64_t id = std::strtoull(cont.c_str(), nullptr, 10);
        offset = dot == std::string::npos ? 0 : std::strtoull(cont.c_str() + dot + 1, nullptr, 10);
        const auto it = snapshots.find(id);
        if (it == snapshots.end() || it->second->rv < compacted_rv ||
            it->second->res != &ResourceLocked(p) || offset > it->second->items.size()) {
          ++counters.gone;
          ReplyError(res, 410, "Expired",
                     "The provided continue parameter is too old to display a consistent list "
                     "result. You can start a new list without the continue parameter.");
          return;
        }
        snap = it->second;
        rv = snap->rv;
      } else {
        rv = current_rv;
        items = SelectLocked(p, sel);
        if (limit > 0 && items.size() > static_cast<size_t>(limit)) {
          auto s = std::make_shared<Snapshot>();
          s->id = ++snapshot_seq;
          s->rv = rv;
          s->res = &ResourceLocked(p);
          s->items = std::move(items);
          s->created = Clock::now();
          snap = s;
          snapshots[s->id] = s;
          while (snapshots.size() > 16) snapshots.erase(snapshots.begin());
        }
      }
    }
    const std::vector<StoredPtr>& all = snap ? snap->items : items;
    size_t end = all.size();
    std::string next;
    if (limit > 0 && offset + static_cast<size_t>(limit) < all.size()) {
      end = offset + static_cast<size_t>(limit);
      next = std::to_string(snap->id) + "." + std::to_string(end);
    }
    size_t bytes = 256;
    for (size_t i = offset; i < end; ++i) bytes += all[i]->text.size() + 1;
    std::string body;
    body.reserve(bytes);
    body += R"({"kind":")" + kind + R"(List","apiVersion":")" + ApiVersionOf(p.gv) +
            R"(","metadata":{"resourceVersion":")" + std::to_string(rv) + '"';
    if (!next.empty()) {
      body += R"(,"continue":")" + next + R"(","remainingItemCount":)" +
              std::to_string(all.size() - end);
    }
    body += R"(},"items":[)";
    for (size_t i = offset; i < end; ++i) {
      if (i > offset) body += ',';
      body += all[i]->text;
    }
    body += "]}";
    res.status = 200;
    res.set_content(body, "application/json");
  }

  struct WatchState {
    const Resource* res = nullptr;
    std::string kind, api_version, ns;
    Selector sel;
    bool bookmarks = false, initial_end_bookmark = false;
    uint64_t pos = 0;
    Clock::time_point start, deadline, last_bookmark;
    int64_t sent = 0;
    uint64_t generation = 0;
    std::vector<StoredPtr> initial;
    size_t initial_at = 0;
    bool done = false;
  };

  static std::string EventLine(const char* type, const std::string& object_text) {
    std::string line;
    line.reserve(object_text.size() + 32);
    line += R"({"type":")";
    line += type;
    line += R"(","object":)";
    line += object_text;
    line += "}\n";
    return line;
  }

  std::string BookmarkLine(const WatchState& w, bool initial_end) {
    Json obj = {{"kind", w.kind},
                {"apiVersion", w.api_version},
                {"metadata", {{"resourceVersion", std::to_string(w.pos)}}}};
    if (initial_end) obj["metadata"]["annotations"] = {{"k8s.io/initial-events-end", "true"}};
    return EventLine("BOOKMARK", obj.dump());
  }

  std::string GoneMessage(uint64_t rv) {
    return "too old resource version: " + std::to_string(rv) + " (" +
           std::to_string(compacted_rv + 1) + ")";
  }

  struct Pending {
    const char* type;
    StoredPtr obj;
  };

  // Moves the watch past due events (filtered by resource, namespace and selector) into
  // `batch`. Sets `gone` when the history no longer reaches the watch's position, and
  // `next_due` to when the first delayed event becomes due.
  void CollectLocked(WatchState& w, const Faults& f, Clock::time_point now,
                     std::vector<Pending>& batch, bool& gone, Clock::time_point& next_due) {
    if (w.pos < compacted_rv) {
      gone = true;
      return;
    }
    size_t limit = 1000;
    if (f.drop_after_events > 0)
      limit = static_cast<size_t>(std::max<int64_t>(0, f.drop_after_events - w.sent));
    const auto delay = std::chrono::microseconds(static_cast<int64_t>(f.delay_ms * 1000));
    while (w.pos < current_rv && batch.size() < limit) {
      const Event& ev = events[w.pos - compacted_rv];
      if (f.delay_ms > 0 && ev.at + delay > now) {
        next_due = ev.at + delay;
        break;
      }
      ++w.pos;
      if (ev.res != w.res || (!w.ns.empty() && ev.ns != w.ns)) continue;
      const bool now_in = w.sel.Matches(ev.obj->obj);
      const bool was_in = ev.old && w.sel.Matches(ev.old->obj);
      const std::string_view type(ev.type);
      if (type == "DELETED") {
        if (now_in) batch.push_back({"DELETED", ev.obj});
      } else if (now_in) {
        batch.push_back({was_in ? "MODIFIED" : "ADDED", ev.obj});
      } else if (was_in) {
        batch.push_back({"DELETED", ev.obj});
      }
    }
  }

  // One step of a watch stream: writes what is due (waiting up to 100 ms for it). Returns false
  // to cut the connection.
  //
  // Events are collected with the faults read under `mu` (again after waiting), so a fault set
  // before a write applies to that write's event: with a snapshot taken before the wait, a
  // stream waiting when SetEventDelay was called delivered the next write at once.
  bool WatchStep(WatchState& w, httplib::DataSink& sink) {
    if (w.done) {
      sink.done();
      return true;
    }
    Faults f = CurrentFaults();
    const auto now = Clock::now();
    const auto cut = [&] {
      std::lock_guard<std::mutex> lock(mu);
      ++counters.watch_drops;
      return false;
    };
    if (stopping.load()) return false;
    if (w.generation != drop_generation.load()) return cut();
    if (f.drop_after_s > 0 && now - w.start >= std::chrono::duration<double>(f.drop_after_s))
      return cut();
    if (now >= w.deadline) {
      w.done = true;
      sink.done();
      return true;
    }
    std::string out;
    if (w.initial_at < w.initial.size()) {
      const size_t end = std::min(w.initial.size(), w.initial_at + 1000);
      for (; w.initial_at < end; ++w.initial_at)
        out += EventLine("ADDED", w.initial[w.initial_at]->text);
      if (w.initial_at == w.initial.size()) {
        w.initial.clear();
        if (w.initial_end_bookmark) out += BookmarkLine(w, true);
      }
      return sink.write(out.data(), out.size());
    }
    std::vector<Pending> batch;
    bool gone = false, dropped = false;
    auto next_due = Clock::time_point::max();
    {
      std::unique_lock<std::mutex> lock(mu);
      f = CurrentFaults();  // lock order: mu, then fault_mu
      CollectLocked(w, f, Clock::now(), batch, gone, next_due);
      if (batch.empty() && !gone) {
        auto until = std::min({now + std::chrono::milliseconds(100), next_due, w.deadline});
        if (w.bookmarks)
          until = std::min(
              until, w.last_bookmark + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(f.bookmark_interval_s)));
        const uint64_t seen = current_rv;
        // Also woken by DropAllWatches and by compaction (SetHistoryLimit), which notify cv.
        cv.wait_until(lock, until, [&] {
          return current_rv != seen || stopping.load() || w.generation != drop_generation.load() ||
                 w.pos < compacted_rv;
        });
        dropped = w.generation != drop_generation.load();
        if (!dropped) {
          f = CurrentFaults();
          next_due = Clock::time_point::max();
          CollectLocked(w, f, Clock::now(), batch, gone, next_due);
        }
      }
      if (dropped) {
        ++counters.watch_drops;
        return false;
      }
      if (gone) {
        ++counters.gone;
        out = EventLine("ERROR", StatusJson(410, "Expired", GoneMessage(w.pos)));
      }
    }
    if (gone) {
      w.done = true;
      if (!sink.write(out.data(), out.size())) return false;
      sink.done();
      return true;
    }
    for (const Pending& e : batch) out += EventLine(e.type, e.obj->text);
    w.sent += static_cast<int64_t>(batch.size());
    const auto after = Clock::now();
    if (w.bookmarks && batch.empty() &&
        after - w.last_bookmark >= std::chrono::duration<double>(f.bookmark_interval_s)) {
      out += BookmarkLine(w, false);
      w.last_bookmark = after;
    }
    if (!out.empty() && !sink.write(out.data(), out.size())) return false;
    if (f.drop_after_events > 0 && w.sent >= f.drop_after_events) return cut();
    return true;
  }

  void HandleWatch(const httplib::Request& req, const ApiPath& p, httplib::Response& res) {
    auto w = std::make_shared<WatchState>();
    if (!ParseSelectors(req, p, &w->sel, res)) return;
    const std::string rv_param = req.get_param_value("resourceVersion");
    const bool send_initial = req.get_param_value("sendInitialEvents") == "true";
    const bool from_now = rv_param.empty() || rv_param == "0" || send_initial;
    uint64_t rv = 0;
    if (!from_now) {
      char* end = nullptr;
      rv = std::strtoull(rv_param.c_str(), &end, 10);
      if (*end != '\0') {
        ReplyError(res, 400, "BadRequest", "invalid resourceVersion '" + rv_param + "'");
        return;
      }
    }
    double timeout_s = 1800;
    if (req.has_param("timeoutSeconds")) {
      const double t = std::atof(req.get_param_value("timeoutSeconds").c_str());
      if (t > 0) timeout_s = std::min(timeout_s, t);
    }
    w->bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
    w->initial_end_bookmark = send_initial && w->bookmarks;
    w->ns = p.ns;
    w->start = w->last_bookmark = Clock::now();
    w->deadline = w->start + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(timeout_s));
    w->generation = drop_generation.load();
    {
      std::lock_guard<std::mutex> lock(mu);
      const Faults f = CurrentFaults();  // read under mu, as in WatchStep
      Resource& r = ResourceLocked(p);
      w->res = &r;
      w->kind = r.kind;
      w->api_version = ApiVersionOf(p.gv);
      if (from_now) {
        w->pos = current_rv;
        w->initial = SelectLocked(p, w->sel);
      } else if (rv < compacted_rv && f.gone_as_http) {
        ++counters.gone;
        ReplyError(res, 410, "Gone", GoneMessage(rv));
        return;
      } else {
        w->pos = rv;  // when too old, the first step sends the ERROR event
      }
      ++counters.watches;
      ++counters.active_watches;
    }
    res.status = 200;
    res.set_chunked_content_provider(
        "application/json",
        [this, w](size_t, httplib::DataSink& sink) {
          try {
            return WatchStep(*w, sink);
          } catch (...) {
            return false;
          }
        },
        [this](bool) {
          std::lock_guard<std::mutex> lock(mu);
          --counters.active_watches;
        });
  }

  void Handle(const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++counters.requests;
      request_log.push_back(RecordedRequest{
          req.method, req.target, req.path,
          std::multimap<std::string, std::string>(req.params.begin(), req.params.end()),
          req.get_header_value("Authorization")});
      while (request_log.size() > options.request_log_limit) request_log.pop_front();
    }
    if (InjectFault(res)) return;
    const auto p = ParsePath(req.path);
    if (!p) {
      ReplyError(res, 404, "NotFound", "the server could not find the requested resource");
      return;
    }
    const std::string& m = req.method;
    Json body;
    if (m == "POST" || m == "PUT" || m == "PATCH" || (m == "DELETE" && !req.body.empty())) {
      body = Json::parse(req.body, nullptr, false);
      if (body.is_discarded()) {
        ReplyError(res, 400, "BadRequest", "the request body is not valid JSON");
        return;
      }
    }
    if (m == "GET") {
      if (p->name.empty()) {
        const std::string watch = req.get_param_value("watch");
        if (watch == "true" || watch == "1") {
          HandleWatch(req, *p, res);
        } else {
          HandleList(req, *p, res);
        }
        return;
      }
      if (!p->sub.empty() && p->sub != "status") {
        ReplyError(res, 404, "NotFound", "unknown subresource " + p->sub);
        return;
      }
      std::lock_guard<std::mutex> lock(mu);
      Resource& r = ResourceLocked(*p);
      const auto it = r.objects.find(Key(p->ns, p->name));
      Op op;
      if (it == r.objects.end()) {
        op = NotFoundOp(*p);
      } else {
        op.obj = it->second;
      }
      Reply(res, op);
      return;
    }
    Op op;
    if (m == "POST") {
      std::lock_guard<std::mutex> lock(mu);
      if (p->name.empty() && p->resource == "bindings" && p->gv == "/api/v1") {
        ApiPath pod = *p;
        pod.resource = "pods";
        pod.name = Str(body, "metadata.name");
        op = BindLocked(pod, body);
      } else if (p->name.empty()) {
        op = CreateLocked(*p, std::move(body), false);
      } else if (p->sub == "binding" && p->resource == "pods" && p->gv == "/api/v1") {
        ApiPath pod = *p;
        pod.sub.clear();
        op = BindLocked(pod, body);
      } else if (p->sub == "eviction" && p->resource == "pods" && p->gv == "/api/v1") {
        ApiPath pod = *p;
        pod.sub.clear();
        op = EvictLocked(pod);
      } else {
        op = Op::Error(405, "MethodNotAllowed", "POST is not supported on " + req.path);
      }
    } else if (m == "PUT" || m == "PATCH" || m == "DELETE") {
      if (p->name.empty() || (!p->sub.empty() && (p->sub != "status" || m == "DELETE"))) {
        op = Op::Error(405, "MethodNotAllowed", m + " is not supported on " + req.path);
      } else if (m == "PATCH" && !IsMergePatch(req.get_header_value("Content-Type")) &&
                 !(IsStrategicMergePatch(req.get_header_value("Content-Type")) &&
                   IsBuiltinGroup(p->gv))) {
        op = Op::Error(415, "UnsupportedMediaType",
                       "the fake API server supports only application/merge-patch+json, and "
                       "application/strategic-merge-patch+json for built-in kinds, not " +
                           req.get_header_value("Content-Type") + " on " + p->gv);
      } else {
        std::lock_guard<std::mutex> lock(mu);
        if (m == "PUT") {
          op = UpdateLocked(*p, std::move(body), true);
        } else if (m == "PATCH") {
          op = PatchLocked(*p, body, true,
                           IsStrategicMergePatch(req.get_header_value("Content-Type")));
        } else {
          op = DeleteLocked(*p, body);
        }
      }
    } else {
      op = Op::Error(405, "MethodNotAllowed", m + " is not supported");
    }
    Reply(res, op);
  }

  const FakeApiServerOptions options;
  httplib::Server server;
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::atomic<bool> started{false};
  int listen_fd = -1;

  mutable std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, Resource> resources;
  std::deque<Event> events;
  uint64_t current_rv = 1;
  uint64_t compacted_rv = 1;  // events up to here are gone
  size_t history_limit;
  std::map<uint64_t, std::shared_ptr<const Snapshot>> snapshots;
  uint64_t snapshot_seq = 0;
  std::vector<Budget> budgets;
  std::map<std::string, int64_t> bindings, binding_attempts;
  FakeApiServerCounters counters;
  std::deque<RecordedRequest> request_log;
  uint64_t rng_state;

  std::mutex fault_mu;
  Faults faults;
  std::atomic<uint64_t> request_seq{0};
  std::atomic<uint64_t> drop_generation{0};
};

// ---------------------------------------------------------------------------------------------

FakeApiServer::FakeApiServer(FakeApiServerOptions options)
    : impl_(std::make_unique<Impl>(options)) {}

FakeApiServer::~FakeApiServer() {
  Stop();
}

Status FakeApiServer::Start() {
  if (impl_->started.load()) return FailedPrecondition("fake API server already started");
  Impl& im = *impl_;
  const size_t threads = static_cast<size_t>(std::max(4, im.options.threads));
  im.server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  im.server.set_tcp_nodelay(true);
  im.server.set_keep_alive_max_count(std::numeric_limits<int>::max());
  im.server.set_keep_alive_timeout(5);
  im.server.set_read_timeout(10);
  im.server.set_write_timeout(10);
  const auto handler = [&im](const httplib::Request& req, httplib::Response& res) {
    try {
      im.Handle(req, res);
    } catch (const std::exception& e) {
      im.ReplyError(res, 500, "InternalError", std::string("fake API server: ") + e.what());
    }
  };
  const char* kAll = "/.*";
  im.server.Get(kAll, handler);
  im.server.Post(kAll, handler);
  im.server.Put(kAll, handler);
  im.server.Patch(kAll, handler);
  im.server.Delete(kAll, handler);
  // cpp-httplib listens with a backlog of 5; many clients connecting at once would see SYNs
  // dropped (and retried a second later), so the socket is re-listened with a larger backlog.
  im.server.set_socket_options([&im](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    im.listen_fd = sock;
  });
  port_ = im.server.bind_to_any_port("127.0.0.1");
  if (port_ <= 0) return IoError("fake API server: cannot bind 127.0.0.1");
  if (im.listen_fd >= 0) ::listen(im.listen_fd, 1024);
  im.started.store(true);
  im.thread = std::thread([&im] { im.server.listen_after_bind(); });
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!im.server.is_running()) {
    if (Clock::now() > deadline) return Internal("fake API server did not start listening");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::Ok();
}

void FakeApiServer::Stop() {
  Impl& im = *impl_;
  if (!im.started.load() || im.stopping.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(im.mu);
    im.cv.notify_all();
  }
  im.server.stop();
  if (im.thread.joinable()) im.thread.join();
}

std::string FakeApiServer::url() const {
  return "http://127.0.0.1:" + std::to_string(port_);
}

ClientConfig FakeApiServer::client_config() const {
  ClientConfig c;
  c.server = url();
  c.qps = 0;
  c.timeout_s = 10;
  return c;
}

Result<Json> FakeApiServer::Create(const std::string& collection_path, Json obj) {
  const auto p = ParsePath(collection_path);
  if (!p || !p->name.empty()) return InvalidArgument("not a collection path: " + collection_path);
  std::lock_guard<std::mutex> lock(impl_->mu);
  const Op op = impl_->CreateLocked(*p, std::move(obj), false);
  if (!op.ok()) return ToStatus(op);
  return op.obj->obj;
}

Result<Json> FakeApiServer::Upsert(const std::string& collection_path, Json obj) {
  const auto p = ParsePath(collection_path);
  if (!p || !p->name.empty()) return InvalidArgument("not a collection path: " + collection_path);
  std::lock_guard<std::mutex> lock(impl_->mu);
  const Op op = impl_->CreateLocked(*p, std::move(obj), true);
  if (!op.ok()) return ToStatus(op);
  return op.obj->obj;
}

Result<Json> FakeApiServer::Update(const std::string& object_path, Json obj) {
  const auto p = ParsePath(object_path);
  if (!p || p->name.empty()) return InvalidArgument("not an object path: " + object_path);
  std::lock_guard<std::mutex> lock(impl_->mu);
  const Op op = impl_->UpdateLocked(*p, std::move(obj), false);
  if (!op.ok()) return ToStatus(op);
  return op.obj->obj;
}

Result<Json> FakeApiServer::MergePatch(const std::string& object_path, const Json& patch) {
  const auto p = ParsePath(object_path);
  if (!p || p->name.empty()) return InvalidArgument("not an object path: " + object_path);
  std::lock_guard<std::mutex> lock(impl_->mu);
  const Op op = impl_->PatchLocked(*p, patch, false);
  if (!op.ok()) return ToStatus(op);
  return op.obj->obj;
}

Status FakeApiServer::Delete(const std::string& object_path) {
  const auto p = ParsePath(object_path);
  if (!p || p->name.empty()) return InvalidArgument("not an object path: " + object_path);
  std::lock_guard<std::mutex> lock(impl_->mu);
  const Op op = impl_->DeleteLocked(*p, Json());
  return op.ok() ? Status::Ok() : ToStatus(op);
}

std::optional<Json> FakeApiServer::Get(const std::string& object_path) const {
  const auto p = ParsePath(object_path);
  if (!p || p->name.empty()) return std::nullopt;
  std::lock_guard<std::mutex> lock(impl_->mu);
  const auto r = impl_->resources.find(p->gv + "|" + p->resource);
  if (r == impl_->resources.end()) return std::nullopt;
  const auto it = r->second.objects.find(Key(p->ns, p->name));
  if (it == r->second.objects.end()) return std::nullopt;
  return it->second->obj;
}

std::vector<Json> FakeApiServer::List(const std::string& collection_path) const {
  std::vector<Json> out;
  const auto p = ParsePath(collection_path);
  if (!p || !p->name.empty()) return out;
  std::vector<StoredPtr> items;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    items = impl_->SelectLocked(*p, Selector{});
  }
  out.reserve(items.size());
  for (const auto& s : items) out.push_back(s->obj);
  return out;
}

std::string FakeApiServer::resource_version() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return std::to_string(impl_->current_rv);
}

void FakeApiServer::AddDisruptionBudget(const std::string& name, const std::string& ns,
                                        std::map<std::string, std::string> selector,
                                        int min_available) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->budgets.push_back(Budget{name, ns, std::move(selector), min_available});
}

void FakeApiServer::SetDropWatchesAfterEvents(int64_t n) {
  std::lock_guard<std::mutex> lock(impl_->fault_mu);
  impl_->faults.drop_after_events = std::max<int64_t>(0, n);
}

void FakeApiServer::SetDropWatchesAfterSeconds(double s) {
  std::lock_guard<std::mutex> lock(impl_->fault_mu);
  impl_->faults.drop_after_s = std::max(0.0, s);
}

void FakeApiServer::DropAllWatches() {
  impl_->drop_generation.fetch_add(1);
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->cv.notify_all();
}

void FakeApiServer::SetEventDelay(double ms) {
  std::lock_guard<std::mutex> lock(impl_->fault_mu);
  impl_->faults.delay_ms = std::max(0.0, ms);
}

void FakeApiServer::SetFailureRate(double p) {
  std::lock_guard<std::mutex> lock(impl_->fault_mu);
  impl_->faults.failure_rate = std::clamp(p, 0.0, 1.0);
}

void FakeApiServer::SetThrottleRate(double p, int retry_after_s) {
  std::lock_guard<std::mutex> lock(impl_->fault_mu);
  impl_->faults.throttle_rate = std::clamp(p, 0.0, 1.0);
  impl_->faults.retry_after_s = std::max(0, retry_after_s);
}

void FakeApiServer::SetHistoryLimit(size_t n) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->history_limit = n;
  impl_->CompactLocked();
  impl_->cv.notify_all();
}

void FakeApiServer::SetGoneAsHttp(bool http) {
  std::lock_guard<std::mutex> lock(impl_->fault_mu);
  impl_->faults.gone_as_http = http;
}

void FakeApiServer::SetBookmarkInterval(double s) {
  std::lock_guard<std::mutex> lock(impl_->fault_mu);
  impl_->faults.bookmark_interval_s = std::max(0.001, s);
}

void FakeApiServer::ClearFaults() {
  {
    std::lock_guard<std::mutex> lock(impl_->fault_mu);
    Faults f;
    f.gone_as_http = impl_->options.gone_as_http;
    f.bookmark_interval_s = impl_->options.bookmark_interval_s;
    impl_->faults = f;
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->history_limit = impl_->options.history_limit;
}

std::vector<RecordedRequest> FakeApiServer::Requests() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return {impl_->request_log.begin(), impl_->request_log.end()};
}

void FakeApiServer::ClearRequests() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->request_log.clear();
}

FakeApiServerCounters FakeApiServer::counters() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->counters;
}

int64_t FakeApiServer::BindingsOf(const std::string& ns, const std::string& pod) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const auto it = impl_->bindings.find(Key(ns, pod));
  return it == impl_->bindings.end() ? 0 : it->second;
}

int64_t FakeApiServer::BindingAttemptsOf(const std::string& ns, const std::string& pod) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const auto it = impl_->binding_attempts.find(Key(ns, pod));
  return it == impl_->binding_attempts.end() ? 0 : it->second;
}

}  // namespace tessera::kube::testing
