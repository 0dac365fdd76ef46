#include "sim/pollux_sim.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <optional>

#include <nlohmann/json.hpp>

#include "admission/admission.h"
#include "cluster/cluster_state.h"
#include "cluster/gpu_catalog.h"
#include "policies/builtin.h"
#include "sim/csv.h"
#include "sim/parallel.h"

namespace tessera {
namespace {

constexpr char kGpuModel[] = "T4";     // the Pollux testbed's GPUs
constexpr char kScorer[] = "bestfit";  // GPUs within a node, ties between nodes
constexpr char kQueue[] = "pollux";
constexpr int64_t kPodCpu = 1000;          // milli-CPU per GPU pod
constexpr int64_t kPodMemory = 1024;       // MiB per GPU pod
constexpr int64_t kNodeCpuPerGpu = 16000;  // host resources per GPU: never binding
constexpr int64_t kNodeMemoryPerGpu = 65536;
constexpr uint64_t kSeed = 1;

using Layouts = std::vector<std::vector<int>>;

struct Job {
  const PolluxJobSpec* spec = nullptr;
  const PolluxApp* app = nullptr;
  WorkloadId id = 0;
  int gpus = 0;
  double remaining = 0;  // iterations
  std::shared_ptr<const Layouts> layouts;
  double fastest_iter_s = 0;  // tessera: of the first layout
  std::vector<int> alloc;     // GPUs per node; empty when not running
  double iter_s = 0;          // of the current allocation
  double restart_left = 0;
  double held_gpu_s = 0;
  int queue = 0;
  bool submitted = false, started = false, done = false;
  double start = 0, finish = 0;
  int preemptions = 0, restarts = 0;
};

// Partitions of `left` into at most max_count parts of at most max_part, each descending, in
// lexicographically descending order.
void Partitions(int left, int max_part, int max_count, std::vector<int>& cur, Layouts& out) {
  if (left == 0) {
    out.push_back(cur);
    return;
  }
  if (max_count == 0) return;
  for (int p = std::min(left, max_part); p >= 1; --p) {
    if (static_cast<int64_t>(p) * max_count < left) break;
    cur.push_back(p);
    Partitions(left - p, p, max_count - 1, cur, out);
    cur.pop_back();
  }
}

class Sim {
 public:
  Sim(const PolluxApps& apps, const PolluxWorkload& w, PolluxPolicy policy,
      const PolluxSimConfig& cfg)
      : apps_(apps), w_(w), policy_(policy), cfg_(cfg) {}

  Result<PolluxRunResult> Run();

 private:
  Status Where(const PolluxJobSpec& j, const std::string& what) const {
    return InvalidArgument(w_.source + ":" + std::to_string(j.line) + ":1: job '" + j.name +
                           "': " + what);
  }
  Status Init();
  Status InitCluster();
  Result<std::shared_ptr<const Layouts>> LayoutsFor(Job& j);
  Status Submit(Job& j);
  Status Prioritise(const std::vector<int>& active);
  Status Apply(const CycleResult& cr);
  Status Assign(Job& j, std::vector<int> alloc);
  double PredictedWork(const Job& j) const;
  Status Advance(double t);
  int Priority(const Job& j) const;

