#include "agent/allocate.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

namespace tessera::agent {
namespace {

// "1g.10gb+me" -> "1g.10gb.me" (the resource-name form).
std::string ProfileResourceForm(std::string profile) {
  if (auto plus = profile.find('+'); plus != std::string::npos) profile[plus] = '.';
  return profile;
}

// Infix of a virtual device ID: "<GPU UUID><infix><NN>".
const char* VirtualInfix(PluginResourceKind kind) {
  return kind == PluginResourceKind::kCompute ? "-pct-" : "-slot-";
}

bool IsVirtual(PluginResourceKind kind) {
  return kind == PluginResourceKind::kCompute || kind == PluginResourceKind::kSlice;
}

std::string VirtualDeviceId(const std::string& gpu_uuid, PluginResourceKind kind, int k) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%02d", k);
  return gpu_uuid + VirtualInfix(kind) + buf;
}

const MigInstanceState* FindInstance(const GpuState& gpu, const std::string& placement) {
  for (const MigInstanceState& mi : gpu.mig_instances)
    if (mi.placement() == placement) return &mi;
  return nullptr;
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const std::string& s : v) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

constexpr const char* kSpecPrefix = "tessera.io-gpu-";

// The CDI device name of one allocation: "<pod uid>-<container>-<resource without domain>".
std::string AllocationDeviceName(const std::string& uid, const std::string& container,
                                 const std::string& resource) {
  return CdiDeviceName(uid + "-" + container + "-" + resource.substr(resource.find('/') + 1));
}

std::string PodName(const BoundPod& p) {
  return p.ns + "/" + p.name;
}

// The device (GPU or MIG device) UUIDs the assignment gives the container.
Result<std::vector<std::string>> AssignedDevices(const kube::Assignment& a,
                                                 const NodeGpuState& state,
                                                 const PluginResource& resource,
                                                 const std::vector<std::string>& device_ids) {
  const int n = static_cast<int>(state.gpus.size());
  for (size_t i = 0; i < a.gpus.size(); ++i) {
    const int g = a.gpus[i];
    if (g < 0 || g >= n)
      return InvalidArgument("assignment names GPU " + std::to_string(g) + ", but this node has " +
                             std::to_string(n) + " GPU" + (n == 1 ? "" : "s"));
    if (i < a.uuids.size() && a.uuids[i] != state.gpus[g].uuid)
      return InvalidArgument("assignment names GPU " + std::to_string(g) + " as " + a.uuids[i] +
                             ", but GPU " + std::to_string(g) + " of this node is " +
                             state.gpus[g].uuid);
  }
  const bool mig = a.kind == kube::AssignmentKind::kMig || a.kind == kube::AssignmentKind::kMigMps;
  if (!mig) {
    if (a.gpus.empty()) return InvalidArgument("assignment names no GPU");
    std::vector<std::string> out;
    for (int g : a.gpus) out.push_back(state.gpus[g].uuid);
    return out;
  }
  const bool bare = a.mig_instance.find('@') == std::string::npos;
  if (bare || a.gpus.empty()) {
    // The scheduler left the instance to the node: take the kubelet's MIG device.
    if (resource.kind == PluginResourceKind::kMig && device_ids.size() == 1 &&
        (a.mig_instance.empty() ||
         a.mig_instance.substr(0, a.mig_instance.find('@')) == resource.mig_profile))
      return std::vector<std::string>{device_ids[0]};
    return InvalidArgument("assignment names MIG instance \"" + a.mig_instance +
                           "\" without a GPU and start, and the request is not for one " +
                           "nvidia.com/mig-" + ProfileResourceForm(a.mig_instance) + " device");
  }
  const GpuState& gpu = state.gpus[a.gpus[0]];
  const MigInstanceState* mi = FindInstance(gpu, a.mig_instance);
  if (mi == nullptr || mi->compute_instances.empty())
    return InvalidArgument("MIG instance " + a.mig_instance + " does not exist on GPU " +
                           std::to_string(gpu.index) + " (layout: \"" + gpu.mig_layout + "\")");
  return std::vector<std::string>{mi->compute_instances[0].uuid};
}

}  // namespace

