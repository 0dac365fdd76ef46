// Kubernetes API client: configuration (kubeconfig or in-cluster), HTTPS requests with JSON
// bodies, paged lists, watches with resourceVersion and bookmarks, client-side rate limiting.
//
// Wire formats follow the Kubernetes API (see docs/OPERATIONS.md): objects are nlohmann::json
// values exactly as the API server sends them. Errors are values: an HTTP error becomes a Status
// whose code maps the HTTP status (see HttpStatusOf) and whose message carries the API server's
// Status message.
//
// Thread-safety: a Client may be used from several threads at once (each request takes its own
// connection from an internal pool; the rate limiter is shared). Watch() blocks the calling
// thread until the stream ends, the handler returns false, or Stop() is called.
//
// HTTP errors: the Status message reads "HTTP <code>: <API server message>", followed by
// " (Retry-After: <s>s)" when the reply carried that header; HttpStatusOf/RetryAfterOf read them
// back. Codes: 400/422 kInvalidArgument, 401/403 kPermissionDenied, 404 kNotFound, 409
// kAlreadyExists (reason AlreadyExists) or kConflict, 410 kFailedPrecondition, 429
// kResourceExhausted, 5xx and connection failures kUnavailable, others kInternal.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace tessera::kube {

using Json = nlohmann::json;

struct ClientConfig {
  std::string server;  // "https://10.0.0.1:6443" or "http://127.0.0.1:8080"
  std::string ca_pem;  // PEM of the CA bundle; empty = system roots (https only)
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string bearer_token;
  // Set: the token is re-read from this file (kubeconfig tokenFile, the service account's
  // projected token) at most every token_reload_s seconds, and at once after a 401, so a
  // rotated token takes effect without a restart. A read that fails keeps the last token.
  std::string bearer_token_file;
  double token_reload_s = 60;
  bool insecure_skip_verify = false;
  double qps = 200;  // client-side rate limit (token bucket); <= 0 = unlimited
  int burst = 400;
  double timeout_s = 30;  // per request (not for watches)
  std::string user_agent = "tessera";
  // Namespace of the kubeconfig context or of the service account ("" when not given).
  std::string default_namespace;
  // Idle keep-alive connections kept for reuse; more are opened when requests overlap.
  int max_idle_connections = 16;
  // Requests answered 429, or 503 with Retry-After (both: not processed by the server), are
  // retried up to this many times, waiting Retry-After (at most max_retry_wait_s, at least a
  // jittered backoff). 0 = the caller sees the error. Never applies to watches.
  int max_retries = 0;
  double max_retry_wait_s = 5;
  // events.k8s.io/v1 reportingController / reportingInstance of PodEvent ("" instance: the
  // user agent and host name).
  std::string reporting_controller = "tessera.io/scheduler";
  std::string reporting_instance;
};

// Reads a kubeconfig file (YAML): the given context or current-context; cluster server, CA
// (certificate-authority file or -data), user client certificate/key (file or -data) or token
// (token or tokenFile). InvalidArgument naming the missing/bad field, IoError for unreadable files.
Result<ClientConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");
// Reads a file referenced by a kubeconfig (certificate, key, CA, token file). Absolute path.
using KubeconfigFileReader = std::function<Result<std::string>(const std::string& path)>;
// Same as LoadKubeconfig on YAML text; relative file references resolve against `base_dir`.
// `read_file` (default: the file system, at most 1 MiB per file) lets tests and fuzzers supply
// referenced files. Never throws; malformed YAML is InvalidArgument.
Result<ClientConfig> ParseKubeconfig(std::string_view yaml, std::string_view base_dir,
                                     const std::string& context = "",
                                     const KubeconfigFileReader& read_file = nullptr);
