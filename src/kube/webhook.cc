#include "kube/webhook.h"

#include <httplib.h>
#include <openssl/evp.h>

#include <atomic>
#include <sstream>

#include "kube/rightsize.h"
#include "kube/translate.h"

namespace tessera::kube {
namespace {

using Json = nlohmann::json;

bool IsShareResource(const std::string& name) {
  return name == kResourceGpuMemory || name == kResourceGpuCompute || name == kResourceHamiMem ||
         name == kResourceHamiMemPct || name == kResourceHamiCores;
}

// Resources the node agent's device plugin serves: the kubelet calls Allocate for them.
bool IsPluginResource(const std::string& name) {
  return name == kResourceGpu || name.rfind(kResourceMigPrefix, 0) == 0 ||
         name == kResourceGpuCompute || name == kResourceGpuSlice;
}

bool IsGpuResourceName(const std::string& name) {
  return IsShareResource(name) || IsPluginResource(name);
}

// JSON Pointer escaping of one reference token (RFC 6901).
std::string Escape(const std::string& token) {
  std::string out;
  for (char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// obj[key] when it is a string, else "" (json::value throws on a member of another type).
std::string StringAt(const Json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

struct ContainerScan {
  bool share = false;
  bool plugin = false;
  bool gpu = false;
};

Result<ContainerScan> Scan(const Json& container, const std::string& where) {
  ContainerScan s;
  if (!container.contains("resources")) return s;
  const Json& res = container["resources"];
  if (!res.is_object()) return InvalidArgument(where + ".resources must be an object");
  for (const char* part : {"limits", "requests"}) {
    if (!res.contains(part)) continue;
    const Json& m = res[part];
    if (!m.is_object()) return InvalidArgument(where + ".resources." + part + " must be an object");
    for (const auto& [name, value] : m.items()) {
      s.share |= IsShareResource(name);
      s.plugin |= IsPluginResource(name);
      s.gpu |= IsGpuResourceName(name);
    }
  }
  return s;
}

// Adds limits[gpu-slice] = "1" to the container at `path`, creating the parents it lacks.
void AddHandle(const Json& container, const std::string& path, Json& patch) {
  const std::string key = Escape(kResourceGpuSlice);
  if (!container.contains("resources")) {
    patch.push_back({{"op", "add"},
                     {"path", path + "/resources"},
                     {"value", {{"limits", {{kResourceGpuSlice, "1"}}}}}});
  } else if (!container["resources"].contains("limits")) {
    patch.push_back({{"op", "add"},
                     {"path", path + "/resources/limits"},
                     {"value", {{kResourceGpuSlice, "1"}}}});
  } else {
    patch.push_back({{"op", "add"}, {"path", path + "/resources/limits/" + key}, {"value", "1"}});
  }
}

// For a `tessera.io/rightsize: auto` pod: replaces the container's nvidia.com/gpu (limits and
// requests) by one tessera.io/gpu-slice device and returns the entries it replaced (an object
// with "limits" and/or "requests"), or null when the container asks for no whole GPU.
Json RewriteWholeGpus(const Json& container, const std::string& path, Json& patch) {
  if (!container.contains("resources")) return nullptr;
  const Json& res = container["resources"];
  Json saved = Json::object();
  for (const char* part : {"limits", "requests"}) {
    if (!res.contains(part)) continue;
    const Json& m = res[part];
    if (m.contains(kResourceGpuSlice)) return nullptr;
    if (!m.contains(kResourceGpu)) continue;
    auto n = ParseQuantityInt(m[kResourceGpu]);
    if (!n.ok() || *n < 1) return nullptr;  // the scheduler reports an invalid request
    saved[part] = {{kResourceGpu, m[kResourceGpu]}};
  }
  if (saved.empty()) return nullptr;
  const std::string gpu = Escape(kResourceGpu), slice = Escape(kResourceGpuSlice);
  for (const auto& [part, entries] : saved.items()) {
    const std::string at = path + "/resources/" + part + "/";
    patch.push_back({{"op", "remove"}, {"path", at + gpu}});
    patch.push_back({{"op", "add"}, {"path", at + slice}, {"value", "1"}});
  }
  if (!saved.contains("limits")) {
    if (res.contains("limits"))
      patch.push_back(
          {{"op", "add"}, {"path", path + "/resources/limits/" + slice}, {"value", "1"}});
    else
      patch.push_back({{"op", "add"},
                       {"path", path + "/resources/limits"},
                       {"value", {{kResourceGpuSlice, "1"}}}});
  }
  return saved;
}

}  // namespace

Result<Json> ReviewPod(const Json& review, const WebhookConfig& config, WebhookOutcome* outcome) {
  WebhookOutcome local;
  WebhookOutcome& out = outcome ? *outcome : local;
  out = {};
  if (!review.is_object()) return InvalidArgument("the AdmissionReview must be a JSON object");
  if (StringAt(review, "kind") != "AdmissionReview")
    return InvalidArgument("kind must be \"AdmissionReview\"");
  if (!review.contains("request") || !review["request"].is_object())
    return InvalidArgument("request must be an object");
  const Json& req = review["request"];
  if (!req.contains("uid") || !req["uid"].is_string() || req["uid"].get<std::string>().empty())
    return InvalidArgument("request.uid must be a non-empty string");
  Json response = {{"uid", req["uid"]}, {"allowed", true}};
  const std::string api_version = StringAt(review, "apiVersion");
  Json reply = {{"apiVersion", api_version.empty() ? "admission.k8s.io/v1" : api_version},
                {"kind", "AdmissionReview"},
                {"response", response}};
  const Json* kind = req.contains("kind") && req["kind"].is_object() ? &req["kind"] : nullptr;
  if (!kind || StringAt(*kind, "kind") != "Pod" || StringAt(*kind, "group") != "") return reply;
  if (!req.contains("object") || !req["object"].is_object())
    return InvalidArgument("request.object must be a Pod object");
  const Json& pod = req["object"];
  if (!pod.contains("spec") || !pod["spec"].is_object())
    return InvalidArgument("request.object.spec must be an object");
  const Json& spec = pod["spec"];
  const Json* annotations = nullptr;
  if (pod.contains("metadata") && pod["metadata"].is_object() &&
      pod["metadata"].contains("annotations")) {
    annotations = &pod["metadata"]["annotations"];
    if (!annotations->is_object())
      return InvalidArgument("request.object.metadata.annotations must be an object");
  }
  const bool rewrite = annotations && StringAt(*annotations, kAnnotationRightsize) == "auto" &&
                       !annotations->contains(kAnnotationOriginalResources);

  Json patch = Json::array();
  Json original = Json::object();
  bool any_gpu = false;
  for (const char* list : {"initContainers", "containers"}) {
    if (!spec.contains(list)) continue;
    const Json& cs = spec[list];
    if (!cs.is_array()) return InvalidArgument(std::string("spec.") + list + " must be an array");
    for (size_t i = 0; i < cs.size(); ++i) {
      const std::string where = std::string("spec.") + list + "[" + std::to_string(i) + "]";
      if (!cs[i].is_object()) return InvalidArgument(where + " must be an object");
      auto scan = Scan(cs[i], where);
      if (!scan.ok()) return scan.status();
      any_gpu |= scan->gpu;
      if (rewrite) {
        Json saved =
            RewriteWholeGpus(cs[i], std::string("/spec/") + list + "/" + std::to_string(i), patch);
        if (!saved.is_null()) {
          const std::string name = StringAt(cs[i], "name");
          if (name.empty() || original.contains(name))
            return InvalidArgument(where + ".name must be a non-empty, unique string");
          original[name] = std::move(saved);
          ++out.containers_rewritten;
          continue;
        }
      }
      if (scan->share && !scan->plugin) {
        AddHandle(cs[i], std::string("/spec/") + list + "/" + std::to_string(i), patch);
        ++out.containers_changed;
      }
    }
  }
  if (!original.empty())  // `rewrite` implies metadata.annotations exists
    patch.push_back({{"op", "add"},
                     {"path", "/metadata/annotations/" + Escape(kAnnotationOriginalResources)},
                     {"value", original.dump()}});
  if (!config.scheduler_name.empty() && any_gpu) {
    const bool has = spec.contains("schedulerName");
    if (has && !spec["schedulerName"].is_string())
      return InvalidArgument("spec.schedulerName must be a string");
    const std::string current = has ? spec["schedulerName"].get<std::string>() : "";
    if (current.empty() || current == "default-scheduler") {
      patch.push_back({{"op", has ? "replace" : "add"},
                       {"path", "/spec/schedulerName"},
                       {"value", config.scheduler_name}});
      out.scheduler_set = true;
    }
  }
  if (!patch.empty()) {
    reply["response"]["patchType"] = "JSONPatch";
    reply["response"]["patch"] = Base64(patch.dump());
  }
  return reply;
}

struct WebhookServer::Impl {
  WebhookConfig config;
  WebhookServerOptions opts;
  std::unique_ptr<net::HttpServer> server;
  std::unique_ptr<net::HttpServer> health;
  std::atomic<int64_t> patched{0}, unchanged{0}, bad{0}, containers{0}, rewritten{0};

  std::string Metrics() const {
    std::ostringstream o;
    o << "# HELP tessera_webhook_reviews_total Admission reviews answered, by result.\n"
      << "# TYPE tessera_webhook_reviews_total counter\n"
      << "tessera_webhook_reviews_total{result=\"patched\"} " << patched.load() << "\n"
      << "tessera_webhook_reviews_total{result=\"unchanged\"} " << unchanged.load() << "\n"
      << "tessera_webhook_reviews_total{result=\"bad_request\"} " << bad.load() << "\n"
      << "# HELP tessera_webhook_containers_patched_total Containers given a " << kResourceGpuSlice
      << " device.\n"
      << "# TYPE tessera_webhook_containers_patched_total counter\n"
      << "tessera_webhook_containers_patched_total " << containers.load() << "\n"
      << "# HELP tessera_webhook_containers_rewritten_total Containers of tessera.io/rightsize: "
      << "auto pods whose " << kResourceGpu << " was replaced by a " << kResourceGpuSlice
      << " device.\n"
      << "# TYPE tessera_webhook_containers_rewritten_total counter\n"
      << "tessera_webhook_containers_rewritten_total " << rewritten.load() << "\n";
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
    server->Post(opts.path, [this](const httplib::Request& req, httplib::Response& res) {
      Json body = Json::parse(req.body, nullptr, false);
      WebhookOutcome outcome;
      auto reply = body.is_discarded() ? Result<Json>(InvalidArgument("the body is not JSON"))
                                       : ReviewPod(body, config, &outcome);
      if (!reply.ok()) {
        ++bad;
        res.status = 400;
        res.set_content("malformed AdmissionReview: " + reply.status().message() + "\n",
                        "text/plain");
        return;
      }
      ++(reply->at("response").contains("patch") ? patched : unchanged);
      containers += outcome.containers_changed;
      rewritten += outcome.containers_rewritten;
      res.set_content(reply->dump(), "application/json");
    });
    Observability(*server);
  }
};

WebhookServer::WebhookServer(WebhookConfig config, WebhookServerOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
  impl_->opts = std::move(options);
}

WebhookServer::~WebhookServer() {
  Stop();
}

Status WebhookServer::Start() {
  const WebhookServerOptions& o = impl_->opts;
  if (o.path.empty() || o.path.front() != '/')
    return InvalidArgument("the webhook path must start with '/', got \"" + o.path + "\"");
  if (!o.tls.enabled() && !o.insecure)
    return InvalidArgument(
        "the webhook serves HTTPS (the API server calls webhooks over TLS only): give a TLS "
        "certificate and key; the insecure mode serves plain HTTP on a loopback address");
  if (!o.tls.enabled() && !net::IsLoopbackAddress(o.address))
    return InvalidArgument("plain HTTP is served only on a loopback address, got " + o.address);
  net::HttpServerOptions h;
  h.address = o.address;
  h.port = o.port;
  h.tls = o.tls;
  h.limits = o.limits;
  impl_->server = std::make_unique<net::HttpServer>(h);
  impl_->Routes();
  TESSERA_RETURN_IF_ERROR(impl_->server->Start());
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
  }
  return Status::Ok();
}

int WebhookServer::port() const {
  return impl_->server ? impl_->server->port() : 0;
}

int WebhookServer::health_port() const {
  return impl_->health ? impl_->health->port() : -1;
}

void WebhookServer::Stop() {
  if (!impl_) return;
  if (impl_->health) impl_->health->Stop();
  if (impl_->server) impl_->server->Stop();
}

}  // namespace tessera::kube
