#include "agent/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>

#include "agent/nvml_api.h"

namespace tessera::agent {
namespace {

// X(name, required)
#define TESSERA_NVML_FUNCTIONS(X)                       \
  X(nvmlInit_v2, true)                                  \
  X(nvmlShutdown, true)                                 \
  X(nvmlErrorString, true)                              \
  X(nvmlDeviceGetCount_v2, true)                        \
  X(nvmlDeviceGetHandleByIndex_v2, true)                \
  X(nvmlDeviceGetUUID, true)                            \
  X(nvmlDeviceGetName, true)                            \
  X(nvmlDeviceGetMemoryInfo, true)                      \
  X(nvmlDeviceGetCudaComputeCapability, true)           \
  X(nvmlDeviceGetMigMode, true)                         \
  X(nvmlDeviceGetMaxMigDeviceCount, true)               \
  X(nvmlDeviceGetMigDeviceHandleByIndex, true)          \
  X(nvmlDeviceGetGpuInstanceId, true)                   \
  X(nvmlDeviceGetComputeInstanceId, true)               \
  X(nvmlDeviceGetGpuInstanceProfileInfo, true)          \
  X(nvmlDeviceGetGpuInstances, true)                    \
  X(nvmlDeviceGetGpuInstanceById, true)                 \
  X(nvmlGpuInstanceGetInfo, true)                       \
  X(nvmlDeviceCreateGpuInstanceWithPlacement, true)     \
  X(nvmlGpuInstanceDestroy, true)                       \
  X(nvmlGpuInstanceGetComputeInstanceProfileInfo, true) \
  X(nvmlGpuInstanceCreateComputeInstance, true)         \
  X(nvmlGpuInstanceGetComputeInstanceById, true)        \
  X(nvmlComputeInstanceDestroy, true)                   \
  X(nvmlDeviceSetMigMode, false)                        \
  X(nvmlDeviceGetComputeRunningProcesses_v3, false)     \
  X(nvmlDeviceGetComputeRunningProcesses_v2, false)     \
  X(nvmlDeviceGetUtilizationRates, true)                \
  X(nvmlDeviceGetProcessUtilization, false)             \
  X(nvmlDeviceGetTopologyCommonAncestor, true)          \
  X(nvmlDeviceGetP2PStatus, true)                       \
  X(nvmlDeviceGetNumaNodeId, false)                     \
  X(nvmlDeviceGetPciInfo_v3, false)                     \
  X(nvmlEventSetCreate, true)                           \
  X(nvmlDeviceRegisterEvents, true)                     \
  X(nvmlEventSetWait_v2, true)                          \
  X(nvmlEventSetFree, true)

struct Api {
#define TESSERA_NVML_FIELD(name, required) decltype(&::name) name = nullptr;
  TESSERA_NVML_FUNCTIONS(TESSERA_NVML_FIELD)
#undef TESSERA_NVML_FIELD
};

std::string Gpu(int gpu) {
  return "gpu " + std::to_string(gpu);
}

class NvmlBackend final : public GpuBackend {
 public:
  NvmlBackend(void* handle, Api api) : handle_(handle), api_(api) {}
  ~NvmlBackend() override {
    if (events_) api_.nvmlEventSetFree(events_);
    api_.nvmlShutdown();
    dlclose(handle_);
  }

  Result<int> DeviceCount() override {
    unsigned int n = 0;
    if (auto r = api_.nvmlDeviceGetCount_v2(&n); r != NVML_SUCCESS)
      return Fail("nvmlDeviceGetCount_v2", "", r);
    return static_cast<int>(n);
  }

  Result<std::string> Uuid(int gpu) override {
    auto d = Device(gpu);
    if (!d.ok()) return d.status();
    return UuidOf(*d, Gpu(gpu));
  }

