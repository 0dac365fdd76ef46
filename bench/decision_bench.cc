// Placement-decision throughput and per-node memory of the engine (Google Benchmark).
//
// Cluster: N nodes replicating the mix of the Alibaba GPU trace's 1,213 GPU nodes (model, GPU
// count, CPU and memory per node kind, counts as in the trace README), generated in code and
// laid out in a seeded order. Pre-fill: a seeded stream of demands drawn from the trace's most
// frequent task shapes is placed on random feasible nodes with random GPU choice until 60% of
// the GPU capacity is allocated, so nodes are in varied states. The pre-filled cluster is built
// once per N and copied for every benchmark run.
//
// Timed loop (one iteration = one arrival): Engine::Observe + Engine::Decide, timed manually with
// the thread's CPU clock, so only the decision is measured and other load on the machine does
// not inflate it (it still shares caches and memory bandwidth). Untimed: the decided pod is
// allocated and random live pods are released until the allocation is back at 60%, so a commit
// changes one or two nodes.
//   warm: scorer caches were warmed by kWarmup untimed arrivals; between decisions only the
//         committed nodes change.
//   cold: before every decision each node is touched (a zero demand allocated and released),
//         so every node carries a new stamp and no cached per-node value is reusable.
// Policies: fgd (target workload = TargetWorkload::FromDemands of 8,192 generated demands),
// tessera (learns online from what it observes), bestfit (no caches; same-run baseline).
//
// Counters: items_per_second = decisions per second. state_B/node and engine_B/node are heap
// bytes measured with glibc mallinfo2 (uordblks + hblkhd, i.e. including mmap-ed blocks): state =
// growth while building and pre-filling the ClusterState (specs, free vectors, name index, ledger
// at 60%); engine = bytes released when the engine (node order, feasible list, scorer and its
// caches, and whatever the scorer keeps per observed arrival) is destroyed after the timed loop.
// Both are divided by N. Without glibc they read 0. feasible = mean feasible nodes per decision;
// placed = fraction of decisions that found a node.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <time.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "cluster/cluster_state.h"
#include "cluster/gpu_catalog.h"
#include "cluster/target_workload.h"
#include "core/random.h"
#include "engine/engine.h"
#include "engine/gpu_select.h"
#include "policies/builtin.h"

namespace tessera {
namespace {

constexpr double kFillFraction = 0.60;
constexpr int kWarmup = 4096;
constexpr size_t kStreamLength = size_t{1} << 16;
constexpr uint64_t kClusterSeed = 1;
constexpr uint64_t kPrefillSeed = 2;
constexpr uint64_t kTargetSeed = 3;
constexpr uint64_t kStreamSeed = 4;
constexpr uint64_t kEngineSeed = 42;

struct NodeKind {
  const char* model;
  int gpus;
  int64_t cpu_milli;
  int64_t memory_mib;
  int count;  // nodes of this kind among the trace's 1,213 GPU nodes
};

// The GPU nodes of openb_node_list_gpu_node.csv grouped by (model, GPUs, CPU, memory).
constexpr std::array<NodeKind, 15> kNodeKinds{{
    {"G2", 8, 96000, 393216, 549},
    {"T4", 2, 104000, 524288, 387},
    {"P100", 2, 16000, 122880, 107},
    {"G3", 8, 128000, 786432, 39},
    {"V100M16", 4, 32000, 131072, 28},
    {"P100", 2, 64000, 262144, 22},
    {"V100M32", 8, 96000, 786432, 21},
    {"V100M16", 1, 8000, 32768, 19},
    {"T4", 4, 96000, 393216, 17},
    {"V100M32", 4, 48000, 376832, 9},
    {"V100M16", 8, 64000, 262144, 7},
    {"P100", 1, 8000, 61440, 3},
    {"P100", 2, 8000, 61440, 2},
    {"A10", 1, 128000, 1048576, 2},
    {"V100M16", 8, 82000, 344064, 1},
}};

struct ShapeWeight {
  int64_t cpu_milli;
  int num_gpu;
  int gpu_milli;
  int64_t memory_mib;
  int count;  // tasks of this shape in openb_pod_list_default.csv
};

// The 56 most frequent task shapes of the default trace (99% of its 8,152 tasks), with their
// mean memory.
constexpr std::array<ShapeWeight, 56> kShapes{{
    {3152, 1, 810, 5600, 1047},   {11300, 1, 1000, 48916, 874}, {11400, 1, 1000, 51350, 599},
    {3152, 1, 1000, 5600, 470},   {11908, 1, 470, 47104, 388},  {12500, 0, 0, 57388, 366},
    {8000, 1, 470, 30517, 360},   {12000, 1, 1000, 21803, 326}, {32000, 0, 0, 49233, 290},
    {18708, 1, 1000, 64512, 255}, {11908, 1, 650, 47104, 237},  {4000, 1, 320, 21736, 232},
    {9810, 1, 1000, 41560, 195},  {8000, 0, 0, 29595, 185},     {8000, 1, 1000, 22473, 164},
    {4000, 1, 1000, 25868, 159},  {15700, 1, 1000, 58368, 158}, {11908, 1, 1000, 47104, 153},
    {16000, 1, 1000, 40001, 150}, {4000, 1, 230, 27390, 122},   {6000, 1, 460, 11093, 120},
    {15400, 0, 0, 51200, 120},    {16500, 0, 0, 51200, 95},     {14200, 1, 1000, 58368, 93},
    {24200, 1, 1000, 93184, 84},  {3152, 1, 590, 5600, 75},     {8000, 1, 320, 30517, 72},
    {4152, 1, 550, 10600, 72},    {11900, 1, 1000, 75291, 55},  {4000, 1, 160, 15399, 54},
    {4152, 1, 370, 10600, 45},    {4000, 1, 220, 20048, 43},    {8200, 1, 1000, 33792, 41},
    {15200, 1, 1000, 80896, 36},  {4152, 1, 810, 10600, 31},    {16400, 1, 1000, 123127, 29},
    {1000, 1, 320, 2048, 22},     {6000, 1, 160, 22888, 20},    {8000, 1, 220, 30517, 19},
    {88000, 8, 1000, 327680, 18}, {8000, 1, 230, 30517, 18},    {64200, 8, 1000, 263168, 18},
    {4000, 1, 480, 22888, 18},    {4000, 1, 110, 19920, 18},    {1000, 1, 1000, 6144, 15},
    {16000, 0, 0, 33970, 14},     {8000, 1, 650, 30517, 12},    {7000, 1, 1000, 30000, 11},
    {11400, 0, 0, 57344, 11},     {32200, 4, 1000, 132096, 9},  {15400, 1, 1000, 90112, 9},
    {6000, 1, 1000, 27648, 8},    {2000, 1, 1000, 13312, 8},    {14900, 1, 1000, 73728, 8},
    {4000, 1, 330, 22888, 7},     {16200, 2, 1000, 66560, 7},
}};

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

size_t HeapInUse() {
#if defined(__GLIBC__)
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#else
  return 0;
#endif
}

class DemandStream {
 public:
  explicit DemandStream(uint64_t seed) : rng_(seed) {
    for (const auto& s : kShapes) total_ += s.count;
  }
  Demand Next() {
    int64_t pick = static_cast<int64_t>(rng_.Uniform(static_cast<uint64_t>(total_)));
    for (const auto& s : kShapes) {
      if (pick < s.count) {
        return Demand{MilliCpu(s.cpu_milli), MiB(s.memory_mib), s.num_gpu, s.gpu_milli, 0};
      }
      pick -= s.count;
    }
    return {};
  }

