// Tessera's policy: fragmentation descent with CPU-stranding look-ahead, a share-packing loss,
// a model-scarcity loss and a capacity-balance loss, against the workload mix learned online.
//
// For a node with free CPU c and idle GPU R (milli), the GPU that CPU exhaustion will strand is
// S = sum over the GPU shapes m seen so far of w_m * max(0, R - c / kappa_m): w_m is m's share of
// the GPU requested, kappa_m its milli-CPU per milli-GPU plus the CPU of CPU-only workloads per
// milli-GPU of the whole mix (so the node is filled at each shape's own ratio, in proportion to
// the GPU each shape asks for). The policy minimises
//   x = Delta F + lambda * Delta S + mu * 1000 * Loss(r, d) + sigma * phi * (p_m - p_min(A)) * g
//       + rho * B(n, d)
// where F is the FGD fragmentation measure against the shapes learned online (docs/POLICIES.md);
// Loss(r, d), for a GPU-share pod only, is how far putting share d on a GPU with r free moves
// away from an optimal fractional packing of the shares seen so far (LP dual prices,
// share_prices.h); and p_m is the scarcity of the node's GPU model m: the share of m's free GPU
// that the model-pinned demand seen so far would claim if the mix filled the cluster up to
// whichever of GPU and CPU runs out first (each pinned class spread over its allowed models by
// free capacity, plus for every model a class pinned to it alone at the upper confidence bound
// of a share not seen yet, capped at 1), p_min(A) the lowest price among the models the pod
// allows and g its milli-GPU; phi is the share of the cluster still free when the prices were
// computed, in whichever of GPU and CPU is scarcer (the pinned demand to come can only claim what
// is free). The policy adds rho * B(n, d): the capacity-balance loss of capacity_prices.h, the
// cost of the workload's GPU and CPU at the shadow prices of its node's group above the cheapest
// group that can host it, from an LP that places the mix learned so far on the free capacity of
// each group (nodes of one GPU model and GPU count). The balance prices are recomputed at the
// first PreScore after each re-learning and after the cluster's free GPU or CPU moved by
// balance_resolve_fraction; model prices and phi follow the ledger's free capacity at every GPU
// decision (moving on once they change a one-GPU cost by reprice_tolerance score steps). Both
// losses are therefore added after the score cache, in Finish, and the cache holds the rest of x.
// It scores x like FGD: floor(100 * sigmoid(-x / T)), so candidates within about T/25 milli-GPU of
// each other tie and the engine's seeded node order spreads them.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include "policies/builtin.h"
#include "policies/capacity_prices.h"
#include "policies/frag_descent.h"
#include "policies/share_prices.h"

namespace tessera {
namespace {

constexpr int kModels = 64;  // model ids of a ModelMask

// Shapes of similar CPU-to-GPU ratio, for the stranding term S.
struct RatioBucket {
  double weight = 0;       // share of the GPU requested by GPU workloads
  double gpu_per_cpu = 0;  // 1 / kappa_m, averaged over the bucket by weight
};

struct Learned {
  double kappa = 14.0;  // milli-CPU per milli-GPU over every workload seen; sizes the mix's fill
  // The ratios of the GPU shapes seen (empty until one was seen: then S uses kappa).
  std::vector<RatioBucket> ratios;
  // Delta S of the last (node state, demand) scored: a share demand asks it once per candidate
  // GPU, and S depends only on the node's totals. Forgotten when the ratios change.
  struct {
    uint64_t stamp = 0;
    int64_t cpu = 0;
    int64_t milli = 0;
    double delta = 0;
  } last_delta_s;
  SharePrices prices;  // dual prices of the share-packing LP over the shares seen so far
  // Scarcity of each GPU model: the share of its free capacity that the model-pinned GPU
  // demand seen so far would claim if the mix filled the cluster (capped at 1), and the free
  // GPU per model (milli) it was computed from: the prices in use (PriceModels).
  std::array<double, kModels> model_price{};
  std::array<double, kModels> model_capacity{};
  TargetWorkload all_shapes;  // every shape seen, at the last Learn
  // The model-pinned classes seen (allowed models, share of the GPU requested), at the last Learn.
  std::vector<std::pair<ModelMask, double>> pinned;
  int64_t gpu_tasks = 0;  // GPU tasks seen, at the last Learn
  // Learn ran: the next PreScore solves the balance LP again, and the next GPU demand's
  // PreScore puts new model prices in use whatever they moved.
  bool balance_stale = false, models_stale = false;
  // The share of the cluster's GPU capacity that was free when the prices were last computed.
  double free_share = 1.0;
  // The LP classes of the mix seen (demand: share of the GPU requested), at the last Learn.
  std::vector<CapacityClass> balance_classes;
  CapacityPrices balance;  // updated with the model prices
  // The cluster's free milli-GPU (FreeGpu) and milli-CPU when the balance LP was last solved.
  double balance_gpu = 0, balance_cpu = 0;