  Result<std::string> Name(int gpu) override {
    auto d = Device(gpu);
    if (!d.ok()) return d.status();
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (auto r = api_.nvmlDeviceGetName(*d, buf, sizeof(buf)); r != NVML_SUCCESS)
      return Fail("nvmlDeviceGetName", Gpu(gpu), r);
    return std::string(buf, strnlen(buf, sizeof(buf)));
  }

  Result<GpuMemory> Memory(int gpu) override {
    auto d = Device(gpu);
    if (!d.ok()) return d.status();
    nvmlMemory_t m{};
    if (auto r = api_.nvmlDeviceGetMemoryInfo(*d, &m); r != NVML_SUCCESS)
      return Fail("nvmlDeviceGetMemoryInfo", Gpu(gpu), r);
    return GpuMemory{static_cast<int64_t>(m.total >> 20), static_cast<int64_t>(m.used >> 20)};
  }

  Result<std::optional<std::pair<int, int>>> ComputeCapability(int gpu) override {
    auto d = Device(gpu);
    if (!d.ok()) return d.status();
    int major = 0, minor = 0;
    auto r = api_.nvmlDeviceGetCudaComputeCapability(*d, &major, &minor);
    if (r == NVML_ERROR_NOT_SUPPORTED) return std::optional<std::pair<int, int>>();
    if (r != NVML_SUCCESS) return Fail("nvmlDeviceGetCudaComputeCapability", Gpu(gpu), r);
    return std::optional<std::pair<int, int>>(std::pair(major, minor));
  }

  Result<std::optional<bool>> MigEnabled(int gpu) override {
    auto d = Device(gpu);
    if (!d.ok()) return d.status();
    unsigned int current = 0, pending = 0;
    auto r = api_.nvmlDeviceGetMigMode(*d, &current, &pending);
    if (r == NVML_ERROR_NOT_SUPPORTED) return std::optional<bool>();
    if (r != NVML_SUCCESS) return Fail("nvmlDeviceGetMigMode", Gpu(gpu), r);
    return std::optional<bool>(current == NVML_DEVICE_MIG_ENABLE);
  }

  Result<std::optional<MigModeState>> MigMode(int gpu) override {
    auto d = Device(gpu);
    if (!d.ok()) return d.status();
    unsigned int current = 0, pending = 0;
    auto r = api_.nvmlDeviceGetMigMode(*d, &current, &pending);
    if (r == NVML_ERROR_NOT_SUPPORTED) return std::optional<MigModeState>();
    if (r != NVML_SUCCESS) return Fail("nvmlDeviceGetMigMode", Gpu(gpu), r);
    return std::optional<MigModeState>(
        MigModeState{current == NVML_DEVICE_MIG_ENABLE, pending == NVML_DEVICE_MIG_ENABLE});
  }

  Result<std::vector<GiProfileInfo>> GiProfiles(int gpu) override {
    auto d = Device(gpu);
    if (!d.ok()) return d.status();
    std::vector<GiProfileInfo> out;
    for (unsigned int p = 0; p < NVML_GPU_INSTANCE_PROFILE_COUNT; ++p) {
      nvmlGpuInstanceProfileInfo_t info{};
      auto r = api_.nvmlDeviceGetGpuInstanceProfileInfo(*d, p, &info);
      if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_INVALID_ARGUMENT) continue;
      if (r != NVML_SUCCESS) return Fail("nvmlDeviceGetGpuInstanceProfileInfo", Gpu(gpu), r);
      GiProfileInfo g;
      g.id = static_cast<int>(info.id);
      g.slices = static_cast<int>(info.sliceCount);
      g.instance_count = static_cast<int>(info.instanceCount);
      g.multiprocessors = static_cast<int>(info.multiprocessorCount);
      g.copy_engines = static_cast<int>(info.copyEngineCount);
      g.decoders = static_cast<int>(info.decoderCount);
      g.encoders = static_cast<int>(info.encoderCount);
      g.jpegs = static_cast<int>(info.jpegCount);
      g.ofas = static_cast<int>(info.ofaCount);
      g.memory_mib = static_cast<int64_t>(info.memorySizeMB);
      out.push_back(g);
    }
    return out;
  }

