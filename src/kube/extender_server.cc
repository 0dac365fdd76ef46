// The extender's wire checks and its HTTP(S) front end (contract in extender.h).
#include <httplib.h>

#include <chrono>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "kube/client.h"
#include "kube/extender.h"

namespace tessera::kube {
namespace {

std::string TypeOf(const Json& j) {
  if (j.is_number_integer() || j.is_number_unsigned()) return "integer";
  if (j.is_number_float()) return "number";
  return j.type_name();
}

Status WrongType(const std::string& path, const char* want, const Json& got) {
  return InvalidArgument(path + " must be " + want + ", got " + TypeOf(got));
}

// Optional member `key` of `obj` (absent or null pass), of the given kind.
enum class Kind { kString, kObject, kArray, kInteger, kQuantity };

Status Check(const Json& obj, const char* key, Kind kind, const std::string& path, bool required,
             const Json** out = nullptr) {
  const std::string at = path.empty() ? key : path + "." + key;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) return InvalidArgument(at + " is required");
    return Status::Ok();
  }
  const Json& v = *it;
  switch (kind) {
    case Kind::kString:
      if (!v.is_string()) return WrongType(at, "a string", v);
      break;
    case Kind::kObject:
      if (!v.is_object()) return WrongType(at, "an object", v);
      break;
    case Kind::kArray:
      if (!v.is_array()) return WrongType(at, "an array", v);
      break;
    case Kind::kInteger:
      if (!v.is_number_integer() && !v.is_number_unsigned()) return WrongType(at, "an integer", v);
      break;
    case Kind::kQuantity:
      if (!v.is_string() && !v.is_number()) return WrongType(at, "a quantity string", v);
      break;
  }
  if (out) *out = &v;
  return Status::Ok();
}

Status CheckStringMap(const Json& obj, const char* key, const std::string& path) {
  const Json* m = nullptr;
  TESSERA_RETURN_IF_ERROR(Check(obj, key, Kind::kObject, path, false, &m));
  if (!m) return Status::Ok();
  for (auto it = m->begin(); it != m->end(); ++it)
    if (!it->is_string())
      return WrongType(path + "." + key + "[\"" + it.key() + "\"]", "a string", *it);
  return Status::Ok();
}

Status CheckMetadata(const Json& obj, const std::string& path) {
  const Json* meta = nullptr;
  TESSERA_RETURN_IF_ERROR(Check(obj, "metadata", Kind::kObject, path, false, &meta));
  if (!meta) return Status::Ok();
  const std::string at = path + ".metadata";
  for (const char* k : {"name", "namespace", "uid", "creationTimestamp", "deletionTimestamp"})
    TESSERA_RETURN_IF_ERROR(Check(*meta, k, Kind::kString, at, false));
  TESSERA_RETURN_IF_ERROR(CheckStringMap(*meta, "labels", at));
  return CheckStringMap(*meta, "annotations", at);
}

Status CheckContainers(const Json& spec, const char* key, const std::string& path) {
  const Json* list = nullptr;
  TESSERA_RETURN_IF_ERROR(Check(spec, key, Kind::kArray, path, false, &list));
  if (!list) return Status::Ok();
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string at = path + "." + key + "[" + std::to_string(i) + "]";
    const Json& c = (*list)[i];
    if (!c.is_object()) return WrongType(at, "an object", c);
    const Json* res = nullptr;
    TESSERA_RETURN_IF_ERROR(Check(c, "resources", Kind::kObject, at, false, &res));
    if (!res) continue;
    for (const char* part : {"limits", "requests"}) {
      const Json* m = nullptr;
      TESSERA_RETURN_IF_ERROR(Check(*res, part, Kind::kObject, at + ".resources", false, &m));
      if (!m) continue;
      for (auto it = m->begin(); it != m->end(); ++it)
        TESSERA_RETURN_IF_ERROR(
            Check(*m, it.key().c_str(), Kind::kQuantity, at + ".resources." + part, false));
    }
  }
  return Status::Ok();
}

