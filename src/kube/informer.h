// Informer: a local cache of one kind of object (pods, nodes, leases, Tessera's custom
// resources) kept current by list + watch.
//
// Contract: Start() lists the collection (paged) and, once the cache holds the listed state,
// watches from the list's resourceVersion on a background thread. Bookmarks advance the stored
// resourceVersion; a watch that ends normally is resumed from the last version seen; a 410 Gone
// (expired version) triggers a relist, after which handlers see the difference (deletes first,
// then adds and updates) so that nothing is lost; an object whose uid changed under the same key
// (deleted and created again while unwatched) is a delete plus an add, never an update. The
// initial list, every 410 and every relist are logged on stderr. Other errors retry with
// exponential backoff and jitter.
// Handlers run on the informer thread (those of the initial list inside Start()), in event
// order, never concurrently with each other; the cache already holds the new state when a handler
// runs. Cache reads are thread-safe. Objects are keyed "namespace/name" ("name" for
// cluster-scoped). Start() may be called again after Stop().
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kube/client.h"

namespace tessera::kube {

std::string ObjectKey(const Json& obj);

struct InformerHandlers {
  std::function<void(const Json&)> on_add;
  std::function<void(const Json& old_obj, const Json& new_obj)> on_update;
  std::function<void(const Json&)> on_delete;
  std::function<void()> on_synced;  // after every (re)list has been applied
};

struct InformerStats {
  int64_t lists = 0;           // initial list + relists
  int64_t watch_restarts = 0;  // watches resumed after a normal close or an error
  int64_t gone = 0;            // 410 responses
  int64_t events = 0;
};

class Informer {
 public:
  // `path`: collection path, e.g. "/api/v1/pods"; `query`: selectors, e.g.
  // {{"fieldSelector", "spec.schedulerName=tessera"}}.
  Informer(Client& client, std::string path, std::map<std::string, std::string> query,
           InformerHandlers handlers, uint64_t seed = 1);
  ~Informer();

  // Initial list (blocking; the error is returned if it fails) then the background watch.
  Status Start();
  void Stop();
  bool synced() const { return synced_.load(); }
  // False from the moment a watch breaks (connection lost, 410 Gone, server error) until the
  // next watch delivers an event or bookmark or a relist completes, so changes made during the
  // gap may be missing; true again after `grace_s` even if a resumed watch stays quiet.
  bool current(double grace_s = 2.0) const;

  std::vector<Json> List() const;
  std::optional<Json> Get(const std::string& key) const;
  size_t size() const;
  std::string resource_version() const;
  InformerStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> synced_{false};
};

}  // namespace tessera::kube
