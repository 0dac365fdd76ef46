// tessera-bench-sharing-replay: replays a sharing scenario (sim/sharing_scenario.h) through the
// Kubernetes scheduler's decision logic (SchedulerCore, in-process, no API server) and sets its
// outcome beside `tessera sim sharing`'s tessera strategy on the same workloads.
//
//   tessera-bench-sharing-replay [--scenario FILE] [--seed N] [--json FILE] [--static-mig]
//                                [--hours H] [--cycle-interval S] [--restart-every S]
//                                [--stale-reports] [--shrink-host F] [--progress]
//
// Nodes become Node objects with the scenario's allocatable CPU/memory and a GPU inventory
// annotation (MIG off everywhere, as the sim's tessera strategy starts). A scenario's node
// protection (a `sim sharing` option the scheduler does not have) is turned off for both paths,
// with a note on stdout. Each workload becomes a
// Pod as a user would write it: whole-GPU work asks nvidia.com/gpu: N in one pod, a fraction
// tessera.io/gpu-memory (+ tessera.io/gpu-compute); tessera.io/isolation, tessera.io/gpu-models
// (the demand's model mask) and host CPU/memory requests. Simulated time: at each event time
// departures are deleted (the scheduler cycles if any), pods past their patience are deleted
// (gave up), arrivals are added and the scheduler cycles again; with --cycle-interval S it
// cycles only at multiples of S seconds. Every bind is confirmed at once (the pod
// comes back with nodeName and the bind's annotations), every MIG re-layout is reported applied
// at once followed by another cycle at the same time; an eviction deletes the pod. With
// --restart-every S a new core takes over at every multiple of S seconds: it is given the
// nodes with the MIG layouts applied so far and every pod (bound pods with their annotations),
// as a restarted scheduler lists them; it then goes on from there. With --stale-reports every
// node tells each new core that MIG is off on all its GPUs (a report that lags the node, or is
// wrong), and nothing corrects it: the bound pods' assignments must keep what they name. With
// --shrink-host F every other new core (the first, third, ...) is given nodes whose allocatable
// CPU and memory are F of the scenario's (the kubelet reserved more, or the node was resized),
// the others the full amounts: bound pods beyond their node's CPU or memory must keep their GPUs.
//
// Checks every bind: tessera.io/assignment decodes, names the bind's node and concrete GPUs,
// MIG assignments name an instance, and no MIG instance or whole GPU is given twice at once;
// and that every restarted core adopts every bound pod.
// Exits 1 when a check fails or the counts are inconsistent (placed + abandoned + never placed
// + evicted != workloads), 2 on bad input. The two paths disagreeing, and times where the
// scheduler still re-lays out or binds after 64 cycles ("unsettled"), are reported, not failures.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include "cluster/gpu_catalog.h"
#include "cluster/mig_geometry.h"
#include "kube/scheduler_core.h"
#include "sim/sharing_sim.h"

