// Synthetic cluster and workload generator: the embedded default of `tessera demo`.
//
// Produces a GPU cluster and a pod workload whose shapes and proportions resemble the public
// Alibaba GPU-sharing trace (cluster-trace-gpu-v2023, "openb"; Weng et al., USENIX ATC'23)
// from the parameters below only: no trace row is embedded. Every parameter is a field of
// GeneratorConfig; the defaults are the documented default scenario.
//
// Contract:
//   * Generate(config, seed) is deterministic in (config, seed) and draws only from
//     tessera::Rng. The nodes depend on the config alone; the seed drives the pods.
//   * Nodes: config.num_nodes nodes split over the pools by weight (largest remainder, ties
//     to the earlier pool), in pool order, named "<pool name>-<index in pool>". Every node is
//     accepted by ClusterState::AddNode. Labels are left empty.
//   * Pods: drawn one at a time until the total GPU demand reaches gpu_demand_ratio x cluster
//     GPU capacity: a GPU pod that would exceed it is dropped, and drawing stops at the 20th
//     dropped pod (after the first drop, CPU-only draws are dropped as well). Each pod
//     is CPU-only, a GPU share (num_gpu 1, gpu_milli < 1000), one whole GPU, or several whole
//     GPUs, with the class shares below; demands obey the rules of ParsePodsCsv, and every
//     pod fits at least one node of the empty cluster (a draw that fits none is redrawn
//     within its class). Names are "pod-<index>", zero-padded to sort in creation order.
//   * Times: creation times are a Poisson process (exponential gaps, floored to whole seconds,
//     first pod at 0); lifetimes are log-normal with a small share of very long-running pods
//     drawn log-uniformly from a range. Every pod gets a finite deletion time >= creation.
// Failure: InvalidArgument naming the offending field for an inconsistent config (unknown
// model, negative weights or none positive, shares outside [0, 1], ...); FailedPrecondition when a
// pod class cannot produce a pod that fits any node after many redraws; ResourceExhausted past 50
// million pods. Thread-safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/types.h"
#include "core/status.h"

namespace tessera {

// One homogeneous node shape. Pools with gpus_per_node == 0 (and an empty model) are
// CPU-only nodes.
struct NodePool {
  std::string name;   // node name prefix
  std::string model;  // built-in catalog name, e.g. "A100-80GB"
  int gpus_per_node = 0;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  double weight = 0;  // relative share of the cluster's nodes
};

struct WeightedInt {
  int value = 0;
  double weight = 0;
};

// A pod's CPU and memory request. For multi-GPU pods the request is per GPU.
struct ResourceProfile {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  double weight = 0;
};

// A set of allowed GPU models, "A|B|C" with built-in catalog names.
struct ModelPin {
  std::string models;
  double weight = 0;
};

inline constexpr uint64_t kDefaultGeneratorSeed = 1;

struct GeneratorConfig {
  // Cluster size in nodes. The default pools give about 5.1 GPUs per node (the trace's GPU
  // cluster: 1,213 nodes, 6,212 GPUs), so 400 nodes have 2,032 GPUs.
  int num_nodes = 400;

  // Node shapes and their shares of the nodes, after the trace's GPU node list: mostly 8-GPU
  // 96-core nodes, many 2-GPU T4 nodes with plenty of CPU, small 2-GPU P100 nodes with few
  // cores, some 4- and 8-GPU V100 nodes and a couple of 1-GPU A10 nodes.
  std::vector<NodePool> pools = {
      {"a100-80gb-8g", "A100-80GB", 8, 96000, 393216, 0.450},   // 96 cores, 384 GiB
      {"h100-80gb-8g", "H100-80GB", 8, 128000, 786432, 0.030},  // 128 cores, 768 GiB
      {"t4-2g", "T4", 2, 104000, 524288, 0.320},                // 104 cores, 512 GiB
      {"t4-4g", "T4", 4, 96000, 393216, 0.015},                 // 96 cores, 384 GiB
      {"p100-2g-small", "P100", 2, 16000, 122880, 0.090},       // 16 cores, 120 GiB
      {"p100-2g", "P100", 2, 64000, 262144, 0.020},             // 64 cores, 256 GiB
      {"v100m16-4g", "V100M16", 4, 32000, 131072, 0.025},       // 32 cores, 128 GiB
      {"v100m16-1g", "V100M16", 1, 8000, 32768, 0.015},         // 8 cores, 32 GiB
      {"v100m32-8g", "V100M32", 8, 96000, 786432, 0.020},       // 96 cores, 768 GiB
      {"v100m32-4g", "V100M32", 4, 48000, 376832, 0.010},       // 48 cores, 368 GiB
      {"a10-1g", "A10", 1, 128000, 1048576, 0.005},             // 128 cores, 1 TiB
  };

  // Total GPU demand of the pods as a share of the cluster's GPU capacity (trace: 0.98).
  double gpu_demand_ratio = 0.98;

  // Pod classes as shares of all pods; whole single-GPU pods take the rest
  // (trace: 13.3% CPU-only, 37.8% share, 48.0% one GPU, 0.9% multi-GPU).
  double cpu_only_share = 0.133;
  double gpu_share_share = 0.378;
  double multi_gpu_share = 0.009;

  // gpu_milli of GPU-share pods (trace: 20 distinct values, 810 the most common).
  std::vector<WeightedInt> share_milli = {
      {810, 35.0}, {470, 24.0}, {320, 11.0}, {650, 8.0}, {230, 4.5}, {460, 4.0},
      {590, 2.5},  {160, 2.5},  {550, 2.5},  {220, 2.0}, {370, 1.5}, {110, 0.8},
      {480, 0.6},  {50, 0.3},   {330, 0.2},  {270, 0.1},
  };
  // GPUs per multi-GPU pod (trace: 8 GPUs in 59% of them).
  std::vector<WeightedInt> multi_gpu_count = {{2, 21.0}, {4, 20.0}, {8, 59.0}};

