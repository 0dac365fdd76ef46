// The kubelet device plugin of the node agent: one gRPC DevicePlugin server (API v1beta1,
// proto/deviceplugin/v1beta1/api.proto) per resource, on a unix socket in the plugin directory,
// registered with the kubelet at <plugin dir>/kubelet.sock.
//
// Contract:
// * Start(state) serves every resource of PluginResourcesFor(state) on
//   <plugin_dir>/<endpoint> (a stale socket file is replaced) and registers each with the
//   kubelet: version "v1beta1", endpoint = socket file name, the resource name, options
//   get_preferred_allocation_available = true, pre_start_required = false. A server that cannot
//   listen is an error (nothing keeps running). A kubelet that is absent or refuses is not: a
//   watcher retries.
// * The watcher checks kubelet.sock every kubelet_poll_ms. When it appears, or is replaced (a
//   kubelet restart: another inode or change time), every plugin whose socket the kubelet
//   removed is served again and every resource registers again.
// * ListAndWatch sends the resource's devices (allocate.h) at once and again after each
//   UpdateState that changes them (e.g. a GPU turned unhealthy); WatchHealth applies critical
//   XIDs from a GpuBackend (ApplyXid) in its own thread, so a fatal XID turns its GPU's
//   devices "Unhealthy". The resource set is fixed at Start.
// * Allocate and GetPreferredAllocation answer per container through Allocator (allocate.h);
//   an allocation error is the gRPC status of the matching code with the Allocator's message
//   (NotFound -> NOT_FOUND, InvalidArgument -> INVALID_ARGUMENT, others -> INTERNAL /
//   UNAVAILABLE); a request for several containers succeeds or fails as a whole (the
//   containers allocated before the failing one are undone). PreStartContainer answers empty.
// * Stop() ends the streams, the watcher and the health thread, shuts the servers down and
//   removes their sockets; it is idempotent and called by the destructor. Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/allocate.h"
#include "agent/discovery.h"
#include "agent/nvml.h"
#include "core/status.h"

namespace tessera::agent {

inline constexpr const char* kDefaultPluginDir = "/var/lib/kubelet/device-plugins";
inline constexpr const char* kKubeletSocket = "kubelet.sock";
inline constexpr const char* kDevicePluginVersion = "v1beta1";

struct DevicePluginConfig {
  std::string plugin_dir = kDefaultPluginDir;
  AllocatorOptions allocator;
  int kubelet_poll_ms = 1000;
  int register_timeout_ms = 5000;
};

class DevicePluginManager {
 public:
  DevicePluginManager(PodSource& pods, DevicePluginConfig config);
  ~DevicePluginManager();
  DevicePluginManager(const DevicePluginManager&) = delete;
  DevicePluginManager& operator=(const DevicePluginManager&) = delete;

  Status Start(const NodeGpuState& state);
  void UpdateState(const NodeGpuState& state);
  Status WatchHealth(GpuBackend& backend);
  void Stop();

  std::vector<PluginResource> Resources() const;
  // Successful Register calls so far.
  int Registrations() const;
  Allocator& allocator();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::agent
