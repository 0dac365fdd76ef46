// TargetWorkload: the distribution of task shapes a cluster expects ("typical pods" of the
// FGD paper). Fragmentation is measured against it.
//
// A shape is (CPU, per-GPU share, GPU count, allowed models); memory is not part of it.
// FromWorkloads keeps the most frequent shapes until they cover `coverage_pct` of the tasks
// and renormalises their popularities to sum to 1. Pure; thread-compatible.
#pragma once

#include <span>
#include <vector>

#include "cluster/types.h"

namespace tessera {

struct TaskShape {
  int64_t cpu = 0;  // milli-CPU
  int gpu_milli = 0;
  int num_gpu = 0;
  ModelMask models = 0;
  double popularity = 0;  // fraction; shapes of one TargetWorkload sum to 1
};

struct TargetWorkload {
  std::vector<TaskShape> shapes;

  static TargetWorkload FromDemands(std::span<const Demand> demands, double coverage_pct = 95.0);
  // As FromDemands, but each task counts with weight(demand) instead of 1 (for coverage and
  // popularity alike). Weights must be non-negative.
  static TargetWorkload FromWeightedDemands(std::span<const Demand> demands, double coverage_pct,
                                            double (*weight)(const Demand&));
};

}  // namespace tessera
