// `tessera agent`: the node agent (docs/AGENT.md). This version reads the node once:
//
//   tessera agent --once --print-inventory [--nvml LIBRARY] [--xid-wait-ms N]
//
// discovers the GPUs through NVML (dlopen of LIBRARY, default libnvidia-ml.so.1) and prints
// one JSON object to stdout: {"inventory": <the tessera.io/gpu-inventory value>,
// "annotation": "<the same, as the annotation string>", "labels": {<GFD labels>}}.
// Errors (no NVML library, no driver, a failing NVML call, an inventory the scheduler could not
// use): stderr "tessera: <message>", exit 1.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/discovery.h"
#include "agent/inventory.h"
#include "agent/nvml.h"
#include "apps/tessera/commands.h"

namespace tessera {
namespace {

struct AgentArgs {
  bool once = false;
  bool print_inventory = false;
  std::string nvml = agent::kNvmlLibrary;
  int xid_wait_ms = 0;
};

int RunAgent(const AgentArgs& a) {
  auto fail = [](const std::string& m) {
    std::fprintf(stderr, "tessera: %s\n", m.c_str());
    return 1;
  };
  if (!a.once || !a.print_inventory)
    return fail("agent: only --once --print-inventory is implemented");
  auto backend = agent::OpenNvml(a.nvml);
  if (!backend.ok()) return fail(backend.status().message());
  agent::DiscoverOptions options;
  options.xid_wait_ms = a.xid_wait_ms;
  auto state = agent::Discover(**backend, options);
  if (!state.ok()) return fail(state.status().message());
  auto annotation = agent::InventoryAnnotation(*state);
  if (!annotation.ok()) return fail(annotation.status().message());
  nlohmann::json out = {{"inventory", nlohmann::json::parse(*annotation)},
                        {"annotation", *annotation},
                        {"labels", agent::GfdLabels(*state)}};
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
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
  cmd->callback([args, &rc] { rc = RunAgent(*args); });
}

}  // namespace tessera
