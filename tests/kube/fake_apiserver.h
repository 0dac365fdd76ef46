// In-process fake Kubernetes API server for tests (HTTP on 127.0.0.1, ephemeral port).
//
// Holds objects of any kind by API path: core (/api/v1/...), named groups (/apis/<g>/<v>/...)
// and custom resources alike, namespaced ("/namespaces/<ns>/<resource>/<name>") or cluster-scoped
// ("/<resource>/<name>"). Semantics follow the Kubernetes API where tests depend on them:
//   * one global resourceVersion counter, bumped by every write (sent as an opaque string);
//     every write is one watch event (ADDED, MODIFIED, DELETED);
//   * POST create (201; 409 AlreadyExists; generateName; uid, creationTimestamp; pods default
//     status.phase=Pending and spec.schedulerName=default-scheduler), GET, PUT (409 Conflict
//     when metadata.resourceVersion is set and stale; a no-op update keeps the version), PATCH
//     application/merge-patch+json (RFC 7396; metadata.resourceVersion in the patch is a
//     precondition), application/strategic-merge-patch+json on built-in kinds (as merge patch,
//     except that "conditions" lists merge by type; other patch types 415), DELETE
//     (preconditions uid/resourceVersion), the
//     status subresource (only .status changes; the main resource of pods and nodes ignores
//     .status);
//   * list with fieldSelector (=, ==, != on the fields the API server supports for pods, plus
//     metadata.name/namespace for all kinds), labelSelector (=, ==, !=, key, !key), limit and
//     continue (pages come from a snapshot taken at the first page, so a paged list is
//     consistent; a token older than the event history answers 410);
//   * watch: chunked stream of JSON lines with the events after resourceVersion ("" or "0":
//     synthetic ADDED events for the current objects first), selectors applied to old and new
//     state (an object leaving the selection is DELETED, entering it ADDED), BOOKMARK every
//     bookmark_interval_s with allowWatchBookmarks, timeoutSeconds, and 410 Gone for a version
//     older than the event history window (an ERROR event carrying a Status, or HTTP 410);
//   * pods/binding: sets spec.nodeName, merges the Binding's annotations, sets PodScheduled=True;
//     201 Status Success; 409 if already bound, being deleted, scheduling-gated or the uid does
//     not match; 404 if missing;
//   * pods/eviction (policy/v1): deletes the pod (201 Status Success), or 429 when a disruption
//     budget registered with AddDisruptionBudget would drop below its minimum;
//   * events.k8s.io/v1 events must carry eventTime, reportingController, reportingInstance,
//     action and reason (422 otherwise).
// Not modelled: namespaces' existence, authentication, admission, finalizers and graceful
// deletion, strategic merge beyond conditions, JSON/apply patches, set-based label selectors.
//
// Fault injection (thread-safe setters, effective for requests and streams from then on):
// dropped watches (after N events, after T seconds, or all at once), delayed events, a seeded
// deterministic fraction of requests failing with 500/503 or throttled with 429 + Retry-After,
// and a shrinkable history window that turns old versions into 410s. Direct accessors read and
// write the store without HTTP and without faults (their writes are watch events too).
//
// Request log: every request is recorded (method, target as sent, decoded path and query; the
// latest request_log_limit of them) so tests can check which API calls a component makes.
//
// Thread-safety: every public method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "kube/client.h"

