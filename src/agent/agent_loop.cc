#include "agent/agent_loop.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include <httplib.h>

#include "agent/discovery.h"
#include "agent/inventory.h"
#include "agent/miglayout_sync.h"
#include "agent/usage.h"
#include "kube/translate.h"
#include "net/http_server.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;

bool OwnedLabel(const std::string& key) {
  return key.rfind("nvidia.com/gpu.", 0) == 0 || key.rfind("nvidia.com/mig", 0) == 0;
}

std::string MigDeviceUuid(const GpuState& gpu, const std::string& instance) {
  for (const MigInstanceState& mi : gpu.mig_instances)
    if (mi.placement() == instance && !mi.compute_instances.empty())
      return mi.compute_instances.front().uuid;
  return "";
}

}  // namespace

struct AgentLoop::Impl {
  kube::Client& client;
  GpuBackend& backend;
  KubePodSource& pods;
  AgentConfig config;
  MpsManager mps;
  std::unique_ptr<DevicePluginManager> plugin;
  std::unique_ptr<net::HttpServer> http;

  mutable std::mutex mu;  // guards what Metrics reads
  bool discovered = false;
  NodeGpuState state;
  SmSampler sm_sampler;
  std::vector<Json> pod_objects;
  int64_t passes = 0, discovery_errors = 0, publishes = 0, applied = 0, failed = 0;
  int mps_daemons = 0;
  std::map<std::string, int64_t> errors;  // step -> count

  Impl(kube::Client& c, GpuBackend& b, KubePodSource& p, AgentConfig cfg)
      : client(c), backend(b), pods(p), config(std::move(cfg)), mps([&] {
          MpsOptions o = config.mps;
          o.root = config.plugin.allocator.mps_root;
          return o;
        }()) {}

  void Count(const std::string& step) {
    std::lock_guard<std::mutex> l(mu);
    ++errors[step];
  }

  Status SyncLayouts() {
    MigSyncOptions o;
    o.node_name = config.node_name;
    o.apply.state_dir = config.state_dir;
    auto r = SyncMigLayout(client, backend, o);
    if (!r.ok()) return r.status();
    if (r->status.is_object() && r->status.contains("gpus"))
      for (const auto& [key, gpu] : r->status.at("gpus").items()) {
        const std::string s = gpu.value("state", "");
        std::lock_guard<std::mutex> l(mu);
        if (s == "Applied") ++applied;
        if (s == "Failed") ++failed;
      }
    return Status::Ok();
  }

  Status Publish(const NodeGpuState& st) {
    auto annotation = InventoryAnnotation(st);
    if (!annotation.ok()) return annotation.status();
    const auto labels = GfdLabels(st);
    auto path = kube::BuildApiPath({"api", "v1", "nodes", config.node_name});
    if (!path.ok()) return path.status();
    auto node = client.Get(*path);
    if (!node.ok()) return node.status();
    const Json meta = node->value("metadata", Json::object());
    const Json have_ann = meta.value("annotations", Json::object());
    const Json have_labels = meta.value("labels", Json::object());
    Json patch_labels = Json::object();
    for (const auto& [k, v] : labels)
      if (have_labels.value(k, std::string()) != v || !have_labels.contains(k)) patch_labels[k] = v;
    for (const auto& [k, v] : have_labels.items())
      if (OwnedLabel(k) && !labels.count(k)) patch_labels[k] = nullptr;
    Json patch_meta = Json::object();
    if (have_ann.value(kube::kAnnotationInventory, std::string()) != *annotation)
      patch_meta["annotations"] = {{kube::kAnnotationInventory, *annotation}};
    if (!patch_labels.empty()) patch_meta["labels"] = patch_labels;
    if (patch_meta.empty()) return Status::Ok();
    auto r = client.MergePatch(*path, {{"metadata", patch_meta}});
    if (!r.ok()) return r.status();
    std::lock_guard<std::mutex> l(mu);
    ++publishes;
    return Status::Ok();
  }