// In-cluster config: KUBERNETES_SERVICE_HOST/PORT and the service-account token and CA under
// `sa_dir` (default /var/run/secrets/kubernetes.io/serviceaccount).
Result<ClientConfig> InClusterConfig(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// HTTP status carried by a Status from the client (0 when the error is not an HTTP reply, e.g.
// a connection failure). 409 Conflict, 410 Gone, 404, 429, 5xx are what callers branch on.
int HttpStatusOf(const Status& s);
// Seconds from a 429/503 Retry-After header carried by the Status, or -1.
double RetryAfterOf(const Status& s);
// The Status the client returns for an HTTP error reply (code mapping and message format
// above); `retry_after_s` < 0 = no Retry-After. `reason` is the API Status reason, if any.
Status HttpError(int http_status, const std::string& message, double retry_after_s = -1,
                 const std::string& reason = "");

// API paths. Every path the client builds from names (namespaces, pods, nodes, leases) goes
// through BuildApiPath, after the names were checked with the validators below, so no input can
// add, remove or reinterpret a path segment, a query or a fragment.
//
// One path segment, percent-encoded: RFC 3986 unreserved characters (A-Z a-z 0-9 - . _ ~) are
// kept, every other byte (including '/', '?', '#', '%' and non-ASCII) becomes %XX (upper case).
std::string EscapePathSegment(std::string_view segment);
// "/" + the escaped segments joined by "/", e.g. {"api", "v1", "namespaces", ns, "pods"}.
// InvalidArgument (nothing built) when there is no segment, or a segment is empty, "." or ".."
// (which a server or proxy could resolve as a path step).
Result<std::string> BuildApiPath(std::initializer_list<std::string_view> segments);
// Kubernetes name rules. InvalidArgument naming `field` and quoting the value (non-printable
// bytes as \xNN, long values shortened) when the value does not conform; Ok otherwise.
// DNS-1123 label (namespaces): 1..63 characters of [a-z0-9-], starting and ending alphanumeric.
Status ValidateDns1123Label(std::string_view field, std::string_view value);
// DNS-1123 subdomain (pods, nodes, leases): 1..253 characters of [a-z0-9-.] whose '.'-separated
// parts are non-empty and start and end alphanumeric (a part may exceed 63 characters, as
// Kubernetes allows).
Status ValidateDns1123Subdomain(std::string_view field, std::string_view value);

// Cancels the Watch calls it is passed to, from any thread, promptly (an in-flight stream is
// shut down). Once cancelled it stays cancelled. Thread-safe; must outlive the Watch calls.
class CancelToken {
 public:
  void Cancel();
  bool cancelled() const { return cancelled_.load(); }

 private:
  friend class Client;
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::map<uint64_t, std::function<void()>> on_cancel_;
  uint64_t next_id_ = 0;
};

// Token bucket: `burst` tokens, refilled at `qps` per second. Take() reserves one token and
// returns how long the caller must wait before using it (0 when a token was available); later
// callers queue behind earlier reservations. qps <= 0 = unlimited. Not thread-safe.
class TokenBucket {
 public:
  TokenBucket(double qps, int burst);
  double Take(std::chrono::steady_clock::time_point now);

 private:
  double qps_, burst_, tokens_;
  std::chrono::steady_clock::time_point last_{};
  bool started_ = false;
};

struct ClientStats {
  int64_t requests = 0;            // HTTP requests sent, including watches and retries
  int64_t connections_opened = 0;  // new TCP/TLS connections (the rest reused one)
  int64_t retries = 0;             // automatic retries after 429/503 (max_retries)
  double rate_limit_wait_s = 0;    // total time spent waiting for the rate limiter
};

struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
  Json object;
};

class Client {
 public:
  static Result<std::unique_ptr<Client>> Create(ClientConfig config);
  ~Client();

  const ClientConfig& config() const { return config_; }

