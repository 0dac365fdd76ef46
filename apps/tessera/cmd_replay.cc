// `tessera sim replay`: the dynamic trace replay of sim/replay.h for one or more policies and
// seeds. Prints a table to stdout; --json also writes the results (atomically, after every
// run succeeded). Errors go to stderr as "tessera: <message>" with exit code 1.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "apps/tessera/cli_util.h"
#include "apps/tessera/commands.h"
#include "policies/builtin.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "sim/trace.h"

namespace tessera {
namespace {

struct ReplayArgs {
  std::string nodes, pods, policies = kDefaultPolicy, seeds = "42-51", json;
  std::string threads = "0", time_scale = "1";
};

int RunSimReplay(const ReplayArgs& a) {
  auto policies = ParseNameList("--policy", a.policies, BuiltinPolicies().Names());
  if (!policies.ok()) return Fail(policies.status());
  auto seeds = ParseSeedList("--seeds", a.seeds);
  if (!seeds.ok()) return Fail(seeds.status());
  auto threads = ParseThreadsFlag("--threads", a.threads);
  if (!threads.ok()) return Fail(threads.status());
  auto time_scale = ParseNumberFlag("--time-scale", a.time_scale, 1, kMaxTimeScale);
  if (!time_scale.ok()) return Fail(time_scale.status());
  if (!a.json.empty()) {
    const std::filesystem::path dir = std::filesystem::path(a.json).parent_path();
    std::error_code ec;
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
      return Fail(IoError("cannot write '" + a.json + "': no directory '" + dir.string() + "'"));
  }
  auto nodes = ReadNodesCsv(a.nodes);
  if (!nodes.ok()) return Fail(nodes.status());
  auto pods = ReadPodsCsv(a.pods);
  if (!pods.ok()) return Fail(pods.status());
  if (*time_scale != 1.0) {
    auto scaled = CompressArrivals(*pods, *time_scale);
    if (!scaled.ok()) return Fail(scaled.status());
    pods = std::move(scaled).value();
  }
  auto results = RunReplayMatrix(*nodes, *pods, *policies, *seeds, *threads);
  if (!results.ok()) return Fail(results.status());
  if (!a.json.empty()) {
    Status st = WriteFileAtomic(a.json, ReplayJson(*results, a.nodes, a.pods));
    if (!st.ok()) return Fail(st);
  }
  std::fputs(ReplayTable(*results).c_str(), stdout);
  return 0;
}

}  // namespace

void AddSimReplayCommand(CLI::App& sim, int& rc) {
  auto args = std::make_shared<ReplayArgs>();
  auto* r = sim.add_subcommand(
      "replay",
      "Dynamic replay: pods arrive and depart at trace times, unplaced pods wait and retry");
  r->add_option("--nodes", args->nodes, "Node CSV (sn,cpu_milli,memory_mib,gpu,model)")->required();
  r->add_option("--pods", args->pods,
                "Pod CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,"
                "deletion_time,...)")
      ->required();
  r->add_option(
       "--policy", args->policies,
       "Policy name(s), comma-separated, each once: " + JoinNames(BuiltinPolicies().Names()))
      ->default_val(kDefaultPolicy);
  r->add_option("--seeds", args->seeds, "Seeds, e.g. 42-51 or 1,2,3 (at most 1000, none twice)")
      ->default_val("42-51");
  r->add_option("--threads", args->threads, "Worker threads, 0..256 (0 = all cores)")
      ->type_name("INT")
      ->default_val("0");
  r->add_option("--time-scale", args->time_scale,
                "Divide arrival times by this factor, 1 <= factor <= 1e6 (lifetimes unchanged), "
                "to raise the load")
      ->type_name("NUMBER")
      ->default_val("1");
  r->add_option("--json", args->json, "Write results as JSON");
  r->callback([args, &rc] { rc = RunSimReplay(*args); });
}

}  // namespace tessera