  // CPU and memory requests per class. CPU per GPU is concentrated on a few values; about
  // 11-12 cores and 48 GiB per whole GPU is the most common, which exactly fills a 96-core,
  // 384 GiB 8-GPU node, while the 16-18 core profiles leave GPUs stranded there.
  std::vector<ResourceProfile> cpu_only_profiles = {
      {12000, 57344, 34.0},  // 12 cores, 56 GiB
      {32000, 49152, 27.0},  // 32 cores, 48 GiB
      {16000, 30720, 20.0},  // 16 cores, 30 GiB
      {8000, 51200, 17.0},   // 8 cores, 50 GiB
      {16000, 15360, 2.0},   // 16 cores, 15 GiB
  };
  std::vector<ResourceProfile> share_profiles = {
      {3000, 5632, 36.0},    // 3 cores, 5.5 GiB
      {12000, 46080, 20.0},  // 12 cores, 45 GiB
      {8000, 30720, 20.0},   // 8 cores, 30 GiB
      {4000, 22528, 10.0},   // 4 cores, 22 GiB
      {4000, 10240, 5.0},    // 4 cores, 10 GiB
      {6000, 12288, 5.0},    // 6 cores, 12 GiB
      {4000, 15360, 3.0},    // 4 cores, 15 GiB
      {1000, 2048, 1.0},     // 1 core, 2 GiB
  };
  std::vector<ResourceProfile> whole_profiles = {
      {11000, 49152, 36.0},  // 11 cores, 48 GiB
      {3000, 5632, 12.0},    // 3 cores, 5.5 GiB
      {12000, 24576, 8.0},   // 12 cores, 24 GiB
      {16000, 57344, 8.0},   // 16 cores, 56 GiB
      {18000, 65536, 7.0},   // 18 cores, 64 GiB
      {10000, 40960, 5.0},   // 10 cores, 40 GiB
      {12000, 16384, 5.0},   // 12 cores, 16 GiB
      {8000, 16384, 5.0},    // 8 cores, 16 GiB
      {4000, 24576, 4.0},    // 4 cores, 24 GiB
      {24000, 94208, 3.0},   // 24 cores, 92 GiB
      {14000, 57344, 3.0},   // 14 cores, 56 GiB
      {1000, 6144, 1.0},     // 1 core, 6 GiB
  };
  std::vector<ResourceProfile> multi_profiles_per_gpu = {
      {8000, 32768, 45.0},   // 8 cores, 32 GiB per GPU
      {11000, 40960, 30.0},  // 11 cores, 40 GiB per GPU
      {15000, 92160, 10.0},  // 15 cores, 90 GiB per GPU: big-memory nodes only
      {4000, 32768, 10.0},   // 4 cores, 32 GiB per GPU
      {7500, 20480, 5.0},    // 7.5 cores, 20 GiB per GPU
  };

  // Share of GPU pods restricted to a set of GPU models, and the sets (trace: 34% in its
  // most constrained variant, T4 alone the most common set).
  double pinned_share = 0.25;
  std::vector<ModelPin> pins = {
      {"T4", 45.0},
      {"A100-80GB", 20.0},
      {"P100", 10.0},
      {"V100M16|V100M32", 8.0},
      {"P100|V100M16|V100M32", 6.0},
      {"H100-80GB", 4.0},
      {"P100|T4|V100M16|V100M32", 3.0},
      {"A10|A100-80GB|T4|V100M16|V100M32", 2.0},
      {"A10|T4", 2.0},
  };

  // Mean gap between pod creations, seconds (Poisson arrivals). Only the dynamic replay
  // reads times: with the defaults, concurrent GPU demand there peaks near 40% of capacity.
  double mean_interarrival_s = 1.0;
  // Lifetimes: log-normal with this median and log-space standard deviation (trace: median
  // 540 s, 5% under 50 s), except a share of long-running pods whose lifetime is
  // log-uniform in [long_running_min_s, long_running_max_s] (trace: 1% over one day,
  // longest about 145 days).
  double lifetime_median_s = 540.0;
  double lifetime_sigma = 1.7;
  double long_running_share = 0.01;
  double long_running_min_s = 86400.0;
  double long_running_max_s = 150.0 * 86400.0;
};

struct GeneratedTrace {
  std::vector<NodeSpec> nodes;
  std::vector<Workload> pods;
};

Result<GeneratedTrace> Generate(const GeneratorConfig& config, uint64_t seed);

// Counts by pod class. pinned counts GPU pods with a model restriction.
struct WorkloadMix {
  int64_t pods = 0;
  int64_t cpu_only = 0;
  int64_t share = 0;
  int64_t whole = 0;  // exactly one whole GPU
  int64_t multi = 0;
  int64_t pinned = 0;
  int64_t gpu_milli = 0;  // total GPU demand
};
WorkloadMix MixOf(const std::vector<Workload>& pods);

// CSV in the schema ParseNodesCsv / ParsePodsCsv read, header first, one row per element in
// order. Pods: gpu_spec lists allowed models by catalog name in id order, '|'-separated;
// deletion -1 is written as an empty field. Fields are quoted when they need it. Valid
// input reads back identical (labels are not written).
std::string NodesCsv(const std::vector<NodeSpec>& nodes);
std::string PodsCsv(const std::vector<Workload>& pods);

// Writes DIR/nodes.csv and DIR/pods.csv atomically, creating DIR if needed.
Status WriteTraceCsv(const GeneratedTrace& trace, const std::string& dir);

}  // namespace tessera
