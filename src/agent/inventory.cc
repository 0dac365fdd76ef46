#include "agent/inventory.h"

#include <algorithm>

namespace tessera::agent {
namespace {

std::string MigTypeLabel(std::string profile) {
  std::replace(profile.begin(), profile.end(), '+', '.');
  return "nvidia.com/mig-" + profile;
}

}  // namespace

std::string GpuFamily(int major, int minor) {
  switch (major) {
    case 1:
      return "tesla";
    case 2:
      return "fermi";
    case 3:
      return "kepler";
    case 5:
      return "maxwell";
    case 6:
      return "pascal";
    case 7:
      return minor < 5 ? "volta" : "turing";
    case 8:
      return minor < 9 ? "ampere" : "ada-lovelace";
    case 9:
      return "hopper";
    case 10:
    case 12:
      return "blackwell";
    default:
      return "undefined";
  }
}

Result<std::vector<kube::GpuInventoryEntry>> InventoryEntries(const NodeGpuState& state) {
  std::vector<kube::GpuInventoryEntry> out;
  for (const GpuState& g : state.gpus) {
    const std::string where = "gpu " + std::to_string(g.index);
    if (g.model.empty())
      return InvalidArgument(where + ": unknown GPU product \"" + g.product +
                             "\"; the scheduler cannot use this node's inventory");
    if (!out.empty() && out[0].model != g.model)
      return InvalidArgument(where + ": model " + g.model + " differs from gpu 0's " +
                             out[0].model + "; mixed GPU models on one node are not supported");
    kube::GpuInventoryEntry e;
    e.index = g.index;
    e.uuid = g.uuid;
    e.model = g.model;
    e.memory_mib = g.memory_mib;
    e.mig_enabled = g.mig_enabled;
    e.mig_layout = g.mig_enabled ? g.mig_layout : "";
    e.healthy = g.healthy;
    if (g.mig_enabled)
      for (const MigInstanceState& m : g.mig_instances)
        for (const MigDeviceInfo& d : m.compute_instances)
          e.mig_devices.push_back({m.placement(), d.uuid});
    e.numa_node = g.numa_node;
    e.pci_bus_id = g.pci_bus_id;
    const size_t i = static_cast<size_t>(g.index);
    if (i < state.links.size())
      for (size_t b = 0; b < state.links[i].size(); ++b)
        if (b != i && state.links[i][b] == GpuLink::kNvLink)
          e.nvlink_peers.push_back(static_cast<int>(b));
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::string> InventoryAnnotation(const NodeGpuState& state) {
  auto entries = InventoryEntries(state);
  if (!entries.ok()) return entries.status();
  std::string text = kube::EncodeInventory(*entries);
  auto back = kube::DecodeInventory(text);
  if (!back.ok())
    return Internal("the inventory does not decode: " + back.status().message() + ": " + text);
  if (*back != *entries) return Internal("the inventory does not round-trip: " + text);
  return text;
}

std::map<std::string, std::string> GfdLabels(const NodeGpuState& state) {
  std::map<std::string, std::string> labels;
  if (state.gpus.empty()) return labels;
  const GpuState& g0 = state.gpus[0];
  labels["nvidia.com/gpu.count"] = std::to_string(state.gpus.size());
  labels["nvidia.com/gpu.product"] = g0.product;
  labels["nvidia.com/gpu.memory"] = std::to_string(g0.memory_mib);
  if (g0.compute_capability) {
    const auto [major, minor] = *g0.compute_capability;
    labels["nvidia.com/gpu.family"] = GpuFamily(major, minor);
    labels["nvidia.com/gpu.compute.major"] = std::to_string(major);
    labels["nvidia.com/gpu.compute.minor"] = std::to_string(minor);
  }
  const bool capable = std::any_of(state.gpus.begin(), state.gpus.end(),
                                   [](const GpuState& g) { return g.mig_capable; });
  labels["nvidia.com/mig.capable"] = capable ? "true" : "false";
  if (!capable) return labels;
  labels["nvidia.com/mig.strategy"] = "mixed";
  std::map<std::string, int> counts;
  for (const GpuState& g : state.gpus) {
    for (const MigInstanceState& m : g.mig_instances) {
      const std::string key = MigTypeLabel(m.profile);
      counts[key] += static_cast<int>(std::max<size_t>(m.compute_instances.size(), 1));
      for (const GiProfileInfo& p : g.mig_profiles) {
        if (p.id != m.profile_id) continue;
        labels[key + ".memory"] = std::to_string(p.memory_mib);
        labels[key + ".multiprocessors"] = std::to_string(p.multiprocessors);
        labels[key + ".slices.gi"] = std::to_string(p.slices);
        labels[key + ".slices.ci"] = std::to_string(p.slices);
        labels[key + ".engines.copy"] = std::to_string(p.copy_engines);
        labels[key + ".engines.decoder"] = std::to_string(p.decoders);
        labels[key + ".engines.encoder"] = std::to_string(p.encoders);
        labels[key + ".engines.jpeg"] = std::to_string(p.jpegs);
        labels[key + ".engines.ofa"] = std::to_string(p.ofas);
      }
    }
  }
  for (const auto& [key, n] : counts) labels[key + ".count"] = std::to_string(n);
  return labels;
}

}  // namespace tessera::agent
