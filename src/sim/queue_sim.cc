#include "sim/queue_sim.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <queue>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "cluster/cluster_state.h"
#include "core/stats.h"
#include "policies/builtin.h"

namespace tessera {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// Weighted max-min division of `cap` among claims capped at their demand.
void WaterFill(double cap, const std::vector<int>& members, const std::vector<double>& weight,
               const std::vector<double>& demand, std::vector<double>& out) {
  std::vector<int> active;
  for (int q : members) {
    out[q] = 0;
    if (demand[q] > 0) active.push_back(q);
  }
  double remaining = cap;
  while (!active.empty() && remaining > 0) {
    double w = 0;
    for (int q : active) w += weight[q];
    std::vector<int> next;
    bool saturated = false;
    for (int q : active) {
      if (demand[q] - out[q] <= remaining * weight[q] / w) saturated = true;
    }
    if (!saturated) {
      for (int q : active) out[q] += remaining * weight[q] / w;
      break;
    }
    const double before = remaining;
    for (int q : active) {
      if (demand[q] - out[q] <= before * weight[q] / w) {
        remaining -= demand[q] - out[q];
        out[q] = demand[q];
      } else {
        next.push_back(q);
      }
    }
    active = std::move(next);
  }
}

struct RtJob {
  int queue = 0;
  bool gang = false;
  double pending_eq = 0;  // GPU-eq milli the job asks for while pending (lower bound)
  double running_eq = 0;  // GPU-eq milli held while running
  double running_gpus = 0;
  uint32_t generation = 0;
  JobState st = JobState::kPending;
};

class Sim {
 public:
  Sim(const QueueCluster& c, const std::vector<QueueJob>& jobs, const QueueSimOptions& o,
      QueueSimResult& r)
      : c_(c), jobs_(jobs), opt_(o), r_(r) {}

  Status Run();

 private:
  using Timed = std::tuple<double, WorkloadId, uint32_t>;  // time, job index, generation

  Status Setup();
  void MarkDirty(double t);
  void Integrate(double to);
  void RecomputeFair();
  Status AfterCycle(const CycleResult& cr, double now);
  void Summarise();

  const QueueCluster& c_;
  const std::vector<QueueJob>& jobs_;
  const QueueSimOptions& opt_;
  QueueSimResult& r_;

  ClusterState state_;
  std::unique_ptr<Admission> adm_;
  std::vector<RtJob> rt_;
  std::unordered_map<WorkloadId, size_t> index_;
  std::vector<size_t> arrival_order_;
  std::priority_queue<Timed, std::vector<Timed>, std::greater<>> departures_;
  std::priority_queue<double, std::vector<double>, std::greater<>> timers_;
  bool cycle_due_ = false;
  int64_t cycle_k_ = 0;
  double min_runtime_ = 0;

