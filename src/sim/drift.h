// Workload mixes that change: `tessera sim drift`.
//
// A drift replays one mix of the family (sim/family.h) and then another on the same cluster:
// the second mix's pods arrive after the first mix's last arrival, so the cluster turns over
// from one mix to the other while pods of the first still run. It checks that a policy that
// learns the mix online follows the change (TesseraConfig::mix_window) and measures what that
// is worth in the dynamic replay (sim/replay.h): by default against fgd, whose target
// workload is the pods of both mixes (it knows the whole file), and against tessera with
// mix_window 0 (the learned mix never forgets). Besides the replay's own figures, every run is
// measured after the switch alone: GPU allocation over [switch, last arrival] and the waits of
// the second mix's pods.
// Thread-safety: pure functions of their arguments (RunDrift starts its own threads).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "policies/builtin.h"
#include "sim/fill.h"
#include "sim/generator.h"
#include "sim/replay.h"

namespace tessera {

struct DriftPair {
  std::string from, to;  // names of family mixes (DefaultMixFamily)
};
// Changes between mixes that differ in every way the learned mix prices: shares against whole
// and multi-GPU work, pinned against unpinned, small against large shares, CPU-rich against
// CPU-lean; each in both directions, and one mix followed by itself (a second sample), where
// nothing should change.
const std::vector<DriftPair>& DefaultDriftPairs();

struct DriftVariant {
  std::string name;    // as reported
  std::string policy;  // a built-in policy
  TesseraConfig tessera;
};
// fgd, tessera, and tessera with mix_window 0 ("tessera-window-0").
std::vector<DriftVariant> DefaultDriftVariants();

struct DriftOptions {
  double time_scale = 10;  // arrival times divided by this (CompressArrivals), >= 1
  std::vector<uint64_t> seeds = {42, 43, 44, 45, 46};
  unsigned threads = 0;  // 0: hardware concurrency
  int generated_nodes = 400;
  uint64_t gen_seed = kDefaultGeneratorSeed;  // the first mix; the second uses gen_seed + 1
};

// One variant's runs, one per seed, in seed order.
struct DriftVariantResult {
  std::string name;
  ReplaySummary replay;  // replay.policy is the variant's name
  // Per run, after the switch: allocated GPU over [switch, last arrival] as % of capacity, and
  // the wait percentiles of the second mix's placed pods.
  std::vector<double> alloc_after_pct, wait_p95_after_s;
  Stats alloc_after, wait_p95_after, mix_changes;
};

struct DriftResult {
  DriftPair pair;
  int64_t nodes = 0, gpus = 0, pods_from = 0, pods_to = 0;
  SimTime switch_s = 0;  // arrival of the second mix's first pod, after compression
  std::vector<DriftVariantResult> variants;
  double wall_seconds = 0;
};

// The pods of `first`, then those of `second` with creation and deletion times shifted so that
// the first arrives one second after the last arrival of `first`; names get "a-" and "b-".
std::vector<Workload> ChainWorkloads(const std::vector<Workload>& first,
                                     const std::vector<Workload>& second);

// Generates both mixes on the default generated cluster (the first mix's nodes; mix flags do
// not change the cluster), chains them, compresses arrivals and replays every variant and seed.
// InvalidArgument for an unknown mix, an empty variant or seed list, or an invalid variant.
Result<DriftResult> RunDrift(const DriftPair& pair, const std::vector<DriftVariant>& variants,
                             const DriftOptions& options);

// One Markdown table over the pairs, means (and sd) over the seeds.
std::string DriftTable(const std::vector<DriftResult>& results);
std::string DriftJson(const std::vector<DriftResult>& results, const DriftOptions& options);

}  // namespace tessera