  Status UpdatePlugin(const NodeGpuState& st) {
    if (plugin && plugin->Resources() == PluginResourcesFor(st)) {
      plugin->UpdateState(st);
      return Status::Ok();
    }
    if (plugin) plugin->Stop();
    plugin = std::make_unique<DevicePluginManager>(pods, config.plugin);
    Status s = plugin->Start(st);
    if (!s.ok()) plugin.reset();
    return s;
  }

  Status ReconcileMps(const NodeGpuState& st, const std::vector<Json>& objects) {
    std::vector<BoundPod> bound;
    for (const Json& o : objects)
      if (auto b = PodFromObject(o); b.ok()) bound.push_back(std::move(*b));
    std::sort(bound.begin(), bound.end(), [](const BoundPod& a, const BoundPod& b) {
      return std::tie(a.bound_at, a.ns, a.name) < std::tie(b.bound_at, b.ns, b.name);
    });
    std::map<std::string, MpsDevice> devices;
    std::vector<std::string> order;
    for (const BoundPod& p : bound) {
      auto it = p.annotations.find(kube::kAnnotationAssignment);
      if (it == p.annotations.end()) continue;
      auto a = kube::DecodeAssignment(it->second);
      if (!a.ok()) continue;
      if (a->kind != kube::AssignmentKind::kMps && a->kind != kube::AssignmentKind::kMigMps)
        continue;
      if (a->gpus.empty() || a->gpus[0] < 0 || static_cast<size_t>(a->gpus[0]) >= st.gpus.size())
        continue;
      const GpuState& gpu = st.gpus[static_cast<size_t>(a->gpus[0])];
      const std::string uuid =
          a->kind == kube::AssignmentKind::kMps ? gpu.uuid : MigDeviceUuid(gpu, a->mig_instance);
      if (uuid.empty()) continue;
      auto [d, fresh] = devices.try_emplace(uuid);
      if (fresh) {
        d->second.uuid = uuid;
        d->second.active_thread_percentage = a->mps_thread_pct;
        d->second.pinned_mem_limit_mib = a->memory_limit_mib;
        order.push_back(uuid);
      }
      ++d->second.clients;
    }
    std::vector<MpsDevice> list;
    for (const std::string& u : order) list.push_back(devices.at(u));
    {
      std::lock_guard<std::mutex> l(mu);
      mps_daemons = static_cast<int>(list.size());
    }
    return mps.Reconcile(list);
  }
};

AgentLoop::AgentLoop(kube::Client& client, GpuBackend& backend, KubePodSource& pods,
                     AgentConfig config)
    : impl_(std::make_unique<Impl>(client, backend, pods, std::move(config))) {}

AgentLoop::~AgentLoop() {
  Stop();
}

Status AgentLoop::Start() {
  Impl& im = *impl_;
  if (im.config.node_name.empty()) return InvalidArgument("--node is required");
  if (im.config.metrics_address.empty()) return Status::Ok();
  net::HttpServerOptions ho;
  TESSERA_RETURN_IF_ERROR(
      net::ParseListenAddress(im.config.metrics_address, "--metrics-address", ho.address, ho.port));
  im.http = std::make_unique<net::HttpServer>(ho);
  im.http->Get("/healthz", [&im](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> l(im.mu);
    if (im.discovered) {
      res.set_content("ok", "text/plain");
    } else {
      res.status = 503;
      res.set_content("GPUs not discovered yet", "text/plain");
    }
  });
  im.http->Get("/metrics", [this, &im](const httplib::Request&, httplib::Response& res) {
    res.set_content(Metrics() + net::HttpServerMetrics(im.http->stats()),
                    "text/plain; version=0.0.4");
  });
  Status s = im.http->Start();
  if (!s.ok()) {
    im.http.reset();
    return IoError("--metrics-address " + im.config.metrics_address + ": " + s.message());
  }
  return Status::Ok();
}

