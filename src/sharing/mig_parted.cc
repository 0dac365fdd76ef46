// mig-parted config and diff text for MIG plans (declared in sharing/mig_planner.h).
#include <map>

#include "sharing/mig_planner.h"

namespace tessera {

std::string MigPartedConfig(const ClusterState& cluster, NodeIdx node,
                            std::string_view config_name) {
  // Group GPUs with equal state: key = "" for MIG disabled, else the sorted profile counts.
  std::map<std::map<std::string, int>, std::vector<int>> enabled;
  std::vector<int> disabled;
  for (int g = 0; g < cluster.gpu_count(node); ++g) {
    const GpuSlices& gpu = cluster.gpu(node, g);
    if (!gpu.mig_enabled()) {
      disabled.push_back(g);
      continue;
    }
    const MigGeometry* geo = MigGeometryFor(gpu.model);
    std::map<std::string, int> counts;
    for (const auto& slot : gpu.instances) ++counts[geo->profiles[slot.instance.profile].name];
    enabled[counts].push_back(g);
  }
  auto devices = [](const std::vector<int>& gs) {
    std::string s = "[";
    for (size_t i = 0; i < gs.size(); ++i) s += (i ? "," : "") + std::to_string(gs[i]);
    return s + "]";
  };
  std::string out = "version: v1\nmig-configs:\n  " + std::string(config_name) + ":\n";
  if (!disabled.empty())
    out += "    - devices: " + devices(disabled) + "\n      mig-enabled: false\n";
  for (const auto& [counts, gs] : enabled) {
    out += "    - devices: " + devices(gs) + "\n      mig-enabled: true\n      mig-devices:";
    if (counts.empty()) out += " {}";
    out += "\n";
    for (const auto& [name, n] : counts)
      out += "        \"" + name + "\": " + std::to_string(n) + "\n";
  }
  if (cluster.gpu_count(node) == 0) out += "    - devices: all\n      mig-enabled: false\n";
  return out;
}

std::string MigDiffText(const ClusterState& cluster, const MigReconfig& r) {
  const GpuSlices& gpu = cluster.gpu(r.node, r.gpu);
  const MigGeometry* geo = MigGeometryFor(gpu.model);
  const std::string prefix = cluster.spec(r.node).name + " GPU " + std::to_string(r.gpu) + ": ";
  std::string out;
  if (r.mig_before != r.mig_after)
    out += prefix + (r.mig_after ? "enable MIG mode\n" : "disable MIG mode\n");
  if (!geo) return out;
  for (const auto& in : r.diff.destroy)
    out += prefix + "destroy " + geo->profiles[in.profile].name + "@" + std::to_string(in.start) +
           "\n";
  for (const auto& in : r.diff.create)
    out +=
        prefix + "create " + geo->profiles[in.profile].name + "@" + std::to_string(in.start) + "\n";
  return out;
}

}  // namespace tessera
