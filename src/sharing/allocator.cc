#include "sharing/allocator.h"

#include <algorithm>
#include <tuple>

namespace tessera {
Status ValidateSharingConfig(const SharingConfig& c) {
  if (c.planner.window < 0) return InvalidArgument("planner.window must not be negative");
  if (c.max_reserved_nodes < 0) return InvalidArgument("max_reserved_nodes must not be negative");
  if (!(c.protect_half_life_s >= 600 && c.protect_half_life_s <= 7 * 86400.0))
    return InvalidArgument("protect_half_life_s must be in [600, 604800]");
  if (!(c.protect_duration_prior_s >= 60 && c.protect_duration_prior_s <= 30 * 86400.0))
    return InvalidArgument("protect_duration_prior_s must be in [60, 2592000]");
  if (!(c.max_protected_share >= 0 && c.max_protected_share <= 1))
    return InvalidArgument("max_protected_share must be in [0, 1]");
  if (!c.selector.allow_mig && c.reconfigure_mig)
    return InvalidArgument("reconfigure_mig needs selector.allow_mig");
  return Status::Ok();
}

SharingAllocator::SharingAllocator(SharingConfig config)
    : config_(config),
      forecast_(config.protect_half_life_s, config.protect_duration_prior_s),
      selector_(config.selector),
      planner_(config.planner) {}

void SharingAllocator::Observe(const SliceDemand& d) {
  planner_.Observe(d);
}

void SharingAllocator::Observe(const SliceDemand& d, double now_s) {
  planner_.Observe(d);
  AdvanceClock(now_s);
  forecast_.Arrival(d.whole_gpus, now_s_);
  if (d.whole_gpus > 1) {
    if (d.models == 0) multi_any_model_ = true;
    multi_models_ |= d.models;
    multi_min_gpus_ = multi_min_gpus_ == 0 ? d.whole_gpus : std::min(multi_min_gpus_, d.whole_gpus);
  }
}

size_t SharingAllocator::protected_nodes() const {
  return static_cast<size_t>(std::count(protected_.begin(), protected_.end(), 1));
}

const std::vector<uint8_t>* SharingAllocator::Allowed(const ClusterState& cluster, WorkloadId id,
                                                      Scope scope) {
  const bool any_protected = protected_nodes() > 0;
  if (reserved_.empty() && (scope == Scope::kAll || !any_protected)) return nullptr;
  allowed_buf_.assign(cluster.num_nodes(), 1);
  if (scope != Scope::kAll) {
    for (NodeIdx n = 0; n < allowed_buf_.size(); ++n)
      allowed_buf_[n] = is_protected(n) == (scope == Scope::kProtected);
  }
  for (const auto& [owner, n] : reserved_)
    if (owner != id && n < allowed_buf_.size()) allowed_buf_[n] = 0;
  return &allowed_buf_;
}

void SharingAllocator::UpdateProtection(const ClusterState& cluster) {
  for (auto it = multi_running_.begin(); it != multi_running_.end();) {
    if (cluster.Find(it->first) != nullptr) {
      ++it;
      continue;
    }
    forecast_.Finished(it->first, now_s_);
    it = multi_running_.erase(it);
  }
  protected_.resize(cluster.num_nodes(), 0);
  forecast_gpus_ = config_.protect_nodes ? forecast_.GpusNeeded(now_s_) : 0;
  if (forecast_gpus_ <= 0) {
    std::fill(protected_.begin(), protected_.end(), 0);
    return;
  }
  // Eligible: nodes a multi-GPU job could use. Order: nodes already running one (their other
  // GPUs are the cheapest room for the next), nodes protected before (no churn), then the
  // emptiest nodes (they drain first).
  struct Cand {
    int has_multi, was, clients;
    NodeIdx n;
  };
  std::vector<Cand> cands;
  std::vector<uint8_t> has_multi(cluster.num_nodes(), 0);
  for (const auto& [id, n] : multi_running_)
    if (n < has_multi.size()) has_multi[n] = 1;
  for (NodeIdx n = 0; n < cluster.num_nodes(); ++n) {
    const GpuModelId m = cluster.spec(n).model;
    if (cluster.gpu_count(n) < std::max(2, multi_min_gpus_)) continue;
    if (!multi_any_model_ && !(m < 64 && ((multi_models_ >> m) & 1))) continue;
    int clients = 0;
    for (int g = 0; g < cluster.gpu_count(n); ++g) clients += cluster.gpu(n, g).clients;
    cands.push_back({has_multi[n] ? 0 : 1, protected_[n] ? 0 : 1, clients, n});
  }
  std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
    return std::tie(a.has_multi, a.was, a.clients, a.n) <
           std::tie(b.has_multi, b.was, b.clients, b.n);
  });
  const size_t cap = static_cast<size_t>(config_.max_protected_share * cands.size());
  std::fill(protected_.begin(), protected_.end(), 0);
  double gpus = 0;
  // A node is added while the forecast exceeds the protected GPUs by at least half the smallest
  // multi-GPU demand seen: a fading forecast protects nothing.
  const double slack = 0.5 * std::max(2, multi_min_gpus_);
  for (size_t i = 0; i < cands.size() && i < cap && gpus + slack <= forecast_gpus_; ++i) {
    protected_[cands[i].n] = 1;
    gpus += cluster.gpu_count(cands[i].n);
  }
}

