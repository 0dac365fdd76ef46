// TargetWorkload: the distribution of task shapes a cluster expects ("typical pods" of the
// FGD paper). Fragmentation is measured against it.
//
// A shape is (CPU, per-GPU share, GPU count, allowed models); memory is not part of it.
// FromWorkloads keeps the most frequent shapes until they cover `coverage_pct` of the tasks
// and renormalises their popularities to sum to 1. Pure; thread-compatible.
#pragma once

#include <map>
#include <span>
#include <tuple>
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

class ShapeTally;

struct TargetWorkload {
  std::vector<TaskShape> shapes;

  static TargetWorkload FromDemands(std::span<const Demand> demands, double coverage_pct = 95.0);
};

// Running count of the task shapes seen, for learning a TargetWorkload online. Memory grows
// with the number of distinct shapes, not with the number of tasks. Thread-compatible.
class ShapeTally {
 public:
  void Add(const Demand& d);
  // The most frequent shapes until they cover `coverage_pct` of the tasks, popularities
  // renormalised to 1 (ties in shape order, so the result is deterministic).
  TargetWorkload Build(double coverage_pct) const;

  int64_t tasks() const { return tasks_; }
  int64_t gpu_tasks() const { return gpu_tasks_; }  // tasks asking for at least one GPU
  size_t distinct() const { return counts_.size(); }
  // Totals over all tasks: milli-CPU and milli-GPU requested.
  double cpu_milli() const { return cpu_; }
  double gpu_milli() const { return gpu_; }

 private:
  std::map<std::tuple<int64_t, int, int, ModelMask>, int64_t> counts_;
  int64_t tasks_ = 0;
  int64_t gpu_tasks_ = 0;
  double cpu_ = 0;
  double gpu_ = 0;
};

}  // namespace tessera
