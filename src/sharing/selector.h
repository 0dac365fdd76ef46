// Sharing-mode selector: for one workload, which mechanism (exclusive, MIG, MPS, MPS inside a
// MIG instance, time-slicing) and which size, on which node and GPU, with an explanation.
//
// Contract: a choice never violates the demand's isolation class (SliceKindSatisfies) and
// always guarantees the workload its peak memory (MIG instance memory, MPS pinned limit or
// time-slice declared memory >= the demand's memory). Among the candidates that fit the cluster
// as it is (no layout change), it prefers the one that consumes the least GPU capacity and
// strands the least: free MIG instances of the right size, then GPUs already shared in the same
// mode, then idle GPUs. Capacity is counted in units of the cluster's largest GPU
// (CapacityWeight): of two models that both serve a demand, the one with less memory is used
// first, so the large GPUs stay for the work only they can hold. An explicit MIG profile is pinned:
// only instances of exactly that profile serve it. Pure and deterministic; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "cluster/cluster_state.h"

namespace tessera {

struct SelectorConfig {
  bool allow_mig = true;
  bool allow_mps = true;
  bool allow_timeslice = true;
  bool allow_mig_mps = true;  // MPS clients inside a MIG instance
};

// The demand sized for one GPU model and one mechanism.
struct SizedSlice {
  SliceKind kind = SliceKind::kExclusive;
  int gpus = 1;            // kExclusive: whole GPUs
  int mig_profile = -1;    // kMig / kMigMps: profile index in the model's geometry
  int thread_pct = 0;      // kMps / kMigMps
  int64_t memory_mib = 0;  // guaranteed memory
};
// How `d` would be served by `kind` on a GPU of `model`; FailedPrecondition with the reason when
// it cannot (model lacks MIG, memory above the GPU's, isolation forbids the kind, ...).
Result<SizedSlice> SizeSlice(const SliceDemand& d, GpuModelId model, SliceKind kind);
// Whether `d` is served by whole GPUs: it asks for GPUs, for all of one GPU's compute, or for
// nothing (no memory, compute or MIG profile).
bool WantsWholeGpus(const SliceDemand& d);
// What one GPU of node `n` is worth against a GPU of the cluster's largest memory (1.0): its
// memory over the largest. Slice costs are GPU fractions times this weight. 1.0 for a node
// without GPUs or a cluster without GPU memory figures.
double CapacityWeight(const ClusterState& cluster, NodeIdx n);
// Memory the demand is taken to need on `model` (explicit, or derived per docs/SHARING.md).
int64_t EffectiveMemoryMib(const SliceDemand& d, GpuModelId model);

struct SliceChoice {
  bool placed = false;
  SliceAssignment assignment;
  double cost = 0;  // GPU capacity consumed + stranded, in largest-GPU fractions (lower is better)
  std::string mechanism;    // e.g. "MIG 2g.20gb", "MPS 30% / 12 GiB", "exclusive 2 GPUs"
  std::string explanation;  // e.g. "MIG 2g.20gb on GPU 3 of node-7: strict isolation, 14 GiB peak"
  std::string reason;       // when !placed: why no candidate fits
};

class SliceSelector {
 public:
  explicit SliceSelector(SelectorConfig config = {}) : config_(config) {}
  const SelectorConfig& config() const { return config_; }

  // The best placement in the cluster as it is. With `allowed` (one byte per node, non-zero =
  // may be used), other nodes are left out.
  SliceChoice Select(const ClusterState& cluster, const SliceDemand& d,
                     const std::vector<uint8_t>* allowed = nullptr) const;
  // Every feasible candidate, best first, each with its explanation (for explanations and
  // tests).
  std::vector<SliceChoice> Candidates(const ClusterState& cluster, const SliceDemand& d,
                                      const std::vector<uint8_t>* allowed = nullptr) const;

 private:
  // The candidates, best first, without mechanism and explanation. With `best_only`, only the
  // first of that order (the same one): candidates that cannot beat the best so far are not
  // checked, and a node whose GPU state equals an earlier eligible node's is skipped (its
  // candidates cost the same and lose the tie on node order). `*nodes` gets the number of
  // eligible nodes (GPUs, host room, allowed model).
  std::vector<SliceChoice> Collect(const ClusterState& cluster, const SliceDemand& d,
                                   const std::vector<uint8_t>* allowed, bool best_only = false,
                                   size_t* nodes = nullptr) const;
  void Explain(const ClusterState& cluster, const SliceDemand& d, SliceChoice& c) const;
  SelectorConfig config_;
};

}  // namespace tessera
