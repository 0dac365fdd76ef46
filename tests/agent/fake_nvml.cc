// A fake libnvidia-ml.so.1 for tests: the part of NVML's C API that src/agent uses
// (src/agent/nvml_api.h), answering from a JSON description of GPUs. The format is documented
// in docs/AGENT.md; the MIG geometry (profiles, ids, placements, legality) is the catalog's
// (cluster/mig_geometry.h), so the fake and the scheduler agree.
//
// Contract:
// * nvmlInit_v2 reads the file named by TESSERA_FAKE_NVML_CONFIG. An unreadable or invalid
//   file makes nvmlInit_v2 fail with NVML_ERROR_UNKNOWN and a line on stderr; "driver_not_loaded"
//   makes it fail with NVML_ERROR_DRIVER_NOT_LOADED. Init and shutdown are reference-counted.
// * "fail": {"<function>": "NVML_ERROR_<NAME>"} at the top level makes every call of that
//   function fail; inside a GPU, only calls about that GPU (or its instances) fail.
// * MIG changes enforce the catalog's placements: a start the profile does not allow, or a
//   size that does not match it, is NVML_ERROR_INVALID_ARGUMENT; an instance that does not fit
//   the current layout is NVML_ERROR_INSUFFICIENT_RESOURCES; destroying a compute instance
//   with processes, or a GPU instance with compute instances or processes, is
//   NVML_ERROR_IN_USE. With "state_file" (or TESSERA_FAKE_NVML_STATE) the MIG layout is read
//   from that file at init when it exists and written (atomically) after every change.
// * nvmlDeviceSetMigMode records the pending mode. Disabling with GPU instances left is
//   NVML_ERROR_IN_USE. The mode takes effect at once on an idle GPU unless the GPU says
//   "mig_mode_change": "pending_reset"; then, as with running processes, it stays pending and
//   the activation status is "mig_activation" (default NVML_ERROR_RESET_REQUIRED), or
//   NVML_ERROR_IN_USE for processes.
// * nvmlDeviceGetProcessUtilization returns the GPU's "process_utilization" samples newer than
//   lastSeenTimeStamp: NVML_ERROR_NOT_FOUND when there is none, NVML_ERROR_NOT_SUPPORTED in MIG
//   mode. Built with TESSERA_FAKE_NVML_NO_PROCESS_UTILIZATION the library lacks the function,
//   as drivers before it did.
// * XIDs listed per GPU are delivered once to every event set that registers the GPU;
//   nvmlEventSetWait_v2 returns NVML_ERROR_TIMEOUT at once when none is pending.
// * Handles are tagged integers, never dereferenced; a stale or foreign handle is
//   NVML_ERROR_INVALID_ARGUMENT. Thread-safe: one mutex guards every call.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#pragma GCC visibility push(default)
#include "agent/nvml_api.h"
#pragma GCC visibility pop

#include "cluster/gpu_catalog.h"
#include "cluster/mig_geometry.h"
#include "tests/agent/fake_nvml_state.h"