namespace tessera::kube::testing {

struct FakeApiServerOptions {
  int threads = 64;               // HTTP worker threads (each open connection or watch holds one)
  size_t history_limit = 200000;  // events kept for watch resumption
  double bookmark_interval_s = 1;
  bool gone_as_http = false;          // a too-old watch version: HTTP 410 instead of an ERROR event
  uint64_t seed = 1;                  // uids, generateName suffixes, injected faults
  size_t request_log_limit = 100000;  // requests kept by the log (the oldest are dropped)
};

struct FakeApiServerCounters {
  int64_t requests = 0;
  int64_t list_pages = 0;
  int64_t watches = 0;         // watch streams opened
  int64_t active_watches = 0;  // streams currently open
  int64_t watch_drops = 0;     // streams cut by fault injection
  int64_t gone = 0;            // 410 answers (watch versions and continue tokens)
  int64_t conflicts = 0;       // 409 Conflict answers (stale updates, bindings)
  int64_t bindings = 0;        // successful bindings
  int64_t evictions = 0;
  int64_t evictions_blocked = 0;
  int64_t injected_errors = 0;     // 500/503
  int64_t injected_throttles = 0;  // 429
};

// One request as it reached the server.
struct RecordedRequest {
  std::string method;  // GET, POST, PUT, PATCH, DELETE
  std::string target;  // path and query exactly as sent (percent-encoding intact)
  std::string path;    // the path, percent-decoded by the HTTP server
  std::multimap<std::string, std::string> query;  // decoded query parameters
  std::string authorization;                      // the Authorization header, if any
};

class FakeApiServer {
 public:
  explicit FakeApiServer(FakeApiServerOptions options = {});
  ~FakeApiServer();  // stops the server
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  // Binds 127.0.0.1 on an ephemeral port and serves on a background thread.
  Status Start();
  // Ends all streams and connections; idempotent. Idle keep-alive connections of clients still
  // alive are only closed by their 5 s keep-alive timeout, so destroy clients first.
  void Stop();
  int port() const { return port_; }
  std::string url() const;  // "http://127.0.0.1:<port>"
  // A client configuration for this server: no rate limit, short timeouts.
  ClientConfig client_config() const;

  // Direct access (no HTTP, no faults). Paths as in requests: a collection path
  // ("/api/v1/namespaces/ml/pods", "/api/v1/nodes") or an object path (".../pods/x"). Errors
  // are the Status the client would return for the same HTTP answer (see HttpError).
  Result<Json> Create(const std::string& collection_path, Json obj);
  // Creates or replaces (no version precondition).
  Result<Json> Upsert(const std::string& collection_path, Json obj);
  Result<Json> Update(const std::string& object_path, Json obj);
  Result<Json> MergePatch(const std::string& object_path, const Json& patch);
  Status Delete(const std::string& object_path);
  std::optional<Json> Get(const std::string& object_path) const;
  // All objects of the collection (one namespace when the path names one), ordered by key.
  std::vector<Json> List(const std::string& collection_path) const;
  std::string resource_version() const;

  // Eviction blocks when fewer than `min_available` non-terminal pods in `ns` matching `selector`
  // (labels, all must match) would remain.
  void AddDisruptionBudget(const std::string& name, const std::string& ns,
                           std::map<std::string, std::string> selector, int min_available);

  // Faults. 0 disables each one.
  void SetDropWatchesAfterEvents(int64_t n);
  void SetDropWatchesAfterSeconds(double s);
  void DropAllWatches();  // cuts every open stream once
  void SetEventDelay(double ms);
  // Fraction p of requests answered 500 or 503 (alternating by a seeded draw).
  void SetFailureRate(double p);
  // Fraction p of requests answered 429 with Retry-After: retry_after_s.
  void SetThrottleRate(double p, int retry_after_s = 1);
  // Keeps at most n events (compacting immediately): older versions become 410 Gone.
  void SetHistoryLimit(size_t n);
  void SetGoneAsHttp(bool http);
  void SetBookmarkInterval(double s);
  void ClearFaults();  // all of the above back to none (history limit to the option's value)

  FakeApiServerCounters counters() const;
  // The requests received since Start or the last ClearRequests (at most request_log_limit,
  // the latest), in arrival order, including those answered with an injected fault or an error.
  std::vector<RecordedRequest> Requests() const;
  void ClearRequests();
  // Successful bindings of one pod (above 1 only if it was deleted, recreated and bound again),
  // and all binding requests for it (above 1: someone tried to bind it twice).
  int64_t BindingsOf(const std::string& ns, const std::string& pod) const;
  int64_t BindingAttemptsOf(const std::string& ns, const std::string& pod) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace tessera::kube::testing