  // Metrics state.
  size_t nq_ = 0;
  std::vector<double> weight_, demand_, usage_, fair_;
  std::vector<std::vector<int>> pools_;
  std::vector<double> pool_cap_;
  bool fair_stale_ = true;
  double cap_eq_ = 0, cap_raw_ = 0;
  double last_t_ = 0, start_t_ = 0;
  double alloc_int_ = 0;
  std::vector<double> use_int_, fair_int_, dev_int_, demand_time_, dev_max_;
};

Status Sim::Setup() {
  auto setup = ApplyQueuePolicy(c_, opt_.policy);
  if (!setup.ok()) return setup.status();
  for (const NodeSpec& n : c_.nodes) {
    auto added = state_.AddNode(n);
    if (!added.ok()) return InvalidArgument("node '" + n.name + "': " + added.status().message());
  }
  if (state_.gpu_capacity_milli() <= 0) return InvalidArgument("the cluster has no GPUs");
  std::vector<Demand> demands;
  for (const QueueJob& j : jobs_) demands.push_back(j.spec.pod);
  PolicyConfig pc;
  pc.name = opt_.placement;
  pc.target = TargetWorkload::FromDemands(demands);
  auto scorer = BuiltinPolicies().Create(pc);
  if (!scorer.ok()) return InvalidArgument(scorer.status().message());
  min_runtime_ = setup->config.preemption ? setup->config.min_runtime_s : 0;
  auto adm = Admission::Create(setup->queues, setup->config, std::move(scorer).value(), opt_.seed);
  if (!adm.ok()) return adm.status();
  adm_ = std::move(adm).value();

  nq_ = c_.queues.size();
  std::map<std::string, int> qidx;
  std::map<std::string, int> cohort_pool;
  for (size_t q = 0; q < nq_; ++q) {
    const QueueSpec& spec = setup->queues[q];
    qidx[spec.name] = static_cast<int>(q);
    weight_.push_back(spec.weight);
    double nominal = 0;
    for (const FlavorQuota& f : spec.flavors) nominal += static_cast<double>(f.nominal.gpu);
    int pool = -1;
    if (!spec.cohort.empty() && cohort_pool.count(spec.cohort)) {
      pool = cohort_pool[spec.cohort];
    } else {
      pool = static_cast<int>(pools_.size());
      pools_.emplace_back();
      pool_cap_.push_back(0);
      if (!spec.cohort.empty()) cohort_pool[spec.cohort] = pool;
    }
    pools_[pool].push_back(static_cast<int>(q));
    pool_cap_[pool] += nominal;
  }
  for (NodeIdx n = 0; n < state_.num_nodes(); ++n) {
    const NodeSpec& s = state_.spec(n);
    if (s.gpu_count > 0)
      cap_eq_ += static_cast<double>(adm_->GpuEquivalentMilli(s.model, 1000LL * s.gpu_count));
  }
  cap_raw_ = static_cast<double>(state_.gpu_capacity_milli());
  if (cap_eq_ <= 0) cap_eq_ = cap_raw_;
  double pools_total = 0;
  for (double p : pool_cap_) pools_total += p;
  if (pools_total > cap_eq_) {
    for (double& p : pool_cap_) p *= cap_eq_ / pools_total;
  }
  demand_.assign(nq_, 0);
  usage_.assign(nq_, 0);
  fair_.assign(nq_, 0);
  use_int_.assign(nq_, 0);
  fair_int_.assign(nq_, 0);
  dev_int_.assign(nq_, 0);
  demand_time_.assign(nq_, 0);
  dev_max_.assign(nq_, 0);

  // The cheapest GPU-equivalent weight among the cluster's models a pod may use.
  std::vector<std::pair<GpuModelId, double>> models;
  for (NodeIdx n = 0; n < state_.num_nodes(); ++n) {
    const NodeSpec& s = state_.spec(n);
    if (s.gpu_count == 0) continue;
    const bool seen = std::any_of(models.begin(), models.end(),
                                  [&](const auto& m) { return m.first == s.model; });
    if (!seen)
      models.push_back(
          {s.model, static_cast<double>(adm_->GpuEquivalentMilli(s.model, 1000000)) / 1e6});
  }
  rt_.resize(jobs_.size());
  r_.outcomes.assign(jobs_.size(), {});
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const JobSpec& s = jobs_[i].spec;
    auto q = qidx.find(s.queue);
    if (q == qidx.end())
      return InvalidArgument("job '" + s.name + "': unknown queue '" + s.queue + "'");
    if (!index_.emplace(s.id, i).second)
      return InvalidArgument("job '" + s.name + "': duplicate id " + std::to_string(s.id));
    RtJob& j = rt_[i];
    j.queue = q->second;
    j.gang = s.pods > 1;
    double w = 0;
    for (const auto& [m, mw] : models) {
      if (s.pod.AllowsModel(m)) w = w == 0 ? mw : std::min(w, mw);
    }
    j.pending_eq = static_cast<double>(s.pod.TotalMilliGpu()) * s.pods * (w > 0 ? w : 1.0);
    arrival_order_.push_back(i);
  }
  std::stable_sort(arrival_order_.begin(), arrival_order_.end(), [&](size_t a, size_t b) {
    return jobs_[a].spec.arrival < jobs_[b].spec.arrival;
  });
  return Status::Ok();
}

void Sim::MarkDirty(double t) {
  const int64_t k = static_cast<int64_t>(std::ceil(t / c_.cycle_s));
  if (!cycle_due_ || k < cycle_k_) cycle_k_ = k;
  cycle_due_ = true;
}

void Sim::RecomputeFair() {
  for (size_t p = 0; p < pools_.size(); ++p)
    WaterFill(pool_cap_[p], pools_[p], weight_, demand_, fair_);
  fair_stale_ = false;
}

