#include "sharing/inference_planner.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <unordered_map>
#include <utility>

namespace tessera {
namespace {

constexpr int kMaxClasses = 8;  // distinct instance sizes (compute slices) on one GPU
constexpr int kBits = 8;        // bits per size in a count key
constexpr int kMaxCount = (1 << kBits) - 1;

using Counts = std::array<int, kMaxClasses>;

uint64_t Key(const Counts& c) {
  uint64_t key = 0;
  for (int i = 0; i < kMaxClasses; ++i) key |= static_cast<uint64_t>(c[i]) << (kBits * i);
  return key;
}

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// Instance sizes the planner uses: per compute-slice count, the profile with the fewest memory
// slices (no media extensions).
struct SizeClasses {
  std::vector<int> gpcs;         // ascending
  std::vector<int> profile;      // geometry profile index per class
  std::array<int, 8> of_gpcs{};  // class index by compute slices, -1 if none

  explicit SizeClasses(const MigGeometry& geo) {
    of_gpcs.fill(-1);
    for (int c = 1; c <= std::min(geo.compute_slices, 7); ++c) {
      int best = -1;
      for (int p = 0; p < static_cast<int>(geo.profiles.size()); ++p) {
        const MigProfile& prof = geo.profiles[p];
        if (prof.compute_slices != c || prof.media_extensions) continue;
        if (best < 0 || prof.memory_slices < geo.profiles[best].memory_slices ||
            (prof.memory_slices == geo.profiles[best].memory_slices &&
             prof.name < geo.profiles[best].name))
          best = p;
      }
      if (best < 0) continue;
      of_gpcs[c] = static_cast<int>(gpcs.size());
      gpcs.push_back(c);
      profile.push_back(best);
    }
  }
  int size() const { return static_cast<int>(gpcs.size()); }
  int ClassOfProfile(int p) const {
    for (int i = 0; i < size(); ++i) {
      if (profile[i] == p) return i;
    }
    return -1;
  }
};

struct Pattern {
  Counts counts{};
  MigLayout layout;  // a legal layout with exactly these counts
};

// Every legal layout made of the size classes, by count vector. Among layouts with the same
// counts, the one that leaves room for the most compute slices in a legal extension, then the
// one on the lowest memory slices (smallest memory mask), then the first in enumeration order.
std::map<uint64_t, Pattern> LayoutsByCounts(const MigGeometry& geo, const SizeClasses& classes,
                                            bool single_3g) {
  std::vector<Pattern> all;
  for (const MigLayout& layout : EnumerateMigLayouts(geo, false)) {
    Pattern p;
    p.layout = layout;
    bool usable = true;
    for (const MigInstance& in : layout) {
      const int c = classes.ClassOfProfile(in.profile);
      if (c < 0) {
        usable = false;
        break;
      }
      ++p.counts[c];
    }
    if (single_3g && classes.of_gpcs[3] >= 0 && p.counts[classes.of_gpcs[3]] > 1) usable = false;
    if (usable) all.push_back(std::move(p));
  }
  std::vector<MigLayout> sorted;
  std::vector<int> compute;
  for (const Pattern& p : all) {
    sorted.push_back(p.layout);
    std::sort(sorted.back().begin(), sorted.back().end());
    compute.push_back(MigComputeUsed(geo, p.layout));
  }
  std::map<uint64_t, Pattern> by_key;
  std::map<uint64_t, std::pair<int, uint32_t>> rank;  // (-extension compute, memory mask)
  for (size_t i = 0; i < all.size(); ++i) {
    int extension = 0;
    for (size_t j = 0; j < all.size(); ++j) {
      if (compute[j] > extension &&
          std::includes(sorted[j].begin(), sorted[j].end(), sorted[i].begin(), sorted[i].end()))
        extension = compute[j];
    }
    const uint64_t key = Key(all[i].counts);
    const std::pair<int, uint32_t> r{-extension, MigMemoryMask(geo, all[i].layout)};
    auto it = rank.find(key);
    if (it == rank.end() || r < it->second) {
      rank[key] = r;
      by_key[key] = all[i];
    }
  }
  return by_key;
}

// The count vectors no other legal count vector dominates.
std::vector<Pattern> MaximalPatterns(const std::map<uint64_t, Pattern>& by_key) {
  std::vector<Pattern> out;
  for (const auto& [key, p] : by_key) {
    bool dominated = false;
    for (const auto& [other_key, q] : by_key) {
      if (other_key == key) continue;
      bool ge = true;
      for (int c = 0; c < kMaxClasses; ++c) ge = ge && q.counts[c] >= p.counts[c];
      if (ge) {
        dominated = true;
        break;
      }
    }
    if (!dominated) out.push_back(p);
  }
  return out;
}

// Fewest GPUs whose layouts (each a maximal pattern, possibly partly empty) hold `n` instances
// of each size. Exact: the largest remaining instance must sit on some GPU, so branch over the
// patterns that contain its size. Memoised on the counts.
class Packer {
 public:
  explicit Packer(std::vector<Pattern> patterns) : patterns_(std::move(patterns)) {}

