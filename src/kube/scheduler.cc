#include "kube/scheduler.h"

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <httplib.h>

#include "kube/informer.h"
#include "net/http_server.h"

namespace tessera::kube {

Status SchedulerRuntimeConfig::Validate() const {
  TESSERA_RETURN_IF_ERROR(core.Validate());
  if (leader_elect) TESSERA_RETURN_IF_ERROR(leader.Validate());
  if (bind_threads < 1 || bind_threads > 256)
    return InvalidArgument("binding.threads must be 1..256");
  if (!(cycle_interval_s >= 0) || cycle_interval_s > 60)
    return InvalidArgument("cycleIntervalSeconds must be in [0, 60]");
  return Status::Ok();
}

// ---- configuration ------------------------------------------------------------------------------

namespace {

Status CheckKeys(const YAML::Node& n, const std::string& path, std::set<std::string> known) {
  if (!n.IsMap()) return InvalidArgument(path + ": expected a mapping");
  for (const auto& kv : n) {
    const std::string k = kv.first.as<std::string>();
    if (!known.count(k))
      return InvalidArgument(path + (path.empty() ? "" : ".") + k + ": unknown key");
  }
  return Status::Ok();
}

template <typename T>
Status Get(const YAML::Node& n, const std::string& key, const std::string& path, T& out) {
  if (!n[key]) return Status::Ok();
  try {
    out = n[key].as<T>();
  } catch (const YAML::Exception&) {
    return InvalidArgument(path + (path.empty() ? "" : ".") + key + ": wrong type");
  }
  return Status::Ok();
}

Result<Resources> ParseResources(const YAML::Node& n, const std::string& path) {
  TESSERA_RETURN_IF_ERROR(CheckKeys(n, path, {"gpu", "cpu", "memoryGiB"}));
  double gpu = 0, cpu = 0, mem = 0;
  TESSERA_RETURN_IF_ERROR(Get(n, "gpu", path, gpu));
  TESSERA_RETURN_IF_ERROR(Get(n, "cpu", path, cpu));
  TESSERA_RETURN_IF_ERROR(Get(n, "memoryGiB", path, mem));
  if (gpu < 0 || cpu < 0 || mem < 0) return InvalidArgument(path + ": negative quantity");
  // Unset CPU and memory do not limit.
  Resources r;
  r.gpu = static_cast<int64_t>(std::llround(gpu * 1000));
  r.cpu = n["cpu"] ? static_cast<int64_t>(std::llround(cpu * 1000)) : int64_t{1} << 50;
  r.memory = n["memoryGiB"] ? static_cast<int64_t>(std::llround(mem * 1024)) : int64_t{1} << 50;
  return r;
}

}  // namespace

Result<SchedulerRuntimeConfig> ParseSchedulerConfig(const std::string& text) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument("line " + std::to_string(e.mark.line + 1) + ", column " +
                           std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  SchedulerRuntimeConfig c;
  if (!root || root.IsNull()) return c;
  TESSERA_RETURN_IF_ERROR(
      CheckKeys(root, "",
                {"schedulerName", "policy", "leaderElection", "binding", "metricsAddress",
                 "cycleIntervalSeconds", "podConditions", "podEvents", "admission",
                 "gangSettleSeconds", "podNoticeIntervalSeconds", "selectShareMechanism",
                 "migRelayout", "migRelayoutTimeoutSeconds", "rightsizeFloorMiB",
                 "rightsizeOtherModelMaxCompute", "queues", "seed"}));
  TESSERA_RETURN_IF_ERROR(Get(root, "schedulerName", "", c.core.scheduler_name));
  TESSERA_RETURN_IF_ERROR(Get(root, "policy", "", c.core.policy));
  TESSERA_RETURN_IF_ERROR(Get(root, "metricsAddress", "", c.metrics_addr));
  TESSERA_RETURN_IF_ERROR(Get(root, "cycleIntervalSeconds", "", c.cycle_interval_s));
  TESSERA_RETURN_IF_ERROR(Get(root, "podConditions", "", c.pod_conditions));
  TESSERA_RETURN_IF_ERROR(Get(root, "podEvents", "", c.pod_events));
  TESSERA_RETURN_IF_ERROR(Get(root, "gangSettleSeconds", "", c.core.gang_settle_s));
  TESSERA_RETURN_IF_ERROR(Get(root, "podNoticeIntervalSeconds", "", c.core.notice_interval_s));
  TESSERA_RETURN_IF_ERROR(Get(root, "selectShareMechanism", "", c.core.select_share_mechanism));
  TESSERA_RETURN_IF_ERROR(Get(root, "migRelayout", "", c.core.mig_relayout));
  TESSERA_RETURN_IF_ERROR(
      Get(root, "migRelayoutTimeoutSeconds", "", c.core.mig_relayout_timeout_s));
  TESSERA_RETURN_IF_ERROR(Get(root, "rightsizeFloorMiB", "", c.core.rightsize_floor_mib));
  TESSERA_RETURN_IF_ERROR(
      Get(root, "rightsizeOtherModelMaxCompute", "", c.core.rightsize_other_model_max_compute));
  TESSERA_RETURN_IF_ERROR(Get(root, "seed", "", c.core.seed));
  if (auto le = root["leaderElection"]) {
    const std::string p = "leaderElection";
    TESSERA_RETURN_IF_ERROR(CheckKeys(le, p,
                                      {"enabled", "namespace", "name", "leaseDurationSeconds",
                                       "renewDeadlineSeconds", "retryPeriodSeconds"}));
    TESSERA_RETURN_IF_ERROR(Get(le, "enabled", p, c.leader_elect));
    TESSERA_RETURN_IF_ERROR(Get(le, "namespace", p, c.leader.ns));
    TESSERA_RETURN_IF_ERROR(Get(le, "name", p, c.leader.name));
    TESSERA_RETURN_IF_ERROR(Get(le, "leaseDurationSeconds", p, c.leader.lease_duration_s));
    TESSERA_RETURN_IF_ERROR(Get(le, "renewDeadlineSeconds", p, c.leader.renew_deadline_s));
    TESSERA_RETURN_IF_ERROR(Get(le, "retryPeriodSeconds", p, c.leader.retry_period_s));
  }
  if (auto b = root["binding"]) {
    TESSERA_RETURN_IF_ERROR(CheckKeys(b, "binding", {"threads"}));
    TESSERA_RETURN_IF_ERROR(Get(b, "threads", "binding", c.bind_threads));
  }
  if (auto a = root["admission"]) {
    const std::string p = "admission";
    TESSERA_RETURN_IF_ERROR(
        CheckKeys(a, p,
                  {"usageHalfLifeSeconds", "backfill", "reservations", "maxReservedNodes",
                   "preemption", "fairSharing", "minRuntimeSeconds", "gpuEquivalents"}));
    TESSERA_RETURN_IF_ERROR(Get(a, "usageHalfLifeSeconds", p, c.core.admission.usage_half_life_s));
    TESSERA_RETURN_IF_ERROR(Get(a, "backfill", p, c.core.admission.backfill));
    TESSERA_RETURN_IF_ERROR(Get(a, "reservations", p, c.core.admission.reservations));
    TESSERA_RETURN_IF_ERROR(Get(a, "maxReservedNodes", p, c.core.admission.max_reserved_nodes));
    TESSERA_RETURN_IF_ERROR(Get(a, "preemption", p, c.core.admission.preemption));
    TESSERA_RETURN_IF_ERROR(Get(a, "fairSharing", p, c.core.admission.fair_sharing));
    TESSERA_RETURN_IF_ERROR(Get(a, "minRuntimeSeconds", p, c.core.admission.min_runtime_s));
    if (auto eq = a["gpuEquivalents"]) {
      if (!eq.IsMap()) return InvalidArgument(p + ".gpuEquivalents: expected a mapping");
      for (const auto& kv : eq) {
        try {
          c.core.admission.gpu_equivalents[kv.first.as<std::string>()] = kv.second.as<double>();
        } catch (const YAML::Exception&) {
          return InvalidArgument(p + ".gpuEquivalents." + kv.first.as<std::string>() +
                                 ": wrong type");
        }
      }
    }
  }
  if (auto qs = root["queues"]) {
    if (!qs.IsSequence()) return InvalidArgument("queues: expected a list");
    for (size_t i = 0; i < qs.size(); ++i) {
      const std::string p = "queues[" + std::to_string(i) + "]";
      const YAML::Node q = qs[i];
      TESSERA_RETURN_IF_ERROR(
          CheckKeys(q, p,
                    {"name", "cohort", "weight", "flavors", "preemptWithinQueue", "reclaim",
                     "withinQueue", "reclaimWithinCohort", "queueingStrategy"}));
      QueueSpec spec;
      TESSERA_RETURN_IF_ERROR(Get(q, "name", p, spec.name));
      TESSERA_RETURN_IF_ERROR(Get(q, "cohort", p, spec.cohort));
      TESSERA_RETURN_IF_ERROR(Get(q, "weight", p, spec.weight));
      // preemptWithinQueue and reclaim (booleans) are the short form of withinQueue and
      // reclaimWithinCohort: true/false = LowerPriority/Never and Any/Never.
      if (q["preemptWithinQueue"] && q["withinQueue"])
        return InvalidArgument(p + ": give either preemptWithinQueue or withinQueue, not both");
      if (q["reclaim"] && q["reclaimWithinCohort"])
        return InvalidArgument(p + ": give either reclaim or reclaimWithinCohort, not both");
      bool within = true, reclaim = true;
      TESSERA_RETURN_IF_ERROR(Get(q, "preemptWithinQueue", p, within));
      TESSERA_RETURN_IF_ERROR(Get(q, "reclaim", p, reclaim));
      if (!within) spec.within_queue = WithinQueuePreemption::kNever;
      if (!reclaim) spec.reclaim = ReclaimPreemption::kNever;
      auto named = [&](const char* key, auto parse, auto* out) -> Status {
        std::string text;
        TESSERA_RETURN_IF_ERROR(Get(q, key, p, text));
        if (text.empty()) return Status::Ok();
        auto value = parse(text);
        if (!value.ok()) return InvalidArgument(p + "." + key + ": " + value.status().message());
        *out = *value;
        return Status::Ok();
      };
      TESSERA_RETURN_IF_ERROR(named("withinQueue", ParseWithinQueuePreemption, &spec.within_queue));
      TESSERA_RETURN_IF_ERROR(named("reclaimWithinCohort", ParseReclaimPreemption, &spec.reclaim));
      TESSERA_RETURN_IF_ERROR(named("queueingStrategy", ParseQueueingStrategy, &spec.queueing));
      if (!q["flavors"] || !q["flavors"].IsSequence())
        return InvalidArgument(p + ".flavors: required list");
      for (size_t k = 0; k < q["flavors"].size(); ++k) {
        const std::string fp = p + ".flavors[" + std::to_string(k) + "]";
        const YAML::Node f = q["flavors"][k];
        TESSERA_RETURN_IF_ERROR(
            CheckKeys(f, fp, {"name", "models", "nominal", "borrowingLimit", "lendingLimit"}));
        FlavorQuota fq;
        TESSERA_RETURN_IF_ERROR(Get(f, "name", fp, fq.name));
        if (auto m = f["models"]) {
          if (!m.IsSequence()) return InvalidArgument(fp + ".models: expected a list");
          for (const auto& name : m) {
            auto id = GpuCatalog::Builtin().Find(name.as<std::string>());
            if (!id)
              return InvalidArgument(fp + ".models: unknown GPU model '" + name.as<std::string>() +
                                     "'");
            fq.models |= ModelMask{1} << *id;
          }
        }
        if (!f["nominal"]) return InvalidArgument(fp + ".nominal: required");
        auto nominal = ParseResources(f["nominal"], fp + ".nominal");
        if (!nominal.ok()) return nominal.status();
        fq.nominal = *nominal;
        if (f["borrowingLimit"]) {
          auto r = ParseResources(f["borrowingLimit"], fp + ".borrowingLimit");
          if (!r.ok()) return r.status();
          fq.borrowing_limit = *r;
        }
        if (f["lendingLimit"]) {
          auto r = ParseResources(f["lendingLimit"], fp + ".lendingLimit");
          if (!r.ok()) return r.status();
          r->cpu = std::min(r->cpu, fq.nominal.cpu);
          r->memory = std::min(r->memory, fq.nominal.memory);
          fq.lending_limit = *r;
        }
        spec.flavors.push_back(fq);
      }
      c.core.queues.push_back(spec);
    }
  }
  // The replica identity usually comes from the command line: validate with a placeholder.
  SchedulerRuntimeConfig check = c;
  if (check.leader.identity.empty()) check.leader.identity = "unset";
  TESSERA_RETURN_IF_ERROR(check.Validate());
  return c;
}

Result<SchedulerRuntimeConfig> LoadSchedulerConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return IoError("cannot read scheduler config '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  auto c = ParseSchedulerConfig(ss.str());
  if (!c.ok()) return Status(c.status().code(), path + ": " + c.status().message());
  return c;
}

// ---- runtime ----------------------------------------------------------------------------------

Result<QueueSpec> QueueFromObject(const Json& obj) {
  const std::string name =
      obj.contains("metadata") ? obj["metadata"].value("name", std::string()) : std::string();
  if (name.empty() || !obj.contains("spec") || !obj["spec"].is_object())
    return InvalidArgument("Queue object without metadata.name or spec");
  const Json& spec = obj["spec"];
  Json q = {{"name", name}};
  for (const char* k : {"cohort", "weight", "flavors", "queueingStrategy"})
    if (spec.contains(k)) q[k] = spec[k];
  if (spec.contains("preemption") && spec["preemption"].is_object()) {
    const Json& p = spec["preemption"];
    for (const char* k : {"withinQueue", "reclaimWithinCohort"})
      if (p.contains(k)) q[k] = p[k];
  }
  // JSON is YAML: reuse the configuration parser and its validation.
  auto c = ParseSchedulerConfig("queues: [" + q.dump() + "]");
  if (!c.ok()) return InvalidArgument("Queue " + name + ": " + c.status().message());
  return c->core.queues.at(0);
}

struct Scheduler::Impl {
  Client& client;
  SchedulerRuntimeConfig config;
  std::mutex mu;  // guards core
  std::unique_ptr<SchedulerCore> core;
  std::condition_variable wake;
  bool dirty = true;

