// `tessera sim drift`: replays of a workload whose mix changes half way (sim/drift.h).
//
//   tessera sim drift [--pairs all|FROM:TO,...] [--seeds 42-46] [--time-scale 10]
//                     [--nodes 400] [--gen-seed 1] [--threads 0] [--json FILE] [--table FILE]
//     For each pair of family mixes (`tessera sim family --list`), replays the first mix and
//     then the second on the same generated cluster with fgd, tessera and tessera that never
//     forgets its learned mix (mix_window 0), and prints one Markdown table: GPU allocation and
//     p95 wait over the run and after the switch, pods never placed, and the mix changes the
//     policy detected. Progress goes to stderr, one line per pair.
// Exit 0 when the runs completed, 1 with a message otherwise; nothing is written on error.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "apps/tessera/cli_util.h"
#include "apps/tessera/commands.h"
#include "sim/drift.h"
#include "sim/family.h"
#include "sim/report.h"

namespace tessera {
namespace {

struct DriftArgs {
  std::string pairs = "all", seeds = "42-46", time_scale = "10";
  std::string nodes = std::to_string(DriftOptions{}.generated_nodes);
  std::string gen_seed = std::to_string(kDefaultGeneratorSeed);
  std::string threads = "0", json, table;
};

Result<std::vector<DriftPair>> ParsePairs(const std::string& text) {
  if (text == "all") return DefaultDriftPairs();
  std::vector<DriftPair> pairs;
  auto known = [](const std::string& name) {
    for (const FamilyMix& m : DefaultMixFamily()) {
      if (m.name == name) return true;
    }
    return false;
  };
  for (size_t start = 0; start <= text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const size_t colon = item.find(':');
    if (colon == std::string::npos)
      return InvalidArgument("--pairs: '" + item + "' is not FROM:TO");
    DriftPair p{item.substr(0, colon), item.substr(colon + 1)};
    for (const std::string& name : {p.from, p.to}) {
      if (!known(name))
        return InvalidArgument("--pairs: unknown mix '" + name +
                               "' (`tessera sim family --list` lists the mixes)");
    }
    pairs.push_back(std::move(p));
    start = comma + 1;
  }
  return pairs;
}

int RunDriftCommand(const DriftArgs& a) {
  auto pairs = ParsePairs(a.pairs);
  if (!pairs.ok()) return Fail(pairs.status());
  DriftOptions o;
  auto seeds = ParseSeedList("--seeds", a.seeds);
  if (!seeds.ok()) return Fail(seeds.status());
  o.seeds = *seeds;
  auto scale = ParseNumberFlag("--time-scale", a.time_scale, 1, kMaxTimeScale);
  if (!scale.ok()) return Fail(scale.status());
  o.time_scale = *scale;
  auto nodes = ParseIntFlag("--nodes", a.nodes, 1, 100000);
  if (!nodes.ok()) return Fail(nodes.status());
  o.generated_nodes = static_cast<int>(*nodes);
  auto gen_seed = ParseSeedFlag("--gen-seed", a.gen_seed);
  if (!gen_seed.ok()) return Fail(gen_seed.status());
  o.gen_seed = *gen_seed;
  auto threads = ParseThreadsFlag("--threads", a.threads);
  if (!threads.ok()) return Fail(threads.status());
  o.threads = *threads;
  for (const auto& [flag, path] : {std::pair{"--json", &a.json}, std::pair{"--table", &a.table}}) {
    Status st = CheckOutputDir(flag, *path);
    if (!st.ok()) return Fail(st);
  }

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<DriftResult> results;
  for (const DriftPair& p : *pairs) {
    auto r = RunDrift(p, DefaultDriftVariants(), o);
    if (!r.ok()) return Fail(r.status());
    results.push_back(std::move(r).value());
    std::fprintf(stderr, "[%zu/%zu] %s -> %s: %.1f s (%.0f s elapsed)\n", results.size(),
                 pairs->size(), p.from.c_str(), p.to.c_str(), results.back().wall_seconds,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const std::string table = DriftTable(results);
  std::fputs(table.c_str(), stdout);
  if (!a.table.empty()) {
    Status st = WriteFileAtomic(a.table, table);
    if (!st.ok()) return Fail(st);
  }
  if (!a.json.empty()) {
    Status st = WriteFileAtomic(a.json, DriftJson(results, o));
    if (!st.ok()) return Fail(st);
  }
  return 0;
}

}  // namespace

void AddSimDriftCommand(CLI::App& sim, int& rc) {
  static DriftArgs a;
  auto* c = sim.add_subcommand(
      "drift", "Replay workloads whose mix changes half way: does the policy follow the change");
  c->add_option("--pairs", a.pairs,
                "all, or FROM:TO pairs of family mixes, comma-separated (see `sim family --list`)")
      ->default_val(a.pairs);
  c->add_option("--seeds", a.seeds, "Replay seeds, e.g. 42-46 or 1,2,3 (at most 1000, none twice)")
      ->default_val(a.seeds);
  c->add_option("--time-scale", a.time_scale, "Divide arrival times by K, 1 <= K <= 1e6")
      ->type_name("K")
      ->default_val(a.time_scale);
  c->add_option("--nodes", a.nodes, "Nodes of the generated cluster, 1..100000")
      ->type_name("INT")
      ->default_val(a.nodes);
  c->add_option("--gen-seed", a.gen_seed,
                "Seed of the first mix's workload (the second uses the next seed), 0..2^64-1")
      ->type_name("UINT")
      ->default_val(a.gen_seed);
  c->add_option("--threads", a.threads, "Worker threads, 0..256 (0 = all cores)")
      ->type_name("INT")
      ->default_val(a.threads);
  c->add_option("--json", a.json, "Write the results as JSON");
  c->add_option("--table", a.table, "Write the printed table to FILE as well");
  c->callback([&rc] { rc = RunDriftCommand(a); });
}

}  // namespace tessera