void Sim::Integrate(double to) {
  const double dt = to - last_t_;
  if (dt <= 0) return;
  if (fair_stale_) RecomputeFair();
  alloc_int_ += static_cast<double>(state_.gpu_allocated_milli()) * dt;
  for (size_t q = 0; q < nq_; ++q) {
    use_int_[q] += usage_[q] * dt;
    fair_int_[q] += fair_[q] * dt;
    if (demand_[q] > 0) {
      const double dev = std::fabs(usage_[q] - fair_[q]);
      dev_int_[q] += dev * dt;
      demand_time_[q] += dt;
      dev_max_[q] = std::max(dev_max_[q], dev / cap_eq_);
    }
  }
  last_t_ = to;
}

Status Sim::AfterCycle(const CycleResult& cr, double now) {
  for (const Preemption& p : cr.preempted) {
    auto it = index_.find(p.victim);
    if (it == index_.end()) return Internal("preempted unknown job " + std::to_string(p.victim));
    RtJob& j = rt_[it->second];
    QueueJobOutcome& o = r_.outcomes[it->second];
    if (j.st != JobState::kRunning)
      return Internal("job '" + jobs_[it->second].spec.name + "' preempted while not running");
    o.lost_gpu_hours += j.running_gpus * (now - o.start) / 3600.0;
    ++o.preemptions;
    usage_[j.queue] -= j.running_eq;
    demand_[j.queue] += j.pending_eq - j.running_eq;
    j.running_eq = 0;
    j.running_gpus = 0;
    ++j.generation;
    j.st = JobState::kPending;
    const double timeout = jobs_[it->second].spec.gang_timeout_s;
    if (timeout > 0) timers_.push(now + timeout + 1e-6);
  }
  for (WorkloadId id : cr.admitted) {
    auto it = index_.find(id);
    if (it == index_.end()) return Internal("admitted unknown job " + std::to_string(id));
    RtJob& j = rt_[it->second];
    const QueueJob& job = jobs_[it->second];
    QueueJobOutcome& o = r_.outcomes[it->second];
    if (j.st != JobState::kPending)
      return Internal("job '" + job.spec.name + "' admitted while not pending");
    const std::vector<Placement> places = adm_->Placements(id);
    const int need = job.spec.min_member > 0 ? job.spec.min_member : job.spec.pods;
    if (static_cast<int>(places.size()) < need || static_cast<int>(places.size()) > job.spec.pods)
      return Internal("job '" + job.spec.name + "' admitted with " + std::to_string(places.size()) +
                      " pods placed");
    double eq = 0;
    for (const Placement& p : places)
      eq += static_cast<double>(
          adm_->GpuEquivalentMilli(state_.spec(p.node).model, job.spec.pod.TotalMilliGpu()));
    j.st = JobState::kRunning;
    j.running_eq = eq;
    j.running_gpus = static_cast<double>(job.spec.pod.TotalMilliGpu()) *
                     static_cast<double>(places.size()) / 1000;
    usage_[j.queue] += eq;
    demand_[j.queue] += eq - j.pending_eq;
    if (o.first_start < 0) o.first_start = now;
    o.start = now;
    o.pods_placed = static_cast<int>(places.size());
    departures_.push({now + job.duration_s, it->second, j.generation});
    if (min_runtime_ > 0) timers_.push(now + min_runtime_);
  }
  if (!cr.admitted.empty() || !cr.preempted.empty()) fair_stale_ = true;
  return Status::Ok();
}

