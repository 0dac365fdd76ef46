// tessera-bench-kube: end-to-end scheduling throughput and restart time of `tessera scheduler`
// through the real HTTP stack (client, informers, binding) against the in-process fake API
// server (tests/kube/fake_apiserver.h), in the shape of kube-scheduler's SchedulingBasic.
//
//   tessera-bench-kube --nodes 5000 --pods 10000 [--restart-pods 50000] [--json FILE]
//
// Phases, each on a fresh server:
//  1. plain GPU pods (nvidia.com/gpu: 1): pods bound per second, from the moment the scheduler
//     has listed everything to the last binding;
//  2. slice pods on a mixed fleet (half the nodes A100s with four GPUs in seven 1g.10gb MIG
//     instances, half H100s without MIG): a quarter ask nvidia.com/mig-1g.10gb, a quarter are
//     strict-isolation memory shares (a MIG instance), half standard memory shares (MPS clients
//     with a thread % and memory limit); the same rate, and how many got each mechanism;
//  3. restart: restart_pods pods already bound (with assignment annotations) on the nodes; time
//     from process start of a scheduler to the first binding of a newly pending pod.
// Every phase checks that no pod was bound twice, no GPU is over-assigned and none was lost.
// Prints a table; --json writes {"pods_per_s", "slice_pods_per_s", "slice_mig_pods",
// "slice_mps_pods", "restart_resume_s", "double_bindings", "lost_pods", ...}.
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include "kube/scheduler.h"
#include "tests/kube/fake_apiserver.h"
#include "tests/kube/test_objects.h"

namespace tessera::kube {
namespace {

using Clock = std::chrono::steady_clock;

Json Pod(const std::string& name, Json limits, const std::string& node = "",
         const std::string& assignment = "", const std::string& isolation = "") {
  Json ann = Json::object();
  if (!isolation.empty()) ann[kAnnotationIsolation] = isolation;
  if (!assignment.empty()) ann[kAnnotationAssignment] = assignment;
  Json spec = {
      {"schedulerName", "tessera"},
      {"containers", Json::array({{{"name", "c"},
                                   {"resources",
                                    {{"limits", limits},
                                     {"requests", {{"cpu", "100m"}, {"memory", "256Mi"}}}}}}})}};
  if (!node.empty()) spec["nodeName"] = node;
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "bench"}, {"annotations", ann}}},
          {"spec", spec},
          {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
}

struct PhaseResult {
  double pods_per_s = 0;
  double seconds = 0;
  int64_t bound = 0, double_bindings = 0, lost = 0, over_assigned = 0;
  std::map<std::string, int64_t> kinds;  // assignment kind -> pods
};

// Counts bindings, lost pods, assignment kinds and over-assignment from the server's final
// state: a GPU given whole and shared, more than a whole GPU of shares, a MIG instance given
// twice, or MPS memory limits above the GPU's memory.
void Audit(testing::FakeApiServer& s, PhaseResult& r) {
  std::map<std::string, int> milli, whole, instance;
  std::map<std::string, int64_t> mps_mib;
  for (const auto& p : s.List("/api/v1/namespaces/bench/pods")) {
    const std::string name = p["metadata"]["name"];
    const std::string node = p["spec"].value("nodeName", "");
    if (node.empty()) {
      ++r.lost;
      continue;
    }
    if (s.BindingsOf("bench", name) > 1) ++r.double_bindings;
    const auto& ann = p["metadata"].value("annotations", Json::object());
    if (!ann.contains(kAnnotationAssignment)) continue;
    auto a = DecodeAssignment(ann[kAnnotationAssignment].get<std::string>());
    if (!a.ok()) continue;
    ++r.kinds[std::string(AssignmentKindName(a->kind))];
    for (int g : a->gpus) {
      const std::string gpu = node + "/" + std::to_string(g);
      switch (a->kind) {
        case AssignmentKind::kExclusive:
          ++whole[gpu];
          break;
        case AssignmentKind::kShare:
          milli[gpu] += a->gpu_milli;
          break;
        case AssignmentKind::kMig:
          ++instance[gpu + "/" + a->mig_instance];
          break;
        case AssignmentKind::kMps:
          mps_mib[gpu] += a->memory_limit_mib;
          break;
        default:
          break;
      }
    }
  }
  for (const auto& [gpu, m] : milli) r.over_assigned += m > 1000 || whole.count(gpu);
  for (const auto& [gpu, n] : whole) r.over_assigned += n > 1;
  for (const auto& [inst, n] : instance) r.over_assigned += n > 1;
  for (const auto& [gpu, mib] : mps_mib) r.over_assigned += mib > 81920 || whole.count(gpu);
}