  // The lowest price among the models of `mask` present in the cluster (0 for mask 0 when
  // some model has price 0, as for any pod that may use every model). Remembers the last mask
  // asked (a decision asks once per candidate GPU); ForgetMinPrice when the prices change.
  double MinPrice(ModelMask mask) {
    if (min_price_known && mask == min_price_mask) return min_price;
    double best = 1.0;
    for (int m = 0; m < kModels; ++m) {
      if (model_capacity[m] <= 0) continue;
      if (mask != 0 && !((mask >> m) & 1)) continue;
      best = std::min(best, model_price[m]);
    }
    min_price_known = true;
    min_price_mask = mask;
    min_price = best;
    return best;
  }
  void ForgetMinPrice() { min_price_known = false; }
  bool min_price_known = false;
  ModelMask min_price_mask = 0;
  double min_price = 1.0;
};

// u_m = sum over pinned classes k that allow m of D_k / cap(A_k), where D_k is class k's share
// of the GPU demand seen so far times the GPU that the mix can still place (`fill_gpu`): each
// pinned class spreads over its allowed models in proportion to their free capacity.
// `unseen_share` adds, for every model, a class pinned to that model alone that was not seen
// yet, with that share of the demand to come (docs/POLICIES.md item 6).
std::array<double, kModels> ModelPrices(const std::array<double, kModels>& capacity,
                                        std::span<const std::pair<ModelMask, double>> pinned,
                                        double fill_gpu, double unseen_share) {
  std::array<double, kModels> price{};
  if (fill_gpu <= 0) return price;
  if (unseen_share > 0) {
    for (int m = 0; m < kModels; ++m)
      if (capacity[m] > 0) price[m] = unseen_share * fill_gpu / capacity[m];
  }
  for (const auto& [mask, share] : pinned) {
    double cap = 0;
    for (int m = 0; m < kModels; ++m) {
      if ((mask >> m) & 1) cap += capacity[m];
    }
    if (cap <= 0) continue;
    for (int m = 0; m < kModels; ++m) {
      if ((mask >> m) & 1) price[m] += share * fill_gpu / cap;
    }
  }
  for (double& p : price) p = std::min(1.0, p);
  return price;
}

// The model-pinned GPU classes of `all` by allowed models, each with its share of the GPU
// requested.
std::vector<std::pair<ModelMask, double>> LearnPinned(const TargetWorkload& all) {
  double total_gpu = 0;
  for (const TaskShape& t : all.shapes) total_gpu += t.popularity * t.num_gpu * t.gpu_milli;
  std::map<ModelMask, double> by_mask;
  if (total_gpu > 0) {
    for (const TaskShape& t : all.shapes) {
      if (t.models == 0 || t.num_gpu == 0) continue;
      by_mask[t.models] += t.popularity * t.num_gpu * t.gpu_milli / total_gpu;
    }
  }
  return {by_mask.begin(), by_mask.end()};
}

// At most this many ratio buckets: S costs one term per bucket, and shapes of nearly the same
// ratio strand nearly the same GPU.
constexpr size_t kRatioBuckets = 16;

// Buckets the GPU shapes of `all` by kappa_m (including the CPU-only workloads' CPU spread
// over the GPU requested), each bucket about an equal share of the GPU requested.
std::vector<RatioBucket> LearnRatios(const TargetWorkload& all) {
  double gpu = 0, cpu_only = 0;
  for (const TaskShape& t : all.shapes) {
    if (t.num_gpu == 0)
      cpu_only += t.popularity * static_cast<double>(t.cpu);
    else
      gpu += t.popularity * t.num_gpu * t.gpu_milli;
  }
  std::vector<RatioBucket> out;
  if (gpu <= 0) return out;
  const double cpu_only_per_gpu = cpu_only / gpu;
  std::vector<std::pair<double, double>> shapes;  // (kappa_m, weight)
  for (const TaskShape& t : all.shapes) {
    if (t.num_gpu == 0) continue;
    const double g = t.num_gpu * t.gpu_milli;
    shapes.push_back({static_cast<double>(t.cpu) / g + cpu_only_per_gpu, t.popularity * g / gpu});
  }
  std::sort(shapes.begin(), shapes.end());
  RatioBucket acc;
  double done = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto [kappa, w] = shapes[i];
    acc.weight += w;
    acc.gpu_per_cpu += w / std::max(kappa, 1e-9);  // a shape without CPU is never stranded
    done += w;
    if (i + 1 == shapes.size() ||
        done >= static_cast<double>(out.size() + 1) / static_cast<double>(kRatioBuckets)) {
      acc.gpu_per_cpu /= acc.weight;
      out.push_back(acc);
      acc = RatioBucket{};
    }
  }
  return out;
}

// The GPU shapes of `all` as at most about `max_classes` LP classes. Shapes are first split by
// GPU count and allowed models; each such kind gets classes in proportion to its share of the
// GPU requested (at least one), and its shapes, in order of CPU per GPU, are cut into that many
// runs of about equal GPU. A class's demand is its share of the GPU requested, its ratio the
// GPU-weighted mean of its shapes'. Equal-weight cuts keep the ratios' resolution the same
// whatever their scale, so no bin edge decides which shapes are one class.
std::vector<CapacityClass> LearnBalanceClasses(const TargetWorkload& all, int max_classes) {
  double total = 0;
  for (const TaskShape& t : all.shapes) total += t.popularity * t.num_gpu * t.gpu_milli;
  std::vector<CapacityClass> out;
  if (total <= 0) return out;
  struct Part {
    double ratio, share;
  };
  std::map<std::pair<int, ModelMask>, std::vector<Part>> kinds;
  for (const TaskShape& t : all.shapes) {
    if (t.num_gpu == 0) continue;
    const double g = static_cast<double>(t.num_gpu) * t.gpu_milli;
    kinds[{t.num_gpu, t.models}].push_back(
        {static_cast<double>(t.cpu) / g, t.popularity * g / total});
  }
  for (auto& [kind, parts] : kinds) {
    std::sort(parts.begin(), parts.end(),
              [](const Part& a, const Part& b) { return a.ratio < b.ratio; });
    double share = 0;
    for (const Part& p : parts) share += p.share;
    const int cuts = std::max(1, static_cast<int>(std::lround(share * max_classes)));
    CapacityClass c{kind.first, kind.second, 0, 0};
    double done = 0;
    int made = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      c.cpu_per_gpu += parts[i].ratio * parts[i].share;
      c.demand += parts[i].share;
      done += parts[i].share;
      if (i + 1 == parts.size() || done >= share * (made + 1) / cuts) {
        if (c.demand > 0) {
          c.cpu_per_gpu /= c.demand;
          out.push_back(c);
        }
        ++made;
        c = CapacityClass{kind.first, kind.second, 0, 0};
      }
    }
  }
  return out;
}