Status Sim::Run() {
  TESSERA_RETURN_IF_ERROR(Setup());
  const auto wall0 = std::chrono::steady_clock::now();
  size_t next_arrival = 0;
  if (!arrival_order_.empty()) {
    start_t_ = last_t_ = jobs_[arrival_order_[0]].spec.arrival;
  }
  while (true) {
    const double ta = next_arrival < arrival_order_.size()
                          ? jobs_[arrival_order_[next_arrival]].spec.arrival
                          : kInf;
    while (!departures_.empty() &&
           std::get<2>(departures_.top()) != rt_[std::get<1>(departures_.top())].generation)
      departures_.pop();
    const double td = departures_.empty() ? kInf : std::get<0>(departures_.top());
    const double tw = timers_.empty() ? kInf : timers_.top();
    const double tc =
        cycle_due_ ? std::max(static_cast<double>(cycle_k_) * c_.cycle_s, last_t_) : kInf;
    const double t = std::min({ta, td, tw, tc});
    if (t == kInf) break;
    if (opt_.horizon_s > 0 && t >= opt_.horizon_s) {
      Integrate(opt_.horizon_s);
      break;
    }
    Integrate(t);
    while (!departures_.empty() && std::get<0>(departures_.top()) <= t) {
      const auto [end, i, gen] = departures_.top();
      departures_.pop();
      RtJob& j = rt_[i];
      if (gen != j.generation) continue;
      TESSERA_RETURN_IF_ERROR(adm_->Finish(state_, jobs_[i].spec.id));
      j.st = JobState::kFinished;
      usage_[j.queue] -= j.running_eq;
      demand_[j.queue] -= j.running_eq;
      j.running_eq = 0;
      r_.outcomes[i].end = end;
      fair_stale_ = true;
      MarkDirty(t);
    }
    while (next_arrival < arrival_order_.size() &&
           jobs_[arrival_order_[next_arrival]].spec.arrival <= t) {
      const size_t i = arrival_order_[next_arrival++];
      Status st = adm_->Submit(jobs_[i].spec);
      if (!st.ok()) return InvalidArgument(st.message());
      demand_[rt_[i].queue] += rt_[i].pending_eq;
      fair_stale_ = true;
      const double timeout = jobs_[i].spec.gang_timeout_s;
      if (timeout > 0) timers_.push(t + timeout + 1e-6);
      MarkDirty(t);
    }
    while (!timers_.empty() && timers_.top() <= t) {
      timers_.pop();
      MarkDirty(t);
    }
    if (cycle_due_ && tc <= t) {
      if (r_.cycles >= opt_.max_cycles) {
        r_.truncated = true;
        break;
      }
      auto cr = adm_->RunCycle(state_, t);
      if (!cr.ok())
        return Internal("admission cycle at " + std::to_string(t) + " s: " + cr.status().message());
      ++r_.cycles;
      cycle_due_ = false;
      TESSERA_RETURN_IF_ERROR(AfterCycle(*cr, t));
      if (!cr->admitted.empty() || !cr->preempted.empty()) {
        cycle_due_ = true;
        cycle_k_ = static_cast<int64_t>(std::floor(t / c_.cycle_s)) + 1;
      }
      if (opt_.on_cycle) {
        QueueCycleView view{t, state_, *adm_, *cr, jobs_};
        TESSERA_RETURN_IF_ERROR(opt_.on_cycle(view));
      }
    }
  }
  r_.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (r_.outcomes[i].end < 0) r_.outcomes[i].why_pending = adm_->WhyPending(jobs_[i].spec.id);
  }
  Summarise();
  return Status::Ok();
}

