// tessera-bench-extender: the cost of one pod's filter, prioritize and bind in `tessera
// extender` as the cluster grows, in process (no HTTP: tessera-bench-extender-slow measures the
// server).
//
//   tessera-bench-extender [--nodes 5000] [--pods 10000] [--candidates 0] [--requests 200]
//                          [--json FILE]
//
// The extender knows --nodes GPU nodes (three in four with 8 H100s, one in four with 4 T4s),
// as informers deliver them, and --pods running GPU pods (1 GPU each, with their
// tessera.io/assignment) spread over them. Then --requests pending pods (1 GPU; one in four
// pinned to T4s) are placed one after another as kube-scheduler would with the extender
// configured for filter, prioritize and bind (nodeCacheCapable): filter over the candidates
// (--candidates nodes drawn at random, 0 = every node, as kube-scheduler sends with
// percentageOfNodesToScore 100), prioritize over the nodes that passed, bind to the best, and
// the informer's update of the bound pod. The request bodies are built before the clock starts
// (the server's JSON parsing is not measured here). Prints the per-pod latency (p50, p99, mean) of
// each step and of the whole; --json writes {"nodes", "pods", "candidates", "requests",
// "filter_ms": {"p50", "p99", "mean"}, "prioritize_ms": ..., "bind_ms": ..., "pod_ms": ...,
// "pods_per_s", "bind_errors"}.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kube/extender.h"
#include "tests/kube/test_objects.h"

