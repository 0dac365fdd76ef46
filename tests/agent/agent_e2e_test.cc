// The node flow end to end, in one process: the agent loop over the fake NVML publishes the
// node's GPUs to the fake API server, the real scheduler runtime places pods on them (asking
// for a MIG re-layout when needed), the agent applies the layout and reports it, the scheduler
// binds, and the fake kubelet's Allocate gets the device the assignment names. Standard shares
// become MPS clients and the agent starts their GPU's MPS daemon with the limits.
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <nlohmann/json.hpp>

#include "agent/agent_loop.h"
#include "kube/scheduler.h"
#include "kube/translate.h"
#include "kube/webhook.h"
#include "tests/agent/fake_kubelet.h"
#include "tests/agent/fake_node.h"
#include "tests/kube/fake_apiserver.h"
#include "tests/support/test_paths.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;
using kube::testing::FakeApiServer;
using testing_support::FakeNode;
using testing_support::TempPath;
using namespace std::chrono_literals;

// The fake NVML stays mapped for the whole run (one reference never released), so memory its
// process-lifetime objects hold stays reachable for LeakSanitizer when the backends dlclose it.
[[maybe_unused]] void* const kPinnedNvml = dlopen(kNvmlLibrary, RTLD_NOW);

constexpr const char* kNode = "gpu-a";
constexpr const char* kGpuUuid = "GPU-e2e-0";

