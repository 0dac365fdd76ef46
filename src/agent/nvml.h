// GpuBackend: what the node agent asks of the GPUs, as plain C++ values, and its NVML
// implementation loaded at run time.
//
// Contract:
// * OpenNvml dlopen()s the NVML library (by default exactly "libnvidia-ml.so.1", so the
//   dynamic loader's search path, LD_LIBRARY_PATH included, decides which one), resolves the
//   required functions with dlsym and calls nvmlInit_v2. Failures are Status values with one
//   clear message, never a crash:
//     library absent   -> Unavailable "libnvidia-ml.so.1 not found: is the NVIDIA driver
//                         installed? (dlopen: <loader message>)"
//     symbol absent    -> Unavailable "<library>: missing NVML function <name> (driver too old?)"
//     driver absent    -> Unavailable "NVIDIA driver not loaded (nvmlInit_v2: <NVML message>)"
//     other init error -> Unavailable "nvmlInit_v2 failed: <NVML message>"
//   The backend calls nvmlShutdown and dlclose()s the library when destroyed.
// * Every other call returns the value or a Status naming the NVML function, the GPU and NVML's
//   message, e.g. "nvmlDeviceGetUUID(gpu 3): Unknown Error". Calls that NVML reports as not
//   supported on a device (MIG mode on a non-MIG GPU, utilization of a MIG-enabled GPU, NUMA
//   node on old drivers) return an empty optional instead of an error.
// * GPUs are named by NVML index (0..DeviceCount()-1); GPU instances by their GI id, compute
//   instances by (GI id, CI id), as nvidia-smi shows them.
// * A backend is not thread-safe; use one per thread or serialise calls.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::agent {

inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

struct GpuMemory {
  int64_t total_mib = 0;
  int64_t used_mib = 0;
};

struct GpuUtilization {
  int gpu_pct = 0;
  int memory_pct = 0;
};

// One GPU-instance profile the GPU offers (nvmlDeviceGetGpuInstanceProfileInfo).
struct GiProfileInfo {
  int id = 0;              // nvidia-smi GI profile id, as MigProfile::id
  int slices = 0;          // GPU slices
  int instance_count = 0;  // at most this many per GPU
  int multiprocessors = 0;
  int copy_engines = 0;
  int decoders = 0;
  int encoders = 0;
  int jpegs = 0;
  int ofas = 0;
  int64_t memory_mib = 0;
};

// One existing GPU instance (nvmlGpuInstanceGetInfo).
struct GiInfo {
  int id = 0;
  int profile_id = 0;
  int start = 0;  // first memory slice
  int size = 0;   // memory slices
};

// One MIG device: a compute instance inside a GPU instance, with its own UUID.
struct MigDeviceInfo {
  int gi_id = 0;
  int ci_id = 0;
  std::string uuid;  // "MIG-..."
};

// nvmlDeviceGetMigMode: the mode in effect and the one the next activation (a GPU reset) sets.
struct MigModeState {
  bool current = false;
  bool pending = false;
};

// What nvmlDeviceSetMigMode did: `active` when the GPU now runs in the asked mode, else the
// mode is pending and `activation` is NVML's activation status message ("Reset required").
struct MigModeChange {
  bool active = false;
  std::string activation;
};

struct ProcessInfo {
  uint32_t pid = 0;
  int64_t used_mib = 0;
  int gi_id = -1;  // -1 outside MIG
  int ci_id = -1;
};

// One per-process sample of nvmlDeviceGetProcessUtilization.
struct ProcessSmSample {
  uint32_t pid = 0;
  uint64_t timestamp_us = 0;  // CPU time of the sample
  int sm_pct = 0;             // % of the sample period the process had kernels on the SMs
};

// How two GPUs reach each other, nearest first (nvidia-smi topo -m names in comments).
enum class GpuLink : uint8_t {
  kSelf,        // X
  kNvLink,      // NV#
  kPcieSwitch,  // PIX: one PCIe switch
  kPcieMulti,   // PXB: several PCIe switches, no host bridge
  kHostBridge,  // PHB
  kNumaNode,    // NODE: host bridges within one NUMA node
  kSystem,      // SYS: across NUMA nodes
};
const char* GpuLinkName(GpuLink link);  // "X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS"

