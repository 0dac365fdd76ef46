// The node agent's run mode (`tessera agent --node NAME`): every interval, read the GPUs,
// publish them on the Node, carry out the node's MigLayout, keep the device plugin's devices
// and the MPS daemons in line with the pods bound to the node; serve /metrics and /healthz.
//
// Contract:
// * Start() binds the metrics server (when metrics_address is set; port 0 = ephemeral, see
//   metrics_port) and nothing else. Run(stop) runs Pass() every interval_s until `stop` is set,
//   then stops the device plugin and the server; a failing pass is logged as one line on stderr
//   and retried at the next interval, never fatal.
// * Pass(), in order:
//   1. the MigLayout sync pass (agent/miglayout_sync.h) for this node; its Applied / Failed
//      outcomes are counted;
//   2. discovery (agent/discovery.h); an error is counted and ends the pass;
//   3. the Node's tessera.io/gpu-inventory annotation and GFD labels: one JSON merge patch on
//      /api/v1/nodes/<node> when either differs from what the Node carries (GFD labels the
//      agent published before and no longer computes, nvidia.com/gpu.* and nvidia.com/mig*,
//      are removed);
//   4. the device plugin (agent/device_plugin.h) over the given PodSource: started at the first
//      pass, given the new state afterwards, and restarted when the set of resources changes
//      (a re-layout that brings a new MIG profile);
//   5. MPS daemons (agent/mps.h): one per device named by the assignments of the non-terminal
//      pods bound to the node with kind mps (the GPU's UUID) or mig-mps (the MIG device UUID of
//      mig_instance), with the thread percentage and memory limit of the first of them bound;
//      Reconcile stops the others.
//   Between 2 and 3, per-process SM utilization is sampled (SmSampler, agent/usage.h); NVML
//   not reporting it is no error.
//   The first error of steps 1, 3, 4 and 5 (and of the sampling) is returned after all were
//   tried.
// * Metrics (text exposition): tessera_agent_up 1, tessera_agent_passes_total,
//   tessera_agent_discovery_errors_total, tessera_agent_errors_total{step},
//   tessera_agent_mig_applies_total{result="applied"|"failed"},
//   tessera_agent_inventory_publishes_total, tessera_agent_mps_daemons, followed by the usage
//   metrics of agent/usage.h for the last discovered state (pods from the PodSource's objects
//   when it is a KubePodSource). /healthz answers "ok" once a pass discovered the GPUs.
// * Thread-safety: Pass and Run on one thread; Metrics from any.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "agent/device_plugin.h"
#include "agent/kube_pod_source.h"
#include "agent/mps.h"
#include "agent/nvml.h"
#include "core/status.h"
#include "kube/client.h"

namespace tessera::agent {

struct AgentConfig {
  std::string node_name;
  DevicePluginConfig plugin;    // plugin_dir, allocator.cdi_dir, allocator.mps_root
  MpsOptions mps;               // its root is set from plugin.allocator.mps_root
  std::string state_dir;        // MIG apply journals; empty = none
  std::string metrics_address;  // "host:port"; empty = no server
  double interval_s = 10;
  std::string proc_root = "/proc";
  int xid_wait_ms = 0;
};

class AgentLoop {
 public:
  AgentLoop(kube::Client& client, GpuBackend& backend, KubePodSource& pods, AgentConfig config);
  ~AgentLoop();
  AgentLoop(const AgentLoop&) = delete;
  AgentLoop& operator=(const AgentLoop&) = delete;

  Status Start();
  Status Pass();
  Status Run(std::atomic<bool>& stop);
  void Stop();

  std::string Metrics() const;
  int metrics_port() const;
  // The device plugin manager (null before the first pass that discovered the GPUs).
  DevicePluginManager* plugin();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::agent