Json NodeObject() {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", kNode}, {"labels", {{"nvidia.com/mig-7g.80gb.count", "1"}}}}},
          {"spec", Json::object()},
          {"status",
           {{"allocatable", {{"cpu", "64"}, {"memory", "512Gi"}, {"nvidia.com/gpu", "1"}}},
            {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

Json PodObject(const std::string& name, const Json& limits) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "ml"}}},
          {"spec",
           {{"schedulerName", "tessera"},
            {"containers", Json::array({{{"name", "main"},
                                         {"image", "cuda"},
                                         {"resources",
                                          {{"limits", limits},
                                           {"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}})}}}};
}

template <typename F>
bool WaitFor(F cond, std::chrono::milliseconds timeout = 20s) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return cond();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class AgentE2e : public ::testing::Test {
 protected:
  // One A100 with `mig_layout` (MIG off when empty), then `whole_gpus` more without MIG.
  void Init(const std::string& mig_layout, int whole_gpus = 0) {
    Json gpu = {{"model", "A100-80GB"}, {"uuid", kGpuUuid}, {"mig", !mig_layout.empty()}};
    if (!mig_layout.empty()) gpu["mig_layout"] = mig_layout;
    Json gpus = Json::array({gpu});
    for (int i = 1; i <= whole_gpus; ++i)
      gpus.push_back({{"model", "A100-80GB"}, {"uuid", "GPU-e2e-" + std::to_string(i)}});
    nvml_ = std::make_unique<FakeNode>(Json{{"gpus", gpus}});
    char tmpl[] = "/tmp/tessera-e2e-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    record_ = dir_ + "/mps.log";
    setenv("TESSERA_FAKE_MPS_RECORD", record_.c_str(), 1);
    ASSERT_TRUE(server_.Start().ok());
    ASSERT_TRUE(server_.Create("/api/v1/nodes", NodeObject()).ok());
    auto c = kube::Client::Create(server_.client_config());
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
    auto b = OpenNvml();
    ASSERT_TRUE(b.ok()) << b.status().message();
    backend_ = std::move(*b);
    kubelet_ = std::make_unique<testing::FakeKubelet>(dir_);
    ASSERT_TRUE(kubelet_->Start().ok());
    config_.node_name = kNode;
    config_.plugin.plugin_dir = dir_;
    config_.plugin.kubelet_poll_ms = 100;
    config_.plugin.allocator.cdi_dir = dir_ + "/cdi";
    config_.plugin.allocator.mps_root = dir_ + "/mps";
    config_.mps.control = test::SourceDir() + "/tests/agent/fake_mps_control.sh";
    config_.state_dir = dir_ + "/state";
    config_.metrics_address = "127.0.0.1:0";
    config_.proc_root = dir_ + "/proc";
    pods_ = std::make_unique<KubePodSource>(*client_, kNode);
    StartAgent();
  }

  // A new agent process as far as the device plugin is concerned: nothing kept in memory.
  void StartAgent() {
    if (loop_) loop_->Stop();
    loop_.reset();
    loop_ = std::make_unique<AgentLoop>(*client_, *backend_, *pods_, config_);
    ASSERT_TRUE(loop_->Start().ok());
  }

  // The kubelet's Allocate of one device of `endpoint`: NVIDIA_VISIBLE_DEVICES, or the error.
  Result<std::string> KubeletAllocate(const std::string& endpoint, const std::string& device) {
    auto stub = kubelet_->Dial(endpoint);
    v1beta1::AllocateRequest req;
    req.add_container_requests()->add_devices_ids(device);
    v1beta1::AllocateResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    grpc::Status st = stub->Allocate(&ctx, req, &resp);
    if (!st.ok()) return NotFound(std::to_string(st.error_code()) + ": " + st.error_message());
    if (resp.container_responses_size() != 1) return Internal("not one container response");
    return resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES");
  }

  void StartScheduler() {
    kube::SchedulerRuntimeConfig cfg;
    cfg.core.gang_settle_s = 0;
    cfg.core.mig_relayout = true;
    cfg.core.mig_relayout_timeout_s = 60;
    cfg.pod_events = false;
    scheduler_ = std::make_unique<kube::Scheduler>(*client_, cfg);
    scheduler_thread_ = std::thread([this] { EXPECT_TRUE(scheduler_->Run(stop_).ok()); });
  }

  void TearDown() override {
    stop_ = true;
    if (scheduler_thread_.joinable()) scheduler_thread_.join();
    if (loop_) loop_->Stop();
    MpsOptions mo = config_.mps;
    mo.root = config_.plugin.allocator.mps_root;
    MpsManager mps(mo);
    if (!dir_.empty()) (void)mps.Reconcile({});
    loop_.reset();
    kubelet_.reset();
    scheduler_.reset();
    pods_.reset();
    client_.reset();
    server_.Stop();
    unsetenv("TESSERA_FAKE_MPS_RECORD");
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  Json Get(const std::string& path) { return server_.Get(path).value_or(Json()); }
  Json Pod(const std::string& name) { return Get("/api/v1/namespaces/ml/pods/" + name); }
  std::string Annotation(const Json& obj, const char* key) {
    return obj.value("metadata", Json::object())
        .value("annotations", Json::object())
        .value(key, std::string());
  }
  Result<kube::Assignment> WaitForBinding(const std::string& pod) {
    bool bound = WaitFor([&] {
      const Json p = Pod(pod);
      return p.value("spec", Json::object()).value("nodeName", "") == kNode &&
             !Annotation(p, kube::kAnnotationAssignment).empty();
    });
    if (!bound) return NotFound("pod " + pod + " was not bound: " + Pod(pod).dump());
    return kube::DecodeAssignment(Annotation(Pod(pod), kube::kAnnotationAssignment));
  }

  FakeApiServer server_;
  std::unique_ptr<FakeNode> nvml_;
  std::string dir_, record_;
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<GpuBackend> backend_;
  std::unique_ptr<testing::FakeKubelet> kubelet_;
  AgentConfig config_;
  std::unique_ptr<KubePodSource> pods_;
  std::unique_ptr<AgentLoop> loop_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<kube::Scheduler> scheduler_;
  std::thread scheduler_thread_;
};

TEST_F(AgentE2e, AMigPodIsReLaidOutBoundAndAllocatedItsInstance) {
  Init("3g.40gb@0 3g.40gb@4");
  // 1. The agent publishes the inventory and the labels (a stale GFD label goes).
  ASSERT_TRUE(loop_->Pass().ok());
  const Json node = Get("/api/v1/nodes/gpu-a");
  auto inv = kube::DecodeInventory(Annotation(node, kube::kAnnotationInventory));
  ASSERT_TRUE(inv.ok()) << node.dump();
  ASSERT_EQ(inv->size(), 1u);
  EXPECT_EQ((*inv)[0].uuid, kGpuUuid);
  EXPECT_EQ((*inv)[0].mig_layout, "3g.40gb@0 3g.40gb@4");
  const Json labels = node["metadata"]["labels"];
  EXPECT_EQ(labels.value("nvidia.com/mig-3g.40gb.count", ""), "2");
  EXPECT_FALSE(labels.contains("nvidia.com/mig-7g.80gb.count"));
  ASSERT_TRUE(loop_->Pass().ok());
  EXPECT_NE(loop_->Metrics().find("tessera_agent_inventory_publishes_total 1\n"),
            std::string::npos);

  // 2. A 1g.10gb pod needs a re-layout: the scheduler records it in the MigLayout object.
  StartScheduler();
  ASSERT_TRUE(server_
                  .Create("/api/v1/namespaces/ml/pods",
                          PodObject("small", {{"nvidia.com/mig-1g.10gb", "1"}}))
                  .ok());
  const std::string layout_path = std::string(kube::kMigLayoutsPath) + "/" + kNode;
  ASSERT_TRUE(WaitFor([&] { return server_.Get(layout_path).has_value(); }));
  const Json spec = Get(layout_path)["spec"]["gpus"]["0"];
  EXPECT_NE(spec.value("layout", "").find("1g.10gb@"), std::string::npos) << spec.dump();

  // 3. The agent applies it and reports Applied.
  ASSERT_TRUE(loop_->Pass().ok());
  EXPECT_EQ(nvml_->Instances(0), spec.value("layout", "")) << nvml_->State().dump();
  const Json status = Get(layout_path)["status"]["gpus"]["0"];
  EXPECT_EQ(status.value("state", ""), "Applied") << status.dump();
  EXPECT_NE(loop_->Metrics().find("tessera_agent_mig_applies_total{result=\"applied\"} 1\n"),
            std::string::npos);

  // 4. The scheduler binds the pod to a concrete instance.
  auto a = WaitForBinding("small");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->kind, kube::AssignmentKind::kMig);
  EXPECT_EQ(a->mig_instance.rfind("1g.10gb@", 0), 0u) << a->mig_instance;

  // 5. The kubelet allocates a 1g.10gb device: the container sees that instance.
  ASSERT_TRUE(loop_->Pass().ok());
  ASSERT_NE(loop_->plugin(), nullptr);
  std::string want;
  const NodeGpuState state = loop_->plugin()->allocator().State();
  for (const auto& mi : state.gpus[0].mig_instances)
    if (mi.placement() == a->mig_instance) want = mi.compute_instances.at(0).uuid;
  ASSERT_FALSE(want.empty());
  const std::string endpoint = "tessera-mig-1g.10gb.sock";
  auto list = kubelet_->FirstListAndWatch(endpoint);
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_GT(list->devices_size(), 0);
  auto stub = kubelet_->Dial(endpoint);
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids(list->devices(list->devices_size() - 1).id());
  v1beta1::AllocateResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  grpc::Status st = stub->Allocate(&ctx, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resp.container_responses_size(), 1);
  EXPECT_EQ(resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), want);
}

TEST_F(AgentE2e, MigIsTurnedOnForAMigPodOnAnIdleGpu) {
  Init("");
  ASSERT_TRUE(loop_->Pass().ok());
  StartScheduler();
  ASSERT_TRUE(server_
                  .Create("/api/v1/namespaces/ml/pods",
                          PodObject("first-mig", {{"nvidia.com/mig-2g.20gb", "1"}}))
                  .ok());
  const std::string layout_path = std::string(kube::kMigLayoutsPath) + "/" + kNode;
  ASSERT_TRUE(WaitFor([&] { return server_.Get(layout_path).has_value(); }));
  const Json spec = Get(layout_path)["spec"]["gpus"]["0"];
  EXPECT_EQ(spec.value("migEnabled", false), true) << spec.dump();
  EXPECT_NE(spec.value("layout", "").find("2g.20gb@"), std::string::npos) << spec.dump();

  // The agent turns MIG on (the fake activates it at once) and creates the layout in one pass.
  ASSERT_TRUE(loop_->Pass().ok());
  const Json status = Get(layout_path)["status"]["gpus"]["0"];
  EXPECT_EQ(status.value("state", ""), "Applied") << status.dump();
  EXPECT_EQ(status.value("message", "").rfind("MIG mode on; created ", 0), 0u) << status.dump();
  EXPECT_TRUE(nvml_->State().at(0).at("mig").get<bool>());
  EXPECT_EQ(nvml_->Instances(0), spec.value("layout", ""));

  auto a = WaitForBinding("first-mig");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->kind, kube::AssignmentKind::kMig);
  EXPECT_EQ(a->mig_instance.rfind("2g.20gb@", 0), 0u) << a->mig_instance;
}

TEST_F(AgentE2e, AllocationsSurviveAnAgentRestart) {
  Init("", 2);
  ASSERT_TRUE(loop_->Pass().ok());
  StartScheduler();
  for (const char* name : {"a", "b"})
    ASSERT_TRUE(
        server_.Create("/api/v1/namespaces/ml/pods", PodObject(name, {{"nvidia.com/gpu", "1"}}))
            .ok());
  std::map<std::string, std::string> gpu_of;  // GPU UUID -> pod
  for (const char* name : {"a", "b"}) {
    auto a = WaitForBinding(name);
    ASSERT_TRUE(a.ok()) << a.status().message();
    ASSERT_EQ(a->uuids.size(), 1u);
    gpu_of[a->uuids[0]] = name;
  }
  ASSERT_EQ(gpu_of.size(), 2u);
  ASSERT_TRUE(loop_->Pass().ok());

  // One of the two is allocated, then the agent restarts.
  auto first = KubeletAllocate("tessera-gpu.sock", kGpuUuid);
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_TRUE(gpu_of.count(*first)) << *first;
  StartAgent();
  ASSERT_TRUE(loop_->Pass().ok());

  // The other pod, bound before the restart, gets its own GPU, not the first pod's again.
  auto second = KubeletAllocate("tessera-gpu.sock", kGpuUuid);
  ASSERT_TRUE(second.ok()) << second.status().message();
  ASSERT_TRUE(gpu_of.count(*second)) << *second;
  EXPECT_NE(gpu_of[*second], gpu_of[*first]);

  // A pod bound after the restart gets the third GPU; then nothing waits.
  ASSERT_TRUE(
      server_.Create("/api/v1/namespaces/ml/pods", PodObject("c", {{"nvidia.com/gpu", "1"}})).ok());
  auto c = WaitForBinding("c");
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto third = KubeletAllocate("tessera-gpu.sock", kGpuUuid);
  ASSERT_TRUE(third.ok()) << third.status().message();
  EXPECT_EQ(*third, c->uuids.at(0));
  EXPECT_FALSE(gpu_of.count(*third));
  EXPECT_FALSE(KubeletAllocate("tessera-gpu.sock", kGpuUuid).ok());
  for (const char* name : {"a", "b", "c"}) {
    const std::string uid = Pod(name)["metadata"].value("uid", "");
    EXPECT_TRUE(std::filesystem::exists(config_.plugin.allocator.cdi_dir + "/tessera.io-gpu-" +
                                        uid + "-main-gpu.json"))
        << name;
  }
}

TEST_F(AgentE2e, AStandardShareGetsAnMpsDaemonWithItsLimits) {
  Init("");
  ASSERT_TRUE(loop_->Pass().ok());
  StartScheduler();
  ASSERT_TRUE(server_
                  .Create("/api/v1/namespaces/ml/pods",
                          PodObject("share", {{"tessera.io/gpu-compute", "30"},
                                              {"tessera.io/gpu-memory", "12Gi"}}))
                  .ok());
  auto a = WaitForBinding("share");
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_EQ(a->kind, kube::AssignmentKind::kMps);
  ASSERT_TRUE(loop_->Pass().ok());
  const std::string rec = ReadFile(record_);
  EXPECT_NE(rec.find(std::string("run -d | CUDA_VISIBLE_DEVICES=") + kGpuUuid), std::string::npos)
      << rec;
  EXPECT_NE(rec.find("stdin set_default_active_thread_percentage " +
                     std::to_string(a->mps_thread_pct) + "\n"),
            std::string::npos)
      << rec;
  EXPECT_NE(rec.find("stdin set_default_device_pinned_mem_limit 0 " +
                     std::to_string(a->memory_limit_mib) + "M\n"),
            std::string::npos)
      << rec;
  EXPECT_NE(loop_->Metrics().find("tessera_agent_mps_daemons 1\n"), std::string::npos);

  // The pod ends: the daemon is stopped at the next pass.
  ASSERT_TRUE(server_
                  .MergePatch("/api/v1/namespaces/ml/pods/share/status",
                              {{"status", {{"phase", "Succeeded"}}}})
                  .ok());
  ASSERT_TRUE(loop_->Pass().ok());
  EXPECT_NE(ReadFile(record_).find("stdin quit\n"), std::string::npos);
}

// A pod that asks only for GPU memory: the webhook gives its container one tessera.io/gpu-slice
// device, the scheduler makes it an MPS client, and the kubelet's Allocate of that device hands
// the container the GPU with its limits.
TEST_F(AgentE2e, AMemoryOnlyPodGetsItsMpsShareThroughTheSliceDevice) {
  Init("");
  ASSERT_TRUE(loop_->Pass().ok());
  StartScheduler();
  const Json sent = PodObject("mem", {{"tessera.io/gpu-memory", "12Gi"}});
  const Json review = {{"apiVersion", "admission.k8s.io/v1"},
                       {"kind", "AdmissionReview"},
                       {"request",
                        {{"uid", "r-1"},
                         {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                         {"object", sent}}}};
  auto reply = kube::ReviewPod(review, {});
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  const std::string b64 = reply->at("response").at("patch").get<std::string>();
  std::string text(b64.size(), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(text.data()),
                                reinterpret_cast<const unsigned char*>(b64.data()),
                                static_cast<int>(b64.size()));
  ASSERT_GT(n, 0);
  text.resize(static_cast<size_t>(n));
  while (!text.empty() && text.back() == '\0') text.pop_back();
  const Json pod = sent.patch(Json::parse(text));
  ASSERT_TRUE(server_.Create("/api/v1/namespaces/ml/pods", pod).ok());

  auto a = WaitForBinding("mem");
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_EQ(a->kind, kube::AssignmentKind::kMps);
  ASSERT_GE(a->memory_limit_mib, 12 * 1024);
  ASSERT_TRUE(loop_->Pass().ok());
  auto list = kubelet_->FirstListAndWatch("tessera-gpu-slice.sock");
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->devices_size(), kSliceDevicesPerGpu);
  auto stub = kubelet_->Dial("tessera-gpu-slice.sock");
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids(list->devices(7).id());
  v1beta1::AllocateResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  grpc::Status st = stub->Allocate(&ctx, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resp.container_responses_size(), 1);
  const auto& envs = resp.container_responses(0).envs();
  EXPECT_EQ(envs.at("NVIDIA_VISIBLE_DEVICES"), kGpuUuid);
  EXPECT_EQ(envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), std::to_string(a->mps_thread_pct));
  EXPECT_EQ(envs.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
            std::string(kGpuUuid) + "=" + std::to_string(a->memory_limit_mib) + "M");
}

TEST_F(AgentE2e, MetricsAndHealthAreServed) {
  Init("");
  ASSERT_GT(loop_->metrics_port(), 0);
  httplib::Client http("127.0.0.1", loop_->metrics_port());
  auto before = http.Get("/healthz");
  ASSERT_TRUE(before);
  EXPECT_EQ(before->status, 503);  // nothing discovered yet
  ASSERT_TRUE(loop_->Pass().ok());
  auto health = http.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  const std::string m = metrics->body;
  EXPECT_NE(m.find("tessera_agent_up 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("tessera_agent_discovery_errors_total 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("DCGM_FI_DEV_FB_USED"), std::string::npos) << m;
  // The metrics server's own guard counters: headers above its budget are refused (431).
  EXPECT_NE(m.find("tessera_http_requests_too_large_total 0\n"), std::string::npos) << m;
  httplib::Headers padding;
  for (int i = 0; i < 20; ++i)
    padding.emplace("X-Padding-" + std::to_string(i), std::string(4000, 'x'));
  auto large = http.Get("/metrics", padding);
  ASSERT_TRUE(large);
  EXPECT_EQ(large->status, 431);
  auto after = http.Get("/metrics");
  ASSERT_TRUE(after);
  EXPECT_NE(after->body.find("tessera_http_requests_too_large_total 1\n"), std::string::npos)
      << after->body;
}

// The exposition passes `promtool check metrics` (format and lint), as the scheduler's does in
// tests/prometheus; skipped where promtool is not installed. The one lint finding allowed is
// the camelCase labels of DCGM_FI_* series, which keep dcgm-exporter's names on purpose.
TEST_F(AgentE2e, MetricsPassPromtoolCheck) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) GTEST_SKIP() << "no promtool";
  Init("3g.40gb@0 3g.40gb@4", 1);
  ASSERT_TRUE(loop_->Pass().ok());
  httplib::Client http("127.0.0.1", loop_->metrics_port());
  auto metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  ASSERT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("tessera_agent_passes_total 1\n"), std::string::npos);
  const std::string in = dir_ + "/metrics.txt", out = dir_ + "/promtool.txt";
  std::ofstream(in) << metrics->body;
  const int rc = std::system(("promtool check metrics < " + in + " > " + out + " 2>&1").c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  const std::string report = ReadFile(out);
  std::istringstream lines(report);
  int other = 0;
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && !(line.rfind("DCGM_FI_", 0) == 0 &&
                           line.find("label names should be written in 'snake_case' not "
                                     "'camelCase'") != std::string::npos))
      ++other;
  EXPECT_EQ(other, 0) << report << "\n" << metrics->body;
  // promtool exits 3 for lint findings only, 1 for a format error.
  EXPECT_TRUE(WEXITSTATUS(rc) == 0 || WEXITSTATUS(rc) == 3) << report;
}

}  // namespace
}  // namespace tessera::agent
