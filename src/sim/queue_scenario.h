// Inputs of the multi-tenant queue simulation (sim/queue_sim.h): the cluster file (nodes,
// cohorts, queues with quotas per flavor, admission settings, the scheduling interval) and the
// workload file (jobs with arrivals, durations, gang sizes, priorities and topology), or an
// Alibaba openb pod trace whose pods are assigned to queues by a fixed rule. Formats:
// docs/QUEUES.md.
//
// Contract:
//   * The readers are strict. Cluster file (JSON): syntax errors, unknown or duplicate keys,
//     wrong types, unknown GPU models or cohorts, duplicate names, out-of-range values are
//     InvalidArgument "FILE:LINE:COL: PATH: reason", PATH being the JSON path of the offending
//     value (`queues[1].flavors[0].nominal.gpu`) and LINE:COL its position (1-based, COL in
//     bytes). Workload file (CSV): "FILE:LINE:COL: column 'C': reason" for a bad field, or
//     "FILE:LINE:1: ..." for a bad row; nothing is skipped.
//   * Quota units follow admission/admission.h: `gpu` in GPU-equivalents (stored in milli),
//     `cpu` in cores (stored in milli-CPU), `memory_gib` in GiB (stored in MiB). In `nominal`
//     and `borrowing_limit` an omitted cpu or memory_gib means no limit on that resource
//     (kUnlimitedQuota); in `lending_limit` an omitted resource lends the whole nominal quota.
//   * Jobs get ids 1, 2, ... in file order; pod i of job j is j * kPodsPerJob + i.
//   * Trace mode: every pod of an openb pod CSV is a one-pod job arriving at creation_time and
//     running deletion_time - creation_time seconds (at least 1), in queue
//     queues[QueueHash(name) % queues.size()] (QueueHash = 64-bit FNV-1a of the pod name,
//     then the MurmurHash3 fmix64 finalizer, so that names differing only in their last
//     characters spread evenly).
//     A pod without deletion_time is an error (the simulation needs a duration).
// Pure parse functions take the text and a source name (for fuzzing); the Read functions add
// file I/O (IoError when a file cannot be read). Thread-safe: no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "admission/admission.h"
#include "cluster/types.h"
#include "core/status.h"

namespace tessera {

// "No limit" for a quota resource (milli-CPU or MiB): far above any cluster, far below overflow
// when summed over a cohort.
inline constexpr int64_t kUnlimitedQuota = int64_t{1} << 50;
inline constexpr int kMaxQueueNodes = 20000;
inline constexpr int kMaxQueues = 1000;
inline constexpr int64_t kMaxQueueJobs = 2000000;

struct QueueCluster {
  std::string name;             // "name", or the file name without directory and extension
  std::vector<NodeSpec> nodes;  // node groups expanded in order, or the rows of nodes_csv
  std::string nodes_csv;        // as written in the file; empty when "nodes" was used
  std::vector<std::string> cohorts;
  std::vector<QueueSpec> queues;  // in file order
  AdmissionConfig admission;
  double cycle_s = 10;  // scheduling interval
};

// One job and how long it runs once admitted (all pods start and end together).
struct QueueJob {
  JobSpec spec;
  double duration_s = 0;
};

// Parses the cluster file. With "nodes_csv" the nodes are left empty (ReadQueueCluster loads
// them); everything else is checked.
Result<QueueCluster> ParseQueueCluster(std::string_view text, std::string_view filename);
// Reads the cluster file; "nodes_csv" is resolved relative to the file's directory and read
// with ReadNodesCsv (its errors name the CSV file).
Result<QueueCluster> ReadQueueCluster(const std::string& path);

// Parses a workload CSV. A non-empty `queues` is the set of valid queue names (an unknown one is
// an error at its field); empty skips that check.
Result<std::vector<QueueJob>> ParseQueueWorkload(std::string_view text, const std::string& source,
                                                 const std::vector<std::string>& queues);

uint64_t QueueHash(std::string_view name);
// Trace mode on parsed openb pods (sim/trace.h). InvalidArgument for no queues or a pod without
// deletion time.
Result<std::vector<QueueJob>> QueueJobsFromTrace(const std::vector<Workload>& pods,
                                                 const std::vector<std::string>& queues);

// Reads a workload file for `cluster`: a header with a `queue` column selects the workload CSV,
// otherwise a header with `creation_time` selects trace mode; anything else is InvalidArgument.
Result<std::vector<QueueJob>> ReadQueueWorkload(const std::string& path,
                                                const QueueCluster& cluster);

std::vector<std::string> QueueNames(const QueueCluster& cluster);

// Divides every arrival time by `factor` (durations unchanged), so the same work arrives `factor`
// times faster. InvalidArgument for a factor below 1 or not finite.
Status CompressQueueArrivals(std::vector<QueueJob>& jobs, double factor);

}  // namespace tessera
