// Translation between Kubernetes objects (JSON exactly as the API server sends them) and
// Tessera's cluster model: pods become workload requests, nodes become NodeSpecs with GPU
// inventory, and two annotations carry what Kubernetes has no field for.
//
// Pod resources understood (per container; see docs/OPERATIONS.md for the full table):
//   nvidia.com/gpu: N                whole GPUs (integer); with a share resource below, N must be 1
//   nvidia.com/mig-<profile>: 1      one MIG instance ("+" of a profile appears as ".":
//   -1g.10gb.me) tessera.io/gpu-memory: Q         a share of one GPU: peak GPU memory (quantity,
//   e.g. 10Gi) tessera.io/gpu-compute: P        a share of one GPU: % of its compute (1..100)
//   nvidia.com/gpumem: MiB, nvidia.com/gpumem-percentage: %, nvidia.com/gpucores: %  (HAMi)
// Containers are summed, init containers count as their maximum (as kube-scheduler does);
// limits are used, requests where a limit is absent.
// Pod annotations: tessera.io/queue, tessera.io/isolation (strict|standard|best-effort),
// tessera.io/gang, tessera.io/min-member, tessera.io/gpu-models (comma-separated catalog names),
// tessera.io/assignment (written at binding), tessera.io/original-resources (written by the pod
// webhook; see kAnnotationOriginalResources).
// Node inputs: status.allocatable (cpu, memory, nvidia.com/gpu, nvidia.com/mig-*), GPU Feature
// Discovery labels (nvidia.com/gpu.product, .replicas, .sharing-strategy, mig.strategy), the
// tessera.io/gpu-inventory annotation, spec.unschedulable, spec.taints, the Ready condition.
//
// Annotation formats (JSON values; stable, documented in docs/OPERATIONS.md):
//   tessera.io/gpu-inventory (node, published by a node agent):
//     [{"index":0,"uuid":"GPU-…","model":"H100-80GB","memory_mib":81559,"mig_enabled":true,
//       "mig_layout":"3g.40gb@0 2g.20gb@4 1g.10gb@6","health":"healthy"}, …]
//     model: a catalog name or a GFD product string; health: "healthy" | "unhealthy";
//     mig_layout: MigLayoutString form, empty when MIG is disabled.
//     Version 2 entries add "version":2 and optional fields: "mig_devices" (per MIG device:
//     {"instance":"3g.40gb@0","uuid":"MIG-…"}, instances of mig_layout), "numa_node" (integer
//     >= 0), "pci_bus_id" (NVML form, e.g. "00000000:07:00.0") and "nvlink_peers" (indices of
//     the GPUs this one reaches over NVLink). An entry without "version" is version 1. Versions
//     only add optional fields: a reader reads the fields it knows and ignores the others, so
//     a newer version's entries still decode (an incompatible change gets a new annotation).
//   tessera.io/assignment (pod, written by Tessera when it binds):
//     {"node":"gpu-a","kind":"mig","gpus":[3],"uuids":["GPU-…"],"mig_instance":"3g.40gb@4",
//      "gpu_milli":0,"mps_thread_pct":0,"memory_limit_mib":0}
//     kind: exclusive | share | mig | mps | timeslice | mig-mps; fields not meaningful for the
//     kind are 0/empty and may be omitted. gpus are indices in the node's inventory; a MIG
//     assignment on a node without inventory has no gpus and mig_instance "<profile>" only
//     (the device plugin picks the instance).
//
// Failure: every function returns InvalidArgument with a message meant for a pod Event or a
// node report (e.g. "container \"train\": nvidia.com/gpu must be an integer, got \"1.5\""); no
// input makes them crash or throw. All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/gpu_slices.h"
#include "cluster/types.h"
#include "core/status.h"

namespace tessera {
class ClusterState;
}

