// `tessera scheduler` runtime: leader election, informers for nodes and pods feeding a
// SchedulerCore, scheduling cycles, parallel binding, pod conditions and Events, evictions.
//
// Contract: with leader election on, only the lease holder lists, schedules and binds; a
// replica that loses the lease stops scheduling and Run() returns (as kube-scheduler exits), so
// a restarted process rebuilds everything from the API server (bound pods' assignment
// annotations) and no GPU is assigned twice. Nodes are listed before pods so that bound pods
// find their nodes. Binding runs on `bind_threads` workers while the next cycle proceeds; a
// failed bind requeues the pod's job. Unschedulable pods get the PodScheduled=False condition
// and a Warning Event whenever their reason changes. Graceful shutdown: Run() returns after
// `stop` is set, in-flight binds finish, and the lease is released.
// Thread-safety: Run() on one thread; stats() from any.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "kube/client.h"
#include "kube/leader.h"
#include "kube/scheduler_core.h"

namespace tessera::kube {

struct SchedulerRuntimeConfig {
  SchedulerConfig core;
  bool leader_elect = false;
  LeaderConfig leader;
  int bind_threads = 8;
  double cycle_interval_s = 0.02;  // minimum time between cycles
  bool pod_conditions = true;      // patch PodScheduled=False with the reason
  bool pod_events = true;          // Warning Events for unschedulable / invalid pods
  std::string metrics_addr;        // "host:port" for /healthz and /metrics; empty = off
  // Also read tessera.io Queue objects when scheduling starts (queues of the configuration
  // file win on equal names). Later changes to Queue objects take effect on the next start or
  // leadership change.
  bool queue_objects = true;
  Status Validate() const;
};

// Reads the scheduler configuration (YAML; see docs/OPERATIONS.md): schedulerName, policy,
// queues (name, cohort, weight, flavors with nominal / borrowingLimit / lendingLimit in GPU
// equivalents, cores and GiB, and models), admission settings, leader election, binding.
// InvalidArgument with the key path of the first bad field.
Result<SchedulerRuntimeConfig> LoadSchedulerConfig(const std::string& path);
Result<SchedulerRuntimeConfig> ParseSchedulerConfig(const std::string& yaml_text);

// A tessera.io/v1alpha1 Queue object (deploy/crds/queue.yaml) as a QueueSpec, validated like
// the configuration file's queues. InvalidArgument naming the object and field otherwise.
Result<QueueSpec> QueueFromObject(const Json& obj);

struct RuntimeStats {
  CoreStats core;
  int64_t binds_ok = 0, binds_failed = 0, evictions = 0, notices = 0, cycles = 0;
  // Pod conditions and Events the API server refused (other than 404: the pod is gone).
  int64_t status_write_errors = 0;
  double started_s = -1;     // monotonic seconds since Run() began: leading and synced
  double first_bind_s = -1;  // first successful bind
  double last_bind_s = -1;   // latest successful bind
  bool leading = false;
};

class Scheduler {
 public:
  Scheduler(Client& client, SchedulerRuntimeConfig config);
  ~Scheduler();

  // Blocks until `stop` is set (Ok), leadership is lost (Unavailable with the reason, after
  // cleanup), or the initial lists fail (the error).
  Status Run(std::atomic<bool>& stop);
  RuntimeStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::kube