  const PolluxApps& apps_;
  const PolluxWorkload& w_;
  PolluxPolicy policy_;
  PolluxSimConfig cfg_;
  std::vector<Job> jobs_;
  double now_ = 0;
  std::vector<int> arrival_;  // job indices by (submission, file order)
  ClusterState state_;
  std::unique_ptr<Admission> adm_;
  // Fewest-nodes layouts by GPU count (fifo, tiresias); fastest-first by job kind (tessera).
  std::map<int, std::shared_ptr<const Layouts>> fewest_nodes_;
  std::map<std::tuple<std::string, int, int64_t>, std::pair<std::shared_ptr<const Layouts>, double>>
      fastest_;
};

Status Sim::InitCluster() {
  const std::optional<GpuModelId> model = GpuCatalog::Builtin().Find(kGpuModel);
  if (!model) return Internal(std::string("GPU model ") + kGpuModel + " is not in the catalog");
  for (int n = 0; n < cfg_.nodes; ++n) {
    NodeSpec s;
    s.name = "node-" + std::to_string(n);
    s.cpu = MilliCpu(kNodeCpuPerGpu * cfg_.gpus_per_node);
    s.memory = MiB(kNodeMemoryPerGpu * cfg_.gpus_per_node);
    s.gpu_count = cfg_.gpus_per_node;
    s.model = *model;
    auto added = state_.AddNode(std::move(s));
    if (!added.ok()) return added.status();
  }
  const int capacity = cfg_.nodes * cfg_.gpus_per_node;
  QueueSpec q;
  q.name = kQueue;
  FlavorQuota f;
  f.name = kGpuModel;
  f.nominal = {1000LL * capacity, kNodeCpuPerGpu * capacity, kNodeMemoryPerGpu * capacity};
  q.flavors = {f};
  q.reclaim = ReclaimPreemption::kNever;
  switch (policy_) {
    case PolluxPolicy::kFifo:
    case PolluxPolicy::kFifoStrict:
      q.within_queue = WithinQueuePreemption::kNever;
      break;
    case PolluxPolicy::kTiresias:
      q.within_queue = WithinQueuePreemption::kLowerOrNewerEqualPriority;
      break;
    case PolluxPolicy::kTessera:
      q.within_queue = WithinQueuePreemption::kLowerPriority;
      break;
  }
  q.queueing = policy_ == PolluxPolicy::kFifoStrict ? QueueingStrategy::kStrictFifo
                                                    : QueueingStrategy::kBestEffortFifo;
  AdmissionConfig ac;
  ac.usage_half_life_s = 0;
  ac.fair_sharing = false;
  ac.reservations = false;
  ac.preemption = q.within_queue != WithinQueuePreemption::kNever;
  ac.max_preemption_attempts_per_cycle = static_cast<int>(std::max<size_t>(1, jobs_.size()));
  ac.max_victims_per_attempt = capacity;  // every running job holds at least one GPU
  PolicyConfig pc;
  pc.name = kScorer;
  auto scorer = BuiltinPolicies().Create(pc);
  if (!scorer.ok()) return scorer.status();
  auto adm = Admission::Create({q}, ac, std::move(scorer).value(), kSeed);
  if (!adm.ok()) return adm.status();
  adm_ = std::move(adm).value();
  return Status::Ok();
}

// fifo, tiresias: every split, fewest nodes first (then the largest parts first), which places
// as many GPUs as possible on the nodes with the most free GPUs and the rest on the node that
// fits it most tightly. tessera: every split, lowest profiled iteration time first.
Result<std::shared_ptr<const Layouts>> Sim::LayoutsFor(Job& j) {
  const PolluxJobSpec& s = *j.spec;
  if (policy_ != PolluxPolicy::kTessera) {
    auto it = fewest_nodes_.find(j.gpus);
    if (it == fewest_nodes_.end()) {
      Layouts parts;
      std::vector<int> cur;
      Partitions(j.gpus, cfg_.gpus_per_node, cfg_.nodes, cur, parts);
      std::stable_sort(parts.begin(), parts.end(),
                       [](const auto& a, const auto& b) { return a.size() < b.size(); });
      it = fewest_nodes_.emplace(j.gpus, std::make_shared<const Layouts>(std::move(parts))).first;
    }
    return it->second;
  }
  auto key = std::make_tuple(s.application, j.gpus, s.batch_size);
  auto it = fastest_.find(key);
  if (it == fastest_.end()) {
    Layouts parts;
    std::vector<int> cur;
    Partitions(j.gpus, cfg_.gpus_per_node, cfg_.nodes, cur, parts);
    std::vector<std::pair<double, size_t>> keyed;
    for (size_t k = 0; k < parts.size(); ++k) {
      std::vector<int> asc(parts[k].rbegin(), parts[k].rend());
      auto cost = j.app->IterationTime(asc, static_cast<double>(s.batch_size));
      if (!cost.ok()) return Where(s, cost.status().message());
      keyed.push_back({cost->seconds, k});
    }
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first < b.first;
      return parts[a.second].size() < parts[b.second].size();
    });
    Layouts sorted;
    for (const auto& k : keyed) sorted.push_back(parts[k.second]);
    const double fastest = keyed.front().first;
    it = fastest_
             .emplace(key,
                      std::make_pair(std::make_shared<const Layouts>(std::move(sorted)), fastest))
             .first;
  }
  j.fastest_iter_s = it->second.second;
  return it->second.first;
}

