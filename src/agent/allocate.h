// What the device plugin hands a container: the kubelet's device IDs matched to the pod the
// scheduler bound, and that pod's tessera.io/assignment turned into environment, mounts and a
// CDI device.
//
// Contract:
// * Resources (PluginResourcesFor): nvidia.com/gpu (one device per GPU without MIG, ID = GPU
//   UUID), nvidia.com/mig-<profile> for each MIG profile present on the node (one device per
//   MIG device, ID = MIG device UUID; "+me" appears as ".me" in the name), and
//   tessera.io/gpu-compute (virtual devices, one per 1% of a GPU: 100 per GPU, ID
//   "<GPU UUID>-pct-<00..99>"), matching the scheduler, which reads gpu-compute as an integer
//   percentage of one GPU; and tessera.io/gpu-slice (virtual devices, kSliceDevicesPerGpu per
//   GPU, ID "<GPU UUID>-slot-<00..47>"): the handle the pod webhook (kube/webhook.h) gives
//   containers that ask only for tessera.io/gpu-memory or HAMi share resources. A device is
//   "Unhealthy" when its GPU is unhealthy. Device lists are sorted by ID.
// * Matching (Allocator::Allocate): among the pods the PodSource lists, the candidates are the
//   (pod, container) pairs whose container requests `resource` with exactly as many devices as
//   the kubelet passes, has not started (PodContainer::started) and was not yet allocated for
//   that resource; the pod bound first (BoundPod::bound_at, then namespace/name) wins, and its
//   first such container.
// * Restart: what was allocated is rebuilt from the pods the PodSource lists and the CDI specs
//   on disk, once, by Recover() or else by the first Allocate / Preferred: a (pod, container,
//   resource) whose container requests the resource and whose spec file
//   (<cdi_dir>/tessera.io-gpu-<device name>.json, named as below) exists counts as allocated.
//   Spec files of that form that no listed pod claims are removed. So a restarted agent (or a
//   plugin restarted by a re-layout) neither hands a container's devices to a second pod nor
//   refuses a pod bound before the restart that it had not allocated yet.
// * The winner's tessera.io/assignment is parsed with kube::DecodeAssignment. Without the
//   annotation, nvidia.com/gpu and nvidia.com/mig-* containers get the kubelet's devices as they
//   are; gpu-compute and gpu-slice need the annotation. From the assignment:
//     NVIDIA_VISIBLE_DEVICES   GPU UUIDs of `gpus` (discovered), or the MIG device UUID of
//                              mig_instance ("profile@start" on gpus[0]; a bare profile takes
//                              the kubelet's MIG device of that profile)
//     mps, mig-mps             CUDA_MPS_PIPE_DIRECTORY / CUDA_MPS_LOG_DIRECTORY (container
//                              paths kMpsPipeDir / kMpsLogDir, bind-mounted from
//                              <mps_root>/<device UUID>/pipe and /log),
//                              CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, and
//                              CUDA_MPS_PINNED_DEVICE_MEM_LIMIT "<device UUID>=<MiB>M"
//   and one CDI device "<pod uid>-<container>-<resource>" (resource without its domain, e.g.
//   "gpu", "mig-1g.10gb", "gpu-compute") carrying the same edits, written to
//   <cdi_dir>/tessera.io-gpu-<device name>.json.
// * Allocated pairs and CDI specs of pods the PodSource no longer lists are dropped at the next
//   successful Allocate (the spec files removed). Undo reverses one allocation (its pair becomes
//   unallocated, its spec file is removed), for a kubelet request whose other containers fail.
// * Errors change nothing (no CDI file, the pair stays unallocated) and are one message:
//   no candidate pod (NotFound), a malformed annotation, a GPU index the node lacks, a UUID
//   that does not match the GPU at that index, an unknown MIG instance (InvalidArgument), a
//   PodSource or CDI write failure (as returned).
// * Preferred: the devices the matching pod's assignment names (when a pod matches), then the
//   must-include devices, then the available ones in ID order, up to the size.
// * Allocator is thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "agent/cdi.h"
#include "agent/discovery.h"
#include "core/status.h"
#include "kube/translate.h"