Status AgentLoop::Pass() {
  Impl& im = *impl_;
  Status first = Status::Ok();
  auto note = [&](const char* step, const Status& s) {
    if (s.ok()) return;
    im.Count(step);
    if (first.ok()) first = Status(s.code(), std::string(step) + ": " + s.message());
  };
  {
    std::lock_guard<std::mutex> l(im.mu);
    ++im.passes;
  }
  note("miglayout", im.SyncLayouts());
  DiscoverOptions dopt;
  dopt.xid_wait_ms = im.config.xid_wait_ms;
  auto state = Discover(im.backend, dopt);
  if (!state.ok()) {
    std::lock_guard<std::mutex> l(im.mu);
    ++im.discovery_errors;
    return Status(state.status().code(), "discovery: " + state.status().message());
  }
  note("sm_utilization", im.sm_sampler.Sample(im.backend, *state));
  note("publish", im.Publish(*state));
  note("device_plugin", im.UpdatePlugin(*state));
  auto objects = im.pods.ListPods();
  note("pods", objects.status());
  if (objects.ok()) note("mps", im.ReconcileMps(*state, *objects));
  std::lock_guard<std::mutex> l(im.mu);
  im.discovered = true;
  im.state = std::move(*state);
  if (objects.ok()) im.pod_objects = std::move(*objects);
  return first;
}

Status AgentLoop::Run(std::atomic<bool>& stop) {
  const auto interval = std::chrono::duration<double>(impl_->config.interval_s);
  while (!stop.load()) {
    const auto next = std::chrono::steady_clock::now() + interval;
    Status s = Pass();
    if (!s.ok()) std::fprintf(stderr, "tessera agent: %s\n", s.message().c_str());
    while (!stop.load() && std::chrono::steady_clock::now() < next)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Stop();
  return Status::Ok();
}

void AgentLoop::Stop() {
  if (impl_->plugin) impl_->plugin->Stop();
  if (impl_->http) impl_->http->Stop();
}

std::string AgentLoop::Metrics() const {
  const Impl& im = *impl_;
  std::lock_guard<std::mutex> l(im.mu);
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  family("tessera_agent_up", "gauge", "1 while the node agent runs.");
  out += "tessera_agent_up 1\n";
  family("tessera_agent_passes_total", "counter", "Agent passes run.");
  out += "tessera_agent_passes_total " + std::to_string(im.passes) + "\n";
  family("tessera_agent_discovery_errors_total", "counter", "Passes whose GPU discovery failed.");
  out += "tessera_agent_discovery_errors_total " + std::to_string(im.discovery_errors) + "\n";
  family("tessera_agent_errors_total", "counter", "Failed steps of agent passes.");
  for (const auto& [step, n] : im.errors)
    out += "tessera_agent_errors_total{step=\"" + step + "\"} " + std::to_string(n) + "\n";
  family("tessera_agent_mig_applies_total", "counter", "MigLayout GPU revisions applied.");
  out += "tessera_agent_mig_applies_total{result=\"applied\"} " + std::to_string(im.applied) + "\n";
  out += "tessera_agent_mig_applies_total{result=\"failed\"} " + std::to_string(im.failed) + "\n";
  family("tessera_agent_inventory_publishes_total", "counter",
         "Node patches publishing the inventory and labels.");
  out += "tessera_agent_inventory_publishes_total " + std::to_string(im.publishes) + "\n";
  family("tessera_agent_mps_daemons", "gauge", "Devices with an MPS control daemon.");
  out += "tessera_agent_mps_daemons " + std::to_string(im.mps_daemons) + "\n";
  if (im.discovered) {
    PodListLookup lookup(Json(im.pod_objects));
    out += RenderUsageMetrics(im.state, CollectUsage(im.state, im.config.proc_root, lookup),
                              im.config.node_name);
  }
  return out;
}

int AgentLoop::metrics_port() const {
  return impl_->http ? impl_->http->port() : 0;
}

DevicePluginManager* AgentLoop::plugin() {
  return impl_->plugin.get();
}

}  // namespace tessera::agent
