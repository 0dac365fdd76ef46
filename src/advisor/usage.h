// Usage model of the advisor: per workload (an owner: Deployment, StatefulSet, Job, JobSet, a
// workload group, or a bare Pod), the GPU model it ran on, what its owner requested, and the time
// series of GPU memory used (MiB) and compute (SM active fraction, 0..1) of each of its pods.
//
// The offline history file (CSV, docs/ADVISOR.md) is read by ParseHistoryCsv, strictly: every
// rejected input gives InvalidArgument "SOURCE:LINE:COL: reason", nothing is partially accepted.
// Pure functions over strings; no files, network or clock. Thread-compatible values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera::advisor {

// What the owner asked for, per pod. whole_gpus > 0: that many exclusive GPUs (memory_mib and
// compute then 0 = "all of it"). Otherwise a fraction of one GPU: memory_mib > 0 and/or a MIG
// profile, with compute a fraction of the GPU (0 = unspecified, treated as the memory fraction).
struct GpuRequest {
  int whole_gpus = 0;
  int64_t memory_mib = 0;
  double compute = 0;
  std::string mig_profile;
  bool operator==(const GpuRequest&) const = default;
};

struct UsageSample {
  int64_t t_s = 0;        // Unix seconds
  double memory_mib = 0;  // framebuffer used
  double sm_active = 0;   // 0..1 of the GPU (or of the MIG instance, scaled by the reader)
};

// One pod's series on one GPU. shared_device: the samples are device-level (DCGM) readings of a
// GPU that other pods used at the same time, so they measure the GPU, not this pod.
struct PodSeries {
  std::string pod;
  std::string gpu;  // GPU identity (UUID or node/index); may be empty for per-pod sources
  bool device_source = false;  // device-level reading (source "device") vs per-pod ("pod")
  bool shared_device = false;  // set by MarkSharedDevices
  // The memory samples are the pod's own (the node agent's per-pod series) even though compute
  // is a device-level reading; not part of the history CSV.
  bool memory_per_pod = false;
  std::vector<UsageSample> samples;  // strictly increasing t_s
};

inline constexpr const char* kOwnerKinds[] = {"Deployment", "StatefulSet",   "Job",
                                              "JobSet",     "WorkloadGroup", "Pod"};

struct WorkloadUsage {
  std::string ns, owner_kind, owner;
  std::string gpu_model;  // catalog name
  GpuRequest request;
  std::vector<PodSeries> pods;

  // "namespace/Kind/owner": the grouping key.
  std::string Key() const { return ns + "/" + owner_kind + "/" + owner; }
  int64_t FirstT() const;
  int64_t LastT() const;
  size_t SampleCount() const;
  bool AttributionImpossible() const;  // any series measures a shared GPU
};

struct UsageHistory {
  std::vector<WorkloadUsage> workloads;  // in order of first appearance
};

// Flags, in every workload, the device-level series whose GPU carried device-level samples of
// another pod at the same timestamp (several pods time-sliced on a GPU without per-pod series).
void MarkSharedDevices(UsageHistory& h);

// Reads the history CSV. Header (exact, in this order):
//   timestamp_s,namespace,owner_kind,owner,pod,gpu_model,gpu,source,requested_gpus,
//   requested_memory_mib,requested_compute,requested_mig_profile,memory_used_mib,sm_active
// Rules (each violation is an error at the offending field): timestamps integral seconds >= 0
// and strictly increasing per (namespace, pod, gpu); owner kinds as kOwnerKinds; GPU models of
// the built-in catalog; source "pod" or "device"; a request of whole GPUs (1..8) or of memory
// and/or a MIG profile of the model's geometry, the same on every row of an owner, as is the
// model; memory used a finite number in [0, the model's memory]; sm_active finite in [0, 1];
// no quotes; at most kMaxHistoryRows rows. Calls MarkSharedDevices before returning.
inline constexpr size_t kMaxHistoryRows = 5'000'000;
inline constexpr const char* kHistoryHeader =
    "timestamp_s,namespace,owner_kind,owner,pod,gpu_model,gpu,source,requested_gpus,"
    "requested_memory_mib,requested_compute,requested_mig_profile,memory_used_mib,sm_active";
Result<UsageHistory> ParseHistoryCsv(std::string_view content, const std::string& source);

// Writes `h` in the format ParseHistoryCsv reads, rows ordered by time, then (namespace, pod,
// gpu), so reading the text back and writing it again gives the same text.
// Values are written with enough digits to read back exactly (memory to 0.001 MiB, sm_active to
// 1e-6: the writer rounds to those).
std::string HistoryCsv(const UsageHistory& h);

}  // namespace tessera::advisor
