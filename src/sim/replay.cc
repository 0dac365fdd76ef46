#include "sim/replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "cluster/cluster_state.h"
#include "core/stats.h"
#include "engine/engine.h"
#include "policies/builtin.h"
#include "sim/parallel.h"

namespace tessera {
namespace {

Status ValidateDemand(const Workload& w) {
  const Demand& d = w.demand;
  const std::string where = "pod '" + w.name + "': ";
  if (d.cpu.v < 0 || d.memory.v < 0) return InvalidArgument(where + "negative CPU or memory");
  if (d.num_gpu < 0 || d.num_gpu > kMaxGpusPerNode)
    return InvalidArgument(where + "GPU count " + std::to_string(d.num_gpu) + " outside 0.." +
                           std::to_string(kMaxGpusPerNode));
  if (d.gpu_milli < 0 || d.gpu_milli > 1000)
    return InvalidArgument(where + "per-GPU share outside 0..1000");
  if ((d.num_gpu == 0) != (d.gpu_milli == 0))
    return InvalidArgument(where + "GPU count and per-GPU share must both be zero or positive");
  if (d.num_gpu > 1 && d.gpu_milli != 1000)
    return InvalidArgument(where + "a multi-GPU demand must ask for whole GPUs");
  if (w.deletion != -1 && w.deletion < w.creation)
    return InvalidArgument(where + "deletion " + std::to_string(w.deletion) + " before creation " +
                           std::to_string(w.creation));
  return Status::Ok();
}

// One run's mutable simulation state. Single-threaded; lives for one RunReplay call.
class Simulation {
 public:
  Simulation(const std::vector<Workload>& pods, ClusterState& state, Engine& engine,
             const ReplayOptions& opt, ReplayRun& run)
      : pods_(pods), state_(state), engine_(engine), opt_(opt), run_(run) {}

  Status Run();

 private:
  static constexpr uint64_t kNeverFailed = std::numeric_limits<uint64_t>::max();
  using Departure = std::pair<SimTime, uint32_t>;

  void InternShapes();
  bool MayFit(uint32_t shape, const Demand& d);
  Result<bool> TryPlace(uint32_t i, SimTime t);
  Status Arrive(uint32_t i, SimTime t);
  Status DepartAt(SimTime t);
  Status RetryWaiting(SimTime t);
  void Summarise();

  const std::vector<Workload>& pods_;
  ClusterState& state_;
  Engine& engine_;
  const ReplayOptions& opt_;
  ReplayRun& run_;

