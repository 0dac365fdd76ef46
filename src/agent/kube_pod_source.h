// The device plugin's PodSource over the Kubernetes API: the pods bound to this node.
//
// Contract:
// * ListPods lists /api/v1/pods with fieldSelector=spec.nodeName=<node> (paged) on every call
//   and returns the pod objects as the API server sends them, without the terminal ones
//   (status.phase Succeeded or Failed): those wait for no device and run no MPS client.
// * ListBoundPods maps them to BoundPod: metadata.uid, .namespace, .name, .annotations; the
//   binding time is the PodScheduled condition's lastTransitionTime when it is "True", else
//   metadata.creationTimestamp; per container (spec.containers, in order), every resource of
//   resources.limits (else .requests) whose quantity is an integer count (extended resources
//   such as nvidia.com/gpu; "10Gi" byte quantities are left out), and started when
//   status.containerStatuses has a containerID for it.
// * PodFromObject is that mapping for one object; a pod without uid or name is InvalidArgument.
// * Errors: the client's (a failed list is returned as is). Thread-safe (kube::Client is).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/allocate.h"
#include "core/status.h"
#include "kube/client.h"

namespace tessera::agent {

Result<BoundPod> PodFromObject(const nlohmann::json& pod);

class KubePodSource : public PodSource {
 public:
  KubePodSource(kube::Client& client, std::string node_name)
      : client_(client), node_(std::move(node_name)) {}

  Result<std::vector<nlohmann::json>> ListPods();
  Result<std::vector<BoundPod>> ListBoundPods() override;

 private:
  kube::Client& client_;
  std::string node_;
};

}  // namespace tessera::agent
