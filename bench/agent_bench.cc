// tessera-bench-agent: the node agent's device plugin under a fake kubelet.
//
//   tessera-bench-agent [--calls 2000] [--gpus 8] [--dir /tmp] [--json FILE]
//
// A fake NVML (tests/agent/fake_nvml.cc, loaded by path) presents --gpus A100-80GB GPUs, each
// split into seven 1g.10gb MIG instances. The plugin serves them over real gRPC on unix sockets
// in a temporary directory, registers with the fake kubelet, and the kubelet side calls
// Allocate --calls times for nvidia.com/mig-1g.10gb, each for a newly bound pod whose
// tessera.io/assignment names one instance (the node keeps the last 110 pods, a full node).
// Each Allocate writes its CDI spec (fsync + rename) under --dir, so the file system there counts:
// /var/run/cdi is a tmpfs on most nodes, like /dev/shm. Prints and writes (--json)
// {"allocate_p50_us", "allocate_p99_us", "rss_mb", "mig_relayout_ms", "calls", "gpus",
// "mig_instances", "mig_relayouts"}; rss_mb is the process's resident set after the calls;
// mig_relayout_ms the median time to apply one GPU's new layout on the fake backend.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "agent/allocate.h"
#include "agent/device_plugin.h"
#include "agent/discovery.h"
#include "agent/mig_apply.h"
#include "agent/nvml.h"
#include "kube/translate.h"
#include "tests/agent/fake_kubelet.h"

using namespace tessera;
using namespace tessera::agent;