  std::vector<uint32_t> shape_of_;         // per pod
  std::vector<uint8_t> shape_impossible_;  // per shape
  std::vector<uint64_t> failed_epoch_;     // per shape: epoch of the latest failed decision
  uint64_t epoch_ = 0;                     // bumps at each batch of departures
  std::vector<NodeIdx> release_log_;       // nodes released, in order
  std::vector<size_t> epoch_start_{0};     // per epoch: release_log_ size when it began
  std::vector<uint32_t> waiting_;          // FIFO, arrival order
  std::priority_queue<Departure, std::vector<Departure>, std::greater<>> departures_;
};

void Simulation::InternShapes() {
  using Key = std::tuple<int64_t, int64_t, int, int, ModelMask>;
  std::map<Key, uint32_t> ids;
  std::vector<Demand> shapes;
  shape_of_.resize(pods_.size());
  for (size_t i = 0; i < pods_.size(); ++i) {
    const Demand& d = pods_[i].demand;
    auto [it, fresh] = ids.emplace(Key{d.cpu.v, d.memory.v, d.num_gpu, d.gpu_milli, d.models},
                                   static_cast<uint32_t>(shapes.size()));
    if (fresh) shapes.push_back(d);
    shape_of_[i] = it->second;
  }
  const auto empty = state_.all_free();
  shape_impossible_.assign(shapes.size(), 1);
  for (size_t s = 0; s < shapes.size(); ++s) {
    for (const NodeFree& f : empty) {
      if (FilterNode(f, shapes[s]) == FilterVerdict::kFits) {
        shape_impossible_[s] = 0;
        break;
      }
    }
  }
  failed_epoch_.assign(shapes.size(), kNeverFailed);
}

// False only if `d` is known to fit no node now: it failed at some epoch and no node released
// since then passes the filter (every other node has only lost free resources).
bool Simulation::MayFit(uint32_t shape, const Demand& d) {
  const uint64_t failed = failed_epoch_[shape];
  if (failed == kNeverFailed) return true;
  if (failed == epoch_) return false;
  const size_t from = epoch_start_[failed + 1];
  if (release_log_.size() - from > state_.num_nodes()) return true;
  for (size_t k = from; k < release_log_.size(); ++k) {
    if (FilterNode(state_.free(release_log_[k]), d) == FilterVerdict::kFits) return true;
  }
  failed_epoch_[shape] = epoch_;
  return false;
}

Result<bool> Simulation::TryPlace(uint32_t i, SimTime t) {
  const Workload& w = pods_[i];
  const uint32_t shape = shape_of_[i];
  if (opt_.prune_retries && !MayFit(shape, w.demand)) return false;
  const Decision d = engine_.Decide(state_, i, w.demand);
  ++run_.decisions;
  if (!d.placed) {
    failed_epoch_[shape] = epoch_;
    return false;
  }
  Status st = state_.Allocate(i, w.demand, d.placement);
  if (!st.ok())
    return Internal("pod '" + w.name + "': the ledger refused the engine's placement (" +
                    st.message() + ")");
  PodOutcome& o = run_.outcomes[i];
  o.fate = PodFate::kPlaced;
  o.start = t;
  o.placement = d.placement;
  if (w.deletion != -1) {
    const SimTime lifetime = w.deletion - w.creation;
    if (lifetime > std::numeric_limits<SimTime>::max() - t)
      return InvalidArgument("pod '" + w.name + "': departure time overflows");
    o.end = t + lifetime;
    departures_.emplace(o.end, i);
  }
  return true;
}

Status Simulation::Arrive(uint32_t i, SimTime t) {
  const Workload& w = pods_[i];
  engine_.Observe(w.demand);
  if (shape_impossible_[shape_of_[i]]) {
    const Decision d = engine_.Decide(state_, i, w.demand);
    ++run_.decisions;
    if (d.placed)
      return Internal("pod '" + w.name + "': placed although it fits no node of the empty cluster");
    run_.outcomes[i].fate = PodFate::kImpossible;
    return Status::Ok();
  }
  auto placed = TryPlace(i, t);
  if (!placed.ok()) return placed.status();
  if (!*placed) {
    waiting_.push_back(i);
    run_.peak_pending = std::max(run_.peak_pending, static_cast<int64_t>(waiting_.size()));
  }
  return Status::Ok();
}

Status Simulation::DepartAt(SimTime t) {
  bool released = false;
  while (!departures_.empty() && departures_.top().first == t) {
    const uint32_t i = departures_.top().second;
    departures_.pop();
    if (!released) {
      released = true;
      ++epoch_;
      epoch_start_.push_back(release_log_.size());
    }
    Status st = state_.Release(i);
    if (!st.ok())
      return Internal("pod '" + pods_[i].name + "': release failed (" + st.message() + ")");
    release_log_.push_back(run_.outcomes[i].placement.node);
  }
  return released ? RetryWaiting(t) : Status::Ok();
}

Status Simulation::RetryWaiting(SimTime t) {
  size_t kept = 0;
  for (size_t r = 0; r < waiting_.size(); ++r) {
    auto placed = TryPlace(waiting_[r], t);
    if (!placed.ok()) return placed.status();
    if (!*placed) waiting_[kept++] = waiting_[r];
  }
  waiting_.resize(kept);
  return Status::Ok();
}

Status Simulation::Run() {
  const size_t n = pods_.size();
  run_.outcomes.assign(n, PodOutcome{});
  InternShapes();
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Workload& x = pods_[a];
    const Workload& y = pods_[b];
    if (x.creation != y.creation) return x.creation < y.creation;
    if (x.name != y.name) return x.name < y.name;
    return a < b;
  });