struct XidEvent {
  int gpu = 0;
  uint64_t xid = 0;
  int gi_id = -1;  // -1 when not attributable to a MIG instance
  int ci_id = -1;
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;

  virtual Result<int> DeviceCount() = 0;
  virtual Result<std::string> Uuid(int gpu) = 0;
  virtual Result<std::string> Name(int gpu) = 0;  // e.g. "NVIDIA A100-SXM4-80GB"
  virtual Result<GpuMemory> Memory(int gpu) = 0;
  // (major, minor); empty if not reported.
  virtual Result<std::optional<std::pair<int, int>>> ComputeCapability(int gpu) = 0;
  // Current MIG mode; empty when the GPU has no MIG mode.
  virtual Result<std::optional<bool>> MigEnabled(int gpu) = 0;
  // Current and pending MIG mode; empty when the GPU has no MIG mode.
  virtual Result<std::optional<MigModeState>> MigMode(int gpu) = 0;
  // The GPU-instance profiles of a MIG-enabled GPU.
  virtual Result<std::vector<GiProfileInfo>> GiProfiles(int gpu) = 0;
  // Existing GPU instances, sorted by start.
  virtual Result<std::vector<GiInfo>> GpuInstances(int gpu) = 0;
  // Existing MIG devices (compute instances), sorted by (GI id, CI id).
  virtual Result<std::vector<MigDeviceInfo>> MigDevices(int gpu) = 0;
  virtual Result<std::vector<ProcessInfo>> Processes(int gpu) = 0;
  // Empty where NVML does not report it (MIG-enabled GPUs).
  virtual Result<std::optional<GpuUtilization>> Utilization(int gpu) = 0;
  // Per-process samples newer than last_seen_us (NVML keeps a short buffer of them); an empty
  // vector when none is newer; empty optional where NVML does not report them (the driver lacks
  // the function, the GPU does not support it, MIG mode).
  virtual Result<std::optional<std::vector<ProcessSmSample>>> ProcessSmUtilization(
      int gpu, uint64_t last_seen_us) = 0;
  virtual Result<GpuLink> Link(int a, int b) = 0;
  // Empty where NVML does not report it.
  virtual Result<std::optional<int>> NumaNode(int gpu) = 0;
  // PCI bus id as NVML writes it ("00000000:07:00.0"); empty where NVML does not report it.
  virtual Result<std::string> PciBusId(int gpu) = 0;

  // MIG changes. CreateGpuInstance places a GI of `profile_id` at memory slices
  // [start, start + size) and returns its GI id; CreateComputeInstance makes one compute
  // instance covering the whole GPU instance and returns its CI id. NVML refuses illegal
  // placements (InvalidArgument / ResourceExhausted) and busy instances (FailedPrecondition,
  // NVML_ERROR_IN_USE); its refusal comes back as the Status.
  virtual Result<int> CreateGpuInstance(int gpu, int profile_id, int start, int size) = 0;
  virtual Status DestroyGpuInstance(int gpu, int gi_id) = 0;
  virtual Result<int> CreateComputeInstance(int gpu, int gi_id) = 0;
  virtual Status DestroyComputeInstance(int gpu, int gi_id, int ci_id) = 0;
  // Asks for MIG mode on or off (nvmlDeviceSetMigMode); `active` is read back from
  // nvmlDeviceGetMigMode. A refusal (no permission, not supported, instances left) is the
  // Status; a driver without the function is Unavailable.
  virtual Result<MigModeChange> SetMigMode(int gpu, bool enabled) = 0;

  // Health events: WatchXids registers every GPU for critical-XID events (idempotent);
  // NextXid waits up to timeout_ms for one and returns empty on timeout.
  virtual Status WatchXids() = 0;
  virtual Result<std::optional<XidEvent>> NextXid(int timeout_ms) = 0;
};

// Loads NVML (see the contract above). `library` is a soname or a path.
Result<std::unique_ptr<GpuBackend>> OpenNvml(const std::string& library = kNvmlLibrary);

}  // namespace tessera::agent
