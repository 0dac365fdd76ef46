// Workload-mix knobs of the generator (sim/generator.h) as command-line flags: the text of
// `tessera generate --share-fraction ... --pinned-fraction ...` applied to a GeneratorConfig.
// The mix family of `tessera sim family` (sim/family.h) is written in the same flags.
//
// Flags (an empty string means "not given": the field keeps its value in the base config):
//   --cpu-only-fraction F, --share-fraction F, --whole-fraction F, --multi-gpu-fraction F
//       Shares of all pods by class, each in [0, 1]. The given ones must sum to at most 1; the
//       classes not given share the rest in proportion to their base values (base whole-GPU
//       share = 1 - the three others). When all four are given they must sum to 1. At least
//       some pods must ask for a GPU (CPU-only share <= 0.999).
//   --share-sizes D        gpu_milli of GPU-share pods: "V:W,V:W,..." (V in 1..999, W > 0, no
//                          V twice, at most 999 items), "uniform:LO-HI" (every integer in
//                          LO..HI, 1 <= LO <= HI <= 999), or a name: "trace" (the base
//                          distribution), "small" (= uniform:50-300), "large" (=
//                          uniform:500-950).
//   --multi-gpu-counts D   GPUs per multi-GPU pod: "V:W,..." with V in 2..(GPUs of the largest
//                          node of the base pools), W > 0, no V twice.
//   --pinned-fraction F    share of GPU pods restricted to a set of GPU models, [0, 1].
//   --cpu-per-gpu-scale X, --memory-per-gpu-scale X
//                          multiply the CPU (memory) request of every GPU pod profile
//                          (share, whole and per-GPU multi profiles) by X in [0.1, 10],
//                          rounded to whole milli-cores (MiB). CPU-only pods are unchanged.
// Errors: InvalidArgument "FLAG: 'VALUE' ..." naming the flag and the allowed range, or naming
// the flags whose fractions do not add up. Pure functions, thread-compatible.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "sim/generator.h"

namespace tessera {

struct MixFlags {
  std::string cpu_only_fraction, share_fraction, whole_fraction, multi_gpu_fraction;
  std::string share_sizes, multi_gpu_counts, pinned_fraction;
  std::string cpu_per_gpu_scale, memory_per_gpu_scale;

  // True when no flag is given.
  bool empty() const;
  // (flag, value) of the given flags, in the order of the fields above.
  std::vector<std::pair<std::string, std::string>> Given() const;
  // "--flag value --flag value", or "" when none is given.
  std::string Text() const;
};

// Upper bound of the --cpu-per-gpu-scale / --memory-per-gpu-scale flags (lower: 0.1).
inline constexpr double kMinProfileScale = 0.1, kMaxProfileScale = 10.0;

// "V:W,V:W": weighted integers with V in [min_value, max_value], W finite and > 0, no V twice.
Result<std::vector<WeightedInt>> ParseWeightedInts(const std::string& flag, const std::string& text,
                                                   int min_value, int max_value);
// The --share-sizes syntax above; `base` is what "trace" stands for.
Result<std::vector<WeightedInt>> ParseShareSizes(const std::string& text,
                                                 const std::vector<WeightedInt>& base);

// Applies the given flags to `config` (unchanged on error).
Status ApplyMixFlags(const MixFlags& flags, GeneratorConfig& config);

// Mean of a weighted integer distribution (0 when no weight).
double WeightedMean(const std::vector<WeightedInt>& items);

}  // namespace tessera
