#include "policies/frag_descent.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "engine/gpu_select.h"

namespace tessera {

double FgdIntegerScore(double delta) {
  return std::trunc(100.0 / (1.0 + std::exp(delta / 1000.0)));
}

namespace {

// Buckets of 10 milli over (-4600, 4600): the score is 99 at or below -4600 (down to -36,000,
// past which 1 + exp rounds to 1 and it is 100) and 0 at or above 4600. Steps are at least
// 40 milli apart, so a bucket holds at most one: its score at the low end and where it drops.
struct ScoreSteps {
  static constexpr double kLo = -4600, kHi = 4600, kWidth = 10;
  static constexpr int kBuckets = 920;
  std::array<double, kBuckets> high{};  // score at the bucket's low end
  std::array<double, kBuckets> edge{};  // the score is high up to here, high - 1 above
  ScoreSteps() {
    for (int b = 0; b < kBuckets; ++b) {
      const double lo = kLo + b * kWidth;
      high[b] = FgdIntegerScore(lo);
      edge[b] = high[b] >= 1 ? 1000.0 * std::log(100.0 / high[b] - 1.0) : kHi;
    }
  }
};

}  // namespace

double FgdIntegerScoreFast(double delta) {
  static const ScoreSteps steps;
  if (delta <= ScoreSteps::kLo) return delta < -36000 ? FgdIntegerScore(delta) : 99;
  if (delta >= ScoreSteps::kHi) return 0;
  const int b = static_cast<int>((delta - ScoreSteps::kLo) / ScoreSteps::kWidth);
  return delta <= steps.edge[b] ? steps.high[b] : steps.high[b] - 1;
}

FragDescentScorer::FragDescentScorer(std::string name, TargetWorkload target, ScoreFn fn,
                                     bool learn_online)
    : name_(std::move(name)),
      model_(std::move(target)),
      fn_(std::move(fn)),
      learn_online_(learn_online) {}

namespace {

// The class of a workload for comparing samples of the mix (kMixClasses in all).
int MixClass(const Demand& d) {
  int kind;
  if (d.num_gpu == 0) {
    kind = 0;
  } else if (d.num_gpu == 1 && d.gpu_milli < 1000) {
    kind = 1 + std::clamp(d.gpu_milli / 250, 0, 3);
  } else if (d.num_gpu == 1) {
    kind = 5;
  } else {
    kind = d.num_gpu < 4 ? 6 : d.num_gpu < 8 ? 7 : 8;
  }
  return kind * 2 + (d.models != 0 ? 1 : 0);
}

// The CPU class of a GPU workload, after the shape classes: cores per GPU below 2, 2-4, 4-8,
// 8-16, 16-32, 32 and more (fixed edges: the test needs a partition chosen before the data).
int CpuClass(const Demand& d, int first) {
  const int64_t milli_gpu = d.TotalMilliGpu();
  int bin = 0;
  // cpu (milli) / milli-GPU = cores per GPU; compare cpu against 2^k cores per GPU.
  for (int64_t edge = 2; bin < 5 && d.cpu.v >= edge * milli_gpu; edge *= 2) ++bin;
  return first + bin;
}

}  // namespace

void FragDescentScorer::Observe(const Demand& d) {
  if (!learn_online_) return;
  seen_.Add(d);
  ++arrivals_n_;
  // Without a window limit, only a past still trusted needs the arrivals apart.
  if (window_limit_ == 0 && (past_n_ == 0 || past_forgotten_)) {
    RelearnWhenDue();
    return;
  }
  if (window_limit_ > 0) {
    window_.push_back(d);
  } else {
    window_tally_.Add(d);
  }
  ++window_classes_[MixClass(d)];
  ++window_n_;
  if (d.num_gpu > 0) {
    ++window_classes_[CpuClass(d, kMixClasses)];
    ++window_gpu_n_;
  }
  CheckWindow();
  RelearnWhenDue();
}

void FragDescentScorer::CheckWindow() {
  if (ref_n_ > 0 && window_n_ == next_check_) {
    next_check_ *= 2;
    if (!WindowAgrees()) {
      // The mix changed: forget everything before the window and learn from it alone.
      ++mix_changes_;
      if (past_n_ > 0) past_forgotten_ = true;
      seen_ = std::move(window_tally_);
      window_tally_ = ShapeTally();
      for (const Demand& w : window_) seen_.Add(w);
      next_relearn_ = seen_.tasks();
      ref_classes_ = window_classes_;
      ref_n_ = window_limit_ > 0 ? window_n_ : 0;
      ref_gpu_n_ = window_limit_ > 0 ? window_gpu_n_ : 0;
      ClearWindow();
      return;
    }
  }
  // A window as long as the reference, up to the limit: the reference doubles from 16
  // arrivals on, so a change is found early in a run too.
  if (window_limit_ > 0 && window_n_ >= std::min(window_limit_, std::max<int64_t>(16, ref_n_))) {
    for (size_t k = 0; k < ref_classes_.size(); ++k) ref_classes_[k] += window_classes_[k];
    ref_n_ += window_n_;
    ref_gpu_n_ += window_gpu_n_;
    ClearWindow();
  }
}

void FragDescentScorer::ClearWindow() {
  window_.clear();
  window_classes_ = {};
  window_n_ = 0;
  window_gpu_n_ = 0;
  next_check_ = 16;
}

void FragDescentScorer::RelearnWhenDue() {
  if (seen_.tasks() < next_relearn_) return;
  Relearn();
  // Re-learn at doubling counts while the estimate is young, then every kRelearnEvery.
  next_relearn_ = seen_.tasks() < kRelearnEvery ? seen_.tasks() * 2 : seen_.tasks() + kRelearnEvery;
}

void FragDescentScorer::ObservePast(const Demand& d) {
  if (!learn_online_ || past_forgotten_) return;
  if (arrivals_n_ > 0) {  // the past comes first; once arrivals began, it is one of them
    Observe(d);
    return;
  }
  ++ref_classes_[MixClass(d)];
  ++ref_n_;
  if (d.num_gpu > 0) {
    ++ref_classes_[CpuClass(d, kMixClasses)];
    ++ref_gpu_n_;
  }
  ++past_n_;
  seen_.Add(d);
  RelearnWhenDue();
}

bool FragDescentScorer::WindowAgrees() const {
  // P(||p_hat - p||_1 >= eps) <= 2^k exp(-n eps^2 / 2) for n draws over k classes: in each of
  // the two tests, each sample is within eps of the common distribution except with
  // probability rate / 4.
  auto distant = [&](int first, int classes, int64_t ref_n, int64_t window_n) {
    if (ref_n == 0 || window_n == 0) return false;
    auto eps = [&](int64_t n) {
      return std::sqrt(2.0 * (classes * std::log(2.0) + std::log(4.0 / past_false_alarm_)) /
                       static_cast<double>(n));
    };
    double l1 = 0;
    for (int k = first; k < first + classes; ++k) {
      l1 += std::abs(static_cast<double>(ref_classes_[k]) / static_cast<double>(ref_n) -
                     static_cast<double>(window_classes_[k]) / static_cast<double>(window_n));
    }
    return l1 > eps(ref_n) + eps(window_n);
  };
  return !distant(0, kMixClasses, ref_n_, window_n_) &&
         !distant(kMixClasses, kCpuClasses, ref_gpu_n_, window_gpu_n_);
}

void FragDescentScorer::Relearn() {
  FragModel next(Learn(seen_));
  next.KeepCounts(model_);
  model_ = std::move(next);
  alike_.clear();
  if (++gen_ == 0) {
    for (auto& c : cache_) std::fill(c.begin(), c.end(), Entry{});
    gen_ = 1;
  }
}

void FragDescentScorer::PreScore(const ClusterState& state, const Demand& d,
                                 std::span<const NodeIdx>, Rng&) {
  const ShapeKey key{d.cpu.v, d.num_gpu, d.gpu_milli, d.models};
  auto it = shape_ids_.find(key);
  if (it == shape_ids_.end()) {
    if (shape_ids_.size() >= kMaxCachedShapes) {
      current_ = nullptr;
      return;
    }
    it = shape_ids_.emplace(key, static_cast<uint32_t>(cache_.size())).first;
    cache_.emplace_back();
  }
  current_id_ = it->second;
  current_ = &cache_[it->second];
  if (current_->size() < state.num_nodes()) current_->resize(state.num_nodes());
  if (finish_) {
    if (finished_.size() < cache_.size()) finished_.resize(cache_.size());
    current_finished_ = &finished_[it->second];
    if (current_finished_->size() < state.num_nodes()) current_finished_->resize(state.num_nodes());
  }
}

NodeScore FragDescentScorer::Score(const ClusterState& state, NodeIdx n, const Demand& d) {
  const NodeFree& f = state.free(n);
  if (current_ == nullptr) {
    NodeScore s = Evaluate(f, d, n);
    if (finish_) s.score = Finish(s.score, f, d);
    return s;
  }
  Entry& e = (*current_)[n];
  Alike* alike = nullptr;
  bool fresh = false;
  if (e.gen == gen_ && e.stamp != f.stamp) {
    // The node changed since this shape last scored it: its new state is rarely shared.
    const NodeScore s = Evaluate(f, d, n);
    e = {f.stamp, static_cast<float>(s.score), static_cast<uint16_t>(s.gpus), gen_};
    fresh = true;
  } else if (e.gen != gen_) {
    NodeKey key{current_id_, f.model, f.gpu_count, f.cpu, {}};
    std::copy(f.gpu.begin(), f.gpu.begin() + f.gpu_count, key.gpu.begin());
    if (alike_.size() >= kMaxAlike) alike_.clear();
    auto [it, added] = alike_.try_emplace(key);
    if (added) it->second.score = Evaluate(f, d, n);
    e = {f.stamp, static_cast<float>(it->second.score.score),
         static_cast<uint16_t>(it->second.score.gpus), gen_};
    alike = &it->second;
    fresh = true;
  }
  if (!finish_) return {e.score, e.gpus};
  Finished& fin = (*current_finished_)[n];
  if (fresh || fin.gen != finish_gen_) {
    if (alike != nullptr) {
      // Alike nodes share the model the finish may depend on, so they share its result too.
      Alike& a = *alike;
      if (a.finish_gen != finish_gen_) {
        a.final = static_cast<float>(Finish(e.score, f, d));
        a.finish_gen = finish_gen_;
      }
      fin = {finish_gen_, a.final};
    } else {
      fin = {finish_gen_, static_cast<float>(Finish(e.score, f, d))};
    }
  }
  return {fin.final, e.gpus};
}

void FragDescentScorer::FinishChanged() {
  if (++finish_gen_ == 0) {
    for (auto& c : finished_)
      for (Finished& x : c) x.gen = 0;
    for (auto& [key, a] : alike_) a.finish_gen = 0;
    finish_gen_ = 1;
  }
}

size_t FragDescentScorer::NodeKeyHash::operator()(const NodeKey& k) const {
  uint64_t h =
      (static_cast<uint64_t>(k.shape) << 16 | static_cast<uint64_t>(k.model) << 8 | k.gpu_count) *
      0x9e3779b97f4a7c15ULL;
  h ^= static_cast<uint64_t>(k.cpu) + 0x632be59bd9b4e019ULL + (h << 6) + (h >> 2);
  for (int g = 0; g < k.gpu_count; ++g)
    h ^= static_cast<uint64_t>(static_cast<uint16_t>(k.gpu[g])) + 0x85ebca6bULL + (h << 6) +
         (h >> 2);
  return h;
}

NodeScore FragDescentScorer::Evaluate(const NodeFree& f, const Demand& d, NodeIdx n) {
  if (model_.empty()) {
    // Nothing learned yet: fall back to best-fit GPU choice with a neutral score.
    return {fn_(0.0, f, d, -1), SelectBestFit(f, d)};
  }
  model_.Load(f, n);
  const double before = model_.loaded_frag();
  if (d.IsShare()) {
    bool have = false;
    NodeScore best;
    for (int g = 0; g < f.gpu_count; ++g) {
      const int r = f.gpu[g];
      if (r < d.gpu_milli) continue;
      bool dup = false;
      for (int h = 0; h < g && !dup; ++h) dup = f.gpu[h] == r;
      if (dup) continue;
      const double delta = model_.After(d.cpu.v, r, r - d.gpu_milli, 1) - before;
      const double s = fn_(delta, f, d, g);
      if (!have || s > best.score) {
        have = true;
        best = {s, GpuMask{1} << g};
      }
    }
    return best;
  }
  const double delta = d.IsCpuOnly() ? model_.After(d.cpu.v, 0, 0, 0) - before
                                     : model_.After(d.cpu.v, 1000, 0, d.num_gpu) - before;
  return {fn_(delta, f, d, -1), SelectFirstFit(f, d)};
}

}  // namespace tessera
