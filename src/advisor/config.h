// Advisor configuration and the price table. Every constant of the method lives in
// AdvisorConfig; docs/ADVISOR.md gives the rationale of each default. Pure values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "core/status.h"

namespace tessera::advisor {

struct AdvisorConfig {
  // Window: only samples in (end - window_s, end] are used; end is the history's last sample.
  int64_t window_s = 0;  // 0 = the whole history
  // Honest states: fewer seconds between a workload's first and last sample, or fewer samples,
  // gives "history-too-short" and no recommendation.
  int64_t min_history_s = 86400;
  int64_t min_samples = 24;
  // Envelope: one bucket per period (a day), counted back from the window end.
  int64_t period_s = 86400;
  // Buckets needed before a trend is fitted (Theil-Sen over the bucket maxima).
  int64_t min_trend_periods = 3;
  // Largest growth per period the trend may project, as a fraction of the median bucket peak.
  double max_trend_per_period = 0.10;
  // A trend counts only when at least this fraction of the pairwise slopes rise (a Mann-Kendall
  // style sign test): noise between flat daily peaks must not be projected as growth.
  double trend_min_agreement = 0.75;
  // Memory limit = max(prediction * (1 + memory_headroom), prediction + memory_headroom_min_mib).
  // plus memory_spread_weight * (largest - median bucket peak): workloads whose daily peaks vary
  // (notebooks loading different models, spiky services) can exceed the largest peak seen.
  double memory_headroom = 0.05;
  int64_t memory_headroom_min_mib = 256;
  double memory_spread_weight = 0.5;
  // Spikes: a sample's baseline is the median of its pod's samples within +- spike_window_s / 2.
  // The excursion above it is a spike; the prediction also covers the largest spike of the window
  // landing on the highest projected baseline (spikes are short and independent of load).
  int64_t spike_window_s = 3600;
  // Level switching: a period whose baseline peak lies within level_tolerance (relative) of no
  // other period's is a level seen once. The share of such periods estimates (Good-Turing) the
  // chance that the next period brings a level never seen; above max_new_level_probability the
  // history cannot bound the peak and the request stays. 1 = never (the closed loop's
  // out-of-memory recovery handles a new level instead).
  double level_tolerance = 0.05;
  double max_new_level_probability = 1.0;
  // Compute: the envelope of each bucket's compute_quantile, plus compute_headroom (fraction of
  // the GPU, additive).
  double compute_quantile = 0.95;
  double compute_headroom = 0.05;
  // Idle: the window's p99 SM activity at or below this fraction of the GPU.
  double idle_sm_active = 0.01;
  // Time-slice instead of MPS: median compute at most this (bursty, mostly waiting).
  double timeslice_max_median_compute = 0.05;
  // A non-MIG GPU is recommended whole when the memory or compute need reaches this fraction.
  double whole_gpu_fraction = 0.85;
  // Another (cheaper) model is a candidate only if the compute need stays at or below this
  // fraction of it, after scaling by relative compute.
  double other_model_max_compute = 0.80;
  bool allow_other_models = true;
  // On MIG-capable models, true: a MIG profile short of the whole GPU is preferred to a smaller
  // MPS share (hardware memory and fault isolation); false: the smaller share wins, MIG on ties.
  bool prefer_mig = false;
  // Closed loop: the smallest memory an auto-sized workload is granted. After an out-of-memory
  // kill the workload is re-admitted at the largest size with room between its owner's request
  // and oom_growth times the killed grant, and keeps it for oom_backoff_periods periods,
  // doubling with each further kill, before auto-sizing resumes from a history that now holds
  // the peak.
  int64_t auto_floor_mib = 1024;
  double oom_growth = 2.0;
  int64_t oom_backoff_periods = 1;
  // Idle GPUs per model that auto-sized admissions leave for re-admissions after a kill (0: a
  // full cluster makes a killed workload wait for room).
  int64_t oom_reserve_gpus = 0;
  // Closed loop: a re-admission after a kill that finds no room displaces one workload admitted
  // after it (admission order is the priority); the displaced workload is admitted again where
  // it finds room, or waits.
  bool oom_preempt = true;
  // Closed loop: a resized single-GPU share whose own and recommended models have no room is
  // admitted with the same memory limit on another model of the set where its compute fits
  // (other_model_max_compute), the least capable first.
  bool admit_on_other_models = true;
  // Time-slice replicas one GPU advertises (the device plugin's `replicas`).
  int64_t timeslice_max_replicas = 8;
  // MPS clients per GPU (Volta and later).
  int64_t mps_max_clients = 48;
};

// InvalidArgument naming the first field outside its range.
Status ValidateConfig(const AdvisorConfig& c);

// Price per GPU-hour by catalog model name.
struct PriceTable {
  std::map<std::string, double> usd_per_gpu_hour;
  // The price of `model`, or NotFound "no price for GPU model 'M' in the price table".
  Result<double> Price(std::string_view model) const;
};

// Illustrative on-demand cloud list prices (docs/ADVISOR.md); replace with your own.
PriceTable DefaultPriceTable();

// CSV "gpu_model,usd_per_hour" (that header first). Errors "SOURCE:LINE:COL: reason": unknown
// catalog model, a model twice, a price that is not a finite number in (0, 1000], wrong field
// count, quotes, no rows.
Result<PriceTable> ParsePriceTable(std::string_view content, const std::string& source);

}  // namespace tessera::advisor
