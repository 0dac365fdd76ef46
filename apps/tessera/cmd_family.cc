// `tessera sim family`: the placement policies over a family of workload mixes (sim/family.h).
//
//   tessera sim family [--policy fgd,tessera] [--candidate tessera] [--reference fgd]
//                      [--seeds 42-51] [--mixes all|none|NAME,...] [--traces DIR]
//                      [--trace-names all|NAME,...] [--nodes 400] [--gen-seed 1]
//                      [--past-gen-seed N] [--tune 1.3]
//                      [--threads 0] [--json FILE] [--table FILE] [--list] [--bound]
//                      [--mode fill|replay] [--time-scale K] [--trace-time-scale K]
//     Runs the fill protocol for every policy and seed on each generated mix of the family
//     (default: all of them) and, with --traces, on the trace files DIR/openb_pod_list_<name>.csv
//     with DIR/openb_node_list_gpu_node.csv. Prints one Markdown table and the summary of the
//     candidate against the reference; --table writes the same text, --json the results.
//     Progress goes to stderr, one line per mix. --list prints the mixes and their flags.
//     --bound adds each seed's fluid lower bound on the unallocated GPU % (sim/fill_bound.h).
//     --mode replay runs the dynamic replay instead (departures, retries; sim/replay.h) with
//     arrival times divided by --time-scale (generated mixes) and --trace-time-scale (trace
//     files), and compares time-weighted GPU allocation, p95 wait and pods never placed.
// Exit 0 when the runs completed (whatever the summary says), 1 with a message otherwise;
// nothing is written on error.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>

#include "apps/tessera/cli_util.h"
#include "apps/tessera/commands.h"
#include "policies/builtin.h"
#include "sim/family.h"
#include "sim/report.h"
#include "sim/trace.h"