namespace tessera::agent {

inline constexpr const char* kMpsPipeDir = "/run/tessera/mps/pipe";
inline constexpr const char* kMpsLogDir = "/run/tessera/mps/log";
inline constexpr const char* kDefaultMpsRoot = "/run/tessera/mps";
inline constexpr int kComputeDevicesPerGpu = 100;
// tessera.io/gpu-slice devices per GPU: one per workload a GPU can hold at most (the MPS client
// limit, SliceLimits::mps_max_clients), so the kubelet never refuses a pod the scheduler placed.
inline constexpr int kSliceDevicesPerGpu = 48;

struct PodContainer {
  std::string name;
  std::map<std::string, int64_t> requests;  // extended resource -> count (the limit)
  bool started = false;  // the runtime created it (it has a container ID): allocated long ago
};

// A pod bound to this node, as the device plugin needs it.
struct BoundPod {
  std::string uid;
  std::string ns;
  std::string name;
  std::string bound_at;  // RFC 3339 UTC; orders pods by binding time
  std::vector<PodContainer> containers;
  std::map<std::string, std::string> annotations;
};

// The pods bound to this node. Implementations must be thread-safe.
class PodSource {
 public:
  virtual ~PodSource() = default;
  virtual Result<std::vector<BoundPod>> ListBoundPods() = 0;
};

// An in-memory PodSource.
class StaticPodSource : public PodSource {
 public:
  void Set(std::vector<BoundPod> pods);
  void Add(BoundPod pod);
  Result<std::vector<BoundPod>> ListBoundPods() override;

 private:
  std::mutex mu_;
  std::vector<BoundPod> pods_;
};

// kCompute and kSlice are virtual devices: a pool per GPU that the kubelet counts, while the
// container gets what the pod's assignment names.
enum class PluginResourceKind : uint8_t { kGpu, kMig, kCompute, kSlice };

struct PluginResource {
  PluginResourceKind kind = PluginResourceKind::kGpu;
  std::string name;         // e.g. "nvidia.com/mig-1g.10gb"
  std::string mig_profile;  // kMig: catalog name, e.g. "1g.10gb+me"
  std::string endpoint;     // socket file name, e.g. "tessera-mig-1g.10gb.sock"
  bool operator==(const PluginResource&) const = default;
};

struct PluginDevice {
  std::string id;
  bool healthy = true;
  std::optional<int> numa_node;
  bool operator==(const PluginDevice&) const = default;
};

std::vector<PluginResource> PluginResourcesFor(const NodeGpuState& state);
std::vector<PluginDevice> PluginDevicesFor(const PluginResource& resource,
                                           const NodeGpuState& state);

struct MountEdit {
  std::string host_path;
  std::string container_path;
  bool read_only = false;
};

struct ContainerAllocation {
  std::string pod_uid;
  std::string container;
  std::string resource;
  std::map<std::string, std::string> envs;
  std::vector<MountEdit> mounts;
  std::vector<std::string> cdi_devices;  // fully qualified
  std::string cdi_path;                  // the spec file written
};

struct AllocatorOptions {
  std::string cdi_dir = kDefaultCdiDir;
  std::string mps_root = kDefaultMpsRoot;
};

class Allocator {
 public:
  Allocator(PodSource& pods, AllocatorOptions options);

  void SetState(NodeGpuState state);
  NodeGpuState State() const;

  Result<ContainerAllocation> Allocate(const PluginResource& resource,
                                       const std::vector<std::string>& device_ids);
  std::vector<std::string> Preferred(const PluginResource& resource,
                                     const std::vector<std::string>& available,
                                     const std::vector<std::string>& must_include, int size);
  void Undo(const ContainerAllocation& allocation);
  // Rebuilds the allocations from the listed pods and the CDI specs on disk (see Restart above);
  // returns how many it recovered. Done once: later calls return 0.
  Result<int> Recover();
  // Whether (pod uid, container) was allocated for `resource`.
  bool Allocated(const std::string& pod_uid, const std::string& container,
                 const std::string& resource) const;

 private:
  struct Match {
    BoundPod pod;
    size_t container = 0;
  };
  Result<Match> FindPod(const std::vector<BoundPod>& pods, const std::string& resource,
                        size_t count) const;
  void Prune(const std::vector<BoundPod>& pods);
  int RecoverLocked(const std::vector<BoundPod>& pods);

  PodSource& pods_;
  AllocatorOptions options_;
  mutable std::mutex mu_;
  NodeGpuState state_;
  bool recovered_ = false;
  // (pod uid, container, resource) -> CDI spec path
  std::map<std::tuple<std::string, std::string, std::string>, std::string> allocated_;
};

}  // namespace tessera::agent