Status CheckPod(const Json& body, const std::string& key) {
  const Json* pod = nullptr;
  TESSERA_RETURN_IF_ERROR(Check(body, key.c_str(), Kind::kObject, "", true, &pod));
  TESSERA_RETURN_IF_ERROR(CheckMetadata(*pod, key));
  const Json* spec = nullptr;
  TESSERA_RETURN_IF_ERROR(Check(*pod, "spec", Kind::kObject, key, false, &spec));
  if (spec) {
    TESSERA_RETURN_IF_ERROR(Check(*spec, "nodeName", Kind::kString, key + ".spec", false));
    TESSERA_RETURN_IF_ERROR(Check(*spec, "priority", Kind::kInteger, key + ".spec", false));
    TESSERA_RETURN_IF_ERROR(CheckStringMap(*spec, "nodeSelector", key + ".spec"));
    TESSERA_RETURN_IF_ERROR(CheckContainers(*spec, "containers", key + ".spec"));
    TESSERA_RETURN_IF_ERROR(CheckContainers(*spec, "initContainers", key + ".spec"));
  }
  const Json* status = nullptr;
  TESSERA_RETURN_IF_ERROR(Check(*pod, "status", Kind::kObject, key, false, &status));
  if (status)
    TESSERA_RETURN_IF_ERROR(Check(*status, "phase", Kind::kString, key + ".status", false));
  return Status::Ok();
}

Status CheckNodes(const Json& body) {
  const Json* names = nullptr;
  TESSERA_RETURN_IF_ERROR(Check(body, "NodeNames", Kind::kArray, "", false, &names));
  if (names)
    for (size_t i = 0; i < names->size(); ++i)
      if (!(*names)[i].is_string())
        return WrongType("NodeNames[" + std::to_string(i) + "]", "a string", (*names)[i]);
  const Json* nodes = nullptr;
  TESSERA_RETURN_IF_ERROR(Check(body, "Nodes", Kind::kObject, "", false, &nodes));
  if (!nodes) return Status::Ok();
  const Json* items = nullptr;
  TESSERA_RETURN_IF_ERROR(Check(*nodes, "items", Kind::kArray, "Nodes", false, &items));
  if (!items) return Status::Ok();
  for (size_t i = 0; i < items->size(); ++i) {
    const std::string at = "Nodes.items[" + std::to_string(i) + "]";
    const Json& n = (*items)[i];
    if (!n.is_object()) return WrongType(at, "an object", n);
    TESSERA_RETURN_IF_ERROR(CheckMetadata(n, at));
    auto meta = n.find("metadata");
    if (meta == n.end() || !meta->is_object() || !meta->contains("name") ||
        !(*meta)["name"].is_string())
      return InvalidArgument(at + ".metadata.name is required");
    const Json* status = nullptr;
    TESSERA_RETURN_IF_ERROR(Check(n, "status", Kind::kObject, at, false, &status));
    if (!status) continue;
    for (const char* part : {"capacity", "allocatable"}) {
      const Json* m = nullptr;
      TESSERA_RETURN_IF_ERROR(Check(*status, part, Kind::kObject, at + ".status", false, &m));
      if (!m) continue;
      for (auto it = m->begin(); it != m->end(); ++it)
        TESSERA_RETURN_IF_ERROR(
            Check(*m, it.key().c_str(), Kind::kQuantity, at + ".status." + part, false));
    }
  }
  return Status::Ok();
}