 private:
  Rng rng_;
  int64_t total_ = 0;
};

std::vector<Demand> Generate(uint64_t seed, size_t n) {
  DemandStream s(seed);
  std::vector<Demand> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(s.Next());
  return out;
}

// A pre-filled cluster of one size, shared (by copy) by every benchmark of that size.
struct Prototype {
  ClusterState state;
  std::vector<WorkloadId> live;
  WorkloadId next_id = 1;
  double state_bytes_per_node = 0;
};

void BuildNodes(ClusterState& state, size_t num_nodes) {
  std::vector<uint8_t> order;
  for (size_t k = 0; k < kNodeKinds.size(); ++k) order.insert(order.end(), kNodeKinds[k].count, k);
  Rng rng(kClusterSeed);
  rng.Shuffle(order);
  const GpuCatalog& catalog = GpuCatalog::Builtin();
  for (size_t i = 0; i < num_nodes; ++i) {
    const NodeKind& kind = kNodeKinds[order[i % order.size()]];
    char name[32];
    std::snprintf(name, sizeof name, "node-%06zu", i);
    NodeSpec spec{name,      MilliCpu(kind.cpu_milli),  MiB(kind.memory_mib),
                  kind.gpus, *catalog.Find(kind.model), {}};
    if (!state.AddNode(std::move(spec)).ok()) std::abort();
  }
}

void Prefill(Prototype& p) {
  ClusterState& state = p.state;
  const int64_t target =
      static_cast<int64_t>(kFillFraction * static_cast<double>(state.gpu_capacity_milli()));
  DemandStream stream(kPrefillSeed);
  Rng rng(kPrefillSeed);
  const size_t n = state.num_nodes();
  while (state.gpu_allocated_milli() < target) {
    const Demand d = stream.Next();
    for (int attempt = 0; attempt < 64; ++attempt) {
      const NodeIdx node = static_cast<NodeIdx>(rng.Uniform(n));
      if (FilterNode(state.free(node), d) != FilterVerdict::kFits) continue;
      const GpuMask gpus = SelectRandom(state.free(node), d, rng);
      if (!state.Allocate(p.next_id, d, {node, gpus}).ok()) std::abort();
      p.live.push_back(p.next_id++);
      break;
    }
  }
}

const Prototype& GetPrototype(size_t num_nodes) {
  static std::map<size_t, std::unique_ptr<Prototype>> cache;
  auto& slot = cache[num_nodes];
  if (!slot) {
    slot = std::make_unique<Prototype>();
    slot->live.reserve(num_nodes * 8);
    const size_t before = HeapInUse();
    BuildNodes(slot->state, num_nodes);
    Prefill(*slot);
    slot->state_bytes_per_node =
        static_cast<double>(HeapInUse() - before + sizeof(ClusterState)) / num_nodes;
  }
  return *slot;
}

const std::vector<Demand>& Stream() {
  static const std::vector<Demand> stream = Generate(kStreamSeed, kStreamLength);
  return stream;
}

std::unique_ptr<Scorer> MakeScorer(const std::string& policy) {
  PolicyConfig config;
  config.name = policy;
  if (policy == "fgd") {
    const std::vector<Demand> sample = Generate(kTargetSeed, 8192);
    config.target = TargetWorkload::FromDemands(sample);
  }
  auto scorer = BuiltinPolicies().Create(config);
  if (!scorer.ok()) std::abort();
  return std::move(*scorer);
}

// Arrival loop state: the cluster, its live pods and the position in the demand stream.
class Workbench {
 public:
  explicit Workbench(const Prototype& p)
      : state_(p.state), live_(p.live), next_id_(p.next_id), rng_(kPrefillSeed + 100) {
    target_milli_ =
        static_cast<int64_t>(kFillFraction * static_cast<double>(state_.gpu_capacity_milli()));
  }