void StaticPodSource::Set(std::vector<BoundPod> pods) {
  std::lock_guard lock(mu_);
  pods_ = std::move(pods);
}

void StaticPodSource::Add(BoundPod pod) {
  std::lock_guard lock(mu_);
  pods_.push_back(std::move(pod));
}

Result<std::vector<BoundPod>> StaticPodSource::ListBoundPods() {
  std::lock_guard lock(mu_);
  return pods_;
}

std::vector<PluginResource> PluginResourcesFor(const NodeGpuState& state) {
  std::vector<PluginResource> out;
  out.push_back({PluginResourceKind::kGpu, kube::kResourceGpu, "", "tessera-gpu.sock"});
  std::set<std::string> profiles;
  for (const GpuState& g : state.gpus)
    for (const MigInstanceState& mi : g.mig_instances) profiles.insert(mi.profile);
  for (const std::string& p : profiles) {
    const std::string form = ProfileResourceForm(p);
    out.push_back({PluginResourceKind::kMig, kube::kResourceMigPrefix + form, p,
                   "tessera-mig-" + form + ".sock"});
  }
  out.push_back(
      {PluginResourceKind::kCompute, kube::kResourceGpuCompute, "", "tessera-gpu-compute.sock"});
  out.push_back(
      {PluginResourceKind::kSlice, kube::kResourceGpuSlice, "", "tessera-gpu-slice.sock"});
  return out;
}

