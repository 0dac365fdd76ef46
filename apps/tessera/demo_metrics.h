// The Prometheus exposition of `tessera demo --metrics-listen` (cmd_demo.cc): what the fill
// experiments of the demo have done so far, per policy and seed.
//
// Series (text format 0.0.4; GPUs in GPU-equivalents, ratios in [0, 1]; every per-run series
// carries policy and seed labels and appears once that run has ended):
//   tessera_demo_running                          1 while the experiments run, then 0
//   tessera_demo_experiments_planned              policy x seed runs of this demo
//   tessera_demo_experiments_completed_total      runs ended so far
//   tessera_demo_gpus{model}                      GPU capacity of the generated cluster
//   tessera_demo_gpu_allocated_gpus{model,kind}   held at the end of a run, per GPU model
//   tessera_demo_node_gpu_allocated_gpus{node,model,kind}  the same per node (held GPUs only)
//   tessera_demo_gpu_unallocated_ratio{stage}     stage "arrival_100pct" or "end"
//   tessera_demo_gpu_fragmentation_ratio{stage}   FGD fragmented / idle GPU, "arrival_90pct" or
//                                                 "end"
//   tessera_demo_pods_placed_total, tessera_demo_pods_not_placed_total{reason}
//   tessera_demo_scheduling_decisions_total
//   tessera_demo_decision_duration_seconds        histogram of Engine::Decide wall time
// The names carry a tessera_demo_ prefix so that a demo scraped by the same Prometheus as a real
// scheduler never feeds the scheduler's alerts. Thread-safe: Record may be called from the fill
// workers while Exposition serves a scrape.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/types.h"
#include "sim/fill.h"

namespace tessera {

class DemoMetrics {
 public:
  // `nodes` is the cluster every run uses (names and models for the per-node series).
  DemoMetrics(std::vector<NodeSpec> nodes, int64_t experiments_planned);

  // Adds a finished run; runs without FillRun::detail give only their ratios and pod counts.
  void Record(const FillRun& run);
  void SetRunning(bool running);
  std::string Exposition() const;

 private:
  const std::vector<NodeSpec> nodes_;
  const int64_t planned_;
  mutable std::mutex mu_;
  bool running_ = true;
  std::vector<FillRun> runs_;  // in the order they ended
};

}  // namespace tessera
