// Admission + placement throughput at scale (Google Benchmark).
//
// Setup (built in code, deterministic): 1,000 nodes of 8 GPUs (700 H100-80GB, 300 A100-80GB;
// 128 cores, 1 TiB, label rack = index / 8); 30 queues in 5 cohorts of 6, one flavor each with a
// nominal quota of 8,000 / 30 GPU-equivalents (A100 = 0.5 GPU-eq), unlimited CPU and memory;
// 15,000 jobs spread round-robin over the queues, shapes drawn from a seeded stream: 55% one
// whole GPU, 15% half a GPU, 15% two GPUs, 8% four GPUs, 4% eight GPUs, 3% gangs of 8 one-GPU
// pods in one rack; priorities 0 (90%) or 10; 2-16 cores and 16-128 GiB per pod.
//
// Benchmarks (CPU time of the benchmark thread, so other load on the machine does not count):
//   BM_AdmitAll/<policy>       a fresh Admission (queue policy fifo, kueue or tessera of
//                              sim/queue_sim.h) gets all 15,000 jobs submitted and one RunCycle
//                              on the empty cluster. Timed: Submit + RunCycle.
//   BM_ArrivalCycles/<policy>_load<L>  the 15,000 jobs arrive in 750 cycles of 20, 10 s apart
//                              (on average they ask for L = 88% of the GPUs) or 8 s apart
//                              (L = 110%: a backlog builds up and is retried every cycle);
//                              before each cycle the jobs whose duration (300-3,600 s) has passed
//                              are finished. Timed: Finish + Submit + RunCycle.
//                              `_tryall`: the same with remember_failures off (every pending
//                              job gets its own placement attempt), the same decisions.
// In the same iteration, untimed by the framework, the engine alone (Engine::RunCycle, same
// placement policy and seed) places the pods of the same jobs in the same order on an empty
// cluster with no quota; its CPU time is the baseline.
// Arrival cycles run 3 times each and report mean, median, standard deviation and coefficient
// of variation (the machines are noisy; quote the median).
// Counters: workloads_per_s = jobs / timed CPU seconds; baseline_per_s = jobs / engine-only CPU
// seconds; ratio = workloads_per_s / baseline_per_s; admitted = jobs admitted (first cycle or
// over the run); preempted = preemptions.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <time.h>

#include "admission/admission.h"
#include "cluster/cluster_state.h"
#include "cluster/gpu_catalog.h"
#include "core/random.h"
#include "engine/engine.h"
#include "policies/builtin.h"
#include "sim/queue_sim.h"