SchedulerRuntimeConfig Config(int bind_threads) {
  SchedulerRuntimeConfig c;
  c.core.policy = "bestfit";
  c.cycle_interval_s = 0.005;
  c.bind_threads = bind_threads;
  c.pod_events = false;
  c.pod_conditions = false;
  return c;
}

Result<PhaseResult> Throughput(int nodes, int pods, bool slices, int bind_threads) {
  testing::FakeApiServerOptions opt;
  opt.threads = bind_threads + 16;
  testing::FakeApiServer server(opt);
  TESSERA_RETURN_IF_ERROR(server.Start());
  const std::string seven = "1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6";
  for (int n = 0; n < nodes; ++n) {
    const std::string name = "n" + std::to_string(n);
    (void)server.Create("/api/v1/nodes", slices && n % 2 == 0
                                             ? kubetest::MigNodeJson(name, {seven, seven, seven,
                                                                            seven, "", "", "", ""})
                                             : kubetest::GpuNodeJson(name, 8));
  }
  for (int i = 0; i < pods; ++i) {
    const std::string name = "p" + std::to_string(i);
    Json pod;
    if (!slices)
      pod = Pod(name, {{"nvidia.com/gpu", "1"}});
    else if (i % 4 == 0)
      pod = Pod(name, {{"nvidia.com/mig-1g.10gb", "1"}});
    else if (i % 4 == 1)
      pod = Pod(name, {{"tessera.io/gpu-memory", "8Gi"}}, "", "", "strict");
    else
      pod = Pod(name, {{"tessera.io/gpu-memory", std::to_string(4 + (i % 8) * 2) + "Gi"}});
    (void)server.Create("/api/v1/namespaces/bench/pods", pod);
  }
  auto client = Client::Create(server.client_config());
  if (!client.ok()) return client.status();
  Scheduler sched(**client, Config(bind_threads));
  std::atomic<bool> stop{false};
  Status run;
  std::thread t([&] { run = sched.Run(stop); });
  const auto deadline = Clock::now() + std::chrono::seconds(600);
  while (Clock::now() < deadline && sched.stats().binds_ok < pods && run.ok())
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto st = sched.stats();
  stop = true;
  t.join();
  if (!run.ok()) return run;
  PhaseResult r;
  r.bound = st.binds_ok;
  // From the end of the initial lists (scheduler ready) to the last binding.
  r.seconds = st.last_bind_s - st.started_s;
  r.pods_per_s = r.seconds > 0 ? static_cast<double>(st.binds_ok) / r.seconds : 0;
  Audit(server, r);
  return r;
}

Result<PhaseResult> Restart(int nodes, int bound_pods, int bind_threads, double* resume_s) {
  testing::FakeApiServerOptions opt;
  opt.threads = bind_threads + 16;
  testing::FakeApiServer server(opt);
  TESSERA_RETURN_IF_ERROR(server.Start());
  for (int n = 0; n < nodes; ++n)
    (void)server.Create("/api/v1/nodes", kubetest::GpuNodeJson("n" + std::to_string(n), 8));
  // Bound pods: 8 one-GPU pods per node while GPUs last, CPU-only pods after that.
  for (int i = 0; i < bound_pods; ++i) {
    const int node = i % nodes;
    const int slot = i / nodes;
    const std::string nn = "n" + std::to_string(node);
    if (slot < 7) {
      Assignment a;
      a.node = nn;
      a.kind = AssignmentKind::kExclusive;
      a.gpus = {slot};
      a.uuids = {"GPU-" + nn + "-" + std::to_string(slot)};
      (void)server.Create(
          "/api/v1/namespaces/bench/pods",
          Pod("b" + std::to_string(i), {{"nvidia.com/gpu", "1"}}, nn, EncodeAssignment(a)));
    } else {
      (void)server.Create("/api/v1/namespaces/bench/pods",
                          Pod("b" + std::to_string(i), Json::object(), nn));
    }
  }
  (void)server.Create("/api/v1/namespaces/bench/pods", Pod("new", {{"nvidia.com/gpu", "1"}}));
  auto client = Client::Create(server.client_config());
  if (!client.ok()) return client.status();
  const auto t0 = Clock::now();
  Scheduler sched(**client, Config(bind_threads));
  std::atomic<bool> stop{false};
  Status run;
  std::thread t([&] { run = sched.Run(stop); });
  while (sched.stats().binds_ok < 1 && run.ok() && Clock::now() - t0 < std::chrono::seconds(300))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  *resume_s = std::chrono::duration<double>(Clock::now() - t0).count();
  stop = true;
  t.join();
  if (!run.ok()) return run;
  PhaseResult r;
  Audit(server, r);
  return r;
}

}  // namespace
}  // namespace tessera::kube