  std::mutex qmu;
  std::condition_variable qcv;
  std::deque<std::function<void()>> work;
  // Binds and evictions, served before `work` (pod notices): a burst of notices, each a
  // condition patch and an Event, must not hold placements back.
  std::deque<std::function<void()>> urgent;
  // The latest notice per pod whose task has not run yet: why it waits ("ns/name"; newer ones
  // replace it, so at most one per pod waits however often the why changes), and each other
  // reason apart ("ns/name\n<reason>"), so notices of different kinds never replace each other.
  std::map<std::string, PodNotice> queued_notices;
  int in_flight = 0;
  bool quit = false;

  mutable std::mutex smu;
  RuntimeStats st;
  PromHistogram cycle_duration{PromHistogram::CycleBounds()};  // guarded by smu
  std::set<std::pair<std::string, int>> logged_write_errors;   // guarded by smu
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();

  Impl(Client& c, SchedulerRuntimeConfig cfg) : client(c), config(std::move(cfg)) {}

  double Now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  // A pod condition or Event the API server refused: counted, and logged once per kind and
  // HTTP status (a missing permission would otherwise only show as absent conditions).
  void WriteFailed(const char* what, const Status& s) {
    if (s.ok() || HttpStatusOf(s) == 404) return;
    std::lock_guard<std::mutex> l(smu);
    ++st.status_write_errors;
    if (logged_write_errors.insert({what, HttpStatusOf(s)}).second)
      std::fprintf(stderr,
                   "tessera scheduler: writing %s failed: %s (later failures like it are only "
                   "counted in tessera_status_write_errors_total)\n",
                   what, s.message().c_str());
  }

