// Mutating admission webhook for pods (`tessera webhook`).
//
// Why it exists: the kubelet calls a device plugin only for resources a plugin advertises, in
// whole devices. tessera.io/gpu-memory is a byte quantity (10Gi) and the HAMi share resources
// are MiB or percentages, so no plugin can advertise them; a container that asks only for those
// would start without any GPU in it. The webhook gives such a container one device of
// tessera.io/gpu-slice, a resource the node agent advertises (a pool of virtual devices per
// GPU), so that the kubelet calls the agent's Allocate, which hands the container the slice the
// scheduler recorded in tessera.io/assignment. The scheduler ignores tessera.io/gpu-slice.
//
// Contract of ReviewPod (pure, thread-safe, never throws):
// * Input: an admission.k8s.io/v1 AdmissionReview with request.uid, request.kind.kind "Pod" and
//   request.object. InvalidArgument, naming the field, for anything else (the server answers
//   400); a request for another kind is allowed unchanged.
// * A container (init containers included) "needs a slice handle" when its limits or requests
//   name a Tessera or HAMi share resource (tessera.io/gpu-memory, tessera.io/gpu-compute,
//   nvidia.com/gpumem, nvidia.com/gpumem-percentage, nvidia.com/gpucores) and none of the
//   resources the node agent serves (nvidia.com/gpu, nvidia.com/mig-*, tessera.io/gpu-compute,
//   tessera.io/gpu-slice). It gets limits[tessera.io/gpu-slice] = "1" (requests default to
//   limits for extended resources).
// * A pod annotated tessera.io/rightsize: auto (and not yet carrying
//   tessera.io/original-resources) has each container's nvidia.com/gpu: N (N >= 1, in limits
//   and requests) replaced by tessera.io/gpu-slice: 1, and the replaced entries recorded in the
//   pod annotation tessera.io/original-resources (kube/translate.h), which the scheduler and the
//   extender read as the pod's request. The scheduler may grant such a pod less than N GPUs
//   (kube/rightsize.h); the kubelet then counts one slice device, whose Allocate hands the
//   container whatever the pod's tessera.io/assignment names (several whole GPUs included),
//   instead of refusing pods beyond the node's nvidia.com/gpu count. A container that already
//   holds a tessera.io/gpu-slice handle, or whose nvidia.com/gpu is not a positive integer, is
//   left alone. `recommend` and `off` pods are never rewritten.
// * With `scheduler_name` set, a pod that asks for any GPU resource and whose spec.schedulerName
//   is absent or "default-scheduler" gets that scheduler.
// * Output: an AdmissionReview response with the request's uid, allowed true and, when
//   something changes, an RFC 6902 JSON Patch (patchType JSONPatch, base64) that adds members
//   and, for the rightsize rewrite only, removes the nvidia.com/gpu entries it replaces. The review
//   never denies a pod: the scheduler reports what is wrong with its resources as a pod Event,
//   where users look.
// * Idempotent: a pod the webhook already changed gets no patch.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "kube/translate.h"
#include "net/http_server.h"

namespace tessera::kube {

struct WebhookConfig {
  std::string scheduler_name;  // empty: leave spec.schedulerName alone
};

// What ReviewPod decided, for logs and metrics.
struct WebhookOutcome {
  int containers_changed = 0;    // given a slice handle for share resources
  int containers_rewritten = 0;  // nvidia.com/gpu replaced (tessera.io/rightsize: auto)
  bool scheduler_set = false;
};

Result<nlohmann::json> ReviewPod(const nlohmann::json& review, const WebhookConfig& config,
                                 WebhookOutcome* outcome = nullptr);

struct WebhookServerOptions {
  std::string address = "0.0.0.0";
  int port = 8443;  // 0 = an ephemeral port
  std::string path = "/mutate-pods";
  // HTTPS is required (the API server calls webhooks over TLS only) unless `insecure` is set,
  // which allows plain HTTP on a loopback address, for tests. client_ca_file set = the API
  // server must present a client certificate signed by it.
  net::TlsOptions tls;
  bool insecure = false;
  net::HttpLimits limits;
  // Set (port >= 0): GET /healthz and /metrics on this plain-HTTP address, for probes.
  std::string health_address;
  int health_port = -1;
};

// POST <path> with an AdmissionReview: 200 with the response review; 400 with a plain-text
// reason when the body is not JSON or ReviewPod rejects it. GET /healthz and GET /metrics
// (tessera_webhook_reviews_total{result}, tessera_webhook_containers_patched_total,
// tessera_webhook_containers_rewritten_total) are served
// on the main address too.
class WebhookServer {
 public:
  WebhookServer(WebhookConfig config, WebhookServerOptions options);
  ~WebhookServer();
  // InvalidArgument for options that would serve plain HTTP off loopback; IoError when the
  // address cannot be bound or the TLS files cannot be loaded.
  Status Start();
  int port() const;
  int health_port() const;
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::kube
