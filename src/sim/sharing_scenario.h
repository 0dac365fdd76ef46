// Sharing scenarios: a mixed GPU cluster and a time-varying workload mix, read from JSON, and the
// seeded generator that turns them into workloads with arrival times. Input of the sharing
// simulation (sim/sharing_sim.h); the file format is documented in docs/SHARING.md, section
// "Scenario files".
//
// Contract:
//   * The reader is strict. Syntax errors, unknown or duplicate keys, wrong JSON types, unknown
//     GPU models or isolation classes, illegal MIG layouts, out-of-range or impossible values
//     (a class no node group can host at its largest shape) are InvalidArgument with
//     "FILE:LINE:COL: PATH: reason", where PATH is the JSON path of the offending value (e.g.
//     `workloads.classes[2].memory_gib`) and LINE:COL its position (1-based, COL in bytes).
//     A scenario expected to generate more than kMaxSharingWorkloads workloads is rejected too.
//   * GenerateSharingWorkloads is deterministic in (scenario, seed) and draws only from
//     tessera::Rng: each class has its own stream, so adding a class leaves the others' draws
//     unchanged. Arrivals of a class form a Poisson process whose rate is piecewise constant
//     (base rate x the phase's multiplier), floored to whole seconds, all in [0, horizon_s).
//     Workloads are ordered by (arrival, class index, draw order) and numbered 0, 1, ...
//     Per workload: GPU memory peak uniform in MiB over the class range, compute % uniform over
//     its integer range, whole GPUs uniform over the listed counts, isolation class by the
//     class weights, duration log-uniform in whole seconds over its range, host CPU (milli-cores)
//     and memory (MiB) uniform over their ranges. The demand's model mask holds the catalog
//     models with at least the peak memory (and in the class's gpu_models, when given).
// Plain values; the functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/gpu_slices.h"
#include "cluster/types.h"
#include "core/clock.h"
#include "core/status.h"

namespace tessera {

inline constexpr int64_t kMaxSharingWorkloads = 2000000;
// Class priorities lie in [-kMaxPriority, kMaxPriority] (Kubernetes' user range).
inline constexpr int64_t kMaxPriority = 1000000000;

// A closed interval; lo == hi for a fixed value.
struct SharingRange {
  double lo = 0;
  double hi = 0;
};

struct SharingNodeGroup {
  std::string name_prefix;  // nodes are "<prefix>-<i>", i = 0..count-1
  int count = 0;
  GpuModelId model = kNoGpuModel;
  int gpus_per_node = 0;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  // Layout the static-mig strategy gives the first static_mig_gpus GPUs of every node; empty
  // (and static_mig_gpus 0) when the group stays without MIG.
  MigLayout static_mig_layout;
  int static_mig_gpus = 0;
};

struct SharingClass {
  std::string name;
  double arrivals_per_hour = 0;
  SharingRange memory_gib;                 // peak GPU memory, per GPU
  SharingRange compute_pct;                // integers in 1..100; 0..0 = unspecified
  std::vector<int> whole_gpus;             // empty: a fraction of one GPU; else drawn uniformly
  double isolation_weight[3] = {0, 1, 0};  // indexed by Isolation
  SharingRange duration_s;                 // whole seconds
  int64_t patience_s = 1800;               // longest wait before the user gives up
  SharingRange cpu_cores;                  // host CPU per workload
  SharingRange host_memory_gib;            // host memory per workload
  ModelMask gpu_models = 0;                // allowed models; 0 = any with enough memory
  // A workload that does not fit may evict running workloads of strictly lower priority
  // (docs/SHARING.md, "Preemption"); equal priorities (the default) never preempt.
  int priority = 0;
};

// From start_s until the next phase (or the horizon), class c arrives at
// classes[c].arrivals_per_hour * multipliers[c] per hour.
struct SharingPhase {
  std::string name;
  int64_t start_s = 0;
  std::vector<double> multipliers;  // one per class
};

struct SharingScenario {
  std::string name;
  uint64_t seed = 1;
  int64_t horizon_s = 0;
  std::vector<SharingNodeGroup> node_groups;
  int timeslice_replicas = 4;
  int mps_clients = 4;
  // The tessera strategy's node protection for multi-GPU jobs (SharingConfig::protect_nodes):
  // "off" or "on".
  std::string tessera_protection = "off";
  std::vector<SharingPhase> phases;  // non-empty, first at 0, starts ascending
  std::vector<SharingClass> classes;
};

struct SharingWorkload {
  WorkloadId id = 0;  // index in arrival order
  int cls = 0;        // index into SharingScenario::classes
  SimTime arrival_s = 0;
  SimTime duration_s = 0;
  SimTime patience_s = 0;
  SliceDemand demand;  // memory_mib = peak per GPU; whole_gpus > 0 or a fraction of one GPU
};

Result<SharingScenario> ParseSharingScenario(std::string_view text, std::string_view filename);
// Reads and parses a file with ReadFileToString (sim/csv.h: IoError if it cannot be opened,
// InvalidArgument for a non-regular or oversized file). A leading UTF-8 BOM is skipped.
Result<SharingScenario> ReadSharingScenario(const std::string& path);

// The nodes of the scenario, group by group, in order.
std::vector<NodeSpec> SharingNodeSpecs(const SharingScenario& s);
int SharingGpuCount(const SharingScenario& s);
// Expected number of arrivals over the horizon.
double ExpectedSharingArrivals(const SharingScenario& s);

// ResourceExhausted past kMaxSharingWorkloads workloads.
Result<std::vector<SharingWorkload>> GenerateSharingWorkloads(const SharingScenario& s,
                                                              uint64_t seed);

}  // namespace tessera
