// SchedulerCore: what the cluster already holds. Pods bound before this process started (or by
// other schedulers) are adopted at the slice their assignment names; the nodes' reported MIG
// layouts reach the ledger unless running pods need another, and a bound pod's assignment is
// evidence against a report that does not show what it holds.
#include <algorithm>
#include <bit>
#include <cstdio>

#include "kube/scheduler_core.h"
#include "kube/scheduler_core_internal.h"

namespace tessera::kube {

namespace {

// Queues notice `reason` for pod `key` unless `told` shows this message was its last; an empty
// message tells nothing and forgets the last.
void TellOnce(std::map<std::string, std::string>& told, const std::string& key, const PodRequest& r,
              const char* reason, std::string msg, std::vector<PodNotice>& out) {
  if (msg.empty()) {
    told.erase(key);
    return;
  }
  std::string& last = told[key];
  if (last == msg) return;
  last = msg;
  out.push_back({r.ns, r.name, r.uid, reason, std::move(msg)});
}

}  // namespace

void SchedulerCore::SyncMigLayouts(NodeIdx n, int only) {
  const NodeInfo& info = node_info_[n];
  const MigGeometry* geo = MigGeometryFor(info.model);
  auto sync = [&](int g, bool enabled, const std::string& text) {
    if (relayouts_.count({n, g})) return;  // the re-layout in flight decides
    MigLayout layout;
    if (enabled && geo) {
      auto parsed = ParseMigLayout(*geo, text);
      if (!parsed.ok()) return;  // DecodeInventory already checked it
      layout = std::move(*parsed);
    }
    const GpuSlices& gpu = state_.gpu(n, g);
    if (gpu.mig_enabled() == (enabled && geo) && gpu.Layout() == layout) {
      layout_conflicts_.erase({n, g});
      return;
    }
    // Refused when it would destroy an instance the ledger has in use: the ledger keeps the
    // layout its running slices need (counted in tessera_mig_layout_conflicts), and the pods
    // holding what the report omits are told when the conflict is new or changes.
    auto diff = state_.SetMigLayout(n, g, enabled && geo, layout);
    if (diff.ok()) {
      layout_conflicts_.erase({n, g});
      return;
    }
    LayoutConflict& c = layout_conflicts_[{n, g}];
    const bool changed = c.why != diff.status().message();
    c = {diff.status().message(), std::nullopt};
    if (changed) NotifySliceMissing(n, g, enabled && geo, layout);
  };
  bool listed = false;
  for (const GpuInventoryEntry& e : info.inventory) {
    if (e.index < 0 || e.index >= state_.gpu_count(n) || (only >= 0 && e.index != only)) continue;
    listed = true;
    sync(e.index, e.mig_enabled, e.mig_layout);
  }
  // A GPU its node does not report has MIG off (as when the node was first seen).
  if (only >= 0 && only < state_.gpu_count(n) && !listed) sync(only, false, "");
}

void SchedulerCore::NotifySliceMissing(NodeIdx n, int g, bool mig_enabled,
                                       const MigLayout& reported, WorkloadId only_job) {
  const GpuSlices& gpu = state_.gpu(n, g);
  const MigGeometry* geo = MigGeometryFor(node_info_[n].model);
  // One job's pods are found from its ids; the whole ledger is scanned only for a conflict.
  std::vector<WorkloadId> on_gpu;
  if (auto jt = jobs_.find(only_job); only_job != 0 && jt != jobs_.end()) {
    for (size_t i = 0; i < jt->second->pods.size(); ++i)
      on_gpu.push_back(only_job * kPodsPerJob + static_cast<WorkloadId>(i));
  } else if (only_job == 0) {
    on_gpu = state_.OnGpu(n, g);
  }
  for (WorkloadId w : on_gpu) {
    const SliceAssignment* a = state_.Find(w);
    const WorkloadId job = w / kPodsPerJob;
    if (!a || a->node != n || !((a->gpus >> g) & 1)) continue;
    const MigInstance* inst = nullptr;
    if (a->kind == SliceKind::kMig || a->kind == SliceKind::kMigMps) {
      const MigSlot* slot = gpu.Instance(a->mig_start);
      if (!geo || !slot) continue;
      if (mig_enabled &&
          std::find(reported.begin(), reported.end(), slot->instance) != reported.end())
        continue;  // the report shows it
      inst = &slot->instance;
    } else if (!mig_enabled) {
      continue;
    }
    const std::string holds = DescribeHold(a->kind, geo, inst);
    auto jt = jobs_.find(job);
    const size_t index = static_cast<size_t>(w % kPodsPerJob);
    if (jt == jobs_.end() || index >= jt->second->pods.size()) continue;
    auto pt = pods_.find(jt->second->pods[index]);
    if (pt == pods_.end()) continue;
    std::string msg = "this pod holds " + holds + " on GPU " + std::to_string(g) + " of node " +
                      node_info_[n].spec.name +
                      ", which the node's report does not show; the scheduler keeps it for the "
                      "pod until the pod is gone. The report lags the node, or the node lost it "
                      "(a GPU reset, MIG changed by hand): check the node agent.";
    TellOnce(slice_missing_told_, pt->first, pt->second->req, "SliceMissing", std::move(msg),
             deferred_notices_);  // once per pod and slice
  }
}

std::optional<std::pair<bool, MigLayout>> SchedulerCore::ReportedLayout(NodeIdx n, int g) const {
  const MigGeometry* geo = MigGeometryFor(node_info_[n].model);
  for (const GpuInventoryEntry& e : node_info_[n].inventory) {
    if (e.index != g) continue;
    if (!e.mig_enabled || !geo) return std::make_pair(false, MigLayout{});
    auto parsed = ParseMigLayout(*geo, e.mig_layout);
    if (!parsed.ok()) return std::nullopt;
    return std::make_pair(true, std::move(*parsed));
  }
  return std::make_pair(false, MigLayout{});
}

std::vector<SchedulerCore::Conformed> SchedulerCore::ConformToAssignment(
    const SliceAssignment& s, const std::string& mig_instance, const std::string& key) {
  std::vector<Conformed> saved;
  for (int g = 0; g < state_.gpu_count(s.node); ++g)
    if (((s.gpus >> g) & 1) && relayouts_.count({s.node, g}))
      return saved;  // the re-layout decides
  std::vector<Conformed> before;
  for (int g = 0; g < state_.gpu_count(s.node); ++g) {
    if (!((s.gpus >> g) & 1)) continue;
    const GpuSlices& gpu = state_.gpu(s.node, g);
    Conformed c{g, gpu.mig_enabled(), gpu.Layout(), std::nullopt};
    if (auto it = layout_conflicts_.find({s.node, g}); it != layout_conflicts_.end())
      c.conflict = it->second.why;
    before.push_back(std::move(c));
  }
  for (const auto& [g, holds] : kube::ConformToAssignment(state_, s, mig_instance)) {
    layout_conflicts_[{s.node, g}] = {
        "bound pod " + key + " holds " + holds + ", which the node's report does not show",
        std::nullopt};
    for (Conformed& c : before)
      if (c.gpu == g) saved.push_back(std::move(c));
  }
  return saved;
}

void SchedulerCore::NotifyConformed(NodeIdx n, const std::vector<Conformed>& conformed,
                                    WorkloadId job) {
  for (const Conformed& c : conformed)
    if (auto reported = ReportedLayout(n, c.gpu))
      NotifySliceMissing(n, c.gpu, reported->first, reported->second, job);
}

void SchedulerCore::RevertConform(NodeIdx n, const std::vector<Conformed>& saved) {
  for (const Conformed& c : saved) {
    // Legal: conforming kept every busy instance, and an adoption that failed holds nothing.
    (void)state_.SetMigLayout(n, c.gpu, c.mig_enabled, c.layout);
    if (c.conflict)
      layout_conflicts_[{n, c.gpu}] = {*c.conflict, std::nullopt};
    else
      layout_conflicts_.erase({n, c.gpu});
  }
}

Status SchedulerCore::AdoptBound(PodEntry& p, bool preemptible) {
  auto it = node_index_.find(p.req.node_name);
  if (it == node_index_.end()) return NotFound("node " + p.req.node_name + " is not known yet");
  const NodeIdx n = it->second;
  const NodeFree& f = state_.free(n);
  const GpuModelId model = node_info_[n].model;
  Demand d = model != kNoGpuModel ? DemandOn(p.req, model) : p.req.demand;
  d.models = 0;
  if (d.num_gpu > f.gpu_count) d.num_gpu = f.gpu_count, d.gpu_milli = d.num_gpu ? 1000 : 0;
  JobSpec spec;
  spec.id = next_job_++;
  spec.name = p.key;
  // The pod's queue, if it is ours and one of the queue's flavors covers the node's GPU model
  // (queues may have changed since it was bound); else it runs outside every queue's quota.
  bool known_queue = false, covered = config_.queues.empty();  // else "default" takes any model
  for (const auto& q : admission_->Queues()) known_queue |= q.name == p.req.queue;
  for (const QueueSpec& q : config_.queues) {
    if (q.name != p.req.queue) continue;
    for (const FlavorQuota& fl : q.flavors)
      covered |=
          fl.models == 0 || d.num_gpu == 0 || (model != kNoGpuModel && ((fl.models >> model) & 1));
  }
  const bool ours = p.req.scheduler_name == config_.scheduler_name;
  spec.queue = ours && known_queue && covered ? p.req.queue : kExternalQueue;
  std::string outside;
  if (ours && known_queue && !covered)
    outside = "queue " + p.req.queue + " has no flavor for " +
              (model != kNoGpuModel ? GpuCatalog::Builtin().Get(model).name : "its") +
              " GPUs, where this pod runs (on node " + p.req.node_name +
              "); it is counted outside every queue's quota until it is gone";
  spec.priority = p.req.priority;
  spec.pods = 1;
  spec.preemptible = preemptible;
  // Slices: pods placed as slices, and pods whose assignment names a MIG instance, an MPS client
  // or a time-slice replica. The named slice is adopted as it is; without one, any free slice
  // of the node that suits the request is taken, so the count stays right.
  std::optional<SliceAssignment> named;
  if (p.req.assignment && p.req.assignment->node == p.req.node_name)
    named = SliceFor(*p.req.assignment, node_info_[n], n);
  const bool slice_kind =
      named && named->kind != SliceKind::kExclusive && named->kind != SliceKind::kShare;
  if (state_.gpu_count(n) > 0 &&
      (WantsSlice(p.req, config_.select_share_mechanism) || slice_kind)) {
    SliceDemand sd = SliceDemandOn(p.req, model);
    sd.models = 0;
    SliceAssignment s;
    std::vector<Conformed> conformed;
    if (named) {
      s = *named;
      conformed = ConformToAssignment(s, p.req.assignment->mig_instance, p.key);
    } else {
      std::vector<uint8_t> only(state_.num_nodes(), 0);
      only[n] = 1;
      SliceChoice c = SliceSelector().Select(state_, sd, &only);
      if (!c.placed)
        return FailedPrecondition("no slice for it on " + p.req.node_name + ": " + c.reason);
      s = c.assignment;
    }
    spec.pod = d;
    spec.slice = sd;
    const std::string beyond = Beyond(n, sd.cpu.v, sd.host_memory.v);
    return Adopted(p, n, spec.id,
                   admission_->Adopt(state_, spec, {Placement{n, s.gpus}}, last_now_, {s}),
                   conformed, beyond, outside);
  }
  Placement pl{n, 0};
  std::vector<Conformed> conformed;
  if (p.req.assignment && p.req.assignment->node == p.req.node_name &&
      !p.req.assignment->gpus.empty()) {
    for (int g : p.req.assignment->gpus)
      if (g >= 0 && g < kMaxGpusPerNode) pl.gpus |= GpuMask{1} << g;
    SliceAssignment whole;
    whole.node = n;
    whole.gpus = pl.gpus;
    whole.kind = p.req.assignment->kind == AssignmentKind::kShare ? SliceKind::kShare
                                                                  : SliceKind::kExclusive;
    conformed = ConformToAssignment(whole, "", p.key);
  } else if (d.num_gpu > 0) {
    int got = 0;
    for (int g = 0; g < f.gpu_count && got < d.num_gpu; ++g) {
      if (f.gpu[g] >= d.gpu_milli) {
        pl.gpus |= GpuMask{1} << g;
        ++got;
      }
    }
  }
  if (std::popcount(pl.gpus) != d.num_gpu) {
    // The annotation and the request disagree: trust the annotation's GPUs.
    if (d.num_gpu > 0 && pl.gpus != 0) {
      d.num_gpu = std::popcount(pl.gpus);
      if (d.num_gpu > 1) d.gpu_milli = 1000;
    }
  }
  spec.pod = d;
  const std::string beyond = Beyond(n, d.cpu.v, d.memory.v);
  return Adopted(p, n, spec.id, admission_->Adopt(state_, spec, {pl}, last_now_), conformed, beyond,
                 outside);
}

std::string SchedulerCore::Beyond(NodeIdx n, int64_t cpu, int64_t memory) const {
  const NodeFree& f = state_.free(n);
  std::string parts;
  char buf[96];
  if (cpu > f.cpu) {
    std::snprintf(buf, sizeof buf, "%.3g CPU asked, %.3g free", cpu / 1000.0, f.cpu / 1000.0);
    parts = buf;
  }
  if (memory > f.memory) {
    std::snprintf(buf, sizeof buf, "%.1f GiB of memory asked, %.1f GiB free", memory / 1024.0,
                  f.memory / 1024.0);
    parts += (parts.empty() ? "" : "; ") + std::string(buf);
  }
  if (parts.empty()) return "";
  return "this pod runs on node " + node_info_[n].spec.name +
         " beyond what the scheduler counts free there (" + parts +
         "); it keeps its GPUs, and the node takes no new pods until enough of its pods are "
         "gone. The node's allocatable shrank after its pods started, or pods run there that "
         "ask for more than it has.";
}

Status SchedulerCore::Adopted(PodEntry& p, NodeIdx n, WorkloadId job_id, const Status& admitted,
                              const std::vector<Conformed>& conformed, const std::string& beyond,
                              const std::string& outside) {
  if (!admitted.ok()) {
    RevertConform(n, conformed);
    return admitted;
  }
  auto job = std::make_shared<JobEntry>();
  job->id = job_id;
  job->pods = {p.key};
  job->adopted = true;
  jobs_[job_id] = job;
  p.job = job_id;
  p.index = 0;
  p.adopted = true;
  ++stats_.adopted;
  NotifyConformed(n, conformed, job_id);
  TellOnce(overcommitted_, p.key, p.req, "NodeOvercommitted", beyond, deferred_notices_);
  TellOnce(outside_queue_, p.key, p.req, "OutsideQueue", outside, deferred_notices_);
  return Status::Ok();
}

}  // namespace tessera::kube
