// Reader of a Prometheus HTTP API range-query response (GET /api/v1/query_range, resultType
// "matrix") carrying DCGM exporter series. Pure parsing of a string; fetching is elsewhere.
//
// Series names (the `__name__` label, or `metric_name` given by the caller for a query whose
// result drops it): DCGM_FI_DEV_FB_USED (MiB), DCGM_FI_PROF_SM_ACTIVE and
// DCGM_FI_PROF_GR_ENGINE_ACTIVE (ratio 0..1), DCGM_FI_DEV_GPU_UTIL (percent, stored as a ratio;
// the driver does not report it for MIG instances). Labels: host from `Hostname` or `hostname`
// (both present and different is an error), `gpu` (index), `UUID`, `modelName`, MIG instance from
// `GPU_I_PROFILE` / `GPU_I_ID`, the workload from `pod` / `namespace` / `container`, or from
// `exported_pod` / `exported_namespace` / `exported_container` when Prometheus renamed the
// exporter's labels on a clash with the target's (honor_labels: false); those win.
//
// Tessera's own series are read too: the node agent's tessera_agent_pod_gpu_memory_used_bytes
// (bytes, stored as MiB; labels node -> hostname, gpu, gpu_uuid -> uuid, mig_instance
// "profile@start" -> mig_instance, its profile -> mig_profile, namespace/pod/container), the
// scheduler's tessera_pod_allocated_gpus (GPUs, 0..1024; labels namespace, pod, queue, model ->
// model_name, kind; pod and model required) and tessera_gpu_allocated_ratio (0..1, no labels).
// Only a family's own labels are read (a DCGM series' `model` label is ignored, and so on).
//
// Sample values are strings; "NaN", "+Inf", "-Inf" are skipped and counted, per series and in
// total. Anything else malformed is InvalidArgument "SOURCE: PATH: reason" with a JSON path
// (data.result[2].values[7][1]), or "SOURCE:OFFSET: JSON syntax error ..." for broken JSON; an
// API error response ("status":"error") gives Unavailable with its errorType and error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera::advisor {

enum class DcgmField {
  kFbUsedMib,
  kSmActive,
  kGrEngineActive,
  kGpuUtil,
  kAgentPodMemoryMib,  // tessera_agent_pod_gpu_memory_used_bytes, in MiB
  kPodAllocatedGpus,   // tessera_pod_allocated_gpus
  kAllocatedRatio,     // tessera_gpu_allocated_ratio
};
const char* DcgmFieldName(DcgmField f);

struct PromSample {
  double t_s = 0;
  double value = 0;  // MiB for the memory fields, GPUs for kPodAllocatedGpus, else ratio 0..1
};

struct PromSeries {
  DcgmField field = DcgmField::kFbUsedMib;
  std::string hostname, gpu, uuid, model_name;
  std::string mig_profile, mig_instance;  // empty for a whole GPU
  std::string ns, pod, container;         // empty when the exporter did not attribute the GPU
  std::string queue, kind;                // tessera_pod_allocated_gpus only
  std::vector<PromSample> samples;        // strictly increasing t_s
  int64_t skipped_non_finite = 0;
};

struct PromRange {
  std::vector<PromSeries> series;
  int64_t skipped_non_finite = 0;
  std::vector<std::string> warnings;  // Prometheus' "warnings" array, as given
};

inline constexpr size_t kMaxPromResponseBytes = size_t{256} << 20;

// metric_name: the series name to assume when a result has no `__name__` label; empty = every
// result must carry one. Unknown series names are an error naming them.
Result<PromRange> ParsePrometheusRange(std::string_view json, const std::string& source,
                                       const std::string& metric_name = "");

}  // namespace tessera::advisor
