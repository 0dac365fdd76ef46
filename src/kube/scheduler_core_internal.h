// SchedulerCore's per-pod and per-job records, shared by its implementation files
// (scheduler_core.cc, scheduler_relayout.cc). Not part of the interface.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kube/scheduler_core.h"

namespace tessera::kube {

// The queue of pods this scheduler does not own (other schedulers, unknown queues).
inline constexpr const char* kExternalQueue = "_external";

struct SchedulerCore::PodEntry {
  PodRequest req;
  std::string key;
  WorkloadId job = 0;  // admission job holding this pod (0 = none)
  int index = -1;      // pod index inside the job
  bool bound = false;  // the API server shows it on a node
  bool ours = false;   // scheduled by this scheduler
  bool adopted = false;
  bool submitted = false;
  double first_pending = -1;  // cycle time at which it was first seen pending
  std::string bind_node;      // node of the bind issued for it, until confirmed or failed
  // Rightsizing: the pod as last seen while its decision is due (tessera.io/rightsize set), the
  // grant decided (kept across updates of the pod until its annotation carries it), and the
  // annotations its bind writes.
  std::shared_ptr<const Json> rightsize_src;
  bool rightsize_decided = false;
  std::optional<GpuRequest> granted;
  std::string granted_model;  // the models it may run on, comma-separated
  std::map<std::string, std::string> rightsize_annotations;
  bool rightsize_auto = false;  // decided under tessera.io/rightsize: auto
  // Order of the bind this scheduler issued for it (1, 2, ...); 0: adopted or never bound.
  int64_t admitted_seq = 0;
  // An out-of-memory retry: its owner (for messages) and the killed pod's admitted_seq
  // (-1: not a retry); whether it has already preempted.
  std::string oom_retry_of;
  int64_t oom_killed_seq = -1;
  bool oom_preempted = false;
};

struct SchedulerCore::JobEntry {
  WorkloadId id = 0;
  std::vector<std::string> pods;  // pod keys by index
  bool adopted = false;
  bool bind_issued = false;
};

}  // namespace tessera::kube