std::vector<PluginDevice> PluginDevicesFor(const PluginResource& resource,
                                           const NodeGpuState& state) {
  std::vector<PluginDevice> out;
  for (const GpuState& g : state.gpus) {
    switch (resource.kind) {
      case PluginResourceKind::kGpu:
        if (!g.mig_enabled) out.push_back({g.uuid, g.healthy, g.numa_node});
        break;
      case PluginResourceKind::kMig:
        for (const MigInstanceState& mi : g.mig_instances)
          if (mi.profile == resource.mig_profile && !mi.compute_instances.empty())
            out.push_back({mi.compute_instances[0].uuid, g.healthy, g.numa_node});
        break;
      case PluginResourceKind::kCompute:
      case PluginResourceKind::kSlice: {
        const int count = resource.kind == PluginResourceKind::kCompute ? kComputeDevicesPerGpu
                                                                        : kSliceDevicesPerGpu;
        for (int k = 0; k < count; ++k)
          out.push_back({VirtualDeviceId(g.uuid, resource.kind, k), g.healthy, g.numa_node});
        break;
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const PluginDevice& a, const PluginDevice& b) { return a.id < b.id; });
  return out;
}

Allocator::Allocator(PodSource& pods, AllocatorOptions options)
    : pods_(pods), options_(std::move(options)) {}

void Allocator::SetState(NodeGpuState state) {
  std::lock_guard lock(mu_);
  state_ = std::move(state);
}

NodeGpuState Allocator::State() const {
  std::lock_guard lock(mu_);
  return state_;
}

bool Allocator::Allocated(const std::string& pod_uid, const std::string& container,
                          const std::string& resource) const {
  std::lock_guard lock(mu_);
  return allocated_.count({pod_uid, container, resource}) > 0;
}

Result<Allocator::Match> Allocator::FindPod(const std::vector<BoundPod>& pods,
                                            const std::string& resource, size_t count) const {
  const BoundPod* best = nullptr;
  size_t best_container = 0;
  for (const BoundPod& p : pods) {
    for (size_t c = 0; c < p.containers.size(); ++c) {
      const PodContainer& ct = p.containers[c];
      auto it = ct.requests.find(resource);
      if (it == ct.requests.end() || it->second != static_cast<int64_t>(count)) continue;
      if (ct.started) continue;
      if (allocated_.count({p.uid, ct.name, resource})) continue;
      if (best == nullptr ||
          std::tie(p.bound_at, p.ns, p.name) < std::tie(best->bound_at, best->ns, best->name)) {
        best = &p;
        best_container = c;
      }
      break;
    }
  }
  if (best == nullptr)
    return NotFound("no pod on this node waits for " + std::to_string(count) + " " + resource +
                    " device" + (count == 1 ? "" : "s"));
  return Match{*best, best_container};
}

Result<ContainerAllocation> Allocator::Allocate(const PluginResource& resource,
                                                const std::vector<std::string>& device_ids) {
  std::lock_guard lock(mu_);
  auto pods = pods_.ListBoundPods();
  if (!pods.ok()) return pods.status();
  RecoverLocked(*pods);
  auto match = FindPod(*pods, resource.name, device_ids.size());
  if (!match.ok()) return match.status();
  const BoundPod& pod = match->pod;
  const std::string& container = pod.containers[match->container].name;
  const std::string who = "pod " + PodName(pod) + " container \"" + container + "\": ";

  ContainerAllocation out;
  out.pod_uid = pod.uid;
  out.container = container;
  out.resource = resource.name;
  std::vector<std::string> devices;
  std::optional<kube::Assignment> assignment;
  if (auto it = pod.annotations.find(kube::kAnnotationAssignment); it != pod.annotations.end()) {
    auto a = kube::DecodeAssignment(it->second);
    if (!a.ok())
      return InvalidArgument(who + "annotation " + kube::kAnnotationAssignment + ": " +
                             a.status().message());
    assignment = std::move(*a);
    auto d = AssignedDevices(*assignment, state_, resource, device_ids);
    if (!d.ok()) return InvalidArgument(who + d.status().message());
    devices = std::move(*d);
  } else if (!IsVirtual(resource.kind)) {
    devices = device_ids;
  } else {
    return InvalidArgument(who + "no annotation " + kube::kAnnotationAssignment + " (" +
                           resource.name + " is placed by the Tessera scheduler)");
  }

  out.envs["NVIDIA_VISIBLE_DEVICES"] = Join(devices, ",");
  const bool mps = assignment && (assignment->kind == kube::AssignmentKind::kMps ||
                                  assignment->kind == kube::AssignmentKind::kMigMps);
  if (mps) {
    const std::string base = options_.mps_root + "/" + devices[0];
    out.envs["CUDA_MPS_PIPE_DIRECTORY"] = kMpsPipeDir;
    out.envs["CUDA_MPS_LOG_DIRECTORY"] = kMpsLogDir;
    out.mounts.push_back({base + "/pipe", kMpsPipeDir, false});
    out.mounts.push_back({base + "/log", kMpsLogDir, false});
    if (assignment->mps_thread_pct > 0)
      out.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(assignment->mps_thread_pct);
    if (assignment->memory_limit_mib > 0)
      out.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] =
          devices[0] + "=" + std::to_string(assignment->memory_limit_mib) + "M";
  }

  CdiDevice cdi;
  cdi.name = AllocationDeviceName(pod.uid, container, resource.name);
  for (const auto& [k, v] : out.envs) cdi.env.push_back(k + "=" + v);
  for (const MountEdit& m : out.mounts)
    cdi.mounts.push_back({m.host_path, m.container_path, m.read_only});
  auto path = WriteCdiSpec(options_.cdi_dir, kSpecPrefix + cdi.name, {cdi});
  if (!path.ok()) return Status(path.status().code(), who + path.status().message());
  out.cdi_path = *path;
  out.cdi_devices.push_back(CdiQualifiedName(cdi.name));
  allocated_[{pod.uid, container, resource.name}] = out.cdi_path;
  Prune(*pods);
  return out;
}

