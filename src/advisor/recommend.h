// Recommender: from a UsageHistory, per workload, the usage statistics, a prediction of the next
// period's peak, and the GPU slice to request, never above what the owner asked for.
//
// Method (docs/ADVISOR.md): samples of the window are pooled over the workload's pods (the need
// of one replica). Per period bucket (a day, counted back from the window end) the memory peak
// and the compute quantile are taken; the prediction is the upper envelope of those bucket values
// projected one period ahead along their Theil-Sen trend (never downward, clamped). Memory gets
// headroom, compute an additive margin. The slice is the cheapest, by the price table, among: a
// MIG profile (smallest of the model's geometry covering memory and compute), an MPS share
// (memory limit + thread %), a time-slice (bursty compute), whole GPU(s), each on the workload's
// model or, when allowed, on another model present in the history. A recommendation whose cost,
// memory or compute exceeds the request becomes "keep". Pure, deterministic.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "advisor/config.h"
#include "advisor/usage.h"

namespace tessera::advisor {

enum class SliceType { kRelease, kMig, kMps, kTimeSlice, kWhole };
const char* SliceTypeName(SliceType t);  // "release", "mig", "mps", "timeslice", "whole"

struct Slice {
  SliceType type = SliceType::kWhole;
  std::string model;
  std::string mig_profile;       // kMig
  int whole_gpus = 0;            // kWhole
  int64_t memory_mib = 0;        // usable memory: the MIG instance's, the MPS limit, the time-slice
                                 // declaration, or the GPUs' memory
  int thread_pct = 0;            // kMps: active-thread %
  double gpu_fraction = 0;       // share of one GPU of `model` this slice takes (whole: the count)
  std::string Describe() const;  // "A100-80GB mig 1g.10gb", "T4 mps 4096MiB 30%", ...
};

// The slices of `model` that cover a single-GPU need (memory in MiB, compute as a fraction of
// one GPU of that model), in order of preference; empty when the need exceeds one GPU.
// Candidates: the smallest MIG profile short of the whole GPU covering the need (MIG-capable
// models), an MPS share or, when bursty, a time-slice (while memory and compute stay below
// whole_gpu_fraction), and the whole GPU last. With prefer_mig the MIG profile comes first;
// otherwise the smaller share does (MIG on ties).
std::vector<Slice> SliceCandidates(const std::string& model, double memory_mib, double compute,
                                   bool bursty, const AdvisorConfig& cfg);
// The first of SliceCandidates, or nullopt.
std::optional<Slice> SliceOn(const std::string& model, double memory_mib, double compute,
                             bool bursty, const AdvisorConfig& cfg);
// The owner's request as a slice (memory = the request's limit, whole GPUs = all of them).
Slice RequestSlice(const std::string& model, const GpuRequest& r);

struct UsageStats {
  double peak = 0, p50 = 0, p95 = 0, p99 = 0;
};

enum class AdviceState { kOk, kTooShort, kUnattributed };
const char* AdviceStateName(AdviceState s);  // "ok", "history-too-short", "attribution-impossible"

struct Recommendation {
  std::string key, ns, owner_kind, owner, model;
  GpuRequest request;
  AdviceState state = AdviceState::kOk;
  int pods = 0;
  int64_t samples = 0, covered_s = 0;
  UsageStats memory_mib, compute;   // compute: fraction of one GPU of `model`
  double predicted_memory_mib = 0;  // next period's peak
  double predicted_compute = 0;
  double memory_trend_per_period = 0;  // MiB per period, >= 0
  int gpus_used = 1;                   // GPUs per pod with non-idle use (multi-GPU requests)
  bool idle = false;
  bool keep = false;  // the request stays (prediction reaches it, or no better slice)
  Slice requested, recommended;
  // Memory limit per GPU the recommendation sets (the prediction with headroom; the request's
  // for kept workloads, 0 when released); a MIG instance may hold more.
  int64_t memory_limit_mib = 0;
  double cost_requested_per_hour = 0, cost_recommended_per_hour = 0;  // per pod
  std::string reason;                                                 // one line
};

struct AdvisorReport {
  int64_t window_start = 0, window_end = 0;
  std::vector<Recommendation> items;
  // Totals over pods currently running (each workload counts its pods seen in the last period).
  double gpus_requested = 0, gpus_recommended = 0, gpus_freed = 0;
  double cost_requested_per_hour = 0, cost_recommended_per_hour = 0, savings_per_hour = 0;
  int idle = 0, too_short = 0, unattributed = 0, resized = 0;
};

// InvalidArgument for an invalid config; NotFound when a model of the history has no price.
Result<AdvisorReport> Advise(const UsageHistory& h, const AdvisorConfig& cfg,
                             const PriceTable& prices);

}  // namespace tessera::advisor