  Result<std::vector<GiInfo>> GpuInstances(int gpu) override {
    auto d = Device(gpu);
    if (!d.ok()) return d.status();
    auto profiles = GiProfiles(gpu);
    if (!profiles.ok()) return profiles.status();
    std::vector<GiInfo> out;
    for (const GiProfileInfo& p : *profiles) {
      std::vector<nvmlGpuInstance_t> gis(static_cast<size_t>(std::max(p.instance_count, 1)));
      unsigned int count = static_cast<unsigned int>(gis.size());
      auto r =
          api_.nvmlDeviceGetGpuInstances(*d, static_cast<unsigned int>(p.id), gis.data(), &count);
      if (r != NVML_SUCCESS) return Fail("nvmlDeviceGetGpuInstances", Gpu(gpu), r);
      for (unsigned int i = 0; i < count && i < gis.size(); ++i) {
        nvmlGpuInstanceInfo_t info{};
        if (auto r2 = api_.nvmlGpuInstanceGetInfo(gis[i], &info); r2 != NVML_SUCCESS)
          return Fail("nvmlGpuInstanceGetInfo", Gpu(gpu), r2);
        out.push_back({static_cast<int>(info.id), static_cast<int>(info.profileId),
                       static_cast<int>(info.placement.start),
                       static_cast<int>(info.placement.size)});
      }
    }
    std::sort(out.begin(), out.end(),
              [](const GiInfo& a, const GiInfo& b) { return a.start < b.start; });
    return out;
  }

  Result<std::vector<MigDeviceInfo>> MigDevices(int gpu) override {
    auto d = Device(gpu);
    if (!d.ok()) return d.status();
    const std::string where = Gpu(gpu);
    unsigned int max = 0;
    if (auto r = api_.nvmlDeviceGetMaxMigDeviceCount(*d, &max); r != NVML_SUCCESS)
      return Fail("nvmlDeviceGetMaxMigDeviceCount", where, r);
    std::vector<MigDeviceInfo> out;
    for (unsigned int i = 0; i < max; ++i) {
      nvmlDevice_t mig = nullptr;
      auto r = api_.nvmlDeviceGetMigDeviceHandleByIndex(*d, i, &mig);
      if (r == NVML_ERROR_NOT_FOUND) continue;
      const std::string mwhere = where + " MIG device " + std::to_string(i);
      if (r != NVML_SUCCESS) return Fail("nvmlDeviceGetMigDeviceHandleByIndex", mwhere, r);
      unsigned int gi = 0, ci = 0;
      if (auto r2 = api_.nvmlDeviceGetGpuInstanceId(mig, &gi); r2 != NVML_SUCCESS)
        return Fail("nvmlDeviceGetGpuInstanceId", mwhere, r2);
      if (auto r2 = api_.nvmlDeviceGetComputeInstanceId(mig, &ci); r2 != NVML_SUCCESS)
        return Fail("nvmlDeviceGetComputeInstanceId", mwhere, r2);
      auto uuid = UuidOf(mig, mwhere);
      if (!uuid.ok()) return uuid.status();
      out.push_back({static_cast<int>(gi), static_cast<int>(ci), *uuid});
    }
    std::sort(out.begin(), out.end(), [](const MigDeviceInfo& a, const MigDeviceInfo& b) {
      return std::pair(a.gi_id, a.ci_id) < std::pair(b.gi_id, b.ci_id);
    });
    return out;
  }