void SharingAllocator::Reserve(const ClusterState& cluster, WorkloadId id, const SliceDemand& d) {
  if (reserved_.count(id) || static_cast<int>(reserved_.size()) >= config_.max_reserved_nodes)
    return;
  const int need = std::max(1, d.whole_gpus);
  int best_idle = -1;
  NodeIdx best = 0;
  for (NodeIdx n = 0; n < cluster.num_nodes(); ++n) {
    if (cluster.gpu_count(n) < need) continue;
    const GpuModelId m = cluster.spec(n).model;
    if (d.models != 0 && !((d.models >> m) & 1)) continue;
    if (d.memory_mib > GpuCatalog::Builtin().Get(m).memory_mib) continue;
    if (d.cpu.v > cluster.spec(n).cpu.v || d.host_memory.v > cluster.spec(n).memory.v) continue;
    bool taken = false;
    for (const auto& [owner, r] : reserved_) taken |= r == n;
    if (taken) continue;
    // Fewest workloads to wait for: the node that drains first when durations are unknown.
    int clients = 0;
    for (int g = 0; g < cluster.gpu_count(n); ++g) clients += cluster.gpu(n, g).clients;
    const int idle = 100000 - clients;
    if (idle > best_idle) {
      best_idle = idle;
      best = n;
    }
  }
  if (best_idle >= 0) reserved_[id] = best;
}

PlaceOutcome SharingAllocator::Place(ClusterState& cluster, WorkloadId id, const SliceDemand& d) {
  UpdateProtection(cluster);
  const bool multi = d.whole_gpus > 1;
  const bool any_protected = protected_nodes() > 0;
  PlaceOutcome out;
  if (multi && any_protected)
    out = PlaceOn(cluster, id, d, Allowed(cluster, id, Scope::kProtected));
  if (!out.placed)
    out = PlaceOn(cluster, id, d, Allowed(cluster, id, multi ? Scope::kAll : Scope::kUnprotected));
  if (out.placed) {
    reserved_.erase(id);
    if (multi) {
      multi_running_[id] = out.assignment.node;
      forecast_.Started(id, now_s_);
    }
  } else if (multi && config_.max_reserved_nodes > 0) {
    Reserve(cluster, id, d);
  }
  return out;
}

PlaceOutcome SharingAllocator::PlaceOn(ClusterState& cluster, WorkloadId id, const SliceDemand& d,
                                       const std::vector<uint8_t>* allowed) {
  PlaceOutcome out;
  Status valid = ValidateSliceDemand(d);
  if (!valid.ok()) {
    out.reason = valid.message();
    return out;
  }
  SliceChoice choice = selector_.Select(cluster, d, allowed);
  if (config_.reconfigure_mig) {
    if (WantsWholeGpus(d)) {
      if (!choice.placed) {
        auto plan = planner_.PlanWholeGpus(cluster, d, allowed);
        if (plan.ok()) out.reconfigs = std::move(*plan);
      }
    } else {
      auto plan = planner_.PlanBetterThan(cluster, d, choice, allowed);
      if (plan.ok()) out.reconfigs.push_back(std::move(*plan));
    }
    for (const auto& r : out.reconfigs) {
      auto diff = cluster.SetMigLayout(r.node, r.gpu, r.mig_after, r.after);
      if (!diff.ok()) {
        out.reason = "internal: planned reconfiguration refused: " + diff.status().message();
        return out;
      }
    }
    if (!out.reconfigs.empty()) choice = selector_.Select(cluster, d, allowed);
  }
  if (!choice.placed) {
    // Leave the cluster as it was: undo the re-layouts (their instances are all still free).
    for (auto it = out.reconfigs.rbegin(); it != out.reconfigs.rend(); ++it)
      (void)cluster.SetMigLayout(it->node, it->gpu, it->mig_before, it->before);
    out.reconfigs.clear();
    out.reason = choice.reason;
    return out;
  }
  Status st = cluster.Allocate(id, d, choice.assignment);
  if (!st.ok()) {
    out.reason = "internal: chosen slice refused: " + st.message();
    return out;
  }
  out.placed = true;
  out.assignment = choice.assignment;
  out.explanation = choice.explanation;
  for (const auto& r : out.reconfigs) out.explanation += "; " + r.reason;
  return out;
}

}  // namespace tessera
