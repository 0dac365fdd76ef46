#include "sim/fill_bound.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "policies/capacity_prices.h"
#include "policies/share_prices.h"
#include "sim/parallel.h"

namespace tessera {
namespace {

constexpr size_t kMaxPairs = 4096;

struct Group {
  GpuModelId model = kNoGpuModel;
  int gpu_count = 0;
  double gpu = 0, cpu = 0, mem = 0;  // GPUs, cores, GiB
};

// The dual feasible functions u^(k) of Fekete and Schepers for k = 1..kDff: u(x) = x where
// (k + 1) x is whole, else floor((k + 1) x) / k. The u of the pieces on any one GPU add up to at
// most 1.
constexpr int kDff = 3;

// A piece of `milli` GPU under u^(1..kDff): its u per GPU of the piece, and its band, which
// pieces share when every u^(k) takes the same step for them ((k + 1) x whole, or its floor).
struct Dff {
  int64_t band = 0;
  std::array<double, kDff> per_gpu{};
};
Dff DffOf(int64_t milli) {
  Dff out;
  for (int k = 1; k <= kDff; ++k) {
    const int64_t scaled = (k + 1) * milli;
    const bool whole = scaled % 1000 == 0;
    out.band = out.band * 64 + (whole ? 32 : 0) + scaled / 1000;
    out.per_gpu[k - 1] =
        whole ? 1.0
              : static_cast<double>(scaled / 1000) / k / (static_cast<double>(milli) / 1000.0);
  }
  return out;
}

struct Class {
  int num_gpu = 1;
  ModelMask models = 0;
  double gpu = 0;           // GPUs asked in all
  double cpu = 0, mem = 0;  // least cores and GiB per GPU of its pods
  // Per k, the least u^(k) per GPU of its pods' pieces.
  std::array<double, kDff> dff{};
};

struct Pod {
  double gpu, cpu_per_gpu, mem_per_gpu;
  Dff dff;  // of its pieces
};

// A class of `kind` (GPU count, allowed models) with nothing in it yet.
Class EmptyClass(const std::pair<int, ModelMask>& kind) {
  const double inf = std::numeric_limits<double>::infinity();
  Class c{kind.first, kind.second, 0, inf, inf, {}};
  c.dff.fill(inf);
  return c;
}

std::vector<Group> GroupsOf(const std::vector<NodeSpec>& nodes) {
  std::map<std::pair<GpuModelId, int>, Group> by;
  for (const NodeSpec& n : nodes) {
    if (n.gpu_count <= 0) continue;
    Group& g = by[{n.model, n.gpu_count}];
    g.model = n.model;
    g.gpu_count = n.gpu_count;
    g.gpu += n.gpu_count;
    g.cpu += static_cast<double>(n.cpu.v) / 1000.0;
    g.mem += static_cast<double>(n.memory.v) / 1024.0;
  }
  std::vector<Group> out;
  for (auto& [key, g] : by) out.push_back(g);
  return out;
}

// The arrived GPU pods by GPU count and allowed models; each such kind is cut, in order of CPU
// per GPU, into runs of about equal GPU (in proportion to the kind's share of the GPU asked, at
// least one), and each run split by the pieces' u^(k) steps (Dff::band).
std::vector<Class> ClassesOf(std::span<const Demand> arrived, int max_classes) {
  std::map<std::pair<int, ModelMask>, std::vector<Pod>> kinds;
  double total = 0;
  for (const Demand& d : arrived) {
    if (d.num_gpu <= 0 || d.gpu_milli <= 0) continue;
    const double gpu = static_cast<double>(d.TotalMilliGpu()) / 1000.0;
    kinds[{d.num_gpu, d.models}].push_back({gpu, static_cast<double>(d.cpu.v) / 1000.0 / gpu,
                                            static_cast<double>(d.memory.v) / 1024.0 / gpu,
                                            DffOf(d.gpu_milli)});
    total += gpu;
  }
  std::vector<Class> out;
  for (auto& [kind, pods] : kinds) {
    std::sort(pods.begin(), pods.end(),
              [](const Pod& a, const Pod& b) { return a.cpu_per_gpu < b.cpu_per_gpu; });
    double share = 0;
    for (const Pod& p : pods) share += p.gpu;
    const int cuts = std::max(1, static_cast<int>(std::lround(share / total * max_classes)));
    std::map<int64_t, Class> run;  // by band
    double done = 0;
    int made = 0;
    for (size_t i = 0; i < pods.size(); ++i) {
      Class& c = run.try_emplace(pods[i].dff.band, EmptyClass(kind)).first->second;
      c.gpu += pods[i].gpu;
      c.cpu = std::min(c.cpu, pods[i].cpu_per_gpu);
      c.mem = std::min(c.mem, pods[i].mem_per_gpu);
      for (int k = 0; k < kDff; ++k) c.dff[k] = std::min(c.dff[k], pods[i].dff.per_gpu[k]);
      done += pods[i].gpu;
      if (i + 1 == pods.size() || done >= share * (made + 1) / cuts) {
        for (auto& [band, cls] : run) out.push_back(cls);
        run.clear();
        ++made;
      }
    }
  }
  return out;
}

}  // namespace

Result<double> FluidPlaceableMilliGpu(const std::vector<NodeSpec>& nodes,
                                      std::span<const Demand> arrived, int max_classes) {
  if (max_classes < 1 || max_classes > 1024)
    return InvalidArgument("fill bound: max_classes must be in [1, 1024]");
  const std::vector<Group> groups = GroupsOf(nodes);
  const std::vector<Class> classes = ClassesOf(arrived, max_classes);
  std::vector<std::pair<size_t, size_t>> vars;  // (class, group) pairs a pod may use
  for (size_t k = 0; k < classes.size(); ++k)
    for (size_t g = 0; g < groups.size(); ++g) {
      if (groups[g].gpu_count < classes[k].num_gpu) continue;
      const ModelMask mask = classes[k].models;
      if (mask != 0 && (groups[g].model >= 64 || !((mask >> groups[g].model) & 1))) continue;
      vars.push_back({k, g});
    }
  if (vars.empty()) return 0.0;
  if (vars.size() > kMaxPairs)
    return InvalidArgument("fill bound: " + std::to_string(vars.size()) +
                           " (class, group) pairs, more than " + std::to_string(kMaxPairs));
  // Rows: each class's demand, then each group's GPU, CPU and memory, then per k its GPUs'
  // u^(k) of the pieces they hold.
  const size_t nk = classes.size(), ng = groups.size(), n = vars.size();
  const size_t rows = nk + (3 + kDff) * ng;
  std::vector<double> a(rows * n, 0.0), b(rows, 0.0), c(n, 1.0);
  for (size_t k = 0; k < nk; ++k) b[k] = classes[k].gpu;
  for (size_t g = 0; g < ng; ++g) {
    b[nk + g] = groups[g].gpu;
    b[nk + ng + g] = groups[g].cpu;
    b[nk + 2 * ng + g] = groups[g].mem;
    for (int k = 0; k < kDff; ++k) b[nk + (3 + k) * ng + g] = groups[g].gpu;
  }
  for (size_t v = 0; v < n; ++v) {
    const auto [k, g] = vars[v];
    a[k * n + v] = 1;
    a[(nk + g) * n + v] = 1;
    a[(nk + ng + g) * n + v] = classes[k].cpu;
    a[(nk + 2 * ng + g) * n + v] = classes[k].mem;
    for (int j = 0; j < kDff; ++j) a[(nk + (3 + j) * ng + g) * n + v] = classes[k].dff[j];
  }
  std::vector<double> y = SolveLpDuals(a, b, c);
  // Every entry of A is >= 0 and c = 1, so y / min_j (A^T y)_j is dual-feasible.
  double least = std::numeric_limits<double>::infinity();
  for (size_t v = 0; v < n; ++v) {
    double lhs = 0;
    for (size_t r = 0; r < rows; ++r) lhs += a[r * n + v] * y[r];
    least = std::min(least, lhs);
  }
  if (!(least > 0)) return Internal("fill bound: the LP's duals cannot be made feasible");
  double bound = 0;
  for (size_t r = 0; r < rows; ++r) bound += b[r] * y[r];
  if (least < 1) bound /= least;
  // Nothing places more than arrived, nor more than the cluster holds.
  double asked = 0, held = 0;
  for (const Class& k : classes) asked += k.gpu;
  for (const Group& g : groups) held += g.gpu;
  return std::min({bound, asked, held}) * 1000.0;
}

std::optional<double> SharePackingFloorPct(std::span<const Demand> arrived) {
  std::map<int, double> shares;  // milli -> count
  double share_gpu = 0, whole_gpu = 0;
  for (const Demand& d : arrived) {
    if (d.num_gpu <= 0 || d.gpu_milli <= 0) continue;
    if (d.gpu_milli >= 1000) {
      whole_gpu += static_cast<double>(d.TotalMilliGpu()) / 1000.0;
    } else {
      shares[d.gpu_milli] += d.num_gpu;
      share_gpu += static_cast<double>(d.TotalMilliGpu()) / 1000.0;
    }
  }
  if (shares.empty()) {
    if (whole_gpu > 0) return 0.0;
    return std::nullopt;
  }
  if (shares.size() > SharePrices::kMaxSizes) return std::nullopt;
  std::vector<ShareCount> items;
  double count = 0;
  for (const auto& [milli, n] : shares) {
    items.push_back({milli, n});
    count += n;
  }
  // The LP's objective is in GPUs per share, over the counts it was given.
  const double packed = SharePrices::Solve(items).objective() * count;
  return 100.0 * std::max(0.0, packed - share_gpu) / (packed + whole_gpu);
}

Result<FillBoundRun> ComputeFillBound(const std::vector<NodeSpec>& nodes,
                                      const std::vector<Workload>& pods, double tune_ratio,
                                      uint64_t seed) {
  if (Status st = ValidateTuneRatio(tune_ratio); !st.ok()) return st;
  int64_t cap = 0;
  for (const NodeSpec& n : nodes) cap += static_cast<int64_t>(n.gpu_count) * 1000;
  if (cap <= 0) return InvalidArgument("fill bound: the cluster has no GPU");
  const std::vector<Workload> seq = PrepareFillSequence(pods, cap, tune_ratio, seed);
  std::vector<Demand> demands;
  demands.reserve(seq.size());
  size_t at_100 = seq.size();
  int64_t arrived = 0;
  for (size_t i = 0; i < seq.size(); ++i) {
    demands.push_back(seq[i].demand);
    arrived += seq[i].demand.TotalMilliGpu();
    if (at_100 == seq.size() && arrived >= cap) at_100 = i + 1;
  }
  const double capacity = static_cast<double>(cap);
  FillBoundRun run;
  run.seed = seed;
  Result<double> first = FluidPlaceableMilliGpu(nodes, std::span(demands).first(at_100));
  if (!first.ok()) return first.status();
  run.unalloc_pct_at_100 = 100.0 - *first / capacity * 100.0;
  run.share_packing_pct_at_100 = SharePackingFloorPct(std::span(demands).first(at_100));
  Result<double> end = FluidPlaceableMilliGpu(nodes, demands);
  if (!end.ok()) return end.status();
  run.unalloc_pct_at_130 = 100.0 - *end / capacity * 100.0;
  return run;
}

FillBoundStats SummarizeFillBounds(const std::vector<FillBoundRun>& runs) {
  std::vector<double> at_100, at_130, packing;
  for (const FillBoundRun& r : runs) {
    at_100.push_back(r.unalloc_pct_at_100);
    at_130.push_back(r.unalloc_pct_at_130);
    if (r.share_packing_pct_at_100) packing.push_back(*r.share_packing_pct_at_100);
  }
  FillBoundStats out{Stats::Of(at_100), Stats::Of(at_130), std::nullopt};
  if (!runs.empty() && packing.size() == runs.size()) out.share_packing_at_100 = Stats::Of(packing);
  return out;
}

Result<std::vector<FillBoundRun>> ComputeFillBounds(const std::vector<NodeSpec>& nodes,
                                                    const std::vector<Workload>& pods,
                                                    double tune_ratio,
                                                    const std::vector<uint64_t>& seeds,
                                                    unsigned threads) {
  std::vector<std::optional<Result<FillBoundRun>>> out(seeds.size());
  ParallelFor(seeds.size(), threads,
              [&](size_t i) { out[i] = ComputeFillBound(nodes, pods, tune_ratio, seeds[i]); });
  std::vector<FillBoundRun> runs;
  for (auto& r : out) {
    if (!r->ok()) return r->status();
    runs.push_back(**r);
  }
  return runs;
}

}  // namespace tessera
