// Rightsizing at admission (`tessera.io/rightsize`), the pure part: reading the advisor's
// recommendation from a pod, the grant it gives (floor, out-of-memory growth, never above the
// owner's request), the pod's owner as the advisor groups it, and out-of-memory kills in a pod's
// status. SchedulerCore (scheduler_rightsize.cc) applies it; docs/OPERATIONS.md documents the
// annotations.
//
// Pod annotations:
//   tessera.io/rightsize: auto | recommend | off (absent = off)
//   tessera.io/rightsize-recommendation: written by `tessera advise` (pod template), compact JSON
//     {"slice":"mig|mps|timeslice|whole|release","model":"A100-80GB","mig_profile":"1g.10gb",
//      "gpus":1,"thread_pct":30,"memory_mib":9728,"gpu_fraction":0.14,...}
//   tessera.io/rightsize-applied: written at binding when the scheduler changed the request,
//     {"mode":"auto","model":"A100-80GB","from":{"gpus":1},"to":{"mig_profile":"1g.10gb"},
//      "reason":"recommendation"}; read back so a restarted scheduler accounts the grant
//   tessera.io/rightsize-proposed: the same for `recommend` (nothing changed)
//   tessera.io/rightsize-oom-retries: "N", written at binding on pods sized after N
//     out-of-memory kills of their owner under the same recommendation
// All functions are pure and thread-safe; no input makes them crash or throw.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kube/translate.h"

namespace tessera::kube {

inline constexpr const char* kAnnotationRightsize = "tessera.io/rightsize";
inline constexpr const char* kAnnotationRecommendation = "tessera.io/rightsize-recommendation";
inline constexpr const char* kAnnotationRightsizeApplied = "tessera.io/rightsize-applied";
inline constexpr const char* kAnnotationRightsizeProposed = "tessera.io/rightsize-proposed";
inline constexpr const char* kAnnotationOomRetries = "tessera.io/rightsize-oom-retries";
// Event reason of the eviction that replaces a rightsized pod killed out of memory.
inline constexpr const char* kEventRightsizeOomRestart = "RightsizeOomRestart";

enum class RightsizeMode : uint8_t { kOff, kAuto, kRecommend };
// "auto", "recommend", "off"/absent; InvalidArgument for any other value.
Result<RightsizeMode> RightsizeModeOf(const Json& pod);

// The slice a recommendation names, as a pod GPU request on `model`: mig -> mig_profile, mps ->
// memory_mib + compute_pct (thread %), timeslice -> memory_mib, whole -> whole_gpus.
// InvalidArgument (message for an Event) for malformed JSON, an unknown slice or model, a MIG
// profile the model lacks, memory beyond the model's, and for "release" (a pod is not admitted
// without its GPU).
// `compute` is the recommendation's compute need on `model` as a fraction of one GPU: the
// thread % of an mps slice, the gpu_fraction of a timeslice slice (an upper bound: the larger of
// its memory and compute shares); 0 when the recommendation does not say (mig, whole, or a
// timeslice slice without gpu_fraction).
struct RecommendedSlice {
  std::string model;
  GpuModelId model_id = kNoGpuModel;
  GpuRequest request;
  double compute = 0;
};
Result<RecommendedSlice> DecodeRecommendation(std::string_view text);

// Size of a GPU request on one model: memory (MiB) and fraction of one GPU. A compute-only
// share holds all memory; a memory percentage is resolved on the model.
struct GpuSize {
  int64_t memory_mib = 0;
  double fraction = 0;
};
GpuSize SizeOn(const GpuRequest& r, GpuModelId model);
// `r` asks no more memory and no more of the GPU than `ask` on `model`.
bool WithinAsk(const GpuRequest& r, const GpuRequest& ask, GpuModelId model);

// What the scheduler grants a pod asking `ask` when the recommendation is `rec`, after
// `oom_level` out-of-memory kills of its owner under that recommendation:
//   0: the recommendation, raised to floor_mib of memory (MIG: the smallest profile holding it);
//   1: that grant grown once: the next larger MIG profile (the whole GPU after the largest),
//      memory x1.5 for shares, the request for whole GPUs;
//   2 or more: the request.
// Never above the request (a larger grant becomes the request). `reason` says why:
// "recommendation", "floor", "request-cap", "oom-grown", "oom-request".
struct Grant {
  GpuRequest request;
  bool changed = false;  // differs from the ask
  std::string reason;
};
Grant PlanGrant(const GpuRequest& ask, const RecommendedSlice& rec, int oom_level,
                int64_t floor_mib);

// The models besides rec.model where the grant `g` may run with the same memory limit (the
// advisor's other_model_max_compute rule, as the closed-loop simulation's admit_on_other_models):
// `g` is a single-GPU memory share (memory_mib, with or without a thread %), `allowed` (the pod's
// own request) allows the model, the model holds g.memory_mib, and rec.compute scaled by relative
// compute (rec.compute x relative_compute(rec.model) / relative_compute(m)) stays within
// `max_compute` and, for an MPS grant, within its thread % (the thread % is not rescaled per
// model, so a less capable model would get fewer SMs than the need). Catalog order; empty for
// MIG and whole-GPU grants, when rec.compute is unknown, or when max_compute <= 0.
std::vector<GpuModelId> OtherModelsFor(const RecommendedSlice& rec, const GpuRequest& g,
                                       const Demand& allowed, double max_compute);

// The pod with its GPU resources replaced by `r` (first container's limits; every other
// container's and init container's GPU resources removed), tessera.io/gpu-models set to
// `models` (comma-separated catalog names) and tessera.io/original-resources dropped, for
// TranslatePod.
Json WithGpuRequest(const Json& pod, const GpuRequest& r, const std::string& models);

// Compact JSON of a GPU request ({"gpus":1} / {"mig_profile":"1g.10gb"} /
// {"memory_mib":4096,"compute_pct":30}) and back.
Json GpuRequestJson(const GpuRequest& r);
Result<GpuRequest> GpuRequestFromJson(const Json& j);

// The pod's owner as `tessera advise` groups workloads: its controller (a ReplicaSet with the
// pod-template-hash label -> its Deployment, a Job of a JobSet -> the JobSet, StatefulSet, Job),
// else its gang (tessera.io/gang -> WorkloadGroup), else the pod itself (kind Pod).
struct PodOwnerRef {
  std::string ns, kind, name;
  std::string Key() const { return ns + "/" + kind + "/" + name; }
};
PodOwnerRef OwnerOf(const Json& pod);

// Containers whose state or last state is terminated with reason OOMKilled, as
// "<container>#<restartCount>" (one entry per kill the status shows).
std::vector<std::string> OomKills(const Json& pod);

// True when the kubelet would run a killed container again in this same pod (restartPolicy
// Always, the default, or OnFailure) and a controller (ownerReference with controller: true)
// would replace the pod if it were evicted, and the pod is not being deleted already. Such a
// pod keeps its grant across restarts, so only a new pod can be sized again.
bool RestartsInPlaceUnderController(const Json& pod);

// A string annotation of the pod; "" when absent or not a string.
std::string PodAnnotation(const Json& pod, const char* key);

}  // namespace tessera::kube
