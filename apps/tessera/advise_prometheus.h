// Usage history for `tessera advise --prometheus`: DCGM exporter series fetched from a Prometheus
// server over its HTTP API (GET /api/v1/query_range), turned into the advisor's usage model.
//
// Fetch: one range query per series name (DCGM_FI_DEV_FB_USED, DCGM_FI_PROF_SM_ACTIVE,
// DCGM_FI_PROF_GR_ENGINE_ACTIVE, DCGM_FI_DEV_GPU_UTIL) over [start_s, end_s] at step_s, parsed by
// advisor::ParsePrometheusRange (Hostname/hostname, MIG and exported_* labels). Errors, each one
// Status naming the URL: a URL that is not http:// or https:// (InvalidArgument); no connection
// (Unavailable "cannot reach Prometheus at URL: ..."); an HTTP status other than 200 (Unavailable
// with Prometheus' own error when the body carries one, else the status and the first line of
// the body); a malformed response (InvalidArgument with the JSON path); no memory series held by
// a pod in the window (NotFound "no DCGM series ... in the window"). Then two instant queries at
// end_s read the pods' owners from kube-state-metrics; without those series pods stand alone.
//
// The node agent's tessera_agent_pod_gpu_memory_used_bytes is fetched too: where a pod has it
// on a device (matched by GPU UUID and MIG profile), it is the pod's memory instead of DCGM's
// device-level reading (PodSeries::memory_per_pod), and it attributes the device to the pod even
// when DCGM did not (compute then comes from the device's DCGM series, when the device is one
// GPU or one MIG instance of that profile). Compute stays a device reading, so several pods on
// one GPU at once remain marked shared.
//
// Conversion (DcgmToHistory, pure): a series counts when the exporter attributed it to a pod.
// Pods are grouped by their owner (ParsePodOwners) when its pods share model and request; any
// other pod is one workload of owner kind Pod. A workload runs on the catalog model of its
// `modelName` (the GFD product spelling, as kube::ModelFromProduct reads it); it requested the MIG
// profile of its instance, or as many whole GPUs as it was seen on. A sample is the memory used and
// the compute at one timestamp: compute is DCGM_FI_PROF_SM_ACTIVE where the GPU has it, else
// GR_ENGINE_ACTIVE, else GPU_UTIL; on a MIG instance it is scaled by the instance's share of the
// GPU's compute slices. Timestamps with only one of the two are dropped and counted; non-finite
// values are skipped by the reader and counted. Series with device-level readings of one GPU by
// several pods at once are marked shared (advisor::MarkSharedDevices).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "advisor/prometheus.h"
#include "advisor/usage.h"
#include "core/status.h"

namespace tessera {

struct PrometheusQuery {
  std::string url;  // http://host:port[/prefix] or https://...
  int64_t start_s = 0, end_s = 0, step_s = 300;
  double timeout_s = 60;
};

struct DcgmHistory {
  advisor::UsageHistory history;
  int64_t skipped_non_finite = 0;   // NaN/Inf samples the reader skipped
  int64_t unmatched_samples = 0;    // timestamps with memory but no compute, or the reverse
  int64_t unattributed_series = 0;  // series of GPUs no pod held
  std::vector<std::string> warnings;
};

// A pod's controlling owner as the advisor groups it: kind Deployment (a ReplicaSet's
// Deployment), StatefulSet or Job.
struct PodOwner {
  std::string kind, name;
};
using PodOwners = std::map<std::pair<std::string, std::string>, PodOwner>;  // (namespace, pod)

// source names the server in messages. owners: pods absent from it are their own workload.
Result<DcgmHistory> DcgmToHistory(const std::vector<advisor::PromRange>& ranges,
                                  const std::string& source, const PodOwners& owners = {});

// Owners from kube-state-metrics' kube_pod_owner and kube_replicaset_owner (controlling owners,
// the last value in the window), read from an instant-query response (resultType "vector") of
//   max by (namespace, pod, owner_kind, owner_name) (last_over_time(kube_pod_owner[..]))
// and of the same over kube_replicaset_owner by (namespace, replicaset, ...). Pods owned by a
// ReplicaSet of a Deployment map to the Deployment; StatefulSet and Job owners stay; other kinds
// are left out. InvalidArgument "SOURCE: PATH: reason" for a malformed response, Unavailable
// for an API error response.
Result<PodOwners> ParsePodOwners(std::string_view pod_owner_json,
                                 std::string_view replicaset_owner_json, const std::string& source);

Result<DcgmHistory> FetchDcgmHistory(const PrometheusQuery& q);

// One range query per field (the series named by advisor::DcgmFieldName) over [start_s, end_s]
// at step_s, parsed; the same errors as FetchDcgmHistory's fetch. A series absent from
// Prometheus gives an empty range, not an error.
Result<std::vector<advisor::PromRange>> FetchRanges(const PrometheusQuery& q,
                                                    const std::vector<advisor::DcgmField>& fields);

}  // namespace tessera
