// tessera-demo-node: the whole node flow on a laptop, in one process and without a cluster.
//
// It starts the fake API server (tests/kube/fake_apiserver.h) with one Node, the real node
// agent (agent/agent_loop.h) over the fake NVML library (three A100-80GB, GPU 0 in MIG mode
// with "3g.40gb@0 3g.40gb@4") and a fake kubelet (tests/agent/fake_kubelet.h), and the real
// scheduler runtime (kube/scheduler.h). It submits four pods (a MIG 1g.10gb instance, a strict
// share, a standard share, a whole GPU) and prints what happens, in order: the inventory the
// agent publishes, the MigLayout the scheduler asks for and the agent applies, the bindings with
// their assignments, the MPS daemons, and the kubelet's Allocate answers (environment and CDI
// device names).
//
//   tessera-demo-node [--timeout SECONDS]
//
// Exits 0 when every pod was bound and allocated, 1 with the reason otherwise. The fake NVML
// library, the fake nvidia-cuda-mps-control and the temporary directory are the only things it
// uses outside the process; the directory is removed at the end.
#include <dlfcn.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/agent_loop.h"
#include "agent/mps.h"
#include "kube/scheduler.h"
#include "kube/translate.h"
#include "tests/agent/fake_kubelet.h"
#include "tests/kube/fake_apiserver.h"