double FreeGpu(const ClusterState& state) {
  return static_cast<double>(state.gpu_capacity_milli() - state.gpu_allocated_milli());
}

using BalanceGroups = std::map<std::pair<GpuModelId, int>, CapacityGroup>;

// Adds a node with GPUs to its group (GPU model and count).
void AddToGroup(const NodeSpec& spec, const NodeFree& f, BalanceGroups& groups) {
  CapacityGroup& g = groups[{spec.model, spec.gpu_count}];
  g.model = spec.model;
  g.gpu_count = spec.gpu_count;
  g.free_gpu += f.gpu_total;
  g.free_cpu += static_cast<double>(f.cpu);
}

// Prices the free capacity of `groups` for the classes of `l` scaled to `fill_gpu` milli-GPU
// of demand.
void LearnBalancePrices(const BalanceGroups& groups, double fill_gpu, Learned& l) {
  std::vector<CapacityGroup> gv;
  gv.reserve(groups.size());
  for (const auto& [key, g] : groups) gv.push_back(g);
  std::vector<CapacityClass> cv = l.balance_classes;
  for (CapacityClass& c : cv) c.demand *= fill_gpu;
  l.balance = CapacityPrices::Solve(gv, cv);
}

class TesseraScorer final : public FragDescentScorer {
 public:
  TesseraScorer(const TesseraConfig& cfg, std::shared_ptr<Learned> learned, ScoreFn fn)
      : FragDescentScorer("tessera", TargetWorkload{}, std::move(fn), /*learn_online=*/true),
        cfg_(cfg),
        learned_(std::move(learned)) {
    set_past_false_alarm(cfg.past_false_alarm);
    set_mix_window(cfg.mix_window);
    enable_finish();
  }