Status Sim::Init() {
  if (!(cfg_.nodes > 0 && cfg_.gpus_per_node > 0 && cfg_.nodes <= 4096 &&
        cfg_.gpus_per_node <= kMaxGpusPerNode && cfg_.interval_s > 0 && cfg_.restart_s >= 0 &&
        cfg_.tiresias_threshold_gpu_s >= 0 && cfg_.max_time_s > 0 &&
        std::isfinite(cfg_.interval_s) && std::isfinite(cfg_.restart_s) &&
        std::isfinite(cfg_.max_time_s)))
    return InvalidArgument("invalid Pollux simulation config");
  const int capacity = cfg_.nodes * cfg_.gpus_per_node;
  jobs_.resize(w_.jobs.size());
  for (size_t i = 0; i < w_.jobs.size(); ++i) {
    const PolluxJobSpec& s = w_.jobs[i];
    Job& j = jobs_[i];
    j.spec = &s;
    j.id = static_cast<WorkloadId>(i + 1);
    auto app = apps_.find(s.application);
    if (app == apps_.end()) return Where(s, "no profile for application '" + s.application + "'");
    j.app = &app->second;
    if (s.num_replicas > capacity)
      return Where(s, std::to_string(s.num_replicas) + " GPUs exceed the cluster's " +
                          std::to_string(capacity));
    if (static_cast<WorkloadId>(s.num_replicas) >= kPodsPerJob)
      return Where(s, std::to_string(s.num_replicas) + " GPUs exceed " +
                          std::to_string(kPodsPerJob - 1) + " pods per admission job");
    j.gpus = s.num_replicas;
    auto iters = j.app->IterationsToComplete(s.batch_size);
    if (!iters.ok()) return Where(s, iters.status().message());
    j.remaining = *iters;
    auto layouts = LayoutsFor(j);
    if (!layouts.ok()) return layouts.status();
    j.layouts = *layouts;
  }
  arrival_.resize(jobs_.size());
  std::iota(arrival_.begin(), arrival_.end(), 0);
  std::stable_sort(arrival_.begin(), arrival_.end(),
                   [&](int a, int b) { return jobs_[a].spec->time < jobs_[b].spec->time; });
  return InitCluster();
}

// Predicted remaining GPU-seconds. A job not running is charged its start (restart_s) at the
// fastest split; a running one is credited the resume it would pay if preempted, so a waiting job
// displaces a running one only when it saves more than both restarts.
double Sim::PredictedWork(const Job& j) const {
  const double seconds = j.alloc.empty() ? j.remaining * j.fastest_iter_s + cfg_.restart_s
                                         : j.remaining * j.iter_s + j.restart_left - cfg_.restart_s;
  return seconds * j.gpus;
}

// Admission priority (higher first): fifo 0; tiresias 1 in queue 0, 0 in queue 1; tessera minus
// the predicted remaining GPU-seconds, rounded.
int Sim::Priority(const Job& j) const {
  switch (policy_) {
    case PolluxPolicy::kFifo:
    case PolluxPolicy::kFifoStrict:
      return 0;
    case PolluxPolicy::kTiresias:
      return j.queue == 0 ? 1 : 0;
    case PolluxPolicy::kTessera:
      return static_cast<int>(-std::llround(std::clamp(PredictedWork(j), -2e9, 2e9)));
  }
  return 0;
}

