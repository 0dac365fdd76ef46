// `tessera sim sharing`: runs the GPU-sharing strategies of sim/sharing_sim.h side by side on
// one scenario and seed. Prints a table to stdout; --json also writes the results (atomically,
// after every run succeeded). Errors go to stderr as "tessera: <message>" with exit code 1.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/tessera/cli_util.h"
#include "apps/tessera/commands.h"
#include "sim/report.h"
#include "sim/sharing_scenario.h"
#include "sim/sharing_sim.h"

namespace tessera {
namespace {

struct SharingArgs {
  std::string scenario, json, strategies = "exclusive,static-mig,timeslice,mps,tessera", seed;
  std::string mig_out, protection;
  bool seed_given = false;
};

int RunSimSharing(const SharingArgs& a) {
  auto strategies = ParseNameList("--strategy", a.strategies, SharingStrategyNames());
  if (!strategies.ok()) return Fail(strategies.status());
  std::optional<uint64_t> seed_flag;
  if (a.seed_given) {
    auto parsed = ParseSeedFlag("--seed", a.seed);
    if (!parsed.ok()) return Fail(parsed.status());
    seed_flag = *parsed;
  }
  if (!a.json.empty()) {
    const std::filesystem::path dir = std::filesystem::path(a.json).parent_path();
    std::error_code ec;
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
      return Fail(IoError("cannot write '" + a.json + "': no directory '" + dir.string() + "'"));
  }
  if (!a.mig_out.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(a.mig_out, ec))
      return Fail(IoError("--mig-out: '" + a.mig_out + "' is not a directory"));
  }
  if (!a.protection.empty() && a.protection != "off" && a.protection != "on")
    return Fail(
        InvalidArgument("--tessera-protection: '" + a.protection + "' is not one of off, on"));
  auto scenario = ReadSharingScenario(a.scenario);
  if (!scenario.ok()) return Fail(scenario.status());
  if (!a.protection.empty()) scenario->tessera_protection = a.protection;
  const uint64_t seed = seed_flag.value_or(scenario->seed);
  auto results = CompareSharing(*scenario, seed, *strategies);
  if (!results.ok()) return Fail(results.status());
  if (!a.json.empty()) {
    Status st = WriteFileAtomic(a.json, SharingJson(*scenario, seed, *results));
    if (!st.ok()) return Fail(st);
  }
  if (!a.mig_out.empty()) {
    for (const SharingMetrics& m : *results) {
      if (m.strategy != "tessera") continue;
      const std::filesystem::path dir(a.mig_out);
      std::string log;
      for (const std::string& line : m.mig_diff_log) log += line + "\n";
      Status st = WriteFileAtomic((dir / "mig-diff.log").string(), log);
      if (!st.ok()) return Fail(st);
      for (const auto& [node, yaml] : m.mig_parted_configs) {
        st = WriteFileAtomic((dir / (node + ".mig-parted.yaml")).string(), yaml);
        if (!st.ok()) return Fail(st);
      }
    }
  }
  std::fputs(SharingTable(*scenario, seed, *results).c_str(), stdout);
  return 0;
}

}  // namespace

void AddSimSharingCommand(CLI::App& sim, int& rc) {
  auto args = std::make_shared<SharingArgs>();
  auto* s = sim.add_subcommand(
      "sharing",
      "Compare GPU sharing strategies (exclusive, static MIG, time-slicing, MPS, Tessera) on a "
      "mixed-cluster scenario");
  s->add_option("--scenario", args->scenario, "Scenario file (JSON, see docs/SHARING.md)")
      ->required();
  s->add_option("--json", args->json, "Write the results as JSON");
  s->add_option("--strategy", args->strategies,
                "Strategies, comma-separated, each once: " + JoinNames(SharingStrategyNames()))
      ->default_val(args->strategies);
  auto* seed =
      s->add_option("--seed", args->seed, "Workload seed, 0..2^64-1 (default: the scenario's)");
  s->add_option("--mig-out", args->mig_out,
                "Existing directory: write tessera's MIG changes (mig-diff.log) and each MIG "
                "node's final state as an NVIDIA mig-parted config (<node>.mig-parted.yaml)");
  s->add_option("--tessera-protection", args->protection,
                "Tessera's node protection for multi-GPU jobs: off, on (default: the "
                "scenario's strategies.tessera_protection, else off)");
  s->callback([args, seed, &rc] {
    args->seed_given = seed->count() > 0;
    rc = RunSimSharing(*args);
  });
}

}  // namespace tessera
