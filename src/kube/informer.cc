#include "kube/informer.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>

namespace tessera::kube {
namespace {

constexpr double kWatchTimeoutS = 300;
constexpr double kBackoffInitialS = 0.1;
constexpr double kBackoffMaxS = 5;

const std::string& ResourceVersionOf(const Json& obj) {
  static const std::string kEmpty;
  if (!obj.is_object()) return kEmpty;
  const auto md = obj.find("metadata");
  if (md == obj.end() || !md->is_object()) return kEmpty;
  const auto rv = md->find("resourceVersion");
  return rv != md->end() && rv->is_string() ? rv->get_ref<const std::string&>() : kEmpty;
}

std::string UidOf(const Json& obj) {
  if (!obj.is_object()) return "";
  const auto md = obj.find("metadata");
  if (md == obj.end() || !md->is_object()) return "";
  const auto uid = md->find("uid");
  return uid != md->end() && uid->is_string() ? uid->get<std::string>() : "";
}

// The same key with another uid is another object: the old one was deleted and a new one
// created under its name (e.g. a StatefulSet pod) while the watch did not see it.
bool Replaced(const Json& old_obj, const Json& new_obj) {
  const std::string a = UidOf(old_obj), b = UidOf(new_obj);
  return !a.empty() && !b.empty() && a != b;
}

}  // namespace

std::string ObjectKey(const Json& obj) {
  if (!obj.is_object()) return "";
  const auto md = obj.find("metadata");
  if (md == obj.end() || !md->is_object()) return "";
  std::string ns, name;
  if (auto it = md->find("namespace"); it != md->end() && it->is_string()) ns = *it;
  if (auto it = md->find("name"); it != md->end() && it->is_string()) name = *it;
  return ns.empty() ? name : ns + "/" + name;
}

struct Informer::Impl {
  Impl(Client& c, std::string p, std::map<std::string, std::string> q, InformerHandlers h,
       uint64_t seed, std::atomic<bool>* s)
      : client(c),
        path(std::move(p)),
        query(std::move(q)),
        handlers(std::move(h)),
        backoff(kBackoffInitialS, kBackoffMaxS, seed),
        synced(s) {}

  // Lists and applies the difference to the cache and the handlers. Only the informer's own
  // thread (or Start) writes the cache, so it reads it here without the lock. An object whose
  // uid changed under the same key is reported as a delete of the old one and an add of the new.
  // `why` (empty for the initial list) is logged with the counts.
  Status Relist(const std::string& why = "") {
    auto list = client.List(path, query);
    if (!list.ok()) return list.status();
    std::unordered_map<std::string, Json> fresh;
    Json& items = (*list)["items"];
    fresh.reserve(items.size());
    for (Json& item : items) {
      std::string key = ObjectKey(item);
      fresh.insert_or_assign(std::move(key), std::move(item));
    }
    std::string listed_rv;
    {
      std::lock_guard<std::mutex> lock(mu);
      cache.swap(fresh);
      rv = (*list)["metadata"].value("resourceVersion", "");
      listed_rv = rv;
      ++stats.lists;
    }
    std::unordered_map<std::string, Json>& old = fresh;
    int added = 0, updated = 0, replaced = 0, deleted = 0;
    for (const auto& [key, obj] : old) {
      const auto it = cache.find(key);
      if (it == cache.end() || Replaced(obj, it->second)) {
        ++(it == cache.end() ? deleted : replaced);
        if (handlers.on_delete) handlers.on_delete(obj);
      }
    }
    for (const auto& [key, obj] : cache) {
      const auto it = old.find(key);
      if (it == old.end() || Replaced(it->second, obj)) {
        if (it == old.end()) ++added;
        if (handlers.on_add) handlers.on_add(obj);
      } else if (ResourceVersionOf(it->second) != ResourceVersionOf(obj) ||
                 ResourceVersionOf(obj).empty()) {
        ++updated;
        if (handlers.on_update) handlers.on_update(it->second, obj);
      }
    }
    if (why.empty()) {
      std::fprintf(stderr, "informer %s: listed %zu objects at resourceVersion %s\n", path.c_str(),
                   cache.size(), listed_rv.c_str());
    } else {
      std::fprintf(stderr,
                   "informer %s: relisted (%s): %zu objects at resourceVersion %s; %d added, "
                   "%d updated, %d replaced (new uid), %d deleted\n",
                   path.c_str(), why.c_str(), cache.size(), listed_rv.c_str(), added, updated,
                   replaced, deleted);
    }
    synced->store(true);
    stale_since.store(0);
    if (handlers.on_synced) handlers.on_synced();
    return Status::Ok();
  }

  static double Monotonic() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void MarkStale() {
    double expected = 0;
    stale_since.compare_exchange_strong(expected, Monotonic());
  }

