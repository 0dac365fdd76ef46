// The kube-scheduler extender: Tessera's GPU placement for clusters that keep kube-scheduler.
//
// Protocol (kube-scheduler extender/v1, JSON keys are the Go field names):
//   filter:     ExtenderArgs {Pod, Nodes | NodeNames} -> ExtenderFilterResult {Nodes | NodeNames,
//               FailedNodes, FailedAndUnresolvableNodes, Error}
//   prioritize: ExtenderArgs -> HostPriorityList [{"Host", "Score" 0..10}]
//   bind:       ExtenderBindingArgs {PodName, PodNamespace, PodUID, Node} -> {Error}
//   preempt:    ExtenderPreemptionArgs {Pod, NodeNameToVictims | NodeNameToMetaVictims}
//               -> {NodeNameToMetaVictims}
// Both nodeCacheCapable modes are served. Connected to a cluster (trust_request_nodes false),
// the node view comes only from informers: node objects in a request only name the candidates
// and never change the view. Without a cluster (trust_request_nodes true) the node objects
// sent are used and cached.
//
// Bind binds only a pod that is pending (no node, phase Pending, not being deleted), requests
// a GPU resource Tessera manages, and whose UID matches the request's PodUID. The pod is the
// one returned by `lookup_pod` (the API server) when set, otherwise the one tracked from
// informers; never the request body.
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
// Filter and bind judge a node on its own (single-node slice models, cached until the node or
// its pods change); prioritize scores the candidates in one view of the whole GPU fleet, so the
// policy's cluster-wide terms do not depend on which candidates a request names
// (extender_view.h).
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
#include "net/http_server.h"
#include "policies/builtin.h"
#include "sharing/selector.h"

namespace tessera::kube {

// Creates the binding (POST pods/{name}/binding) with `annotations` merged into the pod.
using BindFn = std::function<Status(const std::string& ns, const std::string& name,
                                    const std::string& uid, const std::string& node,
                                    const std::map<std::string, std::string>& annotations)>;

// Reads a pod from the API server: the pod object, NotFound, or another error.
using PodLookupFn = std::function<Result<Json>(const std::string& ns, const std::string& name)>;

struct ExtenderOptions {
  SelectorConfig selector;  // sharing mechanisms the extender may assign
  TesseraConfig scoring;    // the tessera policy behind prioritize
  uint64_t seed = 1;
  // True only without a cluster: node objects in requests then update the node view.
  bool trust_request_nodes = true;
  // Set: Bind reads the pod through it (without holding the extender's lock).
  PodLookupFn lookup_pod;
};

// Strict wire check of one verb's request body (filter, prioritize, bind, preempt): every field
// the extender reads must have its protocol type (PodName a string, Pod an object, NodeNames an
// array of strings, resource quantities strings or numbers, ...). InvalidArgument naming the
// field, the expected and the actual JSON type.
Status ValidateExtenderRequest(const std::string& verb, const Json& body);

struct ExtenderStats {
  int64_t filter = 0, prioritize = 0, bind = 0, preempt = 0;
  int64_t bind_errors = 0;
  int64_t invalid_pods = 0;  // GPU pods rejected by translation
  size_t nodes = 0;          // nodes known (including ones with a translation error)
  size_t gpu_pods = 0;       // GPU pods tracked (pending and bound)
  // GPU pods the placement policy learned from: as arrivals (pods it was asked to place, and
  // pods seen bound after the first of those), and as the cluster's past (pods already bound
  // when first seen, before any arrival: the pods running when the extender starts).
  int64_t learned_arrivals = 0, learned_past = 0;
  // Changes of the workload mix the placement policy found (Scorer::mix_changes): each time,
  // it re-learned the mix from the recent pods alone.
  int64_t mix_changes = 0;
  // Pods remembered as learned, so that none is learned twice; a pod is forgotten when it
  // leaves (deleted or terminal), so this stays bounded by the pods in the cluster.
  size_t learned_tracked = 0;
  // Full rebuilds of the fleet view prioritize scores in (EngineView): at start, and after a
  // node left or changed its spec. Pod events and other node updates rebuild one node only.
  int64_t view_rebuilds = 0;
  // Candidates whose fit prioritize took from the filter call just before it for the same pod
  // (no node or bound pod changed in between) instead of asking the slice selector again.
  int64_t fits_reused = 0;
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
  // requests are ignored. A pod bound when first seen is the policy's past until the first
  // arrival (Scorer::ObservePast); a pending one is learned when it is filtered or scored. A bound
  // pod that fails translation is ignored and the error returned, except when only its
  // tessera.io/assignment annotation is invalid: it is then counted without it (TranslateHeldPod)
  // and the annotation's error is returned.
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
  struct BindRequest;
  Json BindLocked(const BindRequest& req, const BindFn& bind_fn,
                  std::unique_lock<std::mutex>& lock);
  Json PreemptLocked(const Json& args);

  struct State;
  mutable std::mutex mu_;
  std::unique_ptr<State> state_;
};

struct ExtenderServerOptions {
  std::string address = "0.0.0.0";
  int port = 8888;                  // 0 = an ephemeral port (see ExtenderServer::port)
  std::string prefix = "/tessera";  // verbs are served at <prefix>/filter etc.
  // HTTPS with client certificates (tls.cert_file, tls.key_file, tls.client_ca_file) is
  // required unless `insecure` is set, which allows plain HTTP or TLS without client
  // certificates, on a loopback address only.
  net::TlsOptions tls;
  bool insecure = false;
  net::HttpLimits limits;
  // Set (port >= 0): GET /healthz and /metrics also on this plain-HTTP address, for probes and
  // scrapers that hold no client certificate. The verbs are never served there.
  std::string health_address;
  int health_port = -1;
};

// HTTP(S) front end on net::HttpServer (bounded requests, deadlines, connection limits): POST
// <prefix>/{filter,prioritize,bind,preempt}, GET /healthz and GET /metrics (Prometheus text). A
// body that is not JSON, or fails ValidateExtenderRequest, gets 400 with {"Error": "..."}. The
// Extender and BindFn must outlive the server.
class ExtenderServer {
 public:
  ExtenderServer(Extender& extender, BindFn bind_fn, ExtenderServerOptions options);
  ~ExtenderServer();  // stops

  // Binds and serves on background threads. InvalidArgument for options that would serve
  // without authentication off loopback, IoError if the address cannot be bound ("address in
  // use") or the TLS files cannot be loaded.
  Status Start();
  int port() const { return port_; }
  int health_port() const { return health_port_; }
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  int health_port_ = -1;
};

// Serves until `stop()` returns true (polled every 200 ms), then shuts down.
Status ServeExtender(Extender& extender, BindFn bind_fn, const ExtenderServerOptions& options,
                     const std::function<bool()>& stop);

}  // namespace tessera::kube
