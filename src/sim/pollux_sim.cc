#include "sim/pollux_sim.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "sim/csv.h"

namespace tessera {
namespace {

// GPUs-per-node splits of one job, fastest first (tessera placement).
struct Split {
  std::vector<int> parts;  // descending
  double iter_s = 0;
};

struct Job {
  const PolluxJobSpec* spec = nullptr;
  const PolluxApp* app = nullptr;
  int gpus = 0;
  double remaining = 0;  // iterations
  const std::vector<Split>* splits = nullptr;
  std::vector<int> alloc;  // GPUs per node; empty when not running
  double iter_s = 0;       // of the current allocation
  double restart_left = 0;
  double held_gpu_s = 0;
  int queue = 0;
  bool started = false, done = false;
  double start = 0, finish = 0;
  int preemptions = 0, restarts = 0;
};

void Partitions(int left, int max_part, int max_count, std::vector<int>& cur,
                std::vector<std::vector<int>>& out) {
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

  Status Init();
  Result<PolluxRunResult> Run();

 private:
  Status Where(const PolluxJobSpec& j, const std::string& what) const {
    return InvalidArgument(w_.source + ":" + std::to_string(j.line) + ":1: job '" + j.name +
                           "': " + what);
  }
  std::vector<int> FreeGpus() const;
  std::vector<int> PlaceConsolidated(int gpus, const std::vector<int>& free) const;
  std::vector<int> PlaceFastest(const Job& j, const std::vector<int>& free) const;
  Status Assign(Job& j, std::vector<int> alloc);
  Status Decide(const std::vector<int>& active);
  Status SelectByOrder(const std::vector<int>& order);
  double PredictedWork(const Job& j) const;
  void Advance(double t);

  const PolluxApps& apps_;
  const PolluxWorkload& w_;
  PolluxPolicy policy_;
  PolluxSimConfig cfg_;
  std::vector<Job> jobs_;
  double now_ = 0;
  std::vector<int> arrival_;  // job indices by (submission, file order)
  std::map<std::tuple<std::string, int, int64_t>, std::vector<Split>> split_cache_;
};

Status Sim::Init() {
  if (!(cfg_.nodes > 0 && cfg_.gpus_per_node > 0 && cfg_.nodes <= 4096 &&
        cfg_.gpus_per_node <= 64 && cfg_.interval_s > 0 && cfg_.restart_s >= 0 &&
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
    auto app = apps_.find(s.application);
    if (app == apps_.end()) return Where(s, "no profile for application '" + s.application + "'");
    j.app = &app->second;
    if (s.num_replicas > capacity)
      return Where(s, std::to_string(s.num_replicas) + " GPUs exceed the cluster's " +
                          std::to_string(capacity));
    j.gpus = s.num_replicas;
    auto iters = j.app->IterationsToComplete(s.batch_size);
    if (!iters.ok()) return Where(s, iters.status().message());
    j.remaining = *iters;
    if (policy_ == PolluxPolicy::kTessera) {
      auto key = std::make_tuple(s.application, j.gpus, s.batch_size);
      auto it = split_cache_.find(key);
      if (it == split_cache_.end()) {
        std::vector<std::vector<int>> parts;
        std::vector<int> cur;
        Partitions(j.gpus, cfg_.gpus_per_node, cfg_.nodes, cur, parts);
        std::vector<Split> splits;
        for (auto& p : parts) {
          std::vector<int> asc(p.rbegin(), p.rend());
          auto cost = j.app->IterationTime(asc, static_cast<double>(s.batch_size));
          if (!cost.ok()) return Where(s, cost.status().message());
          splits.push_back({std::move(p), cost->seconds});
        }
        std::stable_sort(splits.begin(), splits.end(), [](const Split& a, const Split& b) {
          if (a.iter_s != b.iter_s) return a.iter_s < b.iter_s;
          return a.parts.size() < b.parts.size();
        });
        it = split_cache_.emplace(key, std::move(splits)).first;
      }
      j.splits = &it->second;
    }
  }
  arrival_.resize(jobs_.size());
  std::iota(arrival_.begin(), arrival_.end(), 0);
  std::stable_sort(arrival_.begin(), arrival_.end(),
                   [&](int a, int b) { return jobs_[a].spec->time < jobs_[b].spec->time; });
  return Status::Ok();
}

std::vector<int> Sim::FreeGpus() const {
  std::vector<int> free(cfg_.nodes, cfg_.gpus_per_node);
  for (const Job& j : jobs_)
    for (size_t n = 0; n < j.alloc.size(); ++n) free[n] -= j.alloc[n];
  return free;
}

std::vector<int> Sim::PlaceConsolidated(int gpus, const std::vector<int>& free) const {
  std::vector<int> nodes(free.size());
  std::iota(nodes.begin(), nodes.end(), 0);
  std::stable_sort(nodes.begin(), nodes.end(), [&](int a, int b) { return free[a] > free[b]; });
  std::vector<int> alloc(free.size(), 0);
  int left = gpus;
  size_t k = 0;
  while (k < nodes.size() && left > free[nodes[k]]) left -= free[nodes[k++]];
  if (k == nodes.size()) return {};
  for (size_t i = 0; i < k; ++i) alloc[nodes[i]] = free[nodes[i]];
  int best = -1;
  for (size_t i = k; i < nodes.size(); ++i) {
    const int n = nodes[i];
    if (free[n] >= left &&
        (best < 0 || free[n] < free[best] || (free[n] == free[best] && n < best)))
      best = n;
  }
  alloc[best] += left;
  return alloc;
}

std::vector<int> Sim::PlaceFastest(const Job& j, const std::vector<int>& free) const {
  std::vector<int> sorted_free = free;
  std::sort(sorted_free.rbegin(), sorted_free.rend());
  for (const Split& s : *j.splits) {
    bool fits = s.parts.size() <= sorted_free.size();
    for (size_t i = 0; fits && i < s.parts.size(); ++i) fits = s.parts[i] <= sorted_free[i];
    if (!fits) continue;
    std::vector<int> left = free, alloc(free.size(), 0);
    for (int part : s.parts) {
      int best = -1;
      for (size_t n = 0; n < left.size(); ++n)
        if (alloc[n] == 0 && left[n] >= part && (best < 0 || left[n] < left[best]))
          best = static_cast<int>(n);
      alloc[best] = part;
      left[best] -= part;
    }
    return alloc;
  }
  return {};
}

Status Sim::Assign(Job& j, std::vector<int> alloc) {
  if (alloc == j.alloc) return Status::Ok();
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

// Predicted remaining GPU-seconds. A job not running is charged its start (restart_s) at the
// fastest split; a running one is credited the resume it would pay if preempted, so a waiting job
// displaces a running one only when it saves more than both restarts.
double Sim::PredictedWork(const Job& j) const {
  const double seconds = j.alloc.empty() ? j.remaining * j.splits->front().iter_s + cfg_.restart_s
                                         : j.remaining * j.iter_s + j.restart_left - cfg_.restart_s;
  return seconds * j.gpus;
}

// Runs the first jobs of `order` that fit the cluster's GPU count (later jobs may pass one that
// does not fit), preempts every other running job and places the newly started ones in order.
Status Sim::SelectByOrder(const std::vector<int>& order) {
  int budget = cfg_.nodes * cfg_.gpus_per_node;
  std::vector<int> chosen;
  for (int i : order) {
    if (jobs_[i].gpus <= budget) {
      budget -= jobs_[i].gpus;
      chosen.push_back(i);
    }
  }
  std::vector<bool> keep(jobs_.size(), false);
  for (int i : chosen) keep[i] = true;
  for (int i : order)
    if (!keep[i] && !jobs_[i].alloc.empty()) TESSERA_RETURN_IF_ERROR(Assign(jobs_[i], {}));
  std::vector<int> free = FreeGpus();
  for (int i : chosen) {
    Job& j = jobs_[i];
    if (!j.alloc.empty()) continue;
    std::vector<int> alloc =
        policy_ == PolluxPolicy::kTessera ? PlaceFastest(j, free) : PlaceConsolidated(j.gpus, free);
    if (alloc.empty()) return Internal("no placement for a job within the GPU budget");
    for (size_t n = 0; n < free.size(); ++n) free[n] -= alloc[n];
    TESSERA_RETURN_IF_ERROR(Assign(j, std::move(alloc)));
  }
  return Status::Ok();
}

Status Sim::Decide(const std::vector<int>& active) {
  switch (policy_) {
    case PolluxPolicy::kFifo:
    case PolluxPolicy::kFifoStrict: {
      std::vector<int> free = FreeGpus();
      int total = std::accumulate(free.begin(), free.end(), 0);
      for (int i : active) {
        Job& j = jobs_[i];
        if (!j.alloc.empty()) continue;
        if (j.gpus > total) {
          if (policy_ == PolluxPolicy::kFifoStrict) break;
          continue;
        }
        std::vector<int> alloc = PlaceConsolidated(j.gpus, free);
        for (size_t n = 0; n < free.size(); ++n) free[n] -= alloc[n];
        total -= j.gpus;
        TESSERA_RETURN_IF_ERROR(Assign(j, std::move(alloc)));
      }
      return Status::Ok();
    }
    case PolluxPolicy::kTiresias: {
      std::vector<int> order;
      for (int q = 0; q < 2; ++q) {
        for (int i : active) {
          Job& j = jobs_[i];
          if (j.queue == 0 && j.held_gpu_s >= cfg_.tiresias_threshold_gpu_s) j.queue = 1;
          if (j.queue == q) order.push_back(i);
        }
      }
      return SelectByOrder(order);
    }
    case PolluxPolicy::kTessera: {
      std::vector<std::pair<double, int>> keyed;
      for (int i : active) keyed.push_back({PredictedWork(jobs_[i]), i});
      std::stable_sort(keyed.begin(), keyed.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      std::vector<int> order;
      for (const auto& k : keyed) order.push_back(k.second);
      return SelectByOrder(order);
    }
  }
  return Internal("unknown policy");
}

void Sim::Advance(double t) {
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
      continue;
    }
    j.remaining -= dt / j.iter_s;
    j.held_gpu_s += cfg_.interval_s * gpus;
  }
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
    while (next < arrival_.size() && jobs_[arrival_[next]].spec->time <= t) {
      Job& j = jobs_[arrival_[next++]];
      if (j.remaining <= 0) {  // nothing to run
        j.done = true;
        j.start = j.finish = j.spec->time;
      }
    }
    std::vector<int> active;
    for (size_t k = 0; k < next; ++k)
      if (!jobs_[arrival_[k]].done) active.push_back(arrival_[k]);
    now_ = t;
    TESSERA_RETURN_IF_ERROR(Decide(active));
    Advance(t);
    finished = 0;
    for (const Job& j : jobs_) finished += j.done;
  }
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
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < total; i = next++)
      out[i] = SimulatePollux(apps, workloads[i % workloads.size()], policies[i / workloads.size()],
                              config);
  };
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<size_t>(threads, total));
  if (threads <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
    for (auto& th : pool) th.join();
  }
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
