// Per-pod GPU usage: GPU processes (from discovery) attributed to pods through their cgroups,
// rendered as Prometheus text exposition.
//
// Contract:
// * PodFromCgroup reads the text of /proc/<pid>/cgroup (cgroup v1 lines "N:controllers:/path"
//   or the v2 line "0::/path"; the v2 line wins when both exist) and finds the pod UID and
//   container id in the kubelet's cgroup layout:
//     systemd driver  .../kubepods-burstable.slice/kubepods-burstable-pod<uid, '-' as '_'>.slice/
//                     <runtime>-<container id>.scope   (cri-containerd-, crio-, docker-)
//     cgroupfs driver /kubepods/burstable/pod<uid>/<container id>
//   for the burstable, besteffort and guaranteed (no QoS level) classes. Not a pod: empty.
// * CollectUsage attributes every process of the state: /proc/<pid>/cgroup under proc_root
//   (configurable for tests; "/proc" on a node) -> pod UID -> PodLookup (name, namespace,
//   container). A process whose cgroup cannot be read (gone), that is not in a pod, or whose pod
//   the lookup does not know keeps empty pod fields.
// * RenderUsageMetrics gives the text exposition (format 0.0.4), families in a fixed order and
//   series sorted, so equal inputs give equal text:
//     DCGM_FI_DEV_FB_USED (gauge, MiB), as NVIDIA's dcgm-exporter names it and with its labels
//       gpu, UUID, device ("nvidia<index>"), modelName, Hostname, GPU_I_PROFILE, GPU_I_ID (MIG
//       instances only), pod, namespace, container: one series per device (GPU, or MIG
//       instance) and pod on it, the value being the device's frame buffer used (a GPU: NVML's
//       used memory; a MIG instance: the sum over its processes); a device without pods has
//       one series with empty pod labels.
//     tessera_agent_pod_gpu_memory_used_bytes (gauge): memory of a pod's processes on one GPU
//       or MIG instance; labels node, gpu, gpu_uuid, mig_instance ("profile@start", empty
//       outside MIG), namespace, pod, container.
//     tessera_agent_pod_gpu_processes (gauge): their number, same labels.
//     tessera_agent_pod_gpu_sm_utilization_ratio (gauge, 0..1): the sum of the SM utilization
//       of a pod's processes on one GPU (GpuProcess::sm_util), capped at 1; same labels. Only
//       for pods with at least one sampled process: absent where NVML does not report
//       per-process utilization (MIG instances, older GPUs or drivers).
//     tessera_agent_gpu_unattributed_memory_used_bytes (gauge): memory of processes not
//       attributed to a pod, per GPU (node, gpu, gpu_uuid).
//   Label values are escaped as the format requires (\\, \", \n).
// * Pure apart from the /proc reads; thread-safe if the lookup is.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/discovery.h"

namespace tessera::agent {

struct CgroupPod {
  std::string pod_uid;       // "1f2e...-..." with dashes
  std::string container_id;  // runtime id, without the runtime prefix; may be empty
};

std::optional<CgroupPod> PodFromCgroup(std::string_view cgroup_file);

struct PodRef {
  std::string ns, name, container;
};

class PodLookup {
 public:
  virtual ~PodLookup() = default;
  // The pod with this UID, its container filled from the container id when known.
  virtual std::optional<PodRef> Find(const std::string& pod_uid,
                                     const std::string& container_id) const = 0;
};

// A lookup over pod objects as the API server sends them (metadata.uid, .name, .namespace;
// status.containerStatuses[].containerID "<runtime>://<id>" and .name; also init containers).
class PodListLookup : public PodLookup {
 public:
  explicit PodListLookup(const nlohmann::json& pods);  // a list's "items", or an array
  std::optional<PodRef> Find(const std::string& pod_uid,
                             const std::string& container_id) const override;

 private:
  struct Pod {
    std::string ns, name;
    std::map<std::string, std::string> containers;  // id -> name
  };
  std::map<std::string, Pod> pods_;
};

struct ProcessUsage {
  int gpu = 0;
  uint32_t pid = 0;
  int64_t used_mib = 0;
  int gi_id = -1;
  std::string mig_instance;       // "profile@start"; empty outside MIG
  std::optional<double> sm_util;  // 0..1; empty when not sampled
  std::string pod_uid;            // empty when not attributed
  PodRef pod;                     // empty when the lookup does not know the pod
};

// Per-process SM utilization, read once per pass (nvmlDeviceGetProcessUtilization).
// Sample fills GpuProcess::sm_util of every process of `state` on the GPUs where the backend
// reports it: the mean smUtil of the process's samples newer than the last sample seen on that
// GPU (by UUID) at the previous call, or 0 when it has none (an idle process has no samples).
// The newest timestamp is then remembered, so a sample is counted in one pass only. Samples of
// pids not in the process list are ignored. Where the backend reports nothing (empty optional)
// sm_util stays empty; a failing call leaves that GPU unsampled and its Status is returned
// after every GPU was tried. Not thread-safe.
class SmSampler {
 public:
  Status Sample(GpuBackend& backend, NodeGpuState& state);

 private:
  std::map<std::string, uint64_t> last_seen_us_;  // GPU UUID -> newest sample timestamp
};

std::vector<ProcessUsage> CollectUsage(const NodeGpuState& state, const std::string& proc_root,
                                       const PodLookup& lookup);

std::string RenderUsageMetrics(const NodeGpuState& state, const std::vector<ProcessUsage>& usage,
                               const std::string& hostname);

}  // namespace tessera::agent