  const SimTime first = pods_[order[0]].creation;
  const SimTime last_arrival = pods_[order[n - 1]].creation;
  SimTime prev = first;
  double alloc_integral = 0;   // milli-GPU x seconds
  double window_integral = 0;  // the same over [first, last_arrival]
  size_t next = 0;
  int64_t event_times = 0;
  while (next < n || !departures_.empty()) {
    SimTime t = next < n ? pods_[order[next]].creation : std::numeric_limits<SimTime>::max();
    if (!departures_.empty()) t = std::min(t, departures_.top().first);
    alloc_integral +=
        static_cast<double>(state_.gpu_allocated_milli()) * static_cast<double>(t - prev);
    if (prev < last_arrival) {
      window_integral += static_cast<double>(state_.gpu_allocated_milli()) *
                         static_cast<double>(std::min(t, last_arrival) - prev);
    }
    prev = t;
    TESSERA_RETURN_IF_ERROR(DepartAt(t));
    for (; next < n && pods_[order[next]].creation == t; ++next) {
      TESSERA_RETURN_IF_ERROR(Arrive(order[next], t));
    }
    ++event_times;
    if (opt_.check_invariants_every > 0 && event_times % opt_.check_invariants_every == 0) {
      Status st = state_.CheckInvariants();
      if (!st.ok()) return Internal("at t=" + std::to_string(t) + ": " + st.message());
    }
  }

  if (opt_.check_invariants_every > 0) {
    Status st = state_.CheckInvariants();
    if (!st.ok()) return Internal("at the end: " + st.message());
    size_t resident = 0;
    for (const PodOutcome& o : run_.outcomes) resident += o.fate == PodFate::kPlaced && o.end == -1;
    if (resident != state_.num_allocations())
      return Internal("ledger holds " + std::to_string(state_.num_allocations()) +
                      " allocations at the end, expected " + std::to_string(resident));
  }
  run_.first_arrival = first;
  run_.last_event = prev;
  const double span = static_cast<double>(prev - first);
  run_.gpu_alloc_time_weighted_pct =
      span > 0 ? alloc_integral / (static_cast<double>(state_.gpu_capacity_milli()) * span) * 100.0
               : 0.0;
  const double window = static_cast<double>(last_arrival - first);
  run_.last_arrival = last_arrival;
  run_.gpu_alloc_arrival_window_pct =
      window > 0
          ? window_integral / (static_cast<double>(state_.gpu_capacity_milli()) * window) * 100.0
          : 0.0;
  Summarise();
  return Status::Ok();
}

void Simulation::Summarise() {
  std::vector<double> waits;
  double sum = 0;
  for (size_t i = 0; i < pods_.size(); ++i) {
    const PodOutcome& o = run_.outcomes[i];
    if (o.fate == PodFate::kImpossible) ++run_.impossible;
    if (o.fate != PodFate::kPlaced) continue;
    const SimTime wait = o.start - pods_[i].creation;
    run_.delayed += wait > 0;
    waits.push_back(static_cast<double>(wait));
    sum += static_cast<double>(wait);
  }
  std::sort(waits.begin(), waits.end());
  run_.pods = static_cast<int64_t>(pods_.size());
  run_.placed = static_cast<int64_t>(waits.size());
  run_.never_placed = run_.pods - run_.placed;
  run_.wait_p50_s = SortedQuantile(waits, 0.50);
  run_.wait_p95_s = SortedQuantile(waits, 0.95);
  run_.wait_p99_s = SortedQuantile(waits, 0.99);
  run_.mean_wait_s = waits.empty() ? 0.0 : sum / static_cast<double>(waits.size());
  run_.max_wait_s = waits.empty() ? 0.0 : waits.back();
}

