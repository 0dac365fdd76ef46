// `tessera plan`: deployment planners. Registered by AddPlanCommand.
//
//   tessera plan inference --profiles DIR --slo-rate FILE --slo-latency FILE --scenario N|all
//                          [--json FILE] [--deployment-out PATH] [--baseline-dir DIR]
//                          [--gpu-model A100-80GB] [--max-procs 5] [--single-3g]
//     Reads the ParvaGPU benchmark files (sim/parva.h), plans scenario N with
//     sharing/inference_planner.h and prints the GPU layouts and, per service, rate, capacity,
//     margin and segments. --json writes the plan; --deployment-out writes it in ParvaGPU's
//     deployment CSV format. With `--scenario all` every scenario is planned and a summary table
//     printed (ParvaGPU's own GPU counts beside ours when --baseline-dir names the benchmark's
//     deployment/ folder); --json then holds all plans and --deployment-out names an existing
//     directory that receives SLO<k>_tessera_deploy.csv per scenario.
// Outputs are written atomically, and only after every scenario was planned. Exit 0 on success
// (also when a service cannot meet its SLO: the plan reports it), 1 with "tessera: <message>" on
// stderr otherwise.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "apps/tessera/cli_util.h"
#include "apps/tessera/commands.h"
#include "core/text.h"
#include "sharing/inference_planner.h"
#include "sim/parva.h"
#include "sim/report.h"