 protected:
  TargetWorkload Learn(const ShapeTally& seen) override {
    if (seen.gpu_milli() > 0 && seen.cpu_milli() > 0) {
      learned_->kappa = seen.cpu_milli() / seen.gpu_milli();
    }
    std::vector<ShareCount> shares;
    for (const TaskShape& t : seen.Build(100.0).shapes) {
      if (t.num_gpu == 1 && t.gpu_milli < 1000) shares.push_back({t.gpu_milli, t.popularity});
    }
    learned_->prices = SharePrices::Solve(shares);
    learned_->all_shapes = seen.Build(100.0);
    learned_->pinned = LearnPinned(learned_->all_shapes);
    learned_->ratios = LearnRatios(learned_->all_shapes);
    if (cfg_.balance_weight > 0)
      learned_->balance_classes = LearnBalanceClasses(learned_->all_shapes, cfg_.balance_classes);
    learned_->last_delta_s.stamp = 0;
    learned_->gpu_tasks = seen.gpu_tasks();
    learned_->balance_stale = learned_->models_stale = true;
    return seen.Build(cfg_.coverage_pct);
  }

 public:
  void PreScore(const ClusterState& state, const Demand& d, std::span<const NodeIdx> feasible,
                Rng& rng) override {
    if (!learned_->balance_stale && cfg_.balance_weight > 0 && d.num_gpu > 0 &&
        cfg_.balance_resolve_fraction > 0) {
      // The prices follow the free capacity: a new solve once the cluster's free GPU or CPU
      // has moved by the fraction since the last one.
      const double tol = cfg_.balance_resolve_fraction;
      const double gpu = FreeGpu(state), cpu = static_cast<double>(state.free_cpu_milli());
      learned_->balance_stale =
          std::abs(gpu - learned_->balance_gpu) > tol * learned_->balance_gpu ||
          std::abs(cpu - learned_->balance_cpu) > tol * learned_->balance_cpu;
    }
    if (learned_->balance_stale && cfg_.balance_weight > 0) {
      double free_gpu = 0;
      BalanceGroups groups;
      for (NodeIdx n = 0; n < state.num_nodes(); ++n) {
        const NodeSpec& spec = state.spec(n);
        if (spec.gpu_count <= 0) continue;
        AddToGroup(spec, state.free(n), groups);
        if (spec.model < kModels) free_gpu += state.free(n).gpu_total;
      }
      // The mix to come is priced up to the free GPU: what the free CPU cannot feed is what
      // the LP's CPU prices are about.
      LearnBalancePrices(groups, free_gpu, *learned_);
      learned_->balance_gpu = FreeGpu(state);
      learned_->balance_cpu = static_cast<double>(state.free_cpu_milli());
      FinishChanged();
    }
    learned_->balance_stale = false;
    if (d.num_gpu > 0 && cfg_.scarcity_weight > 0) {
      PriceModels(state, /*force=*/learned_->models_stale);
      learned_->models_stale = false;
    }
    FragDescentScorer::PreScore(state, d, feasible, rng);
  }

