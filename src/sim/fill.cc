#include "sim/fill.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "cluster/cluster_state.h"
#include "engine/engine.h"
#include "policies/builtin.h"
#include "policies/frag.h"
#include "sim/parallel.h"

namespace tessera {
namespace {

std::string FormatG(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

const char* DominantReason(const RejectReasons& r) {
  const std::pair<int64_t, const char*> order[] = {
      {r.gpu, "gpu"}, {r.gpu_model, "gpu_model"}, {r.cpu, "cpu"}, {r.memory, "memory"}};
  const auto* best = &order[0];
  for (const auto& o : order)
    if (o.first > best->first) best = &o;
  return best->second;
}

void RecordLatency(FillDetail& d, double seconds) {
  size_t b = 0;
  while (b < kDecisionLatencyBounds.size() && seconds > kDecisionLatencyBounds[b]) ++b;
  ++d.latency_count[b];
  d.latency_sum_seconds += seconds;
}

}  // namespace

std::vector<Workload> PrepareFillSequence(const std::vector<Workload>& pods,
                                          int64_t gpu_capacity_milli, double tune_ratio,
                                          uint64_t seed) {
  std::vector<size_t> order(pods.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return pods[a].name < pods[b].name; });
  const std::vector<size_t> order_by_name = order;
  Rng rng(seed);
  rng.Shuffle(order);
  std::vector<Workload> seq;
  seq.reserve(order.size() * 2);
  int64_t total = 0;
  for (size_t i : order) {
    seq.push_back(pods[i]);
    total += pods[i].demand.TotalMilliGpu();
  }
  if (!(tune_ratio > 0) || pods.empty() || total == 0) return seq;
  const double target = tune_ratio * static_cast<double>(gpu_capacity_milli);
  if (static_cast<double>(total) < target) {
    for (int64_t k = 0;; ++k) {
      const Workload& w = pods[order_by_name[rng.Uniform(order_by_name.size())]];
      // As in the reference simulator, the overshoot test uses the per-GPU share.
      if (static_cast<double>(total + w.demand.gpu_milli) > target) break;
      Workload copy = w;
      copy.name += "-tuned-" + std::to_string(k);
      total += w.demand.TotalMilliGpu();
      seq.push_back(std::move(copy));
    }
  } else {
    while (static_cast<double>(total) > target && !seq.empty()) {
      const size_t idx = rng.Uniform(seq.size());
      total -= seq[idx].demand.TotalMilliGpu();
      seq.erase(seq.begin() + static_cast<std::ptrdiff_t>(idx));
    }
  }
  return seq;
}

Status ValidateTuneRatio(double tune_ratio) {
  if (std::isfinite(tune_ratio) && tune_ratio > 0 && tune_ratio <= kMaxTuneRatio)
    return Status::Ok();
  return InvalidArgument("tune ratio " + FormatG(tune_ratio) + " outside the allowed range (0, " +
                         FormatG(kMaxTuneRatio) + "]");
}

Result<FillRun> RunFill(const std::vector<NodeSpec>& nodes, const std::vector<Workload>& pods,
                        const FillOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  TESSERA_RETURN_IF_ERROR(ValidateTuneRatio(opt.tune_ratio));
  ClusterState state;
  for (const NodeSpec& n : nodes) {
    auto r = state.AddNode(n);
    if (!r.ok()) return r.status();
  }
  if (state.gpu_capacity_milli() == 0) return InvalidArgument("the cluster has no GPUs");
  int64_t demand_milli = 0;
  for (const Workload& w : pods) demand_milli += w.demand.TotalMilliGpu();
  if (demand_milli == 0) return InvalidArgument("no pod asks for a GPU");
  // Inflation draws pods with their mean GPU demand until the target is reached.
  const double expected_pods =
      opt.tune_ratio * static_cast<double>(state.gpu_capacity_milli()) /
      (static_cast<double>(demand_milli) / static_cast<double>(pods.size()));
  if (expected_pods > static_cast<double>(kMaxFillPods))
    return InvalidArgument("inflating the workload to " + FormatG(opt.tune_ratio) +
                           " x GPU capacity needs about " +
                           std::to_string(static_cast<int64_t>(expected_pods)) +
                           " pods, more than the limit of " + std::to_string(kMaxFillPods));

  std::vector<Demand> demands;
  demands.reserve(pods.size());
  for (const Workload& w : pods) demands.push_back(w.demand);
  const TargetWorkload target = TargetWorkload::FromDemands(demands, opt.typical_coverage_pct);

  PolicyConfig cfg{opt.policy, target};
  auto scorer = BuiltinPolicies().Create(cfg);
  if (!scorer.ok()) return scorer.status();
  // The tie-break order uses its own stream so the sequence does not depend on the policy.
  Engine engine(std::move(scorer).value(), opt.seed * 0x9e3779b97f4a7c15ULL + 1);

  const std::vector<Workload> seq =
      PrepareFillSequence(pods, state.gpu_capacity_milli(), opt.tune_ratio, opt.seed);
  if (opt.past)
    for (const Workload& w : *opt.past) engine.ObservePast(w.demand);

  FragModel measure(target);
  std::vector<double> node_frag(state.num_nodes());
  double frag_total = 0;
  for (NodeIdx n = 0; n < state.num_nodes(); ++n) {
    node_frag[n] = measure.Frag(state.free(n));
    frag_total += node_frag[n];
  }

  FillRun run;
  if (opt.detail) run.detail.emplace();
  run.policy = opt.policy;
  run.seed = opt.seed;
  run.pods = static_cast<int64_t>(seq.size());
  const double cap = static_cast<double>(state.gpu_capacity_milli());
  int64_t arrived = 0;
  int next_bucket = 0;
  auto record_upto = [&](int bucket) {
    const double alloc = static_cast<double>(state.gpu_allocated_milli());
    const double idle = cap - alloc;
    for (; next_bucket <= bucket && next_bucket < kArrivalBuckets; ++next_bucket) {
      run.unalloc_pct[next_bucket] = 100.0 - alloc / cap * 100.0;
      run.frag_ratio_pct[next_bucket] = idle > 0 ? frag_total / idle * 100.0 : 0.0;
      run.frag_pct[next_bucket] = frag_total / cap * 100.0;
    }
  };
  record_upto(0);
  WorkloadId id = 0;
  for (const Workload& w : seq) {
    engine.Observe(w.demand);
    const auto decide_start = std::chrono::steady_clock::now();
    const Decision d = engine.Decide(state, id, w.demand);
    ++run.decisions;
    if (run.detail) {
      RecordLatency(
          *run.detail,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - decide_start).count());
      if (!d.placed) ++run.detail->not_placed[DominantReason(d.reasons)];
    }
    if (d.placed) {
      Status st = state.Allocate(id, w.demand, d.placement);
      if (!st.ok()) return Internal("ledger refused engine placement: " + st.message());
      ++run.placed;
      const NodeIdx n = d.placement.node;
      const double f = measure.Frag(state.free(n));
      frag_total += f - node_frag[n];
      node_frag[n] = f;
    }
    ++id;
    arrived += w.demand.TotalMilliGpu();
    record_upto(static_cast<int>(std::floor(static_cast<double>(arrived) / cap * 100.0)));
  }
  run.final_arrival_pct = static_cast<double>(arrived) / cap * 100.0;
  // Buckets past the final arrival (e.g. 130 when the run ends at 129.9%) hold the end state.
  {
    const double alloc = static_cast<double>(state.gpu_allocated_milli());
    const double idle = cap - alloc;
    for (; next_bucket < kArrivalBuckets; ++next_bucket) {
      run.unalloc_pct[next_bucket] = 100.0 - alloc / cap * 100.0;
      run.frag_ratio_pct[next_bucket] = idle > 0 ? frag_total / idle * 100.0 : 0.0;
      run.frag_pct[next_bucket] = frag_total / cap * 100.0;
    }
    run.unalloc_pct_at_130 = 100.0 - alloc / cap * 100.0;
  }
  if (run.detail) {
    run.detail->node_held_milli.resize(static_cast<size_t>(state.num_nodes()));
    for (NodeIdx n = 0; n < state.num_nodes(); ++n)
      for (int g = 0; g < state.free(n).gpu_count; ++g) {
        const GpuSlices& gpu = state.gpu(n, g);
        if (const int held = gpu.HeldMilli(); held > 0)
          run.detail->node_held_milli[static_cast<size_t>(n)][GpuModeName(gpu.mode)] += held;
      }
  }
  run.unalloc_pct_at_100 = run.unalloc_pct[100];
  run.frag_ratio_at_90 = run.frag_ratio_pct[90];
  run.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

Stats Stats::Of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const double n = static_cast<double>(v.size());
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
  s.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(ss / (n - 1)) : 0.0;
  s.min = v.front();
  s.max = v.back();
  return s;
}

