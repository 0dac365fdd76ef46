// SchedulerCore's counters (stats) and its Prometheus exposition (Metrics): pending pods and
// queue usage, allocation per pod and GPU, fragmentation, MIG re-layouts and rightsizing.
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

std::string SchedulerCore::Metrics(double now) const {
  std::map<std::string, int64_t> pending;
  std::map<std::string, double> oldest;
  for (const auto& q : admission_->Queues())
    if (q.name != kExternalQueue) pending[q.name] = 0, oldest[q.name] = 0;
  for (const auto& [key, p] : pods_) {
    if (p->bound || !p->ours || p->req.deleting) continue;
    ++pending[p->req.queue];
    if (p->first_pending >= 0)
      oldest[p->req.queue] = std::max(oldest[p->req.queue], now - p->first_pending);
  }
  std::string out;
  out += "# HELP tessera_pending_pods Pods waiting to be scheduled, per queue.\n";
  out += "# TYPE tessera_pending_pods gauge\n";
  for (const auto& [q, n] : pending)
    out += "tessera_pending_pods{queue=\"" + q + "\"} " + std::to_string(n) + "\n";
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
      "instances in use, so the scheduler keeps the layout it has.\n";
  out += "# TYPE tessera_mig_layout_conflicts gauge\n";
  out += "tessera_mig_layout_conflicts " + std::to_string(layout_conflicts_.size()) + "\n";
  out +=
      "# HELP tessera_gpu_fragmentation_ratio Free GPU capacity on partly used GPUs over all free "
      "GPU capacity.\n";
  out += "# TYPE tessera_gpu_fragmentation_ratio gauge\n";
  out +=
      "tessera_gpu_fragmentation_ratio " + std::to_string(ratio(free_partial, free_total)) + "\n";
  out += RightsizeMetrics();
  return out;
}

}  // namespace tessera::kube
