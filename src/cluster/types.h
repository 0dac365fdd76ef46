// The cluster model's value types: nodes, workloads (their demand) and placements.
// Plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "cluster/gpu_catalog.h"
#include "core/clock.h"
#include "core/quantity.h"

namespace tessera {

using NodeIdx = uint32_t;
using WorkloadId = uint64_t;
inline constexpr int kMaxGpusPerNode = 16;
using GpuMask = uint32_t;  // bit g set = GPU g of the node

struct NodeSpec {
  std::string name;
  MilliCpu cpu;
  MiB memory;
  int gpu_count = 0;
  GpuModelId model = kNoGpuModel;  // kNoGpuModel iff gpu_count == 0
  std::map<std::string, std::string> labels;
  // Memory of each GPU as the node reports it (NVML's total, a little below the nominal size);
  // 0 = the catalog model's. MPS limits and time-slice memory are bounded by it.
  int64_t gpu_memory_mib = 0;
  bool operator==(const NodeSpec&) const = default;
};

// What a workload (one pod) asks for. num_gpu == 0: CPU-only. num_gpu == 1 and
// gpu_milli < 1000: a share of one GPU. Otherwise num_gpu whole GPUs (gpu_milli == 1000).
struct Demand {
  MilliCpu cpu;
  MiB memory;
  int num_gpu = 0;
  int gpu_milli = 0;     // per GPU
  ModelMask models = 0;  // allowed GPU models; 0 = any

  bool IsCpuOnly() const { return num_gpu == 0; }
  bool IsShare() const { return num_gpu == 1 && gpu_milli < 1000; }
  int64_t TotalMilliGpu() const { return static_cast<int64_t>(num_gpu) * gpu_milli; }
  bool AllowsModel(GpuModelId m) const { return models == 0 || (m < 64 && ((models >> m) & 1)); }
  bool operator==(const Demand&) const = default;
};

struct Workload {
  std::string name;
  Demand demand;
  SimTime creation = 0;   // seconds; used by the dynamic replay
  SimTime deletion = -1;  // -1: runs until the end
};

struct Placement {
  NodeIdx node = 0;
  GpuMask gpus = 0;  // the GPUs used; each gets demand.gpu_milli
  bool operator==(const Placement&) const = default;
};

}  // namespace tessera
