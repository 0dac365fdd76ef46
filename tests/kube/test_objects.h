// Kubernetes objects for tests and benchmarks of the Kubernetes adapter: a GPU node as the API
// server returns it (allocatable, Ready condition, Tessera inventory with UUIDs
// "GPU-<node>-<index>"), with or without MIG layouts.
#pragma once

#include <string>
#include <vector>

#include "kube/translate.h"

namespace tessera::kube::kubetest {

inline Json GpuNodeJson(const std::string& name, int gpus, const std::string& model = "H100-80GB",
                        bool ready = true, Json taints = Json::array(),
                        Json labels = Json::object()) {
  std::vector<GpuInventoryEntry> inv;
  for (int g = 0; g < gpus; ++g)
    inv.push_back({g, "GPU-" + name + "-" + std::to_string(g), model, 81559, false, "", true});
  return {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", name},
        {"labels", std::move(labels)},
        {"annotations", {{kAnnotationInventory, EncodeInventory(inv)}}}}},
      {"spec", {{"taints", std::move(taints)}}},
      {"status",
       {{"allocatable",
         {{"cpu", "64"}, {"memory", "512Gi"}, {"nvidia.com/gpu", std::to_string(gpus)}}},
        {"conditions", Json::array({{{"type", "Ready"}, {"status", ready ? "True" : "False"}}})}}}};
}

// A node with A100-80GB GPUs; `layouts[g]` is GPU g's MIG layout ("" = MIG disabled).
inline Json MigNodeJson(const std::string& name, const std::vector<std::string>& layouts) {
  std::vector<GpuInventoryEntry> inv;
  for (size_t g = 0; g < layouts.size(); ++g)
    inv.push_back({static_cast<int>(g), "GPU-" + name + "-" + std::to_string(g), "A100-80GB", 81920,
                   !layouts[g].empty(), layouts[g], true});
  return {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", name}, {"annotations", {{kAnnotationInventory, EncodeInventory(inv)}}}}},
      {"spec", Json::object()},
      {"status",
       {{"allocatable",
         {{"cpu", "64"}, {"memory", "512Gi"}, {"nvidia.com/gpu", std::to_string(layouts.size())}}},
        {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

}  // namespace tessera::kube::kubetest