namespace {

double RssMb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "tessera-bench-agent: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessera-bench-agent: device plugin Allocate latency and memory"};
  int calls = 2000;
  int gpus = 8;
  std::string json_path;
  std::string base = "/tmp";
  std::string nvml_lib = TESSERA_FAKE_NVML_LIB;
  app.add_option("--calls", calls, "Allocate calls")->check(CLI::Range(1, 1000000));
  app.add_option("--gpus", gpus, "GPUs, 7 MIG instances each")->check(CLI::Range(1, 16));
  app.add_option("--nvml", nvml_lib, "NVML library (the test build's fake)");
  app.add_option("--dir", base, "Where the sockets and CDI specs go (a temporary directory)");
  app.add_option("--json", json_path, "Write the results as JSON");
  CLI11_PARSE(app, argc, argv);

  std::string tmpl = base + "/tessera-bench-agent-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return Fail("cannot create a temporary directory");
  const std::string dir = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{dir};

  nlohmann::json cfg_gpus = nlohmann::json::array();
  const std::string layout =
      "1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6";
  for (int i = 0; i < gpus; ++i)
    cfg_gpus.push_back({{"model", "A100-80GB"},
                        {"uuid", "GPU-bench-" + std::to_string(i)},
                        {"numa", i / 4},
                        {"mig", true},
                        {"mig_layout", layout}});
  const std::string cfg_path = dir + "/nvml.json";
  std::ofstream(cfg_path) << nlohmann::json{{"gpus", cfg_gpus}}.dump();
  setenv("TESSERA_FAKE_NVML_CONFIG", cfg_path.c_str(), 1);
  auto nvml = OpenNvml(nvml_lib);
  if (!nvml.ok()) return Fail(nvml.status().message());
  auto state = Discover(**nvml);
  if (!state.ok()) return Fail(state.status().message());
  int instances = 0;
  for (const GpuState& g : state->gpus) instances += static_cast<int>(g.mig_instances.size());

  agent::testing::FakeKubelet kubelet(dir);
  if (Status st = kubelet.Start(); !st.ok()) return Fail(st.message());
  StaticPodSource pods;
  DevicePluginConfig cfg;
  cfg.plugin_dir = dir;
  cfg.allocator.cdi_dir = dir + "/cdi";
  cfg.allocator.mps_root = dir + "/mps";
  DevicePluginManager plugin(pods, cfg);
  if (Status st = plugin.Start(*state); !st.ok()) return Fail(st.message());
  if (!kubelet.WaitForRegistrations(plugin.Resources().size(), std::chrono::seconds(10)))
    return Fail("the plugins did not register");
  auto list = kubelet.FirstListAndWatch("tessera-mig-1g.10gb.sock");
  if (!list.ok()) return Fail(list.status().message());
  if (list->devices_size() != instances) return Fail("unexpected MIG device count");

  auto stub = kubelet.Dial("tessera-mig-1g.10gb.sock");
  std::vector<BoundPod> window;
  std::vector<double> us;
  us.reserve(static_cast<size_t>(calls));
  for (int i = 0; i < calls; ++i) {
    const int gpu = (i / 7) % gpus;
    const int start = i % 7;
    kube::Assignment a;
    a.node = "bench";
    a.kind = kube::AssignmentKind::kMig;
    a.gpus = {gpu};
    a.uuids = {state->gpus[gpu].uuid};
    a.mig_instance = "1g.10gb@" + std::to_string(start);
    BoundPod p;
    p.uid = "uid-" + std::to_string(i);
    p.ns = "bench";
    p.name = "pod-" + std::to_string(i);
    char ts[32];
    std::snprintf(ts, sizeof(ts), "2026-01-01T%09dZ", i);
    p.bound_at = ts;
    p.containers.push_back({"main", {{"nvidia.com/mig-1g.10gb", 1}}});
    p.annotations[kube::kAnnotationAssignment] = kube::EncodeAssignment(a);
    window.push_back(std::move(p));
    if (window.size() > 110) window.erase(window.begin());
    pods.Set(window);

    v1beta1::AllocateRequest req;
    req.add_container_requests()->add_devices_ids(list->devices(i % instances).id());
    v1beta1::AllocateResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const auto t0 = std::chrono::steady_clock::now();
    grpc::Status st = stub->Allocate(&ctx, req, &resp);
    const auto t1 = std::chrono::steady_clock::now();
    if (!st.ok()) return Fail("Allocate: " + st.error_message());
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  const double rss = RssMb();
  plugin.Stop();
  kubelet.Stop();

  // MIG re-layout on the fake backend: each GPU alternates between seven 1g.10gb instances and
  // two 3g.40gb (destroy 7 + create 2, then destroy 2 + create 7), as the agent applies a
  // MigLayout revision: validation, reading NVML, the process check, destroy and create.
  const std::string two = "3g.40gb@0 3g.40gb@4";
  std::vector<double> relayout_ms;
  MigApplyOptions apply;
  apply.state_dir = dir;  // with the crash-safety journal, as the agent runs
  for (int round = 0; round < 4; ++round) {
    for (int g = 0; g < gpus; ++g) {
      GpuLayoutSpec spec;
      spec.index = g;
      spec.revision = round + 1;
      spec.layout = round % 2 == 0 ? two : layout;
      const auto t0 = std::chrono::steady_clock::now();
      const GpuLayoutStatus st = ApplyGpuLayout(**nvml, spec, apply);
      const auto t1 = std::chrono::steady_clock::now();
      if (st.state != LayoutState::kApplied) return Fail("MIG re-layout: " + st.message);
      relayout_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
  }
  std::sort(relayout_ms.begin(), relayout_ms.end());
  const double relayout_p50 = relayout_ms[relayout_ms.size() / 2];

  std::sort(us.begin(), us.end());
  auto pct = [&](double q) {
    return us[std::min(us.size() - 1, static_cast<size_t>(q * static_cast<double>(us.size())))];
  };
  nlohmann::json out = {{"allocate_p50_us", pct(0.50)},
                        {"allocate_p99_us", pct(0.99)},
                        {"rss_mb", rss},
                        {"mig_relayout_ms", relayout_p50},
                        {"mig_relayouts", relayout_ms.size()},
                        {"calls", calls},
                        {"gpus", gpus},
                        {"mig_instances", instances}};
  std::printf(
      "Allocate over gRPC, %d calls, %d GPUs x 7 MIG instances: p50 %.0f us, p99 %.0f us; "
      "RSS %.1f MB; MIG re-layout (7x 1g.10gb <-> 2x 3g.40gb) median %.2f ms over %zu\n",
      calls, gpus, pct(0.50), pct(0.99), rss, relayout_p50, relayout_ms.size());
  if (!json_path.empty()) {
    std::ofstream f(json_path + ".tmp");
    f << out.dump(2) << "\n";
    f.close();
    if (!f || std::rename((json_path + ".tmp").c_str(), json_path.c_str()) != 0)
      return Fail("cannot write " + json_path);
  }
  return 0;
}