Status Sim::Submit(Job& j) {
  JobSpec js;
  js.id = j.id;
  js.name = j.spec->name;
  js.queue = kQueue;
  js.priority = Priority(j);
  js.arrival = j.spec->time;
  js.pod.cpu = MilliCpu(kPodCpu);
  js.pod.memory = MiB(kPodMemory);
  js.pod.num_gpu = 1;
  js.pod.gpu_milli = 1000;
  js.pods = j.gpus;
  js.node_layouts = j.layouts;
  j.submitted = true;
  return adm_->Submit(js);
}

// Tiresias demotes a job to queue 1 once it has held threshold GPU-seconds; tessera re-ranks
// every job by its predicted remaining work.
Status Sim::Prioritise(const std::vector<int>& active) {
  for (int i : active) {
    Job& j = jobs_[i];
    if (policy_ == PolluxPolicy::kTiresias) {
      if (j.queue != 0 || j.held_gpu_s < cfg_.tiresias_threshold_gpu_s) continue;
      j.queue = 1;
    } else if (policy_ != PolluxPolicy::kTessera) {
      continue;
    }
    TESSERA_RETURN_IF_ERROR(adm_->SetPriority(j.id, Priority(j)));
  }
  return Status::Ok();
}

Status Sim::Apply(const CycleResult& cr) {
  for (const Preemption& p : cr.preempted) {
    if (p.victim == 0 || p.victim > jobs_.size()) return Internal("preempted an unknown job");
    TESSERA_RETURN_IF_ERROR(Assign(jobs_[p.victim - 1], {}));
  }
  for (WorkloadId id : cr.admitted) {
    if (id == 0 || id > jobs_.size()) return Internal("admitted an unknown job");
    Job& j = jobs_[id - 1];
    std::vector<int> alloc(cfg_.nodes, 0);
    int total = 0;
    for (const Placement& p : adm_->Placements(id)) {
      const int g = std::popcount(p.gpus);
      alloc[p.node] += g;
      total += g;
    }
    if (total != j.gpus) return Internal("job '" + j.spec->name + "' admitted partially");
    TESSERA_RETURN_IF_ERROR(Assign(j, std::move(alloc)));
  }
  return Status::Ok();
}

Status Sim::Assign(Job& j, std::vector<int> alloc) {
  if (alloc.empty()) {
    ++j.preemptions;
    j.alloc.clear();
    j.restart_left = 0;
    return Status::Ok();
  }
  std::vector<int> placement;
  for (int g : alloc)
    if (g > 0) placement.push_back(g);
  std::sort(placement.begin(), placement.end());
  auto cost = j.app->IterationTime(placement, static_cast<double>(j.spec->batch_size));
  if (!cost.ok()) return Where(*j.spec, cost.status().message());
  j.iter_s = cost->seconds;
  j.alloc = std::move(alloc);
  j.restart_left = cfg_.restart_s;
  if (j.started) ++j.restarts;
  if (!j.started) j.start = now_;
  j.started = true;
  return Status::Ok();
}

Status Sim::Advance(double t) {
  for (Job& j : jobs_) {
    if (j.alloc.empty() || j.done) continue;
    const double gpus = j.gpus;
    double dt = cfg_.interval_s;
    const double pause = std::min(j.restart_left, dt);
    j.restart_left -= pause;
    dt -= pause;
    const double need = j.remaining * j.iter_s;
    if (dt > 0 && need <= dt * (1 + 1e-12)) {
      j.done = true;
      j.remaining = 0;
      j.finish = t + pause + need;
      j.held_gpu_s += (pause + need) * gpus;
      j.alloc.clear();
      TESSERA_RETURN_IF_ERROR(adm_->Finish(state_, j.id));
      continue;
    }
    j.remaining -= dt / j.iter_s;
    j.held_gpu_s += cfg_.interval_s * gpus;
  }
  return Status::Ok();
}