namespace tessera {
namespace {

// --max-procs: MPS serves at most 48 client processes per GPU (Volta and later).
constexpr int64_t kMaxMpsProcs = 48;
constexpr int64_t kMaxScenario = 999999;

struct InferenceArgs {
  std::string profiles, slo_rate, slo_latency, scenario, json, deployment_out, baseline_dir;
  std::string gpu_model = "A100-80GB";
  std::string max_procs = "5";
  bool single_3g = false;
};

struct ScenarioRun {
  int scenario = 0;
  InferencePlan plan;
  double plan_ms = 0;
  double total_rate = 0;
  int baseline_gpus = -1;  // -1: no baseline
  int baseline_gpcs = -1;
};

double MinMargin(const InferencePlan& plan) {
  double m = INFINITY;
  for (const InferenceServicePlan& s : plan.services) {
    if (s.slo_met) m = std::min(m, s.margin_pct);
  }
  return std::isfinite(m) ? m : 0.0;
}

std::string LayoutText(const MigGeometry& geo, const MigLayout& layout) {
  return MigLayoutString(geo, layout);
}

std::string PlanTable(const ScenarioRun& run) {
  const InferencePlan& p = run.plan;
  const MigGeometry& geo = *MigGeometryFor(p.gpu_model);
  std::string out = Printf("Scenario %d: %zu services, %.0f req/s on %s (MIG + MPS)\n",
                           run.scenario, p.services.size(), run.total_rate, p.gpu_model.c_str());
  out += Printf("  GPUs %d (lower bound %d), GPCs %d of %d, %s, planned in %.1f ms%s\n", p.gpus,
                p.gpu_lower_bound_whole_segments, p.gpcs_used, p.gpus * geo.compute_slices,
                p.all_slo_met ? "every SLO met" : "SOME SLOs NOT MET", run.plan_ms,
                p.exact ? "" : " (search budget hit: may not be optimal)");
  if (run.baseline_gpus >= 0)
    out += Printf("  ParvaGPU: %d GPUs, %d GPCs\n", run.baseline_gpus, run.baseline_gpcs);
  out += Printf("\n  %4s  %-5s %s\n", "GPU", "GPCs", "MIG layout (profile@first memory slice)");
  for (size_t g = 0; g < p.gpu_layouts.size(); ++g)
    out += Printf("  %4zu  %-5d %s\n", g, MigComputeUsed(geo, p.gpu_layouts[g]),
                  LayoutText(geo, p.gpu_layouts[g]).c_str());
  out += Printf("\n  %-12s %8s %7s %9s %8s %8s  %s\n", "service", "req/s", "SLO ms", "capacity",
                "margin", "max ms", "segments (gpu:profile@start batch x procs)");
  for (const InferenceServicePlan& s : p.services) {
    std::string segs;
    for (const InferenceSegment& seg : s.segments)
      segs += Printf("%s%d:%s@%d b%d x%d", segs.empty() ? "" : ", ", seg.gpu,
                     seg.profile_name.c_str(), seg.start, seg.batch, seg.procs);
    if (!s.slo_met) segs = "NOT MET: " + s.reason;
    out += Printf("  %-12s %8g %7g %9.1f %7.1f%% %8.1f  %s\n", s.model.c_str(), s.rate, s.slo_ms,
                  s.capacity, s.margin_pct, s.max_latency_ms, segs.c_str());
  }
  return out;
}

std::string SummaryTable(const std::vector<ScenarioRun>& runs) {
  const bool base = !runs.empty() && runs[0].baseline_gpus >= 0;
  std::string out = Printf("%-8s %8s %9s %5s %5s %6s %6s %9s", "scenario", "services", "req/s",
                           "GPUs", "GPCs", "LB", "LB int", "min marg");
  if (base) out += Printf(" %13s %13s", "ParvaGPU GPUs", "ParvaGPU GPCs");
  out += Printf(" %6s %9s\n", "SLOs", "plan ms");
  int gpus = 0, gpcs = 0, lb = 0, lb_int = 0, bgpus = 0, bgpcs = 0;
  for (const ScenarioRun& r : runs) {
    const InferencePlan& p = r.plan;
    out += Printf("SLO%-5d %8zu %9.0f %5d %5d %6d %6d %8.2f%%", r.scenario, p.services.size(),
                  r.total_rate, p.gpus, p.gpcs_used, p.gpu_lower_bound,
                  p.gpu_lower_bound_whole_segments, MinMargin(p));
    if (base) out += Printf(" %13d %13d", r.baseline_gpus, r.baseline_gpcs);
    out += Printf(" %6s %9.1f\n", p.all_slo_met ? "met" : "MISSED", r.plan_ms);
    gpus += p.gpus;
    gpcs += p.gpcs_used;
    lb += p.gpu_lower_bound;
    lb_int += p.gpu_lower_bound_whole_segments;
    bgpus += r.baseline_gpus;
    bgpcs += r.baseline_gpcs;
  }
  out += Printf("%-8s %8s %9s %5d %5d %6d %6d %9s", "total", "", "", gpus, gpcs, lb, lb_int, "");
  if (base) out += Printf(" %13d %13d", bgpus, bgpcs);
  return out + "\n";
}

nlohmann::ordered_json PlanJson(const ScenarioRun& run) {
  const InferencePlan& p = run.plan;
  const MigGeometry& geo = *MigGeometryFor(p.gpu_model);
  nlohmann::ordered_json j;
  j["scenario"] = run.scenario;
  j["gpu_model"] = p.gpu_model;
  j["gpus"] = p.gpus;
  j["all_slo_met"] = p.all_slo_met;
  j["gpcs_used"] = p.gpcs_used;
  j["gpu_lower_bound"] = p.gpu_lower_bound;
  j["gpu_lower_bound_whole_segments"] = p.gpu_lower_bound_whole_segments;
  j["exact"] = p.exact;
  j["search_states"] = p.states;
  nlohmann::ordered_json services = nlohmann::ordered_json::array();
  for (const InferenceServicePlan& s : p.services) {
    nlohmann::ordered_json js;
    js["model"] = s.model;
    js["rate"] = s.rate;
    js["slo_ms"] = s.slo_ms;
    js["slo_met"] = s.slo_met;
    if (!s.slo_met) js["reason"] = s.reason;
    js["capacity"] = s.capacity;
    js["margin_pct"] = s.margin_pct;
    js["max_latency_ms"] = s.max_latency_ms;
    js["gpcs"] = s.gpcs;
    nlohmann::ordered_json segs = nlohmann::ordered_json::array();
    for (const InferenceSegment& seg : s.segments) {
      segs.push_back({{"gpu", seg.gpu},
                      {"profile", seg.profile_name},
                      {"start", seg.start},
                      {"gpcs", seg.gpcs},
                      {"batch", seg.batch},
                      {"procs", seg.procs},
                      {"throughput", seg.throughput},
                      {"latency_ms", seg.latency_ms}});
    }
    js["segments"] = std::move(segs);
    services.push_back(std::move(js));
  }
  j["services"] = std::move(services);
  nlohmann::ordered_json layouts = nlohmann::ordered_json::array();
  for (size_t g = 0; g < p.gpu_layouts.size(); ++g) {
    layouts.push_back({{"gpu", g},
                       {"layout", LayoutText(geo, p.gpu_layouts[g])},
                       {"gpcs", MigComputeUsed(geo, p.gpu_layouts[g])}});
  }
  j["gpu_layouts"] = std::move(layouts);
  if (run.baseline_gpus >= 0)
    j["parvagpu"] = {{"gpus", run.baseline_gpus}, {"gpcs", run.baseline_gpcs}};
  return j;
}

Status AddBaseline(ScenarioRun& run, const std::string& dir,
                   const std::vector<std::string>& models) {
  const std::string k = "SLO" + std::to_string(run.scenario);
  const std::string path = (std::filesystem::path(dir) / k / (k + "_ParvaGPU_deploy.csv")).string();
  auto rows = ReadParvaDeploy(path, models);
  if (!rows.ok()) return rows.status();
  std::set<std::pair<int, int>> gpus;
  run.baseline_gpcs = 0;
  for (const ParvaDeployRow& r : *rows) {
    gpus.insert({r.node, r.gpu});
    run.baseline_gpcs += r.gpcs;
  }
  run.baseline_gpus = static_cast<int>(gpus.size());
  return Status::Ok();
}

int RunPlanInference(const InferenceArgs& a) {
  const bool all = a.scenario == "all";
  int scenario = 0;
  if (!all) {
    auto n = ParseIntFlag("--scenario", a.scenario, 1, kMaxScenario);
    if (!n.ok())
      return Fail(InvalidArgument(n.status().message() + " (or 'all' for every scenario)"));
    scenario = static_cast<int>(*n);
  }
  auto max_procs = ParseIntFlag("--max-procs", a.max_procs, 1, kMaxMpsProcs);
  if (!max_procs.ok()) return Fail(max_procs.status());
  if (MigGeometryFor(a.gpu_model) == nullptr)
    return Fail(InvalidArgument("--gpu-model: '" + a.gpu_model + "' is not a MIG-capable model"));
  if (all && !a.deployment_out.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(a.deployment_out, ec))
      return Fail(InvalidArgument("--deployment-out: with --scenario all it names a directory; '" +
                                  a.deployment_out + "' is not one"));
  }
  for (const std::string& out : {a.json, all ? std::string() : a.deployment_out}) {
    if (out.empty()) continue;
    const std::filesystem::path dir = std::filesystem::path(out).parent_path();
    std::error_code ec;
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
      return Fail(IoError("cannot write '" + out + "': no directory '" + dir.string() + "'"));
  }
  auto profiles = ReadParvaProfileDir(a.profiles);
  if (!profiles.ok()) return Fail(profiles.status());
  const std::vector<std::string> models = ParvaModelNames(*profiles);
  auto rates = ReadParvaSlo(a.slo_rate, models);
  if (!rates.ok()) return Fail(rates.status());
  auto latencies = ReadParvaSlo(a.slo_latency, models);
  if (!latencies.ok()) return Fail(latencies.status());