namespace tessera::kube {
namespace {

// Per GPU its MIG layout (MigLayoutString form), or "" for MIG off; GPUs past the list: off.
Json NodeJson(const NodeSpec& n, const std::vector<std::string>& layouts) {
  const GpuModelInfo& info = GpuCatalog::Builtin().Get(n.model);
  std::vector<GpuInventoryEntry> inv;
  for (int g = 0; g < n.gpu_count; ++g) {
    const std::string layout = g < static_cast<int>(layouts.size()) ? layouts[g] : "";
    inv.push_back({g, "GPU-" + n.name + "-" + std::to_string(g), info.name, info.memory_mib,
                   !layout.empty(), layout, true});
  }
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", n.name}, {"annotations", {{kAnnotationInventory, EncodeInventory(inv)}}}}},
          {"spec", Json::object()},
          {"status",
           {{"allocatable",
             {{"cpu", std::to_string(n.cpu.value()) + "m"},
              {"memory", std::to_string(n.memory.value()) + "Mi"},
              {"nvidia.com/gpu", std::to_string(n.gpu_count)}}},
            {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

std::string PodName(WorkloadId id) {
  return "w" + std::to_string(id);
}

// `priority` is the class's (spec.priority, as a PriorityClass would set it); `generation` > 0
// names a pod recreated after an eviction (a new uid, as its controller would create).
Json PodJson(const SharingWorkload& w, int priority, int generation, const std::string& node = "",
             const std::map<std::string, std::string>& extra = {}) {
  const SliceDemand& d = w.demand;
  Json ann = Json::object();
  ann[kAnnotationIsolation] = IsolationName(d.isolation);
  if (d.models != 0) {
    std::string models;
    const GpuCatalog& cat = GpuCatalog::Builtin();
    for (size_t m = 0; m < cat.size() && m < 64; ++m)
      if ((d.models >> m) & 1)
        models += (models.empty() ? "" : ",") + cat.Get(static_cast<GpuModelId>(m)).name;
    ann[kAnnotationGpuModels] = models;
  }
  for (const auto& [k, v] : extra) ann[k] = v;
  Json limits = Json::object();
  if (d.whole_gpus > 0) {
    limits["nvidia.com/gpu"] = std::to_string(d.whole_gpus);
  } else {
    limits["tessera.io/gpu-memory"] = std::to_string(d.memory_mib) + "Mi";
    if (d.compute_pct > 0) limits["tessera.io/gpu-compute"] = std::to_string(d.compute_pct);
  }
  Json spec = {{"schedulerName", "tessera"},
               {"containers",
                Json::array({{{"name", "main"},
                              {"resources",
                               {{"limits", limits},
                                {"requests",
                                 {{"cpu", std::to_string(d.cpu.value()) + "m"},
                                  {"memory", std::to_string(d.host_memory.value()) + "Mi"}}}}}}})}};
  if (!node.empty()) spec["nodeName"] = node;
  if (priority != 0) spec["priority"] = priority;
  const std::string uid =
      "uid-" + std::to_string(w.id) + (generation > 0 ? "-" + std::to_string(generation) : "");
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", PodName(w.id)}, {"namespace", "replay"}, {"uid", uid}, {"annotations", ann}}},
          {"spec", spec},
          {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

struct ReplayResult {
  // evicted: preemptions; an evicted workload is recreated and counts as placed again only
  // once bound again (evicted_not_replaced: never bound again).
  int64_t workloads = 0, placed = 0, abandoned = 0, never_placed = 0, evicted = 0;
  int64_t evicted_not_replaced = 0;
  int64_t relayouts = 0, cycles = 0, violations = 0;
  int64_t restarts = 0;        // scheduler cores replaced (--restart-every)
  int64_t adopt_failures = 0;  // bound pods a core could not account (AdoptFailed)
  // Pods told their node's report lacks what they hold (SliceMissing): only stale reports
  // should cause any.
  int64_t slice_missing = 0;
  int64_t overcommitted = 0;  // NodeOvercommitted notices (--shrink-host)
  double p50_wait_s = 0, p95_wait_s = 0;
  std::vector<int64_t> placed_by_class;
  std::map<std::string, int64_t> placed_by_kind;  // assignment kind of each bind
  std::vector<uint8_t> placed_workloads;
  std::vector<std::string> placement_of;  // like SharingMetrics::placement_of
  std::vector<std::string> violation_samples;
  // Times at which the scheduler still asked for re-layouts or binds after 64 cycles (a
  // liveness finding about the scheduler, reported but not a check failure).
  int64_t unsettled = 0;
  std::vector<std::string> unsettled_samples;
  // Why pods waited: the scheduler's notice messages without their figures, and how often.
  std::map<std::string, int64_t> notices;
};

// A notice message with digits and parenthesised details dropped, so that notices of one kind
// count together.
std::string NoticeKey(const std::string& msg) {
  std::string out;
  int depth = 0;
  for (char c : msg) {
    if (c == '(') ++depth;
    if (depth == 0 && !(c >= '0' && c <= '9')) out += c;
    if (c == ')' && depth > 0) --depth;
  }
  return out.substr(0, 400);
}

class Replay {
 public:
  Replay(const SharingScenario& s, const std::vector<SharingWorkload>& w, SchedulerCore& core)
      : s_(s),
        w_(w),
        core_(&core),
        state_(w.size(), kFuture),
        bound_node_(w.size()),
        wait_from_(w.size(), 0),
        end_t_(w.size(), -1),
        generation_(w.size(), 0),
        bound_annotations_(w.size()) {
    r_.workloads = static_cast<int64_t>(w.size());
    r_.placed_by_class.assign(s.classes.size(), 0);
    r_.placed_workloads.assign(w.size(), 0);
    r_.placement_of.assign(w.size(), "");
  }

  Result<ReplayResult> Run() {
    specs_ = SharingNodeSpecs(s_);
    const std::vector<NodeSpec>& specs = specs_;
    size_t k = 0;
    for (const SharingNodeGroup& g : s_.node_groups) {
      std::string layout;
      if (static_mig_ && g.static_mig_gpus > 0)
        if (const MigGeometry* geo = MigGeometryFor(g.model))
          layout = MigLayoutString(*geo, g.static_mig_layout);
      for (int i = 0; i < g.count; ++i, ++k) {
        std::vector<std::string> layouts;
        if (!layout.empty()) layouts.assign(g.static_mig_gpus, layout);
        core_->UpsertNode(NodeJson(specs[k], layouts));
      }
    }
    std::set<SimTime> times;
    for (const SharingWorkload& w : w_) times.insert(w.arrival_s);
    size_t next_arrival = 0;
    while (!times.empty()) {
      const SimTime t = *times.begin();
      times.erase(times.begin());
      if (t >= s_.horizon_s) break;
      if (restart_every_ > 0 && t >= next_restart_) {
        if (next_restart_ > 0) TESSERA_RETURN_IF_ERROR(Restart(t, times));
        next_restart_ = (t / restart_every_ + 1) * restart_every_;
        times.insert(next_restart_);
      }
      // Departures; the scheduler only cycles when something changed.
      bool departed = false;
      for (auto it = departures_.begin(); it != departures_.end() && it->first <= t;) {
        if (end_t_[it->second] == it->first) departed = Depart(it->second) || departed;
        it = departures_.erase(it);
      }
      if (departed) Changed(t, times);
      // Give-ups.
      for (size_t i = 0; i < w_.size(); ++i) {
        if (state_[i] != kPending || wait_from_[i] + w_[i].patience_s > t) continue;
        state_[i] = kAbandoned;
        core_->DeletePod(Pod(i));
      }
      // Arrivals.
      bool arrived = false;
      while (next_arrival < w_.size() && w_[next_arrival].arrival_s == t) {
        const SharingWorkload& w = w_[next_arrival];
        state_[next_arrival] = kPending;
        wait_from_[next_arrival] = w.arrival_s;
        core_->UpsertPod(Pod(next_arrival));
        times.insert(w.arrival_s + w.patience_s);
        ++next_arrival;
        arrived = true;
      }
      if (arrived) Changed(t, times);
      if (dirty_ && (interval_ == 0 || t % interval_ == 0)) {
        dirty_ = false;
        CycleAt(t, times);
      }
      if (progress_ && t / 3600 != last_hour_) {
        last_hour_ = t / 3600;
        std::fprintf(stderr, "t=%lldh: %lld cycles, %lld placed\n",
                     static_cast<long long>(last_hour_), static_cast<long long>(r_.cycles),
                     static_cast<long long>(r_.placed));
      }
    }
    for (size_t i = 0; i < state_.size(); ++i) {
      if (state_[i] == kAbandoned) ++r_.abandoned;
      if (state_[i] == kPending) ++r_.never_placed;
      if (generation_[i] > 0 && (state_[i] == kAbandoned || state_[i] == kPending))
        ++r_.evicted_not_replaced;
    }
    r_.p50_wait_s = Quantile(waits_, 0.50);
    r_.p95_wait_s = Quantile(waits_, 0.95);
    r_.relayouts = relayouts_before_restarts_ + core_->stats().relayouts_applied;
    r_.adopt_failures = adopt_failures_before_restarts_ + core_->stats().adopt_failures;
    int64_t running_or_done = 0;
    for (int st : state_) running_or_done += st == kRunning || st == kDone;
    if (r_.placed != running_or_done || r_.placed + r_.abandoned + r_.never_placed != r_.workloads)
      Violation("counts inconsistent: placed + abandoned + never placed != workloads");
    return r_;
  }

 private:
  enum State { kFuture, kPending, kRunning, kDone, kAbandoned };

  Json Pod(size_t i, const std::string& node = "",
           const std::map<std::string, std::string>& extra = {}) const {
    return PodJson(w_[i], s_.classes[w_[i].cls].priority, generation_[i], node, extra);
  }
  SimTime now_ = 0;  // the time of the bind being recorded

  void Violation(const std::string& what) {
    ++r_.violations;
    if (r_.violation_samples.size() < 10) r_.violation_samples.push_back(what);
  }

  static size_t Index(const std::string& pod_name) {
    return static_cast<size_t>(std::stoull(pod_name.substr(1)));
  }

  // Something the scheduler should see happened at t: it cycles at t, or with an interval at the
  // next multiple of it.
  void Changed(SimTime t, std::set<SimTime>& times) {
    if (interval_ == 0) {
      CycleAt(t, times);
      return;
    }
    dirty_ = true;
    times.insert((t + interval_ - 1) / interval_ * interval_);
  }

  void CycleAt(SimTime t, std::set<SimTime>& times) {
    for (int round = 0; round < 64; ++round) {
      CycleOutput out = core_->Cycle(static_cast<double>(t));
      ++r_.cycles;
      for (const BindAction& b : out.binds) Bind(b, t, times);
      for (const PodNotice& n : out.notices) {
        if (n.reason == "SliceMissing") {
          ++r_.slice_missing;
          // The nodes' reports here show every layout applied: nothing is missing from them.
          if (!stale_reports_) Violation(n.name + ": " + n.message);
          continue;
        }
        if (n.reason == "NodeOvercommitted") {
          ++r_.overcommitted;
          // Only a node listed with less than the scenario gives can be over-committed.
          if (shrink_host_ >= 1) Violation(n.name + ": " + n.message);
          continue;
        }
        ++r_.notices[NoticeKey(n.message)];
        // Every pod here was bound by a scheduler core; one a later core cannot account would
        // leave its GPUs free to others.
        if (n.reason == "AdoptFailed") Violation(n.name + " not adopted: " + n.message);
      }
      // An evicted pod is deleted; its controller creates it again at once (a new uid), and
      // it waits with its full patience. Recreated in workload order.
      std::set<size_t> evicted;
      for (const EvictAction& e : out.evictions) {
        const size_t i = Index(e.name);
        if (state_[i] != kRunning) continue;
        Release(i);
        ++r_.evicted;
        --r_.placed;
        --r_.placed_by_class[w_[i].cls];
        r_.placed_workloads[i] = 0;
        core_->DeletePod(Pod(i, bound_node_[i]));
        evicted.insert(i);
      }
      for (size_t i : evicted) {
        state_[i] = kPending;
        ++generation_[i];
        wait_from_[i] = t;
        end_t_[i] = -1;
        core_->UpsertPod(Pod(i));
        times.insert(t + w_[i].patience_s);
      }
      for (const LayoutAction& l : out.layouts)
        if (!core_->LayoutReported(l.node, l.gpu, l.revision, true, ""))
          Violation("layout report refused: " + l.node + "/" + std::to_string(l.gpu));
      if (out.layouts.empty() && out.binds.empty() && out.evictions.empty()) return;
    }
    ++r_.unsettled;
    if (r_.unsettled_samples.size() < 5) r_.unsettled_samples.push_back(std::to_string(t));
  }

  void Bind(const BindAction& b, SimTime t, std::set<SimTime>& times) {
    const size_t i = Index(b.name);
    if (i >= w_.size() || state_[i] != kPending) {
      Violation("bind of a pod that is not pending: " + b.name);
      return;
    }
    auto it = b.annotations.find(kAnnotationAssignment);
    if (it == b.annotations.end()) {
      Violation(b.name + ": bind without an assignment");
    } else {
      auto a = DecodeAssignment(it->second);
      if (!a.ok()) {
        Violation(b.name + ": assignment does not decode: " + a.status().message());
      } else {
        now_ = t;
        CheckAssignment(i, b, *a);
      }
    }
    const SharingWorkload& w = w_[i];
    state_[i] = kRunning;
    bound_node_[i] = b.node;
    ++r_.placed;
    ++r_.placed_by_class[w.cls];
    r_.placed_workloads[i] = 1;
    if (generation_[i] == 0) waits_.push_back(static_cast<double>(t - w.arrival_s));
    core_->UpsertPod(Pod(i, b.node, b.annotations));
    bound_annotations_[i] = b.annotations;
    end_t_[i] = t + w.duration_s;
    departures_.emplace(end_t_[i], i);
    times.insert(t + w.duration_s);
  }

  void CheckAssignment(size_t i, const BindAction& b, const Assignment& a) {
    ++r_.placed_by_kind[AssignmentKindName(a.kind)];
    if (r_.placement_of[i].empty()) {
      std::string gpus;
      for (int g : a.gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
      r_.placement_of[i] = "t=" + std::to_string(now_) + " " + b.node + " gpu" + gpus + " " +
                           AssignmentKindName(a.kind);
    }
    const std::string who = b.name + " (" + AssignmentKindName(a.kind) + ")";
    if (a.node != b.node) Violation(who + ": assignment names node " + a.node);
    if (a.gpus.empty()) {
      Violation(who + ": assignment names no GPU");
      return;
    }
    const int want = std::max(1, w_[i].demand.whole_gpus);
    if (static_cast<int>(a.gpus.size()) != want)
      Violation(who + ": " + std::to_string(a.gpus.size()) + " GPUs for a request of " +
                std::to_string(want));
    std::vector<std::string> keys;
    for (int g : a.gpus) {
      const std::string gpu = b.node + "/" + std::to_string(g);
      switch (a.kind) {
        case AssignmentKind::kExclusive:
          keys.push_back(gpu);
          break;
        case AssignmentKind::kMig:
        case AssignmentKind::kMigMps:
          if (a.mig_instance.empty()) Violation(who + ": MIG assignment names no instance");
          if (a.kind == AssignmentKind::kMig) keys.push_back(gpu + "/" + a.mig_instance);
          if (exclusive_.count(gpu)) Violation(who + ": slice on a GPU given whole");
          break;
        default:
          if (exclusive_.count(gpu)) Violation(who + ": share on a GPU given whole");
          break;
      }
      if (a.kind != AssignmentKind::kExclusive) ++shared_[gpu];
    }
    for (const std::string& k : keys) {
      if (!held_.insert(k).second) Violation(who + ": " + k + " given twice at once");
      if (a.kind == AssignmentKind::kExclusive) {
        exclusive_.insert(k);
        if (shared_[k] > 0) Violation(who + ": whole GPU " + k + " already shared");
      }
    }
    holdings_[i] = {keys, a.kind == AssignmentKind::kExclusive ? std::vector<std::string>{}
                                                               : GpuKeys(b.node, a.gpus)};
  }

  static std::vector<std::string> GpuKeys(const std::string& node, const std::vector<int>& gpus) {
    std::vector<std::string> out;
    for (int g : gpus) out.push_back(node + "/" + std::to_string(g));
    return out;
  }

  void Release(size_t i) {
    auto it = holdings_.find(i);
    if (it == holdings_.end()) return;
    for (const std::string& k : it->second.first) {
      held_.erase(k);
      exclusive_.erase(k);
    }
    for (const std::string& g : it->second.second) --shared_[g];
    holdings_.erase(it);
  }

  // A new scheduler takes over at t, as after a crash or a leader change: it sees the nodes
  // with the MIG layouts applied so far (as the agent reports them) and every pod, bound pods
  // with their assignment annotations, and must go on without giving anything twice.
  Status Restart(SimTime t, std::set<SimTime>& times) {
    auto fresh = make_core_();
    if (!fresh.ok()) return fresh.status();
    const ClusterState& old = core_->cluster();
    const bool shrink = shrink_host_ < 1 && r_.restarts % 2 == 0;
    for (NodeIdx n = 0; n < old.num_nodes(); ++n) {
      std::vector<std::string> layouts;
      for (int g = 0; g < old.gpu_count(n); ++g) {
        const GpuSlices& gpu = old.gpu(n, g);
        const MigGeometry* geo = MigGeometryFor(gpu.model);
        const bool reported = gpu.mig_enabled() && geo && !stale_reports_;
        layouts.push_back(reported ? MigLayoutString(*geo, gpu.Layout()) : "");
      }
      NodeSpec spec = specs_[n];
      if (shrink) {
        spec.cpu =
            MilliCpu(static_cast<int64_t>(static_cast<double>(spec.cpu.value()) * shrink_host_));
        spec.memory =
            MiB(static_cast<int64_t>(static_cast<double>(spec.memory.value()) * shrink_host_));
      }
      (*fresh)->UpsertNode(NodeJson(spec, layouts));
    }
    for (size_t i = 0; i < w_.size(); ++i) {
      if (state_[i] == kRunning) (*fresh)->UpsertPod(Pod(i, bound_node_[i], bound_annotations_[i]));
      if (state_[i] == kPending) (*fresh)->UpsertPod(Pod(i));
    }
    relayouts_before_restarts_ += core_->stats().relayouts_applied;
    adopt_failures_before_restarts_ += core_->stats().adopt_failures;
    restarted_ = std::move(*fresh);
    core_ = restarted_.get();
    ++r_.restarts;
    Changed(t, times);
    return Status::Ok();
  }

  bool Depart(size_t i) {
    if (state_[i] != kRunning) return false;
    Release(i);
    state_[i] = kDone;
    core_->DeletePod(Pod(i, bound_node_[i]));
    return true;
  }

  const SharingScenario& s_;
  const std::vector<SharingWorkload>& w_;
  SchedulerCore* core_;
  std::vector<int> state_;
  std::vector<std::string> bound_node_;
  std::vector<SimTime> wait_from_;  // when the current wait began (arrival or eviction)
  std::vector<SimTime> end_t_;      // when the current run ends (-1: not running)
  std::vector<int> generation_;     // times evicted and recreated
  std::vector<std::map<std::string, std::string>> bound_annotations_;  // of the current bind
  // Restarts (set_restart_every): the core since the last one, and how to make the next.
  std::unique_ptr<SchedulerCore> restarted_;
  std::function<Result<std::unique_ptr<SchedulerCore>>()> make_core_;
  SimTime restart_every_ = 0, next_restart_ = 0;
  int64_t relayouts_before_restarts_ = 0, adopt_failures_before_restarts_ = 0;
  std::multimap<SimTime, size_t> departures_;
  std::vector<double> waits_;
  std::set<std::string> held_;       // MIG instances and whole GPUs in use
  std::set<std::string> exclusive_;  // whole GPUs in use
  std::map<std::string, int> shared_;
  std::map<size_t, std::pair<std::vector<std::string>, std::vector<std::string>>> holdings_;
  ReplayResult r_;
  bool progress_ = false;
  bool static_mig_ = false;
  bool stale_reports_ = false;
  double shrink_host_ = 1;
  std::vector<NodeSpec> specs_;  // as the scenario gives them
  SimTime interval_ = 0;
  bool dirty_ = false;
  SimTime last_hour_ = -1;

 public:
  void set_progress(bool on) { progress_ = on; }
  // Nodes start with the scenario's static MIG layouts (as the static-mig strategy) instead of
  // MIG off everywhere (as the sim's tessera strategy).
  void set_static_mig(bool on) { static_mig_ = on; }
  // Restarted cores are told that MIG is off on every GPU.
  void set_stale_reports(bool on) { stale_reports_ = on; }
  void set_shrink_host(double f) { shrink_host_ = f; }
  // > 0: the scheduler cycles only at multiples of this many seconds (as a real scheduler's
  // cycle interval), which bounds the number of cycles; waits grow by up to the interval.
  void set_cycle_interval(SimTime s) { interval_ = s; }
  // > 0: a new scheduler core, from `make`, takes over at every multiple of this many seconds.
  void set_restart_every(SimTime s, std::function<Result<std::unique_ptr<SchedulerCore>>()> make) {
    restart_every_ = s;
    make_core_ = std::move(make);
  }
};

int Main(int argc, char** argv) {
  CLI::App app{"Replays a sharing scenario through the scheduler core beside `sim sharing`"};
  std::string scenario_path = "bench/scenarios/sharing-mixed.json";
  std::string json_path;
  uint64_t seed = 0;
  bool seed_given = false;
  app.add_option("--scenario", scenario_path, "sharing scenario file");
  app.add_option("--seed", seed, "workload seed (default: the scenario's)")
      ->each([&](const std::string&) { seed_given = true; });
  app.add_option("--json", json_path, "write the figures as JSON to this file");
  bool progress = false, static_mig = false;
  double hours = 0;
  int64_t cycle_interval = 0;
  app.add_option("--cycle-interval", cycle_interval,
                 "cycle the scheduler only at multiples of this many seconds (0 = at every event)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--hours", hours,
                 "cut the horizon to this many hours for both paths (workloads arriving later "
                 "are dropped; 0 = the scenario's)");
  app.add_flag("--static-mig", static_mig,
               "start the scheduler's nodes with the scenario's static MIG layouts (the sim's "
               "tessera strategy still starts with MIG off)");
  app.add_flag("--progress", progress, "print progress per simulated hour on stderr");
  int divergence = 0;
  app.add_option("--divergence", divergence,
                 "print the first N workloads (by earliest placement) that the two paths placed "
                 "differently: when, where and as what kind of slice")
      ->check(CLI::NonNegativeNumber);
  bool require_identical = false;
  app.add_flag("--require-identical-placements", require_identical,
               "exit with status 1 unless both paths placed every workload at the same time, on "
               "the same node and GPUs, as the same kind of slice");
  SimTime restart_every = 0;
  CLI::Option* restart_opt =
      app.add_option(
             "--restart-every", restart_every,
             "replace the scheduler core by a new one every this many simulated seconds, fed "
             "the nodes (with the MIG layouts applied so far) and every pod, as after a "
             "restart; the checks of every bind still apply (0 = never)")
          ->check(CLI::NonNegativeNumber);
  bool stale_reports = false;
  app.add_flag("--stale-reports", stale_reports,
               "with --restart-every: every node tells each new core that MIG is off on all its "
               "GPUs, whatever instances bound pods hold (a report that lags, or is wrong)")
      ->needs(restart_opt);
  double shrink_host = 1;
  app.add_option("--shrink-host", shrink_host,
                 "with --restart-every: every other new core (the first, third, ...) lists the "
                 "nodes with this fraction of their allocatable CPU and memory, the others with "
                 "all of it (1 = never shrink)")
      ->check(CLI::Range(0.01, 1.0))
      ->needs(restart_opt);
  bool require_same = false;
  app.add_flag("--require-same-placements", require_same,
               "exit with status 1 unless both paths placed exactly the same workloads (and "
               "preempted as many)");
  CLI11_PARSE(app, argc, argv);

  auto scenario = ReadSharingScenario(scenario_path);
  if (!scenario.ok()) {
    std::fprintf(stderr, "%s\n", scenario.status().ToString().c_str());
    return 2;
  }
  if (!seed_given) seed = scenario->seed;
  // Node protection is an option of `sim sharing` alone (docs/SHARING.md, "Node protection");
  // the scheduler has none, so the simulation side runs without it as well.
  const bool protection_ignored = scenario->tessera_protection == "on";
  if (protection_ignored) {
    scenario->tessera_protection = "off";
    std::printf(
        "note: the scenario turns tessera's node protection on; the scheduler has no node "
        "protection, so both paths run without it\n");
  }
  auto workloads = GenerateSharingWorkloads(*scenario, seed);
  if (!workloads.ok()) {
    std::fprintf(stderr, "%s\n", workloads.status().ToString().c_str());
    return 2;
  }
  if (hours > 0 && static_cast<SimTime>(hours * 3600) < scenario->horizon_s) {
    scenario->horizon_s = static_cast<SimTime>(hours * 3600);
    std::erase_if(*workloads,
                  [&](const SharingWorkload& w) { return w.arrival_s >= scenario->horizon_s; });
  }
  auto sim = SimulateSharing(*scenario, *workloads, "tessera");
  if (!sim.ok()) {
    std::fprintf(stderr, "sim: %s\n", sim.status().ToString().c_str());
    return 2;
  }
  SchedulerConfig config;
  config.seed = seed;
  auto core = SchedulerCore::Create(config);
  if (!core.ok()) {
    std::fprintf(stderr, "%s\n", core.status().ToString().c_str());
    return 2;
  }
  Replay rep(*scenario, *workloads, **core);
  rep.set_progress(progress);
  rep.set_static_mig(static_mig);
  rep.set_stale_reports(stale_reports);
  rep.set_shrink_host(shrink_host);
  rep.set_cycle_interval(cycle_interval);
  if (restart_every > 0)
    rep.set_restart_every(restart_every, [&config] { return SchedulerCore::Create(config); });
  auto replay = rep.Run();
  if (!replay.ok()) {
    std::fprintf(stderr, "replay: %s\n", replay.status().ToString().c_str());
    return 2;
  }
  const ReplayResult& r = *replay;
  int64_t only_sim = 0, only_replay = 0;
  for (size_t i = 0; i < workloads->size(); ++i) {
    only_sim += sim->placed_workloads[i] && !r.placed_workloads[i];
    only_replay += !sim->placed_workloads[i] && r.placed_workloads[i];
  }
  int64_t sim_training = 0, replay_training = 0;
  for (size_t c = 0; c < scenario->classes.size(); ++c) {
    if (scenario->classes[c].whole_gpus.empty()) continue;
    bool multi = false;
    for (int g : scenario->classes[c].whole_gpus) multi = multi || g > 1;
    if (!multi) continue;
    sim_training += sim->placed_by_class[c];
    replay_training += r.placed_by_class[c];
  }

  std::printf("scenario %s, seed %llu, %zu workloads%s\n", scenario->name.c_str(),
              static_cast<unsigned long long>(seed), workloads->size(),
              static_mig ? ", scheduler nodes start with the static MIG layouts" : "");
  std::printf("%-28s %12s %12s\n", "", "sim tessera", "scheduler");
  auto row = [](const std::string& name, const std::string& a, const std::string& b) {
    std::printf("%-28s %12s %12s\n", name.c_str(), a.c_str(), b.c_str());
  };
  auto num = [](double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", x);
    return std::string(buf);
  };
  row("placed", num(sim->placed), num(r.placed));
  for (size_t c = 0; c < scenario->classes.size(); ++c)
    row("  " + scenario->classes[c].name, num(sim->placed_by_class[c]), num(r.placed_by_class[c]));
  row("training placed (multi-GPU)", num(sim_training), num(replay_training));
  row("abandoned", num(sim->abandoned), num(r.abandoned));
  row("never placed", num(sim->never_placed), num(r.never_placed));
  row("preempted", num(sim->preemptions), num(r.evicted));
  row("  never placed again", num(sim->preempted_not_replaced), num(r.evicted_not_replaced));
  row("MIG reconfigurations", num(sim->reconfigurations), num(r.relayouts));
  row("wait p50 s", num(sim->p50_wait_s), num(r.p50_wait_s));
  row("wait p95 s", num(sim->p95_wait_s), num(r.p95_wait_s));
  row("placed by one only", num(only_sim), num(only_replay));
  std::printf("scheduler: %lld cycles, %lld evicted, assignment kinds:",
              static_cast<long long>(r.cycles), static_cast<long long>(r.evicted));
  for (const auto& [k, n] : r.placed_by_kind) std::printf(" %s %lld", k.c_str(), (long long)n);
  std::printf("\nsim: slice kinds:");
  for (const auto& [k, n] : sim->placed_by_kind) std::printf(" %s %lld", k.c_str(), (long long)n);
  std::vector<std::pair<int64_t, std::string>> why;
  for (const auto& [k, n] : r.notices) why.emplace_back(n, k);
  std::sort(why.rbegin(), why.rend());
  std::printf("\nscheduler: most frequent wait reasons (notices):\n");
  for (size_t i = 0; i < why.size() && i < 6; ++i)
    std::printf("  %5lld  %s\n", static_cast<long long>(why[i].first), why[i].second.c_str());
  if (r.restarts > 0)
    std::printf(
        "scheduler restarts: %lld%s; bound pods not adopted: %lld; told a slice is missing: "
        "%lld; told they run beyond their node: %lld\n",
        static_cast<long long>(r.restarts), stale_reports ? " (stale node reports)" : "",
        static_cast<long long>(r.adopt_failures), static_cast<long long>(r.slice_missing),
        static_cast<long long>(r.overcommitted));
  std::printf("unsettled times (64 cycles without settling): %lld",
              static_cast<long long>(r.unsettled));
  for (const auto& t : r.unsettled_samples) std::printf(" t=%s", t.c_str());
  std::printf("\nviolations: %lld\n", static_cast<long long>(r.violations));
  for (const auto& v : r.violation_samples) std::printf("  %s\n", v.c_str());

  int64_t differ_count = 0;
  for (size_t i = 0; i < workloads->size(); ++i)
    differ_count += sim->placement_of[i] != r.placement_of[i];
  std::printf("workloads placed differently (time, node, GPUs or kind): %lld\n",
              static_cast<long long>(differ_count));
  if (divergence > 0) {
    auto time_of = [](const std::string& p) {
      return p.empty() ? std::numeric_limits<double>::infinity() : std::stod(p.substr(2));
    };
    std::vector<std::pair<double, size_t>> differ;
    for (size_t i = 0; i < workloads->size(); ++i) {
      const std::string& a = sim->placement_of[i];
      const std::string& b = r.placement_of[i];
      if (a != b) differ.emplace_back(std::min(time_of(a), time_of(b)), i);
    }
    std::sort(differ.begin(), differ.end());
    for (size_t k = 0; k < differ.size() && k < static_cast<size_t>(divergence); ++k) {
      const size_t i = differ[k].second;
      const SharingWorkload& w = (*workloads)[i];
      std::printf("  w%zu %s arrived t=%lld: sim [%s] scheduler [%s]\n", i,
                  scenario->classes[w.cls].name.c_str(), static_cast<long long>(w.arrival_s),
                  sim->placement_of[i].c_str(), r.placement_of[i].c_str());
    }
  }

  if (!json_path.empty()) {
    auto side = [&](int64_t placed, int64_t abandoned, int64_t never, int64_t reconf, double p50,
                    double p95, int64_t training, const std::vector<int64_t>& by_class) {
      Json j = {{"placed", placed},           {"abandoned", abandoned},
                {"never_placed", never},      {"mig_reconfigurations", reconf},
                {"p50_wait_s", p50},          {"p95_wait_s", p95},
                {"training_placed", training}};
      for (size_t c = 0; c < scenario->classes.size(); ++c)
        j["placed_by_class"][scenario->classes[c].name] = by_class[c];
      return j;
    };
    Json j = {{"scenario", scenario->name},
              {"seed", seed},
              {"workloads", workloads->size()},
              {"static_mig", static_mig},
              {"tessera_protection_ignored", protection_ignored},
              {"restarts", r.restarts},
              {"stale_reports", stale_reports},
              {"adopt_failures", r.adopt_failures},
              {"slice_missing", r.slice_missing},
              {"shrink_host", shrink_host},
              {"overcommitted", r.overcommitted},
              {"sim", side(sim->placed, sim->abandoned, sim->never_placed, sim->reconfigurations,
                           sim->p50_wait_s, sim->p95_wait_s, sim_training, sim->placed_by_class)},
              {"scheduler", side(r.placed, r.abandoned, r.never_placed, r.relayouts, r.p50_wait_s,
                                 r.p95_wait_s, replay_training, r.placed_by_class)},
              {"placed_only_by_sim", only_sim},
              {"placed_only_by_scheduler", only_replay},
              {"evicted", r.evicted},
              {"evicted_not_replaced", r.evicted_not_replaced},
              {"sim_preemptions", sim->preemptions},
              {"sim_preempted_not_replaced", sim->preempted_not_replaced},
              {"cycles", r.cycles},
              {"violations", r.violations},
              {"unsettled", r.unsettled},
              {"relayouts_planned", (*core)->stats().relayouts_planned},
              {"violation_samples", r.violation_samples}};
    for (const auto& [k, n] : r.placed_by_kind) j["scheduler"]["placed_by_kind"][k] = n;
    for (const auto& [k, n] : sim->placed_by_kind) j["sim"]["placed_by_kind"][k] = n;
    std::ofstream f(json_path);
    f << j.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 2;
    }
  }
  if (require_same && sim->preemptions != r.evicted) {
    std::fprintf(stderr,
                 "the paths preempted differently: %lld by the sim, %lld by the scheduler\n",
                 static_cast<long long>(sim->preemptions), static_cast<long long>(r.evicted));
    return 1;
  }
  if (require_same && (only_sim != 0 || only_replay != 0)) {
    std::fprintf(stderr,
                 "the paths placed different workloads: %lld by the sim only, %lld by "
                 "the scheduler only\n",
                 static_cast<long long>(only_sim), static_cast<long long>(only_replay));
    return 1;
  }
  if (require_identical && differ_count != 0) {
    std::fprintf(stderr, "the paths placed %lld workloads differently (see --divergence)\n",
                 static_cast<long long>(differ_count));
    return 1;
  }
  return r.violations == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tessera::kube

int main(int argc, char** argv) {
  return tessera::kube::Main(argc, argv);
}