  const ClusterState& state() const { return state_; }
  const Demand& NextDemand() { return Stream()[pos_++ % Stream().size()]; }
  WorkloadId NextId() const { return next_id_; }

  void Commit(const Decision& d) {
    ++decisions_;
    if (d.placed) {
      ++placed_;
      if (!state_.Allocate(next_id_, d.demand, d.placement).ok()) std::abort();
      live_.push_back(next_id_);
    }
    ++next_id_;
    while (state_.gpu_allocated_milli() > target_milli_ && !live_.empty()) {
      const size_t i = rng_.Uniform(live_.size());
      if (!state_.Release(live_[i]).ok()) std::abort();
      live_[i] = live_.back();
      live_.pop_back();
    }
  }

  // Gives every node a new stamp without changing its free resources.
  void TouchAll() {
    const Demand zero{};
    for (NodeIdx n = 0; n < state_.num_nodes(); ++n) {
      if (!state_.Allocate(kTouchId, zero, {n, 0}).ok()) std::abort();
      if (!state_.Release(kTouchId).ok()) std::abort();
    }
  }

  double placed_fraction() const {
    return decisions_ == 0 ? 0 : static_cast<double>(placed_) / static_cast<double>(decisions_);
  }

 private:
  static constexpr WorkloadId kTouchId = ~WorkloadId{0};
  ClusterState state_;
  std::vector<WorkloadId> live_;
  WorkloadId next_id_;
  Rng rng_;
  int64_t target_milli_ = 0;
  size_t pos_ = 0;
  int64_t decisions_ = 0;
  int64_t placed_ = 0;
};

void BM_Decide(benchmark::State& st, const std::string& policy, bool cold) {
  const size_t num_nodes = static_cast<size_t>(st.range(0));
  const Prototype& proto = GetPrototype(num_nodes);
  Workbench bench(proto);
  auto engine = std::make_unique<Engine>(MakeScorer(policy), kEngineSeed);
  for (int i = 0; i < kWarmup; ++i) {
    const Demand& d = bench.NextDemand();
    engine->Observe(d);
    bench.Commit(engine->Decide(bench.state(), bench.NextId(), d));
  }
  int64_t feasible = 0;
  for (auto _ : st) {
    if (cold) bench.TouchAll();
    const Demand& d = bench.NextDemand();
    const double start = ThreadCpuSeconds();
    engine->Observe(d);
    Decision dec = engine->Decide(bench.state(), bench.NextId(), d);
    st.SetIterationTime(ThreadCpuSeconds() - start);
    feasible += dec.feasible_nodes;
    bench.Commit(dec);
  }
  const size_t heap_with_engine = HeapInUse();
  engine.reset();
  const size_t heap_after_engine = HeapInUse();
  st.SetItemsProcessed(st.iterations());
  st.counters["state_B/node"] = proto.state_bytes_per_node;
  st.counters["engine_B/node"] =
      static_cast<double>(heap_with_engine - heap_after_engine) / static_cast<double>(num_nodes);
  st.counters["feasible"] =
      static_cast<double>(feasible) / static_cast<double>(std::max<int64_t>(1, st.iterations()));
  st.counters["placed"] = bench.placed_fraction();
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  struct Size {
    int64_t nodes;
    int64_t warm_iterations;
    int64_t cold_iterations;
  };
  const Size sizes[] = {{1000, 20000, 2000}, {10000, 4000, 200}, {100000, 500, 20}};
  for (const char* policy : {"bestfit", "fgd", "tessera"}) {
    for (const bool cold : {false, true}) {
      const std::string name = std::string("Decide/") + policy + (cold ? "/cold" : "/warm");
      for (const Size& s : sizes) {
        benchmark::RegisterBenchmark(name.c_str(), tessera::BM_Decide, std::string(policy), cold)
            ->Arg(s.nodes)
            ->ArgName("nodes")
            ->Iterations(cold ? s.cold_iterations : s.warm_iterations)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