  // GET/POST/PUT/DELETE/PATCH on an API path ("/api/v1/namespaces/ml/pods/x"). `query` is
  // appended URL-encoded. Returns the decoded body.
  Result<Json> Get(const std::string& path, const std::map<std::string, std::string>& query = {});
  Result<Json> Post(const std::string& path, const Json& body);
  Result<Json> Put(const std::string& path, const Json& body);
  Result<Json> Delete(const std::string& path, const Json& body = Json());
  // application/merge-patch+json (RFC 7386): lists in the patch replace the object's lists.
  Result<Json> MergePatch(const std::string& path, const Json& patch);
  // application/strategic-merge-patch+json: like MergePatch, but lists with a merge key (pod
  // status.conditions by type, for one) are merged item by item, so a patch that writes one
  // condition keeps the others. Built-in kinds only.
  Result<Json> StrategicMergePatch(const std::string& path, const Json& patch);

  // Lists a collection with paging (limit/continue), returning {"items": [...all pages...],
  // "metadata": {"resourceVersion": <of the list>}}. A 410 on a continue token restarts the list.
  Result<Json> List(const std::string& path, const std::map<std::string, std::string>& query = {},
                    int page_size = 500);

  // Watches from `resource_version` (allowWatchBookmarks=true); calls `handler` for every
  // event, in order. Returns Ok when the server closed the stream normally (reconnect with the
  // last resourceVersion seen), a Status with HTTP 410 when the version expired (relist), or
  // another error. Stops early, returning Ok, when the handler returns false or Stop() is called.
  //
  // An ERROR event is passed to the handler, then ends the watch: its Status object becomes
  // the returned error (code 410 → HTTP 410). A stream that breaks (connection lost, bad JSON,
  // no data for timeout_s + 30 s) returns kUnavailable. `timeout_s` is sent as timeoutSeconds.
  Status Watch(const std::string& path, const std::map<std::string, std::string>& query,
               const std::string& resource_version,
               const std::function<bool(const WatchEvent&)>& handler, double timeout_s = 300);
  // Same, also returning Ok promptly once `cancel` is cancelled (nullptr = no token).
  Status Watch(const std::string& path, const std::map<std::string, std::string>& query,
               const std::string& resource_version,
               const std::function<bool(const WatchEvent&)>& handler, double timeout_s,
               CancelToken* cancel);
  // Makes running and future Watch calls return promptly.
  void Stop();

  ClientStats stats() const;

  // Convenience wrappers. Each validates its names first (namespace: DNS-1123 label; pod and
  // node: DNS-1123 subdomain) and returns InvalidArgument, sending nothing, when one is invalid.
  // POST /api/v1/namespaces/{ns}/pods/{name}/binding with the annotations merged into the pod.
  Status Bind(const std::string& ns, const std::string& pod, const std::string& uid,
              const std::string& node, const std::map<std::string, std::string>& annotations);
  // events.k8s.io/v1 Event about a pod (type Normal|Warning, reason, note). Best effort.
  // With `once`, the Event's name follows from the pod's uid, reason and note, so sending the
  // same Event again (a restarted scheduler, a new leader) finds it exists and writes nothing
  // (until the API server has expired it, after its event TTL).
  Status PodEvent(const std::string& ns, const std::string& pod, const std::string& uid,
                  const std::string& type, const std::string& reason, const std::string& note,
                  bool once = false);
  // Eviction API: POST .../pods/{name}/eviction (policy/v1), honouring PDBs (429 = blocked).
  Status Evict(const std::string& ns, const std::string& pod, int64_t grace_period_s = -1);

 private:
  explicit Client(ClientConfig config);
  struct Impl;
  ClientConfig config_;
  std::unique_ptr<Impl> impl_;
};

// Retry delays with exponential backoff and full jitter, seeded (deterministic in tests):
// attempt n (from 0 after construction or Reset) waits uniformly in [0, min(max_s,
// initial_s * 2^n)). The same seed gives the same sequence. Not thread-safe.
class Backoff {
 public:
  Backoff(double initial_s, double max_s, uint64_t seed);
  double Next();  // seconds to wait before the next attempt
  void Reset();

 private:
  double initial_, max_, cur_;
  uint64_t state_;
};

}  // namespace tessera::kube