namespace tessera {
namespace {

struct FamilyArgs {
  std::string policies = "fgd,tessera", candidate = "tessera", reference = "fgd";
  std::string seeds = "42-51", mixes = "all", traces, trace_names = "all";
  std::string nodes = std::to_string(FamilyOptions{}.generated_nodes);
  std::string gen_seed = std::to_string(kDefaultGeneratorSeed);
  std::string past_gen_seed;
  std::string tune = "1.3", threads = "0", json, table;
  std::string mode = "fill", time_scale = "1", trace_time_scale = "1";
  bool list = false, bound = false;
};

std::vector<std::string> MixNames() {
  std::vector<std::string> names;
  for (const FamilyMix& m : DefaultMixFamily()) names.push_back(m.name);
  return names;
}

Result<std::vector<std::string>> Selection(const std::string& flag, const std::string& text,
                                           const std::vector<std::string>& known) {
  if (text == "all") return known;
  if (text == "none") return std::vector<std::string>{};
  // Unknown mixes get a short message: they are many, and --list shows them.
  for (size_t start = 0; flag == "--mixes" && start <= text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, comma - start);
    if (!name.empty() && std::find(known.begin(), known.end(), name) == known.end())
      return InvalidArgument(flag + ": unknown name '" + name +
                             "' (`tessera sim family --list` lists the mixes)");
    start = comma + 1;
  }
  return ParseNameList(flag, text, known);
}

int ListMixes() {
  for (const FamilyMix& m : DefaultMixFamily()) {
    std::printf("%-24s %s\n%-24s   %s\n", m.name.c_str(), m.description.c_str(), "",
                m.flags.empty() ? "(defaults)" : m.flags.Text().c_str());
  }
  return 0;
}

int RunFamily(const FamilyArgs& a) {
  if (a.list) return ListMixes();
  FamilyOptions o;
  auto policies = ParseNameList("--policy", a.policies, BuiltinPolicies().Names());
  if (!policies.ok()) return Fail(policies.status());
  o.policies = *policies;
  for (const auto& [flag, name] :
       {std::pair{"--candidate", a.candidate}, std::pair{"--reference", a.reference}}) {
    if (std::find(o.policies.begin(), o.policies.end(), name) == o.policies.end())
      return Fail(InvalidArgument(std::string(flag) + ": '" + name +
                                  "' is not one of the --policy list (" + a.policies + ")"));
  }
  auto seeds = ParseSeedList("--seeds", a.seeds);
  if (!seeds.ok()) return Fail(seeds.status());
  o.seeds = *seeds;
  auto mixes = Selection("--mixes", a.mixes, MixNames());
  if (!mixes.ok()) return Fail(mixes.status());
  auto trace_names = Selection("--trace-names", a.trace_names, PaperTraceNames());
  if (!trace_names.ok()) return Fail(trace_names.status());
  if (a.traces.empty()) trace_names->clear();
  if (mixes->empty() && trace_names->empty())
    return Fail(InvalidArgument("nothing to run: --mixes none and no --traces DIR"));
  auto nodes = ParseIntFlag("--nodes", a.nodes, 1, 100000);
  if (!nodes.ok()) return Fail(nodes.status());
  o.generated_nodes = static_cast<int>(*nodes);
  auto gen_seed = ParseSeedFlag("--gen-seed", a.gen_seed);
  if (!gen_seed.ok()) return Fail(gen_seed.status());
  o.gen_seed = *gen_seed;
  if (!a.past_gen_seed.empty()) {
    auto past = ParseSeedFlag("--past-gen-seed", a.past_gen_seed);
    if (!past.ok()) return Fail(past.status());
    if (*past == o.gen_seed)
      return Fail(InvalidArgument(
          "--past-gen-seed: " + a.past_gen_seed +
          " is the --gen-seed of the measured workload; the past needs another sample"));
    o.past_gen_seed = *past;
  }
  auto tune = ParseNumberFlag("--tune", a.tune, 0, kMaxTuneRatio, /*min_open=*/true);
  if (!tune.ok()) return Fail(tune.status());
  o.tune_ratio = *tune;
  auto threads = ParseThreadsFlag("--threads", a.threads);
  if (!threads.ok()) return Fail(threads.status());
  o.threads = *threads;
  if (a.mode != "fill" && a.mode != "replay")
    return Fail(InvalidArgument("--mode: '" + a.mode + "' must be fill or replay"));
  o.mode = a.mode == "replay" ? FamilyMode::kReplay : FamilyMode::kFill;
  if (o.past_gen_seed && o.mode == FamilyMode::kReplay)
    return Fail(InvalidArgument("--past-gen-seed applies to --mode fill only"));
  if (a.bound && o.mode == FamilyMode::kReplay)
    return Fail(InvalidArgument("--bound applies to --mode fill only"));
  o.bound = a.bound;
  auto scale = ParseNumberFlag("--time-scale", a.time_scale, 1, kMaxTimeScale);
  if (!scale.ok()) return Fail(scale.status());
  o.time_scale = *scale;
  auto trace_scale = ParseNumberFlag("--trace-time-scale", a.trace_time_scale, 1, kMaxTimeScale);
  if (!trace_scale.ok()) return Fail(trace_scale.status());
  o.trace_time_scale = *trace_scale;

  // Read every trace file before the first run, so a missing file fails fast.
  std::vector<NodeSpec> trace_nodes;
  std::vector<std::pair<std::string, std::vector<Workload>>> trace_pods;
  if (!trace_names->empty()) {
    auto n = ReadNodesCsv(a.traces + "/" + kPaperNodeFile);
    if (!n.ok()) return Fail(n.status());
    trace_nodes = std::move(n).value();
    for (const std::string& name : *trace_names) {
      auto p = ReadPodsCsv(a.traces + "/openb_pod_list_" + name + ".csv");
      if (!p.ok()) return Fail(p.status());
      trace_pods.emplace_back(name, std::move(p).value());
    }
  }

  const auto t0 = std::chrono::steady_clock::now();
  const size_t total = mixes->size() + trace_pods.size();
  std::vector<FamilyMixResult> results;
  auto progress = [&](const FamilyMixResult& r) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "[%zu/%zu] %s %s: %.1f s (%.0f s elapsed)\n", results.size(), total,
                 r.kind.c_str(), r.name.c_str(), r.wall_seconds, elapsed);
  };
  const std::set<std::string> wanted(mixes->begin(), mixes->end());
  for (const FamilyMix& m : DefaultMixFamily()) {
    if (!wanted.count(m.name)) continue;
    auto r = RunFamilyMix(m, o);
    if (!r.ok()) return Fail(r.status());
    results.push_back(std::move(r).value());
    progress(results.back());
  }
  for (const auto& [name, pods] : trace_pods) {
    auto r = RunTraceMix(name, "openb_pod_list_" + name + ".csv", trace_nodes, pods, o);
    if (!r.ok()) return Fail(r.status());
    results.push_back(std::move(r).value());
    progress(results.back());
  }
  const std::string table = FamilyTable(results, a.candidate, a.reference);
  std::fputs(table.c_str(), stdout);
  if (!a.table.empty()) {
    Status st = WriteFileAtomic(a.table, table);
    if (!st.ok()) return Fail(st);
  }
  if (!a.json.empty()) {
    Status st = WriteFileAtomic(a.json, FamilyJson(results, o, a.candidate, a.reference));
    if (!st.ok()) return Fail(st);
  }
  return 0;
}

}  // namespace

