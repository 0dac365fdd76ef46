// `tessera sim queues`: the multi-tenant queue simulation of sim/queue_sim.h for one or more
// queue policies on one cluster file and workload. Prints a table to stdout; --json also writes
// the results (atomically, after every run succeeded). Errors go to stderr as
// "tessera: <message>" with exit code 1.
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
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

struct QueuesArgs {
  std::string cluster, workload, policies = "tessera", placement = kDefaultPolicy, json, seed;
  double horizon = 0, time_scale = 1;
};

int RunSimQueues(const QueuesArgs& a) {
  if (!a.json.empty()) {
    const std::filesystem::path dir = std::filesystem::path(a.json).parent_path();
    std::error_code ec;
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
      return Fail(IoError("cannot write '" + a.json + "': no directory '" + dir.string() + "'"));
  }
  QueueSimOptions opt;
  opt.placement = a.placement;
  if (!a.seed.empty()) {
    const char* end = a.seed.data() + a.seed.size();
    auto [p, ec] = std::from_chars(a.seed.data(), end, opt.seed);
    if (ec != std::errc() || p != end)
      return Fail(InvalidArgument("--seed: '" + a.seed + "' is not a non-negative integer"));
  }
  if (!(a.horizon >= 0)) return Fail(InvalidArgument("--horizon must be >= 0"));
  opt.horizon_s = a.horizon;
  const std::vector<std::string> policies = SplitComma(a.policies);
  if (policies.empty()) return Fail(InvalidArgument("--policy: no policy given"));
  std::set<std::string> seen;
  for (const std::string& p : policies) {
    if (!seen.insert(p).second) return Fail(InvalidArgument("--policy: '" + p + "' given twice"));
    QueueCluster probe;
    auto applied = ApplyQueuePolicy(probe, p);
    if (!applied.ok()) return Fail(applied.status());
  }
  auto cluster = ReadQueueCluster(a.cluster);
  if (!cluster.ok()) return Fail(cluster.status());
  auto jobs = ReadQueueWorkload(a.workload, *cluster);
  if (!jobs.ok()) return Fail(jobs.status());
  if (a.time_scale != 1) {
    Status st = CompressQueueArrivals(*jobs, a.time_scale);
    if (!st.ok()) return Fail(InvalidArgument("--time-scale: " + st.message()));
  }
  std::vector<QueueSimResult> results;
  for (const std::string& p : policies) {
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
  q->add_option("--policy", args->policies, "Queue policies, comma-separated: fifo, kueue, tessera")
      ->default_val(args->policies);
  q->add_option("--placement", args->placement, "Placement policy of the engine")
      ->default_val(args->placement);
  q->add_option("--seed", args->seed, "Seed of the engine's tie-break order (default 42)");
  q->add_option("--horizon", args->horizon,
                "Stop the simulation at this time in seconds (0: run "
                "until every job is done or can never run)")
      ->default_val(0);
  q->add_option("--time-scale", args->time_scale,
                "Divide arrival times by this factor (durations unchanged) to raise the load")
      ->default_val(1.0);
  q->add_option("--json", args->json, "Write the results as JSON");
  q->callback([args, &rc] { rc = RunSimQueues(*args); });
}

}  // namespace tessera