  void Enqueue(std::function<void()> f, bool is_urgent = false) {
    {
      std::lock_guard<std::mutex> l(qmu);
      (is_urgent ? urgent : work).push_back(std::move(f));
      ++in_flight;
    }
    qcv.notify_one();
  }
  void EnqueueUrgent(std::function<void()> f) { Enqueue(std::move(f), true); }

  void Worker() {
    while (true) {
      std::function<void()> f;
      {
        std::unique_lock<std::mutex> l(qmu);
        qcv.wait(l, [&] { return quit || !work.empty() || !urgent.empty(); });
        auto& q = !urgent.empty() ? urgent : work;
        if (q.empty()) return;
        f = std::move(q.front());
        q.pop_front();
      }
      f();
      {
        std::lock_guard<std::mutex> l(qmu);
        --in_flight;
      }
      qcv.notify_all();
    }
  }

  void Drain() {
    std::unique_lock<std::mutex> l(qmu);
    qcv.wait(l, [&] { return in_flight == 0; });
  }

  void MarkDirty() {
    {
      std::lock_guard<std::mutex> l(mu);
      dirty = true;
    }
    wake.notify_one();
  }

  // Writes a desired layout into the node's MigLayout object (created on first use).
  Status RecordLayout(const LayoutAction& a) {
    const std::string path = std::string(kMigLayoutsPath) + "/" + a.node;
    const Json entry = {{"revision", a.revision},
                        {"migEnabled", a.mig_enabled},
                        {"layout", a.layout},
                        {"reason", a.reason.substr(0, 1024)}};
    const Json gpus = {{std::to_string(a.gpu), entry}};
    Status s;
    for (int attempt = 0; attempt < 4; ++attempt) {
      s = client.MergePatch(path, {{"spec", {{"nodeName", a.node}, {"gpus", gpus}}}}).status();
      if (HttpStatusOf(s) == 404) {
        const Json obj = {{"apiVersion", "tessera.io/v1alpha1"},
                          {"kind", "MigLayout"},
                          {"metadata", {{"name", a.node}}},
                          {"spec", {{"nodeName", a.node}, {"gpus", gpus}}}};
        s = client.Post(kMigLayoutsPath, obj).status();
        if (HttpStatusOf(s) == 409) continue;  // created meanwhile: patch it
      }
      const int code = HttpStatusOf(s);
      if (s.ok() || (code != 0 && code != 429 && code < 500)) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(20 << attempt));
    }
    return s;
  }