Result<PolluxRunResult> Sim::Run() {
  TESSERA_RETURN_IF_ERROR(Init());
  size_t next = 0, finished = 0;
  for (int64_t round = 0; finished < jobs_.size(); ++round) {
    const double t = static_cast<double>(round) * cfg_.interval_s;
    if (t > cfg_.max_time_s)
      return FailedPrecondition(w_.source + ": " + std::to_string(jobs_.size() - finished) +
                                " job(s) still unfinished after " +
                                std::to_string(static_cast<int64_t>(cfg_.max_time_s)) +
                                " simulated seconds");
    now_ = t;
    while (next < arrival_.size() && jobs_[arrival_[next]].spec->time <= t) {
      Job& j = jobs_[arrival_[next++]];
      if (j.remaining <= 0) {  // nothing to run
        j.done = true;
        j.start = j.finish = j.spec->time;
        continue;
      }
      TESSERA_RETURN_IF_ERROR(Submit(j));
    }
    std::vector<int> active;
    for (size_t k = 0; k < next; ++k)
      if (!jobs_[arrival_[k]].done) active.push_back(arrival_[k]);
    TESSERA_RETURN_IF_ERROR(Prioritise(active));
    auto cr = adm_->RunCycle(state_, t);
    if (!cr.ok()) return cr.status();
    TESSERA_RETURN_IF_ERROR(Apply(*cr));
    TESSERA_RETURN_IF_ERROR(Advance(t));
    finished = 0;
    for (const Job& j : jobs_) finished += j.done;
  }
  if (state_.num_allocations() != 0) return Internal("GPUs still allocated after the last job");
  PolluxRunResult r;
  r.workload = w_.name;
  r.policy = policy_;
  double held = 0;
  std::vector<double> jcts;
  for (const Job& j : jobs_) {
    PolluxJobResult o;
    o.name = j.spec->name;
    o.application = j.spec->application;
    o.num_replicas = j.gpus;
    o.submit = j.spec->time;
    o.start = j.start;
    o.finish = j.finish;
    o.jct = j.finish - j.spec->time;
    o.preemptions = j.preemptions;
    o.restarts = j.restarts;
    r.preemptions += j.preemptions;
    r.makespan = std::max(r.makespan, j.finish);
    held += j.held_gpu_s;
    jcts.push_back(o.jct);
    r.jobs.push_back(std::move(o));
  }
  if (!jcts.empty()) {
    r.avg_jct = std::accumulate(jcts.begin(), jcts.end(), 0.0) / static_cast<double>(jcts.size());
    std::sort(jcts.begin(), jcts.end());
    auto rank = [&](double p) {
      size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(jcts.size())));
      return jcts[std::clamp<size_t>(k, 1, jcts.size()) - 1];
    };
    r.p50_jct = rank(0.50);
    r.p99_jct = rank(0.99);
  }
  if (r.makespan > 0) r.gpu_util = held / (cfg_.nodes * cfg_.gpus_per_node * r.makespan);
  return r;
}

}  // namespace

Result<PolluxPolicy> ParsePolluxPolicy(std::string_view name) {
  for (PolluxPolicy p : {PolluxPolicy::kFifo, PolluxPolicy::kFifoStrict, PolluxPolicy::kTiresias,
                         PolluxPolicy::kTessera})
    if (name == PolluxPolicyName(p)) return p;
  return InvalidArgument("unknown Pollux policy '" + std::string(name) +
                         "' (known: fifo, fifo-strict, tiresias, tessera)");
}

const char* PolluxPolicyName(PolluxPolicy p) {
  switch (p) {
    case PolluxPolicy::kFifo:
      return "fifo";
    case PolluxPolicy::kFifoStrict:
      return "fifo-strict";
    case PolluxPolicy::kTiresias:
      return "tiresias";
    case PolluxPolicy::kTessera:
      return "tessera";
  }
  return "?";
}

Result<PolluxRunResult> SimulatePollux(const PolluxApps& apps, const PolluxWorkload& workload,
                                       PolluxPolicy policy, const PolluxSimConfig& config) {
  Sim sim(apps, workload, policy, config);
  return sim.Run();
}

