// MultiGpuForecast: an online estimate of how many GPUs multi-GPU jobs (whole_gpus > 1) will
// hold, by Little's law: for each GPU count g, an exponentially weighted arrival rate of g-GPU
// jobs times the expected run time of multi-GPU jobs times g.
//
// Contract: only arrivals and run times reported to it count; no arrival => zero forecast.
// The arrival rate of count g at time t is sum over arrivals a of exp(-(t - a) / tau) / tau with
// tau = half_life / ln 2, divided by the part of that weight the observed time span can carry
// (at least half), so the estimate is not biased low while less than one half-life has been
// seen. The expected run time pools all multi-GPU jobs: (prior + completed run times + ages of
// the running jobs) / (1 + completed jobs), the total-time-on-test estimate with the prior as
// one pseudo-observation, so jobs still running push it up instead of being ignored.
// Deterministic; not thread-safe.
#pragma once

#include <cstdint>
#include <map>

namespace tessera {

class MultiGpuForecast {
 public:
  MultiGpuForecast(double half_life_s, double duration_prior_s);

  // A demand for `gpus` whole GPUs arrived at `now_s` (seconds, non-decreasing; an earlier time
  // counts as the latest one). gpus <= 1 only starts the observed time span.
  void Arrival(int gpus, double now_s);
  // A multi-GPU job started / finished running (its run time is now - start).
  void Started(int64_t job, double now_s);
  void Finished(int64_t job, double now_s);

  // Arrivals per second of `gpus`-GPU jobs at `now_s`.
  double Rate(int gpus, double now_s) const;
  double ExpectedDurationS(double now_s) const;
  // Expected GPUs held by multi-GPU jobs: sum over g of Rate(g) x ExpectedDuration x g.
  double GpusNeeded(double now_s) const;
  bool seen_any() const { return !rate_.empty(); }

 private:
  struct Ewma {
    double value = 0;  // weight sum at `at`
    double at = 0;
  };
  double tau_s_;
  double prior_s_;
  double first_s_ = -1;
  std::map<int, Ewma> rate_;
  std::map<int64_t, double> running_;  // job -> start
  double completed_s_ = 0;
  int64_t completed_ = 0;
};

}  // namespace tessera
