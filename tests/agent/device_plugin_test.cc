// The kubelet device plugin over real gRPC on unix sockets: a fake kubelet registers the
// plugins, lists their devices and allocates; the GPUs come from the fake libnvidia-ml.so.1
// through the real discovery path (CTest puts the fake's directory on LD_LIBRARY_PATH).
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/allocate.h"
#include "agent/cdi.h"
#include "agent/device_plugin.h"
#include "agent/discovery.h"
#include "agent/nvml.h"
#include "kube/translate.h"
#include "tests/agent/fake_kubelet.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::DeviceWatch;
using testing::FakeKubelet;

// The fake NVML stays mapped for the whole run (one reference never released), so memory its
// process-lifetime objects hold stays reachable for LeakSanitizer when the backends dlclose it.
[[maybe_unused]] void* const kPinnedNvml = dlopen(kNvmlLibrary, RTLD_NOW);

// A short temporary directory (unix socket paths are limited to 107 bytes).
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/tessera-dp-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// GPU 0: MIG 3g.40gb@0 2g.20gb@4 1g.10gb@6; GPUs 1 and 2: whole GPUs. `xids` per GPU index.
Json NodeConfig(const std::map<int, std::vector<int>>& xids = {}) {
  Json gpus = Json::array();
  for (int i = 0; i < 3; ++i) {
    Json g = {{"model", "A100-80GB"}, {"uuid", "GPU-dp-" + std::to_string(i)}, {"numa", i / 2}};
    if (i == 0) {
      g["mig"] = true;
      g["mig_layout"] = "3g.40gb@0 2g.20gb@4 1g.10gb@6";
    }
    if (auto it = xids.find(i); it != xids.end()) g["xids"] = it->second;
    gpus.push_back(g);
  }
  return {{"gpus", gpus}};
}

class FakeNvml {
 public:
  explicit FakeNvml(const Json& cfg, const std::string& dir) : path_(dir + "/nvml.json") {
    std::ofstream(path_) << cfg.dump(1);
    setenv("TESSERA_FAKE_NVML_CONFIG", path_.c_str(), 1);
  }
  ~FakeNvml() { unsetenv("TESSERA_FAKE_NVML_CONFIG"); }

 private:
  std::string path_;
};

BoundPod Pod(const std::string& uid, const std::string& bound_at, const std::string& resource,
             int64_t count, const std::string& assignment) {
  BoundPod p;
  p.uid = uid;
  p.ns = "default";
  p.name = "pod-" + uid;
  p.bound_at = bound_at;
  p.containers.push_back({"main", {{resource, count}}});
  if (!assignment.empty()) p.annotations[kube::kAnnotationAssignment] = assignment;
  return p;
}

std::vector<std::string> Ids(const v1beta1::ListAndWatchResponse& r) {
  std::vector<std::string> out;
  for (const auto& d : r.devices()) out.push_back(d.id());
  return out;
}

size_t CdiFiles(const std::string& dir) {
  if (!std::filesystem::exists(dir)) return 0;
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.is_regular_file();
  return n;
}

class DevicePluginTest : public ::testing::Test {
 protected:
  void SetUp() override { StartNode(NodeConfig()); }

  void StartNode(const Json& cfg, bool watch_health = false) {
    nvml_env_ = std::make_unique<FakeNvml>(cfg, dir_.path());
    auto nvml = OpenNvml();
    ASSERT_TRUE(nvml.ok()) << nvml.status().message();
    nvml_ = std::move(*nvml);
    auto state = Discover(*nvml_, {.watch_xids = !watch_health});
    ASSERT_TRUE(state.ok()) << state.status().message();
    state_ = *state;
    ASSERT_EQ(kubelet_.Start().code(), StatusCode::kOk);
    cfg_dp_.plugin_dir = dir_.path();
    cfg_dp_.allocator.cdi_dir = dir_.path() + "/cdi";
    cfg_dp_.allocator.mps_root = "/run/tessera/mps";
    cfg_dp_.kubelet_poll_ms = 50;
    plugin_ = std::make_unique<DevicePluginManager>(pods_, cfg_dp_);
    ASSERT_TRUE(plugin_->Start(state_).ok());
    if (watch_health) {
      ASSERT_TRUE(plugin_->WatchHealth(*nvml_).ok());
    }
    ASSERT_TRUE(kubelet_.WaitForRegistrations(plugin_->Resources().size(), seconds(5)));
  }

  void TearDown() override {
    if (plugin_) plugin_->Stop();
    plugin_.reset();
    nvml_.reset();
    kubelet_.Stop();
  }

  std::string MigUuid(const std::string& placement) const {
    for (const auto& mi : state_.gpus[0].mig_instances)
      if (mi.placement() == placement) return mi.compute_instances.at(0).uuid;
    return "";
  }

