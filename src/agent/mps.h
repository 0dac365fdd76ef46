// MPS control daemons: one nvidia-cuda-mps-control per GPU or MIG device that has MPS clients.
//
// Contract:
// * Layout on the node, the same the device plugin mounts into MPS client containers:
//     <root>/<uuid>/pipe   CUDA_MPS_PIPE_DIRECTORY of the device's daemon (its sockets and
//                          nvidia-cuda-mps-control.pid)
//     <root>/<uuid>/log    CUDA_MPS_LOG_DIRECTORY (control.log, server.log)
//   <uuid> is the NVML UUID ("GPU-..." or "MIG-..."); anything else (empty, '/', "..") is
//   InvalidArgument and nothing is started.
// * Start runs "<control> -d" with CUDA_VISIBLE_DEVICES=<uuid> and the two directories in its
//   environment (the rest of the agent's environment is passed on), waits for it to return
//   (the daemon forks into the background), then sets the default client limits by writing
//   commands to the stdin of "<control>" run with the same environment:
//     set_default_active_thread_percentage <N>            (when 1 <= N <= 100)
//     set_default_device_pinned_mem_limit 0 <N>M           (when N > 0; device 0 is the
//                                                          only device the daemon sees)
//   A daemon already running for the device (the pid in its pipe directory's
//   nvidia-cuda-mps-control.pid is alive) is reused: nothing is run.
// * Stop writes "quit" to the daemon through "<control>"; a device without a running daemon is
//   a no-op.
// * Reconcile starts a daemon for every device with clients > 0 and stops every running daemon
//   under <root> whose device has no client left (including devices not listed), so a restarted
//   agent converges. It returns the first error after trying every device.
// * Every command has a deadline (timeout_s); a command that exits non-zero or does not end in
//   time is Unavailable with the command and its exit status. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::agent {

struct MpsOptions {
  std::string control = "nvidia-cuda-mps-control";  // path, or a name looked up in PATH
  std::string root = "/run/tessera/mps";
  double timeout_s = 10;
};

struct MpsDevice {
  std::string uuid;
  int clients = 0;
  int active_thread_percentage = 0;  // 0 = the daemon's default (100)
  int64_t pinned_mem_limit_mib = 0;  // 0 = no limit
};

class MpsManager {
 public:
  explicit MpsManager(MpsOptions options) : options_(std::move(options)) {}

  Status Start(const MpsDevice& device);
  Status Stop(const std::string& uuid);
  bool Running(const std::string& uuid) const;
  Status Reconcile(const std::vector<MpsDevice>& devices);

  std::string PipeDir(const std::string& uuid) const;
  std::string LogDir(const std::string& uuid) const;

 private:
  Status Run(const std::string& uuid, const std::vector<std::string>& args,
             const std::string& input) const;
  MpsOptions options_;
};

}  // namespace tessera::agent
