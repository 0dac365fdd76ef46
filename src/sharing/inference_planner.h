// Inference deployment planner for MIG GPUs with MPS inside each instance: the problem posed by
// ParvaGPU (Lee et al., SC'24).
//
// Each service (one DNN model) has a request rate R (requests/s) and a latency SLO L (ms). A
// segment is one MIG instance of g compute slices (GPCs) running k MPS processes of one model at
// batch size b; its capacity is k x the profiled per-process throughput. A profile row may serve
// a service only if `latency_s * 1000 < 0.9 * trunc(L) / 2` (ParvaGPU's rule: half the SLO is
// left for batching, 10% margin, the SLO read as an integer). Services never share a segment;
// one GPU may host segments of several services. The plan covers every feasible service's rate
// and packs the segments into legal MIG layouts (real geometry, cluster/mig_geometry.h, with
// explicit starts) on as few GPUs as possible; ties go to the fewest GPCs used, then to the
// largest minimum capacity margin (capacity - R) / R over services, then to the fewest
// instances.
//
// Method. Per service and segment size only the eligible row with the highest capacity is kept.
// Each service gets the set of its minimal segment multisets (no segment removable) within a GPC
// slack of its own minimum; packing depends only on the total count of each size, so a dynamic
// programme over services, keyed by those counts, finds the best combination for a GPU count G
// (states that cannot be packed on G GPUs, or that exceed the GPC budget, are dropped); G grows
// from the GPC lower bound until a combination fits. Packability is an exact, memoised cover of
// the counts by the maximal legal layouts of the geometry. Within that model (best row per size,
// k <= max_procs) the result is optimal unless a budget was hit, which the plan reports.
//
// Pure and deterministic (no clock, no randomness); thread-compatible. Invalid input (unknown GPU
// model, a service without a profile, non-positive or non-finite rate/SLO) gives
// InvalidArgument; a plan needing more than max_gpus GPUs gives ResourceExhausted. A service no
// profile row can serve is not an error: it is reported as not met, with the reason, and gets no
// segments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/mig_geometry.h"
#include "core/status.h"

namespace tessera {

// One profiled configuration of a model: `procs` MPS processes at batch size `batch` in a MIG
// instance of `gpcs` compute slices.
struct InferenceProfileRow {
  int gpcs = 0;
  int batch = 0;
  int procs = 0;
  double throughput = 0;  // inferences/s of one process while `procs` run together
  double latency_s = 0;   // seconds per batch of one process while `procs` run together
  bool measured = true;   // false: not measured or did not run; never used
};

struct InferenceProfile {
  std::string model;
  std::vector<InferenceProfileRow> rows;
};

struct InferenceService {
  std::string model;  // names an InferenceProfile
  double rate = 0;    // requests/s, > 0
  double slo_ms = 0;  // latency SLO in ms, > 0
};

struct InferencePlanOptions {
  std::string gpu_model = "A100-80GB";  // a MIG-capable catalog model
  int max_procs = 5;                    // rows with more MPS processes are ignored
  int max_gpus = 256;
  // Restrict layouts to those ParvaGPU assumes on an A100: at most one 3-GPC instance per GPU
  // (the hardware also allows two, at memory slices 0 and 4).
  bool single_3g_per_gpu = false;
  // Per-service segment multisets and per-step DP states kept; beyond them the search keeps the
  // best-ranked ones and the plan is marked not exact.
  int max_options_per_service = 4096;
  int max_states_per_step = 200000;
};

struct InferenceSegment {
  int gpu = 0;
  int profile = 0;  // index into the geometry's profiles
  std::string profile_name;
  int start = 0;  // first memory slice
  int gpcs = 0;
  int batch = 0;
  int procs = 0;
  double throughput = 0;  // per process, from the profile row
  double latency_ms = 0;  // profiled batch latency of the row
  double capacity() const { return throughput * procs; }
};

struct InferenceServicePlan {
  std::string model;
  double rate = 0;
  double slo_ms = 0;
  bool slo_met = false;
  std::string reason;  // why not met; empty when met
  double capacity = 0;
  double margin_pct = 0;      // 100 * (capacity - rate) / rate
  double max_latency_ms = 0;  // worst profiled latency among its segments
  int gpcs = 0;               // GPCs of its segments
  int min_gpcs = 0;           // fewest GPCs any segment multiset covering the rate needs
  int gpc_lower_bound = 0;    // ceil(rate / best capacity per GPC)
  std::vector<InferenceSegment> segments;  // sorted by (gpu, start)
};

struct InferencePlan {
  std::string gpu_model;
  int gpus = 0;
  int gpcs_used = 0;
  bool all_slo_met = false;
  bool exact = true;  // no budget was hit: optimal within the model described above
  // ceil(sum of per-service gpc_lower_bound / GPCs per GPU) and the same over min_gpcs.
  int gpu_lower_bound = 0;
  int gpu_lower_bound_whole_segments = 0;
  int64_t states = 0;                          // DP states created, a measure of search effort
  std::vector<MigLayout> gpu_layouts;          // per GPU, legal, sorted by (start, profile)
  std::vector<InferenceServicePlan> services;  // in input order
};

// ParvaGPU's latency rule for one row (strict <, SLO truncated to whole milliseconds).
bool InferenceRowEligible(double latency_s, double slo_ms);

Result<InferencePlan> PlanInference(const std::vector<InferenceProfile>& profiles,
                                    const std::vector<InferenceService>& services,
                                    const InferencePlanOptions& options = {});

}  // namespace tessera
