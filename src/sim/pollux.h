// Inputs of the Pollux (OSDI'21) simulator benchmark and the progress model of a rigid job.
//
// Readers. Each file has a fixed header (the exact column names and order below; extra or
// missing columns are errors, a leading UTF-8 BOM is skipped). Every row must parse: a malformed or
// impossible row fails the whole read with "FILE:LINE:COL: column 'x': reason" (no row is skipped).
// The Parse* functions take the text and a source name so they can be fuzzed; the Read* functions
// add file access.
//   traces/<app>/placements.csv   placement,local_bsz,step_time,sync_time
//   traces/<app>/scalability.csv  num_nodes,num_replicas,local_bsz,step_time,sync_time
//   traces/<app>/validation-B.csv progress,iteration,metric,grad_sqr,grad_var (one row per epoch)
//   workloads/workload-N.csv      name,time,application,num_replicas,batch_size
//
// Model (PolluxApp). A rigid job of application A at total batch B on placement P (GPUs per
// node) runs IterationsToComplete(B) optimizer steps, each taking IterationTime(P, B) seconds:
//  * IterationsToComplete(B), PolluxModelOptions::work:
//      kIterations  the `iteration` column of the last row (the epoch limit) of
//                   validation-B.csv: the steps the profiled run took.
//      kProgress    the README's statistical-efficiency model: each epoch's `progress` gain (in
//                   scale-invariant iterations) divided by the efficiency gain of batch B at that
//                   epoch, (var + sqr) / (var / s + sqr) with s = B / B0, B0 the smallest
//                   profiled batch and sqr, var that row's grad_sqr, grad_var; summed over epochs.
//    Without a file for B, log-log interpolation between the nearest smaller and larger batch
//    sizes with files (exact when steps scale as 1/B); outside the profiled range it is an error.
//  * Profile(P, b): step and sync time at local batch b. A placement listed in placements.csv
//    (the file lists each placement once, under its lexicographically smallest rotation; the
//    query is rotated the same way) is interpolated linearly in b. Any other placement uses the
//    grid of (nodes, GPUs) points: placements.csv averaged over placements with the same node and
//    GPU counts, plus scalability.csv. It is interpolated linearly in b at each grid point,
//    linearly in GPUs between the grid points of one node count, and, between two profiled node
//    counts n0 < n < n1, linearly in nodes along the line of constant GPUs per node (the query
//    (n, g) uses (n0, g*n0/n) and (n1, g*n1/n)). Beyond the profiled range of a coordinate the
//    nearest profiled value is used (no extrapolation).
//  * IterationTime(P, B): local batch b = B / GPUs (not rounded). When b exceeds the local batch
//    cap (by default the largest local batch in placements.csv), the job accumulates gradients:
//    k = ceil(b / cap) - 1 extra micro-steps of b / (k + 1) samples, and one step costs
//    step + k * (step - sync). With single_gpu_accumulation, a 1-GPU job whose B exceeds B0
//    takes at least one extra micro-step.
//
// PolluxApp is immutable after Create; its const methods are safe to call from many threads.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera {

struct PolluxPlacementRow {
  std::vector<int> placement;  // GPUs per node, in file order (one digit per node, 1..9)
  double local_bsz = 0;
  double step_time = 0;  // seconds per iteration
  double sync_time = 0;  // seconds of step_time spent synchronising gradients
};

struct PolluxScalabilityRow {
  int num_nodes = 0;
  int num_replicas = 0;
  double local_bsz = 0;
  double step_time = 0;
  double sync_time = 0;
};

struct PolluxValidationRow {
  double progress = 0;
  int64_t iteration = 0;
  double metric = 0;
  double grad_sqr = 0;
  double grad_var = 0;
};

struct PolluxJobSpec {
  std::string name;
  double time = 0;  // submission, seconds from the start of the window
  std::string application;
  int num_replicas = 0;
  int64_t batch_size = 0;
  int line = 0;  // 1-based line in the workload file, for later error messages
};

struct PolluxWorkload {
  std::string name;    // e.g. "workload-1"
  std::string source;  // file it was read from
  std::vector<PolluxJobSpec> jobs;
};

// Limits enforced by the readers.
inline constexpr int kPolluxMaxReplicas = 4096;
inline constexpr int64_t kPolluxMaxBatch = int64_t{1} << 40;
inline constexpr double kPolluxMaxTime = 1e9;
inline constexpr int kPolluxMaxAccumulation = 1000000;  // micro-steps per optimizer step