  grpc::Status Allocate(const std::string& endpoint, const std::vector<std::string>& ids,
                        v1beta1::AllocateResponse* resp) {
    auto stub = kubelet_.Dial(endpoint);
    v1beta1::AllocateRequest req;
    auto* c = req.add_container_requests();
    for (const auto& id : ids) c->add_devices_ids(id);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(5));
    return stub->Allocate(&ctx, req, resp);
  }

  std::string cdi_dir() const { return dir_.path() + "/cdi"; }

  TempDir dir_;
  FakeKubelet kubelet_{dir_.path()};
  StaticPodSource pods_;
  DevicePluginConfig cfg_dp_;
  std::unique_ptr<FakeNvml> nvml_env_;
  std::unique_ptr<GpuBackend> nvml_;
  NodeGpuState state_;
  std::unique_ptr<DevicePluginManager> plugin_;
};

TEST_F(DevicePluginTest, RegistersEveryResource) {
  std::map<std::string, std::string> got;  // resource -> endpoint
  for (const auto& r : kubelet_.Registrations()) {
    EXPECT_EQ(r.version(), "v1beta1");
    EXPECT_TRUE(r.options().get_preferred_allocation_available());
    EXPECT_FALSE(r.options().pre_start_required());
    EXPECT_EQ(r.endpoint().find('/'), std::string::npos);
    got[r.resource_name()] = r.endpoint();
  }
  const std::map<std::string, std::string> want = {
      {"nvidia.com/gpu", "tessera-gpu.sock"},
      {"nvidia.com/mig-1g.10gb", "tessera-mig-1g.10gb.sock"},
      {"nvidia.com/mig-2g.20gb", "tessera-mig-2g.20gb.sock"},
      {"nvidia.com/mig-3g.40gb", "tessera-mig-3g.40gb.sock"},
      {"tessera.io/gpu-compute", "tessera-gpu-compute.sock"},
      {"tessera.io/gpu-slice", "tessera-gpu-slice.sock"}};
  EXPECT_EQ(got, want);
  for (const auto& [res, ep] : want) {
    struct stat st {};
    ASSERT_EQ(::stat((dir_.path() + "/" + ep).c_str(), &st), 0) << ep;
    EXPECT_TRUE(S_ISSOCK(st.st_mode)) << ep;
    auto stub = kubelet_.Dial(ep);
    grpc::ClientContext ctx;
    v1beta1::DevicePluginOptions opts;
    ASSERT_TRUE(stub->GetDevicePluginOptions(&ctx, v1beta1::Empty(), &opts).ok()) << ep;
    EXPECT_TRUE(opts.get_preferred_allocation_available());
  }
}

TEST_F(DevicePluginTest, ListsDevicesFromDiscovery) {
  struct Case {
    std::string endpoint;
    std::vector<std::string> ids;
  };
  std::vector<std::string> compute, slots;
  for (int g = 0; g < 3; ++g)
    for (int k = 0; k < 100; ++k) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "%02d", k);
      compute.push_back("GPU-dp-" + std::to_string(g) + "-pct-" + buf);
      if (k < kSliceDevicesPerGpu) slots.push_back("GPU-dp-" + std::to_string(g) + "-slot-" + buf);
    }
  const std::vector<Case> cases = {
      {"tessera-gpu.sock", {"GPU-dp-1", "GPU-dp-2"}},
      {"tessera-mig-3g.40gb.sock", {MigUuid("3g.40gb@0")}},
      {"tessera-mig-2g.20gb.sock", {MigUuid("2g.20gb@4")}},
      {"tessera-mig-1g.10gb.sock", {MigUuid("1g.10gb@6")}},
      {"tessera-gpu-compute.sock", compute},
      {"tessera-gpu-slice.sock", slots},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.endpoint);
    ASSERT_FALSE(c.ids.at(0).empty());
    auto r = kubelet_.FirstListAndWatch(c.endpoint);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Ids(*r), c.ids);
    for (const auto& d : r->devices()) {
      EXPECT_EQ(d.health(), "Healthy");
      ASSERT_EQ(d.topology().nodes_size(), 1);
    }
  }
  auto gpus = kubelet_.FirstListAndWatch("tessera-gpu.sock");
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ(gpus->devices(0).topology().nodes(0).id(), 0);  // GPU 1: NUMA 0
  EXPECT_EQ(gpus->devices(1).topology().nodes(0).id(), 1);  // GPU 2: NUMA 1
}

struct AllocCase {
  std::string name;
  std::string endpoint;
  std::string resource;
  int count;
  std::string assignment;  // "$MIG(p)" is replaced by the MIG device UUID of p
  std::map<std::string, std::string> envs;
  size_t mounts;
};