Result<std::unique_ptr<Scorer>> MakeScorer(const std::string& policy,
                                           const std::vector<Workload>& pods, double coverage_pct,
                                           const TesseraConfig& tessera) {
  if (policy == "tessera") {
    TESSERA_RETURN_IF_ERROR(tessera.Validate());
    return MakeTesseraScorer(tessera);
  }
  PolicyConfig cfg{policy, {}};
  if (policy == "fgd") {
    std::vector<Demand> demands;
    demands.reserve(pods.size());
    for (const Workload& w : pods) demands.push_back(w.demand);
    cfg.target = TargetWorkload::FromDemands(demands, coverage_pct);
  }
  return BuiltinPolicies().Create(cfg);
}

}  // namespace

Result<ReplayRun> RunReplay(const std::vector<NodeSpec>& nodes, const std::vector<Workload>& pods,
                            const ReplayOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  if (pods.empty()) return InvalidArgument("no pods to replay");
  if (pods.size() > std::numeric_limits<uint32_t>::max()) return InvalidArgument("too many pods");
  for (const Workload& w : pods) TESSERA_RETURN_IF_ERROR(ValidateDemand(w));
  ClusterState state;
  for (const NodeSpec& n : nodes) {
    auto r = state.AddNode(n);
    if (!r.ok()) return r.status();
  }
  if (state.gpu_capacity_milli() == 0) return InvalidArgument("the cluster has no GPUs");
  auto scorer = MakeScorer(opt.policy, pods, opt.typical_coverage_pct, opt.tessera);
  if (!scorer.ok()) return scorer.status();
  // The same seed stream as RunFill, so tie-break orders agree between the two protocols.
  Engine engine(std::move(scorer).value(), opt.seed * 0x9e3779b97f4a7c15ULL + 1);

  ReplayRun run;
  run.policy = opt.policy;
  run.seed = opt.seed;
  Simulation sim(pods, state, engine, opt, run);
  TESSERA_RETURN_IF_ERROR(sim.Run());
  run.mix_changes = engine.scorer().mix_changes();
  run.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

Result<std::vector<ReplaySummary>> RunReplayMatrix(const std::vector<NodeSpec>& nodes,
                                                   const std::vector<Workload>& pods,
                                                   const std::vector<std::string>& policies,
                                                   const std::vector<uint64_t>& seeds,
                                                   unsigned threads, bool keep_outcomes) {
  if (policies.empty()) return InvalidArgument("no policies given");
  std::set<std::string> distinct;
  std::vector<ReplayOptions> variants;
  for (const auto& p : policies) {
    if (!distinct.insert(p).second) return InvalidArgument("policy '" + p + "' given twice");
    auto probe =
        BuiltinPolicies().Create(PolicyConfig{p, TargetWorkload{{TaskShape{0, 0, 0, 0, 1}}}});
    if (!probe.ok()) return probe.status();
    variants.emplace_back().policy = p;
  }
  return RunReplayVariants(nodes, pods, variants, seeds, threads, keep_outcomes);
}

Result<std::vector<ReplaySummary>> RunReplayVariants(const std::vector<NodeSpec>& nodes,
                                                     const std::vector<Workload>& pods,
                                                     const std::vector<ReplayOptions>& variants,
                                                     const std::vector<uint64_t>& seeds,
                                                     unsigned threads, bool keep_outcomes) {
  if (variants.empty()) return InvalidArgument("no policies given");
  if (seeds.empty()) return InvalidArgument("no seeds given");
  const size_t jobs = variants.size() * seeds.size();
  std::vector<Result<ReplayRun>> results(jobs, Result<ReplayRun>(Internal("not run")));
  ParallelFor(jobs, threads, [&](size_t j) {
    ReplayOptions o = variants[j / seeds.size()];
    o.seed = seeds[j % seeds.size()];
    results[j] = RunReplay(nodes, pods, o);
    if (results[j].ok() && !keep_outcomes) {
      results[j]->outcomes.clear();
      results[j]->outcomes.shrink_to_fit();
    }
  });

  std::vector<ReplaySummary> out;
  for (size_t p = 0; p < variants.size(); ++p) {
    ReplaySummary s;
    s.policy = variants[p].policy;
    for (size_t k = 0; k < seeds.size(); ++k) {
      auto& r = results[p * seeds.size() + k];
      if (!r.ok()) return r.status();
      s.runs.push_back(std::move(r).value());
    }
    auto stats = [&](auto field) {
      std::vector<double> v;
      for (const ReplayRun& r : s.runs) v.push_back(static_cast<double>(r.*field));
      return Stats::Of(std::move(v));
    };
    s.placed = stats(&ReplayRun::placed);
    s.never_placed = stats(&ReplayRun::never_placed);
    s.impossible = stats(&ReplayRun::impossible);
    s.wait_p50_s = stats(&ReplayRun::wait_p50_s);
    s.wait_p95_s = stats(&ReplayRun::wait_p95_s);
    s.wait_p99_s = stats(&ReplayRun::wait_p99_s);
    s.mean_wait_s = stats(&ReplayRun::mean_wait_s);
    s.gpu_alloc_time_weighted_pct = stats(&ReplayRun::gpu_alloc_time_weighted_pct);
    s.gpu_alloc_arrival_window_pct = stats(&ReplayRun::gpu_alloc_arrival_window_pct);
    s.peak_pending = stats(&ReplayRun::peak_pending);
    s.wall_seconds = stats(&ReplayRun::wall_seconds);
    out.push_back(std::move(s));
  }
  return out;
}

std::string ReplayTable(const std::vector<ReplaySummary>& results) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line,
                "%-11s %5s %7s %9s %7s %7s %10s %10s %10s %10s %8s %8s %8s %8s\n", "policy",
                "seeds", "pods", "placed", "never", "imposs.", "wait p50 s", "wait p95 s",
                "wait p99 s", "mean wait", "GPU %tw", "GPU %arr", "peak q", "wall s");
  out += line;
  out += std::string(std::string_view(line).size() - 1, '-') + "\n";
  for (const auto& s : results) {
    const double pods = s.runs.empty() ? 0.0 : static_cast<double>(s.runs.front().pods);
    std::snprintf(line, sizeof line,
                  "%-11s %5zu %7.0f %9.1f %7.1f %7.1f %10.1f %10.1f %10.1f %10.1f %8.2f %8.2f "
                  "%8.1f %8.2f\n",
                  s.policy.c_str(), s.runs.size(), pods, s.placed.mean, s.never_placed.mean,
                  s.impossible.mean, s.wait_p50_s.mean, s.wait_p95_s.mean, s.wait_p99_s.mean,
                  s.mean_wait_s.mean, s.gpu_alloc_time_weighted_pct.mean,
                  s.gpu_alloc_arrival_window_pct.mean, s.peak_pending.mean, s.wall_seconds.mean);
    out += line;
  }
  return out;
}

