// Seeded generator of GPU usage histories with a known true need, for the advisor's benchmark,
// tests and `tessera advise --generate-history`.
//
// Workload archetypes (docs/ADVISOR.md): inference services (Deployments with replicas, weights
// plus load-dependent memory on a daily cycle, bounded spikes, slow growth on some), training
// jobs (near-constant memory with checkpoint bumps, high compute, some on 2 GPUs), notebooks
// (sessions in working hours, memory held between them; some abandoned and idle), recurring
// batch jobs (the same owner each day, a new pod per run) and pairs of notebooks time-sliced on
// one GPU with device-level readings only. Requests over-ask the way users do: mostly whole
// GPUs, otherwise a rounded-up multiple of the peak.
//
// The history covers `days` days; `eval` holds the same workloads' following day, the ground
// truth the recommendations are judged against. Same config => same output (core/random.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "advisor/usage.h"
#include "core/status.h"

namespace tessera::advisor {

struct GeneratorConfig {
  int workloads = 200;
  int days = 7;
  int64_t step_s = 300;
  uint64_t seed = 42;
  int64_t start_s = 1'700'006'400;  // a midnight (UTC)
  // Variations (1 = the archetypes as described): the share of inference services and batch jobs
  // that grow (capped at all of them), their growth per day, and the chance of a memory spike per
  // inference sample. All at 1 give the default histories.
  double growth_share_scale = 1.0;
  double growth_rate_scale = 1.0;
  double spike_rate_scale = 1.0;
};

// InvalidArgument for workloads outside 1..100000, days outside 1..366, step outside
// 10..86400 s or not dividing a day, a scale outside 0..100.
Status ValidateGeneratorConfig(const GeneratorConfig& c);

struct GeneratedHistory {
  UsageHistory history;                // days 1..D
  UsageHistory eval;                   // day D+1, same workloads, keys and order
  std::vector<std::string> archetype;  // per workload
};

Result<GeneratedHistory> GenerateHistory(const GeneratorConfig& c);

}  // namespace tessera::advisor