namespace tessera {
namespace {

constexpr int kNodes = 1000;
constexpr int kCohorts = 5;
constexpr int kQueuesPerCohort = 6;
constexpr int kJobs = 15000;
constexpr int kWaves = 750;
constexpr uint64_t kJobSeed = 7;
constexpr uint64_t kEngineSeed = 42;

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

QueueCluster MakeCluster() {
  QueueCluster c;
  c.name = "admission-bench";
  const GpuCatalog& cat = GpuCatalog::Builtin();
  for (int i = 0; i < kNodes; ++i) {
    NodeSpec n;
    char name[32];
    std::snprintf(name, sizeof name, "node-%04d", i);
    n.name = name;
    n.cpu = MilliCpu(128000);
    n.memory = MiB(1024 * 1024);
    n.gpu_count = 8;
    n.model = *cat.Find(i % 10 < 7 ? "H100-80GB" : "A100-80GB");
    n.labels["rack"] = "rack-" + std::to_string(i / 8);
    c.nodes.push_back(std::move(n));
  }
  c.admission.gpu_equivalents["A100-80GB"] = 0.5;
  const double capacity_eq = kNodes * 8 * (0.7 + 0.3 * 0.5);
  const int64_t nominal = static_cast<int64_t>(capacity_eq * 1000 / (kCohorts * kQueuesPerCohort));
  for (int k = 0; k < kCohorts; ++k) {
    c.cohorts.push_back("org-" + std::to_string(k));
    for (int q = 0; q < kQueuesPerCohort; ++q) {
      QueueSpec spec;
      spec.name = "org-" + std::to_string(k) + "-team-" + std::to_string(q);
      spec.cohort = c.cohorts.back();
      FlavorQuota f;
      f.name = "gpu";
      f.nominal = {nominal, kUnlimitedQuota, kUnlimitedQuota};
      spec.flavors.push_back(f);
      c.queues.push_back(std::move(spec));
    }
  }
  return c;
}

std::vector<QueueJob> MakeJobs(const QueueCluster& c) {
  Rng rng(kJobSeed);
  std::vector<QueueJob> jobs;
  for (int i = 0; i < kJobs; ++i) {
    QueueJob j;
    JobSpec& s = j.spec;
    s.id = static_cast<WorkloadId>(i + 1);
    s.name = "job-" + std::to_string(i);
    s.queue = c.queues[static_cast<size_t>(i) % c.queues.size()].name;
    s.priority = rng.Uniform(10) == 0 ? 10 : 0;
    const uint64_t shape = rng.Uniform(100);
    int gpus = 1, milli = 1000;
    if (shape < 55) {
    } else if (shape < 70) {
      milli = 500;
    } else if (shape < 85) {
      gpus = 2;
    } else if (shape < 93) {
      gpus = 4;
    } else if (shape < 97) {
      gpus = 8;
    } else {
      s.pods = 8;
      s.topology = TopologyKind::kSameLabel;
      s.topology_label = "rack";
    }
    s.pod = Demand{MilliCpu(1000 * static_cast<int64_t>(2 + rng.Uniform(15))),
                   MiB(1024 * static_cast<int64_t>(16 + rng.Uniform(113))), gpus, milli, 0};
    j.duration_s = static_cast<double>(300 + rng.Uniform(3301));
    jobs.push_back(std::move(j));
  }
  return jobs;
}

struct Fixture {
  QueueCluster cluster = MakeCluster();
  std::vector<QueueJob> jobs = MakeJobs(cluster);
  ClusterState empty;
  Fixture() {
    for (const NodeSpec& n : cluster.nodes) {
      if (!empty.AddNode(n).ok()) std::abort();
    }
  }
};

const Fixture& Get() {
  static const Fixture f;
  return f;
}

std::unique_ptr<Scorer> MakeScorer() {
  PolicyConfig pc;
  pc.name = kDefaultPolicy;
  auto s = BuiltinPolicies().Create(pc);
  if (!s.ok()) std::abort();
  return std::move(s).value();
}

std::unique_ptr<Admission> MakeAdmission(const Fixture& f, const std::string& policy,
                                         bool remember_failures = true) {
  auto setup = ApplyQueuePolicy(f.cluster, policy);
  if (!setup.ok()) std::abort();
  setup->config.remember_failures = remember_failures;
  auto a = Admission::Create(setup->queues, setup->config, MakeScorer(), kEngineSeed);
  if (!a.ok()) {
    std::fprintf(stderr, "%s\n", a.status().message().c_str());
    std::abort();
  }
  return std::move(a).value();
}

// Engine-only placement of every pod of the jobs, in job order, on an empty cluster.
double BaselineSeconds(const Fixture& f) {
  ClusterState state = f.empty;
  Engine engine(MakeScorer(), kEngineSeed);
  std::vector<std::pair<WorkloadId, Demand>> batch;
  for (const QueueJob& j : f.jobs) {
    for (int p = 0; p < j.spec.pods; ++p)
      batch.push_back({j.spec.id * kPodsPerJob + static_cast<WorkloadId>(p), j.spec.pod});
  }
  const double t0 = ThreadCpuSeconds();
  auto plan = engine.RunCycle(state, batch);
  const double t = ThreadCpuSeconds() - t0;
  if (!plan.ok()) std::abort();
  benchmark::DoNotOptimize(plan->decisions.size());
  return t;
}

void Report(benchmark::State& st, double timed, double baseline, int64_t admitted,
            int64_t preempted) {
  const double n = static_cast<double>(kJobs) * static_cast<double>(st.iterations());
  st.SetItemsProcessed(static_cast<int64_t>(n));
  st.counters["workloads_per_s"] = n / timed;
  st.counters["baseline_per_s"] = n / baseline;
  st.counters["ratio"] = baseline / timed;
  st.counters["admitted"] = static_cast<double>(admitted) / static_cast<double>(st.iterations());
  st.counters["preempted"] = static_cast<double>(preempted) / static_cast<double>(st.iterations());
}

void BM_AdmitAll(benchmark::State& st, const std::string& policy) {
  const Fixture& f = Get();
  double timed = 0, baseline = 0;
  int64_t admitted = 0, preempted = 0;
  for (auto _ : st) {
    ClusterState state = f.empty;
    auto adm = MakeAdmission(f, policy);
    const double t0 = ThreadCpuSeconds();
    for (const QueueJob& j : f.jobs) {
      if (!adm->Submit(j.spec).ok()) std::abort();
    }
    auto cr = adm->RunCycle(state, 0);
    const double t = ThreadCpuSeconds() - t0;
    if (!cr.ok()) std::abort();
    st.SetIterationTime(t);
    timed += t;
    admitted += static_cast<int64_t>(cr->admitted.size());
    preempted += static_cast<int64_t>(cr->preempted.size());
    baseline += BaselineSeconds(f);
  }
  Report(st, timed, baseline, admitted, preempted);
}

void BM_ArrivalCycles(benchmark::State& st, const std::string& policy, double gap_s,
                      bool remember_failures = true) {
  const Fixture& f = Get();
  double timed = 0, baseline = 0;
  int64_t admitted = 0, preempted = 0;
  for (auto _ : st) {
    ClusterState state = f.empty;
    auto adm = MakeAdmission(f, policy, remember_failures);
    std::vector<std::pair<double, WorkloadId>> running;  // end time, job
    const size_t per_wave = f.jobs.size() / kWaves;
    double t_total = 0;
    for (int w = 0; w < kWaves; ++w) {
      const double now = w * gap_s;
      const double t0 = ThreadCpuSeconds();
      size_t kept = 0;
      for (const auto& [end, id] : running) {
        if (end <= now && adm->state(id) == JobState::kRunning) {
          if (!adm->Finish(state, id).ok()) std::abort();
        } else if (adm->state(id) == JobState::kRunning) {
          running[kept++] = {end, id};
        }
      }
      running.resize(kept);
      for (size_t i = w * per_wave; i < (w + 1) * per_wave; ++i) {
        JobSpec spec = f.jobs[i].spec;
        spec.arrival = now;
        if (!adm->Submit(spec).ok()) std::abort();
      }
      auto cr = adm->RunCycle(state, now);
      t_total += ThreadCpuSeconds() - t0;
      if (!cr.ok()) std::abort();
      for (WorkloadId id : cr->admitted) running.push_back({now + f.jobs[id - 1].duration_s, id});
      admitted += static_cast<int64_t>(cr->admitted.size());
      preempted += static_cast<int64_t>(cr->preempted.size());
    }
    st.SetIterationTime(t_total);
    timed += t_total;
    baseline += BaselineSeconds(f);
  }
  Report(st, timed, baseline, admitted, preempted);
}

BENCHMARK_CAPTURE(BM_AdmitAll, fifo, std::string("fifo"))
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_AdmitAll, kueue, std::string("kueue"))
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_AdmitAll, tessera, std::string("tessera"))
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_ArrivalCycles, kueue_load88, std::string("kueue"), 10.0)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(3)
    ->DisplayAggregatesOnly(true);
BENCHMARK_CAPTURE(BM_ArrivalCycles, tessera_load88, std::string("tessera"), 10.0)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(3)
    ->DisplayAggregatesOnly(true);
BENCHMARK_CAPTURE(BM_ArrivalCycles, tessera_load110, std::string("tessera"), 8.0)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(3)
    ->DisplayAggregatesOnly(true);
BENCHMARK_CAPTURE(BM_ArrivalCycles, tessera_load110_tryall, std::string("tessera"), 8.0, false)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(3)
    ->DisplayAggregatesOnly(true);

}  // namespace
}  // namespace tessera

BENCHMARK_MAIN();