  // x = the cached cost (every term but the model-scarcity loss) + the model-scarcity loss at
  // the prices of this decision.
  double Finish(double value, const NodeFree& f, const Demand& d) override {
    double x = -value;
    if (d.num_gpu > 0 && f.model < kModels && cfg_.scarcity_weight > 0) {
      x += cfg_.scarcity_weight * learned_->free_share *
           (learned_->model_price[f.model] - learned_->MinPrice(d.models)) *
           static_cast<double>(d.TotalMilliGpu());
    }
    if (d.num_gpu > 0 && cfg_.balance_weight > 0 && !learned_->balance.empty())
      x += cfg_.balance_weight * learned_->balance.Loss(f.model, f.gpu_count, d);
    return FgdIntegerScoreFast(x * 1000.0 / cfg_.score_temperature);
  }

 private:
  // Model prices and phi from the cluster's free capacity now (the ledger's totals).
  void PriceModels(const ClusterState& state, bool force) {
    std::array<double, kModels> capacity{};
    double free_gpu = 0;
    for (int m = 0; m < kModels; ++m) {
      capacity[m] = static_cast<double>(state.free_gpu_milli(static_cast<GpuModelId>(m)));
      free_gpu += capacity[m];
    }
    const double free_cpu = static_cast<double>(state.free_cpu_milli());
    const double total_cpu = static_cast<double>(state.cpu_capacity_milli());
    // The mix runs out of whichever of GPU and CPU binds first: at kappa milli-CPU per
    // milli-GPU, the free CPU carries free_cpu / kappa milli-GPU of further demand.
    const double fill =
        learned_->kappa > 0 ? std::min(free_gpu, free_cpu / learned_->kappa) : free_gpu;
    // The rule of three generalised: after n GPU tasks without a class, its share of them
    // is below -ln(1 - confidence) / n at that confidence.
    const double n = static_cast<double>(learned_->gpu_tasks);
    const double unseen = n >= 1 && cfg_.unseen_pinned_confidence > 0
                              ? std::min(1.0, -std::log1p(-cfg_.unseen_pinned_confidence) / n)
                              : 0.0;
    const std::array<double, kModels> next = ModelPrices(capacity, learned_->pinned, fill, unseen);
    // phi: the share of the cluster still free in whichever of GPU and CPU is scarcer, the
    // same binding resource that sizes the pinned demand above.
    double phi = state.gpu_capacity_milli() > 0
                     ? free_gpu / static_cast<double>(state.gpu_capacity_milli())
                     : 1.0;
    if (total_cpu > 0) phi = std::min(phi, free_cpu / total_cpu);
    // The prices in use move on when a re-learning changed the classes, when a model ran out
    // of free GPU or got some back (MinPrice skips models without), or when phi * p_m moved
    // enough to change a one-GPU workload's cost by reprice_tolerance steps of the score.
    bool move = force;
    double moved = 0;
    for (int m = 0; m < kModels; ++m) {
      move = move || (capacity[m] > 0) != (learned_->model_capacity[m] > 0);
      moved = std::max(moved,
                       std::abs(phi * next[m] - learned_->free_share * learned_->model_price[m]));
    }
    constexpr double kSteepestStep = 1.0 / 25.0;  // of T: the score's step around x = 0
    if (!move && moved * cfg_.scarcity_weight * 1000.0 <=
                     cfg_.reprice_tolerance * kSteepestStep * cfg_.score_temperature)
      return;
    learned_->model_price = next;
    learned_->model_capacity = capacity;
    learned_->free_share = phi;
    learned_->ForgetMinPrice();
    FinishChanged();
  }

 private:
  TesseraConfig cfg_;
  std::shared_ptr<Learned> learned_;
};