TEST_F(DevicePluginTest, AllocatesFromTheAssignment) {
  const std::string mig3 = MigUuid("3g.40gb@0");
  const std::string mig1 = MigUuid("1g.10gb@6");
  const std::vector<AllocCase> cases = {
      {"exclusive",
       "tessera-gpu.sock",
       "nvidia.com/gpu",
       2,
       R"({"node":"n","kind":"exclusive","gpus":[2,1],"uuids":["GPU-dp-2","GPU-dp-1"]})",
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-dp-2,GPU-dp-1"}},
       0},
      {"mig",
       "tessera-mig-3g.40gb.sock",
       "nvidia.com/mig-3g.40gb",
       1,
       R"({"node":"n","kind":"mig","gpus":[0],"uuids":["GPU-dp-0"],"mig_instance":"3g.40gb@0"})",
       {{"NVIDIA_VISIBLE_DEVICES", mig3}},
       0},
      {"mig bare profile",
       "tessera-mig-1g.10gb.sock",
       "nvidia.com/mig-1g.10gb",
       1,
       R"({"node":"n","kind":"mig","gpus":[],"mig_instance":"1g.10gb"})",
       {{"NVIDIA_VISIBLE_DEVICES", mig1}},
       0},
      {"mps",
       "tessera-gpu-compute.sock",
       "tessera.io/gpu-compute",
       30,
       R"({"node":"n","kind":"mps","gpus":[1],"uuids":["GPU-dp-1"],"mps_thread_pct":30,)"
       R"("memory_limit_mib":12288})",
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-dp-1"},
        {"CUDA_MPS_PIPE_DIRECTORY", kMpsPipeDir},
        {"CUDA_MPS_LOG_DIRECTORY", kMpsLogDir},
        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "30"},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "GPU-dp-1=12288M"}},
       2},
      {"mps through a gpu-slice device (a tessera.io/gpu-memory-only pod)",
       "tessera-gpu-slice.sock",
       "tessera.io/gpu-slice",
       1,
       R"({"node":"n","kind":"mps","gpus":[2],"uuids":["GPU-dp-2"],"mps_thread_pct":25,)"
       R"("memory_limit_mib":8192})",
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-dp-2"},
        {"CUDA_MPS_PIPE_DIRECTORY", kMpsPipeDir},
        {"CUDA_MPS_LOG_DIRECTORY", kMpsLogDir},
        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25"},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "GPU-dp-2=8192M"}},
       2},
      {"mig-mps",
       "tessera-gpu-compute.sock",
       "tessera.io/gpu-compute",
       20,
       R"({"node":"n","kind":"mig-mps","gpus":[0],"mig_instance":"3g.40gb@0",)"
       R"("mps_thread_pct":50,"memory_limit_mib":4096})",
       {{"NVIDIA_VISIBLE_DEVICES", mig3},
        {"CUDA_MPS_PIPE_DIRECTORY", kMpsPipeDir},
        {"CUDA_MPS_LOG_DIRECTORY", kMpsLogDir},
        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "50"},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", mig3 + "=4096M"}},
       2},
  };
  int n = 0;
  for (const AllocCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string uid = "uid-" + std::to_string(n++);
    pods_.Add(Pod(uid, "2026-01-01T00:00:0" + std::to_string(n) + "Z", c.resource, c.count,
                  c.assignment));
    auto list = kubelet_.FirstListAndWatch(c.endpoint);
    ASSERT_TRUE(list.ok());
    std::vector<std::string> ids = Ids(*list);
    ids.resize(c.count);
    v1beta1::AllocateResponse resp;
    grpc::Status st = Allocate(c.endpoint, ids, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_EQ(resp.container_responses_size(), 1);
    const auto& cr = resp.container_responses(0);
    std::map<std::string, std::string> envs(cr.envs().begin(), cr.envs().end());
    EXPECT_EQ(envs, c.envs);
    ASSERT_EQ(static_cast<size_t>(cr.mounts_size()), c.mounts);
    if (c.mounts > 0) {
      const std::string dev = c.envs.at("NVIDIA_VISIBLE_DEVICES");
      EXPECT_EQ(cr.mounts(0).host_path(), "/run/tessera/mps/" + dev + "/pipe");
      EXPECT_EQ(cr.mounts(0).container_path(), kMpsPipeDir);
      EXPECT_EQ(cr.mounts(1).host_path(), "/run/tessera/mps/" + dev + "/log");
    }
    ASSERT_EQ(cr.cdi_devices_size(), 1);
    const std::string device = uid + "-main-" + c.resource.substr(c.resource.find('/') + 1);
    EXPECT_EQ(cr.cdi_devices(0).name(), "tessera.io/gpu=" + device);
    EXPECT_TRUE(plugin_->allocator().Allocated(uid, "main", c.resource));

    std::ifstream in(cdi_dir() + "/tessera.io-gpu-" + device + ".json");
    ASSERT_TRUE(in.good());
    Json spec = Json::parse(in);
    EXPECT_EQ(spec["cdiVersion"], kCdiVersion);
    EXPECT_EQ(spec["kind"], "tessera.io/gpu");
    ASSERT_EQ(spec["devices"].size(), 1u);
    EXPECT_EQ(spec["devices"][0]["name"], device);
    std::set<std::string> env(spec["devices"][0]["containerEdits"]["env"].begin(),
                              spec["devices"][0]["containerEdits"]["env"].end());
    for (const auto& [k, v] : c.envs) EXPECT_TRUE(env.count(k + "=" + v)) << k;
    EXPECT_EQ(spec["devices"][0]["containerEdits"].value("mounts", Json::array()).size(), c.mounts);
  }
  // Only the spec files, no temporary files left behind.
  EXPECT_EQ(CdiFiles(cdi_dir()), cases.size());
}