int main(int argc, char** argv) {
  using namespace tessera::kube;
  CLI::App app{"tessera-bench-kube: end-to-end scheduling throughput and restart time"};
  int nodes = 5000, pods = 10000, restart_pods = 50000, threads = 16;
  std::string json;
  app.add_option("--nodes", nodes, "Nodes (8 GPUs each)")->check(CLI::Range(1, 100000));
  app.add_option("--pods", pods, "Pods per throughput phase")->check(CLI::Range(1, 1000000));
  app.add_option("--restart-pods", restart_pods, "Bound pods for the restart phase")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--bind-threads", threads, "Parallel binding requests")->check(CLI::Range(1, 256));
  app.add_option("--json", json, "Write the results as JSON");
  CLI11_PARSE(app, argc, argv);

  auto plain = Throughput(nodes, pods, false, threads);
  if (!plain.ok())
    return std::fprintf(stderr, "tessera-bench-kube: %s\n", plain.status().message().c_str()), 1;
  auto slice = Throughput(nodes, pods, true, threads);
  if (!slice.ok())
    return std::fprintf(stderr, "tessera-bench-kube: %s\n", slice.status().message().c_str()), 1;
  double resume = -1;
  auto restart = Restart(nodes, restart_pods, threads, &resume);
  if (!restart.ok())
    return std::fprintf(stderr, "tessera-bench-kube: %s\n", restart.status().message().c_str()), 1;

  const int64_t doubles = plain->double_bindings + slice->double_bindings +
                          restart->double_bindings + plain->over_assigned + slice->over_assigned +
                          restart->over_assigned;
  const int64_t lost = plain->lost + slice->lost;
  std::printf("nodes %d, pods %d, restart with %d bound pods, %d bind threads\n", nodes, pods,
              restart_pods, threads);
  std::printf("%-28s %10s %10s %8s %8s\n", "phase", "pods/s", "seconds", "double", "lost");
  std::printf("%-28s %10.0f %10.2f %8lld %8lld\n", "plain GPU pods", plain->pods_per_s,
              plain->seconds, static_cast<long long>(plain->double_bindings + plain->over_assigned),
              static_cast<long long>(plain->lost));
  std::printf("%-28s %10.0f %10.2f %8lld %8lld\n", "slice pods (MIG, MPS)", slice->pods_per_s,
              slice->seconds, static_cast<long long>(slice->double_bindings + slice->over_assigned),
              static_cast<long long>(slice->lost));
  std::string kinds;
  for (const auto& [k, n] : slice->kinds) kinds += " " + k + " " + std::to_string(n);
  std::printf("%-28s%s\n", "  slice assignments:", kinds.c_str());
  std::printf("%-28s %10s %10.2f %8lld %8s\n", "restart: resume scheduling", "-", resume,
              static_cast<long long>(restart->double_bindings + restart->over_assigned), "-");
  if (!json.empty()) {
    Json out = {{"nodes", nodes},
                {"pods", pods},
                {"restart_bound_pods", restart_pods},
                {"bind_threads", threads},
                {"pods_per_s", plain->pods_per_s},
                {"slice_pods_per_s", slice->pods_per_s},
                {"slice_kinds", slice->kinds},
                {"slice_mig_pods", slice->kinds.count("mig") ? slice->kinds.at("mig") : 0},
                {"slice_mps_pods", slice->kinds.count("mps") ? slice->kinds.at("mps") : 0},
                {"restart_resume_s", resume},
                {"double_bindings", doubles},
                {"lost_pods", lost}};
    std::ofstream f(json + ".tmp");
    f << out.dump(2) << "\n";
    f.close();
    if (!f || std::rename((json + ".tmp").c_str(), json.c_str()) != 0)
      return std::fprintf(stderr, "tessera-bench-kube: cannot write %s\n", json.c_str()), 1;
  }
  return doubles == 0 && lost == 0 ? 0 : 2;
}
