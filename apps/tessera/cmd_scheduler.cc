// `tessera scheduler`: schedules pods with spec.schedulerName == tessera on a Kubernetes
// cluster through the engine, queues and sharing planner (src/kube/scheduler.h). Runs until
// SIGINT/SIGTERM (graceful: in-flight binds finish, the lease is released) or until it loses
// leadership (exit code 0, to be restarted). Errors: stderr "tessera: <message>", exit 1.
#include <unistd.h>
#include <csignal>
#include <cstdio>
#include <memory>
#include <random>
#include <string>

#include "apps/tessera/cli_util.h"
#include "apps/tessera/commands.h"
#include "kube/scheduler.h"

namespace tessera {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) {
  g_stop = true;
}

struct SchedulerArgs {
  KubeClientFlags kube;
  std::string config, identity, lease_namespace;
  std::string metrics_address = "0.0.0.0:10259";
  bool leader_elect = false;
  int bind_threads = 0;
  double kube_api_qps = 200;  // client-side rate limit of every API request
  int kube_api_burst = 400;
};

int RunScheduler(const SchedulerArgs& a) {
  kube::SchedulerRuntimeConfig cfg;
  if (!a.config.empty()) {
    auto c = kube::LoadSchedulerConfig(a.config);
    if (!c.ok()) return Fail(c.status());
    cfg = std::move(*c);
  }
  if (a.leader_elect) cfg.leader_elect = true;
  if (cfg.metrics_addr.empty()) cfg.metrics_addr = a.metrics_address;
  if (a.bind_threads > 0) cfg.bind_threads = a.bind_threads;
  if (!a.lease_namespace.empty()) cfg.leader.ns = a.lease_namespace;
  if (cfg.leader.identity.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    std::random_device rd;
    cfg.leader.identity =
        a.identity.empty() ? std::string(host) + "_" + std::to_string(rd() % 1000000) : a.identity;
  }
  Status valid = cfg.Validate();
  if (!valid.ok()) return Fail(valid);
  auto client_cfg = KubeClientConfig(a.kube);
  if (!client_cfg.ok()) return Fail(client_cfg.status());
  if (a.kube_api_burst < 1) return Fail(InvalidArgument("--kube-api-burst must be at least 1"));
  client_cfg->qps = a.kube_api_qps;
  client_cfg->burst = a.kube_api_burst;
  auto client = kube::Client::Create(*client_cfg);
  if (!client.ok()) return Fail(client.status());
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  kube::Scheduler sched(**client, cfg);
  std::fprintf(stderr, "tessera scheduler: %s, identity %s\n",
               cfg.leader_elect ? "leader election on" : "single replica",
               cfg.leader.identity.c_str());
  Status s = sched.Run(g_stop);
  if (!s.ok()) return Fail(s);
  const auto st = sched.stats();
  std::fprintf(stderr, "tessera scheduler: stopped; %lld pods bound, %lld bind failures\n",
               static_cast<long long>(st.binds_ok), static_cast<long long>(st.binds_failed));
  return 0;
}

}  // namespace

void AddSchedulerCommand(CLI::App& app, int& rc) {
  auto args = std::make_shared<SchedulerArgs>();
  auto* s = app.add_subcommand("scheduler",
                               "Schedule pods with schedulerName: tessera on a Kubernetes cluster");
  AddKubeClientFlags(*s, args->kube);
  s->add_option("--config", args->config, "Scheduler configuration (YAML, docs/OPERATIONS.md)");
  s->add_flag("--leader-elect", args->leader_elect, "Run with Lease-based leader election");
  s->add_option("--identity", args->identity, "Leader election identity (default: host_random)");
  s->add_option("--lease-namespace", args->lease_namespace, "Namespace of the Lease");
  s->add_option("--bind-threads", args->bind_threads, "Parallel binding requests");
  s->add_option("--kube-api-qps", args->kube_api_qps,
                "Client-side limit of API requests per second (0: unlimited)")
      ->default_val(args->kube_api_qps);
  s->add_option("--kube-api-burst", args->kube_api_burst, "Burst of the client-side limit")
      ->default_val(args->kube_api_burst);
  s->add_option("--metrics-address", args->metrics_address,
                "host:port for /healthz and /metrics (empty: off)")
      ->default_val(args->metrics_address);
  s->callback([args, &rc] { rc = RunScheduler(*args); });
}

}  // namespace tessera