TEST_F(DevicePluginTest, OldestBoundPodWinsAndIsAllocatedOnce) {
  const std::string a = R"({"node":"n","kind":"exclusive","gpus":[1],"uuids":["GPU-dp-1"]})";
  const std::string b = R"({"node":"n","kind":"exclusive","gpus":[2],"uuids":["GPU-dp-2"]})";
  pods_.Add(Pod("late", "2026-01-01T00:00:09Z", "nvidia.com/gpu", 1, b));
  pods_.Add(Pod("early", "2026-01-01T00:00:01Z", "nvidia.com/gpu", 1, a));
  pods_.Add(Pod("two", "2026-01-01T00:00:00Z", "nvidia.com/gpu", 2, a));  // other count
  for (const char* want : {"GPU-dp-1", "GPU-dp-2"}) {
    v1beta1::AllocateResponse resp;
    ASSERT_TRUE(Allocate("tessera-gpu.sock", {"GPU-dp-1"}, &resp).ok());
    EXPECT_EQ(resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), want);
  }
  v1beta1::AllocateResponse resp;
  grpc::Status st = Allocate("tessera-gpu.sock", {"GPU-dp-1"}, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(DevicePluginTest, ARestartedPluginKeepsWhatItAllocated) {
  const std::string a = R"({"node":"n","kind":"exclusive","gpus":[1],"uuids":["GPU-dp-1"]})";
  const std::string b = R"({"node":"n","kind":"exclusive","gpus":[2],"uuids":["GPU-dp-2"]})";
  BoundPod running = Pod("running", "2026-01-01T00:00:00Z", "nvidia.com/gpu", 1, a);
  running.containers[0].started = true;  // allocated by an agent whose CDI dir is gone
  pods_.Add(running);
  pods_.Add(Pod("early", "2026-01-01T00:00:01Z", "nvidia.com/gpu", 1, a));
  pods_.Add(Pod("late", "2026-01-01T00:00:09Z", "nvidia.com/gpu", 1, b));
  v1beta1::AllocateResponse resp;
  ASSERT_TRUE(Allocate("tessera-gpu.sock", {"GPU-dp-1"}, &resp).ok());
  EXPECT_EQ(resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-dp-1");
  const std::string early_spec = cdi_dir() + "/tessera.io-gpu-early-main-gpu.json";
  ASSERT_TRUE(std::filesystem::exists(early_spec));
  // Specs of pods gone while the agent was down, and another vendor's spec.
  const std::string gone = cdi_dir() + "/tessera.io-gpu-gone-main-gpu.json";
  const std::string other = cdi_dir() + "/nvidia.com-gpu.json";
  for (const std::string& f : {gone, other}) std::ofstream(f) << "{}";

  plugin_->Stop();
  plugin_ = std::make_unique<DevicePluginManager>(pods_, cfg_dp_);
  ASSERT_TRUE(plugin_->Start(state_).ok());
  auto recovered = plugin_->allocator().Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status().message();
  EXPECT_EQ(*recovered, 1);
  EXPECT_TRUE(plugin_->allocator().Allocated("early", "main", "nvidia.com/gpu"));
  EXPECT_FALSE(std::filesystem::exists(gone));
  EXPECT_TRUE(std::filesystem::exists(other));
  EXPECT_TRUE(std::filesystem::exists(early_spec));
  EXPECT_EQ(*plugin_->allocator().Recover(), 0);  // once

  // The pod bound before the restart and not yet allocated gets its own GPU, and only it.
  ASSERT_TRUE(kubelet_.WaitForRegistrations(2 * plugin_->Resources().size(), seconds(5)));
  resp.Clear();
  ASSERT_TRUE(Allocate("tessera-gpu.sock", {"GPU-dp-1"}, &resp).ok());
  EXPECT_EQ(resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-dp-2");
  resp.Clear();
  EXPECT_EQ(Allocate("tessera-gpu.sock", {"GPU-dp-1"}, &resp).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(DevicePluginTest, SeveralContainersSucceedOrFailTogether) {
  pods_.Add(Pod("one", "2026-01-01T00:00:00Z", "nvidia.com/gpu", 1,
                R"({"node":"n","kind":"exclusive","gpus":[1],"uuids":["GPU-dp-1"]})"));
  auto stub = kubelet_.Dial("tessera-gpu.sock");
  auto allocate = [&](int containers, v1beta1::AllocateResponse* resp) {
    v1beta1::AllocateRequest req;
    for (int i = 0; i < containers; ++i) req.add_container_requests()->add_devices_ids("GPU-dp-1");
    grpc::ClientContext ctx;
    return stub->Allocate(&ctx, req, resp);
  };
  v1beta1::AllocateResponse resp;
  grpc::Status st = allocate(2, &resp);  // only one container waits
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(resp.container_responses_size(), 0);
  EXPECT_EQ(CdiFiles(cdi_dir()), 0u);
  EXPECT_FALSE(plugin_->allocator().Allocated("one", "main", "nvidia.com/gpu"));
  ASSERT_TRUE(allocate(1, &resp).ok());
  EXPECT_EQ(CdiFiles(cdi_dir()), 1u);
}

TEST_F(DevicePluginTest, GonePodsAreForgotten) {
  const std::string a = R"({"node":"n","kind":"exclusive","gpus":[1],"uuids":["GPU-dp-1"]})";
  pods_.Add(Pod("old", "2026-01-01T00:00:00Z", "nvidia.com/gpu", 1, a));
  v1beta1::AllocateResponse resp;
  ASSERT_TRUE(Allocate("tessera-gpu.sock", {"GPU-dp-1"}, &resp).ok());
  EXPECT_TRUE(std::filesystem::exists(cdi_dir() + "/tessera.io-gpu-old-main-gpu.json"));
  pods_.Set({Pod("new", "2026-01-01T00:01:00Z", "nvidia.com/gpu", 1, a)});
  ASSERT_TRUE(Allocate("tessera-gpu.sock", {"GPU-dp-1"}, &resp).ok());
  EXPECT_FALSE(plugin_->allocator().Allocated("old", "main", "nvidia.com/gpu"));
  EXPECT_FALSE(std::filesystem::exists(cdi_dir() + "/tessera.io-gpu-old-main-gpu.json"));
  EXPECT_TRUE(std::filesystem::exists(cdi_dir() + "/tessera.io-gpu-new-main-gpu.json"));
  EXPECT_EQ(CdiFiles(cdi_dir()), 1u);
}

struct BadCase {
  std::string name;
  std::string endpoint;
  std::string resource;  // the pod's request; empty: no pod at all
  std::string assignment;
  grpc::StatusCode code;
  std::string message;  // a substring of the error
};

TEST_F(DevicePluginTest, BadInputChangesNothing) {
  const std::vector<BadCase> cases = {
      {"malformed assignment", "tessera-gpu.sock", "nvidia.com/gpu", R"({"node":"n","kind":)",
       grpc::StatusCode::INVALID_ARGUMENT,
       "pod default/pod-bad container \"main\": annotation tessera.io/assignment: "},
      {"unknown kind", "tessera-gpu.sock", "nvidia.com/gpu",
       R"({"node":"n","kind":"teleport","gpus":[1]})", grpc::StatusCode::INVALID_ARGUMENT,
       "annotation tessera.io/assignment: "},
      {"unknown MIG instance", "tessera-mig-3g.40gb.sock", "nvidia.com/mig-3g.40gb",
       R"({"node":"n","kind":"mig","gpus":[0],"mig_instance":"3g.40gb@4"})",
       grpc::StatusCode::INVALID_ARGUMENT,
       "MIG instance 3g.40gb@4 does not exist on GPU 0 (layout: \"3g.40gb@0 2g.20gb@4 "
       "1g.10gb@6\")"},
      {"GPU index absent", "tessera-gpu.sock", "nvidia.com/gpu",
       R"({"node":"n","kind":"exclusive","gpus":[5]})", grpc::StatusCode::INVALID_ARGUMENT,
       "assignment names GPU 5, but this node has 3 GPUs"},
      {"UUID of another GPU", "tessera-gpu.sock", "nvidia.com/gpu",
       R"({"node":"n","kind":"exclusive","gpus":[1],"uuids":["GPU-elsewhere"]})",
       grpc::StatusCode::INVALID_ARGUMENT,
       "assignment names GPU 1 as GPU-elsewhere, but GPU 1 of this node is GPU-dp-1"},
      {"compute without assignment", "tessera-gpu-compute.sock", "tessera.io/gpu-compute", "",
       grpc::StatusCode::INVALID_ARGUMENT, "no annotation tessera.io/assignment"},
      {"no matching pod", "tessera-gpu.sock", "", "", grpc::StatusCode::NOT_FOUND,
       "no pod on this node waits for 1 nvidia.com/gpu device"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    pods_.Set({});
    if (!c.resource.empty())
      pods_.Add(Pod("bad", "2026-01-01T00:00:00Z", c.resource, 1, c.assignment));
    auto list = kubelet_.FirstListAndWatch(c.endpoint);
    ASSERT_TRUE(list.ok());
    v1beta1::AllocateResponse resp;
    grpc::Status st = Allocate(c.endpoint, {list->devices(0).id()}, &resp);
    EXPECT_EQ(st.error_code(), c.code);
    EXPECT_NE(st.error_message().find(c.message), std::string::npos) << st.error_message();
    EXPECT_EQ(CdiFiles(cdi_dir()), 0u);
    if (!c.resource.empty()) {
      EXPECT_FALSE(plugin_->allocator().Allocated("bad", "main", c.resource));
    }
  }
}

TEST_F(DevicePluginTest, PreferredAllocationFollowsTheAssignment) {
  auto stub = kubelet_.Dial("tessera-gpu.sock");
  auto ask = [&](int size, std::vector<std::string> must) {
    v1beta1::PreferredAllocationRequest req;
    auto* c = req.add_container_requests();
    for (const char* id : {"GPU-dp-1", "GPU-dp-2"}) c->add_available_deviceids(id);
    for (const auto& id : must) c->add_must_include_deviceids(id);
    c->set_allocation_size(size);
    v1beta1::PreferredAllocationResponse resp;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub->GetPreferredAllocation(&ctx, req, &resp).ok());
    const auto& ids = resp.container_responses(0).deviceids();
    return std::vector<std::string>(ids.begin(), ids.end());
  };
  EXPECT_EQ(ask(1, {}), (std::vector<std::string>{"GPU-dp-1"}));  // no pod: deterministic
  pods_.Add(Pod("p", "2026-01-01T00:00:00Z", "nvidia.com/gpu", 1,
                R"({"node":"n","kind":"exclusive","gpus":[2],"uuids":["GPU-dp-2"]})"));
  EXPECT_EQ(ask(1, {}), (std::vector<std::string>{"GPU-dp-2"}));
  EXPECT_EQ(ask(2, {}), (std::vector<std::string>{"GPU-dp-1", "GPU-dp-2"}));  // no pod asks 2
  EXPECT_EQ(ask(1, {"GPU-dp-1"}), (std::vector<std::string>{"GPU-dp-1"}));
  EXPECT_FALSE(plugin_->allocator().Allocated("p", "main", "nvidia.com/gpu"));

  // gpu-compute: the percent devices of the assigned GPU.
  pods_.Add(
      Pod("c", "2026-01-01T00:00:01Z", "tessera.io/gpu-compute", 30,
          R"({"node":"n","kind":"mps","gpus":[2],"uuids":["GPU-dp-2"],"mps_thread_pct":30})"));
  auto all = kubelet_.FirstListAndWatch("tessera-gpu-compute.sock");
  ASSERT_TRUE(all.ok());
  v1beta1::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (const auto& id : Ids(*all)) c->add_available_deviceids(id);
  c->set_allocation_size(30);
  v1beta1::PreferredAllocationResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(
      kubelet_.Dial("tessera-gpu-compute.sock")->GetPreferredAllocation(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.container_responses(0).deviceids_size(), 30);
  for (const auto& id : resp.container_responses(0).deviceids())
    EXPECT_EQ(id.rfind("GPU-dp-2-pct-", 0), 0u) << id;
}

TEST_F(DevicePluginTest, KubeletRestartReregisters) {
  const size_t n = plugin_->Resources().size();
  ASSERT_EQ(kubelet_.Registrations().size(), n);
  // A restarting kubelet removes its socket and the plugins' sockets, then serves a new one.
  kubelet_.Stop();
  for (const auto& r : plugin_->Resources()) ::unlink((dir_.path() + "/" + r.endpoint).c_str());
  ASSERT_TRUE(kubelet_.Start().ok());
  EXPECT_TRUE(kubelet_.WaitForRegistrations(2 * n, seconds(5)));
  auto list = kubelet_.FirstListAndWatch("tessera-gpu.sock");
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_EQ(Ids(*list), (std::vector<std::string>{"GPU-dp-1", "GPU-dp-2"}));
  // The same kubelet socket does not trigger another registration.
  EXPECT_FALSE(kubelet_.WaitForRegistrations(2 * n + 1, milliseconds(300)));
}

TEST_F(DevicePluginTest, HealthChangeIsStreamed) {
  DeviceWatch watch(kubelet_, "tessera-gpu.sock");
  auto first = watch.Next(seconds(5));
  ASSERT_TRUE(first.has_value());
  for (const auto& d : first->devices()) EXPECT_EQ(d.health(), "Healthy");
  NodeGpuState s = state_;
  ApplyXid(s, XidEvent{.gpu = 2, .xid = 79});
  plugin_->UpdateState(s);
  auto second = watch.Next(seconds(5));
  ASSERT_TRUE(second.has_value());
  ASSERT_EQ(second->devices_size(), 2);
  EXPECT_EQ(second->devices(0).health(), "Healthy");
  EXPECT_EQ(second->devices(1).health(), "Unhealthy");
}

TEST_F(DevicePluginTest, StopRemovesTheSockets) {
  const auto resources = plugin_->Resources();
  plugin_->Stop();
  for (const auto& r : resources)
    EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/" + r.endpoint)) << r.endpoint;
  plugin_->Stop();
}

TEST(DevicePluginRegistration, RegistersWhenTheKubeletComesLater) {
  TempDir dir;
  FakeNvml env(NodeConfig(), dir.path());
  auto nvml = OpenNvml();
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  auto state = Discover(**nvml);
  ASSERT_TRUE(state.ok());
  StaticPodSource pods;
  DevicePluginConfig cfg;
  cfg.plugin_dir = dir.path();
  cfg.allocator.cdi_dir = dir.path() + "/cdi";
  cfg.kubelet_poll_ms = 50;
  DevicePluginManager plugin(pods, cfg);
  ASSERT_TRUE(plugin.Start(*state).ok());
  EXPECT_EQ(plugin.Registrations(), 0);
  FakeKubelet kubelet(dir.path());
  ASSERT_TRUE(kubelet.Start().ok());
  EXPECT_TRUE(kubelet.WaitForRegistrations(plugin.Resources().size(), seconds(5)));
  EXPECT_EQ(plugin.Registrations(), static_cast<int>(plugin.Resources().size()));
  plugin.Stop();
}

// XIDs from NVML: discovered before start, and delivered while the plugin runs.
TEST(DevicePluginHealth, FatalXidMakesDevicesUnhealthy) {
  for (bool watch : {false, true}) {
    SCOPED_TRACE(watch ? "XID while serving" : "XID at discovery");
    TempDir dir;
    FakeNvml env(NodeConfig({{1, {79}}, {2, {13}}}), dir.path());
    auto nvml = OpenNvml();
    ASSERT_TRUE(nvml.ok()) << nvml.status().message();
    auto state = Discover(**nvml, {.watch_xids = !watch});
    ASSERT_TRUE(state.ok());
    FakeKubelet kubelet(dir.path());
    ASSERT_TRUE(kubelet.Start().ok());
    StaticPodSource pods;
    DevicePluginConfig cfg;
    cfg.plugin_dir = dir.path();
    cfg.allocator.cdi_dir = dir.path() + "/cdi";
    cfg.kubelet_poll_ms = 50;
    DevicePluginManager plugin(pods, cfg);
    ASSERT_TRUE(plugin.Start(*state).ok());
    if (watch) {
      ASSERT_TRUE(plugin.WatchHealth(**nvml).ok());
    }
    DeviceWatch gpus(kubelet, "tessera-gpu.sock");
    std::map<std::string, std::string> health;
    for (auto r = gpus.Next(seconds(5)); r.has_value(); r = gpus.Next(milliseconds(500))) {
      for (const auto& d : r->devices()) health[d.id()] = d.health();
      if (health["GPU-dp-1"] == "Unhealthy") break;
    }
    EXPECT_EQ(health, (std::map<std::string, std::string>{{"GPU-dp-1", "Unhealthy"},
                                                          {"GPU-dp-2", "Healthy"}}));
    auto compute = kubelet.FirstListAndWatch("tessera-gpu-compute.sock");
    ASSERT_TRUE(compute.ok());
    int unhealthy = 0;
    for (const auto& d : compute->devices()) unhealthy += d.health() == "Unhealthy";
    EXPECT_EQ(unhealthy, 100);
    plugin.Stop();
  }
}

// The generated code carries the wire contract of k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1.
TEST(DevicePluginApi, WireContract) {
  namespace gp = google::protobuf;
  const gp::DescriptorPool* pool = gp::DescriptorPool::generated_pool();
  struct Field {
    std::string message;
    std::string name;
    int number;
    gp::FieldDescriptor::Type type;
    bool repeated;
  };
  using T = gp::FieldDescriptor;
  const std::vector<Field> fields = {
      {"DevicePluginOptions", "pre_start_required", 1, T::TYPE_BOOL, false},
      {"DevicePluginOptions", "get_preferred_allocation_available", 2, T::TYPE_BOOL, false},
      {"RegisterRequest", "version", 1, T::TYPE_STRING, false},
      {"RegisterRequest", "endpoint", 2, T::TYPE_STRING, false},
      {"RegisterRequest", "resource_name", 3, T::TYPE_STRING, false},
      {"RegisterRequest", "options", 4, T::TYPE_MESSAGE, false},
      {"ListAndWatchResponse", "devices", 1, T::TYPE_MESSAGE, true},
      {"TopologyInfo", "nodes", 1, T::TYPE_MESSAGE, true},
      {"NUMANode", "ID", 1, T::TYPE_INT64, false},
      {"Device", "ID", 1, T::TYPE_STRING, false},
      {"Device", "health", 2, T::TYPE_STRING, false},
      {"Device", "topology", 3, T::TYPE_MESSAGE, false},
      {"PreStartContainerRequest", "devices_ids", 1, T::TYPE_STRING, true},
      {"PreferredAllocationRequest", "container_requests", 1, T::TYPE_MESSAGE, true},
      {"ContainerPreferredAllocationRequest", "available_deviceIDs", 1, T::TYPE_STRING, true},
      {"ContainerPreferredAllocationRequest", "must_include_deviceIDs", 2, T::TYPE_STRING, true},
      {"ContainerPreferredAllocationRequest", "allocation_size", 3, T::TYPE_INT32, false},
      {"PreferredAllocationResponse", "container_responses", 1, T::TYPE_MESSAGE, true},
      {"ContainerPreferredAllocationResponse", "deviceIDs", 1, T::TYPE_STRING, true},
      {"AllocateRequest", "container_requests", 1, T::TYPE_MESSAGE, true},
      {"ContainerAllocateRequest", "devices_ids", 1, T::TYPE_STRING, true},
      {"AllocateResponse", "container_responses", 1, T::TYPE_MESSAGE, true},
      {"ContainerAllocateResponse", "envs", 1, T::TYPE_MESSAGE, true},
      {"ContainerAllocateResponse", "mounts", 2, T::TYPE_MESSAGE, true},
      {"ContainerAllocateResponse", "devices", 3, T::TYPE_MESSAGE, true},
      {"ContainerAllocateResponse", "annotations", 4, T::TYPE_MESSAGE, true},
      {"ContainerAllocateResponse", "cdi_devices", 5, T::TYPE_MESSAGE, true},
      {"Mount", "container_path", 1, T::TYPE_STRING, false},
      {"Mount", "host_path", 2, T::TYPE_STRING, false},
      {"Mount", "read_only", 3, T::TYPE_BOOL, false},
      {"DeviceSpec", "container_path", 1, T::TYPE_STRING, false},
      {"DeviceSpec", "host_path", 2, T::TYPE_STRING, false},
      {"DeviceSpec", "permissions", 3, T::TYPE_STRING, false},
      {"CDIDevice", "name", 1, T::TYPE_STRING, false},
  };
  std::map<std::string, int> per_message;
  for (const Field& f : fields) {
    SCOPED_TRACE(f.message + "." + f.name);
    const gp::Descriptor* m = pool->FindMessageTypeByName("v1beta1." + f.message);
    ASSERT_NE(m, nullptr);
    const gp::FieldDescriptor* fd = m->FindFieldByName(f.name);
    ASSERT_NE(fd, nullptr);
    EXPECT_EQ(fd->number(), f.number);
    EXPECT_EQ(fd->type(), f.type);
    EXPECT_EQ(fd->is_repeated(), f.repeated);
    ++per_message[f.message];
  }
  for (const auto& [message, n] : per_message)
    EXPECT_EQ(pool->FindMessageTypeByName("v1beta1." + message)->field_count(), n) << message;
  for (const char* empty : {"Empty", "PreStartContainerResponse"})
    EXPECT_EQ(pool->FindMessageTypeByName(std::string("v1beta1.") + empty)->field_count(), 0);

  const std::map<std::string, std::vector<std::string>> services = {
      {"Registration", {"Register"}},
      {"DevicePlugin",
       {"GetDevicePluginOptions", "ListAndWatch", "GetPreferredAllocation", "Allocate",
        "PreStartContainer"}}};
  for (const auto& [service, methods] : services) {
    const gp::ServiceDescriptor* sd = pool->FindServiceByName("v1beta1." + service);
    ASSERT_NE(sd, nullptr) << service;
    ASSERT_EQ(sd->method_count(), static_cast<int>(methods.size()));
    for (size_t i = 0; i < methods.size(); ++i) EXPECT_EQ(sd->method(i)->name(), methods[i]);
  }
  const gp::MethodDescriptor* lw = pool->FindMethodByName("v1beta1.DevicePlugin.ListAndWatch");
  ASSERT_NE(lw, nullptr);
  EXPECT_TRUE(lw->server_streaming());
  EXPECT_FALSE(lw->client_streaming());
}

}  // namespace
}  // namespace tessera::agent