  Result<std::vector<ProcessInfo>> Processes(int gpu) override {
    auto d = Device(gpu);
    if (!d.ok()) return d.status();
    auto fn = api_.nvmlDeviceGetComputeRunningProcesses_v3
                  ? api_.nvmlDeviceGetComputeRunningProcesses_v3
                  : api_.nvmlDeviceGetComputeRunningProcesses_v2;
    const char* name = api_.nvmlDeviceGetComputeRunningProcesses_v3
                           ? "nvmlDeviceGetComputeRunningProcesses_v3"
                           : "nvmlDeviceGetComputeRunningProcesses_v2";
    std::vector<nvmlProcessInfo_t> buf(64);
    for (int attempt = 0;; ++attempt) {
      unsigned int count = static_cast<unsigned int>(buf.size());
      auto r = fn(*d, &count, buf.data());
      if (r == NVML_ERROR_INSUFFICIENT_SIZE && attempt < 4) {
        buf.resize(std::max<size_t>(count, buf.size()) * 2);
        continue;
      }
      if (r != NVML_SUCCESS) return Fail(name, Gpu(gpu), r);
      std::vector<ProcessInfo> out;
      for (unsigned int i = 0; i < count && i < buf.size(); ++i) {
        const nvmlProcessInfo_t& p = buf[i];
        ProcessInfo q;
        q.pid = p.pid;
        q.used_mib = static_cast<int64_t>(p.usedGpuMemory >> 20);
        q.gi_id =
            p.gpuInstanceId == NVML_INVALID_INSTANCE_ID ? -1 : static_cast<int>(p.gpuInstanceId);
        q.ci_id = p.computeInstanceId == NVML_INVALID_INSTANCE_ID
                      ? -1
                      : static_cast<int>(p.computeInstanceId);
        out.push_back(q);
      }
      return out;
    }
  }

  Result<std::optional<GpuUtilization>> Utilization(int gpu) override {
    auto d = Device(gpu);
    if (!d.ok()) return d.status();
    nvmlUtilization_t u{};
    auto r = api_.nvmlDeviceGetUtilizationRates(*d, &u);
    if (r == NVML_ERROR_NOT_SUPPORTED) return std::optional<GpuUtilization>();
    if (r != NVML_SUCCESS) return Fail("nvmlDeviceGetUtilizationRates", Gpu(gpu), r);
    return std::optional<GpuUtilization>(
        GpuUtilization{static_cast<int>(u.gpu), static_cast<int>(u.memory)});
  }

  Result<std::optional<std::vector<ProcessSmSample>>> ProcessSmUtilization(
      int gpu, uint64_t last_seen_us) override {
    using Out = std::optional<std::vector<ProcessSmSample>>;
    if (!api_.nvmlDeviceGetProcessUtilization) return Out();
    auto d = Device(gpu);
    if (!d.ok()) return d.status();
    std::vector<nvmlProcessUtilizationSample_t> buf;
    for (int attempt = 0; attempt < 4; ++attempt) {
      unsigned int n = static_cast<unsigned int>(buf.size());
      auto r = api_.nvmlDeviceGetProcessUtilization(*d, buf.empty() ? nullptr : buf.data(), &n,
                                                    last_seen_us);
      if (r == NVML_ERROR_NOT_SUPPORTED) return Out();
      if (r == NVML_ERROR_NOT_FOUND) return Out(std::vector<ProcessSmSample>());
      if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
        buf.resize(std::max<size_t>(n, buf.size() + 1));
        continue;
      }
      if (r != NVML_SUCCESS) return Fail("nvmlDeviceGetProcessUtilization", Gpu(gpu), r);
      std::vector<ProcessSmSample> out;
      for (unsigned int i = 0; i < std::min<size_t>(n, buf.size()); ++i)
        out.push_back({buf[i].pid, buf[i].timeStamp, static_cast<int>(buf[i].smUtil)});
      return Out(std::move(out));
    }
    return Fail("nvmlDeviceGetProcessUtilization", Gpu(gpu), NVML_ERROR_INSUFFICIENT_SIZE);
  }

