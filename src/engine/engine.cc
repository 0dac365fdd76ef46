#include "engine/engine.h"

#include <bit>
#include <cstdio>
#include <numeric>

namespace tessera {

void RejectReasons::Count(FilterVerdict v) {
  ++nodes;
  switch (v) {
    case FilterVerdict::kCpu:
      ++cpu;
      break;
    case FilterVerdict::kMemory:
      ++memory;
      break;
    case FilterVerdict::kGpuModel:
      ++gpu_model;
      break;
    case FilterVerdict::kGpuCount:
      ++gpu;
      break;
    case FilterVerdict::kFits:
      --nodes;
      break;
  }
}

std::string RejectReasons::Summary() const {
  if (nodes == 0) return "no nodes in the cluster";
  std::string out = "0/" + std::to_string(nodes) + " nodes fit:";
  auto add = [&](int64_t n, const char* what) {
    if (n > 0) out += " " + std::to_string(n) + " " + what + ";";
  };
  add(cpu, "insufficient CPU");
  add(memory, "insufficient memory");
  add(gpu_model, "GPU model not allowed");
  add(gpu, "not enough GPUs with the requested share free");
  add(excluded, "excluded (node constraints, topology or reservation)");
  out.pop_back();
  return out;
}

std::string Decision::WhyNotPlaced() const {
  return is_slice ? why_not : reasons.Summary();
}

std::string Decision::Explain(const ClusterState& state) const {
  if (!placed) return "unschedulable: " + WhyNotPlaced();
  if (is_slice) return slice_explanation;
  std::string gpus;
  for (int g = 0; g < kMaxGpusPerNode; ++g) {
    if (!((placement.gpus >> g) & 1)) continue;
    if (!gpus.empty()) gpus.push_back(',');
    gpus.append(std::to_string(g));
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, " (score %.3f, best of %lld feasible nodes)", score,
                static_cast<long long>(feasible_nodes));
  return "placed on " + state.spec(placement.node).name +
         (gpus.empty() ? std::string(" (no GPU)") : " GPUs [" + gpus + "]") + buf;
}

Status Plan::Rollback(ClusterState& state) const {
  for (auto it = decisions.rbegin(); it != decisions.rend(); ++it) {
    if (it->placed) TESSERA_RETURN_IF_ERROR(state.Release(it->workload));
  }
  return Status::Ok();
}

FilterVerdict FilterNode(const NodeFree& f, const Demand& d) {
  if (d.cpu.v > f.cpu) return FilterVerdict::kCpu;
  if (d.memory.v > f.memory) return FilterVerdict::kMemory;
  if (d.num_gpu == 0) return FilterVerdict::kFits;
  if (!d.AllowsModel(f.model)) return FilterVerdict::kGpuModel;
  if (d.num_gpu > f.gpu_count) return FilterVerdict::kGpuCount;
  int n = 0;
  for (int g = 0; g < f.gpu_count; ++g) {
    n += f.gpu[g] >= d.gpu_milli;
    if (n >= d.num_gpu) return FilterVerdict::kFits;
  }
  return FilterVerdict::kGpuCount;
}

Engine::Engine(std::unique_ptr<Scorer> scorer, uint64_t seed)
    : scorer_(std::move(scorer)), rng_(seed) {}

void Engine::EnsureOrder(size_t num_nodes) {
  if (rank_.size() >= num_nodes) return;
  // Nodes added later rank after the existing ones, in a seeded order among themselves.
  std::vector<uint32_t> extra(num_nodes - rank_.size());
  std::iota(extra.begin(), extra.end(), static_cast<uint32_t>(rank_.size()));
  rng_.Shuffle(extra);
  rank_.insert(rank_.end(), extra.begin(), extra.end());
}

Decision Engine::Decide(const ClusterState& state, WorkloadId id, const Demand& demand,
                        const std::vector<uint8_t>* allowed) {
  EnsureOrder(state.num_nodes());
  Decision dec;
  dec.workload = id;
  dec.demand = demand;
  feasible_.clear();
  const auto all = state.all_free();
  for (NodeIdx n = 0; n < all.size(); ++n) {
    if (allowed && (n >= allowed->size() || !(*allowed)[n])) {
      ++dec.reasons.excluded;
      continue;
    }
    const FilterVerdict v = FilterNode(all[n], demand);
    if (v == FilterVerdict::kFits) {
      feasible_.push_back(n);
    } else {
      dec.reasons.Count(v);
    }
  }
  dec.feasible_nodes = static_cast<int64_t>(feasible_.size());
  if (feasible_.empty()) {
    dec.reasons.nodes = static_cast<int64_t>(all.size());
    return dec;
  }
  scorer_->PreScore(state, demand, feasible_, rng_);
  bool have = false;
  NodeScore best;
  NodeIdx best_node = 0;
  for (NodeIdx n : feasible_) {
    const NodeScore s = scorer_->Score(state, n, demand);
    if (!have || s.score > best.score || (s.score == best.score && rank_[n] < rank_[best_node])) {
      have = true;
      best = s;
      best_node = n;
    }
  }
  dec.placed = true;
  dec.placement = {best_node, best.gpus};
  dec.score = best.score;
  return dec;
}

Decision Engine::DecideSlice(const ClusterState& state, WorkloadId id, const SliceDemand& demand,
                             const std::vector<uint8_t>* allowed,
                             const std::vector<GpuMask>* frozen) const {
  Decision dec;
  dec.workload = id;
  dec.is_slice = true;
  SliceChoice c = selector_.Select(state, demand, allowed);
  if (planner_ && selector_.config().allow_mig && WantsWholeGpus(demand)) {
    // Whole GPUs are not served by MIG instances: when none is idle, MIG may be turned off.
    if (!c.placed) {
      auto plan = planner_->PlanWholeGpus(state, demand, allowed, frozen);
      if (plan.ok() && !plan->empty()) {
        dec.why_not = "waiting for MIG to be turned off on " + std::to_string(plan->size()) +
                      " GPU(s) of node " + state.spec(plan->front().node).name + ": " +
                      plan->front().reason;
        dec.relayouts = std::move(*plan);
        return dec;
      }
    }
  } else if (planner_ && selector_.config().allow_mig) {
    auto plan = planner_->PlanBetterThan(state, demand, c, allowed, frozen);
    if (plan.ok()) {
      dec.why_not = "waiting for a MIG re-layout: " + plan->reason;
      dec.relayouts.push_back(std::move(*plan));
      return dec;
    }
    if (!c.placed) c.reason += "; no MIG re-layout can help: " + plan.status().message();
  }
  dec.placed = c.placed;
  if (!c.placed) {
    dec.why_not = std::move(c.reason);
    return dec;
  }
  dec.slice = c.assignment;
  dec.placement = {c.assignment.node, c.assignment.gpus};
  dec.slice_explanation = std::move(c.explanation);
  return dec;
}

Result<Plan> Engine::RunCycle(ClusterState& state,
                              const std::vector<std::pair<WorkloadId, Demand>>& batch) {
  Plan plan;
  for (const auto& [id, demand] : batch) {
    Decision d = Decide(state, id, demand);
    if (d.placed) {
      Status st = state.Allocate(id, demand, d.placement);
      if (!st.ok()) {
        Status rb = plan.Rollback(state);
        return Internal("engine chose a placement the ledger refused (" + st.message() + ")" +
                        (rb.ok() ? "" : "; rollback failed: " + rb.message()));
      }
    }
    plan.decisions.push_back(std::move(d));
  }
  return plan;
}

}  // namespace tessera
