// tessera-bench-advisor: the advisor judged against a known future. Per seed: generate a history
// of N workloads over D days plus the following day (src/advisor/generator.h), advise on the D
// days, judge the recommendations against the following day's true peaks
// (src/advisor/evaluate.h), then simulate the closed loop on a fixed GPU set
// (src/advisor/closed_loop.h). Writes --json with the worst case over seeds at the top level
// (lowest covered_pct and auto_fit_ratio, highest median_overprovision_pct and
// max_retries_per_oom, summed oom_events, mean gpus_freed) and every seed under "per_seed".
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "advisor/closed_loop.h"
#include "advisor/evaluate.h"
#include "advisor/generator.h"
#include "advisor/numbers.h"
#include "advisor/recommend.h"

namespace {

using namespace tessera;
using namespace tessera::advisor;

Result<std::vector<uint64_t>> ParseSeeds(const std::string& text) {
  std::vector<uint64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(pos, comma - pos);
    const size_t dash = item.find('-');
    auto a = ParseStrictInt(item.substr(0, dash));
    if (!a.ok() || *a < 0) return InvalidArgument("--seeds: bad item '" + item + "'");
    int64_t b = *a;
    if (dash != std::string::npos) {
      auto e = ParseStrictInt(item.substr(dash + 1));
      if (!e.ok() || *e < *a || *e - *a > 1000)
        return InvalidArgument("--seeds: bad range '" + item + "'");
      b = *e;
    }
    for (int64_t s = *a; s <= b; ++s) out.push_back(static_cast<uint64_t>(s));
    pos = comma + 1;
  }
  if (out.empty() || out.size() > 1000) return InvalidArgument("--seeds: 1..1000 seeds");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Advisor benchmark: recommendations judged against the following day"};
  std::string json_path, seeds_text;
  int64_t seed = 42, workloads = 200, days = 7, step = 300;
  double loop_fraction = 0.5;
  app.add_option("--json", json_path, "Write the results as JSON")->required();
  app.add_option("--seed", seed, "Seed of one run")->default_val(42);
  app.add_option("--seeds", seeds_text, "Seeds, e.g. 1-5 or 1,7,9 (overrides --seed)");
  app.add_option("--workloads", workloads, "Workloads per history")->default_val(200);
  app.add_option("--days", days, "Days of history (one more is generated as the truth)")
      ->default_val(7);
  app.add_option("--step", step, "Sampling step in seconds")->default_val(300);
  app.add_option("--loop-gpus", loop_fraction,
                 "Closed loop: GPUs per model as a fraction of what the original requests take")
      ->default_val(0.5);
  double growth_share = 1, growth_rate = 1, spike_rate = 1;
  app.add_option("--growth-share", growth_share,
                 "Generator: scale of the share of growing workloads")
      ->default_val(1);
  app.add_option("--growth-rate", growth_rate, "Generator: scale of the growth per day")
      ->default_val(1);
  app.add_option("--spike-rate", spike_rate, "Generator: scale of the memory spike rate")
      ->default_val(1);
  bool prefer_mig = false;
  int64_t reserve = 0;
  app.add_option("--reserve", reserve,
                 "Idle GPUs per model kept for re-admissions after a kill "
                 "(AdvisorConfig::oom_reserve_gpus)")
      ->default_val(0);
  app.add_flag("--prefer-mig", prefer_mig,
               "Prefer MIG profiles to smaller MPS shares (AdvisorConfig::prefer_mig)");
  bool no_preempt = false, no_other_models = false;
  app.add_flag("--no-preempt", no_preempt,
               "Re-admissions after a kill never displace later workloads "
               "(AdvisorConfig::oom_preempt = false)");
  app.add_flag("--no-other-models", no_other_models,
               "Admission never falls back to other models of the set "
               "(AdvisorConfig::admit_on_other_models = false)");
  CLI11_PARSE(app, argc, argv);
  std::vector<uint64_t> seeds = {static_cast<uint64_t>(seed)};
  if (!seeds_text.empty()) {
    auto s = ParseSeeds(seeds_text);
    if (!s.ok()) {
      std::fprintf(stderr, "tessera-bench-advisor: %s\n", s.status().message().c_str());
      return 1;
    }
    seeds = *s;
  }
  if (!(loop_fraction > 0 && loop_fraction <= 1)) {
    std::fprintf(stderr, "tessera-bench-advisor: --loop-gpus must be in (0, 1]\n");
    return 1;
  }
  AdvisorConfig cfg;
  cfg.prefer_mig = prefer_mig;
  cfg.oom_reserve_gpus = reserve;
  cfg.oom_preempt = !no_preempt;
  cfg.admit_on_other_models = !no_other_models;
  if (Status st = ValidateConfig(cfg); !st.ok()) {
    std::fprintf(stderr, "tessera-bench-advisor: %s\n", st.message().c_str());
    return 1;
  }
  const PriceTable prices = DefaultPriceTable();
  nlohmann::json per_seed = nlohmann::json::array();
  double worst_cover = 1e9, worst_over = -1e9, worst_ratio = 1e9, freed_sum = 0;
  double worst_running = 1e9;
  int oom_sum = 0, worst_retries = 0, unrecovered = 0, displaced_waiting = 0;
  std::printf("%8s %9s %8s %9s %8s %10s %9s %5s %8s %6s %6s\n", "seed", "covered%", "over%",
              "over_all%", "freed", "save$/h", "fit o/a", "ratio", "ooms", "retry", "run");
  for (uint64_t s : seeds) {
    GeneratorConfig gc;
    gc.workloads = static_cast<int>(workloads);
    gc.days = static_cast<int>(days);
    gc.step_s = step;
    gc.seed = s;
    gc.growth_share_scale = growth_share;
    gc.growth_rate_scale = growth_rate;
    gc.spike_rate_scale = spike_rate;
    auto gen = GenerateHistory(gc);
    if (!gen.ok()) {
      std::fprintf(stderr, "tessera-bench-advisor: %s\n", gen.status().message().c_str());
      return 1;
    }
    auto rep = Advise(gen->history, cfg, prices);
    if (!rep.ok()) {
      std::fprintf(stderr, "tessera-bench-advisor: %s\n", rep.status().message().c_str());
      return 1;
    }
    const Evaluation ev = Evaluate(*rep, gen->eval, cfg);
    auto loop =
        SimulateClosedLoop(LoopGpus(*rep, loop_fraction), LoopWorkloads(*rep, gen->eval), cfg);
    if (!loop.ok()) {
      std::fprintf(stderr, "tessera-bench-advisor: %s\n", loop.status().message().c_str());
      return 1;
    }
    std::printf("%8llu %9.2f %8.2f %9.2f %8.2f %10.2f %4d/%-4d %5.2f %8zu %6d %6.2f\n",
                static_cast<unsigned long long>(s), ev.covered_pct, ev.median_overprovision_pct,
                ev.median_overprovision_all_pct, rep->gpus_freed, rep->savings_per_hour,
                loop->fit_original, loop->fit_auto, loop->auto_fit_ratio, loop->oom.size(),
                loop->max_retries_per_oom, loop->running_fit_ratio);
    for (const std::string& u : ev.uncovered) {
      // The archetype and the prediction behind each miss, to tell growth, spikes and new levels
      // apart.
      const std::string key = u.substr(0, u.find(':'));
      std::string why;
      for (size_t k = 0; k < gen->history.workloads.size(); ++k)
        if (gen->history.workloads[k].Key() == key) why = gen->archetype[k];
      for (const Recommendation& r : rep->items)
        if (r.key == key)
          why += ", seen peak " + FormatDecimal(r.memory_mib.peak, 0) + " MiB, predicted " +
                 FormatDecimal(r.predicted_memory_mib, 0) + " MiB, trend " +
                 FormatDecimal(r.memory_trend_per_period, 0) + " MiB/period";
      std::printf("         uncovered %s (%s)\n", u.c_str(), why.c_str());
    }
    nlohmann::json oom = nlohmann::json::array();
    for (const OomEvent& e : loop->oom)
      oom.push_back({{"key", e.key},
                     {"granted_mib", e.granted_mib},
                     {"true_peak_mib", e.true_peak_mib},
                     {"regranted_mib", e.regranted_mib},
                     {"retries", e.retries},
                     {"recovered", e.recovered},
                     {"displaced", e.displaced},
                     {"displaced_readmitted", e.displaced_readmitted}});
    worst_cover = std::min(worst_cover, ev.covered_pct);
    worst_running = std::min(worst_running, loop->running_fit_ratio);
    displaced_waiting += loop->displaced_waiting;
    worst_over = std::max(worst_over, ev.median_overprovision_pct);
    worst_ratio = std::min(worst_ratio, loop->auto_fit_ratio);
    worst_retries = std::max(worst_retries, loop->max_retries_per_oom);
    oom_sum += static_cast<int>(loop->oom.size());
    unrecovered += loop->unrecovered;
    freed_sum += rep->gpus_freed;
    per_seed.push_back({{"seed", s},
                        {"workloads", rep->items.size()},
                        {"judged", ev.judged},
                        {"resized", ev.resized},
                        {"idle", rep->idle},
                        {"history_too_short", rep->too_short},
                        {"attribution_impossible", rep->unattributed},
                        {"covered_pct", ev.covered_pct},
                        {"median_overprovision_pct", ev.median_overprovision_pct},
                        {"median_overprovision_all_pct", ev.median_overprovision_all_pct},
                        {"median_slice_overprovision_pct", ev.median_slice_overprovision_pct},
                        {"gpus_requested", rep->gpus_requested},
                        {"gpus_recommended", rep->gpus_recommended},
                        {"gpus_freed", rep->gpus_freed},
                        {"savings_per_hour", rep->savings_per_hour},
                        {"loop_gpus", loop->gpus},
                        {"fit_original", loop->fit_original},
                        {"fit_auto", loop->fit_auto},
                        {"auto_fit_ratio", loop->auto_fit_ratio},
                        {"oom_events", loop->oom.size()},
                        {"max_retries_per_oom", loop->max_retries_per_oom},
                        {"unrecovered_oom", loop->unrecovered},
                        {"displaced_waiting", loop->displaced_waiting},
                        {"fit_auto_running", loop->fit_auto_running},
                        {"running_fit_ratio", loop->running_fit_ratio},
                        {"oom", oom},
                        {"uncovered", ev.uncovered}});
  }
  nlohmann::json out = {{"covered_pct", worst_cover},
                        {"median_overprovision_pct", worst_over},
                        {"gpus_freed", freed_sum / static_cast<double>(seeds.size())},
                        {"auto_fit_ratio", worst_ratio},
                        {"oom_events", oom_sum},
                        {"max_retries_per_oom", worst_retries},
                        {"unrecovered_oom", unrecovered},
                        {"displaced_waiting", displaced_waiting},
                        {"running_fit_ratio", worst_running},
                        {"seeds", seeds},
                        {"workloads", workloads},
                        {"days", days},
                        {"step_s", step},
                        {"loop_gpu_fraction", loop_fraction},
                        {"prefer_mig", prefer_mig},
                        {"oom_reserve_gpus", reserve},
                        {"oom_preempt", cfg.oom_preempt},
                        {"admit_on_other_models", cfg.admit_on_other_models},
                        {"growth_share_scale", growth_share},
                        {"growth_rate_scale", growth_rate},
                        {"spike_rate_scale", spike_rate},
                        {"per_seed", per_seed}};
  std::ofstream f(json_path, std::ios::trunc);
  f << out.dump(2) << "\n";
  if (!f) {
    std::fprintf(stderr, "tessera-bench-advisor: cannot write '%s'\n", json_path.c_str());
    return 1;
  }
  return 0;
}