  void Dispatch(CycleOutput out) {
    for (auto& b : out.binds) {
      EnqueueUrgent([this, b = std::move(b)] {
        // Transient failures (5xx, 429, connection errors) retry the same placement, so the
        // ledger never disagrees with the API server.
        Status s;
        for (int attempt = 0; attempt < 8; ++attempt) {
          s = client.Bind(b.ns, b.name, b.uid, b.node, b.annotations);
          const int code = HttpStatusOf(s);
          if (s.ok() || code == 404 || code == 409 || code == 400 || code == 403 || code == 422)
            break;
          const double ra = RetryAfterOf(s);
          std::this_thread::sleep_for(std::chrono::duration<double>(
              ra > 0 ? std::min(ra, 2.0) : 0.02 * (1 << std::min(attempt, 5))));
        }
        std::lock_guard<std::mutex> l(smu);
        if (s.ok()) {
          ++st.binds_ok;
          st.last_bind_s = Now();
          if (st.first_bind_s < 0) st.first_bind_s = st.last_bind_s;
        } else {
          ++st.binds_failed;
          std::lock_guard<std::mutex> lc(mu);
          core->BindFailed(b, s);
          dirty = true;
        }
      });
    }
    for (auto& a : out.layouts) {
      EnqueueUrgent([this, a = std::move(a)] {
        Status s = RecordLayout(a);
        if (s.ok()) return;
        std::fprintf(stderr,
                     "tessera scheduler: recording the MIG layout of %s GPU %d failed: %s\n",
                     a.node.c_str(), a.gpu, s.message().c_str());
        std::lock_guard<std::mutex> lc(mu);
        core->LayoutReported(a.node, a.gpu, a.revision, false,
                             "the layout could not be recorded: " + s.message());
        dirty = true;
      });
    }
    for (auto& e : out.evictions) {
      EnqueueUrgent([this, e = std::move(e)] {
        Status s = client.Evict(e.ns, e.name);
        if (s.ok() && config.pod_events)
          WriteFailed("an Event",
                      client.PodEvent(e.ns, e.name, e.uid, "Warning", e.event_reason, e.reason));
        if (!s.ok() && HttpStatusOf(s) != 404) {
          std::lock_guard<std::mutex> lc(mu);
          core->EvictionFailed(e, s);
          dirty = true;
        }
        std::lock_guard<std::mutex> l(smu);
        ++st.evictions;
      });
    }
    if (config.pod_events) {
      for (auto& e : out.events) {
        Enqueue([this, e = std::move(e)] {
          WriteFailed("an Event", client.PodEvent(e.ns, e.name, e.uid, e.type, e.reason, e.note));
        });
      }
    }
    for (auto& fresh : out.notices) {
      // Why a pod waits is sent as it last stood; every other notice (SliceMissing,
      // NodeOvercommitted, ...) is sent each time, beside the others of the same pod.
      const bool waiting = fresh.reason == "Unschedulable" || fresh.reason == "InvalidRequest";
      const std::string key = fresh.ns + "/" + fresh.name + (waiting ? "" : "\n" + fresh.reason);
      {
        std::lock_guard<std::mutex> l(qmu);
        // A task for this pod (and reason) is queued already: it sends the latest notice.
        if (!queued_notices.insert_or_assign(key, std::move(fresh)).second) continue;
      }
      Enqueue([this, key] {
        PodNotice n;
        {
          std::lock_guard<std::mutex> l(qmu);
          auto it = queued_notices.find(key);
          if (it == queued_notices.end()) return;
          n = std::move(it->second);
          queued_notices.erase(it);
        }
        if (config.pod_conditions &&
            (n.reason == "Unschedulable" || n.reason == "InvalidRequest")) {
          Json patch = {
              {"status",
               {{"conditions",
                 Json::array(
                     {{{"type", "PodScheduled"},
                       {"status", "False"},
                       {"reason", n.reason == "Unschedulable" ? "Unschedulable" : "SchedulerError"},
                       {"message", n.message},
                       {"lastTransitionTime", MicroTimeNow().substr(0, 19) + "Z"}}})}}}};
          auto path = BuildApiPath({"api", "v1", "namespaces", n.ns, "pods", n.name, "status"});
          if (path.ok() && ValidateDns1123Label("namespace", n.ns).ok() &&
              ValidateDns1123Subdomain("pod name", n.name).ok())
            WriteFailed("a pod condition",
                        client.StrategicMergePatch(*path, patch).status());  // keeps others
        }
        // What a restart finds again on running pods is told once, whichever core tells it.
        const bool once = n.reason == "AdoptFailed" || n.reason == "SliceMissing" ||
                          n.reason == "NodeOvercommitted" || n.reason == "OutsideQueue";
        if (config.pod_events)
          WriteFailed("an Event",
                      client.PodEvent(n.ns, n.name, n.uid, "Warning",
                                      n.reason == "Unschedulable" ? "FailedScheduling" : n.reason,
                                      n.message, once));
        std::lock_guard<std::mutex> l(smu);
        ++st.notices;
      });
    }
  }
};

