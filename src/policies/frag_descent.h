// Shared machinery of the fragmentation-descent policies (fgd, tessera): for a demand and a
// node, evaluates every distinct GPU choice by the change of the node's fragmentation
// Delta F = F_after - F_before (milli-GPU), and caches results per (demand shape, node stamp).
//
// Share demands try each GPU with enough free share (GPUs with equal free share are one
// choice; the lowest index represents them). Whole-GPU demands take the lowest-index fully free
// GPUs; CPU-only demands change only CPU. Not thread-safe.
#pragma once

#include <array>
#include <functional>
#include <unordered_map>
#include <vector>

#include "engine/policy.h"
#include "policies/frag.h"

namespace tessera {

class FragDescentScorer : public Scorer {
 public:
  // Maps a candidate's Delta F (and the node, for tie-break terms) to a score; higher wins.
  // Among candidates of one node the first with the highest score is kept. It must depend on
  // the node only through its free CPU, GPU model and per-GPU free shares (it may use the
  // stamp to remember work): nodes alike in those share one evaluation.
  using ScoreFn = std::function<double(double delta, const NodeFree& f, const Demand& d, int gpu)>;

  FragDescentScorer(std::string name, TargetWorkload target, ScoreFn fn, bool learn_online);

  std::string_view name() const override { return name_; }
  // Online learners compare what they learned with what arrives, to follow a mix that changes.
  // The reference is the sample the mix was learned from (the past, then the arrivals
  // accepted into it); the window is the arrivals since the reference was last extended. At
  // window sizes 16, 32, 64, ... the class frequencies of the two are compared twice: all
  // workloads by shape (CPU-only; shares by quarter; one, 2-3, 4-7 and 8+ GPUs; each pinned or
  // not), and the GPU workloads by cores per GPU (below 2, 2-4, 4-8, 8-16, 16-32, 32 and
  // more). When either L1 distance exceeds what sampling explains at the false-alarm rate
  // (Bretagnolle-Huber-Carol bound, per sample and test, at a quarter of the rate each; a
  // union bound over the two tests), the mix has changed: everything before the
  // window is forgotten and the mix is re-learned from the window alone, which becomes the
  // reference. A window that agrees joins the reference once it is as long as the reference
  // (at least 16 arrivals) or the window limit, whichever is shorter: without a past the first
  // 16 arrivals are the reference, which then doubles up to the limit. Without a reference
  // (the first 16 arrivals of a run without a past) nothing is compared.
  void Observe(const Demand& d) override;
  // A workload of the past, seen before the first arrival: it joins the reference and the
  // learned mix. Once the arrivals have disagreed with it, more past is ignored. Policies that
  // do not learn online ignore it.
  void ObservePast(const Demand& d) override;
  bool past_forgotten() const { return past_forgotten_; }
  // Changes of the mix detected so far (a past forgotten counts as one).
  int64_t mix_changes() const override { return mix_changes_; }
  void PreScore(const ClusterState& state, const Demand& d, std::span<const NodeIdx> feasible,
                Rng& rng) override;
  NodeScore Score(const ClusterState& state, NodeIdx n, const Demand& d) override;

  const FragModel& model() const { return model_; }

 protected:
  // Learns the target workload from the shapes seen so far; called at 1, 2, 4, ... arrivals
  // and then every kRelearnEvery arrivals. Default: the shapes covering 95% of tasks.
  virtual TargetWorkload Learn(const ShapeTally& seen) { return seen.Build(95.0); }
  // The chance, per comparison, of forgetting a reference that the arrivals do agree with.
  void set_past_false_alarm(double rate) { past_false_alarm_ = rate; }
  // The window limit (a power of two, at least 16), or 0: the window never joins the
  // reference, so only a past is compared with the arrivals (all of them, at 16, 32, 64, ...),
  // and once it is forgotten nothing more is compared.
  void set_mix_window(int64_t limit) { window_limit_ = limit; }
  // With a finish, the cache holds ScoreFn's value and Score returns Finish(value, node,
  // demand), itself remembered until FinishChanged(): a node-level term that can change
  // without a new evaluation of the node. ScoreFn still picks the GPU within a node, so the
  // finish must not depend on the GPU.
  void enable_finish() { finish_ = true; }
  virtual double Finish(double value, const NodeFree&, const Demand&) { return value; }
  void FinishChanged();