void Sim::Summarise() {
  r_.start_s = start_t_;
  r_.end_s = last_t_;
  const double span = last_t_ - start_t_;
  r_.gpu_utilization = span > 0 ? alloc_int_ / (cap_raw_ * span) : 0;
  struct Acc {
    std::vector<double> wait, jct, gang_wait;
  };
  std::vector<Acc> acc(nq_ + 1);
  r_.queues.assign(nq_, {});
  for (size_t q = 0; q < nq_; ++q) {
    r_.queues[q].name = c_.queues[q].name;
    r_.queues[q].weight = weight_[q];
  }
  r_.overall.name = "overall";
  r_.overall.weight = 0;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const QueueJobOutcome& o = r_.outcomes[i];
    const RtJob& j = rt_[i];
    const double arrival = jobs_[i].spec.arrival;
    r_.max_preemptions_per_job = std::max(r_.max_preemptions_per_job, o.preemptions);
    for (size_t k : {static_cast<size_t>(j.queue), nq_}) {
      QueueMetrics& m = k == nq_ ? r_.overall : r_.queues[k];
      ++m.jobs;
      m.preemptions += o.preemptions;
      m.lost_gpu_hours += o.lost_gpu_hours;
      if (o.first_start >= 0) {
        ++m.admitted;
        acc[k].wait.push_back(o.first_start - arrival);
      } else {
        ++m.never_admitted;
      }
      if (o.end >= 0) {
        ++m.completed;
        acc[k].jct.push_back(o.end - arrival);
      }
      if (j.gang) {
        ++m.gangs;
        if (o.first_start >= 0) {
          ++m.gangs_admitted;
          acc[k].gang_wait.push_back(o.first_start - arrival);
        } else {
          ++m.gangs_waiting;
        }
      }
    }
    if (o.first_start < 0) ++r_.never_reasons[o.why_pending];
  }
  for (size_t k = 0; k <= nq_; ++k) {
    QueueMetrics& m = k == nq_ ? r_.overall : r_.queues[k];
    m.p50_wait_s = Quantile(acc[k].wait, 0.50);
    m.p95_wait_s = Quantile(acc[k].wait, 0.95);
    m.p99_wait_s = Quantile(acc[k].wait, 0.99);
    m.mean_wait_s = Mean(acc[k].wait);
    m.max_wait_s =
        acc[k].wait.empty() ? 0 : *std::max_element(acc[k].wait.begin(), acc[k].wait.end());
    m.avg_jct_s = Mean(acc[k].jct);
    m.gang_wait_p95_s = Quantile(acc[k].gang_wait, 0.95);
  }
  for (size_t q = 0; q < nq_; ++q) {
    QueueMetrics& m = r_.queues[q];
    if (span > 0) {
      m.gpu_share = use_int_[q] / (cap_eq_ * span);
      m.fair_share = fair_int_[q] / (cap_eq_ * span);
    }
    if (demand_time_[q] > 0) m.fair_share_deviation = dev_int_[q] / (cap_eq_ * demand_time_[q]);
    m.fair_share_deviation_max = dev_max_[q];
    r_.overall.weight += m.weight;
    r_.overall.gpu_share += m.gpu_share;
    r_.overall.fair_share += m.fair_share;
    r_.overall.fair_share_deviation =
        std::max(r_.overall.fair_share_deviation, m.fair_share_deviation);
    r_.overall.fair_share_deviation_max =
        std::max(r_.overall.fair_share_deviation_max, m.fair_share_deviation_max);
  }
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

nlohmann::ordered_json MetricsJson(const QueueMetrics& m) {
  return {{"weight", m.weight},
          {"jobs", m.jobs},
          {"admitted", m.admitted},
          {"completed", m.completed},
          {"never_admitted", m.never_admitted},
          {"p50_wait_s", m.p50_wait_s},
          {"p95_wait_s", m.p95_wait_s},
          {"p99_wait_s", m.p99_wait_s},
          {"mean_wait_s", m.mean_wait_s},
          {"max_wait_s", m.max_wait_s},
          {"avg_jct_s", m.avg_jct_s},
          {"gpu_share", m.gpu_share},
          {"fair_share", m.fair_share},
          {"fair_share_deviation", m.fair_share_deviation},
          {"fair_share_deviation_max", m.fair_share_deviation_max},
          {"preemptions", m.preemptions},
          {"lost_gpu_hours", m.lost_gpu_hours},
          {"gangs", m.gangs},
          {"gangs_admitted", m.gangs_admitted},
          {"gangs_waiting", m.gangs_waiting},
          {"gang_wait_p95_s", m.gang_wait_p95_s}};
}

nlohmann::ordered_json ResultJson(const QueueSimResult& r) {
  nlohmann::ordered_json queues = nlohmann::ordered_json::object();
  for (const QueueMetrics& m : r.queues) queues[m.name] = MetricsJson(m);
  nlohmann::ordered_json overall = MetricsJson(r.overall);
  overall.erase("weight");
  overall["gpu_utilization"] = r.gpu_utilization;
  overall["cycles"] = r.cycles;
  overall["max_preemptions_per_job"] = r.max_preemptions_per_job;
  overall["start_s"] = r.start_s;
  overall["end_s"] = r.end_s;
  overall["truncated"] = r.truncated;
  overall["wall_seconds"] = r.wall_seconds;
  nlohmann::ordered_json reasons = nlohmann::ordered_json::object();
  for (const auto& [why, n] : r.never_reasons) reasons[why] = n;
  overall["never_admitted_reasons"] = reasons;
  return {{"policy", r.policy},
          {"placement", r.placement},
          {"seed", r.seed},
          {"queues", queues},
          {"overall", overall}};
}

}  // namespace

const std::vector<std::string>& QueuePolicyNames() {
  static const std::vector<std::string> names = {"fifo", "kueue", "tessera"};
  return names;
}