Scheduler::Scheduler(Client& client, SchedulerRuntimeConfig config)
    : impl_(std::make_unique<Impl>(client, std::move(config))) {}
Scheduler::~Scheduler() = default;

RuntimeStats Scheduler::stats() const {
  RuntimeStats s;
  {
    std::lock_guard<std::mutex> l(impl_->smu);
    s = impl_->st;
  }
  std::lock_guard<std::mutex> l(impl_->mu);
  if (impl_->core) s.core = impl_->core->stats();
  return s;
}

Status Scheduler::Run(std::atomic<bool>& stop) {
  Impl& im = *impl_;
  TESSERA_RETURN_IF_ERROR(im.config.Validate());
  // Health and metrics, served by every replica (leader or not), on a bounded server.
  std::unique_ptr<net::HttpServer> http;
  if (!im.config.metrics_addr.empty()) {
    net::HttpServerOptions ho;
    TESSERA_RETURN_IF_ERROR(
        net::ParseListenAddress(im.config.metrics_addr, "metricsAddress", ho.address, ho.port));
    http = std::make_unique<net::HttpServer>(ho);
    http->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok", "text/plain");
    });
    net::HttpServer* server = http.get();
    http->Get("/metrics", [&im, this, server](const httplib::Request&, httplib::Response& res) {
      const RuntimeStats st = stats();
      std::string body;
      {
        std::lock_guard<std::mutex> l(im.mu);
        if (im.core) body = im.core->Metrics(im.Now());
      }
      body +=
          "# HELP tessera_leader 1 on the replica that schedules.\n# TYPE tessera_leader gauge\n";
      body += std::string("tessera_leader ") + (st.leading ? "1" : "0") + "\n";
      body += "# HELP tessera_binding_errors_total Bindings that failed.\n";
      body += "# TYPE tessera_binding_errors_total counter\n";
      body += "tessera_binding_errors_total " + std::to_string(st.binds_failed) + "\n";
      body +=
          "# HELP tessera_status_write_errors_total Pod conditions and Events the API server "
          "refused.\n# TYPE tessera_status_write_errors_total counter\n";
      body += "tessera_status_write_errors_total " + std::to_string(st.status_write_errors) + "\n";
      body += "# HELP tessera_bindings_total Pods bound.\n# TYPE tessera_bindings_total counter\n";
      body += "tessera_bindings_total " + std::to_string(st.binds_ok) + "\n";
      {
        std::lock_guard<std::mutex> l(im.smu);
        body += im.cycle_duration.Render("tessera_scheduling_cycle_duration_seconds",
                                         "Wall time of one scheduling cycle of the leader.");
      }
      body += net::HttpServerMetrics(server->stats());
      res.set_content(body, "text/plain; version=0.0.4");
    });
    if (Status started = http->Start(); !started.ok())
      return IoError("metricsAddress " + im.config.metrics_addr + ": " + started.message());
  }
  // Leadership.
  std::atomic<bool> leading{!im.config.leader_elect};
  std::atomic<bool> lost{false};
  std::atomic<bool> elect_stop{false};
  std::unique_ptr<LeaderElector> elector;
  std::thread elect_thread;
  if (im.config.leader_elect) {
    elector = std::make_unique<LeaderElector>(im.client, im.config.leader);
    elect_thread = std::thread([&] {
      elector->Run(
          elect_stop, [&] { leading = true; },
          [&] {
            if (leading.exchange(false)) lost = true;
          });
    });
    while (!stop.load() && !leading.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto finish = [&](Status s) {
    elect_stop = true;
    if (elect_thread.joinable()) elect_thread.join();
    return s;
  };
  if (stop.load()) return finish(Status::Ok());
  {
    std::lock_guard<std::mutex> l(im.smu);
    im.st.leading = true;
  }
  SchedulerConfig core_config = im.config.core;
  if (im.config.queue_objects) {
    auto objs = im.client.List("/apis/tessera.io/v1alpha1/queues");
    if (objs.ok()) {
      std::set<std::string> names;
      for (const auto& q : core_config.queues) names.insert(q.name);
      for (const auto& o : (*objs)["items"]) {
        auto q = QueueFromObject(o);
        if (!q.ok()) {
          std::fprintf(stderr, "tessera scheduler: ignoring %s\n", q.status().message().c_str());
          continue;
        }
        if (names.count(q->name)) continue;
        // An object the CRD accepts may still be one admission refuses (its checks are
        // stricter): skip it rather than fail every replica that becomes leader.
        SchedulerConfig trial = core_config;
        trial.queues.push_back(*q);
        if (auto ok = SchedulerCore::Create(trial); !ok.ok()) {
          std::fprintf(stderr, "tessera scheduler: ignoring Queue %s: %s\n", q->name.c_str(),
                       ok.status().message().c_str());
          continue;
        }
        names.insert(q->name);
        core_config.queues.push_back(*q);
      }
    }
  }
  auto core = SchedulerCore::Create(core_config);
  if (!core.ok()) return finish(core.status());
  {
    std::lock_guard<std::mutex> l(im.mu);
    im.core = std::move(*core);
  }
  // Informers: nodes first, then pods.
  auto locked = [&](auto f) {
    return [&im, f](const Json& o) {
      {
        std::lock_guard<std::mutex> l(im.mu);
        f(*im.core, o);
        im.dirty = true;
      }
      im.wake.notify_one();
    };
  };
  InformerHandlers nh;
  nh.on_add = locked([](SchedulerCore& c, const Json& o) { c.UpsertNode(o); });
  nh.on_update = [&](const Json&, const Json& o) {
    locked([](SchedulerCore& c, const Json& x) { c.UpsertNode(x); })(o);
  };
  nh.on_delete = locked([](SchedulerCore& c, const Json& o) { c.DeleteNode(o); });
  Informer nodes(im.client, "/api/v1/nodes", {}, nh, im.config.core.seed);
  InformerHandlers ph;
  ph.on_add = locked([](SchedulerCore& c, const Json& o) { c.UpsertPod(o); });
  ph.on_update = [&](const Json&, const Json& o) {
    locked([](SchedulerCore& c, const Json& x) { c.UpsertPod(x); })(o);
  };
  ph.on_delete = locked([](SchedulerCore& c, const Json& o) { c.DeletePod(o); });
  Informer pods(im.client, "/api/v1/pods",
                {{"fieldSelector", "status.phase!=Succeeded,status.phase!=Failed"}}, ph,
                im.config.core.seed + 1);
  // Initial lists: transient failures (5xx, 429, connection errors) are retried with backoff;
  // anything else (e.g. 401, 403) is returned.
  auto start = [&](Informer& inf) {
    Backoff backoff(0.05, 2.0, im.config.core.seed);
    while (true) {
      Status st = inf.Start();
      const int code = HttpStatusOf(st);
      if (st.ok() || stop.load() || (code != 0 && code != 429 && code < 500)) return st;
      std::this_thread::sleep_for(std::chrono::duration<double>(backoff.Next()));
    }
  };
  // MigLayout objects: the node agents' reports on the layouts asked for. Without the CRD
  // (404), MIG re-layouts are off and slice pods use the layouts the nodes have.
  InformerHandlers mh;
  mh.on_add = locked([](SchedulerCore& c, const Json& o) { c.UpsertMigLayout(o); });
  mh.on_update = [&](const Json&, const Json& o) {
    locked([](SchedulerCore& c, const Json& x) { c.UpsertMigLayout(x); })(o);
  };
  Informer layouts(im.client, kMigLayoutsPath, {}, mh, im.config.core.seed + 2);
  Status s = start(nodes);
  if (!s.ok()) return finish(s);
  s = start(pods);
  if (!s.ok()) {
    nodes.Stop();
    return finish(s);
  }
  bool watching_layouts = false;
  if (im.config.core.mig_relayout) {
    s = start(layouts);
    if (s.ok()) {
      watching_layouts = true;
    } else {
      std::fprintf(stderr,
                   "tessera scheduler: MigLayout objects unavailable (%s); MIG re-layouts are "
                   "off\n",
                   s.message().c_str());
      std::lock_guard<std::mutex> l(im.mu);
      im.core->SetRelayoutEnabled(false);
    }
  }
  {
    std::lock_guard<std::mutex> l(im.smu);
    im.st.started_s = im.Now();
  }
  std::vector<std::thread> workers;
  for (int i = 0; i < im.config.bind_threads; ++i) workers.emplace_back([&] { im.Worker(); });
  double last_cycle = -1;
  while (!stop.load() && leading.load()) {
    CycleOutput out;
    double cycle_s = 0;
    {
      std::unique_lock<std::mutex> l(im.mu);
      im.wake.wait_for(l, std::chrono::milliseconds(200), [&] { return im.dirty || stop.load(); });
      const double now = im.Now();
      if (now - last_cycle < im.config.cycle_interval_s) {
        l.unlock();
        std::this_thread::sleep_for(
            std::chrono::duration<double>(im.config.cycle_interval_s - (now - last_cycle)));
        continue;
      }
      // A watch that broke may have missed changes (a node deleted, a pod recreated): no
      // decisions on such a view until the informer has caught up or relisted.
      if (!nodes.current() || !pods.current()) {
        l.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      im.dirty = false;
      last_cycle = now;
      const auto started = std::chrono::steady_clock::now();
      out = im.core->Cycle(now);
      cycle_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    }
    {
      std::lock_guard<std::mutex> l(im.smu);
      ++im.st.cycles;
      im.cycle_duration.Observe(cycle_s);
    }
    if (!out.binds.empty() || !out.evictions.empty() || !out.notices.empty() ||
        !out.layouts.empty() || !out.events.empty())
      im.Dispatch(std::move(out));
  }
  // Graceful shutdown: finish in-flight work, stop watching, give up the lease.
  im.Drain();
  {
    std::lock_guard<std::mutex> l(im.qmu);
    im.quit = true;
  }
  im.qcv.notify_all();
  for (auto& w : workers) w.join();
  if (watching_layouts) layouts.Stop();
  pods.Stop();
  nodes.Stop();
  {
    std::lock_guard<std::mutex> l(im.smu);
    im.st.leading = false;
  }
  // Lost leadership ends the process with the reason; its restart rejoins the election with a
  // fresh view of the cluster.
  if (lost.load() && !stop.load())
    return finish(Unavailable("lost leadership: " + elector->lost_reason()));
  return finish(Status::Ok());
}

}  // namespace tessera::kube