  Result<GpuLink> Link(int a, int b) override {
    if (a == b) return GpuLink::kSelf;
    auto da = Device(a);
    if (!da.ok()) return da.status();
    auto db = Device(b);
    if (!db.ok()) return db.status();
    const std::string where = "gpus " + std::to_string(a) + "," + std::to_string(b);
    nvmlGpuP2PStatus_t p2p = NVML_P2P_STATUS_UNKNOWN;
    auto r = api_.nvmlDeviceGetP2PStatus(*da, *db, NVML_P2P_CAPS_INDEX_NVLINK, &p2p);
    if (r != NVML_SUCCESS && r != NVML_ERROR_NOT_SUPPORTED)
      return Fail("nvmlDeviceGetP2PStatus", where, r);
    if (r == NVML_SUCCESS && p2p == NVML_P2P_STATUS_OK) return GpuLink::kNvLink;
    nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_SYSTEM;
    if (auto r2 = api_.nvmlDeviceGetTopologyCommonAncestor(*da, *db, &level); r2 != NVML_SUCCESS)
      return Fail("nvmlDeviceGetTopologyCommonAncestor", where, r2);
    switch (level) {
      case NVML_TOPOLOGY_INTERNAL:
        return GpuLink::kSelf;
      case NVML_TOPOLOGY_SINGLE:
        return GpuLink::kPcieSwitch;
      case NVML_TOPOLOGY_MULTIPLE:
        return GpuLink::kPcieMulti;
      case NVML_TOPOLOGY_HOSTBRIDGE:
        return GpuLink::kHostBridge;
      case NVML_TOPOLOGY_NODE:
        return GpuLink::kNumaNode;
      default:
        return GpuLink::kSystem;
    }
  }

  Result<std::optional<int>> NumaNode(int gpu) override {
    auto d = Device(gpu);
    if (!d.ok()) return d.status();
    if (!api_.nvmlDeviceGetNumaNodeId) return std::optional<int>();
    unsigned int node = 0;
    auto r = api_.nvmlDeviceGetNumaNodeId(*d, &node);
    if (r == NVML_ERROR_NOT_SUPPORTED) return std::optional<int>();
    if (r != NVML_SUCCESS) return Fail("nvmlDeviceGetNumaNodeId", Gpu(gpu), r);
    return std::optional<int>(static_cast<int>(node));
  }

  Result<std::string> PciBusId(int gpu) override {
    auto d = Device(gpu);
    if (!d.ok()) return d.status();
    if (!api_.nvmlDeviceGetPciInfo_v3) return std::string();
    nvmlPciInfo_t pci{};
    auto r = api_.nvmlDeviceGetPciInfo_v3(*d, &pci);
    if (r == NVML_ERROR_NOT_SUPPORTED) return std::string();
    if (r != NVML_SUCCESS) return Fail("nvmlDeviceGetPciInfo_v3", Gpu(gpu), r);
    pci.busId[sizeof(pci.busId) - 1] = '\0';
    return std::string(pci.busId);
  }

  Result<int> CreateGpuInstance(int gpu, int profile_id, int start, int size) override {
    auto d = Device(gpu);
    if (!d.ok()) return d.status();
    std::optional<GiProfileInfo> profile;
    auto profiles = GiProfiles(gpu);
    if (!profiles.ok()) return profiles.status();
    for (const auto& p : *profiles)
      if (p.id == profile_id) profile = p;
    const std::string where =
        Gpu(gpu) + " profile " + std::to_string(profile_id) + " at " + std::to_string(start);
    if (!profile) return InvalidArgument(where + ": the GPU offers no such GPU-instance profile");
    nvmlGpuInstancePlacement_t placement{static_cast<unsigned int>(start),
                                         static_cast<unsigned int>(size)};
    nvmlGpuInstance_t gi = nullptr;
    if (auto r = api_.nvmlDeviceCreateGpuInstanceWithPlacement(
            *d, static_cast<unsigned int>(profile_id), &placement, &gi);
        r != NVML_SUCCESS)
      return Fail("nvmlDeviceCreateGpuInstanceWithPlacement", where, r);
    nvmlGpuInstanceInfo_t info{};
    if (auto r = api_.nvmlGpuInstanceGetInfo(gi, &info); r != NVML_SUCCESS)
      return Fail("nvmlGpuInstanceGetInfo", where, r);
    return static_cast<int>(info.id);
  }