  bool OnEvent(const WatchEvent& ev) {
    if (stop.load()) return false;
    const std::string& new_rv = ResourceVersionOf(ev.object);
    if (ev.type == "BOOKMARK") {
      std::lock_guard<std::mutex> lock(mu);
      if (!new_rv.empty()) rv = new_rv;
      stale_since.store(0);
      return true;
    }
    if (ev.type != "ADDED" && ev.type != "MODIFIED" && ev.type != "DELETED") return true;
    // The server resumed the watch: what was missed arrives in order from here.
    stale_since.store(0);
    const std::string key = ObjectKey(ev.object);
    Json old;
    bool existed = false;
    const Json* current = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu);
      ++stats.events;
      if (!new_rv.empty()) rv = new_rv;
      auto it = cache.find(key);
      existed = it != cache.end();
      if (existed) old = std::move(it->second);
      if (ev.type == "DELETED") {
        if (existed) cache.erase(it);
      } else if (existed) {
        it->second = ev.object;
        current = &it->second;
      } else {
        current = &cache.emplace(key, ev.object).first->second;
      }
    }
    if (ev.type == "DELETED") {
      if (existed && handlers.on_delete) handlers.on_delete(old);
    } else if (existed && Replaced(old, *current)) {
      if (handlers.on_delete) handlers.on_delete(old);
      if (handlers.on_add) handlers.on_add(*current);
    } else if (existed) {
      if (handlers.on_update) handlers.on_update(old, *current);
    } else if (handlers.on_add) {
      handlers.on_add(*current);
    }
    return !stop.load();
  }

  void Sleep(double seconds) {
    std::unique_lock<std::mutex> lock(sleep_mu);
    sleep_cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return stop.load(); });
  }

  void Run() {
    while (!stop.load()) {
      std::string from;
      int64_t events_before;
      {
        std::lock_guard<std::mutex> lock(mu);
        from = rv;
        events_before = stats.events;
      }
      const auto begin = std::chrono::steady_clock::now();
      const Status st = client.Watch(
          path, query, from, [this](const WatchEvent& ev) { return OnEvent(ev); }, kWatchTimeoutS,
          cancel.get());
      if (stop.load()) break;
      int64_t events_after;
      {
        std::lock_guard<std::mutex> lock(mu);
        events_after = stats.events;
        if (HttpStatusOf(st) == 410) {
          ++stats.gone;
        } else {
          ++stats.watch_restarts;
        }
      }
      if (events_after > events_before) backoff.Reset();
      if (!st.ok()) MarkStale();
      if (st.ok()) {
        // Resume at once, unless the server keeps closing empty streams right away.
        const double lasted =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        if (lasted < 1 && events_after == events_before) Sleep(backoff.Next());
        continue;
      }
      if (HttpStatusOf(st) == 410) {
        std::fprintf(stderr, "informer %s: watch from resourceVersion %s expired (%s); relisting\n",
                     path.c_str(), from.c_str(), st.message().c_str());
        while (!stop.load()) {
          const Status ls = Relist("watch expired at resourceVersion " + from);
          if (ls.ok()) break;
          Sleep(std::max(backoff.Next(), RetryAfterOf(ls)));
        }
        continue;
      }
      Sleep(std::max(backoff.Next(), RetryAfterOf(st)));
    }
  }

  Client& client;
  const std::string path;
  const std::map<std::string, std::string> query;
  const InformerHandlers handlers;
  Backoff backoff;
  std::atomic<bool>* synced;

  mutable std::mutex mu;
  std::unordered_map<std::string, Json> cache;
  std::string rv;
  InformerStats stats;

  // Monotonic seconds since the watch broke and the view may miss changes; 0 while current.
  std::atomic<double> stale_since{0};

  std::thread thread;
  std::atomic<bool> stop{false};
  std::unique_ptr<CancelToken> cancel;
  std::mutex sleep_mu;
  std::condition_variable sleep_cv;
};

Informer::Informer(Client& client, std::string path, std::map<std::string, std::string> query,
                   InformerHandlers handlers, uint64_t seed)
    : impl_(std::make_unique<Impl>(client, std::move(path), std::move(query), std::move(handlers),
                                   seed, &synced_)) {}

Informer::~Informer() {
  Stop();
}

Status Informer::Start() {
  if (impl_->thread.joinable()) return FailedPrecondition("informer already started");
  impl_->stop.store(false);
  impl_->cancel = std::make_unique<CancelToken>();
  TESSERA_RETURN_IF_ERROR(impl_->Relist());
  impl_->thread = std::thread([this] { impl_->Run(); });
  return Status::Ok();
}

void Informer::Stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->sleep_mu);
    impl_->stop.store(true);
  }
  impl_->sleep_cv.notify_all();
  if (impl_->cancel) impl_->cancel->Cancel();
  if (impl_->thread.joinable()) impl_->thread.join();
}

bool Informer::current(double grace_s) const {
  const double since = impl_->stale_since.load();
  return since == 0 || Impl::Monotonic() - since > grace_s;
}

std::vector<Json> Informer::List() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<Json> out;
  out.reserve(impl_->cache.size());
  for (const auto& [key, obj] : impl_->cache) out.push_back(obj);
  return out;
}

std::optional<Json> Informer::Get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const auto it = impl_->cache.find(key);
  if (it == impl_->cache.end()) return std::nullopt;
  return it->second;
}

size_t Informer::size() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->cache.size();
}

std::string Informer::resource_version() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->rv;
}

InformerStats Informer::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

}  // namespace tessera::kube
