// `tessera agent`: the node agent (docs/AGENT.md).
//
//   tessera agent --once --print-inventory [--nvml LIBRARY] [--xid-wait-ms N]
//
// discovers the GPUs through NVML (dlopen of LIBRARY, default libnvidia-ml.so.1) and prints
// one JSON object to stdout: {"inventory": <the tessera.io/gpu-inventory value>,
// "annotation": "<the same, as the annotation string>", "labels": {<GFD labels>}}.
//
//   tessera agent --node NAME [--kubeconfig FILE [--context C] | --in-cluster] [--nvml LIB]
//                 [--plugin-dir DIR] [--cdi-dir DIR] [--mps-root DIR] [--mps-control PATH]
//                 [--state-dir DIR] [--metrics-address HOST:PORT] [--interval SECONDS]
//
// runs the agent loop (agent/agent_loop.h) until SIGTERM or SIGINT.
// Errors (no NVML library, no driver, a failing NVML call, an inventory the scheduler could not
// use, a bad flag or API configuration): stderr "tessera: <message>", exit 1.
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/discovery.h"
#include "agent/inventory.h"
#include "agent/nvml.h"
#include "apps/tessera/cli_util.h"
#include "apps/tessera/commands.h"
#ifdef TESSERA_HAVE_DEVICE_PLUGIN
#include "agent/agent_loop.h"
#endif

namespace tessera {
namespace {

struct AgentArgs {
  bool once = false;
  bool print_inventory = false;
  std::string nvml = agent::kNvmlLibrary;
  int xid_wait_ms = 0;
  std::string node;
  KubeClientFlags kube;
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string cdi_dir = "/var/run/cdi";
  std::string mps_root = "/run/tessera/mps";
  std::string mps_control = "nvidia-cuda-mps-control";
  std::string state_dir = "/var/lib/tessera/agent";
  std::string metrics_address = ":9402";
  std::string interval = "10";
};

int Fail(const std::string& m) {
  std::fprintf(stderr, "tessera: %s\n", m.c_str());
  return 1;
}

int PrintInventory(const AgentArgs& a) {
  auto backend = agent::OpenNvml(a.nvml);
  if (!backend.ok()) return Fail(backend.status().message());
  agent::DiscoverOptions options;
  options.xid_wait_ms = a.xid_wait_ms;
  auto state = agent::Discover(**backend, options);
  if (!state.ok()) return Fail(state.status().message());
  auto annotation = agent::InventoryAnnotation(*state);
  if (!annotation.ok()) return Fail(annotation.status().message());
  nlohmann::json out = {{"inventory", nlohmann::json::parse(*annotation)},
                        {"annotation", *annotation},
                        {"labels", agent::GfdLabels(*state)}};
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

#ifdef TESSERA_HAVE_DEVICE_PLUGIN
std::atomic<bool> g_agent_stop{false};
void OnAgentSignal(int) {
  g_agent_stop = true;
}

int RunLoop(const AgentArgs& a) {
  if (a.node.empty()) return Fail("agent: --node is required (or --once --print-inventory)");
  auto interval = ParseNumberFlag("--interval", a.interval, 0, 3600, true);
  if (!interval.ok()) return Fail(interval.status().message());
  auto backend = agent::OpenNvml(a.nvml);
  if (!backend.ok()) return Fail(backend.status().message());
  auto client_cfg = KubeClientConfig(a.kube);
  if (!client_cfg.ok()) return Fail(client_cfg.status().message());
  client_cfg->user_agent = "tessera-agent";
  auto client = kube::Client::Create(*client_cfg);
  if (!client.ok()) return Fail(client.status().message());
  agent::AgentConfig cfg;
  cfg.node_name = a.node;
  cfg.plugin.plugin_dir = a.plugin_dir;
  cfg.plugin.allocator.cdi_dir = a.cdi_dir;
  cfg.plugin.allocator.mps_root = a.mps_root;
  cfg.mps.control = a.mps_control;
  cfg.state_dir = a.state_dir;
  cfg.metrics_address = a.metrics_address;
  cfg.interval_s = *interval;
  cfg.xid_wait_ms = a.xid_wait_ms;
  agent::KubePodSource pods(**client, a.node);
  agent::AgentLoop loop(**client, **backend, pods, cfg);
  if (Status s = loop.Start(); !s.ok()) return Fail(s.message());
  std::signal(SIGINT, OnAgentSignal);
  std::signal(SIGTERM, OnAgentSignal);
  std::fprintf(stderr, "tessera agent: node %s, every %gs\n", a.node.c_str(), *interval);
  Status s = loop.Run(g_agent_stop);
  if (!s.ok()) return Fail(s.message());
  std::fprintf(stderr, "tessera agent: stopped\n");
  return 0;
}
#endif

int RunAgent(const AgentArgs& a) {
  if (a.once || a.print_inventory) {
    if (!a.once || !a.print_inventory)
      return Fail("agent: --once and --print-inventory go together");
    return PrintInventory(a);
  }
#ifdef TESSERA_HAVE_DEVICE_PLUGIN
  return RunLoop(a);
#else
  return Fail("agent: this build has no device plugin; only --once --print-inventory");
#endif
}

}  // namespace

void AddAgentCommand(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("agent", "Node agent: GPU discovery through NVML (docs/AGENT.md)");
  auto args = std::make_shared<AgentArgs>();
  cmd->add_flag("--once", args->once, "Read the node once and exit");
  cmd->add_flag("--print-inventory", args->print_inventory,
                "Print the gpu-inventory annotation and the GFD labels as JSON");
  cmd->add_option("--nvml", args->nvml, "NVML library to load (soname or path)");
  cmd->add_option("--xid-wait-ms", args->xid_wait_ms, "Wait per pending XID event, ms")
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--node", args->node, "This node's name (run mode)");
  AddKubeClientFlags(*cmd, args->kube);
  cmd->add_option("--plugin-dir", args->plugin_dir, "kubelet device plugin directory");
  cmd->add_option("--cdi-dir", args->cdi_dir, "Directory of the CDI specs written");
  cmd->add_option("--mps-root", args->mps_root, "Root of the MPS pipe and log directories");
  cmd->add_option("--mps-control", args->mps_control, "nvidia-cuda-mps-control binary");
  cmd->add_option("--state-dir", args->state_dir, "Directory of the MIG apply journals");
  cmd->add_option("--metrics-address", args->metrics_address,
                  "host:port of /metrics and /healthz (empty: off)");
  cmd->add_option("--interval", args->interval, "Seconds between passes");
  cmd->callback([args, &rc] { rc = RunAgent(*args); });
}

}  // namespace tessera
