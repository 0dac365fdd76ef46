// tessera: command-line entry point. Thin: parses arguments and calls the libraries.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>

#include "apps/tessera/cli_util.h"
#include "apps/tessera/commands.h"
#include "policies/builtin.h"
#include "sim/fill.h"
#include "sim/fill_bound.h"
#include "sim/report.h"
#include "sim/trace.h"

namespace {

using namespace tessera;

struct FillArgs {
  std::string nodes, pods, past, policies = "tessera", seeds = "42-51", json, curve, plot;
  std::string tune = "1.3", threads = "0";
  bool bound = false;
};

int RunSimFill(const FillArgs& a) {
  auto policies = ParseNameList("--policy", a.policies, BuiltinPolicies().Names());
  if (!policies.ok()) return Fail(policies.status());
  auto seeds = ParseSeedList("--seeds", a.seeds);
  if (!seeds.ok()) return Fail(seeds.status());
  auto tune = ParseNumberFlag("--tune", a.tune, 0, kMaxTuneRatio, /*min_open=*/true);
  if (!tune.ok()) return Fail(tune.status());
  auto threads = ParseThreadsFlag("--threads", a.threads);
  if (!threads.ok()) return Fail(threads.status());
  auto nodes = ReadNodesCsv(a.nodes);
  if (!nodes.ok()) return Fail(nodes.status());
  auto pods = ReadPodsCsv(a.pods);
  if (!pods.ok()) return Fail(pods.status());
  std::vector<Workload> past;
  FillHooks shared;
  if (!a.past.empty()) {
    auto read = ReadPodsCsv(a.past);
    if (!read.ok()) return Fail(read.status());
    past = std::move(read).value();
    shared.past = &past;
  }
  auto results = RunFillMatrix(*nodes, *pods, *policies, *seeds, *tune, *threads, shared);
  if (!results.ok()) return Fail(results.status());
  std::optional<std::vector<FillBoundRun>> bounds;
  if (a.bound) {
    auto b = ComputeFillBounds(*nodes, *pods, *tune, *seeds, *threads);
    if (!b.ok()) return Fail(b.status());
    bounds = std::move(b).value();
  }
  const std::vector<FillBoundRun>* bound_runs = bounds ? &*bounds : nullptr;
  std::fputs(FillTable(*results, bound_runs).c_str(), stdout);
  if (!a.json.empty()) {
    Status st = WriteFileAtomic(a.json, FillJson(*results, a.nodes, a.pods, bound_runs));
    if (!st.ok()) return Fail(st);
  }
  if (!a.curve.empty()) {
    Status st = WriteFileAtomic(a.curve, FillCurveCsv(*results));
    if (!st.ok()) return Fail(st);
  }
  if (!a.plot.empty()) {
    Status st = WriteFileAtomic(a.plot, FillPlotSvg(*results, "Unallocated GPU vs arrival"));
    if (!st.ok()) return Fail(st);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tessera: workload-aware GPU allocation for Kubernetes"};
  app.require_subcommand(1);
  auto* sim = app.add_subcommand("sim", "Trace-driven simulation");
  sim->require_subcommand(1);

  FillArgs fill;
  auto* f = sim->add_subcommand("fill", "FGD fill protocol: fill the cluster once, no departures");
  f->add_option("--nodes", fill.nodes, "Node CSV (sn,cpu_milli,memory_mib,gpu,model)")->required();
  f->add_option("--pods", fill.pods, "Pod CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli,...)")
      ->required();
  f->add_option("--past-pods", fill.past,
                "Pod CSV of the cluster's past workload, of the same mix: observed by tessera "
                "before the first arrival, never placed (fgd's target stays --pods)");
  f->add_option(
       "--policy", fill.policies,
       "Policy name(s), comma-separated, each once: " + JoinNames(BuiltinPolicies().Names()))
      ->default_val("tessera");
  f->add_option("--seeds", fill.seeds, "Seeds, e.g. 42-51 or 1,2,3 (at most 1000, none twice)")
      ->default_val("42-51");
  f->add_option("--tune", fill.tune,
                "Inflate/deflate the workload to this x GPU capacity, 0 < tune <= 4; the "
                "end-of-run column is labelled with it (1.3: unalloc%@130)")
      ->type_name("NUMBER")
      ->default_val("1.3");
  f->add_option("--threads", fill.threads, "Worker threads, 0..256 (0 = all cores)")
      ->type_name("INT")
      ->default_val("0");
  f->add_flag("--bound", fill.bound,
              "Also report, per seed, a lower bound on the unallocated GPU % any policy can "
              "reach (a fluid LP over the arrived pods; docs/BENCHMARK.md)");
  f->add_option("--json", fill.json, "Write results as JSON");
  f->add_option("--curve", fill.curve, "Write per-arrival curves as CSV");
  f->add_option("--plot", fill.plot, "Write unallocated GPU vs arrival as SVG");
  int rc = 0;
  f->callback([&] { rc = RunSimFill(fill); });
  tessera::AddSimReplayCommand(*sim, rc);
  tessera::AddSimQueuesCommand(*sim, rc);
  tessera::AddSimPolluxCommand(*sim, rc);
  tessera::AddSimSharingCommand(*sim, rc);
  tessera::AddSimFamilyCommand(*sim, rc);
  tessera::AddSimDriftCommand(*sim, rc);
  tessera::AddDemoCommand(app, rc);
  tessera::AddExtenderCommand(app, rc);
  tessera::AddWebhookCommand(app, rc);
  tessera::AddSchedulerCommand(app, rc);
  tessera::AddPlanCommand(app, rc);
  tessera::AddAgentCommand(app, rc);
  tessera::AddAdviseCommand(app, rc);
  tessera::AddReportCommand(app, rc);

  CLI11_PARSE(app, argc, argv);
  return rc;
}