void Allocator::Prune(const std::vector<BoundPod>& pods) {
  std::set<std::string> listed;
  for (const BoundPod& p : pods) listed.insert(p.uid);
  for (auto it = allocated_.begin(); it != allocated_.end();) {
    if (listed.count(std::get<0>(it->first))) {
      ++it;
      continue;
    }
    std::remove(it->second.c_str());
    it = allocated_.erase(it);
  }
}

Result<int> Allocator::Recover() {
  std::lock_guard lock(mu_);
  if (recovered_) return 0;
  auto pods = pods_.ListBoundPods();
  if (!pods.ok()) return pods.status();
  return RecoverLocked(*pods);
}

int Allocator::RecoverLocked(const std::vector<BoundPod>& pods) {
  if (recovered_) return 0;
  recovered_ = true;
  namespace fs = std::filesystem;
  std::set<std::string> claimed;
  int recovered = 0;
  for (const BoundPod& p : pods)
    for (const PodContainer& c : p.containers)
      for (const auto& [resource, count] : c.requests) {
        if (count <= 0) continue;
        const std::string file =
            kSpecPrefix + AllocationDeviceName(p.uid, c.name, resource) + ".json";
        const fs::path path = fs::path(options_.cdi_dir) / file;
        std::error_code ec;
        if (!fs::is_regular_file(path, ec)) continue;
        claimed.insert(file);
        if (allocated_.emplace(std::make_tuple(p.uid, c.name, resource), path.string()).second)
          ++recovered;
      }
  std::vector<fs::path> orphans;
  std::error_code ec;
  for (fs::directory_iterator it(options_.cdi_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(kSpecPrefix, 0) == 0 && name.size() > 5 &&
        name.compare(name.size() - 5, 5, ".json") == 0 && !claimed.count(name))
      orphans.push_back(it->path());
  }
  for (const fs::path& p : orphans) fs::remove(p, ec);
  return recovered;
}

void Allocator::Undo(const ContainerAllocation& allocation) {
  std::lock_guard lock(mu_);
  auto it = allocated_.find({allocation.pod_uid, allocation.container, allocation.resource});
  if (it == allocated_.end()) return;
  std::remove(it->second.c_str());
  allocated_.erase(it);
}

std::vector<std::string> Allocator::Preferred(const PluginResource& resource,
                                              const std::vector<std::string>& available,
                                              const std::vector<std::string>& must_include,
                                              int size) {
  std::vector<std::string> out;
  std::set<std::string> avail(available.begin(), available.end());
  auto take = [&](const std::string& id) {
    if (static_cast<int>(out.size()) >= size || !avail.count(id)) return;
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  };
  for (const std::string& id : must_include) take(id);
  {
    std::lock_guard lock(mu_);
    auto pods = pods_.ListBoundPods();
    if (pods.ok()) RecoverLocked(*pods);
    auto match = pods.ok() && size > 0 ? FindPod(*pods, resource.name, static_cast<size_t>(size))
                                       : Result<Match>(NotFound("no pod"));
    if (match.ok()) {
      auto it = match->pod.annotations.find(kube::kAnnotationAssignment);
      auto a = it == match->pod.annotations.end() ? Result<kube::Assignment>(NotFound(""))
                                                  : kube::DecodeAssignment(it->second);
      if (a.ok()) {
        auto devices = AssignedDevices(*a, state_, resource, {});
        if (devices.ok()) {
          for (const std::string& d : *devices) {
            if (!IsVirtual(resource.kind)) {
              take(d);
              continue;
            }
            for (const std::string& id : available)
              if (id.rfind(d + VirtualInfix(resource.kind), 0) == 0) take(id);
          }
        }
      }
    }
  }
  std::vector<std::string> rest(available.begin(), available.end());
  std::sort(rest.begin(), rest.end());
  for (const std::string& id : rest) take(id);
  return out;
}

}  // namespace tessera::agent