Result<std::vector<PolluxPlacementRow>> ParsePolluxPlacements(std::string_view content,
                                                              const std::string& source);
Result<std::vector<PolluxScalabilityRow>> ParsePolluxScalability(std::string_view content,
                                                                 const std::string& source);
// Rows must have strictly increasing `iteration` and non-decreasing `progress`; at least one row.
Result<std::vector<PolluxValidationRow>> ParsePolluxValidation(std::string_view content,
                                                               const std::string& source);
// Job names are unique and non-empty; application names are [A-Za-z0-9_-]+ (they name folders).
// Rows may come in any time order.
Result<std::vector<PolluxJobSpec>> ParsePolluxWorkload(std::string_view content,
                                                       const std::string& source);

struct PolluxStepTime {
  double step_time = 0;
  double sync_time = 0;
};

struct PolluxIterationCost {
  double seconds = 0;     // wall time of one optimizer step
  double atomic_bsz = 0;  // samples per GPU per micro-step
  int accum_steps = 0;    // extra micro-steps per optimizer step
};

struct PolluxModelOptions {
  enum class Work { kIterations, kProgress };
  Work work = Work::kIterations;
  double max_local_bsz = 0;  // the local batch cap; 0 = the largest in placements.csv
  bool single_gpu_accumulation = false;
};

// The conventions that reproduce the published results of the Pollux simulator for `app`: work
// in progress units (kProgress), at least one accumulation step on a single GPU, and a local
// batch cap of 8 for yolov3 (its largest local batch in scalability.csv). The last two are
// inferred from the published per-job JCTs (see docs/POLLUX.md), not from the README.
PolluxModelOptions PolluxSimulatorModel(const std::string& app);

class PolluxApp {
 public:
  // Indexes the profiles. InvalidArgument (naming the application) when a profile is empty,
  // placements.csv or scalability.csv repeats a (placement or nodes/GPUs, local_bsz) key, the
  // validation files disagree on the number of epochs, or the options are invalid (negative or
  // non-finite cap).
  static Result<PolluxApp> Create(std::string name, std::vector<PolluxPlacementRow> placements,
                                  std::vector<PolluxScalabilityRow> scalability,
                                  std::map<int64_t, std::vector<PolluxValidationRow>> validation,
                                  const PolluxModelOptions& options = {});

  const std::string& name() const { return name_; }
  int epochs() const { return epochs_; }
  double max_local_bsz() const { return max_local_bsz_; }
  int64_t min_batch() const { return validation_.begin()->first; }
  int64_t max_batch() const { return validation_.rbegin()->first; }

  // InvalidArgument when `batch` is outside [min_batch(), max_batch()].
  Result<double> IterationsToComplete(int64_t batch) const;
  // `gpus_per_node`: GPU count of each node used (zeros are ignored, at least one positive).
  Result<PolluxStepTime> Profile(std::span<const int> gpus_per_node, double local_bsz) const;
  Result<PolluxIterationCost> IterationTime(std::span<const int> gpus_per_node, double batch) const;

 private:
  struct Point {
    double local_bsz, step_time, sync_time;
  };
  using Curve = std::vector<Point>;  // sorted by local_bsz, keys unique

  static PolluxStepTime Eval(const Curve& c, double local_bsz);
  PolluxStepTime EvalAtNodes(int nodes, double gpus, double local_bsz) const;

  std::string name_;
  int epochs_ = 0;
  double max_local_bsz_ = 0;
  std::map<std::vector<int>, Curve> exact_;   // canonical placement -> curve
  std::map<int, std::map<int, Curve>> grid_;  // nodes -> GPUs -> curve
  bool single_gpu_accumulation_ = false;
  std::map<int64_t, double> validation_;  // batch -> iterations to complete
};

// Smallest rotation of the placement with zeros removed: the key placements.csv uses.
std::vector<int> CanonicalPlacement(std::span<const int> gpus_per_node);

// Reads DIR/placements.csv, DIR/scalability.csv and every DIR/validation-<B>.csv (B a positive
// decimal integer; another name starting "validation-" is an error). The app is named `name`.
Result<PolluxApp> ReadPolluxApp(const std::string& dir, const std::string& name,
                                const PolluxModelOptions& options = {});
Result<PolluxWorkload> ReadPolluxWorkload(const std::string& path);

}  // namespace tessera