namespace tessera::demo {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kNode = "demo-node";
constexpr const char* kNamespace = "demo";

struct DemoPod {
  const char* name;
  const char* what;
  Json limits;
  const char* isolation;  // empty: the default (standard)
  const char* resource;   // the device plugin resource the kubelet asks for
  int count;              // devices the kubelet asks for
};

const std::vector<DemoPod>& Pods() {
  static const std::vector<DemoPod> pods = {
      {"mig-small",
       "a MIG 1g.10gb instance",
       {{"nvidia.com/mig-1g.10gb", "1"}},
       "",
       "nvidia.com/mig-1g.10gb",
       1},
      {"strict-share",
       "a strict share: 30% compute, 10Gi",
       {{"tessera.io/gpu-compute", "30"}, {"tessera.io/gpu-memory", "10Gi"}},
       "strict",
       "tessera.io/gpu-compute",
       30},
      {"standard-share",
       "a standard share: 20% compute, 8Gi",
       {{"tessera.io/gpu-compute", "20"}, {"tessera.io/gpu-memory", "8Gi"}},
       "",
       "tessera.io/gpu-compute",
       20},
      {"whole", "one whole GPU", {{"nvidia.com/gpu", "1"}}, "", "nvidia.com/gpu", 1},
  };
  return pods;
}

Json NodeObject() {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", kNode}}},
          {"spec", Json::object()},
          {"status",
           {{"allocatable", {{"cpu", "64"}, {"memory", "512Gi"}, {"nvidia.com/gpu", "3"}}},
            {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

Json PodObject(const DemoPod& p) {
  Json meta = {{"name", p.name}, {"namespace", kNamespace}};
  if (*p.isolation) meta["annotations"] = {{kube::kAnnotationIsolation, p.isolation}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", meta},
          {"spec",
           {{"schedulerName", "tessera"},
            {"containers", Json::array({{{"name", "main"},
                                         {"image", "cuda"},
                                         {"resources",
                                          {{"limits", p.limits},
                                           {"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}})}}}};
}

std::string Annotation(const Json& obj, const char* key) {
  return obj.value("metadata", Json::object())
      .value("annotations", Json::object())
      .value(key, std::string());
}

void Say(const char* who, const std::string& text) {
  std::printf("%-9s %s\n", who, text.c_str());
  std::fflush(stdout);
}

void PrintInventory(const std::string& text, const std::string& verb) {
  auto inv = kube::DecodeInventory(text);
  if (!inv.ok()) {
    Say("agent", "inventory does not decode: " + inv.status().message());
    return;
  }
  Say("agent", verb + " tessera.io/gpu-inventory (format version " +
                   std::to_string(kube::kInventoryVersion) + ") on node " + kNode + ":");
  for (const kube::GpuInventoryEntry& g : *inv) {
    std::string line = "  GPU " + std::to_string(g.index) + " " + g.uuid + " " + g.model +
                       (g.healthy ? "" : " UNHEALTHY") + " numa " +
                       (g.numa_node ? std::to_string(*g.numa_node) : "?") + " pci " +
                       (g.pci_bus_id.empty() ? "?" : g.pci_bus_id);
    if (!g.nvlink_peers.empty()) {
      line += " nvlink";
      for (int p : g.nvlink_peers) line += " " + std::to_string(p);
    }
    line += g.mig_enabled ? " MIG \"" + g.mig_layout + "\"" : " MIG off";
    Say("", line);
    for (const kube::InventoryMigDevice& d : g.mig_devices)
      Say("", "    " + d.instance + " = " + d.uuid);
  }
}

class Demo {
 public:
  Status Run(double timeout_s);
  ~Demo();

 private:
  Status Setup();
  Status Watch(double timeout_s);
  Status AllocateAll();
  Result<v1beta1::AllocateResponse> KubeletAllocate(const DemoPod& p);
  std::string NodeInventory() {
    const auto node = server_.Get(std::string("/api/v1/nodes/") + kNode);
    return node ? Annotation(*node, kube::kAnnotationInventory) : "";
  }

  std::string dir_;
  kube::testing::FakeApiServer server_;
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<agent::GpuBackend> backend_;
  std::unique_ptr<agent::testing::FakeKubelet> kubelet_;
  agent::AgentConfig config_;
  std::unique_ptr<agent::KubePodSource> pods_;
  std::unique_ptr<agent::AgentLoop> loop_;
  std::unique_ptr<kube::Scheduler> scheduler_;
  std::atomic<bool> stop_{false};
  std::thread scheduler_thread_;
};

Status Demo::Setup() {
  char tmpl[] = "/tmp/tessera-demo-node-XXXXXX";
  if (!mkdtemp(tmpl)) return IoError("cannot create a temporary directory");
  dir_ = tmpl;
  const Json gpus = Json::array({{{"model", "A100-80GB"},
                                  {"uuid", "GPU-demo-0"},
                                  {"mig", true},
                                  {"mig_layout", "3g.40gb@0 3g.40gb@4"},
                                  {"numa", 0}},
                                 {{"model", "A100-80GB"}, {"uuid", "GPU-demo-1"}, {"numa", 0}},
                                 {{"model", "A100-80GB"}, {"uuid", "GPU-demo-2"}, {"numa", 1}}});
  const std::string nvml_config = dir_ + "/nvml.json";
  std::ofstream(nvml_config) << Json{
      {"gpus", gpus},
      {"nvlink_groups", {{1, 2}}},
      {"state_file",
       dir_ + "/nvml-state.json"}}.dump(1);
  setenv("TESSERA_FAKE_NVML_CONFIG", nvml_config.c_str(), 1);
  setenv("TESSERA_FAKE_MPS_RECORD", (dir_ + "/mps.log").c_str(), 1);

  TESSERA_RETURN_IF_ERROR(server_.Start());
  TESSERA_RETURN_IF_ERROR(server_.Create("/api/v1/nodes", NodeObject()).status());
  auto client = kube::Client::Create(server_.client_config());
  if (!client.ok()) return client.status();
  client_ = std::move(*client);
  auto backend = agent::OpenNvml(TESSERA_DEMO_FAKE_NVML);
  if (!backend.ok()) return backend.status();
  backend_ = std::move(*backend);
  kubelet_ = std::make_unique<agent::testing::FakeKubelet>(dir_);
  TESSERA_RETURN_IF_ERROR(kubelet_->Start());

  config_.node_name = kNode;
  config_.plugin.plugin_dir = dir_;
  config_.plugin.kubelet_poll_ms = 100;
  config_.plugin.allocator.cdi_dir = dir_ + "/cdi";
  config_.plugin.allocator.mps_root = dir_ + "/mps";
  config_.mps.control = TESSERA_DEMO_FAKE_MPS_CONTROL;
  config_.state_dir = dir_ + "/state";
  config_.proc_root = dir_ + "/proc";
  pods_ = std::make_unique<agent::KubePodSource>(*client_, kNode);
  loop_ = std::make_unique<agent::AgentLoop>(*client_, *backend_, *pods_, config_);
  TESSERA_RETURN_IF_ERROR(loop_->Start());
  Say("setup", "fake API server " + server_.client_config().server + ", fake NVML " +
                   TESSERA_DEMO_FAKE_NVML + ", work dir " + dir_);
  return Status::Ok();
}

Status Demo::Watch(double timeout_s) {
  const std::string layout_path = std::string(kube::kMigLayoutsPath) + "/" + kNode;
  std::map<std::string, std::string> layout_seen;  // "spec gpu" / "status gpu" -> text
  std::set<std::string> bound;
  std::string inventory = NodeInventory();
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    Status pass = loop_->Pass();
    if (!pass.ok()) Say("agent", "pass: " + pass.message());
    if (auto ml = server_.Get(layout_path)) {
      for (const char* part : {"spec", "status"}) {
        const Json gpus = ml->value(part, Json::object()).value("gpus", Json::object());
        for (auto it = gpus.begin(); it != gpus.end(); ++it) {
          const std::string key = std::string(part) + " " + it.key();
          const std::string text = it.value().dump();
          if (layout_seen[key] == text) continue;
          layout_seen[key] = text;
          if (std::string(part) == "spec")
            Say("scheduler", "MigLayout " + std::string(kNode) + ": GPU " + it.key() +
                                 " should become \"" + it.value().value("layout", "") + "\"");
          else
            Say("agent", "MigLayout " + std::string(kNode) + ": GPU " + it.key() + " " +
                             it.value().value("state", "") + " " +
                             it.value().value("layout", it.value().value("message", "")));
        }
      }
    }
    if (std::string now = NodeInventory(); now != inventory) {
      inventory = now;
      PrintInventory(inventory, "re-published");
    }
    for (const DemoPod& p : Pods()) {
      if (bound.count(p.name)) continue;
      auto pod = server_.Get(std::string("/api/v1/namespaces/") + kNamespace + "/pods/" + p.name);
      if (!pod) continue;
      const std::string a = Annotation(*pod, kube::kAnnotationAssignment);
      if (pod->value("spec", Json::object()).value("nodeName", "").empty() || a.empty()) continue;
      bound.insert(p.name);
      Say("scheduler", "bound " + std::string(kNamespace) + "/" + p.name + " to " + kNode +
                           ": tessera.io/assignment " + a);
    }
    if (bound.size() == Pods().size()) {
      Status last = loop_->Pass();  // the plugin follows the new layout, MPS the new pods
      if (!last.ok()) Say("agent", "pass: " + last.message());
      const std::string m = loop_->Metrics();
      const size_t at = m.find("\ntessera_agent_mps_daemons ");
      if (at != std::string::npos)
        Say("agent",
            "MPS control daemons running: " + m.substr(at + 27, m.find('\n', at + 1) - at - 27));
      return Status::Ok();
    }
    std::this_thread::sleep_for(200ms);
  }
  std::string missing;
  for (const DemoPod& p : Pods())
    if (!bound.count(p.name)) missing += std::string(missing.empty() ? "" : ", ") + p.name;
  return Unavailable("not bound within " + std::to_string(static_cast<int>(timeout_s)) +
                     " s: " + missing);
}

Result<v1beta1::AllocateResponse> Demo::KubeletAllocate(const DemoPod& p) {
  agent::DevicePluginManager* plugin = loop_->plugin();
  if (!plugin) return FailedPrecondition("the device plugin is not running");
  std::string endpoint;
  for (const agent::PluginResource& r : plugin->Resources())
    if (r.name == p.resource) endpoint = r.endpoint;
  if (endpoint.empty()) return NotFound(std::string("no plugin serves ") + p.resource);
  auto list = kubelet_->FirstListAndWatch(endpoint);
  if (!list.ok()) return list.status();
  if (list->devices_size() < p.count)
    return ResourceExhausted(std::string(p.resource) + ": only " +
                             std::to_string(list->devices_size()) + " devices");
  v1beta1::AllocateRequest req;
  auto* c = req.add_container_requests();
  for (int i = 0; i < p.count; ++i) c->add_devices_ids(list->devices(i).id());
  v1beta1::AllocateResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  grpc::Status st = kubelet_->Dial(endpoint)->Allocate(&ctx, req, &resp);
  if (!st.ok()) return Internal("Allocate: " + st.error_message());
  return resp;
}

Status Demo::AllocateAll() {
  for (const DemoPod& p : Pods()) {
    auto resp = KubeletAllocate(p);
    if (!resp.ok())
      return Status(resp.status().code(), std::string(p.name) + ": " + resp.status().message());
    if (resp->container_responses_size() != 1) return Internal("not one container response");
    const auto& c = resp->container_responses(0);
    Say("kubelet", "Allocate " + std::to_string(p.count) + " " + p.resource + " for " + kNamespace +
                       "/" + p.name + " (" + p.what + "):");
    std::map<std::string, std::string> envs(c.envs().begin(), c.envs().end());
    for (const auto& [k, v] : envs) Say("", "  env " + k + "=" + v);
    for (const auto& m : c.mounts())
      Say("", "  mount " + m.host_path() + " -> " + m.container_path());
    for (const auto& d : c.cdi_devices()) Say("", "  CDI device " + d.name());
  }
  return Status::Ok();
}

Status Demo::Run(double timeout_s) {
  TESSERA_RETURN_IF_ERROR(Setup());
  Status first = loop_->Pass();
  if (!first.ok()) return first;
  PrintInventory(NodeInventory(), "published");

  kube::SchedulerRuntimeConfig cfg;
  cfg.core.gang_settle_s = 0;
  cfg.core.mig_relayout = true;
  cfg.core.mig_relayout_timeout_s = 60;
  scheduler_ = std::make_unique<kube::Scheduler>(*client_, cfg);
  scheduler_thread_ = std::thread([this] {
    Status st = scheduler_->Run(stop_);
    if (!st.ok()) Say("scheduler", "stopped: " + st.message());
  });
  for (const DemoPod& p : Pods()) {
    auto created =
        server_.Create(std::string("/api/v1/namespaces/") + kNamespace + "/pods", PodObject(p));
    if (!created.ok()) return created.status();
    Say("user", std::string("submitted ") + kNamespace + "/" + p.name + ": " + p.what);
  }
  TESSERA_RETURN_IF_ERROR(Watch(timeout_s));
  return AllocateAll();
}

Demo::~Demo() {
  stop_ = true;
  if (scheduler_thread_.joinable()) scheduler_thread_.join();
  if (loop_) loop_->Stop();
  if (!dir_.empty()) {
    agent::MpsOptions mo = config_.mps;
    mo.root = config_.plugin.allocator.mps_root;
    agent::MpsManager mps(mo);
    (void)mps.Reconcile({});
  }
  loop_.reset();
  kubelet_.reset();
  scheduler_.reset();
  pods_.reset();
  client_.reset();
  server_.Stop();
  if (!dir_.empty()) std::filesystem::remove_all(dir_);
}

}  // namespace
}  // namespace tessera::demo

int main(int argc, char** argv) {
  double timeout_s = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--timeout" && i + 1 < argc) {
      timeout_s = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--timeout SECONDS]\n", argv[0]);
      return 2;
    }
  }
  // The fake NVML stays mapped until exit (one reference never released), so what it holds
  // for the process's lifetime stays reachable for LeakSanitizer when the backend dlcloses it.
  [[maybe_unused]] void* const pinned = dlopen(TESSERA_DEMO_FAKE_NVML, RTLD_NOW);
  tessera::Status st;
  {
    tessera::demo::Demo demo;
    st = demo.Run(timeout_s);
  }
  if (!st.ok()) {
    std::fprintf(stderr, "tessera-demo-node: %s\n", st.message().c_str());
    return 1;
  }
  std::printf("done: every pod was bound and allocated\n");
  return 0;
}