namespace tessera::kube {
namespace {

using Clock = std::chrono::steady_clock;

Json PodJson(const std::string& name, const std::string& node, const std::string& models,
             const std::optional<Assignment>& a) {
  Json ann = Json::object();
  if (!models.empty()) ann[kAnnotationGpuModels] = models;
  if (a) ann[kAnnotationAssignment] = EncodeAssignment(*a);
  Json pod = {
      {"metadata",
       {{"name", name},
        {"namespace", "ml"},
        {"uid", "uid-" + name},
        {"creationTimestamp", "2026-01-02T03:04:05Z"},
        {"annotations", ann}}},
      {"spec",
       {{"schedulerName", "default-scheduler"},
        {"containers", Json::array({{{"name", "main"},
                                     {"resources",
                                      {{"limits", {{"nvidia.com/gpu", "1"}}},
                                       {"requests", {{"cpu", "4"}, {"memory", "16Gi"}}}}}}})}}},
      {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

struct Stat {
  std::vector<double> ms;
  double Pct(double q) const {
    if (ms.empty()) return 0;
    std::vector<double> s = ms;
    std::sort(s.begin(), s.end());
    return s[std::min(s.size() - 1, static_cast<size_t>(q * static_cast<double>(s.size())))];
  }
  double Mean() const {
    double t = 0;
    for (double x : ms) t += x;
    return ms.empty() ? 0 : t / static_cast<double>(ms.size());
  }
  Json ToJson() const { return {{"p50", Pct(0.5)}, {"p99", Pct(0.99)}, {"mean", Mean()}}; }
};

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

int Run(int nodes, int pods, int candidates, int requests, const std::string& json_path) {
  Extender ext;
  std::vector<std::string> names;
  std::vector<int> gpus_of;
  for (int i = 0; i < nodes; ++i) {
    const bool t4 = i % 4 == 3;
    names.push_back((t4 ? "t4-" : "h100-") + std::to_string(i));
    gpus_of.push_back(t4 ? 4 : 8);
    Status st = ext.UpsertNode(
        kubetest::GpuNodeJson(names.back(), gpus_of.back(), t4 ? "T4" : "H100-80GB"));
    if (!st.ok()) {
      std::fprintf(stderr, "tessera-bench-extender: %s\n", st.message().c_str());
      return 1;
    }
  }
  // Running pods, one GPU each, filling nodes in turn.
  std::vector<int> used(nodes, 0);
  for (int p = 0, n = 0; p < pods; ++p) {
    int tries = 0;
    while (used[n] >= gpus_of[n] && tries++ < nodes) n = (n + 1) % nodes;
    if (used[n] >= gpus_of[n]) break;
    Assignment a{names[n], AssignmentKind::kExclusive, {used[n]++}, {}, "", 0, 0, 0};
    (void)ext.UpsertPod(PodJson("run-" + std::to_string(p), names[n], "", a));
    n = (n + 1) % nodes;
  }
  std::mt19937 rng(42);
  Stat filter, prioritize, bind, whole;
  int64_t bind_errors = 0;
  const BindFn bind_ok = [](const std::string&, const std::string&, const std::string&,
                            const std::string&,
                            const std::map<std::string, std::string>&) { return Status::Ok(); };
  const auto start = Clock::now();
  for (int r = 0; r < requests; ++r) {
    const std::string name = "new-" + std::to_string(r);
    const Json pod = PodJson(name, "", r % 4 == 0 ? "T4" : "", std::nullopt);
    std::vector<std::string> cand = names;
    if (candidates > 0 && candidates < nodes) {
      std::shuffle(cand.begin(), cand.end(), rng);
      cand.resize(candidates);
    }
    (void)ext.UpsertPod(pod);
    const Json filter_args = {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", cand}};
    const auto t0 = Clock::now();
    const Json f = ext.Filter(filter_args);
    const auto t1 = Clock::now();
    const Json prioritize_args = {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", f["NodeNames"]}};
    const auto t1b = Clock::now();
    std::string best;
    int64_t top = -1;
    if (!f["NodeNames"].empty()) {
      for (const Json& h : ext.Prioritize(prioritize_args))
        if (h["Score"].get<int64_t>() > top) {
          top = h["Score"].get<int64_t>();
          best = h["Host"].get<std::string>();
        }
    }
    const auto t2 = Clock::now();
    if (!best.empty()) {
      const Json res = ext.Bind(
          {{"PodName", name}, {"PodNamespace", "ml"}, {"PodUID", "uid-" + name}, {"Node", best}},
          bind_ok);
      if (!res.value("Error", std::string()).empty()) ++bind_errors;
      auto a = ext.AssignmentOf("uid-" + name);
      (void)ext.UpsertPod(PodJson(name, best, r % 4 == 0 ? "T4" : "", a));
    }
    const auto t3 = Clock::now();
    filter.ms.push_back(Ms(t0, t1));
    prioritize.ms.push_back(Ms(t1b, t2));
    bind.ms.push_back(Ms(t2, t3));
    whole.ms.push_back(Ms(t0, t1) + Ms(t1b, t3));
  }
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  const double rate = secs > 0 ? requests / secs : 0;
  std::printf("nodes %d, running pods %d, candidates %d, pods placed %d\n", nodes, pods,
              candidates > 0 ? std::min(candidates, nodes) : nodes, requests);
  std::printf("%-11s %9s %9s %9s\n", "ms per pod", "p50", "p99", "mean");
  for (const auto& [label, s] : {std::pair<const char*, const Stat*>{"filter", &filter},
                                 {"prioritize", &prioritize},
                                 {"bind", &bind},
                                 {"whole", &whole}})
    std::printf("%-11s %9.3f %9.3f %9.3f\n", label, s->Pct(0.5), s->Pct(0.99), s->Mean());
  std::printf("pods/s %.1f, bind errors %lld\n", rate, static_cast<long long>(bind_errors));
  if (!json_path.empty()) {
    Json j = {{"nodes", nodes},
              {"pods", pods},
              {"candidates", candidates},
              {"requests", requests},
              {"filter_ms", filter.ToJson()},
              {"prioritize_ms", prioritize.ToJson()},
              {"bind_ms", bind.ToJson()},
              {"pod_ms", whole.ToJson()},
              {"pods_per_s", rate},
              {"bind_errors", bind_errors}};
    std::ofstream(json_path) << j.dump(2) << "\n";
  }
  return bind_errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tessera::kube

int main(int argc, char** argv) {
  CLI::App app{"Per-pod cost of tessera extender's filter, prioritize and bind"};
  int nodes = 5000, pods = 10000, candidates = 0, requests = 200;
  std::string json;
  app.add_option("--nodes", nodes, "GPU nodes the extender knows")->check(CLI::Range(1, 100000));
  app.add_option("--pods", pods, "Running GPU pods, one GPU each")->check(CLI::Range(0, 1000000));
  app.add_option("--candidates", candidates, "Nodes per filter call, drawn at random; 0 = all")
      ->check(CLI::Range(0, 100000));
  app.add_option("--requests", requests, "Pods placed")->check(CLI::Range(1, 1000000));
  app.add_option("--json", json, "Write the figures as JSON");
  CLI11_PARSE(app, argc, argv);
  return tessera::kube::Run(nodes, pods, candidates, requests, json);
}