// S for a node with `cpu` milli-CPU and `idle` milli-GPU free.
double Stranded(double cpu, double idle, const Learned& l) {
  if (l.ratios.empty()) return std::max(0.0, idle - cpu / l.kappa);
  // gpu_per_cpu falls along the buckets, so the terms above 0 are a suffix: find its start,
  // then add in bucket order.
  size_t first = l.ratios.size();
  while (first > 0 && idle - cpu * l.ratios[first - 1].gpu_per_cpu > 0) --first;
  double s = 0;
  for (size_t i = first; i < l.ratios.size(); ++i)
    s += l.ratios[i].weight * (idle - cpu * l.ratios[i].gpu_per_cpu);
  return s;
}

}  // namespace

Status TesseraConfig::Validate() const {
  if (!(stranding_weight >= 0 && stranding_weight <= 100))
    return InvalidArgument("tessera: stranding_weight must be in [0, 100]");
  if (!(score_temperature > 0 && score_temperature <= 1e6))
    return InvalidArgument("tessera: score_temperature must be in (0, 1e6]");
  if (!(coverage_pct > 0 && coverage_pct <= 100))
    return InvalidArgument("tessera: coverage_pct must be in (0, 100]");
  if (!(packing_weight >= 0 && packing_weight <= 1000))
    return InvalidArgument("tessera: packing_weight must be in [0, 1000]");
  if (!(scarcity_weight >= 0 && scarcity_weight <= 100))
    return InvalidArgument("tessera: scarcity_weight must be in [0, 100]");
  if (!(reprice_tolerance >= 0 && reprice_tolerance <= 100))
    return InvalidArgument("tessera: reprice_tolerance must be in [0, 100]");
  if (!(unseen_pinned_confidence >= 0 && unseen_pinned_confidence < 1))
    return InvalidArgument("tessera: unseen_pinned_confidence must be in [0, 1)");
  if (!(balance_weight >= 0 && balance_weight <= 100))
    return InvalidArgument("tessera: balance_weight must be in [0, 100]");
  if (!(balance_classes >= 1 && balance_classes <= 256))
    return InvalidArgument("tessera: balance_classes must be in [1, 256]");
  if (!(balance_resolve_fraction >= 0 && balance_resolve_fraction <= 1))
    return InvalidArgument("tessera: balance_resolve_fraction must be in [0, 1]");
  if (!(past_false_alarm > 0 && past_false_alarm < 1))
    return InvalidArgument("tessera: past_false_alarm must be in (0, 1)");
  if (mix_window != 0 &&
      (mix_window < 16 || mix_window > (1 << 20) || (mix_window & (mix_window - 1)) != 0))
    return InvalidArgument("tessera: mix_window must be 0 or a power of two in [16, 1048576]");
  return Status::Ok();
}

std::unique_ptr<Scorer> MakeTesseraScorer(const TesseraConfig& cfg) {
  auto learned = std::make_shared<Learned>();
  auto fn = [cfg, learned](double delta, const NodeFree& f, const Demand& d, int gpu) {
    auto& memo = learned->last_delta_s;
    if (f.stamp == 0 || memo.stamp != f.stamp || memo.cpu != d.cpu.v ||
        memo.milli != d.TotalMilliGpu()) {
      const double before = Stranded(static_cast<double>(f.cpu), f.gpu_total, *learned);
      const double after = Stranded(static_cast<double>(f.cpu - d.cpu.v),
                                    static_cast<double>(f.gpu_total - d.TotalMilliGpu()), *learned);
      memo = {f.stamp, d.cpu.v, d.TotalMilliGpu(), after - before};
    }
    double x = delta + cfg.stranding_weight * memo.delta;
    if (gpu >= 0 && d.IsShare()) {
      x += cfg.packing_weight * 1000.0 * learned->prices.Loss(f.gpu[gpu], d.gpu_milli);
    }
    return -x;  // higher wins; TesseraScorer::Finish adds the scarcity and balance losses
  };
  return std::make_unique<TesseraScorer>(cfg, learned, std::move(fn));
}

}  // namespace tessera