  std::vector<int> scenarios;
  if (all) {
    const size_t n = std::min(rates->rows.size(), latencies->rows.size());
    for (size_t k = 1; k <= n; ++k) scenarios.push_back(static_cast<int>(k));
  } else {
    scenarios.push_back(scenario);
  }
  InferencePlanOptions options;
  options.gpu_model = a.gpu_model;
  options.max_procs = static_cast<int>(*max_procs);
  options.single_3g_per_gpu = a.single_3g;
  std::vector<ScenarioRun> runs;
  for (int k : scenarios) {
    auto services = ParvaScenario(*profiles, *rates, *latencies, k);
    if (!services.ok()) return Fail(services.status());
    ScenarioRun run;
    run.scenario = k;
    for (const InferenceService& s : *services) run.total_rate += s.rate;
    const auto t0 = std::chrono::steady_clock::now();
    auto plan = PlanInference(*profiles, *services, options);
    run.plan_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!plan.ok())
      return Fail(Status(plan.status().code(),
                         "scenario " + std::to_string(k) + ": " + plan.status().message()));
    run.plan = std::move(*plan);
    if (!a.baseline_dir.empty()) {
      Status st = AddBaseline(run, a.baseline_dir, models);
      if (!st.ok()) return Fail(st);
    }
    runs.push_back(std::move(run));
  }

