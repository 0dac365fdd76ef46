// GPU discovery: one snapshot of the node's GPUs, read through a GpuBackend into a plain value.
//
// Contract:
// * Discover reads, per GPU index: UUID, NVML name, GFD product string, catalog model
//   (kube::ModelFromProduct; empty if the product is unknown), memory, compute capability,
//   MIG mode, GPU-instance profiles, GPU instances with their compute instances and MIG device
//   UUIDs mapped to the catalog's MIG geometry (profile name @ start), NUMA node, PCI bus id,
//   running processes (attributed to their MIG instance), utilization; and the GPU-to-GPU link
//   matrix. With watch_xids it registers for critical-XID events and drains those already pending
//   (waiting xid_wait_ms for each), so a fatal XID marks its GPU unhealthy.
// * Errors: a failing NVML call is returned with the GPU and call named; a MIG instance whose
//   profile or placement the catalog does not know, or a layout the catalog calls illegal, is
//   InvalidArgument naming the GPU (the catalog and the driver disagree; nothing is guessed).
//   Zero GPUs is a valid, empty state.
// * Fatal XIDs (IsFatalXid), from NVIDIA's XID catalogue, are those after which the GPU needs
//   a reset or is gone: 48 (double-bit ECC), 61/62 (internal micro-controller breakpoint /
//   halt), 64 (ECC page retirement or row-remapper recording failure), 74 (NVLink error),
//   79 (GPU has fallen off the bus), 95 (uncontained ECC error), 119/120 (GSP RPC timeout /
//   GSP error), 140 (unrecovered ECC error). Application-level XIDs (13, 31, 43, 45, 68, 94,
//   109, ...) only end the faulting process and leave the GPU healthy. XID 999 (NVML:
//   unknown XID) is treated as fatal.
// * Pure functions of the backend's answers; not thread-safe because the backend is not.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/nvml.h"
#include "cluster/gpu_catalog.h"
#include "core/status.h"

namespace tessera::agent {

struct MigInstanceState {
  std::string profile;  // catalog name, e.g. "3g.40gb"
  int profile_id = 0;   // NVML GI profile id
  int start = 0;        // first memory slice
  int size = 0;         // memory slices
  int gi_id = 0;
  std::vector<MigDeviceInfo> compute_instances;  // usually one, covering the GI
  std::string placement() const { return profile + "@" + std::to_string(start); }
};

struct GpuProcess {
  uint32_t pid = 0;
  int64_t used_mib = 0;
  int gi_id = -1;  // -1 outside MIG
  int ci_id = -1;
  std::string mig_instance;  // "profile@start" of its GPU instance; empty outside MIG
  // SM utilization 0..1 over the last sampling window (SmSampler, agent/usage.h); empty when
  // not sampled or NVML does not report it. Discover leaves it empty.
  std::optional<double> sm_util;
};

struct GpuState {
  int index = 0;
  std::string uuid;
  std::string name;     // NVML name, e.g. "NVIDIA A100-SXM4-80GB"
  std::string product;  // GFD form: name with spaces as '-', e.g. "NVIDIA-A100-SXM4-80GB"
  std::string model;    // catalog name; empty when the product is unknown
  GpuModelId model_id = kNoGpuModel;
  int64_t memory_mib = 0;
  int64_t used_mib = 0;
  std::optional<std::pair<int, int>> compute_capability;
  bool mig_capable = false;
  bool mig_enabled = false;
  std::vector<GiProfileInfo> mig_profiles;      // offered profiles (MIG-enabled GPUs)
  std::vector<MigInstanceState> mig_instances;  // sorted by start
  std::string mig_layout;                       // MigLayoutString form; empty without MIG
  std::optional<int> numa_node;
  std::string pci_bus_id;  // NVML form; empty when not reported
  std::vector<GpuProcess> processes;
  std::optional<GpuUtilization> utilization;
  bool healthy = true;
  std::vector<uint64_t> xids;  // critical XIDs seen, in order
  std::string health_reason;   // e.g. "XID 79"; empty when healthy
};

struct NodeGpuState {
  std::vector<GpuState> gpus;               // by index
  std::vector<std::vector<GpuLink>> links;  // links[a][b], n x n
};

struct DiscoverOptions {
  bool watch_xids = true;
  int xid_wait_ms = 0;
};

Result<NodeGpuState> Discover(GpuBackend& backend, const DiscoverOptions& options = {});

bool IsFatalXid(uint64_t xid);
// Records the event on its GPU; a fatal XID marks the GPU unhealthy. Events for unknown GPUs
// are ignored.
void ApplyXid(NodeGpuState& state, const XidEvent& event);

// GFD product string for an NVML name ("NVIDIA A100-SXM4-80GB" -> "NVIDIA-A100-SXM4-80GB").
std::string GfdProduct(const std::string& nvml_name);

}  // namespace tessera::agent
