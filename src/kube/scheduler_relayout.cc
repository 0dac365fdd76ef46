// SchedulerCore: MIG re-layouts in two phases. The admission cycle proposes them
// (Engine::DecideSlice weighs a re-layout against every slice in place, by the same rule as the
// sharing simulation: MigPlanner::PlanBetterThan). Starting one records the desired layout of
// one GPU (LayoutAction) and holds the GPU in the ledger with placeholder slices, so nothing is
// placed on instances about to be destroyed, and the job is placed nowhere meanwhile; only the
// node's report (LayoutReported) changes the layout in the ledger, after which the waiting pod
// is placed by the normal cycle. A failure or a timeout reverts the plan.
#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdio>
#include <set>

#include "kube/scheduler_core.h"
#include "kube/scheduler_core_internal.h"

namespace tessera::kube {

void SchedulerCore::PrepareRelayouts(double now) {
  for (auto it = relayout_wait_.begin(); it != relayout_wait_.end();) {
    if (admission_->state(it->first) == JobState::kPending) {
      ++it;
    } else {
      DropRelayoutHold(it->first);
      it = relayout_wait_.erase(it);
    }
  }
  admission_->SetLayoutPlanner(config_.mig_relayout ? &planner_ : nullptr);
  if (!config_.mig_relayout) return;
  for (auto it = relayout_backoff_.begin(); it != relayout_backoff_.end();) {
    if (it->second <= now)
      it = relayout_backoff_.erase(it);
    else
      ++it;
  }
  std::vector<GpuMask> frozen = FrozenGpus();
  admission_->SetFrozenGpus(std::move(frozen));
}

std::vector<GpuMask> SchedulerCore::FrozenGpus() const {
  std::vector<GpuMask> frozen(state_.num_nodes(), 0);
  // A node without the agent's inventory has no one to apply a layout: never re-laid out.
  for (NodeIdx n = 0; n < frozen.size() && n < node_info_.size(); ++n)
    if (node_info_[n].inventory.empty()) frozen[n] = ~GpuMask{0};
  for (const auto& [key, r] : relayouts_) frozen[key.first] |= GpuMask{1} << key.second;
  for (const auto& [key, until] : relayout_backoff_) frozen[key.first] |= GpuMask{1} << key.second;
  return frozen;
}

bool SchedulerCore::HoldForRelayout(WorkloadId id, const MigReconfig& plan, double now,
                                    CycleOutput& out, std::optional<SliceAssignment> slice) {
  const NodeIdx n = plan.node;
  const int g = plan.gpu;
  if (n >= state_.num_nodes() || relayouts_.count({n, g})) return false;
  // Hold the GPU: every free instance (or the idle GPU) gets a placeholder slice.
  Relayout r;
  const GpuSlices& gpu = state_.gpu(n, g);
  bool held = true;
  if (gpu.mig_enabled()) {
    for (const MigSlot& slot : gpu.instances) {
      if (slot.use != MigSlot::Use::kFree) continue;
      const WorkloadId ph = next_placeholder_++;
      held = held && state_
                         .Allocate(ph, SliceDemand{},
                                   SliceAssignment{SliceKind::kMig, n, GpuMask{1} << g,
                                                   slot.instance.start, 0, 0})
                         .ok();
      r.placeholders.push_back(ph);
    }
  } else {
    const WorkloadId ph = next_placeholder_++;
    SliceDemand whole;
    whole.whole_gpus = 1;
    held = state_
               .Allocate(ph, whole,
                         SliceAssignment{SliceKind::kExclusive, n, GpuMask{1} << g, -1, 0, 0})
               .ok();
    r.placeholders.push_back(ph);
  }
  if (!held) {
    for (WorkloadId ph : r.placeholders) (void)state_.Release(ph);
    return false;
  }
  r.revision = next_revision_++;
  r.mig_after = plan.mig_after;
  r.after = plan.after;
  r.reason = plan.reason;
  r.started = now;
  const NodeInfo& info = node_info_[n];
  const MigGeometry* geo = MigGeometryFor(info.model);
  const std::string layout = r.mig_after && geo ? MigLayoutString(*geo, r.after) : "";
  out.layouts.push_back({info.spec.name, g, r.revision, r.mig_after, layout, r.reason});
  relayouts_[{n, g}] = std::move(r);
  ++stats_.relayouts_planned;
  WaitForRelayout(id, {n, g}, std::move(slice));
  return true;
}

void SchedulerCore::WaitForRelayout(WorkloadId id, GpuKey key,
                                    std::optional<SliceAssignment> slice) {
  auto rt = relayouts_.find(key);
  if (rt == relayouts_.end()) return;
  Relayout& r = rt->second;
  if (std::find(r.jobs.begin(), r.jobs.end(), id) != r.jobs.end()) return;
  r.jobs.push_back(id);
  const NodeIdx n = key.first;
  const int g = key.second;
  const NodeInfo& info = node_info_[n];
  if (!relayout_wait_.count(id)) {
    // The job's host CPU and memory stay on this node until its layouts are made.
    RelayoutHold& hold = relayout_hold_[id];
    hold.slice = std::move(slice);
    auto jt = jobs_.find(id);
    if (jt != jobs_.end() && !jt->second->pods.empty()) {
      auto pt = pods_.find(jt->second->pods.front());
      if (pt != pods_.end()) {
        Demand host;
        host.cpu = pt->second->req.demand.cpu;
        host.memory = pt->second->req.demand.memory;
        const WorkloadId ph = next_placeholder_++;
        if (state_.Allocate(ph, host, Placement{n, 0}).ok()) hold.host = ph;
      }
    }
  }
  const MigGeometry* geo = MigGeometryFor(info.model);
  const std::string layout = r.mig_after && geo ? MigLayoutString(*geo, r.after) : "";
  std::string& wait = relayout_wait_[id];
  wait += (wait.empty() ? "waiting for node " : "; and for node ") + info.spec.name +
          (r.mig_after ? " to re-lay out GPU " + std::to_string(g) + " as " + layout
                       : " to turn MIG off on GPU " + std::to_string(g)) +
          " (revision " + std::to_string(r.revision) + "): " + r.reason;
  // Until the layout is applied (or fails) the job is placed nowhere: neither on a worse
  // slice in place nor by a second re-layout.
  (void)admission_->SetAllowedNodes(
      id, std::make_shared<const std::vector<uint8_t>>(state_.num_nodes(), 0));
}

int SchedulerCore::StartRelayouts(double now, const std::vector<LayoutProposal>& proposals,
                                  CycleOutput& out) {
  int planned = 0;
  if (!config_.mig_relayout) return planned;
  std::set<WorkloadId> started;  // jobs whose wait began in this call (one proposal per GPU)
  for (const LayoutProposal& p : proposals) {
    if (planned >= config_.max_relayouts_per_cycle) break;
    if ((relayout_wait_.count(p.job) && !started.count(p.job)) || !jobs_.count(p.job)) continue;
    started.insert(p.job);
    const GpuKey key{p.reconfig.node, p.reconfig.gpu};
    if (auto rt = relayouts_.find(key); rt != relayouts_.end() && rt->second.started == now &&
                                        rt->second.mig_after == p.reconfig.mig_after &&
                                        rt->second.after == p.reconfig.after) {
      WaitForRelayout(p.job, key, p.slice);  // proposed this cycle for an earlier job
      continue;
    }
    planned += HoldForRelayout(p.job, p.reconfig, now, out, p.slice) ? 1 : 0;
  }
  return planned;
}

void SchedulerCore::ReleaseRelayoutWait(WorkloadId job) {
  for (const auto& [key, r] : relayouts_)
    if (std::find(r.jobs.begin(), r.jobs.end(), job) != r.jobs.end())
      return;  // another GPU of its plan is still being re-laid out
  relayout_wait_.erase(job);
  const auto h = relayout_hold_.find(job);
  const bool failed = h != relayout_hold_.end() && h->second.failed;
  std::optional<SliceAssignment> slice;
  if (h != relayout_hold_.end()) slice = h->second.slice;
  DropRelayoutHold(job);
  auto jt = jobs_.find(job);
  if (jt == jobs_.end() || jt->second->pods.empty()) return;
  if (admission_->state(job) != JobState::kPending) return;
  auto pt = pods_.find(jt->second->pods.front());
  if (pt != pods_.end()) (void)admission_->SetAllowedNodes(job, MaskFor(pt->second->req));
  if (!failed) (void)admission_->SetLayoutReady(job, slice);
}

void SchedulerCore::DropRelayoutHold(WorkloadId job) {
  auto it = relayout_hold_.find(job);
  if (it == relayout_hold_.end()) return;
  if (it->second.host != 0) (void)state_.Release(it->second.host);
  relayout_hold_.erase(it);
}

void SchedulerCore::ExpireRelayouts(double now) {
  std::vector<GpuKey> expired;
  for (const auto& [key, r] : relayouts_)
    if (now - r.started > config_.mig_relayout_timeout_s) expired.push_back(key);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", config_.mig_relayout_timeout_s);
  for (const GpuKey& key : expired)
    EndRelayout(key, false, std::string("not reported applied within ") + buf + " s");
}

void SchedulerCore::EndRelayout(GpuKey key, bool applied, const std::string& why) {
  auto it = relayouts_.find(key);
  if (it == relayouts_.end()) return;
  Relayout r = std::move(it->second);
  relayouts_.erase(it);
  ++node_epoch_[key.first];
  for (WorkloadId ph : r.placeholders) (void)state_.Release(ph);
  std::string failure = why;
  if (applied) {
    auto diff = state_.SetMigLayout(key.first, key.second, r.mig_after, r.after);
    if (diff.ok()) {
      layout_conflicts_.erase(key);  // the applied layout is newer than the report
      ++stats_.relayouts_applied;
      for (WorkloadId job : r.jobs) ReleaseRelayoutWait(job);
      return;
    }
    failure = "reported applied, but the ledger refuses it: " + diff.status().message();
  }
  ++stats_.relayouts_failed;
  relayout_backoff_[key] = last_now_ + config_.mig_relayout_timeout_s;
  const std::string node = node_info_[key.first].spec.name;
  const std::string msg = "MIG re-layout of node " + node + " GPU " + std::to_string(key.second) +
                          " (revision " + std::to_string(r.revision) + ") failed: " + failure +
                          "; the pod waits for another placement";
  for (WorkloadId job : r.jobs) {
    if (auto h = relayout_hold_.find(job); h != relayout_hold_.end()) h->second.failed = true;
    ReleaseRelayoutWait(job);
    auto jt = jobs_.find(job);
    if (jt == jobs_.end()) continue;
    for (const auto& pod_key : jt->second->pods) {
      auto pt = pods_.find(pod_key);
      if (pt == pods_.end() || pt->second->bound) continue;
      const PodRequest& p = pt->second->req;
      deferred_notices_.push_back({p.ns, p.name, p.uid, "MigRelayoutFailed", msg});
    }
  }
}

bool SchedulerCore::LayoutReported(const std::string& node, int gpu, int64_t revision, bool applied,
                                   const std::string& message) {
  auto nt = node_index_.find(node);
  if (nt == node_index_.end()) return false;
  auto it = relayouts_.find({nt->second, gpu});
  if (it == relayouts_.end() || it->second.revision != revision) return false;
  EndRelayout({nt->second, gpu}, applied,
              message.empty() ? "the node reported a failure" : message);
  return true;
}

void SchedulerCore::UpsertMigLayout(const Json& obj) {
  if (!obj.is_object()) return;
  std::string node;
  const Json* spec = obj.contains("spec") && obj["spec"].is_object() ? &obj["spec"] : nullptr;
  if (spec && spec->contains("nodeName") && (*spec)["nodeName"].is_string())
    node = (*spec)["nodeName"].get<std::string>();
  if (node.empty() && obj.contains("metadata") && obj["metadata"].is_object()) {
    auto name = obj["metadata"].find("name");
    if (name != obj["metadata"].end() && name->is_string()) node = name->get<std::string>();
  }
  auto st = obj.find("status");
  if (node.empty() || st == obj.end() || !st->is_object()) return;
  auto gpus = st->find("gpus");
  if (gpus == st->end() || !gpus->is_object()) return;
  for (auto it = gpus->begin(); it != gpus->end(); ++it) {
    int index = -1;
    const std::string& k = it.key();
    if (std::from_chars(k.data(), k.data() + k.size(), index).ptr != k.data() + k.size()) continue;
    const Json& g = it.value();
    if (!g.is_object() || !g.contains("observedRevision") ||
        !g["observedRevision"].is_number_integer() || !g.contains("state") ||
        !g["state"].is_string())
      continue;
    const std::string state = g["state"].get<std::string>();
    if (state != "Applied" && state != "Failed") continue;
    const std::string message =
        g.contains("message") && g["message"].is_string() ? g["message"].get<std::string>() : "";
    (void)LayoutReported(node, index, g["observedRevision"].get<int64_t>(), state == "Applied",
                         message);
  }
}

}  // namespace tessera::kube