Result<std::vector<FillSummary>> RunFillMatrix(const std::vector<NodeSpec>& nodes,
                                               const std::vector<Workload>& pods,
                                               const std::vector<std::string>& policies,
                                               const std::vector<uint64_t>& seeds,
                                               double tune_ratio, unsigned threads,
                                               const FillHooks& hooks) {
  TESSERA_RETURN_IF_ERROR(ValidateTuneRatio(tune_ratio));
  for (const auto& p : policies) {
    auto probe =
        BuiltinPolicies().Create(PolicyConfig{p, TargetWorkload{{TaskShape{0, 0, 0, 0, 1}}}});
    if (!probe.ok()) return probe.status();
  }
  const size_t jobs = policies.size() * seeds.size();
  std::vector<Result<FillRun>> results(jobs, Result<FillRun>(Internal("not run")));
  ParallelFor(jobs, threads, [&](size_t j) {
    FillOptions o;
    o.policy = policies[j / seeds.size()];
    o.seed = seeds[j % seeds.size()];
    o.tune_ratio = tune_ratio;
    o.detail = hooks.detail;
    o.past = hooks.past;
    results[j] = RunFill(nodes, pods, o);
    if (hooks.on_run && results[j].ok()) hooks.on_run(*results[j]);
  });

  std::vector<FillSummary> out;
  for (size_t p = 0; p < policies.size(); ++p) {
    FillSummary s;
    s.policy = policies[p];
    s.tune_ratio = tune_ratio;
    std::vector<double> a100, a130, f90;
    for (size_t k = 0; k < seeds.size(); ++k) {
      auto& r = results[p * seeds.size() + k];
      if (!r.ok()) return r.status();
      a100.push_back(r->unalloc_pct_at_100);
      a130.push_back(r->unalloc_pct_at_130);
      f90.push_back(r->frag_ratio_at_90);
      s.wall_seconds += r->wall_seconds;
      s.runs.push_back(std::move(r).value());
    }
    s.unalloc_at_100 = Stats::Of(a100);
    s.unalloc_at_130 = Stats::Of(a130);
    s.frag_ratio_at_90 = Stats::Of(f90);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tessera