namespace tessera::kube {

using Json = nlohmann::json;

inline constexpr const char* kResourceGpu = "nvidia.com/gpu";
inline constexpr const char* kResourceMigPrefix = "nvidia.com/mig-";
inline constexpr const char* kResourceGpuMemory = "tessera.io/gpu-memory";
inline constexpr const char* kResourceGpuCompute = "tessera.io/gpu-compute";
inline constexpr const char* kResourceHamiMem = "nvidia.com/gpumem";
inline constexpr const char* kResourceHamiMemPct = "nvidia.com/gpumem-percentage";
inline constexpr const char* kResourceHamiCores = "nvidia.com/gpucores";
// The device the pod webhook adds for the node agent's device plugin (kube/webhook.h); the
// scheduler ignores it.
inline constexpr const char* kResourceGpuSlice = "tessera.io/gpu-slice";

inline constexpr const char* kAnnotationQueue = "tessera.io/queue";
inline constexpr const char* kAnnotationIsolation = "tessera.io/isolation";
inline constexpr const char* kAnnotationGang = "tessera.io/gang";
inline constexpr const char* kAnnotationMinMember = "tessera.io/min-member";
inline constexpr const char* kAnnotationGpuModels = "tessera.io/gpu-models";
inline constexpr const char* kAnnotationAssignment = "tessera.io/assignment";
inline constexpr const char* kAnnotationInventory = "tessera.io/gpu-inventory";
// The GPU resources the pod webhook replaced by a tessera.io/gpu-slice handle on a
// `tessera.io/rightsize: auto` pod (kube/webhook.h), so that the kubelet counts one slice device
// instead of whole nvidia.com/gpu devices the grant may not use. Format (compact JSON, per
// container or init container name, the entries as the pod stated them):
//   {"train":{"limits":{"nvidia.com/gpu":"2"},"requests":{"nvidia.com/gpu":"2"}}}
// TranslatePod reads these entries as the container's GPU request, so the scheduler sizes the
// pod from what its owner asked. They are honoured only on a container that holds a
// tessera.io/gpu-slice handle and states none of the named resources itself (the slice device
// hands the container exactly what the scheduler's assignment names, so the annotation cannot
// make the kubelet hand out more than the scheduler counted); anything else is InvalidArgument.
inline constexpr const char* kAnnotationOriginalResources = "tessera.io/original-resources";

inline constexpr const char* kDefaultQueue = "default";
// The MigLayout objects (deploy/crds/miglayout.yaml): desired and applied MIG layouts per node.
inline constexpr const char* kMigLayoutsPath = "/apis/tessera.io/v1alpha1/miglayouts";
// GPU memory a memory-only share is measured against when the model is not yet known.
inline constexpr int64_t kReferenceGpuMemoryMib = 81920;

// ---- Quantities (apimachinery resource.Quantity grammar: sign, digits, optional fraction,
// suffix Ki..Ei | n u m "" k M G T P E | e<exp>). Input is a JSON string or number. ----

// value × 1000, rounded up. InvalidArgument if malformed or out of int64 range.
Result<int64_t> ParseQuantityMilli(const Json& q);
// value / 2^20 (bytes -> MiB), rounded up (round_up) or down.
Result<int64_t> ParseQuantityMiB(const Json& q, bool round_up = true);
// An exact integer; InvalidArgument "must be an integer" otherwise.
Result<int64_t> ParseQuantityInt(const Json& q);

// ---- Scheduling constraints ----

struct Toleration {
  std::string key;           // empty with operator Exists: tolerates every taint
  std::string op = "Equal";  // Equal | Exists
  std::string value;
  std::string effect;  // empty: every effect
  bool operator==(const Toleration&) const = default;
};

struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule | PreferNoSchedule | NoExecute
  bool operator==(const Taint&) const = default;
};

struct NodeSelectorRequirement {
  std::string key;
  std::string op;  // In | NotIn | Exists | DoesNotExist | Gt | Lt
  std::vector<std::string> values;
  bool operator==(const NodeSelectorRequirement&) const = default;
};

// Requirements ANDed. match_fields supports metadata.name (In / NotIn), as kube-scheduler does.
struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> match_expressions;
  std::vector<NodeSelectorRequirement> match_fields;
  bool operator==(const NodeSelectorTerm&) const = default;
};

// ---- Annotations ----

enum class AssignmentKind : uint8_t { kExclusive, kShare, kMig, kMps, kTimeSlice, kMigMps };
const char* AssignmentKindName(AssignmentKind k);  // "exclusive", "share", "mig", ...

// The device assignment of a bound pod (annotation tessera.io/assignment).
struct Assignment {
  std::string node;
  AssignmentKind kind = AssignmentKind::kExclusive;
  std::vector<int> gpus;           // GPU indices on the node (empty only for kMig, see above)
  std::vector<std::string> uuids;  // same order as gpus when the inventory is known; else empty
  std::string mig_instance;        // kMig, kMigMps: "<profile>@<start>", e.g. "3g.40gb@4"
  int gpu_milli = 0;               // kShare: milli-GPU of the one GPU
  int mps_thread_pct = 0;          // kMps, kMigMps: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
  int64_t memory_limit_mib = 0;    // kMps, kMigMps: pinned memory limit; kTimeSlice: declared
  bool operator==(const Assignment&) const = default;
};
std::string EncodeAssignment(const Assignment& a);  // compact JSON
// The GPUs an assignment holds on a GPU of `model`, in the unit ClusterState's HeldMilli counts
// (/ 1000): whole GPUs; a share its milli-GPU; an MPS client its thread %; a MIG instance its
// compute slices over the GPU's (times the thread % for MIG + MPS); a time-slice replica its
// declared memory over the GPU's. 0 for a MIG profile the model does not have.
double AssignmentGpus(const Assignment& a, GpuModelId model);
Result<Assignment> DecodeAssignment(std::string_view text);

