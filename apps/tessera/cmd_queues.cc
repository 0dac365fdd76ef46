// `tessera sim queues`: the multi-tenant queue simulation of sim/queue_sim.h for one or more
// queue policies on one cluster file and workload. Prints a table to stdout; --json also writes
// the results (atomically, after every run succeeded). Errors go to stderr as
// "tessera: <message>" with exit code 1.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "apps/tessera/cli_util.h"
#include "apps/tessera/commands.h"
#include "policies/builtin.h"
#include "sim/queue_scenario.h"
#include "sim/queue_sim.h"
#include "sim/report.h"

namespace tessera {
namespace {

// --horizon: about 31 years of simulated time.
constexpr double kMaxHorizonS = 1e9;

struct QueuesArgs {
  std::string cluster, workload, policies = "tessera", placement = kDefaultPolicy, json, seed;
  std::string horizon = "0", time_scale = "1";
  bool seed_given = false;
};

int RunSimQueues(const QueuesArgs& a) {
  auto policies = ParseNameList("--policy", a.policies, QueuePolicyNames());
  if (!policies.ok()) return Fail(policies.status());
  auto placement = ParseNameList("--placement", a.placement, BuiltinPolicies().Names());
  if (!placement.ok()) return Fail(placement.status());
  if (placement->size() != 1)
    return Fail(
        InvalidArgument("--placement: one policy name expected, got '" + a.placement + "'"));
  QueueSimOptions opt;
  opt.placement = placement->front();
  if (a.seed_given) {
    auto seed = ParseSeedFlag("--seed", a.seed);
    if (!seed.ok()) return Fail(seed.status());
    opt.seed = *seed;
  }
  auto horizon = ParseNumberFlag("--horizon", a.horizon, 0, kMaxHorizonS);
  if (!horizon.ok()) return Fail(horizon.status());
  opt.horizon_s = *horizon;
  auto time_scale = ParseNumberFlag("--time-scale", a.time_scale, 1, kMaxTimeScale);
  if (!time_scale.ok()) return Fail(time_scale.status());
  if (!a.json.empty()) {
    const std::filesystem::path dir = std::filesystem::path(a.json).parent_path();
    std::error_code ec;
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
      return Fail(IoError("cannot write '" + a.json + "': no directory '" + dir.string() + "'"));
  }
  auto cluster = ReadQueueCluster(a.cluster);
  if (!cluster.ok()) return Fail(cluster.status());
  auto jobs = ReadQueueWorkload(a.workload, *cluster);
  if (!jobs.ok()) return Fail(jobs.status());
  if (*time_scale != 1) {
    Status st = CompressQueueArrivals(*jobs, *time_scale);
    if (!st.ok()) return Fail(InvalidArgument("--time-scale: " + st.message()));
  }
  std::vector<QueueSimResult> results;
  for (const std::string& p : *policies) {
    opt.policy = p;
    auto r = RunQueueSim(*cluster, *jobs, opt);
    if (!r.ok()) return Fail(r.status());
    r->outcomes.clear();
    results.push_back(std::move(r).value());
  }
  if (!a.json.empty()) {
    Status st = WriteFileAtomic(a.json, QueueSimJson(results, a.cluster, a.workload));
    if (!st.ok()) return Fail(st);
  }
  std::fputs(QueueSimTable(results).c_str(), stdout);
  return 0;
}

}  // namespace

void AddSimQueuesCommand(CLI::App& sim, int& rc) {
  auto args = std::make_shared<QueuesArgs>();
  auto* q = sim.add_subcommand(
      "queues",
      "Multi-tenant queues: jobs arrive, wait for quota and placement, run and depart; per-queue "
      "waits, shares, fairness and preemptions");
  q->add_option("--cluster", args->cluster,
                "Cluster file (JSON: nodes, cohorts, queues, admission; see docs/QUEUES.md)")
      ->required();
  q->add_option("--workload", args->workload,
                "Workload CSV (name,queue,arrival_s,duration_s,...) or an Alibaba openb pod CSV")
      ->required();
  q->add_option("--policy", args->policies,
                "Queue policies, comma-separated, each once: " + JoinNames(QueuePolicyNames()))
      ->default_val(args->policies);
  q->add_option("--placement", args->placement,
                "Placement policy of the engine: " + JoinNames(BuiltinPolicies().Names()))
      ->default_val(args->placement);
  auto* seed = q->add_option("--seed", args->seed,
                             "Seed of the engine's tie-break order, 0..2^64-1 (default 42)");
  q->add_option("--horizon", args->horizon,
                "Stop the simulation at this time in seconds, 0..1e9 (0: run until every job is "
                "done or can never run)")
      ->type_name("NUMBER")
      ->default_val("0");
  q->add_option("--time-scale", args->time_scale,
                "Divide arrival times by this factor, 1 <= factor <= 1e6 (durations unchanged), "
                "to raise the load")
      ->type_name("NUMBER")
      ->default_val("1");
  q->add_option("--json", args->json, "Write the results as JSON");
  q->callback([args, seed, &rc] {
    args->seed_given = seed->count() > 0;
    rc = RunSimQueues(*args);
  });
}

}  // namespace tessera