 private:
  // 16 bytes. Scores are stored as float: score functions return small integers (exact), or,
  // with a finish, costs in milli-GPU whose rounding is far below the finish's resolution.
  struct Entry {
    uint64_t stamp = 0;
    float score = 0;
    uint16_t gpus = 0;
    uint16_t gen = 0;
  };
  // With a finish: the Finish of an Entry's score, beside it (a policy without one pays nothing).
  struct Finished {
    uint32_t gen = 0;  // the finish_gen_ it was computed at; 0 = none
    float final = 0;
  };
  static_assert(kMaxGpusPerNode <= 16, "Entry::gpus holds a 16-GPU mask");
  struct ShapeKey {
    int64_t cpu;
    int num_gpu;
    int gpu_milli;
    ModelMask models;
    bool operator==(const ShapeKey&) const = default;
  };
  struct ShapeHash {
    size_t operator()(const ShapeKey& k) const {
      uint64_t h = static_cast<uint64_t>(k.cpu) * 0x9e3779b97f4a7c15ULL;
      h ^= (static_cast<uint64_t>(k.num_gpu) << 32 | static_cast<uint32_t>(k.gpu_milli)) +
           0x632be59bd9b4e019ULL + (h << 6) + (h >> 2);
      h ^= k.models + 0x85ebca6b + (h << 6) + (h >> 2);
      return h;
    }
  };
  // n: the node's index in the state, for FragModel's per-node counts.
  NodeScore Evaluate(const NodeFree& f, const Demand& d, NodeIdx n);
  // What a score depends on: the shape's cache index, free CPU, GPU model and free shares.
  struct NodeKey {
    uint32_t shape;
    uint8_t model;
    uint8_t gpu_count;
    int64_t cpu;
    std::array<int16_t, kMaxGpusPerNode> gpu;
    bool operator==(const NodeKey&) const = default;
  };
  struct NodeKeyHash {
    size_t operator()(const NodeKey& k) const;
  };
  void Relearn();
  // Relearn() when the count of shapes seen has reached next_relearn_, and the next count.
  void RelearnWhenDue();
  // Whether the window agrees with the reference (see Observe).
  bool WindowAgrees() const;
  // The window's comparisons and its end (see Observe).
  void CheckWindow();
  // Opens an empty window (its demands only; a tally without a window limit stays).
  void ClearWindow();

  std::string name_;
  FragModel model_;
  ScoreFn fn_;
  bool learn_online_;
  bool finish_ = false;
  uint32_t finish_gen_ = 1;
  uint16_t gen_ = 1;  // bumps when the target workload changes; caches reset on wrap
  // Online learning state.
  ShapeTally seen_;
  int64_t next_relearn_ = 1;
  // Mix-change detection (see Observe): the reference and the window by class, and the
  // window's demands (a tally is built from them only when the mix changed); without a window
  // limit the window is every arrival, kept as a tally.
  // Entries [0, kMixClasses) count every workload by shape and pinning; the kCpuClasses after
  // them count the GPU workloads (ref_gpu_n_, window_gpu_n_ of them) by CPU per GPU.
  static constexpr int kMixClasses = 18;
  static constexpr int kCpuClasses = 6;
  std::array<int64_t, kMixClasses + kCpuClasses> ref_classes_{}, window_classes_{};
  int64_t ref_n_ = 0, window_n_ = 0, next_check_ = 16;
  int64_t ref_gpu_n_ = 0, window_gpu_n_ = 0;
  std::vector<Demand> window_;
  ShapeTally window_tally_;
  int64_t past_n_ = 0, arrivals_n_ = 0;
  int64_t window_limit_ = 0;
  int64_t mix_changes_ = 0;
  bool past_forgotten_ = false;
  double past_false_alarm_ = 0.001;
  // Cache: per interned shape, per node.
  static constexpr size_t kMaxCachedShapes = 64;
  static constexpr int64_t kRelearnEvery = 1024;
  std::unordered_map<ShapeKey, uint32_t, ShapeHash> shape_ids_;
  std::vector<std::vector<Entry>> cache_;
  std::vector<Entry>* current_ = nullptr;
  std::vector<std::vector<Finished>> finished_;  // per interned shape, per node (with a finish)
  std::vector<Finished>* current_finished_ = nullptr;
  uint32_t current_id_ = 0;
  // Scores by node content for the current target workload, used when a shape scores a node
  // for the first time since it was learned: nodes in the same state (most nodes of a type
  // while the cluster is empty) are evaluated once per shape. Cleared at each re-learning,
  // and when it holds kMaxAlike entries.
  static constexpr size_t kMaxAlike = size_t{1} << 16;
  struct Alike {
    NodeScore score;
    float final = 0;          // Finish of score, at finish_gen
    uint32_t finish_gen = 0;  // 0 = none
  };
  std::unordered_map<NodeKey, Alike, NodeKeyHash> alike_;
};

// floor(100 * sigmoid(-delta / 1000)): FGD's integer node score.
double FgdIntegerScore(double delta);
// The same score from a table of its steps instead of exp: equal to FgdIntegerScore except for
// a delta within rounding of one of the 99 step edges 1000 ln(100 / k - 1).
double FgdIntegerScoreFast(double delta);

}  // namespace tessera