namespace {

using namespace fake_nvml;  // NOLINT: the fake's own state

enum Kind : uint64_t { kDevice = 1, kMigDevice = 2, kGi = 3, kCi = 4 };

template <typename T>
T MakeHandle(Kind kind, int gpu, unsigned gi = 0, unsigned ci = 0) {
  const uint64_t v = (uint64_t{kind} << 40) | (uint64_t(gpu) << 16) | (uint64_t(gi & 0xff) << 8) |
                     uint64_t(ci & 0xff);
  return reinterpret_cast<T>(static_cast<uintptr_t>(v));
}

struct Decoded {
  Kind kind;
  int gpu;
  unsigned gi, ci;
};

template <typename T>
Decoded Decode(T handle) {
  const uint64_t v = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
  return {static_cast<Kind>(v >> 40), static_cast<int>((v >> 16) & 0xffffff),
          static_cast<unsigned>((v >> 8) & 0xff), static_cast<unsigned>(v & 0xff)};
}

nvmlReturn_t Check(const char* fn, int gpu = -1) {
  if (g_state.refs == 0) return NVML_ERROR_UNINITIALIZED;
  if (auto it = g_state.fail.find(fn); it != g_state.fail.end()) return it->second;
  if (gpu >= 0 && gpu < static_cast<int>(g_state.gpus.size())) {
    const auto& f = g_state.gpus[static_cast<size_t>(gpu)].fail;
    if (auto it = f.find(fn); it != f.end()) return it->second;
  }
  return NVML_SUCCESS;
}

Gpu* DeviceOf(nvmlDevice_t d, Kind kind = kDevice) {
  const Decoded h = Decode(d);
  if (h.kind != kind || h.gpu >= static_cast<int>(g_state.gpus.size())) return nullptr;
  return &g_state.gpus[static_cast<size_t>(h.gpu)];
}

Gi* GiOf(Gpu& g, unsigned id) {
  for (Gi& gi : g.gis)
    if (gi.id == id) return &gi;
  return nullptr;
}

// The GPU and GI a GPU-instance handle names, or nullptrs.
std::pair<Gpu*, Gi*> GiHandle(nvmlGpuInstance_t h) {
  const Decoded d = Decode(h);
  if (d.kind != kGi || d.gpu >= static_cast<int>(g_state.gpus.size())) return {nullptr, nullptr};
  Gpu& g = g_state.gpus[static_cast<size_t>(d.gpu)];
  return {&g, GiOf(g, d.gi)};
}

bool GiHasProcs(const Gpu& g, const Gi& gi) {
  for (const Proc& p : g.procs)
    if (p.mig == Placement(g, gi)) return true;
  return false;
}

nvmlReturn_t CopyString(const std::string& s, char* buf, unsigned len) {
  if (!buf) return NVML_ERROR_INVALID_ARGUMENT;
  if (s.size() + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

#define FAKE_LOCK std::lock_guard<std::recursive_mutex> lock(g_mu)
#define FAKE_CHECK(fn, gpu) \
  if (nvmlReturn_t r_ = Check(fn, gpu); r_ != NVML_SUCCESS) return r_

// The GPU index of a device handle, for failure injection; -1 if not a device.
int GpuIndex(nvmlDevice_t d) {
  const Decoded h = Decode(d);
  return (h.kind == kDevice || h.kind == kMigDevice) ? h.gpu : -1;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2(void) {
  FAKE_LOCK;
  if (g_state.refs > 0) {
    ++g_state.refs;
    return NVML_SUCCESS;
  }
  try {
    Load();
  } catch (const std::exception& e) {
    g_state = State();
    std::fprintf(stderr, "fake NVML: %s\n", e.what());
    return NVML_ERROR_UNKNOWN;
  }
  const char* path = std::getenv("TESSERA_FAKE_NVML_CONFIG");
  std::ifstream in(path);
  const Json cfg = Json::parse(in, nullptr, false);
  nvmlReturn_t r = NVML_SUCCESS;
  if (cfg.is_object() && cfg.value("driver_not_loaded", false)) r = NVML_ERROR_DRIVER_NOT_LOADED;
  if (auto it = g_state.fail.find("nvmlInit_v2"); it != g_state.fail.end()) r = it->second;
  if (r != NVML_SUCCESS) g_state = State();
  return r;
}

nvmlReturn_t nvmlShutdown(void) {
  FAKE_LOCK;
  if (g_state.refs == 0) return NVML_ERROR_UNINITIALIZED;
  if (--g_state.refs == 0) {
    for (EventSet* s : g_state.sets) delete s;
    g_state = State();
  }
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
      return "Reset required";
    case NVML_ERROR_IN_USE:
      return "In use by another client";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      return "Insufficient Resources";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetCount_v2", -1);
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned>(g_state.gpus.size());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetHandleByIndex_v2", static_cast<int>(index));
  if (!device || index >= g_state.gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = MakeHandle<nvmlDevice_t>(kDevice, static_cast<int>(index));
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetUUID", GpuIndex(device));
  const Decoded h = Decode(device);
  if (Gpu* g = DeviceOf(device)) return CopyString(g->uuid, uuid, length);
  if (Gpu* g = DeviceOf(device, kMigDevice)) {
    Gi* gi = GiOf(*g, h.gi);
    if (!gi) return NVML_ERROR_INVALID_ARGUMENT;
    return CopyString(MigUuid(*g, h.gi, h.ci), uuid, length);
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetName", GpuIndex(device));
  Gpu* g = DeviceOf(device);
  return g ? CopyString(g->name, name, length) : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetMemoryInfo", GpuIndex(device));
  Gpu* g = DeviceOf(device);
  if (!g || !memory) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned long long used = g->used_mib;
  for (const Proc& p : g->procs) used += p.used_mib;
  memory->total = g->memory_mib << 20;
  memory->used = std::min(used, g->memory_mib) << 20;
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetCudaComputeCapability", GpuIndex(device));
  Gpu* g = DeviceOf(device);
  if (!g || !major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
  *major = g->cc_major;
  *minor = g->cc_minor;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                  unsigned int* pending) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetMigMode", GpuIndex(device));
  Gpu* g = DeviceOf(device);
  if (!g || !current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->geo) return NVML_ERROR_NOT_SUPPORTED;
  *current = g->mig ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  *pending = g->mig_pending ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode,
                                  nvmlReturn_t* activationStatus) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceSetMigMode", GpuIndex(device));
  Gpu* g = DeviceOf(device);
  if (!g || !activationStatus) return NVML_ERROR_INVALID_ARGUMENT;
  if (mode != NVML_DEVICE_MIG_ENABLE && mode != NVML_DEVICE_MIG_DISABLE)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->geo) return NVML_ERROR_NOT_SUPPORTED;
  const bool want = mode == NVML_DEVICE_MIG_ENABLE;
  if (g->mig && !want && !g->gis.empty()) return NVML_ERROR_IN_USE;
  g->mig_pending = want;
  *activationStatus = NVML_SUCCESS;
  if (g->mig != want) {
    if (!g->procs.empty())
      *activationStatus = NVML_ERROR_IN_USE;
    else if (g->mig_change_pending)
      *activationStatus = g->mig_activation;
    else
      g->mig = want;
  }
  SaveState();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetMaxMigDeviceCount", GpuIndex(device));
  Gpu* g = DeviceOf(device);
  if (!g || !count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = g->geo && g->mig ? static_cast<unsigned>(g->geo->max_instances) : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t* mig) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetMigDeviceHandleByIndex", GpuIndex(device));
  Gpu* g = DeviceOf(device);
  if (!g || !mig || !g->mig) return NVML_ERROR_INVALID_ARGUMENT;
  std::vector<std::pair<unsigned, unsigned>> all;
  for (const Gi& gi : g->gis)
    for (const Ci& ci : gi.cis) all.emplace_back(gi.id, ci.id);
  std::sort(all.begin(), all.end());
  if (index >= all.size()) return NVML_ERROR_NOT_FOUND;
  *mig =
      MakeHandle<nvmlDevice_t>(kMigDevice, Decode(device).gpu, all[index].first, all[index].second);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetGpuInstanceId", GpuIndex(device));
  if (!DeviceOf(device, kMigDevice) || !id) return NVML_ERROR_INVALID_ARGUMENT;
  *id = Decode(device).gi;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetComputeInstanceId", GpuIndex(device));
  if (!DeviceOf(device, kMigDevice) || !id) return NVML_ERROR_INVALID_ARGUMENT;
  *id = Decode(device).ci;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t* info) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetGpuInstanceProfileInfo", GpuIndex(device));
  Gpu* g = DeviceOf(device);
  if (!g || !info) return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->geo || !g->mig) return NVML_ERROR_NOT_SUPPORTED;
  for (const tessera::MigProfile& p : g->geo->profiles) {
    if (GiProfileIndex(p) != profile) continue;
    const unsigned c = static_cast<unsigned>(p.compute_slices);
    const unsigned sms = g->cc_major >= 9 ? 16 : 14;
    *info = nvmlGpuInstanceProfileInfo_t{};
    info->id = static_cast<unsigned>(p.id);
    info->isP2pSupported = 0;
    info->sliceCount = c;
    info->instanceCount = static_cast<unsigned>(p.max_count);
    info->multiprocessorCount = sms * c;
    info->copyEngineCount = c;
    info->decoderCount =
        (c == 7 ? 5 : static_cast<unsigned>(p.memory_slices) / 2) + (p.media_extensions ? 1 : 0);
    info->encoderCount = 0;
    info->jpegCount = (c == 7 || p.media_extensions) ? 1 : 0;
    info->ofaCount = (c == 7 || p.media_extensions) ? 1 : 0;
    info->memorySizeMB = static_cast<unsigned long long>(p.memory_mib);
    return NVML_SUCCESS;
  }
  return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                       nvmlGpuInstance_t* out, unsigned int* count) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetGpuInstances", GpuIndex(device));
  Gpu* g = DeviceOf(device);
  if (!g || !count) return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->geo || !g->mig) return NVML_ERROR_NOT_SUPPORTED;
  std::vector<unsigned> ids;
  for (const Gi& gi : g->gis)
    if (g->geo->profiles[static_cast<size_t>(gi.profile)].id == static_cast<int>(profileId))
      ids.push_back(gi.id);
  if (ids.size() > *count) {
    *count = static_cast<unsigned>(ids.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (!ids.empty() && !out) return NVML_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; i < ids.size(); ++i)
    out[i] = MakeHandle<nvmlGpuInstance_t>(kGi, Decode(device).gpu, ids[i]);
  *count = static_cast<unsigned>(ids.size());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t* gi) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetGpuInstanceById", GpuIndex(device));
  Gpu* g = DeviceOf(device);
  if (!g || !gi) return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->mig) return NVML_ERROR_NOT_SUPPORTED;
  if (!GiOf(*g, id)) return NVML_ERROR_NOT_FOUND;
  *gi = MakeHandle<nvmlGpuInstance_t>(kGi, Decode(device).gpu, id);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t handle, nvmlGpuInstanceInfo_t* info) {
  FAKE_LOCK;
  auto [g, gi] = GiHandle(handle);
  FAKE_CHECK("nvmlGpuInstanceGetInfo", Decode(handle).gpu);
  if (!g || !gi || !info) return NVML_ERROR_INVALID_ARGUMENT;
  const tessera::MigProfile& p = g->geo->profiles[static_cast<size_t>(gi->profile)];
  info->device = MakeHandle<nvmlDevice_t>(kDevice, Decode(handle).gpu);
  info->id = gi->id;
  info->profileId = static_cast<unsigned>(p.id);
  info->placement = {static_cast<unsigned>(gi->start), static_cast<unsigned>(p.memory_slices)};
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                      const nvmlGpuInstancePlacement_t* placement,
                                                      nvmlGpuInstance_t* out) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceCreateGpuInstanceWithPlacement", GpuIndex(device));
  Gpu* g = DeviceOf(device);
  if (!g || !placement || !out) return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->geo || !g->mig) return NVML_ERROR_NOT_SUPPORTED;
  int idx = -1;
  for (size_t i = 0; i < g->geo->profiles.size(); ++i)
    if (g->geo->profiles[i].id == static_cast<int>(profileId)) idx = static_cast<int>(i);
  if (idx < 0) return NVML_ERROR_INVALID_ARGUMENT;
  const tessera::MigProfile& p = g->geo->profiles[static_cast<size_t>(idx)];
  const int start = static_cast<int>(placement->start);
  if (std::find(p.starts.begin(), p.starts.end(), start) == p.starts.end() ||
      placement->size != static_cast<unsigned>(p.memory_slices))
    return NVML_ERROR_INVALID_ARGUMENT;
  if (!tessera::CheckMigAdd(*g->geo, LayoutOf(*g), {idx, start}).ok())
    return NVML_ERROR_INSUFFICIENT_RESOURCES;
  Gi gi;
  gi.id = FreeGiId(*g);
  gi.profile = idx;
  gi.start = start;
  g->gis.push_back(gi);
  *out = MakeHandle<nvmlGpuInstance_t>(kGi, Decode(device).gpu, gi.id);
  SaveState();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t handle) {
  FAKE_LOCK;
  auto [g, gi] = GiHandle(handle);
  FAKE_CHECK("nvmlGpuInstanceDestroy", Decode(handle).gpu);
  if (!g || !gi) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gi->cis.empty() || GiHasProcs(*g, *gi)) return NVML_ERROR_IN_USE;
  const unsigned id = gi->id;
  g->gis.erase(
      std::remove_if(g->gis.begin(), g->gis.end(), [&](const Gi& x) { return x.id == id; }),
      g->gis.end());
  SaveState();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t handle,
                                                          unsigned int profile,
                                                          unsigned int engProfile,
                                                          nvmlComputeInstanceProfileInfo_t* info) {
  FAKE_LOCK;
  auto [g, gi] = GiHandle(handle);
  FAKE_CHECK("nvmlGpuInstanceGetComputeInstanceProfileInfo", Decode(handle).gpu);
  if (!g || !gi || !info || engProfile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
    return NVML_ERROR_INVALID_ARGUMENT;
  const int gi_slices = g->geo->profiles[static_cast<size_t>(gi->profile)].compute_slices;
  const int slices = CiSlices(profile);
  if (slices == 0 || slices > gi_slices || CiProfileIndex(slices) != profile)
    return NVML_ERROR_NOT_SUPPORTED;
  *info = nvmlComputeInstanceProfileInfo_t{};
  info->id = profile;
  info->sliceCount = static_cast<unsigned>(slices);
  info->instanceCount = static_cast<unsigned>(gi_slices / slices);
  info->multiprocessorCount = static_cast<unsigned>(slices) * (g->cc_major >= 9 ? 16 : 14);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t handle, unsigned int profileId,
                                                  nvmlComputeInstance_t* out) {
  FAKE_LOCK;
  auto [g, gi] = GiHandle(handle);
  FAKE_CHECK("nvmlGpuInstanceCreateComputeInstance", Decode(handle).gpu);
  if (!g || !gi || !out) return NVML_ERROR_INVALID_ARGUMENT;
  const int slices = CiSlices(profileId);
  int used = 0;
  for (const Ci& ci : gi->cis) used += ci.slices;
  if (slices == 0) return NVML_ERROR_INVALID_ARGUMENT;
  if (used + slices > g->geo->profiles[static_cast<size_t>(gi->profile)].compute_slices)
    return NVML_ERROR_INSUFFICIENT_RESOURCES;
  unsigned id = 0;
  for (bool taken = true; taken; ++id) {
    taken = false;
    for (const Ci& ci : gi->cis) taken = taken || ci.id == id;
    if (!taken) break;
  }
  gi->cis.push_back({id, slices, profileId});
  *out = MakeHandle<nvmlComputeInstance_t>(kCi, Decode(handle).gpu, gi->id, id);
  SaveState();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t handle, unsigned int id,
                                                   nvmlComputeInstance_t* out) {
  FAKE_LOCK;
  auto [g, gi] = GiHandle(handle);
  FAKE_CHECK("nvmlGpuInstanceGetComputeInstanceById", Decode(handle).gpu);
  if (!g || !gi || !out) return NVML_ERROR_INVALID_ARGUMENT;
  for (const Ci& ci : gi->cis)
    if (ci.id == id) {
      *out = MakeHandle<nvmlComputeInstance_t>(kCi, Decode(handle).gpu, gi->id, id);
      return NVML_SUCCESS;
    }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t handle) {
  FAKE_LOCK;
  const Decoded d = Decode(handle);
  FAKE_CHECK("nvmlComputeInstanceDestroy", d.gpu);
  if (d.kind != kCi || d.gpu >= static_cast<int>(g_state.gpus.size()))
    return NVML_ERROR_INVALID_ARGUMENT;
  Gpu& g = g_state.gpus[static_cast<size_t>(d.gpu)];
  Gi* gi = GiOf(g, d.gi);
  if (!gi) return NVML_ERROR_INVALID_ARGUMENT;
  auto it = std::find_if(gi->cis.begin(), gi->cis.end(), [&](const Ci& c) { return c.id == d.ci; });
  if (it == gi->cis.end()) return NVML_ERROR_INVALID_ARGUMENT;
  if (GiHasProcs(g, *gi)) return NVML_ERROR_IN_USE;
  gi->cis.erase(it);
  SaveState();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetComputeRunningProcesses_v3", GpuIndex(device));
  Gpu* g = DeviceOf(device);
  if (!g || !count) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->procs.size() > *count) {
    *count = static_cast<unsigned>(g->procs.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (!g->procs.empty() && !infos) return NVML_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; i < g->procs.size(); ++i) {
    const Proc& p = g->procs[i];
    nvmlProcessInfo_t& o = infos[i];
    o.pid = p.pid;
    o.usedGpuMemory = p.used_mib << 20;
    o.gpuInstanceId = o.computeInstanceId = NVML_INVALID_INSTANCE_ID;
    for (const Gi& gi : g->gis)
      if (!p.mig.empty() && Placement(*g, gi) == p.mig) {
        o.gpuInstanceId = gi.id;
        o.computeInstanceId = gi.cis.empty() ? 0 : gi.cis.front().id;
      }
  }
  *count = static_cast<unsigned>(g->procs.size());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return nvmlDeviceGetComputeRunningProcesses_v3(device, count, infos);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* util) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetUtilizationRates", GpuIndex(device));
  Gpu* g = DeviceOf(device);
  if (!g || !util) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->mig) return NVML_ERROR_NOT_SUPPORTED;
  util->gpu = g->util_gpu;
  util->memory = g->util_mem;
  return NVML_SUCCESS;
}