std::string ReplayJson(const std::vector<ReplaySummary>& results, const std::string& nodes_source,
                       const std::string& pods_source) {
  using nlohmann::json;
  auto stats = [](const Stats& st) {
    return json{{"mean", st.mean},
                {"median", st.median},
                {"std", st.stddev},
                {"min", st.min},
                {"max", st.max}};
  };
  json pol = json::object();
  for (const auto& s : results) {
    auto mean = [&](auto field) {
      double sum = 0;
      for (const ReplayRun& r : s.runs) sum += static_cast<double>(r.*field);
      return s.runs.empty() ? 0.0 : sum / static_cast<double>(s.runs.size());
    };
    json p;
    p["pods"] = mean(&ReplayRun::pods);
    p["placed"] = mean(&ReplayRun::placed);
    p["never_placed"] = mean(&ReplayRun::never_placed);
    p["impossible"] = mean(&ReplayRun::impossible);
    p["delayed"] = mean(&ReplayRun::delayed);
    p["wait_p50_s"] = mean(&ReplayRun::wait_p50_s);
    p["wait_p95_s"] = mean(&ReplayRun::wait_p95_s);
    p["wait_p99_s"] = mean(&ReplayRun::wait_p99_s);
    p["mean_wait_s"] = mean(&ReplayRun::mean_wait_s);
    p["max_wait_s"] = mean(&ReplayRun::max_wait_s);
    p["gpu_alloc_time_weighted_pct"] = mean(&ReplayRun::gpu_alloc_time_weighted_pct);
    p["gpu_alloc_arrival_window_pct"] = mean(&ReplayRun::gpu_alloc_arrival_window_pct);
    p["peak_pending"] = mean(&ReplayRun::peak_pending);
    p["decisions"] = mean(&ReplayRun::decisions);
    p["wall_seconds"] = mean(&ReplayRun::wall_seconds);
    p["wall_seconds_total"] = mean(&ReplayRun::wall_seconds) * static_cast<double>(s.runs.size());
    p["stats"] = {{"placed", stats(s.placed)},
                  {"never_placed", stats(s.never_placed)},
                  {"wait_p50_s", stats(s.wait_p50_s)},
                  {"wait_p95_s", stats(s.wait_p95_s)},
                  {"wait_p99_s", stats(s.wait_p99_s)},
                  {"mean_wait_s", stats(s.mean_wait_s)},
                  {"gpu_alloc_time_weighted_pct", stats(s.gpu_alloc_time_weighted_pct)},
                  {"gpu_alloc_arrival_window_pct", stats(s.gpu_alloc_arrival_window_pct)},
                  {"peak_pending", stats(s.peak_pending)}};
    json seeds = json::array();
    json runs = json::array();
    for (const ReplayRun& r : s.runs) {
      seeds.push_back(r.seed);
      runs.push_back({{"seed", r.seed},
                      {"pods", r.pods},
                      {"placed", r.placed},
                      {"never_placed", r.never_placed},
                      {"impossible", r.impossible},
                      {"delayed", r.delayed},
                      {"wait_p50_s", r.wait_p50_s},
                      {"wait_p95_s", r.wait_p95_s},
                      {"wait_p99_s", r.wait_p99_s},
                      {"mean_wait_s", r.mean_wait_s},
                      {"max_wait_s", r.max_wait_s},
                      {"gpu_alloc_time_weighted_pct", r.gpu_alloc_time_weighted_pct},
                      {"gpu_alloc_arrival_window_pct", r.gpu_alloc_arrival_window_pct},
                      {"last_arrival_s", r.last_arrival},
                      {"peak_pending", r.peak_pending},
                      {"first_arrival_s", r.first_arrival},
                      {"last_event_s", r.last_event},
                      {"decisions", r.decisions},
                      {"mix_changes", r.mix_changes},
                      {"wall_seconds", r.wall_seconds}});
    }
    p["seeds"] = seeds;
    p["runs"] = runs;
    pol[s.policy] = p;
  }
  json j;
  j["nodes"] = nodes_source;
  j["pods"] = pods_source;
  j["policies"] = pol;
  return j.dump(2) + "\n";
}

Result<std::vector<Workload>> CompressArrivals(const std::vector<Workload>& pods, double factor) {
  if (!(factor >= 1.0) || !std::isfinite(factor))
    return InvalidArgument("time scale must be a finite number >= 1, got " +
                           std::to_string(factor));
  std::vector<Workload> out = pods;
  for (Workload& w : out) {
    const SimTime start =
        static_cast<SimTime>(std::floor(static_cast<double>(w.creation) / factor));
    if (w.deletion >= 0) w.deletion = start + (w.deletion - w.creation);
    w.creation = start;
  }
  return out;
}

}  // namespace tessera
