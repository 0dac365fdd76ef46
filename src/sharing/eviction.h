// PlanEviction: which running workloads to evict so that a demand fits on one node: whole GPUs,
// or for a fraction (whole_gpus < 1) one GPU. Used when a workload of higher priority does not
// fit (docs/SHARING.md, "Preemption").
//
// Contract:
//   * Pure: reads the ledger, changes nothing. Deterministic.
//   * Only `candidates` may be evicted; the caller decides which running workloads are
//     candidates (e.g. strictly lower priority) and what evicting each costs.
//   * Nodes considered: allowed (null = all), of a model the demand allows, with at least
//     `whole_gpus` GPUs of at least the demand's peak memory.
//   * On a node, a GPU can be cleared when every workload on it is a candidate. The plan
//     clears the max(1, `whole_gpus`) clearable GPUs with the fewest workloads, then the least
//     cost (a GPU already empty costs nothing). If the node's host CPU or memory would still
//     fall short, it also evicts the node's other candidates, cheapest first, until they
//     suffice.
//   * A fraction may need less than a cleared GPU. With a `probe`, the winning plan's victims
//     are then reprieved one at a time, the costliest first: a victim stays when `probe` says
//     the demand still fits with only the other victims evicted. `probe` is asked only for a
//     fraction, only for a plan of two or more victims, with a subset of the plan's victims; it
//     must leave the ledger as it found it.
//   * The plan with the fewest victims wins, then the least total cost, then the lower node
//     index. Ties in cost between workloads are broken by where their slices lie (GPU, MIG
//     instance, size), then by `since` (the newer is evicted first), and only then by id, so
//     callers that number workloads differently agree (a re-created pod gets a new id in the
//     scheduler, while the simulation keeps the workload's).
//     Plans that evict nothing are not returned: the caller asks only after the demand failed
//     to fit, so something this model does not see blocks that node.
//   * Victims are listed in id order; nullopt when no node can be cleared.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cluster/cluster_state.h"

namespace tessera {

struct EvictionCandidate {
  double cost = 0;  // what evicting it loses, e.g. GPU-seconds of progress; >= 0
  MilliCpu cpu;     // host resources it asks on its node (counted in its balance)
  MiB host_memory;
  // When the workload last entered the queue: its arrival, or its re-creation after it was
  // evicted. Breaks ties between equal slices of equal cost before ids do.
  double since = 0;
};

struct EvictionPlan {
  NodeIdx node = 0;
  GpuMask gpus = 0;  // the GPUs cleared for the demand
  std::vector<WorkloadId> victims;
  double cost = 0;
};

// The share of one GPU's memory a slice holds: whole GPUs count 1 each, a MIG instance its
// memory, an MPS client or time-slice replica its memory limit, a kShare its milli-GPU. The
// cost of evicting a workload is this share times the time it has run (lost GPU-seconds);
// every caller uses it, so that the simulation and the scheduler choose the same victims.
double HeldGpuShare(const ClusterState& cluster, const SliceAssignment& a);

// True when the demand fits once exactly `victims` are evicted.
using EvictionProbe = std::function<bool(const std::vector<WorkloadId>& victims)>;

std::optional<EvictionPlan> PlanEviction(const ClusterState& cluster, const SliceDemand& d,
                                         const std::map<WorkloadId, EvictionCandidate>& candidates,
                                         const std::vector<uint8_t>* allowed,
                                         const EvictionProbe& probe = nullptr);

}  // namespace tessera