#ifndef TESSERA_FAKE_NVML_NO_PROCESS_UTILIZATION
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t* utilization,
                                             unsigned int* count, unsigned long long last_seen) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetProcessUtilization", GpuIndex(device));
  Gpu* g = DeviceOf(device);
  if (!g || !count) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->mig) return NVML_ERROR_NOT_SUPPORTED;
  std::vector<nvmlProcessUtilizationSample_t> fresh;
  for (const nvmlProcessUtilizationSample_t& x : g->proc_samples)
    if (x.timeStamp > last_seen) fresh.push_back(x);
  if (fresh.empty()) return NVML_ERROR_NOT_FOUND;
  if (!utilization || *count < fresh.size()) {
    *count = static_cast<unsigned>(fresh.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  std::copy(fresh.begin(), fresh.end(), utilization);
  *count = static_cast<unsigned>(fresh.size());
  return NVML_SUCCESS;
}
#endif

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
                                                 nvmlGpuTopologyLevel_t* level) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetTopologyCommonAncestor", GpuIndex(a));
  Gpu* ga = DeviceOf(a);
  Gpu* gb = DeviceOf(b);
  if (!ga || !gb || !level) return NVML_ERROR_INVALID_ARGUMENT;
  if (ga == gb)
    *level = NVML_TOPOLOGY_INTERNAL;
  else if (ga->pcie_switch == gb->pcie_switch)
    *level = NVML_TOPOLOGY_SINGLE;
  else if (ga->numa == gb->numa)
    *level = NVML_TOPOLOGY_NODE;
  else
    *level = NVML_TOPOLOGY_SYSTEM;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, nvmlGpuP2PCapsIndex_t index,
                                    nvmlGpuP2PStatus_t* status) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetP2PStatus", GpuIndex(a));
  if (!DeviceOf(a) || !DeviceOf(b) || !status) return NVML_ERROR_INVALID_ARGUMENT;
  *status = NVML_P2P_STATUS_NOT_SUPPORTED;
  if (index != NVML_P2P_CAPS_INDEX_NVLINK) return NVML_SUCCESS;
  const int ia = Decode(a).gpu, ib = Decode(b).gpu;
  for (const auto& group : g_state.nvlink_groups)
    if (std::find(group.begin(), group.end(), ia) != group.end() &&
        std::find(group.begin(), group.end(), ib) != group.end())
      *status = NVML_P2P_STATUS_OK;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int* node) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetNumaNodeId", GpuIndex(device));
  Gpu* g = DeviceOf(device);
  if (!g || !node) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->numa < 0) return NVML_ERROR_NOT_SUPPORTED;
  *node = static_cast<unsigned>(g->numa);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceGetPciInfo_v3", GpuIndex(device));
  Gpu* g = DeviceOf(device);
  if (!g || !pci) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->pci_bus_id.empty()) return NVML_ERROR_NOT_SUPPORTED;
  *pci = nvmlPciInfo_t{};
  std::snprintf(pci->busId, sizeof(pci->busId), "%s", g->pci_bus_id.c_str());
  std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%s", g->pci_bus_id.c_str());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlEventSetCreate", -1);
  if (!set) return NVML_ERROR_INVALID_ARGUMENT;
  auto* s = new EventSet();
  g_state.sets.insert(s);
  *set = reinterpret_cast<nvmlEventSet_t>(s);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                      nvmlEventSet_t set) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlDeviceRegisterEvents", GpuIndex(device));
  auto* s = reinterpret_cast<EventSet*>(set);
  Gpu* g = DeviceOf(device);
  if (!g || !g_state.sets.count(s)) return NVML_ERROR_INVALID_ARGUMENT;
  if (!(types & nvmlEventTypeXidCriticalError)) return NVML_SUCCESS;
  for (unsigned long long xid : g->xids) {
    nvmlEventData_t e{};
    e.device = device;
    e.eventType = nvmlEventTypeXidCriticalError;
    e.eventData = xid;
    e.gpuInstanceId = e.computeInstanceId = NVML_INVALID_INSTANCE_ID;
    s->pending.push_back(e);
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int) {
  FAKE_LOCK;
  FAKE_CHECK("nvmlEventSetWait_v2", -1);
  auto* s = reinterpret_cast<EventSet*>(set);
  if (!g_state.sets.count(s) || !data) return NVML_ERROR_INVALID_ARGUMENT;
  if (s->pending.empty()) return NVML_ERROR_TIMEOUT;
  *data = s->pending.front();
  s->pending.erase(s->pending.begin());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  FAKE_LOCK;
  auto* s = reinterpret_cast<EventSet*>(set);
  if (!g_state.sets.count(s)) return NVML_ERROR_INVALID_ARGUMENT;
  g_state.sets.erase(s);
  delete s;
  return NVML_SUCCESS;
}

}  // extern "C"