// The inventory format EncodeInventory writes (see the annotation formats above).
inline constexpr int kInventoryVersion = 2;

// One MIG device of a GPU in the inventory (version 2).
struct InventoryMigDevice {
  std::string instance;  // "<profile>@<start>", one of the GPU's mig_layout instances
  std::string uuid;      // the MIG device UUID, "MIG-…"
  bool operator==(const InventoryMigDevice&) const = default;
};

// One GPU of a node (annotation tessera.io/gpu-inventory).
struct GpuInventoryEntry {
  int index = 0;
  std::string uuid;
  std::string model;  // catalog name after decoding (GFD product strings are mapped)
  int64_t memory_mib = 0;
  bool mig_enabled = false;
  std::string mig_layout;  // MigLayoutString form; empty when MIG is disabled
  bool healthy = true;
  // Version 2; empty / absent in version 1 entries and where the agent did not discover them.
  // (Default member initializers keep positional initialisation of the first fields valid.)
  std::vector<InventoryMigDevice> mig_devices = {};  // in mig_layout order
  std::optional<int> numa_node = {};
  std::string pci_bus_id = {};
  std::vector<int> nvlink_peers = {};  // ascending GPU indices
  int version = kInventoryVersion;  // as decoded; EncodeInventory always writes kInventoryVersion
  bool operator==(const GpuInventoryEntry&) const = default;
};
std::string EncodeInventory(const std::vector<GpuInventoryEntry>& gpus);
// Checks indices (0..n-1, each once), models (known to the catalog), MIG layouts (legal for the
// model), at most kMaxGpusPerNode entries; version 2 fields: MIG devices name instances of the
// layout with a non-empty UUID, each UUID once; numa_node >= 0; NVLink peers are other GPUs of
// the node, each once. An entry's version is an integer >= 1 (default 1).
Result<std::vector<GpuInventoryEntry>> DecodeInventory(std::string_view text);

// Catalog model for a GFD `nvidia.com/gpu.product` value (also accepts catalog names),
// e.g. "NVIDIA-H100-80GB-HBM3" -> H100-80GB, "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb" -> A100-40GB,
// "Tesla-T4-SHARED" -> T4. InvalidArgument "unknown GPU product ..." otherwise.
Result<GpuModelId> ModelFromProduct(std::string_view product);

// ---- Pods ----

// The GPU part of a pod's request, as stated.
struct GpuRequest {
  int whole_gpus = 0;       // nvidia.com/gpu without share resources
  std::string mig_profile;  // nvidia.com/mig-<profile>, e.g. "3g.40gb", "1g.10gb+me"
  int64_t memory_mib = 0;   // tessera.io/gpu-memory or nvidia.com/gpumem
  int memory_pct = 0;       // nvidia.com/gpumem-percentage
  int compute_pct = 0;      // tessera.io/gpu-compute or nvidia.com/gpucores
  bool any() const {
    return whole_gpus > 0 || !mig_profile.empty() || memory_mib > 0 || memory_pct > 0 ||
           compute_pct > 0;
  }
  bool is_share() const { return memory_mib > 0 || memory_pct > 0 || compute_pct > 0; }
  bool operator==(const GpuRequest&) const = default;
};

struct PodRequest {
  std::string ns;
  std::string name;
  std::string uid;
  std::string scheduler_name;
  std::string node_name;  // empty while pending
  std::string phase;      // Pending | Running | Succeeded | Failed | Unknown
  std::string creation_timestamp;
  bool deleting = false;  // metadata.deletionTimestamp set
  int priority = 0;       // spec.priority (resolved from the PriorityClass by admission)
  std::string priority_class;
  std::string queue = kDefaultQueue;
  Isolation isolation = Isolation::kStandard;
  std::string gang;    // workload group name; empty = not part of a gang
  int min_member = 0;  // 0 = the whole group

  GpuRequest gpu;
  // For the placement engine: CPU, memory and the GPU request, model-independent: a MIG
  // instance counts the largest fraction it has on an allowed model, a memory share is measured
  // on the smallest allowed model (kReferenceGpuMemoryMib when any model is allowed); DemandOn
  // gives the exact value for one model. demand.models restricts models (tessera.io/gpu-models,
  // models offering the MIG profile).
  Demand demand;
  // For the sharing allocator (isolation, memory, compute, MIG profile, host CPU/memory).
  // memory_pct is resolved per model by SliceDemandOn.
  SliceDemand slices;

  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
  std::vector<NodeSelectorTerm> required_affinity;  // ORed; empty = no constraint
  std::optional<Assignment> assignment;             // tessera.io/assignment, if present

  bool wants_gpu() const { return gpu.any(); }
  bool terminal() const { return phase == "Succeeded" || phase == "Failed"; }
  std::string key() const { return ns + "/" + name; }
};