Status CheckVictims(const Json& body) {
  for (const char* key : {"NodeNameToVictims", "NodeNameToMetaVictims"}) {
    const Json* map = nullptr;
    TESSERA_RETURN_IF_ERROR(Check(body, key, Kind::kObject, "", false, &map));
    if (!map) continue;
    for (auto n = map->begin(); n != map->end(); ++n) {
      const std::string at = std::string(key) + "[\"" + n.key() + "\"]";
      if (n->is_null()) continue;
      if (!n->is_object()) return WrongType(at, "an object", *n);
      TESSERA_RETURN_IF_ERROR(Check(*n, "NumPDBViolations", Kind::kInteger, at, false));
      const Json* pods = nullptr;
      TESSERA_RETURN_IF_ERROR(Check(*n, "Pods", Kind::kArray, at, false, &pods));
      if (!pods) continue;
      for (size_t i = 0; i < pods->size(); ++i) {
        const std::string p = at + ".Pods[" + std::to_string(i) + "]";
        const Json& v = (*pods)[i];
        if (!v.is_object()) return WrongType(p, "an object", v);
        TESSERA_RETURN_IF_ERROR(Check(v, "UID", Kind::kString, p, false));
        TESSERA_RETURN_IF_ERROR(CheckMetadata(v, p));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateExtenderRequest(const std::string& verb, const Json& body) {
  if (!body.is_object()) return WrongType("the request body", "a JSON object", body);
  if (verb == "bind") {
    for (const char* k : {"PodName", "PodNamespace", "Node"})
      TESSERA_RETURN_IF_ERROR(Check(body, k, Kind::kString, "", true));
    TESSERA_RETURN_IF_ERROR(Check(body, "PodUID", Kind::kString, "", false));
    TESSERA_RETURN_IF_ERROR(
        ValidateDns1123Label("PodNamespace", body["PodNamespace"].get<std::string>()));
    TESSERA_RETURN_IF_ERROR(
        ValidateDns1123Subdomain("PodName", body["PodName"].get<std::string>()));
    return ValidateDns1123Subdomain("Node", body["Node"].get<std::string>());
  }
  if (verb == "filter" || verb == "prioritize") {
    TESSERA_RETURN_IF_ERROR(CheckPod(body, "Pod"));
    return CheckNodes(body);
  }
  if (verb == "preempt") {
    TESSERA_RETURN_IF_ERROR(CheckPod(body, "Pod"));
    return CheckVictims(body);
  }
  return InvalidArgument("unknown extender verb \"" + verb + "\"");
}

struct ExtenderServer::Impl {
  Extender& ext;
  BindFn bind_fn;
  ExtenderServerOptions opts;
  std::unique_ptr<net::HttpServer> server;
  std::unique_ptr<net::HttpServer> health;
  std::mutex mu;
  std::map<std::string, int64_t> bad_requests;

  Impl(Extender& e, BindFn b, ExtenderServerOptions o)
      : ext(e), bind_fn(std::move(b)), opts(std::move(o)) {}

  std::string Metrics() {
    const ExtenderStats s = ext.stats();
    std::ostringstream o;
    o << "# HELP tessera_extender_requests_total Extender requests by verb.\n"
      << "# TYPE tessera_extender_requests_total counter\n"
      << "tessera_extender_requests_total{verb=\"filter\"} " << s.filter << "\n"
      << "tessera_extender_requests_total{verb=\"prioritize\"} " << s.prioritize << "\n"
      << "tessera_extender_requests_total{verb=\"bind\"} " << s.bind << "\n"
      << "tessera_extender_requests_total{verb=\"preempt\"} " << s.preempt << "\n"
      << "# HELP tessera_extender_bad_requests_total Requests rejected with 400.\n"
      << "# TYPE tessera_extender_bad_requests_total counter\n";
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& [verb, n] : bad_requests)
        o << "tessera_extender_bad_requests_total{verb=\"" << verb << "\"} " << n << "\n";
    }
    o << "# HELP tessera_binding_errors_total Bindings that failed.\n"
      << "# TYPE tessera_binding_errors_total counter\n"
      << "tessera_binding_errors_total " << s.bind_errors << "\n"
      << "# HELP tessera_invalid_pods_total GPU pods rejected because their request is invalid.\n"
      << "# TYPE tessera_invalid_pods_total counter\n"
      << "tessera_invalid_pods_total " << s.invalid_pods << "\n"
      << "# HELP tessera_extender_nodes Nodes in the extender's view.\n"
      << "# TYPE tessera_extender_nodes gauge\n"
      << "tessera_extender_nodes " << s.nodes << "\n"
      << "# HELP tessera_extender_gpu_pods GPU pods tracked (pending and bound).\n"
      << "# TYPE tessera_extender_gpu_pods gauge\n"
      << "tessera_extender_gpu_pods " << s.gpu_pods << "\n"
      << "# HELP tessera_extender_learned_pods_total GPU pods the placement policy learned "
         "from, as the cluster's past or as arrivals.\n"
      << "# TYPE tessera_extender_learned_pods_total counter\n"
      << "tessera_extender_learned_pods_total{as=\"past\"} " << s.learned_past << "\n"
      << "tessera_extender_learned_pods_total{as=\"arrival\"} " << s.learned_arrivals << "\n"
      << "# HELP tessera_policy_mix_changes_total Changes of the workload mix the placement "
         "policy found; each time it re-learned the mix from the recent pods alone.\n"
      << "# TYPE tessera_policy_mix_changes_total counter\n"
      << "tessera_policy_mix_changes_total " << s.mix_changes << "\n"
      << "# HELP tessera_extender_view_rebuilds_total Full rebuilds of the fleet view the "
         "policy scores in (start, a node removed or resized).\n"
      << "# TYPE tessera_extender_view_rebuilds_total counter\n"
      << "tessera_extender_view_rebuilds_total " << s.view_rebuilds << "\n"
      << "# HELP tessera_extender_fits_reused_total Candidates whose fit prioritize took from "
         "the filter call before it for the same pod.\n"
      << "# TYPE tessera_extender_fits_reused_total counter\n"
      << "tessera_extender_fits_reused_total " << s.fits_reused << "\n";
    if (server) o << net::HttpServerMetrics(server->stats());
    return o.str();
  }

  void Observability(net::HttpServer& s) {
    s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok", "text/plain");
    });
    s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(Metrics(), "text/plain; version=0.0.4");
    });
  }

  void Routes() {
    std::string prefix = opts.prefix;
    while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
    if (!prefix.empty() && prefix.front() != '/') prefix = "/" + prefix;
    for (const std::string verb : {"filter", "prioritize", "bind", "preempt"}) {
      server->Post(prefix + "/" + verb, [this, verb](const httplib::Request& req,
                                                     httplib::Response& res) {
        Json body = Json::parse(req.body, nullptr, false);
        Status valid = body.is_discarded() ? InvalidArgument("the body is not valid JSON")
                                           : ValidateExtenderRequest(verb, body);
        if (!valid.ok()) {
          {
            std::lock_guard<std::mutex> lock(mu);
            ++bad_requests[verb];
          }
          res.status = 400;
          res.set_content(Json{{"Error", verb + ": malformed request: " + valid.message()}}.dump(),
                          "application/json");
          return;
        }
        Json out;
        if (verb == "filter") out = ext.Filter(body);
        if (verb == "prioritize") out = ext.Prioritize(body);
        if (verb == "bind") out = ext.Bind(body, bind_fn);
        if (verb == "preempt") out = ext.Preempt(body);
        res.set_content(out.dump(), "application/json");
      });
    }
    Observability(*server);
  }
};