  Status DestroyGpuInstance(int gpu, int gi_id) override {
    auto gi = Gi(gpu, gi_id);
    if (!gi.ok()) return gi.status();
    if (auto r = api_.nvmlGpuInstanceDestroy(*gi); r != NVML_SUCCESS)
      return Fail("nvmlGpuInstanceDestroy", GiWhere(gpu, gi_id), r);
    return Status::Ok();
  }

  Result<int> CreateComputeInstance(int gpu, int gi_id) override {
    auto gi = Gi(gpu, gi_id);
    if (!gi.ok()) return gi.status();
    const std::string where = GiWhere(gpu, gi_id);
    // The largest compute-instance profile the GPU instance offers covers all of it.
    std::optional<nvmlComputeInstanceProfileInfo_t> best;
    for (unsigned int p = NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE;
         p <= NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE; ++p) {
      nvmlComputeInstanceProfileInfo_t info{};
      auto r = api_.nvmlGpuInstanceGetComputeInstanceProfileInfo(
          *gi, p, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info);
      if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_INVALID_ARGUMENT) continue;
      if (r != NVML_SUCCESS) return Fail("nvmlGpuInstanceGetComputeInstanceProfileInfo", where, r);
      if (!best || info.sliceCount > best->sliceCount) best = info;
    }
    if (!best) return Internal(where + ": no compute-instance profile offered");
    nvmlComputeInstance_t ci = nullptr;
    if (auto r = api_.nvmlGpuInstanceCreateComputeInstance(*gi, best->id, &ci); r != NVML_SUCCESS)
      return Fail("nvmlGpuInstanceCreateComputeInstance", where, r);
    // Tessera makes one compute instance per GPU instance: its MIG device names the CI id.
    auto devs = MigDevices(gpu);
    if (!devs.ok()) return devs.status();
    for (const auto& m : *devs)
      if (m.gi_id == gi_id) return m.ci_id;
    return 0;
  }

  Status DestroyComputeInstance(int gpu, int gi_id, int ci_id) override {
    auto gi = Gi(gpu, gi_id);
    if (!gi.ok()) return gi.status();
    const std::string where = GiWhere(gpu, gi_id) + " CI " + std::to_string(ci_id);
    nvmlComputeInstance_t ci = nullptr;
    if (auto r =
            api_.nvmlGpuInstanceGetComputeInstanceById(*gi, static_cast<unsigned int>(ci_id), &ci);
        r != NVML_SUCCESS)
      return Fail("nvmlGpuInstanceGetComputeInstanceById", where, r);
    if (auto r = api_.nvmlComputeInstanceDestroy(ci); r != NVML_SUCCESS)
      return Fail("nvmlComputeInstanceDestroy", where, r);
    return Status::Ok();
  }

  Result<MigModeChange> SetMigMode(int gpu, bool enabled) override {
    if (!api_.nvmlDeviceSetMigMode)
      return Unavailable(std::string(kNvmlLibrary) +
                         ": missing NVML function nvmlDeviceSetMigMode (driver too old?)");
    auto d = Device(gpu);
    if (!d.ok()) return d.status();
    nvmlReturn_t activation = NVML_SUCCESS;
    if (auto r = api_.nvmlDeviceSetMigMode(
            *d, enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE, &activation);
        r != NVML_SUCCESS)
      return Fail("nvmlDeviceSetMigMode", Gpu(gpu), r);
    auto mode = MigMode(gpu);
    if (!mode.ok()) return mode.status();
    MigModeChange out;
    out.active = mode->has_value() && (*mode)->current == enabled;
    if (!out.active) {
      const char* msg = activation == NVML_SUCCESS ? nullptr : api_.nvmlErrorString(activation);
      out.activation = msg ? msg : "error " + std::to_string(static_cast<int>(activation));
    }
    return out;
  }

  Status WatchXids() override {
    if (events_) return Status::Ok();
    auto n = DeviceCount();
    if (!n.ok()) return n.status();
    nvmlEventSet_t set = nullptr;
    if (auto r = api_.nvmlEventSetCreate(&set); r != NVML_SUCCESS)
      return Fail("nvmlEventSetCreate", "", r);
    for (int i = 0; i < *n; ++i) {
      auto d = Device(i);
      Status st = d.status();
      if (d.ok()) {
        auto r = api_.nvmlDeviceRegisterEvents(*d, nvmlEventTypeXidCriticalError, set);
        // A GPU without XID events (NOT_SUPPORTED) is watched by nothing; others must register.
        if (r != NVML_SUCCESS && r != NVML_ERROR_NOT_SUPPORTED)
          st = Fail("nvmlDeviceRegisterEvents", Gpu(i), r);
      }
      if (!st.ok()) {
        api_.nvmlEventSetFree(set);
        return st;
      }
    }
    events_ = set;
    return Status::Ok();
  }

  Result<std::optional<XidEvent>> NextXid(int timeout_ms) override {
    if (!events_) return FailedPrecondition("NextXid before WatchXids");
    nvmlEventData_t data{};
    auto r = api_.nvmlEventSetWait_v2(events_, &data,
                                      static_cast<unsigned int>(std::max(timeout_ms, 0)));
    if (r == NVML_ERROR_TIMEOUT) return std::optional<XidEvent>();
    if (r != NVML_SUCCESS) return Fail("nvmlEventSetWait_v2", "", r);
    XidEvent e;
    e.gpu = -1;
    auto n = DeviceCount();
    if (!n.ok()) return n.status();
    for (int i = 0; i < *n; ++i) {
      auto d = Device(i);
      if (d.ok() && *d == data.device) e.gpu = i;
    }
    e.xid = data.eventData;
    e.gi_id =
        data.gpuInstanceId == NVML_INVALID_INSTANCE_ID ? -1 : static_cast<int>(data.gpuInstanceId);
    e.ci_id = data.computeInstanceId == NVML_INVALID_INSTANCE_ID
                  ? -1
                  : static_cast<int>(data.computeInstanceId);
    return std::optional<XidEvent>(e);
  }

 private:
  Status Fail(const char* fn, const std::string& where, nvmlReturn_t r) {
    const char* msg = api_.nvmlErrorString(r);
    std::string text = std::string(fn) + (where.empty() ? "" : "(" + where + ")") + ": " +
                       (msg ? msg : "error " + std::to_string(static_cast<int>(r)));
    switch (r) {
      case NVML_ERROR_INVALID_ARGUMENT:
        return InvalidArgument(std::move(text));
      case NVML_ERROR_NOT_FOUND:
      case NVML_ERROR_GPU_NOT_FOUND:
        return NotFound(std::move(text));
      case NVML_ERROR_IN_USE:
        return FailedPrecondition(std::move(text));
      case NVML_ERROR_INSUFFICIENT_RESOURCES:
        return ResourceExhausted(std::move(text));
      case NVML_ERROR_NO_PERMISSION:
        return PermissionDenied(std::move(text));
      case NVML_ERROR_DRIVER_NOT_LOADED:
      case NVML_ERROR_GPU_IS_LOST:
      case NVML_ERROR_TIMEOUT:
        return Unavailable(std::move(text));
      default:
        return Internal(std::move(text));
    }
  }

  Result<nvmlDevice_t> Device(int gpu) {
    nvmlDevice_t d = nullptr;
    if (gpu < 0) return InvalidArgument("no GPU index " + std::to_string(gpu));
    if (auto r = api_.nvmlDeviceGetHandleByIndex_v2(static_cast<unsigned int>(gpu), &d);
        r != NVML_SUCCESS)
      return Fail("nvmlDeviceGetHandleByIndex_v2", Gpu(gpu), r);
    return d;
  }

  Result<std::string> UuidOf(nvmlDevice_t d, const std::string& where) {
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (auto r = api_.nvmlDeviceGetUUID(d, buf, sizeof(buf)); r != NVML_SUCCESS)
      return Fail("nvmlDeviceGetUUID", where, r);
    return std::string(buf, strnlen(buf, sizeof(buf)));
  }

  static std::string GiWhere(int gpu, int gi_id) {
    return Gpu(gpu) + " GI " + std::to_string(gi_id);
  }

  Result<nvmlGpuInstance_t> Gi(int gpu, int gi_id) {
    auto d = Device(gpu);
    if (!d.ok()) return d.status();
    nvmlGpuInstance_t gi = nullptr;
    if (auto r = api_.nvmlDeviceGetGpuInstanceById(*d, static_cast<unsigned int>(gi_id), &gi);
        r != NVML_SUCCESS)
      return Fail("nvmlDeviceGetGpuInstanceById", GiWhere(gpu, gi_id), r);
    return gi;
  }

  void* handle_;
  Api api_;
  nvmlEventSet_t events_ = nullptr;
};

}  // namespace

