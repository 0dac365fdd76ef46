// The kube-scheduler extender: Tessera's GPU placement for clusters that keep kube-scheduler.
//
// Protocol (kube-scheduler extender/v1, JSON keys are the Go field names):
//   filter:     ExtenderArgs {Pod, Nodes | NodeNames} -> ExtenderFilterResult {Nodes | NodeNames,
//               FailedNodes, FailedAndUnresolvableNodes, Error}
//   prioritize: ExtenderArgs -> HostPriorityList [{"Host", "Score" 0..10}]
//   bind:       ExtenderBindingArgs {PodName, PodNamespace, PodUID, Node} -> {Error}
//   preempt:    ExtenderPreemptionArgs {Pod, NodeNameToVictims | NodeNameToMetaVictims}
//               -> {NodeNameToMetaVictims}
// Both nodeCacheCapable modes are served: with NodeNames the extender uses its own node view,
// with Nodes it uses (and caches) the node objects sent.
//
// The extender judges only GPUs: kube-scheduler has already checked CPU, memory, taints,
// selectors and node conditions. Pods that request no GPU resource pass every node unchanged
// and score 0. A GPU pod whose request is invalid fails every node as unresolvable with the
// translation error, which kube-scheduler publishes in its FailedScheduling event.
//
// Cluster view: nodes (translate.h) and the GPU pods bound to them, fed through Upsert*/Remove*
// (typically from informers) and by Bind itself, so back-to-back decisions see each other.
// A bound pod's GPUs come from its tessera.io/assignment annotation; pods bound without one
// (by another scheduler) are placed on the node's first fitting GPUs in the model. MIG requests
// on nodes without a GPU inventory are counted against allocatable nvidia.com/mig-<profile>.
//
// Thread-safety: every method may be called from any thread; calls are serialised internally.
// Failure: handlers never throw; protocol-level problems are reported in the result's Error
// field (filter, bind) or by omission (prioritize scores 0, preempt drops the node).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "kube/translate.h"
#include "policies/builtin.h"
#include "sharing/selector.h"

namespace tessera::kube {

// Creates the binding (POST pods/{name}/binding) with `annotations` merged into the pod.
using BindFn = std::function<Status(const std::string& ns, const std::string& name,
                                    const std::string& uid, const std::string& node,
                                    const std::map<std::string, std::string>& annotations)>;

struct ExtenderOptions {
  SelectorConfig selector;  // sharing mechanisms the extender may assign
  TesseraConfig scoring;    // the tessera policy behind prioritize
  uint64_t seed = 1;
};

struct ExtenderStats {
  int64_t filter = 0, prioritize = 0, bind = 0, preempt = 0;
  int64_t bind_errors = 0;
  int64_t invalid_pods = 0;  // GPU pods rejected by translation
  size_t nodes = 0;          // nodes known (including ones with a translation error)
  size_t gpu_pods = 0;       // GPU pods tracked (pending and bound)
};

class Extender {
 public:
  explicit Extender(ExtenderOptions options = {});
  ~Extender();

  // Adds or replaces a node. A node that fails translation is remembered with its error (it
  // fails every GPU pod with that reason) and the error is returned.
  Status UpsertNode(const Json& node);
  void RemoveNode(const std::string& name);
  // Adds or replaces a pod (keyed by uid). Terminal pods are removed; pods without GPU
  // requests are ignored. A bound pod that fails translation is ignored and the error returned.
  Status UpsertPod(const Json& pod);
  void RemovePod(const std::string& uid);

  Json Filter(const Json& args);
  Json Prioritize(const Json& args);
  Json Bind(const Json& args, const BindFn& bind_fn);
  Json Preempt(const Json& args);

  ExtenderStats stats() const;
  // The assignment recorded for a tracked pod, if any.
  std::optional<Assignment> AssignmentOf(const std::string& uid) const;

 private:
  Json FilterLocked(const Json& args);
  Json PrioritizeLocked(const Json& args);
  Json BindLocked(const Json& args, const BindFn& bind_fn, std::unique_lock<std::mutex>& lock);
  Json PreemptLocked(const Json& args);

  struct State;
  mutable std::mutex mu_;
  std::unique_ptr<State> state_;
};

struct ExtenderServerOptions {
  std::string address = "0.0.0.0";
  int port = 8888;                  // 0 = an ephemeral port (see ExtenderServer::port)
  std::string prefix = "/tessera";  // verbs are served at <prefix>/filter etc.
  std::string tls_cert_file;        // both set: HTTPS
  std::string tls_key_file;
};

// HTTP(S) front end: POST <prefix>/{filter,prioritize,bind,preempt}, GET /healthz and
// GET /metrics (Prometheus text). A body that is not JSON, or lacks the verb's required fields,
// gets 400 with {"Error": "..."}. The Extender and BindFn must outlive the server.
class ExtenderServer {
 public:
  ExtenderServer(Extender& extender, BindFn bind_fn, ExtenderServerOptions options);
  ~ExtenderServer();  // stops

  // Binds and serves on a background thread. IoError if the address cannot be bound or the
  // TLS files cannot be loaded.
  Status Start();
  int port() const { return port_; }
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// Serves until `stop()` returns true (polled every 200 ms), then shuts down.
Status ServeExtender(Extender& extender, BindFn bind_fn, const ExtenderServerOptions& options,
                     const std::function<bool()>& stop);

}  // namespace tessera::kube
