// Shared fixtures of the policy and engine unit tests: catalog lookups, node and demand
// builders, a cluster builder with pods already placed, and one-node scoring.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "cluster/cluster_state.h"
#include "core/random.h"
#include "engine/gpu_select.h"
#include "engine/policy.h"

namespace tessera::policy_test {

inline GpuModelId Model(const char* name) {
  auto id = GpuCatalog::Builtin().Find(name);
  if (!id) ADD_FAILURE() << "model " << name << " missing from the catalog";
  return id.value_or(0);
}
inline ModelMask Bit(const char* name) {
  return ModelMask{1} << Model(name);
}

inline NodeSpec Node(std::string name, int64_t cpu, int gpus, const char* model = "T4",
                     int64_t mem = 1 << 20) {
  NodeSpec s;
  s.name = std::move(name);
  s.cpu = MilliCpu(cpu);
  s.memory = MiB(mem);
  s.gpu_count = gpus;
  s.model = gpus > 0 ? Model(model) : kNoGpuModel;
  return s;
}

inline Demand CpuOnly(int64_t cpu) {
  return Demand{MilliCpu(cpu), MiB(0), 0, 0, 0};
}
inline Demand Share(int64_t cpu, int milli, ModelMask models = 0) {
  return Demand{MilliCpu(cpu), MiB(0), 1, milli, models};
}
inline Demand Whole(int64_t cpu, int n) {
  return Demand{MilliCpu(cpu), MiB(0), n, 1000, 0};
}

// Pods already running on a node before the case is scored.
struct Prior {
  Demand demand;
  GpuMask gpus;
};

// Takes `used` milli-GPU of GPU g with a pod of the matching shape class (no CPU).
inline Prior Use(int g, int used) {
  return used == 1000 ? Prior{Whole(0, 1), GpuMask{1} << g}
                      : Prior{Share(0, used), GpuMask{1} << g};
}

class Builder {
 public:
  NodeIdx Add(const NodeSpec& spec, const std::vector<Prior>& prior = {}) {
    auto idx = state.AddNode(spec);
    EXPECT_TRUE(idx.ok()) << idx.status().ToString();
    for (const Prior& p : prior) {
      const Status st = state.Allocate(next_id++, p.demand, {*idx, p.gpus});
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
    return *idx;
  }
  ClusterState state;
  WorkloadId next_id = 1'000'000;
};

inline NodeScore ScoreOne(Scorer& scorer, const ClusterState& state, NodeIdx n, const Demand& d) {
  Rng rng(1);
  const std::vector<NodeIdx> feasible = {n};
  scorer.PreScore(state, d, feasible, rng);
  return scorer.Score(state, n, d);
}

// Scores each node by a fixed table (default 0) and takes the first fitting GPUs.
class FixedScorer final : public Scorer {
 public:
  explicit FixedScorer(std::map<NodeIdx, double> scores, GpuMask forced = 0)
      : scores_(std::move(scores)), forced_(forced) {}
  std::string_view name() const override { return "fixed"; }
  NodeScore Score(const ClusterState& state, NodeIdx n, const Demand& d) override {
    auto it = scores_.find(n);
    const GpuMask g = forced_ ? forced_ : SelectFirstFit(state.free(n), d);
    return {it == scores_.end() ? 0.0 : it->second, g};
  }

 private:
  std::map<NodeIdx, double> scores_;
  GpuMask forced_;
};

}  // namespace tessera::policy_test
