// SchedulerCore's counters (stats) and its Prometheus exposition (Metrics): pending pods and
// queue usage (pending pods by reason), allocation per pod, node and GPU, fragmentation,
// scheduling latency, decisions and preemptions, MIG re-layouts and rightsizing.
#include <algorithm>
#include <cstdio>

#include "kube/rightsize.h"
#include "kube/scheduler_core.h"
#include "kube/scheduler_core_internal.h"

namespace tessera::kube {

CoreStats SchedulerCore::stats() const {
  CoreStats s = stats_;
  s.nodes = 0;
  for (uint8_t a : node_alive_) s.nodes += a;
  s.pods_pending = 0;
  s.pods_bound = 0;
  for (const auto& [k, p] : pods_) {
    if (p->bound)
      ++s.pods_bound;
    else if (p->req.scheduler_name == config_.scheduler_name)
      ++s.pods_pending;
  }
  return s;
}

const char* SchedulerCore::PendingReasonOf(const PodEntry& p) const {
  if (!p.bind_node.empty()) {
    for (const BindAction& b : held_)
      if (b.ns == p.req.ns && b.name == p.req.name) return "preempting";
    return "binding";
  }
  if (p.job == 0) return p.req.gang.empty() ? "other" : "gang";
  if (relayout_wait_.count(p.job)) return "mig_relayout";
  if (admission_->state(p.job) != JobState::kPending) return "other";
  switch (admission_->WhyPendingReason(p.job)) {
    case PendingReason::kQuota:
      return "quota";
    case PendingReason::kNoFit:
      return "no_fit";
    case PendingReason::kOther:
      break;
  }
  return "other";
}

std::string SchedulerCore::Metrics(double now) const {
  std::map<std::string, int64_t> pending;
  std::map<std::string, double> oldest;
  std::map<std::string, std::map<std::string, int64_t>> by_reason;  // queue -> reason -> pods
  for (const auto& q : admission_->Queues()) {
    if (q.name == kExternalQueue) continue;
    pending[q.name] = 0, oldest[q.name] = 0;
    for (const char* r : kPendingReasons) by_reason[q.name][r] = 0;
  }
  for (const auto& [key, p] : pods_) {
    if (p->bound || !p->ours || p->req.deleting) continue;
    ++pending[p->req.queue];
    ++by_reason[p->req.queue][PendingReasonOf(*p)];
    if (p->first_pending >= 0)
      oldest[p->req.queue] = std::max(oldest[p->req.queue], now - p->first_pending);
  }
  std::string out;
  out += "# HELP tessera_pending_pods Pods waiting to be scheduled, per queue.\n";
  out += "# TYPE tessera_pending_pods gauge\n";
  for (const auto& [q, n] : pending)
    out += "tessera_pending_pods{queue=\"" + q + "\"} " + std::to_string(n) + "\n";
  out +=
      "# HELP tessera_pending_pods_by_reason Pods waiting to be scheduled, per queue and reason "
      "(quota, no_fit, gang, mig_relayout, preempting, binding, other).\n"
      "# TYPE tessera_pending_pods_by_reason gauge\n";
  for (const auto& [q, reasons] : by_reason)
    for (const char* r : kPendingReasons) {
      auto n = reasons.find(r);
      out += "tessera_pending_pods_by_reason{queue=\"" + q + "\",reason=\"" + r + "\"} " +
             std::to_string(n == reasons.end() ? 0 : n->second) + "\n";
    }
  out += "# HELP tessera_pending_oldest_seconds Age of the oldest waiting pod, per queue.\n";
  out += "# TYPE tessera_pending_oldest_seconds gauge\n";
  for (const auto& [q, t] : oldest)
    out += "tessera_pending_oldest_seconds{queue=\"" + q + "\"} " + std::to_string(t) + "\n";
  {
    std::map<std::string, int64_t> nominal;
    for (const QueueSpec& q : config_.queues) {
      int64_t sum = 0;
      for (const FlavorQuota& f : q.flavors) sum += f.nominal.gpu;
      nominal[q.name] = sum;
    }
    auto gpus = [](int64_t milli) { return std::to_string(static_cast<double>(milli) / 1000); };
    out +=
        "# HELP tessera_queue_used_gpus GPU-equivalents held by the running pods of a queue.\n"
        "# TYPE tessera_queue_used_gpus gauge\n";
    for (const auto& q : admission_->Queues())
      if (q.name != kExternalQueue)
        out += "tessera_queue_used_gpus{queue=\"" + q.name + "\"} " + gpus(q.usage.gpu) + "\n";
    out +=
        "# HELP tessera_queue_nominal_gpus Nominal GPU quota of a queue, summed over its flavors "
        "(only queues with a quota).\n"
        "# TYPE tessera_queue_nominal_gpus gauge\n";
    for (const auto& [q, milli] : nominal)
      out += "tessera_queue_nominal_gpus{queue=\"" + q + "\"} " + gpus(milli) + "\n";
  }
  out +=
      "# HELP tessera_pod_allocated_gpus GPUs (fractions for slices) held by a bound pod, from "
      "its assignment; model is the node's GPU model, kind the assignment kind.\n"
      "# TYPE tessera_pod_allocated_gpus gauge\n";
  for (const auto& [key, p] : pods_) {
    if (!p->bound || p->req.terminal() || !p->req.assignment) continue;
    const Assignment& a = *p->req.assignment;
    auto node = node_index_.find(a.node.empty() ? p->req.node_name : a.node);
    if (node == node_index_.end()) continue;
    const GpuModelId model = node_info_[node->second].model;
    if (model == kNoGpuModel) continue;
    const double gpus = AssignmentGpus(a, model);
    if (gpus <= 0) continue;
    char value[32];
    std::snprintf(value, sizeof value, "%.6g", gpus);
    out += "tessera_pod_allocated_gpus{namespace=\"" + p->req.ns + "\",pod=\"" + p->req.name +
           "\",queue=\"" + p->req.queue + "\",model=\"" + GpuCatalog::Builtin().Get(model).name +
           "\",kind=\"" + AssignmentKindName(a.kind) + "\"} " + value + "\n";
  }
  out += "# HELP tessera_invalid_pods_total GPU pods rejected because their request is invalid.\n";
  out += "# TYPE tessera_invalid_pods_total counter\n";
  out += "tessera_invalid_pods_total " + std::to_string(stats_.invalid) + "\n";
  int64_t capacity = 0, held = 0, free_total = 0, free_partial = 0;
  for (NodeIdx n = 0; n < state_.num_nodes(); ++n) {
    if (!node_alive_[n]) continue;
    const NodeFree& f = state_.free(n);
    for (int g = 0; g < f.gpu_count; ++g) {
      capacity += 1000;
      // Free capacity per GPU from its slice state, whatever its mode (an MPS GPU's free threads,
      // a MIG GPU's free compute slices), not only what whole-GPU demands could take.
      const int gpu_held = state_.gpu(n, g).HeldMilli();
      const int gpu_free = std::max(0, 1000 - gpu_held);
      held += gpu_held;
      free_total += gpu_free;
      if (gpu_free > 0 && gpu_free < 1000) free_partial += gpu_free;
    }
  }
  auto ratio = [](int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / b : 0.0; };
  out +=
      "# HELP tessera_gpu_allocated_ratio Allocated share of all GPU capacity (MIG: compute "
      "slices of the instances in use).\n";
  out += "# TYPE tessera_gpu_allocated_ratio gauge\n";
  out += "tessera_gpu_allocated_ratio " + std::to_string(ratio(held, capacity)) + "\n";
  out += "# HELP tessera_mig_relayouts_total MIG re-layouts asked of nodes, by outcome.\n";
  out += "# TYPE tessera_mig_relayouts_total counter\n";
  out += "tessera_mig_relayouts_total{result=\"planned\"} " +
         std::to_string(stats_.relayouts_planned) + "\n";
  out += "tessera_mig_relayouts_total{result=\"applied\"} " +
         std::to_string(stats_.relayouts_applied) + "\n";
  out += "tessera_mig_relayouts_total{result=\"failed\"} " +
         std::to_string(stats_.relayouts_failed) + "\n";
  out += "# HELP tessera_mig_relayouts_in_flight MIG re-layouts waiting for the node's report.\n";
  out += "# TYPE tessera_mig_relayouts_in_flight gauge\n";
  out += "tessera_mig_relayouts_in_flight " + std::to_string(relayouts_.size()) + "\n";
  out +=
      "# HELP tessera_mig_layout_conflicts GPUs whose published MIG layout would destroy "
      "instances in use or omits one a bound pod names, so the scheduler keeps the layout its "
      "pods need until they are gone.\n";
  out += "# TYPE tessera_mig_layout_conflicts gauge\n";
  out += "tessera_mig_layout_conflicts " + std::to_string(layout_conflicts_.size()) + "\n";
  auto live = [&](const std::map<std::string, std::string>& told) {
    int64_t count = 0;
    for (const auto& [key, msg] : told)
      if (auto it = pods_.find(key); it != pods_.end() && it->second->job != 0) ++count;
    return std::to_string(count);
  };
  out +=
      "# HELP tessera_overcommitted_pods Bound pods adopted beyond the CPU or memory their node "
      "had free in the scheduler's count; their GPUs are held and the node takes no new pods.\n"
      "# TYPE tessera_overcommitted_pods gauge\n"
      "tessera_overcommitted_pods " +
      live(overcommitted_) + "\n";
  int64_t over_nodes = 0;
  for (NodeIdx n = 0; n < state_.num_nodes(); ++n)
    over_nodes += node_alive_[n] && (state_.cpu_balance(n) < 0 || state_.memory_balance(n) < 0);
  out +=
      "# HELP tessera_overcommitted_nodes Nodes whose bound pods ask for more CPU or memory than "
      "the node's allocatable; they take no new pods until enough of them are gone.\n"
      "# TYPE tessera_overcommitted_nodes gauge\n"
      "tessera_overcommitted_nodes " +
      std::to_string(over_nodes) + "\n";
  out +=
      "# HELP tessera_pods_outside_queue Bound pods of a queue with no flavor for their node's GPU "
      "model, counted outside every queue's quota.\n"
      "# TYPE tessera_pods_outside_queue gauge\n"
      "tessera_pods_outside_queue " +
      live(outside_queue_) + "\n";
  out +=
      "# HELP tessera_gpu_fragmentation_ratio Free GPU capacity on partly used GPUs over all free "
      "GPU capacity.\n";
  out += "# TYPE tessera_gpu_fragmentation_ratio gauge\n";
  out +=
      "tessera_gpu_fragmentation_ratio " + std::to_string(ratio(free_partial, free_total)) + "\n";
  out +=
      "# HELP tessera_node_gpu_allocated_ratio Allocated share of a node's GPU capacity (MIG: "
      "compute slices of the instances in use).\n"
      "# TYPE tessera_node_gpu_allocated_ratio gauge\n";
  for (NodeIdx n = 0; n < state_.num_nodes(); ++n) {
    if (!node_alive_[n] || node_info_[n].model == kNoGpuModel) continue;
    const int gpus = state_.free(n).gpu_count;
    if (gpus <= 0) continue;
    int64_t node_held = 0;
    for (int g = 0; g < gpus; ++g) node_held += state_.gpu(n, g).HeldMilli();
    out += "tessera_node_gpu_allocated_ratio{node=\"" + node_info_[n].spec.name + "\",model=\"" +
           GpuCatalog::Builtin().Get(node_info_[n].model).name + "\"} " +
           std::to_string(ratio(node_held, int64_t{1000} * gpus)) + "\n";
  }
  out +=
      "# HELP tessera_scheduling_decisions_total Scheduling decisions: binds issued (bound) and "
      "pods given a new Unschedulable notice (unschedulable).\n"
      "# TYPE tessera_scheduling_decisions_total counter\n";
  out += "tessera_scheduling_decisions_total{result=\"bound\"} " +
         std::to_string(stats_.binds_issued) + "\n";
  out += "tessera_scheduling_decisions_total{result=\"unschedulable\"} " +
         std::to_string(stats_.unschedulable_notices) + "\n";
  out +=
      "# HELP tessera_preemptions_total Running pods evicted to make room for a higher-priority "
      "job or a queue reclaiming its lent quota.\n"
      "# TYPE tessera_preemptions_total counter\n";
  out += "tessera_preemptions_total " + std::to_string(stats_.preemption_evictions) + "\n";
  out +=
      "# HELP tessera_policy_mix_changes_total Changes of the workload mix the placement policy "
      "found; each time it re-learned the mix from the recent pods alone.\n"
      "# TYPE tessera_policy_mix_changes_total counter\n";
  out += "tessera_policy_mix_changes_total " +
         std::to_string(admission_->engine().scorer().mix_changes()) + "\n";
  out += latency_.Render("tessera_scheduling_latency_seconds",
                         "Time from a pod first seen pending to its bind being issued.");
  out += RightsizeMetrics();
  return out;
}

}  // namespace tessera::kube