Result<PodRequest> TranslatePod(const Json& pod);
// TranslatePod for a pod that holds resources: when the pod is bound (spec.nodeName set) and
// only its tessera.io/assignment annotation makes it invalid (anyone who can edit the pod can
// write it), the pod is translated without the annotation, so its GPUs are still counted (as
// for a pod bound without one), and the annotation's error is stored in `annotation_error`.
Result<PodRequest> TranslateHeldPod(const Json& pod, Status* annotation_error);

// The engine demand of `p` on a GPU of `model` (exact MIG fraction and memory share).
Demand DemandOn(const PodRequest& p, GpuModelId model);
// The slice demand of `p` on a GPU of `model` (memory percentage resolved).
SliceDemand SliceDemandOn(const PodRequest& p, GpuModelId model);

// Whether the pod is placed as a GPU slice whose mechanism the selector chooses rather than as
// whole GPUs or a milli-GPU share: an explicit nvidia.com/mig-* request, a strict-isolation share,
// and, with `select_shares`, every share sized by memory/compute (MPS, time-slice or MIG by its
// isolation class). Without it, standard and best-effort shares stay milli-GPU shares whose
// mechanism the node chooses.
bool WantsSlice(const PodRequest& p, bool select_shares);

// ---- Nodes ----

struct NodeInfo {
  NodeSpec spec;  // name, allocatable CPU/memory, GPU count and model, labels
  // The node's GPU model; as spec.model, but also set when all its GPUs are advertised as MIG
  // resources only (spec.gpu_count == 0, mig_allocatable non-empty).
  GpuModelId model = kNoGpuModel;
  bool ready = false;
  bool unschedulable = false;
  std::vector<Taint> taints;
  std::vector<GpuInventoryEntry> inventory;        // from tessera.io/gpu-inventory; empty if absent
  GpuMask unhealthy = 0;                           // GPUs the inventory reports unhealthy
  std::map<std::string, int64_t> mig_allocatable;  // profile -> allocatable nvidia.com/mig-*
  std::string sharing_strategy;                    // GFD: none | mps | time-slicing; "" unknown
  bool operator==(const NodeInfo&) const = default;
};

// GPU count: healthy and unhealthy GPUs of the inventory if present, else allocatable
// nvidia.com/gpu divided by nvidia.com/gpu.replicas. GPU model: the inventory's, else the
// GFD product label mapped by ModelFromProduct. A node with GPUs but no known model, mixed
// models, or more than kMaxGpusPerNode GPUs is an error (the caller reports and skips it).
Result<NodeInfo> TranslateNode(const Json& node);

// Every NoSchedule / NoExecute taint is tolerated (PreferNoSchedule is ignored).
bool Tolerates(const PodRequest& pod, const NodeInfo& node);
bool Tolerates(const std::vector<Toleration>& tolerations, const Taint& taint);
// nodeSelector and required node affinity.
bool MatchesNode(const PodRequest& pod, const NodeInfo& node);
bool MatchesTerm(const NodeSelectorTerm& term, const NodeInfo& node);
// Ready and not cordoned.
bool Schedulable(const NodeInfo& node);

// ---- Assignments <-> slices ----

// The tessera.io/assignment of slice `s` on `node`: GPU indices, their UUIDs when the
// inventory names them, the MIG instance as "<profile>@<start>" (profile from `first_gpu`, the
// slice state of the slice's first GPU), MPS thread % and memory limit, the share's milli-GPU.
Assignment AssignmentFor(const NodeInfo& node, const SliceAssignment& s,
                         const GpuSlices& first_gpu);
// The slice an assignment names on `node` (index `n` in the caller's cluster); nullopt when it
// names no GPU, a GPU the node lacks, or a MIG instance without a start. The MIG profile is
// not checked here: the ledger refuses an instance that does not exist.
std::optional<SliceAssignment> SliceFor(const Assignment& a, const NodeInfo& node, NodeIdx n);
// What a workload of slice kind `kind` holds on a GPU, as notices say it: "MIG instance
// <profile>@<start>" for `inst` (MIG kinds, with the GPU's geometry), else "<kind> use of the
// GPU with MIG off".
std::string DescribeHold(SliceKind kind, const MigGeometry* geo, const MigInstance* inst);
// Brings the GPUs slice `s` names to what a bound pod's assignment says they hold, where
// `cluster` disagrees (ClusterState::ConformGpu): MIG on with `mig_instance` ("<profile>@<start>",
// the assignment's) for a MIG slice, MIG off for any other kind. GPUs with work in use in the
// way are left as they are. Returns the GPUs changed and what the pod holds there.
std::vector<std::pair<int, std::string>> ConformToAssignment(ClusterState& cluster,
                                                             const SliceAssignment& s,
                                                             const std::string& mig_instance);

}  // namespace tessera::kube