Result<QueuePolicySetup> ApplyQueuePolicy(const QueueCluster& cluster, const std::string& policy) {
  QueuePolicySetup s{cluster.queues, cluster.admission};
  if (policy == "fifo") {
    s.config.fair_sharing = false;
    s.config.preemption = false;
    s.config.reservations = false;
    s.config.backfill = false;
  } else if (policy == "kueue") {
    s.config.reservations = false;
    s.config.backfill = false;
  } else if (policy != "tessera") {
    return InvalidArgument("unknown queue policy '" + policy + "' (known: fifo, kueue, tessera)");
  }
  return s;
}

Result<QueueSimResult> RunQueueSim(const QueueCluster& cluster, const std::vector<QueueJob>& jobs,
                                   const QueueSimOptions& options) {
  if (!(cluster.cycle_s > 0)) return InvalidArgument("cycle_s must be positive");
  QueueSimResult r;
  r.policy = options.policy;
  r.placement = options.placement;
  r.seed = options.seed;
  Sim sim(cluster, jobs, options, r);
  TESSERA_RETURN_IF_ERROR(sim.Run());
  return r;
}

std::string QueueSimTable(const std::vector<QueueSimResult>& results) {
  std::string out;
  char line[512];
  for (const QueueSimResult& r : results) {
    std::snprintf(line, sizeof line,
                  "policy %s (placement %s, seed %llu): GPU utilization "
                  "%.1f%%, %lld cycles, "
                  "span %.0f s, max preemptions per job %d%s\n",
                  r.policy.c_str(), r.placement.c_str(), static_cast<unsigned long long>(r.seed),
                  100 * r.gpu_utilization, static_cast<long long>(r.cycles), r.end_s - r.start_s,
                  r.max_preemptions_per_job, r.truncated ? " (TRUNCATED)" : "");
    out += line;
    std::snprintf(line, sizeof line,
                  "  %-16s %6s %6s %6s %6s %9s %9s %9s %9s %6s %6s %6s %7s %8s %9s %9s\n", "queue",
                  "weight", "jobs", "done", "never", "p50_wait", "p95_wait", "p99_wait", "avg_jct",
                  "share", "fair", "dev", "preempt", "lost_GPUh", "gangs", "gang_p95");
    out += line;
    auto row = [&](const QueueMetrics& m) {
      const std::string gangs = std::to_string(m.gangs_admitted) + "/" + std::to_string(m.gangs);
      std::snprintf(line, sizeof line,
                    "  %-16s %6s %6lld %6lld %6lld %9.0f %9.0f %9.0f %9.0f %6.3f %6.3f "
                    "%6.3f %7lld "
                    "%8.2f %9s %9.0f\n",
                    m.name.c_str(), m.name == "overall" ? "" : Fixed(m.weight, 2).c_str(),
                    static_cast<long long>(m.jobs), static_cast<long long>(m.completed),
                    static_cast<long long>(m.never_admitted), m.p50_wait_s, m.p95_wait_s,
                    m.p99_wait_s, m.avg_jct_s, m.gpu_share, m.fair_share, m.fair_share_deviation,
                    static_cast<long long>(m.preemptions), m.lost_gpu_hours, gangs.c_str(),
                    m.gang_wait_p95_s);
      out += line;
    };
    for (const QueueMetrics& m : r.queues) row(m);
    row(r.overall);
    int shown = 0;
    for (const auto& [why, n] : r.never_reasons) {
      if (shown++ == 5) break;
      out += "  never admitted (" + std::to_string(n) + "): " + why + "\n";
    }
  }
  return out;
}

std::string QueueSimJson(const std::vector<QueueSimResult>& results,
                         const std::string& cluster_source, const std::string& workload_source) {
  nlohmann::ordered_json doc;
  if (results.size() == 1) {
    doc = ResultJson(results[0]);
    doc["cluster"] = cluster_source;
    doc["workload"] = workload_source;
  } else {
    nlohmann::ordered_json policies = nlohmann::ordered_json::object();
    for (const QueueSimResult& r : results) policies[r.policy] = ResultJson(r);
    doc = {{"cluster", cluster_source}, {"workload", workload_source}, {"policies", policies}};
  }
  return doc.dump(2) + "\n";
}

}  // namespace tessera