  if (all) {
    std::fputs(SummaryTable(runs).c_str(), stdout);
  } else {
    std::fputs(PlanTable(runs[0]).c_str(), stdout);
  }
  if (!a.json.empty()) {
    nlohmann::ordered_json j;
    if (all) {
      j["scenarios"] = nlohmann::ordered_json::array();
      for (const ScenarioRun& r : runs) j["scenarios"].push_back(PlanJson(r));
    } else {
      j = PlanJson(runs[0]);
    }
    Status st = WriteFileAtomic(a.json, j.dump(2) + "\n");
    if (!st.ok()) return Fail(st);
  }
  if (!a.deployment_out.empty()) {
    for (const ScenarioRun& r : runs) {
      const std::string path = all ? (std::filesystem::path(a.deployment_out) /
                                      ("SLO" + std::to_string(r.scenario) + "_tessera_deploy.csv"))
                                         .string()
                                   : a.deployment_out;
      Status st = WriteFileAtomic(path, ParvaDeployCsv(ParvaDeployFromPlan(r.plan)));
      if (!st.ok()) return Fail(st);
    }
  }
  return 0;
}

}  // namespace

void AddPlanCommand(CLI::App& app, int& rc) {
  auto* plan = app.add_subcommand("plan", "Deployment planners");
  plan->require_subcommand(1);
  auto args = std::make_shared<InferenceArgs>();
  auto* inf = plan->add_subcommand(
      "inference",
      "Inference services on MIG + MPS GPUs (ParvaGPU benchmark): fewest GPUs meeting every SLO");
  inf->add_option("--profiles", args->profiles, "Directory of <model>.csv profiles")->required();
  inf->add_option("--slo-rate", args->slo_rate, "Request rate table (row = scenario)")->required();
  inf->add_option("--slo-latency", args->slo_latency, "Latency SLO table in ms (row = scenario)")
      ->required();
  inf->add_option("--scenario", args->scenario,
                  "Scenario number (1-based, at most 999999) or 'all'")
      ->required();
  inf->add_option("--json", args->json, "Write the plan as JSON");
  inf->add_option("--deployment-out", args->deployment_out,
                  "Write the plan in ParvaGPU's deployment CSV format (a directory with 'all')");
  inf->add_option("--baseline-dir", args->baseline_dir,
                  "ParvaGPU's deployment/ folder, to compare GPU counts");
  inf->add_option("--gpu-model", args->gpu_model, "MIG-capable GPU model")
      ->default_val("A100-80GB");
  inf->add_option("--max-procs", args->max_procs, "Most MPS processes per MIG instance, 1..48")
      ->type_name("INT")
      ->default_val("5");
  inf->add_flag("--single-3g", args->single_3g,
                "At most one 3g instance per GPU, as ParvaGPU assumes (the A100 allows two)");
  inf->callback([args, &rc] { rc = RunPlanInference(*args); });
}

}  // namespace tessera