Result<std::vector<PolluxRunResult>> RunPolluxMatrix(const PolluxApps& apps,
                                                     const std::vector<PolluxWorkload>& workloads,
                                                     const std::vector<PolluxPolicy>& policies,
                                                     const PolluxSimConfig& config,
                                                     unsigned threads) {
  const size_t total = workloads.size() * policies.size();
  std::vector<std::optional<Result<PolluxRunResult>>> out(total);
  ParallelFor(total, threads, [&](size_t i) {
    out[i] = SimulatePollux(apps, workloads[i % workloads.size()], policies[i / workloads.size()],
                            config);
  });
  std::vector<PolluxRunResult> results;
  for (auto& r : out) {
    if (!r->ok()) return r->status();
    results.push_back(std::move(*r).value());
  }
  return results;
}

Result<PolluxReference> ParsePolluxSummary(std::string_view json, const std::string& source,
                                           const std::string& policy) {
  nlohmann::json j = nlohmann::json::parse(SkipUtf8Bom(json), nullptr, false);
  if (j.is_discarded()) return InvalidArgument(source + ": not valid JSON");
  auto number = [](const nlohmann::json& v) {
    return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0;
  };
  if (!j.is_object() || !j.contains("avgs") || !j["avgs"].is_object())
    return InvalidArgument(source + ": expected an object with an \"avgs\" object");
  if (!j.contains("mean") || !number(j["mean"]))
    return InvalidArgument(source + ": \"mean\" is not a non-negative number");
  PolluxReference r;
  r.policy = policy;
  r.mean = j["mean"].get<double>();
  for (const auto& [k, v] : j["avgs"].items()) {
    if (!number(v))
      return InvalidArgument(source + ": \"avgs\".\"" + k + "\" is not a non-negative number");
    r.avg_jct[k] = v.get<double>();
  }
  return r;
}

namespace {

struct Grid {
  std::vector<PolluxPolicy> policies;
  std::vector<std::string> workloads;
  std::map<std::pair<int, std::string>, const PolluxRunResult*> cell;
};

Grid MakeGrid(const std::vector<PolluxRunResult>& results) {
  Grid g;
  for (const auto& r : results) {
    if (std::find(g.policies.begin(), g.policies.end(), r.policy) == g.policies.end())
      g.policies.push_back(r.policy);
    if (std::find(g.workloads.begin(), g.workloads.end(), r.workload) == g.workloads.end())
      g.workloads.push_back(r.workload);
    g.cell[{static_cast<int>(r.policy), r.workload}] = &r;
  }
  return g;
}

double MeanAvg(const Grid& g, PolluxPolicy p) {
  double sum = 0;
  int n = 0;
  for (const auto& w : g.workloads) {
    auto it = g.cell.find({static_cast<int>(p), w});
    if (it != g.cell.end()) sum += it->second->avg_jct, ++n;
  }
  return n ? sum / n : 0;
}

std::string Cell(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, " %12.1f", v);
  return buf;
}

}  // namespace