  int MinGpus(const Counts& n) {
    int top = -1;
    for (int c = kMaxClasses - 1; c >= 0 && top < 0; --c) {
      if (n[c] > 0) top = c;
    }
    if (top < 0) return 0;
    const uint64_t key = Key(n);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second.gpus;
    Entry best{std::numeric_limits<int>::max() / 2, -1};
    for (int p = 0; p < static_cast<int>(patterns_.size()); ++p) {
      if (patterns_[p].counts[top] == 0) continue;
      const int gpus = 1 + MinGpus(Rest(n, p));
      if (gpus < best.gpus) best = {gpus, p};
    }
    memo_[key] = best;
    return best.gpus;
  }

  // A minimum cover: per GPU, the instances of each size it holds.
  std::vector<Counts> Cover(Counts n) {
    std::vector<Counts> out;
    while (MinGpus(n) > 0) {
      const int p = memo_.at(Key(n)).pattern;
      Counts used{};
      for (int c = 0; c < kMaxClasses; ++c) used[c] = std::min(n[c], patterns_[p].counts[c]);
      out.push_back(used);
      n = Rest(n, p);
    }
    return out;
  }

  bool empty() const { return patterns_.empty(); }

 private:
  struct Entry {
    int gpus;
    int pattern;
  };
  Counts Rest(const Counts& n, int p) const {
    Counts r{};
    for (int c = 0; c < kMaxClasses; ++c) r[c] = std::max(0, n[c] - patterns_[p].counts[c]);
    return r;
  }
  std::vector<Pattern> patterns_;
  std::unordered_map<uint64_t, Entry> memo_;
};

struct Option {
  Counts n{};
  int gpcs = 0;
  double capacity = 0;
  double margin = 0;
};

struct Work {
  int service = 0;
  std::array<int, kMaxClasses> row{};  // best eligible row per class, -1 if none
  std::array<double, kMaxClasses> cap{};
  int min_gpcs = 0;
  int lower_bound = 0;
  std::vector<Option> options;
};

const InferenceProfile* FindProfile(const std::vector<InferenceProfile>& profiles,
                                    const std::string& model) {
  for (const InferenceProfile& p : profiles) {
    if (p.model == model) return &p;
  }
  return nullptr;
}

// Minimal multisets (no segment removable) covering `rate` with at most `max_gpcs` GPCs, sorted
// by GPCs. Capacities are summed largest size first, the order every capacity here uses.
// Returns false if the enumeration budget ran out.
bool EnumerateOptions(Work& w, const SizeClasses& classes, double rate, int max_gpcs, int budget) {
  w.options.clear();
  const int k = classes.size();
  std::vector<double> best_per_gpc(k + 1, 0.0);  // best capacity per GPC among classes < c
  for (int c = 0; c < k; ++c)
    best_per_gpc[c + 1] = std::max(best_per_gpc[c], w.cap[c] / classes.gpcs[c]);
  Counts n{};
  bool complete = true;
  auto rec = [&](auto&& self, int c, int gpcs, double cap) -> void {
    if (!complete) return;
    if (cap >= rate) {
      for (int j = 0; j < k; ++j) {
        if (n[j] > 0 && cap - w.cap[j] >= rate) return;
      }
      if (static_cast<int>(w.options.size()) >= budget) {
        complete = false;
        return;
      }
      w.options.push_back({n, gpcs, cap, (cap - rate) / rate});
      return;
    }
    if (c < 0) return;
    if (cap + (max_gpcs - gpcs) * best_per_gpc[c + 1] < rate) return;
    double run = cap;
    int used = gpcs;
    for (int m = 0;; ++m) {
      n[c] = m;
      self(self, c - 1, used, run);
      if (w.cap[c] <= 0 || run >= rate || used + classes.gpcs[c] > max_gpcs || m >= kMaxCount)
        break;
      run += w.cap[c];
      used += classes.gpcs[c];
    }
    n[c] = 0;
  };
  rec(rec, k - 1, 0, 0.0);
  std::sort(w.options.begin(), w.options.end(), [](const Option& a, const Option& b) {
    if (a.gpcs != b.gpcs) return a.gpcs < b.gpcs;
    if (a.capacity != b.capacity) return a.capacity > b.capacity;
    return Key(a.n) < Key(b.n);
  });
  return complete;
}

struct State {
  Counts n{};
  int gpcs = 0;
  double margin = 0;
  int prev = -1;
  int option = -1;
};

bool Better(const State& a, const State& b) {
  if (a.gpcs != b.gpcs) return a.gpcs < b.gpcs;
  if (a.margin != b.margin) return a.margin > b.margin;
  int sa = 0, sb = 0;
  for (int c = 0; c < kMaxClasses; ++c) sa += a.n[c], sb += b.n[c];
  if (sa != sb) return sa < sb;
  return Key(a.n) < Key(b.n);
}

std::string InfeasibleReason(const InferenceProfile& prof, const InferenceService& s,
                             const SizeClasses& classes, const InferencePlanOptions& opt) {
  double fastest = -1;
  for (const InferenceProfileRow& r : prof.rows) {
    if (!r.measured || r.procs > opt.max_procs || r.gpcs < 1 || r.gpcs > 7 ||
        classes.of_gpcs[r.gpcs] < 0)
      continue;
    if (fastest < 0 || r.latency_s < fastest) fastest = r.latency_s;
  }
  if (fastest < 0)
    return "no measured profile row fits a " + opt.gpu_model + " MIG instance with at most " +
           std::to_string(opt.max_procs) + " processes";
  const double l = std::trunc(s.slo_ms);
  return "no profiled configuration meets the latency rule: it needs < " +
         Fmt("%g", 0.9 * l / 2.0) + " ms (0.9 x " + Fmt("%.0f", l) +
         " ms / 2), the fastest row takes " + Fmt("%g", fastest * 1000.0) + " ms";
}

}  // namespace

bool InferenceRowEligible(double latency_s, double slo_ms) {
  return latency_s * 1000.0 < 0.9 * std::trunc(slo_ms) / 2.0;
}

Result<InferencePlan> PlanInference(const std::vector<InferenceProfile>& profiles,
                                    const std::vector<InferenceService>& services,
                                    const InferencePlanOptions& opt) {
  const MigGeometry* geo = MigGeometryFor(opt.gpu_model);
  if (geo == nullptr)
    return InvalidArgument("GPU model '" + opt.gpu_model + "' has no MIG geometry");
  if (opt.max_procs < 1 || opt.max_gpus < 1 || opt.max_options_per_service < 1 ||
      opt.max_states_per_step < 1)
    return InvalidArgument("planner limits must be positive");
  const SizeClasses classes(*geo);
  const int k = classes.size();
  const int per_gpu = geo->compute_slices;

  InferencePlan plan;
  plan.gpu_model = opt.gpu_model;
  plan.services.resize(services.size());
  std::vector<Work> work;
  int sum_min = 0, sum_lb = 0;
  for (size_t i = 0; i < services.size(); ++i) {
    const InferenceService& s = services[i];
    InferenceServicePlan& out = plan.services[i];
    out.model = s.model;
    out.rate = s.rate;
    out.slo_ms = s.slo_ms;
    if (!std::isfinite(s.rate) || s.rate <= 0)
      return InvalidArgument("service '" + s.model + "': rate must be positive and finite");
    if (!std::isfinite(s.slo_ms) || s.slo_ms <= 0)
      return InvalidArgument("service '" + s.model + "': latency SLO must be positive and finite");
    const InferenceProfile* prof = FindProfile(profiles, s.model);
    if (prof == nullptr) return InvalidArgument("service '" + s.model + "': no profile");

    Work w;
    w.service = static_cast<int>(i);
    w.row.fill(-1);
    for (int r = 0; r < static_cast<int>(prof->rows.size()); ++r) {
      const InferenceProfileRow& row = prof->rows[r];
      if (!row.measured || row.procs < 1 || row.procs > opt.max_procs || row.gpcs < 1 ||
          row.gpcs > 7 || !(row.throughput > 0) || !InferenceRowEligible(row.latency_s, s.slo_ms))
        continue;
      const int c = classes.of_gpcs[row.gpcs];
      if (c < 0) continue;
      const double cap = row.throughput * row.procs;
      const InferenceProfileRow* cur = w.row[c] < 0 ? nullptr : &prof->rows[w.row[c]];
      if (cur == nullptr || cap > w.cap[c] || (cap == w.cap[c] && row.latency_s < cur->latency_s)) {
        w.row[c] = r;
        w.cap[c] = cap;
      }
    }
    double best_per_gpc = 0;
    for (int c = 0; c < k; ++c) best_per_gpc = std::max(best_per_gpc, w.cap[c] / classes.gpcs[c]);
    if (best_per_gpc <= 0) {
      out.reason = InfeasibleReason(*prof, s, classes, opt);
      continue;
    }
    // Fewest GPCs covering the rate: unbounded knapsack over GPC counts.
    const int limit = opt.max_gpus * per_gpu;
    std::vector<double> best(1, 0.0);
    while (best.back() < s.rate) {
      const int x = static_cast<int>(best.size());
      if (x > limit)
        return ResourceExhausted("service '" + s.model + "' needs more than " +
                                 std::to_string(opt.max_gpus) + " GPUs");
      double b = best.back();
      for (int c = 0; c < k; ++c) {
        if (w.row[c] >= 0 && classes.gpcs[c] <= x)
          b = std::max(b, best[x - classes.gpcs[c]] + w.cap[c]);
      }
      best.push_back(b);
    }
    w.min_gpcs = static_cast<int>(best.size()) - 1;
    w.lower_bound = static_cast<int>(std::ceil(s.rate / best_per_gpc));
    out.min_gpcs = w.min_gpcs;
    out.gpc_lower_bound = w.lower_bound;
    sum_min += w.min_gpcs;
    sum_lb += w.lower_bound;
    work.push_back(std::move(w));
  }
  plan.gpu_lower_bound = (sum_lb + per_gpu - 1) / per_gpu;
  plan.gpu_lower_bound_whole_segments = (sum_min + per_gpu - 1) / per_gpu;

  const std::map<uint64_t, Pattern> layouts = LayoutsByCounts(*geo, classes, opt.single_3g_per_gpu);
  Packer packer(MaximalPatterns(layouts));
  if (packer.empty()) return Internal(opt.gpu_model + ": no usable MIG layout");

  std::vector<std::vector<State>> steps;
  int gpus = std::max(plan.gpu_lower_bound_whole_segments, work.empty() ? 0 : 1);
  for (;; ++gpus) {
    if (gpus > opt.max_gpus)
      return ResourceExhausted("the services need more than " + std::to_string(opt.max_gpus) +
                               " GPUs");
    const int budget = gpus * per_gpu;
    steps.assign(1, {State{Counts{}, 0, std::numeric_limits<double>::infinity(), -1, -1}});
    int rest = sum_min;
    for (Work& w : work) {
      const InferenceService& s = services[w.service];
      if (!EnumerateOptions(w, classes, s.rate, w.min_gpcs + budget - sum_min,
                            opt.max_options_per_service))
        plan.exact = false;
      rest -= w.min_gpcs;
      const std::vector<State>& prev = steps.back();
      std::vector<State> next;
      std::unordered_map<uint64_t, int> index;  // -1: cannot be packed on `gpus` GPUs
      for (int p = 0; p < static_cast<int>(prev.size()); ++p) {
        for (int o = 0; o < static_cast<int>(w.options.size()); ++o) {
          const Option& opt_o = w.options[o];
          State st;
          st.gpcs = prev[p].gpcs + opt_o.gpcs;
          if (st.gpcs + rest > budget) break;
          bool fits = true;
          for (int c = 0; c < kMaxClasses; ++c) {
            st.n[c] = prev[p].n[c] + opt_o.n[c];
            fits = fits && st.n[c] <= kMaxCount;
          }
          if (!fits) continue;
          st.margin = std::min(prev[p].margin, opt_o.margin);
          st.prev = p;
          st.option = o;
          const uint64_t key = Key(st.n);
          if (auto it = index.find(key); it != index.end()) {
            if (it->second >= 0 && st.margin > next[it->second].margin) next[it->second] = st;
            continue;
          }
          if (packer.MinGpus(st.n) > gpus) {
            index.emplace(key, -1);
            continue;
          }
          index.emplace(key, static_cast<int>(next.size()));
          next.push_back(st);
        }
      }
      if (static_cast<int>(next.size()) > opt.max_states_per_step) {
        std::sort(next.begin(), next.end(), Better);
        next.resize(opt.max_states_per_step);
        plan.exact = false;
      }
      plan.states += static_cast<int64_t>(next.size());
      steps.push_back(std::move(next));
      if (steps.back().empty()) break;
    }
    if (!steps.back().empty()) break;
  }

  // The best final state, and the option each service took on the way to it.
  const std::vector<State>& last = steps.back();
  int at = 0;
  for (int i = 1; i < static_cast<int>(last.size()); ++i) {
    if (Better(last[i], last[at])) at = i;
  }
  std::vector<int> chosen(work.size());
  for (int step = static_cast<int>(work.size()); step > 0; --step) {
    const State& st = steps[step][at];
    chosen[step - 1] = st.option;
    at = st.prev;
  }
  Counts total{};
  for (size_t i = 0; i < work.size(); ++i) {
    for (int c = 0; c < k; ++c) total[c] += work[i].options[chosen[i]].n[c];
  }

  // Lay out the GPUs and list the slots of each size in (gpu, start) order.
  std::vector<std::vector<std::pair<int, int>>> slots(k);  // (gpu, start)
  for (const Counts& used : packer.Cover(total)) {
    const int gpu = static_cast<int>(plan.gpu_layouts.size());
    const auto found = layouts.find(Key(used));
    if (found == layouts.end()) return Internal("no layout for a packed GPU");
    MigLayout layout = found->second.layout;
    for (const MigInstance& in : layout)
      slots[classes.ClassOfProfile(in.profile)].emplace_back(gpu, in.start);
    std::sort(layout.begin(), layout.end(), [](const MigInstance& a, const MigInstance& b) {
      return std::pair(a.start, a.profile) < std::pair(b.start, b.profile);
    });
    Status legal = CheckMigLayout(*geo, layout);
    if (!legal.ok()) return Internal("planned layout is not legal: " + legal.message());
    plan.gpu_layouts.push_back(std::move(layout));
  }
  plan.gpus = static_cast<int>(plan.gpu_layouts.size());
  for (auto& s : slots) std::sort(s.begin(), s.end());

  for (int c = k - 1; c >= 0; --c) {
    size_t next_slot = 0;
    for (size_t i = 0; i < work.size(); ++i) {
      const Work& w = work[i];
      const InferenceProfile* prof = FindProfile(profiles, services[w.service].model);
      const int copies = w.options[chosen[i]].n[c];
      for (int m = 0; m < copies; ++m) {
        if (next_slot >= slots[c].size()) return Internal("packing lost a segment");
        const InferenceProfileRow& row = prof->rows[w.row[c]];
        InferenceSegment seg;
        seg.gpu = slots[c][next_slot].first;
        seg.start = slots[c][next_slot].second;
        ++next_slot;
        seg.profile = classes.profile[c];
        seg.profile_name = geo->profiles[seg.profile].name;
        seg.gpcs = classes.gpcs[c];
        seg.batch = row.batch;
        seg.procs = row.procs;
        seg.throughput = row.throughput;
        seg.latency_ms = row.latency_s * 1000.0;
        plan.services[w.service].segments.push_back(std::move(seg));
      }
    }
  }

  plan.all_slo_met = true;
  for (InferenceServicePlan& sp : plan.services) {
    std::sort(sp.segments.begin(), sp.segments.end(),
              [](const InferenceSegment& a, const InferenceSegment& b) {
                return std::pair(a.gpu, a.start) < std::pair(b.gpu, b.start);
              });
    for (const InferenceSegment& seg : sp.segments) {
      sp.capacity += seg.capacity();
      sp.gpcs += seg.gpcs;
      sp.max_latency_ms = std::max(sp.max_latency_ms, seg.latency_ms);
    }
    plan.gpcs_used += sp.gpcs;
    sp.slo_met = sp.reason.empty() && sp.capacity >= sp.rate;
    if (sp.reason.empty() && !sp.slo_met) sp.reason = "capacity below the rate";
    sp.margin_pct = 100.0 * (sp.capacity - sp.rate) / sp.rate;
    plan.all_slo_met = plan.all_slo_met && sp.slo_met;
  }
  return plan;
}

}  // namespace tessera