ExtenderServer::ExtenderServer(Extender& extender, BindFn bind_fn, ExtenderServerOptions options)
    : impl_(std::make_unique<Impl>(extender, std::move(bind_fn), std::move(options))) {}

ExtenderServer::~ExtenderServer() {
  Stop();
}

Status ExtenderServer::Start() {
  const ExtenderServerOptions& o = impl_->opts;
  const bool authenticated = o.tls.enabled() && !o.tls.client_ca_file.empty();
  if (!authenticated && !o.insecure)
    return InvalidArgument(
        "the extender serves only HTTPS with client certificates (TLS certificate, key and "
        "client CA); plain HTTP or TLS without client certificates needs the insecure mode, on a "
        "loopback address");
  if (!authenticated && !net::IsLoopbackAddress(o.address))
    return InvalidArgument("the insecure mode serves only on a loopback address, got " + o.address);
  net::HttpServerOptions h;
  h.address = o.address;
  h.port = o.port;
  h.tls = o.tls;
  h.limits = o.limits;
  impl_->server = std::make_unique<net::HttpServer>(h);
  impl_->Routes();
  TESSERA_RETURN_IF_ERROR(impl_->server->Start());
  port_ = impl_->server->port();
  if (o.health_port >= 0) {
    net::HttpServerOptions ho;
    ho.address = o.health_address.empty() ? "0.0.0.0" : o.health_address;
    ho.port = o.health_port;
    ho.limits = o.limits;
    impl_->health = std::make_unique<net::HttpServer>(ho);
    impl_->Observability(*impl_->health);
    if (Status st = impl_->health->Start(); !st.ok()) {
      impl_->server->Stop();
      return st;
    }
    health_port_ = impl_->health->port();
  }
  return Status::Ok();
}

void ExtenderServer::Stop() {
  if (!impl_) return;
  if (impl_->health) impl_->health->Stop();
  if (impl_->server) impl_->server->Stop();
}

Status ServeExtender(Extender& extender, BindFn bind_fn, const ExtenderServerOptions& options,
                     const std::function<bool()>& stop) {
  ExtenderServer server(extender, std::move(bind_fn), options);
  TESSERA_RETURN_IF_ERROR(server.Start());
  while (!stop()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  server.Stop();
  return Status::Ok();
}

}  // namespace tessera::kube