const char* GpuLinkName(GpuLink link) {
  switch (link) {
    case GpuLink::kSelf:
      return "X";
    case GpuLink::kNvLink:
      return "NV";
    case GpuLink::kPcieSwitch:
      return "PIX";
    case GpuLink::kPcieMulti:
      return "PXB";
    case GpuLink::kHostBridge:
      return "PHB";
    case GpuLink::kNumaNode:
      return "NODE";
    case GpuLink::kSystem:
      return "SYS";
  }
  return "?";
}

Result<std::unique_ptr<GpuBackend>> OpenNvml(const std::string& library) {
  dlerror();
  // RTLD_NODELETE: the library stays mapped after dlclose. NVML keeps process-wide state, an
  // agent opens it once, and objects the library allocated stay reachable.
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) {
    const char* err = dlerror();
    return Unavailable(library + " not found: is the NVIDIA driver installed? (dlopen: " +
                       (err ? err : "unknown error") + ")");
  }
  Api api;
  std::string missing;
#define TESSERA_NVML_RESOLVE(name, required)                            \
  api.name = reinterpret_cast<decltype(&::name)>(dlsym(handle, #name)); \
  if (!api.name && (required) && missing.empty()) missing = #name;
  TESSERA_NVML_FUNCTIONS(TESSERA_NVML_RESOLVE)
#undef TESSERA_NVML_RESOLVE
  if (missing.empty() && !api.nvmlDeviceGetComputeRunningProcesses_v3 &&
      !api.nvmlDeviceGetComputeRunningProcesses_v2)
    missing = "nvmlDeviceGetComputeRunningProcesses_v3";
  if (!missing.empty()) {
    dlclose(handle);
    return Unavailable(library + ": missing NVML function " + missing + " (driver too old?)");
  }
  nvmlReturn_t r = api.nvmlInit_v2();
  if (r != NVML_SUCCESS) {
    const char* msg = api.nvmlErrorString(r);
    std::string text = msg ? msg : "error " + std::to_string(static_cast<int>(r));
    dlclose(handle);
    if (r == NVML_ERROR_DRIVER_NOT_LOADED)
      return Unavailable("NVIDIA driver not loaded (nvmlInit_v2: " + text + ")");
    return Unavailable("nvmlInit_v2 failed: " + text);
  }
  return std::unique_ptr<GpuBackend>(new NvmlBackend(handle, api));
}

}  // namespace tessera::agent