std::string PolluxTable(const std::vector<PolluxRunResult>& results,
                        const std::vector<PolluxReference>& references) {
  const Grid g = MakeGrid(results);
  std::string out = "Average JCT (s)\n";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%-12s", "workload");
  out += buf;
  for (PolluxPolicy p : g.policies) {
    std::snprintf(buf, sizeof buf, " %12s", PolluxPolicyName(p));
    out += buf;
  }
  for (const auto& ref : references) {
    std::snprintf(buf, sizeof buf, " %12s", ("pub:" + ref.policy).c_str());
    out += buf;
  }
  out += "\n";
  for (const auto& w : g.workloads) {
    std::snprintf(buf, sizeof buf, "%-12s", w.c_str());
    out += buf;
    for (PolluxPolicy p : g.policies) {
      auto it = g.cell.find({static_cast<int>(p), w});
      out += it == g.cell.end() ? std::string(13, ' ') : Cell(it->second->avg_jct);
    }
    for (const auto& ref : references) {
      auto it = ref.avg_jct.find(w);
      out += it == ref.avg_jct.end() ? std::string(13, ' ') : Cell(it->second);
    }
    out += "\n";
  }
  std::snprintf(buf, sizeof buf, "%-12s", "mean");
  out += buf;
  for (PolluxPolicy p : g.policies) out += Cell(MeanAvg(g, p));
  for (const auto& ref : references) {
    // The published mean covers its own workloads; recompute it over the simulated ones.
    double sum = 0;
    size_t n = 0;
    for (const auto& w : g.workloads) {
      auto it = ref.avg_jct.find(w);
      if (it != ref.avg_jct.end()) sum += it->second, ++n;
    }
    out += n == g.workloads.size() && n > 0 ? Cell(sum / static_cast<double>(n))
                                            : std::string(13, ' ');
  }
  out += "\n\n";
  std::snprintf(buf, sizeof buf, "%-12s%10s%10s%10s%10s%12s\n", "policy", "p50_jct", "p99_jct",
                "makespan", "gpu_util", "preemptions");
  out += "Per policy, mean over workloads\n";
  out += buf;
  for (PolluxPolicy p : g.policies) {
    double p50 = 0, p99 = 0, mk = 0, util = 0;
    int pre = 0, n = 0;
    for (const auto& w : g.workloads) {
      auto it = g.cell.find({static_cast<int>(p), w});
      if (it == g.cell.end()) continue;
      const PolluxRunResult& r = *it->second;
      p50 += r.p50_jct, p99 += r.p99_jct, mk += r.makespan, util += r.gpu_util;
      pre += r.preemptions;
      ++n;
    }
    if (n == 0) continue;
    std::snprintf(buf, sizeof buf, "%-12s%10.0f%10.0f%10.0f%10.3f%12.1f\n", PolluxPolicyName(p),
                  p50 / n, p99 / n, mk / n, util / n, static_cast<double>(pre) / n);
    out += buf;
  }
  return out;
}

std::string PolluxJson(const std::vector<PolluxRunResult>& results,
                       const std::vector<PolluxReference>& references,
                       const PolluxSimConfig& config, const std::string& model) {
  const Grid g = MakeGrid(results);
  nlohmann::json j;
  nlohmann::json pols = nlohmann::json::object();
  for (PolluxPolicy p : g.policies) {
    nlohmann::json avgs = nlohmann::json::object();
    nlohmann::json per = nlohmann::json::object();
    for (const auto& w : g.workloads) {
      auto it = g.cell.find({static_cast<int>(p), w});
      if (it == g.cell.end()) continue;
      const PolluxRunResult& r = *it->second;
      avgs[w] = r.avg_jct;
      nlohmann::json jcts = nlohmann::json::object();
      for (const auto& job : r.jobs) jcts[job.name] = job.jct;
      per[w] = {{"avg_jct_s", r.avg_jct},   {"p50_jct_s", r.p50_jct},
                {"p99_jct_s", r.p99_jct},   {"makespan_s", r.makespan},
                {"gpu_util", r.gpu_util},   {"preemptions", r.preemptions},
                {"jcts_s", std::move(jcts)}};
    }
    pols[PolluxPolicyName(p)] = {
        {"mean_avg_jct_s", MeanAvg(g, p)}, {"avg_jct_s", std::move(avgs)}, {"workloads", per}};
  }
  j["policies"] = std::move(pols);
  nlohmann::json pub = nlohmann::json::object();
  for (const auto& ref : references) {
    nlohmann::json avgs = nlohmann::json::object();
    for (const auto& [w, v] : ref.avg_jct) avgs[w] = v;
    pub[ref.policy] = {{"mean_avg_jct_s", ref.mean}, {"avg_jct_s", std::move(avgs)}};
  }
  j["published"] = std::move(pub);
  j["cluster"] = {{"nodes", config.nodes},
                  {"gpus_per_node", config.gpus_per_node},
                  {"interval_s", config.interval_s},
                  {"restart_s", config.restart_s},
                  {"tiresias_threshold_gpu_s", config.tiresias_threshold_gpu_s}};
  j["model"] = model;
  return j.dump(2) + "\n";
}

}  // namespace tessera