void AddSimFamilyCommand(CLI::App& sim, int& rc) {
  static FamilyArgs a;
  auto* c = sim.add_subcommand(
      "family", "Compare policies over a family of generated workload mixes and the trace files");
  c->add_option("--policy", a.policies,
                "Policies, comma-separated, each once: " + JoinNames(BuiltinPolicies().Names()))
      ->default_val(a.policies);
  c->add_option("--candidate", a.candidate, "Policy the summary judges (one of --policy)")
      ->default_val(a.candidate);
  c->add_option("--reference", a.reference, "Policy it is judged against (one of --policy)")
      ->default_val(a.reference);
  c->add_option("--seeds", a.seeds, "Fill seeds, e.g. 42-51 or 1,2,3 (at most 1000, none twice)")
      ->default_val(a.seeds);
  c->add_option("--mixes", a.mixes,
                "Generated mixes: all, none or a comma-separated list (see --list)")
      ->default_val(a.mixes);
  c->add_option("--traces", a.traces,
                "Directory of the trace CSV files (openb_node_list_gpu_node.csv and "
                "openb_pod_list_<name>.csv); without it no trace file runs");
  c->add_option(
       "--trace-names", a.trace_names,
       "Trace files to run: all or a comma-separated list of " + JoinNames(PaperTraceNames()))
      ->default_val(a.trace_names);
  c->add_option("--nodes", a.nodes, "Nodes of the generated clusters, 1..100000")
      ->type_name("INT")
      ->default_val(a.nodes);
  c->add_option("--gen-seed", a.gen_seed, "Seed of the generated workloads, 0..2^64-1")
      ->type_name("UINT")
      ->default_val(a.gen_seed);
  c->add_option("--past-gen-seed", a.past_gen_seed,
                "Fill mode: before each run, tessera observes a second sample of each generated "
                "mix, drawn with this seed, as the cluster's past workload (trace files: none)")
      ->type_name("UINT");
  c->add_option("--tune", a.tune, "End of the run as x GPU capacity, 0 < tune <= 4")
      ->type_name("NUMBER")
      ->default_val(a.tune);
  c->add_option("--threads", a.threads, "Worker threads, 0..256 (0 = all cores)")
      ->type_name("INT")
      ->default_val(a.threads);
  c->add_option("--mode", a.mode, "fill (the FGD protocol) or replay (departures and retries)")
      ->default_val(a.mode);
  c->add_option("--time-scale", a.time_scale,
                "Replay: divide the generated mixes' arrival times by K, 1 <= K <= 1e6")
      ->type_name("K")
      ->default_val(a.time_scale);
  c->add_option("--trace-time-scale", a.trace_time_scale,
                "Replay: divide the trace files' arrival times by K, 1 <= K <= 1e6")
      ->type_name("K")
      ->default_val(a.trace_time_scale);
  c->add_option("--json", a.json, "Write the results as JSON");
  c->add_option("--table", a.table, "Write the printed table to FILE as well");
  c->add_flag("--bound", a.bound,
              "Fill mode: also report each mix's fluid lower bound on the unallocated GPU % "
              "and the share of the reference's gap to it that the candidate closes");
  c->add_flag("--list", a.list, "Print the generated mixes and their flags, and exit");
  c->callback([&rc] { rc = RunFamily(a); });
}

}  // namespace tessera
