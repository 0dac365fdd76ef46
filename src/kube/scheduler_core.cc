#include "kube/scheduler_core.h"
#include "kube/scheduler_core_internal.h"

#include <algorithm>
#include <bit>
#include <cstdio>

#include "cluster/gpu_catalog.h"
#include "kube/client.h"
#include "kube/rightsize.h"
#include "policies/builtin.h"

namespace tessera::kube {

Status SchedulerConfig::Validate() const {
  if (scheduler_name.empty()) return InvalidArgument("scheduler_name is empty");
  const auto names = BuiltinPolicies().Names();
  if (std::find(names.begin(), names.end(), policy) == names.end())
    return InvalidArgument("unknown policy '" + policy + "'");
  if (!(gang_settle_s >= 0)) return InvalidArgument("gang_settle_s must be >= 0");
  if (!(notice_interval_s >= 0 && notice_interval_s <= 86400))
    return InvalidArgument("notice_interval_s must be within [0, 86400]");
  if (!(mig_relayout_timeout_s > 0 && mig_relayout_timeout_s <= 86400))
    return InvalidArgument("mig_relayout_timeout_s must be within (0, 86400]");
  if (max_relayouts_per_cycle < 0) return InvalidArgument("max_relayouts_per_cycle must be >= 0");
  if (rightsize_floor_mib < 0 || rightsize_floor_mib > 262144)
    return InvalidArgument("rightsize_floor_mib must be within [0, 262144]");
  if (!(rightsize_other_model_max_compute >= 0 && rightsize_other_model_max_compute <= 1))
    return InvalidArgument("rightsize_other_model_max_compute must be within [0, 1]");
  for (const auto& q : queues)
    if (q.name == kExternalQueue) return InvalidArgument("queue name _external is reserved");
  return admission.Validate();
}

SchedulerCore::SchedulerCore(SchedulerConfig config) : config_(std::move(config)) {}

Result<std::unique_ptr<SchedulerCore>> SchedulerCore::Create(SchedulerConfig config) {
  TESSERA_RETURN_IF_ERROR(config.Validate());
  std::vector<QueueSpec> queues = config.queues;
  const Resources unlimited{int64_t{1} << 50, int64_t{1} << 50, int64_t{1} << 50};
  if (queues.empty()) {
    QueueSpec q;
    q.name = kDefaultQueue;
    q.flavors = {FlavorQuota{"all", 0, unlimited, std::nullopt, std::nullopt}};
    queues.push_back(q);
  }
  // Pods of other schedulers, and ours bound before a restart that name no known queue.
  QueueSpec ext;
  ext.name = kExternalQueue;
  ext.flavors = {FlavorQuota{"all", 0, unlimited, std::nullopt, std::nullopt}};
  ext.within_queue = WithinQueuePreemption::kNever;
  ext.reclaim = ReclaimPreemption::kNever;
  queues.push_back(ext);
  auto scorer = BuiltinPolicies().Create(PolicyConfig{config.policy, {}});
  if (!scorer.ok()) return scorer.status();
  auto adm =
      Admission::Create(std::move(queues), config.admission, std::move(*scorer), config.seed);
  if (!adm.ok()) return adm.status();
  auto trial_scorer = BuiltinPolicies().Create(PolicyConfig{config.policy, {}});
  if (!trial_scorer.ok()) return trial_scorer.status();
  auto core = std::unique_ptr<SchedulerCore>(new SchedulerCore(std::move(config)));
  core->admission_ = std::move(*adm);
  core->trial_engine_ = std::make_unique<Engine>(std::move(*trial_scorer), core->config_.seed);
  return core;
}

std::string SchedulerCore::WhyPending(const std::string& key) const {
  auto it = pods_.find(key);
  if (it == pods_.end() || it->second->bound) return "";
  if (it->second->job == 0)
    return it->second->req.gang.empty() ? "not yet considered by a scheduling cycle"
                                        : "waiting for its gang to form";
  if (auto rw = relayout_wait_.find(it->second->job); rw != relayout_wait_.end()) return rw->second;
  return admission_->WhyPending(it->second->job);
}

namespace {

// The GPUs the node's inventory reports unhealthy take no new slice; the others do.
void BlockUnhealthy(ClusterState& state, NodeIdx n, GpuMask unhealthy) {
  for (int g = 0; g < state.gpu_count(n); ++g)
    (void)state.SetGpuBlocked(n, g, ((unhealthy >> g) & 1) != 0);
}

}  // namespace

void SchedulerCore::UpsertNode(const Json& node) {
  auto info = TranslateNode(node);
  if (!info.ok()) return;  // reported by the runtime; the node is skipped
  mask_cache_.clear();
  auto it = node_index_.find(info->spec.name);
  if (it != node_index_.end()) {
    const NodeIdx n = it->second;
    NodeInfo keep = std::move(*info);
    const NodeInfo& old = node_info_[n];
    if (!node_alive_[n] || keep.ready != old.ready || keep.unschedulable != old.unschedulable ||
        keep.taints != old.taints || keep.spec.labels != old.spec.labels)
      masks_stale_ = true;
    // The host capacity follows allocatable (the ledger's balance may go negative: the node
    // then takes nothing until enough of its pods are gone); the GPU count and model are fixed
    // when the node is first seen.
    const MilliCpu cpu = keep.spec.cpu;
    const MiB memory = keep.spec.memory;
    const NodeSpec& was = node_info_[n].spec;
    if (cpu.v != was.cpu.v || memory.v != was.memory.v) (void)state_.ResizeHost(n, cpu, memory);
    auto labels = std::move(keep.spec.labels);
    keep.spec = state_.spec(n);
    keep.spec.labels = std::move(labels);
    keep.model = node_info_[n].model;
    const bool inventory_changed = keep.inventory != node_info_[n].inventory;
    if (inventory_changed || !node_alive_[n]) ++node_epoch_[n];
    node_info_[n] = std::move(keep);
    node_alive_[n] = 1;
    if (inventory_changed) {
      SyncMigLayouts(n);
      BlockUnhealthy(state_, n, node_info_[n].unhealthy);
    }
    return;
  }
  auto idx = state_.AddNode(info->spec);
  if (!idx.ok()) return;
  node_index_[info->spec.name] = *idx;
  node_info_.push_back(std::move(*info));
  node_alive_.push_back(1);
  node_epoch_.push_back(0);
  SyncMigLayouts(*idx);
  BlockUnhealthy(state_, *idx, node_info_[*idx].unhealthy);
  masks_stale_ = true;
}

void SchedulerCore::NodeGone(NodeIdx n, const std::string& why) {
  node_alive_[n] = 0;
  ++node_epoch_[n];
  std::vector<GpuKey> on_node;
  for (const auto& [key, r] : relayouts_)
    if (key.first == n) on_node.push_back(key);
  for (const GpuKey& key : on_node) EndRelayout(key, false, why);
  mask_cache_.clear();
  masks_stale_ = true;
  const auto jobs = admission_->RequeueNode(state_, n, why);
  stats_.requeued_by_node += static_cast<int64_t>(jobs.size());
  for (WorkloadId id : jobs) {
    (void)admission_->Cancel(id);
    auto jt = jobs_.find(id);
    if (jt == jobs_.end()) continue;
    // The whole job goes: its pods elsewhere are evicted so that its controller recreates them
    // together; the pods on the lost node are gone with it.
    for (const auto& key : jt->second->pods) {
      auto pt = pods_.find(key);
      if (pt == pods_.end()) continue;
      PodEntry& p = *pt->second;
      p.job = 0;
      p.index = -1;
      if (p.bound && node_index_.count(p.req.node_name) && node_index_[p.req.node_name] != n) {
        deferred_notices_.push_back({p.req.ns, p.req.name, p.req.uid, "NodeLost", why});
        held_evictions_.push_back({p.req.ns, p.req.name, p.req.uid, why});
      } else if (!p.bound) {
        p.submitted = false;
        pending_new_.push_back(key);
      }
    }
    jobs_.erase(jt);
  }
}

void SchedulerCore::DeleteNode(const Json& node) {
  const std::string name = node.contains("metadata") ? node["metadata"].value("name", "") : "";
  auto it = node_index_.find(name);
  if (it == node_index_.end() || !node_alive_[it->second]) return;
  NodeGone(it->second, "node " + name + " disappeared; its jobs are requeued whole");
}

void SchedulerCore::UpsertPod(const Json& pod) {
  ObserveRightsize(pod);
  Status bad_annotation;
  auto req = TranslateHeldPod(pod, &bad_annotation);
  if (!bad_annotation.ok()) ++stats_.invalid;
  const Json& md = pod.contains("metadata") ? pod["metadata"] : Json::object();
  const std::string key = md.value("namespace", "") + "/" + md.value("name", "");
  if (req.ok()) {
    auto known = pods_.find(key);
    Regrant(pod, *req, known != pods_.end() ? known->second.get() : nullptr);
  }
  if (!req.ok()) {
    const bool ours =
        pod.contains("spec") && pod["spec"].value("schedulerName", "") == config_.scheduler_name;
    if (ours && pod["spec"].value("nodeName", "").empty()) {
      ++stats_.invalid;
      deferred_notices_.push_back({md.value("namespace", ""), md.value("name", ""),
                                   md.value("uid", ""), "InvalidRequest", req.status().message()});
    }
    return;
  }
  if (req->terminal()) {
    DeletePod(pod);
    return;
  }
  auto it = pods_.find(key);
  if (it != pods_.end()) {
    PodEntry& p = *it->second;
    const bool was_bound = p.bound;
    p.req = std::move(*req);
    if (auto u = unadopted_.find(key); u != unadopted_.end()) u->second.tried.reset();
    if (p.rightsize_src && p.req.node_name.empty())
      p.rightsize_src = std::make_shared<const Json>(pod);
    if (!p.req.node_name.empty() && !was_bound) {
      p.bound = true;
      if (p.job != 0 && p.ours && p.bind_node == p.req.node_name) return;  // our bind confirmed
      if (p.job != 0 && p.ours && !p.bind_node.empty()) {
        // Bound elsewhere than we chose (another replica won): keep our allocation with the
        // job (released when the job ends) and account the pod where it really is.
        p.job = 0;
        p.index = -1;
        if (!AdoptBound(p).ok()) unadopted_.emplace(key, Unadopted{});
        return;
      }
      // Bound by someone else while pending here: withdraw our job for it, adopt it.
      if (p.job != 0) {
        const WorkloadId job = p.job;
        (void)admission_->Cancel(job);
        auto jt = jobs_.find(job);
        if (jt != jobs_.end()) {
          for (const auto& k : jt->second->pods) {
            auto pt = pods_.find(k);
            if (pt == pods_.end() || k == key) continue;
            pt->second->job = 0;
            pt->second->submitted = false;
            if (!pt->second->bound) pending_new_.push_back(k);
          }
          jobs_.erase(jt);
        }
        p.job = 0;
      }
      if (!AdoptBound(p).ok()) unadopted_.emplace(key, Unadopted{});
    }
    return;
  }
  auto e = std::make_shared<PodEntry>();
  e->key = key;
  e->req = std::move(*req);
  pods_[key] = e;
  if (!e->req.node_name.empty()) {
    e->bound = true;
    Status st = AdoptBound(*e);
    if (!st.ok()) {
      if (st.code() != StatusCode::kNotFound) {
        ++stats_.adopt_failures;
        deferred_notices_.push_back(
            {e->req.ns, e->req.name, e->req.uid, "AdoptFailed", st.message()});
      }
      Unadopted& u = unadopted_[key];
      if (st.code() != StatusCode::kNotFound) {
        u.reported = true;
        u.tried = VersionOf(node_index_.at(e->req.node_name));
      }
    }
    return;
  }
  if (e->req.scheduler_name != config_.scheduler_name || e->req.deleting) return;
  e->ours = true;
  if (md.contains("annotations") && md["annotations"].is_object() &&
      md["annotations"].contains(kAnnotationRightsize))
    e->rightsize_src = std::make_shared<const Json>(pod);
  pending_new_.push_back(key);
}

void SchedulerCore::ForgetPod(const std::string& key) {
  auto it = pods_.find(key);
  if (it == pods_.end()) return;
  PodEntry& p = *it->second;
  unadopted_.erase(key);
  slice_missing_told_.erase(key);
  overcommitted_.erase(key);
  outside_queue_.erase(key);
  eviction_retry_.erase(key);
  oom_restarting_.erase(key);
  // A gone pod needs no eviction.
  held_evictions_.erase(
      std::remove_if(held_evictions_.begin(), held_evictions_.end(),
                     [&](const EvictAction& e) { return e.ns + "/" + e.name == key; }),
      held_evictions_.end());
  for (auto& [n, set] : terminating_) set.erase(key);
  last_notice_.erase(key);
  if (p.job != 0) {
    auto jt = jobs_.find(p.job);
    if (jt != jobs_.end()) {
      JobEntry& j = *jt->second;
      const JobState st = admission_->state(j.id);
      if (st == JobState::kPending) {
        // A pending job lost a member: withdraw it; the rest go back to the pending pool.
        (void)admission_->Cancel(j.id);
        for (const auto& k : j.pods) {
          if (k == key) continue;
          auto pt = pods_.find(k);
          if (pt == pods_.end()) continue;
          pt->second->job = 0;
          pt->second->submitted = false;
          if (!pt->second->bound) pending_new_.push_back(k);
        }
        jobs_.erase(jt);
      } else {
        j.pods[p.index].clear();
        bool any = false;
        for (const auto& k : j.pods) any |= !k.empty();
        if (!any) {
          if (st == JobState::kRunning) (void)admission_->Finish(state_, j.id);
          jobs_.erase(jt);
        }
      }
    }
  }
  pending_new_.erase(std::remove(pending_new_.begin(), pending_new_.end(), key),
                     pending_new_.end());
  for (auto& [g, keys] : gang_waiting_)
    keys.erase(std::remove(keys.begin(), keys.end(), key), keys.end());
  pods_.erase(it);
}

void SchedulerCore::DeletePod(const Json& pod) {
  const Json& md = pod.contains("metadata") ? pod["metadata"] : Json::object();
  ForgetPod(md.value("namespace", "") + "/" + md.value("name", ""));
}

std::shared_ptr<const std::vector<uint8_t>> SchedulerCore::MaskFor(const PodRequest& p) {
  Json sig = Json::array();
  for (const auto& t : p.tolerations) sig.push_back({t.key, t.op, t.value, t.effect});
  Json sel = Json::object();
  for (const auto& [k, v] : p.node_selector) sel[k] = v;
  Json aff = Json::array();
  for (const auto& term : p.required_affinity) {
    Json t = Json::array();
    for (const auto& r : term.match_expressions) t.push_back({r.key, r.op, r.values});
    for (const auto& r : term.match_fields) t.push_back({"field:" + r.key, r.op, r.values});
    aff.push_back(t);
  }
  const std::string key = Json{sig, sel, aff}.dump();
  auto it = mask_cache_.find(key);
  if (it != mask_cache_.end()) return it->second;
  auto mask = std::make_shared<std::vector<uint8_t>>(node_info_.size(), 0);
  for (size_t n = 0; n < node_info_.size(); ++n) {
    const NodeInfo& info = node_info_[n];
    (*mask)[n] = node_alive_[n] && Schedulable(info) && Tolerates(p, info) && MatchesNode(p, info);
  }
  mask_cache_[key] = mask;
  return mask;
}

void SchedulerCore::SubmitPending(double now) {
  std::vector<std::string> singles;
  for (const auto& key : pending_new_) {
    auto it = pods_.find(key);
    if (it == pods_.end() || it->second->bound || it->second->job != 0) continue;
    PodEntry& p = *it->second;
    DecideRightsize(p);
    if (p.first_pending < 0) p.first_pending = now;
    if (p.req.gang.empty()) {
      singles.push_back(key);
    } else {
      const std::string g = p.req.ns + "/" + p.req.gang;
      auto& w = gang_waiting_[g];
      if (std::find(w.begin(), w.end(), key) == w.end()) w.push_back(key);
      gang_last_seen_[g] = now;
    }
    p.submitted = true;
  }
  pending_new_.clear();
  auto submit = [&](const std::vector<std::string>& keys, const std::string& name, int min_member) {
    PodEntry& first = *pods_.at(keys.front());
    JobSpec spec;
    spec.id = next_job_++;
    spec.name = name;
    spec.queue = first.req.queue;
    spec.priority = first.req.priority;
    spec.arrival = now;
    spec.pod = first.req.demand;
    if (WantsSlice(first.req, config_.select_share_mechanism)) {
      spec.slice = first.req.slices;
      for (size_t i = 0; i < keys.size(); ++i) planner_.Observe(first.req.slices);
    }
    spec.pods = static_cast<int>(keys.size());
    spec.min_member = std::min(min_member, spec.pods);
    spec.allowed_nodes = MaskFor(first.req);
    Status st = admission_->Submit(spec);
    if (!st.ok()) {
      for (const auto& k : keys) {
        PodEntry& p = *pods_.at(k);
        deferred_notices_.push_back(
            {p.req.ns, p.req.name, p.req.uid, "InvalidRequest", st.message()});
      }
      return;
    }
    auto job = std::make_shared<JobEntry>();
    job->id = spec.id;
    job->pods = keys;
    jobs_[spec.id] = job;
    for (size_t i = 0; i < keys.size(); ++i) {
      PodEntry& p = *pods_.at(keys[i]);
      p.job = spec.id;
      p.index = static_cast<int>(i);
    }
  };
  for (const auto& key : singles) submit({key}, key, 0);
  for (auto it = gang_waiting_.begin(); it != gang_waiting_.end();) {
    auto& keys = it->second;
    // Members bound meanwhile (by another scheduler) no longer wait.
    std::erase_if(keys, [&](const std::string& k) {
      auto pt = pods_.find(k);
      return pt == pods_.end() || pt->second->bound;
    });
    bool ready = false;
    int min_member = 0;
    if (!keys.empty()) {
      min_member = pods_.at(keys.front())->req.min_member;
      // Members already bound count towards min-member: a leader that died while binding the
      // gang, or a member whose bind failed and is retried alone. The rest are placed together.
      if (min_member > static_cast<int>(keys.size()))
        min_member = std::max(1, min_member - BoundGangMembers(it->first));
      ready = min_member > 0 ? static_cast<int>(keys.size()) >= min_member
                             : now - gang_last_seen_[it->first] >= config_.gang_settle_s;
    }
    if (ready) {
      std::sort(keys.begin(), keys.end());
      submit(keys, it->first, min_member);
      gang_last_seen_.erase(it->first);
      it = gang_waiting_.erase(it);
    } else {
      ++it;
    }
  }
}

int SchedulerCore::BoundGangMembers(const std::string& gang) const {
  int n = 0;
  for (const auto& [key, p] : pods_)
    n += p->bound && !p->req.deleting && !p->req.gang.empty() &&
         p->req.scheduler_name == config_.scheduler_name && p->req.ns + "/" + p->req.gang == gang;
  return n;
}

namespace {
// A reason without its parenthesised detail: two messages with the same gist say the same thing
// with other supporting figures.
std::string NoticeGist(const std::string& msg) {
  std::string out;
  int depth = 0;
  for (char c : msg) {
    if (c == '(') ++depth;
    if (depth == 0) out += c;
    if (c == ')' && depth > 0) --depth;
  }
  return out;
}
}  // namespace

std::string SchedulerCore::Notice(const std::string& key, const std::string& reason,
                                  const std::string& msg, CycleOutput& out) {
  auto [last, first] = last_notice_.try_emplace(key);
  SentNotice& sent = last->second;
  if (!first) {
    if (sent.msg == msg) return msg;
    if (NoticeGist(sent.msg) == NoticeGist(msg) && last_now_ - sent.at < config_.notice_interval_s)
      return msg;
  }
  sent = {msg, last_now_};
  auto it = pods_.find(key);
  if (it != pods_.end()) {
    out.notices.push_back(
        {it->second->req.ns, it->second->req.name, it->second->req.uid, reason, msg});
    if (reason == "Unschedulable") ++stats_.unschedulable_notices;
  }
  return msg;
}

void SchedulerCore::IssueBind(BindAction b, double now, CycleOutput& out) {
  auto it = pods_.find(b.ns + "/" + b.name);
  if (it != pods_.end() && it->second->first_pending >= 0)
    latency_.Observe(std::max(0.0, now - it->second->first_pending));
  ++stats_.binds_issued;
  out.binds.push_back(std::move(b));
}

CycleOutput SchedulerCore::Cycle(double now) {
  CycleOutput out;
  last_now_ = now;
  ++stats_.cycles;
  ExpireRelayouts(now);
  out.notices = std::move(deferred_notices_);
  deferred_notices_.clear();
  out.evictions = std::move(held_evictions_);
  held_evictions_.clear();
  // GPUs whose report was refused take it once what was in its way is gone: tried again only
  // when something changed on the node since.
  if (!layout_conflicts_.empty()) {
    std::vector<GpuKey> conflicts;
    for (const auto& [key, c] : layout_conflicts_)
      if (node_alive_[key.first] && c.tried != VersionOf(key.first)) conflicts.push_back(key);
    for (const auto& [n, g] : conflicts) SyncMigLayouts(n, g);
    for (const auto& key : conflicts)
      if (auto it = layout_conflicts_.find(key); it != layout_conflicts_.end())
        it->second.tried = VersionOf(key.first);
  }
  // Bound pods whose node was not known yet, or whose GPUs were taken (each failure is
  // reported once; the pod is adopted once they are free). A failed try changes nothing, so
  // it is repeated only once the node or the pod changed.
  for (auto it = unadopted_.begin(); it != unadopted_.end();) {
    auto pt = pods_.find(it->first);
    if (pt == pods_.end() || pt->second->job != 0 || !pt->second->bound) {
      it = unadopted_.erase(it);
      continue;
    }
    Unadopted& u = it->second;
    auto nt = node_index_.find(pt->second->req.node_name);
    if (u.tried && nt != node_index_.end() && *u.tried == VersionOf(nt->second)) {
      ++it;
      continue;
    }
    Status st = AdoptBound(*pt->second);
    if (st.ok()) {
      it = unadopted_.erase(it);
      continue;
    }
    if (st.code() != StatusCode::kNotFound) {
      if (!u.reported) {
        ++stats_.adopt_failures;
        Notice(it->first, "AdoptFailed", st.message(), out);
        u.reported = true;
      }
      if (nt != node_index_.end()) u.tried = VersionOf(nt->second);
    }
    ++it;
  }
  // Pods whose eviction was refused become preemption victims again once their wait is over.
  for (auto& [key, retry] : eviction_retry_) {
    if (retry.at < 0 || retry.at > now) continue;
    retry.at = -1;  // the refusal count stays for the next wait
    auto pt = pods_.find(key);
    if (pt == pods_.end()) continue;
    PodEntry& p = *pt->second;
    auto jt = jobs_.find(p.job);
    if (!p.bound || !p.adopted || jt == jobs_.end() || jt->second->pods.size() != 1 ||
        admission_->state(p.job) != JobState::kRunning)
      continue;
    // Adopted again, preemptible, on the same GPUs (released and taken back at once).
    if (!admission_->Finish(state_, p.job).ok()) continue;
    jobs_.erase(jt);
    p.job = 0;
    p.index = -1;
    if (!AdoptBound(p).ok()) unadopted_.emplace(key, Unadopted{});
  }
  // Notices of the adoptions above go out with this cycle.
  for (PodNotice& n : deferred_notices_) out.notices.push_back(std::move(n));
  deferred_notices_.clear();
  SubmitPending(now);
  if (masks_stale_) {
    // Jobs submitted before a node change keep the mask of that time otherwise: a node that
    // joined later, or lost its not-ready taint since, would stay excluded for them.
    masks_stale_ = false;
    for (WorkloadId id : admission_->PendingJobs()) {
      auto jt = jobs_.find(id);
      if (jt == jobs_.end() || jt->second->pods.empty() || relayout_wait_.count(id)) continue;
      auto pt = pods_.find(jt->second->pods.front());
      if (pt == pods_.end()) continue;
      (void)admission_->SetAllowedNodes(id, MaskFor(pt->second->req));
    }
  }
  OomPreempt(out);
  PrepareRelayouts(now);
  auto res = admission_->RunCycle(state_, now);
  if (!res.ok()) return out;
  // Preemption: the victims' pods are evicted; their jobs leave admission (their controllers
  // recreate the pods). Binds onto their nodes wait until they are gone.
  for (const auto& pre : res->preempted) {
    (void)admission_->Cancel(pre.victim);
    auto jt = jobs_.find(pre.victim);
    if (jt == jobs_.end()) continue;
    for (const auto& key : jt->second->pods) {
      auto pt = pods_.find(key);
      if (pt == pods_.end()) continue;
      PodEntry& p = *pt->second;
      p.job = 0;
      if (!p.bound) {
        p.submitted = false;
        pending_new_.push_back(key);
        continue;
      }
      // The Preempted Event is written once the API server has accepted the eviction: a
      // PodDisruptionBudget may still refuse it (EvictionFailed).
      out.evictions.push_back({p.req.ns, p.req.name, p.req.uid, pre.reason});
      ++stats_.preemption_evictions;
      auto nt = node_index_.find(p.req.node_name);
      if (nt != node_index_.end()) terminating_[nt->second].insert(key);
    }
    jobs_.erase(jt);
  }
  for (WorkloadId id : res->admitted) {
    auto jt = jobs_.find(id);
    if (jt == jobs_.end()) continue;
    JobEntry& j = *jt->second;
    const auto places = admission_->Placements(id);
    const auto slices = admission_->Slices(id);
    for (size_t i = 0; i < j.pods.size(); ++i) {
      auto pt = pods_.find(j.pods[i]);
      if (pt == pods_.end()) continue;
      PodEntry& p = *pt->second;
      if (i >= places.size()) {
        // Beyond min-member and not placed: back to the pool as a new job later.
        p.job = 0;
        p.submitted = false;
        pending_new_.push_back(j.pods[i]);
        j.pods[i].clear();
        continue;
      }
      const Placement& pl = places[i];
      const NodeInfo& info = node_info_[pl.node];
      BindAction b{p.req.ns, p.req.name, p.req.uid, info.spec.name, {}, id};
      if (i < slices.size()) {
        const SliceAssignment& sl = slices[i];
        b.annotations[kAnnotationAssignment] = EncodeAssignment(
            AssignmentFor(info, sl, state_.gpu(sl.node, std::countr_zero(sl.gpus))));
      } else if (p.req.wants_gpu()) {
        Assignment a;
        a.node = info.spec.name;
        const Demand d = info.model != kNoGpuModel ? DemandOn(p.req, info.model) : p.req.demand;
        a.kind = d.IsShare() ? AssignmentKind::kShare : AssignmentKind::kExclusive;
        for (int g = 0; g < kMaxGpusPerNode; ++g) {
          if (!((pl.gpus >> g) & 1)) continue;
          a.gpus.push_back(g);
          for (const auto& inv : info.inventory)
            if (inv.index == g) a.uuids.push_back(inv.uuid);
        }
        if (a.uuids.size() != a.gpus.size()) a.uuids.clear();
        if (a.kind == AssignmentKind::kShare) a.gpu_milli = d.gpu_milli;
        b.annotations[kAnnotationAssignment] = EncodeAssignment(a);
      }
      for (const auto& [k, v] : p.rightsize_annotations) b.annotations[k] = v;
      p.admitted_seq = ++next_admission_seq_;
      last_notice_.erase(j.pods[i]);
      p.bind_node = info.spec.name;
      if (terminating_.count(pl.node) && !terminating_[pl.node].empty())
        held_.push_back(std::move(b));
      else
        IssueBind(std::move(b), now, out);
    }
    j.pods.erase(std::remove(j.pods.begin(), j.pods.end(), std::string()), j.pods.end());
    for (size_t i = 0; i < j.pods.size(); ++i) pods_.at(j.pods[i])->index = static_cast<int>(i);
    j.bind_issued = true;
    ++out.admitted_jobs;
  }
  // Held binds whose nodes are now clear.
  for (auto it = held_.begin(); it != held_.end();) {
    const NodeIdx n = node_index_.at(it->node);
    if (terminating_[n].empty()) {
      IssueBind(std::move(*it), now, out);
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
  // MIG re-layouts the cycle chose for slice pods.
  StartRelayouts(now, res->relayouts, out);
  // Why the others wait.
  for (const auto& [id, j] : jobs_) {
    if (admission_->state(id) != JobState::kPending) continue;
    auto rw = relayout_wait_.find(id);
    const std::string why = rw != relayout_wait_.end() ? rw->second : admission_->WhyPending(id);
    for (const auto& key : j->pods) Notice(key, "Unschedulable", why, out);
  }
  for (const auto& [gang, keys] : gang_waiting_) {
    if (keys.empty()) continue;
    const int min_member = pods_.at(keys.front())->req.min_member;
    if (min_member <= 0) continue;  // forms once no member arrived for gang_settle_s
    const int bound = BoundGangMembers(gang);
    const int missing = min_member - bound - static_cast<int>(keys.size());
    if (missing <= 0) continue;
    const std::string why = "gang waits for " + std::to_string(missing) + " more pods (" +
                            std::to_string(keys.size()) + " pending, " + std::to_string(bound) +
                            " bound, min-member " + std::to_string(min_member) + ")";
    for (const auto& key : keys) Notice(key, "Unschedulable", why, out);
  }
  out.events = std::move(deferred_events_);
  deferred_events_.clear();
  return out;
}

void SchedulerCore::EvictionFailed(const EvictAction& e, const Status& why) {
  const std::string key = e.ns + "/" + e.name;
  auto pt = pods_.find(key);
  if (pt == pods_.end()) return;  // already gone
  PodEntry& p = *pt->second;
  if (e.event_reason == kEventRightsizeOomRestart) {
    // The pod still holds its allocation; only the restart at a larger grant is lost.
    oom_restarting_.erase(key);
    deferred_notices_.push_back({p.req.ns, p.req.name, p.req.uid, "EvictionBlocked",
                                 "eviction after an out-of-memory kill refused (" + why.message() +
                                     "); the container restarts in place at its rightsized "
                                     "grant until the pod is deleted"});
    return;
  }
  auto nt = node_index_.find(p.req.node_name);
  if (nt == node_index_.end()) return;
  const NodeIdx n = nt->second;
  terminating_[n].erase(key);
  // Preemptors waiting on this node give their allocation back and queue again.
  std::set<WorkloadId> requeue;
  for (const auto& b : held_)
    if (b.node == p.req.node_name) requeue.insert(b.job);
  held_.erase(std::remove_if(held_.begin(), held_.end(),
                             [&](const BindAction& b) { return requeue.count(b.job) != 0; }),
              held_.end());
  for (WorkloadId job : requeue)
    if (admission_->state(job) == JobState::kRunning)
      (void)admission_->Requeue(state_, job,
                                "victim " + key + " could not be evicted: " + why.message());
  Status st = AdoptBound(p, /*preemptible=*/false);
  if (!st.ok()) unadopted_.emplace(key, Unadopted{});
  EvictionRetry& retry = eviction_retry_[key];
  const double wait = std::min(
      kEvictionRetryMaxSeconds,
      kEvictionRetrySeconds * static_cast<double>(int64_t{1} << std::min(retry.refusals, 10)));
  ++retry.refusals;
  retry.at = last_now_ + wait;
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.0f", wait);
  deferred_notices_.push_back({p.req.ns, p.req.name, p.req.uid, "EvictionBlocked",
                               "eviction refused (" + why.message() +
                                   "); the pod keeps running and is not a preemption victim "
                                   "for the next " +
                                   secs + " s"});
}

void SchedulerCore::BindFailed(const BindAction& b, const Status& why) {
  ++stats_.bind_failures;
  const int http = HttpStatusOf(why);
  // 404: the pod is gone (its delete event releases it). 409: it is bound elsewhere (the
  // update event adopts it there). Either way our allocation stays until the informer says so:
  // releasing it now could hand GPUs in use to another pod.
  if (http == 404 || http == 409) return;
  auto jt = jobs_.find(b.job);
  if (jt == jobs_.end()) return;
  const auto job = jt->second;
  const std::string key = b.ns + "/" + b.name;
  auto pt = pods_.find(key);
  if (pt == pods_.end()) return;
  PodEntry& p = *pt->second;
  if (p.bound) return;
  if (job->pods.size() == 1 && admission_->state(job->id) == JobState::kRunning) {
    // A lone pod: place it again from scratch.
    (void)admission_->Requeue(state_, job->id, "bind failed: " + why.message());
    p.bind_node.clear();
    return;
  }
  // A gang member: the rest of the gang may be bound already; retry this pod alone. Its share
  // of the gang's allocation stays reserved until the gang ends.
  p.job = 0;
  p.index = -1;
  p.bind_node.clear();
  p.submitted = false;
  pending_new_.push_back(key);
}

}  // namespace tessera::kube
