// Node-agent discovery, inventory and labels over the fake libnvidia-ml.so.1, loaded through the
// real dlopen path (CTest puts the fake's directory on LD_LIBRARY_PATH).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/discovery.h"
#include "agent/inventory.h"
#include "agent/nvml.h"
#include "kube/translate.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;

std::string TempPath(const std::string& stem) {
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "_" + info->name();
  for (char& c : name)
    if (c == '/') c = '_';
  return testing::TempDir() + "tessera_" + name + "_" + std::to_string(getpid()) + "_" + stem;
}

// Writes the fake's configuration and points TESSERA_FAKE_NVML_CONFIG at it.
class FakeConfig {
 public:
  explicit FakeConfig(const Json& cfg) : path_(TempPath("nvml.json")) {
    std::ofstream(path_) << cfg.dump(1);
    setenv("TESSERA_FAKE_NVML_CONFIG", path_.c_str(), 1);
  }
  ~FakeConfig() {
    std::remove(path_.c_str());
    unsetenv("TESSERA_FAKE_NVML_CONFIG");
  }

 private:
  std::string path_;
};

Result<NodeGpuState> DiscoverWith(const Json& cfg) {
  FakeConfig fake(cfg);
  auto nvml = OpenNvml();
  if (!nvml.ok()) return nvml.status();
  return Discover(**nvml);
}

Json A100Node() {
  Json gpus = Json::array();
  const char* layouts[] = {"3g.40gb@0 2g.20gb@4 1g.10gb@6", "7g.80gb@0",
                           "1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6",
                           "4g.40gb@0 1g.20gb@4 1g.10gb+me@6"};
  for (int i = 0; i < 8; ++i) {
    Json g = {{"model", "A100-80GB"},
              {"uuid", "GPU-a100-" + std::to_string(i)},
              {"numa", i / 4},
              {"pcie_switch", i / 2}};
    if (i < 4) {
      g["mig"] = true;
      g["mig_layout"] = layouts[i];
    }
    g["utilization"] = {{"gpu", 10 * i}, {"memory", i}};
    gpus.push_back(g);
  }
  gpus[0]["processes"] = {{{"pid", 4242}, {"used_mib", 2048}, {"mig", "3g.40gb@0"}},
                          {{"pid", 4243}, {"used_mib", 512}, {"mig", "1g.10gb@6"}}};
  gpus[5]["processes"] = {{{"pid", 777}, {"used_mib", 30000}}};
  return {{"nvlink_groups", {{0, 1, 2, 3, 4, 5, 6, 7}}}, {"gpus", gpus}};
}

struct DiscoveryCase {
  std::string name;
  Json config;
  std::function<void(const NodeGpuState&)> check;
};

void PrintTo(const DiscoveryCase& c, std::ostream* os) {
  *os << c.name;
}

class DiscoveryTable : public testing::TestWithParam<DiscoveryCase> {};

TEST_P(DiscoveryTable, Discovers) {
  auto state = DiscoverWith(GetParam().config);
  ASSERT_TRUE(state.ok()) << state.status().message();
  GetParam().check(*state);
}

void CheckA100(const NodeGpuState& s) {
  ASSERT_EQ(s.gpus.size(), 8u);
  const GpuState& g0 = s.gpus[0];
  EXPECT_EQ(g0.uuid, "GPU-a100-0");
  EXPECT_EQ(g0.name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(g0.product, "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(g0.model, "A100-80GB");
  EXPECT_EQ(g0.memory_mib, 81920);
  EXPECT_EQ(g0.used_mib, 2560);
  EXPECT_TRUE(g0.mig_capable);
  EXPECT_TRUE(g0.mig_enabled);
  EXPECT_EQ(g0.mig_layout, "3g.40gb@0 2g.20gb@4 1g.10gb@6");
  ASSERT_EQ(g0.mig_instances.size(), 3u);
  EXPECT_EQ(g0.mig_instances[0].placement(), "3g.40gb@0");
  EXPECT_EQ(g0.mig_instances[0].profile_id, 9);
  EXPECT_EQ(g0.mig_instances[0].size, 4);
  EXPECT_EQ(g0.mig_instances[2].profile_id, 19);
  std::set<std::string> mig_uuids;
  for (const GpuState& g : s.gpus)
    for (const MigInstanceState& m : g.mig_instances) {
      ASSERT_EQ(m.compute_instances.size(), 1u) << m.placement();
      EXPECT_EQ(m.compute_instances[0].gi_id, m.gi_id);
      EXPECT_EQ(m.compute_instances[0].uuid.rfind("MIG-", 0), 0u);
      mig_uuids.insert(m.compute_instances[0].uuid);
    }
  EXPECT_EQ(mig_uuids.size(), 3u + 1u + 7u + 3u);
  EXPECT_EQ(s.gpus[1].mig_layout, "7g.80gb@0");
  EXPECT_EQ(s.gpus[3].mig_layout, "4g.40gb@0 1g.20gb@4 1g.10gb+me@6");
  EXPECT_FALSE(s.gpus[4].mig_enabled);
  EXPECT_TRUE(s.gpus[4].mig_capable);
  EXPECT_EQ(s.gpus[4].mig_layout, "");

  ASSERT_EQ(g0.processes.size(), 2u);
  EXPECT_EQ(g0.processes[0].pid, 4242u);
  EXPECT_EQ(g0.processes[0].used_mib, 2048);
  EXPECT_EQ(g0.processes[0].mig_instance, "3g.40gb@0");
  EXPECT_EQ(g0.processes[0].gi_id, g0.mig_instances[0].gi_id);
  EXPECT_EQ(g0.processes[0].ci_id, 0);
  EXPECT_EQ(g0.processes[1].mig_instance, "1g.10gb@6");
  ASSERT_EQ(s.gpus[5].processes.size(), 1u);
  EXPECT_EQ(s.gpus[5].processes[0].mig_instance, "");
  EXPECT_EQ(s.gpus[5].processes[0].gi_id, -1);

  EXPECT_FALSE(g0.utilization.has_value());  // NVML gives none on MIG-enabled GPUs
  ASSERT_TRUE(s.gpus[5].utilization.has_value());
  EXPECT_EQ(s.gpus[5].utilization->gpu_pct, 50);
  EXPECT_EQ(s.gpus[5].utilization->memory_pct, 5);
  EXPECT_EQ(s.gpus[6].numa_node, 1);
  EXPECT_EQ(s.gpus[1].numa_node, 0);
  ASSERT_EQ(s.links.size(), 8u);
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b)
      EXPECT_EQ(s.links[a][b], a == b ? GpuLink::kSelf : GpuLink::kNvLink) << a << "," << b;
  for (const GpuState& g : s.gpus) EXPECT_TRUE(g.healthy);
}

void CheckH100(const NodeGpuState& s) {
  ASSERT_EQ(s.gpus.size(), 3u);
  EXPECT_EQ(s.gpus[0].model, "H100-80GB");
  EXPECT_EQ(s.gpus[0].product, "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(s.gpus[0].memory_mib, 81559);
  EXPECT_EQ(s.gpus[0].compute_capability, std::make_pair(9, 0));
  EXPECT_EQ(s.gpus[0].mig_layout, "1g.10gb+me@0 1g.20gb@2 3g.40gb@4");
  EXPECT_EQ(s.gpus[0].mig_instances[2].profile_id, 9);
  EXPECT_EQ(s.gpus[1].mig_layout, "");
  EXPECT_EQ(s.links[0][1], GpuLink::kPcieSwitch);
  EXPECT_EQ(s.links[0][2], GpuLink::kSystem);
  EXPECT_EQ(s.links[1][2], GpuLink::kSystem);
}

void CheckNoMig(const NodeGpuState& s) {
  ASSERT_EQ(s.gpus.size(), 2u);
  EXPECT_EQ(s.gpus[0].model, "A100-40GB");
  EXPECT_TRUE(s.gpus[0].mig_capable);
  EXPECT_FALSE(s.gpus[0].mig_enabled);
  EXPECT_TRUE(s.gpus[0].mig_instances.empty());
  EXPECT_EQ(s.gpus[1].model, "T4");
  EXPECT_FALSE(s.gpus[1].mig_capable);
  EXPECT_EQ(s.gpus[1].utilization->gpu_pct, 0);
  EXPECT_EQ(s.links[0][1], GpuLink::kNumaNode);
}

void CheckXid(const NodeGpuState& s) {
  ASSERT_EQ(s.gpus.size(), 3u);
  EXPECT_TRUE(s.gpus[0].healthy);
  EXPECT_FALSE(s.gpus[1].healthy);
  EXPECT_EQ(s.gpus[1].health_reason, "XID 79");
  EXPECT_EQ(s.gpus[1].xids, (std::vector<uint64_t>{13, 79}));
  EXPECT_TRUE(s.gpus[2].healthy);  // 13, 31, 43 and 94 end a process, not the GPU
  EXPECT_EQ(s.gpus[2].xids, (std::vector<uint64_t>{13, 31, 43, 94}));
}

INSTANTIATE_TEST_SUITE_P(
    Nodes, DiscoveryTable,
    testing::Values(DiscoveryCase{"EightA100MixedMig", A100Node(), CheckA100},
                    DiscoveryCase{
                        "H100",
                        {{"gpus",
                          {{{"model", "H100-80GB"},
                            {"memory_mib", 81559},
                            {"mig", true},
                            {"pcie_switch", 0},
                            {"mig_layout", "1g.10gb+me@0 1g.20gb@2 3g.40gb@4"}},
                           {{"model", "H100-80GB"}, {"memory_mib", 81559}, {"pcie_switch", 0}},
                           {{"model", "H100-80GB"}, {"numa", 1}, {"pcie_switch", 1}}}}},
                        CheckH100},
                    DiscoveryCase{"MigDisabled",
                                  {{"gpus",
                                    {{{"model", "A100-40GB"}, {"pcie_switch", 0}},
                                     {{"model", "T4"}, {"pcie_switch", 1}}}}},
                                  CheckNoMig},
                    DiscoveryCase{"XidMarksUnhealthy",
                                  {{"gpus",
                                    {{{"model", "A100-80GB"}},
                                     {{"model", "A100-80GB"}, {"xids", {13, 79}}},
                                     {{"model", "A100-80GB"}, {"xids", {13, 31, 43, 94}}}}}},
                                  CheckXid},
                    DiscoveryCase{"NoDevices",
                                  {{"gpus", Json::array()}},
                                  [](const NodeGpuState& s) {
                                    EXPECT_TRUE(s.gpus.empty());
                                    EXPECT_EQ(*InventoryAnnotation(s), "[]");
                                    EXPECT_TRUE(GfdLabels(s).empty());
                                  }}),
    [](const testing::TestParamInfo<DiscoveryCase>& i) { return i.param.name; });

struct FailureCase {
  std::string name;
  Json config;
  StatusCode code;
  std::string message;
};

void PrintTo(const FailureCase& c, std::ostream* os) {
  *os << c.name;
}

class Failures : public testing::TestWithParam<FailureCase> {};

TEST_P(Failures, ClearStatus) {
  auto state = DiscoverWith(GetParam().config);
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.status().code(), GetParam().code) << state.status().message();
  EXPECT_EQ(state.status().message(), GetParam().message);
}

Json TwoA100(const Json& top_fail, const Json& gpu1_fail) {
  Json cfg = {{"gpus", {{{"model", "A100-80GB"}}, {{"model", "A100-80GB"}, {"mig", true}}}}};
  if (!top_fail.is_null()) cfg["fail"] = top_fail;
  if (!gpu1_fail.is_null()) cfg["gpus"][1]["fail"] = gpu1_fail;
  return cfg;
}

INSTANTIATE_TEST_SUITE_P(
    Nvml, Failures,
    testing::Values(
        FailureCase{"DriverNotLoaded",
                    {{"driver_not_loaded", true}, {"gpus", Json::array()}},
                    StatusCode::kUnavailable,
                    "NVIDIA driver not loaded (nvmlInit_v2: Driver Not Loaded)"},
        FailureCase{"InitFails", TwoA100({{"nvmlInit_v2", "NVML_ERROR_NO_PERMISSION"}}, nullptr),
                    StatusCode::kUnavailable, "nvmlInit_v2 failed: Insufficient Permissions"},
        FailureCase{"Count", TwoA100({{"nvmlDeviceGetCount_v2", "NVML_ERROR_UNKNOWN"}}, nullptr),
                    StatusCode::kInternal, "nvmlDeviceGetCount_v2: Unknown Error"},
        FailureCase{"Uuid", TwoA100({{"nvmlDeviceGetUUID", "NVML_ERROR_UNKNOWN"}}, nullptr),
                    StatusCode::kInternal, "nvmlDeviceGetUUID(gpu 0): Unknown Error"},
        FailureCase{"MemoryOfOneGpu",
                    TwoA100(nullptr, {{"nvmlDeviceGetMemoryInfo", "NVML_ERROR_GPU_IS_LOST"}}),
                    StatusCode::kUnavailable, "nvmlDeviceGetMemoryInfo(gpu 1): GPU is lost"},
        FailureCase{"MigDevice",
                    TwoA100(nullptr, {{"nvmlDeviceGetMaxMigDeviceCount", "NVML_ERROR_UNKNOWN"}}),
                    StatusCode::kInternal, "nvmlDeviceGetMaxMigDeviceCount(gpu 1): Unknown Error"},
        FailureCase{
            "Processes",
            TwoA100({{"nvmlDeviceGetComputeRunningProcesses_v3", "NVML_ERROR_NO_PERMISSION"}},
                    nullptr),
            StatusCode::kPermissionDenied,
            "nvmlDeviceGetComputeRunningProcesses_v3(gpu 0): Insufficient Permissions"},
        FailureCase{
            "Topology",
            TwoA100({{"nvmlDeviceGetTopologyCommonAncestor", "NVML_ERROR_UNKNOWN"}}, nullptr),
            StatusCode::kInternal, "nvmlDeviceGetTopologyCommonAncestor(gpus 0,1): Unknown Error"},
        FailureCase{"Events", TwoA100({{"nvmlEventSetCreate", "NVML_ERROR_UNKNOWN"}}, nullptr),
                    StatusCode::kInternal,
                    "watching XID events: nvmlEventSetCreate: Unknown Error"}),
    [](const testing::TestParamInfo<FailureCase>& i) { return i.param.name; });

TEST(NoNvml, ExplicitPathMissing) {
  auto nvml = OpenNvml("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(nvml.status().message(),
            "/nonexistent/libnvidia-ml.so.1 not found: is the NVIDIA driver installed? (dlopen: "
            "/nonexistent/libnvidia-ml.so.1: cannot open shared object file: No such file or "
            "directory)");
}

// A library that is not NVML: the first required function is named.
TEST(NoNvml, MissingSymbol) {
  auto nvml = OpenNvml("libm.so.6");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(nvml.status().message(),
            "libm.so.6: missing NVML function nvmlInit_v2 (driver too old?)");
}

// Run by CTest with LD_LIBRARY_PATH at an empty directory (test *_without_nvml).
TEST(NoNvml, SonameNotOnSearchPath) {
  if (!std::getenv("TESSERA_EXPECT_NO_NVML")) GTEST_SKIP() << "needs an NVML-free search path";
  auto nvml = OpenNvml();
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().message(),
            "libnvidia-ml.so.1 not found: is the NVIDIA driver installed? (dlopen: "
            "libnvidia-ml.so.1: cannot open shared object file: No such file or directory)");
}

TEST(Inventory, RoundTripsAndLabelsAreExact) {
  auto state = DiscoverWith(A100Node());
  ASSERT_TRUE(state.ok()) << state.status().message();
  state->gpus[7].healthy = false;
  auto text = InventoryAnnotation(*state);
  ASSERT_TRUE(text.ok()) << text.status().message();
  auto back = kube::DecodeInventory(*text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 8u);
  EXPECT_EQ((*back)[0].uuid, "GPU-a100-0");
  EXPECT_EQ((*back)[0].model, "A100-80GB");
  EXPECT_EQ((*back)[0].memory_mib, 81920);
  EXPECT_EQ((*back)[0].mig_layout, "3g.40gb@0 2g.20gb@4 1g.10gb@6");
  EXPECT_TRUE((*back)[3].mig_enabled);
  EXPECT_FALSE((*back)[5].mig_enabled);
  EXPECT_FALSE((*back)[7].healthy);
  EXPECT_EQ(Json::parse(*text)[7]["health"], "unhealthy");
  EXPECT_EQ(*back, *InventoryEntries(*state));

  const std::map<std::string, std::string> want = {
      {"nvidia.com/gpu.count", "8"},         {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"},
      {"nvidia.com/gpu.memory", "81920"},    {"nvidia.com/gpu.family", "ampere"},
      {"nvidia.com/gpu.compute.major", "8"}, {"nvidia.com/gpu.compute.minor", "0"},
      {"nvidia.com/mig.capable", "true"},    {"nvidia.com/mig.strategy", "mixed"},
  };
  auto labels = GfdLabels(*state);
  for (const auto& [k, v] : want) EXPECT_EQ(labels[k], v) << k;
  // MIG device types: 3g.40gb x1, 2g.20gb x1, 1g.10gb x1+7, 7g.80gb x1, 4g.40gb x1,
  // 1g.20gb x1, 1g.10gb+me x1.
  EXPECT_EQ(labels["nvidia.com/mig-1g.10gb.count"], "8");
  EXPECT_EQ(labels["nvidia.com/mig-1g.10gb.memory"], "9728");
  EXPECT_EQ(labels["nvidia.com/mig-1g.10gb.multiprocessors"], "14");
  EXPECT_EQ(labels["nvidia.com/mig-1g.10gb.slices.gi"], "1");
  EXPECT_EQ(labels["nvidia.com/mig-1g.10gb.me.count"], "1");
  EXPECT_EQ(labels["nvidia.com/mig-3g.40gb.count"], "1");
  EXPECT_EQ(labels["nvidia.com/mig-3g.40gb.slices.ci"], "3");
  EXPECT_EQ(labels["nvidia.com/mig-7g.80gb.multiprocessors"], "98");
  EXPECT_EQ(labels["nvidia.com/mig-7g.80gb.memory"], "80640");
  size_t mig_types = 0;
  for (const auto& [k, v] : labels)
    if (k.size() > 6 && k.compare(k.size() - 6, 6, ".count") == 0 && k != "nvidia.com/gpu.count")
      ++mig_types;
  EXPECT_EQ(mig_types, 7u);
  EXPECT_EQ(labels.size(), want.size() + 7u * 10u);
}

TEST(Inventory, Version2CarriesMigDevicesAndTopology) {
  Json gpus = Json::array();
  for (int i = 0; i < 4; ++i)
    gpus.push_back({{"model", "A100-80GB"},
                    {"uuid", "GPU-t-" + std::to_string(i)},
                    {"numa", i < 2 ? 0 : 1},
                    {"pcie_switch", i}});
  gpus[0]["mig"] = true;
  gpus[0]["mig_layout"] = "3g.40gb@0 2g.20gb@4";
  gpus[0]["pci_bus_id"] = "00000000:07:00.0";
  gpus[1]["mig"] = true;  // MIG on, no instances
  gpus[2]["numa"] = -1;   // NVML reports no NUMA node
  gpus[3]["pci_bus_id"] = "";
  auto state = DiscoverWith({{"nvlink_groups", {{0, 1}, {2, 3}}}, {"gpus", gpus}});
  ASSERT_TRUE(state.ok()) << state.status().message();
  auto text = InventoryAnnotation(*state);
  ASSERT_TRUE(text.ok()) << text.status().message();
  const Json j = Json::parse(*text);
  ASSERT_EQ(j.size(), 4u);
  for (const Json& e : j) EXPECT_EQ(e.value("version", 0), kube::kInventoryVersion) << e.dump();

  const auto& mig = state->gpus[0].mig_instances;
  ASSERT_EQ(mig.size(), 2u);
  const Json want_devices = {
      {{"instance", "3g.40gb@0"}, {"uuid", mig[0].compute_instances.at(0).uuid}},
      {{"instance", "2g.20gb@4"}, {"uuid", mig[1].compute_instances.at(0).uuid}}};
  EXPECT_EQ(j[0]["mig_devices"], want_devices);
  EXPECT_EQ(mig[0].compute_instances.at(0).uuid.rfind("MIG-", 0), 0u);
  EXPECT_EQ(j[0]["numa_node"], 0);
  EXPECT_EQ(j[0]["pci_bus_id"], "00000000:07:00.0");
  EXPECT_EQ(j[0]["nvlink_peers"], Json::array({1}));
  EXPECT_EQ(j[1]["mig_devices"], Json::array());
  EXPECT_EQ(j[1]["pci_bus_id"], "00000000:11:00.0");
  EXPECT_FALSE(j[2].contains("numa_node"));
  EXPECT_EQ(j[2]["nvlink_peers"], Json::array({3}));
  EXPECT_FALSE(j[2].contains("mig_devices"));
  EXPECT_EQ(j[3]["numa_node"], 1);
  EXPECT_FALSE(j[3].contains("pci_bus_id"));

  // The scheduler's reader gives back exactly what the agent discovered.
  auto back = kube::DecodeInventory(*text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, *InventoryEntries(*state));
  EXPECT_EQ((*back)[0].mig_devices.size(), 2u);
  EXPECT_EQ((*back)[2].numa_node, std::nullopt);
  EXPECT_EQ((*back)[3].nvlink_peers, std::vector<int>{2});
}

TEST(Inventory, NonMigNodeLabels) {
  auto state = DiscoverWith(
      {{"gpus", {{{"model", "H100-80GB"}, {"memory_mib", 81559}}, {{"model", "H100-80GB"}}}}});
  ASSERT_TRUE(state.ok()) << state.status().message();
  const std::map<std::string, std::string> want = {
      {"nvidia.com/gpu.count", "2"},         {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
      {"nvidia.com/gpu.memory", "81559"},    {"nvidia.com/gpu.family", "hopper"},
      {"nvidia.com/gpu.compute.major", "9"}, {"nvidia.com/gpu.compute.minor", "0"},
      {"nvidia.com/mig.capable", "true"},    {"nvidia.com/mig.strategy", "mixed"},
  };
  EXPECT_EQ(GfdLabels(*state), want);
  auto t4 = DiscoverWith({{"gpus", {{{"model", "T4"}}}}});
  ASSERT_TRUE(t4.ok());
  EXPECT_EQ(GfdLabels(*t4).at("nvidia.com/mig.capable"), "false");
  EXPECT_EQ(GfdLabels(*t4).count("nvidia.com/mig.strategy"), 0u);
  EXPECT_EQ(GfdLabels(*t4).at("nvidia.com/gpu.family"), "turing");
}

TEST(Inventory, UnknownProductIsAnError) {
  auto state = DiscoverWith({{"gpus", {{{"model", "L40S"}, {"name", "NVIDIA L40S"}}}}});
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(state->gpus[0].model, "");
  auto text = InventoryAnnotation(*state);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().message(),
            "gpu 0: unknown GPU product \"NVIDIA-L40S\"; the scheduler cannot use this node's "
            "inventory");
}

TEST(MigChanges, PlacementsBusyInstancesAndStateFile) {
  const std::string state_file = TempPath("state.json");
  std::remove(state_file.c_str());
  const Json cfg = {{"state_file", state_file},
                    {"gpus",
                     {{{"model", "A100-80GB"},
                       {"mig", true},
                       {"mig_layout", "3g.40gb@0"},
                       {"processes", {{{"pid", 9}, {"used_mib", 100}, {"mig", "3g.40gb@0"}}}}},
                      {{"model", "A100-40GB"}}}}};
  FakeConfig fake(cfg);
  {
    auto nvml = OpenNvml();
    ASSERT_TRUE(nvml.ok()) << nvml.status().message();
    GpuBackend& b = **nvml;
    auto gi = b.CreateGpuInstance(0, 14, 4, 2);  // 2g.20gb at 4
    ASSERT_TRUE(gi.ok()) << gi.status().message();
    EXPECT_EQ(*gi, 2);
    auto ci = b.CreateComputeInstance(0, *gi);
    ASSERT_TRUE(ci.ok()) << ci.status().message();
    EXPECT_EQ(*ci, 0);

    auto bad_start = b.CreateGpuInstance(0, 14, 3, 2);
    EXPECT_EQ(bad_start.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(bad_start.status().message(),
              "nvmlDeviceCreateGpuInstanceWithPlacement(gpu 0 profile 14 at 3): Invalid Argument");
    auto overlap = b.CreateGpuInstance(0, 9, 4, 4);  // 3g.40gb over the 2g.20gb
    EXPECT_EQ(overlap.status().code(), StatusCode::kResourceExhausted);
    auto unknown = b.CreateGpuInstance(0, 42, 0, 1);
    EXPECT_EQ(unknown.status().message(),
              "gpu 0 profile 42 at 0: the GPU offers no such GPU-instance profile");
    auto no_mig = b.CreateGpuInstance(1, 9, 0, 4);
    EXPECT_EQ(no_mig.status().code(), StatusCode::kInvalidArgument);

    Status busy = b.DestroyComputeInstance(0, 1, 0);  // pid 9 runs in 3g.40gb@0
    EXPECT_EQ(busy.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(busy.message(),
              "nvmlComputeInstanceDestroy(gpu 0 GI 1 CI 0): In use by another client");
    Status has_ci = b.DestroyGpuInstance(0, *gi);
    EXPECT_EQ(has_ci.code(), StatusCode::kFailedPrecondition);
    ASSERT_TRUE(b.DestroyComputeInstance(0, *gi, 0).ok());
    ASSERT_TRUE(b.DestroyGpuInstance(0, *gi).ok());
    EXPECT_EQ(b.DestroyGpuInstance(0, *gi).code(), StatusCode::kNotFound);

    auto small = b.CreateGpuInstance(0, 19, 6, 1);  // 1g.10gb at 6
    ASSERT_TRUE(small.ok()) << small.status().message();
    ASSERT_TRUE(b.CreateComputeInstance(0, *small).ok());
    auto s = Discover(b);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(s->gpus[0].mig_layout, "3g.40gb@0 1g.10gb@6");
  }
  // A restarted agent (a new nvmlInit) sees the layout the state file kept.
  {
    auto nvml = OpenNvml();
    ASSERT_TRUE(nvml.ok()) << nvml.status().message();
    auto s = Discover(**nvml);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(s->gpus[0].mig_layout, "3g.40gb@0 1g.10gb@6");
    ASSERT_EQ(s->gpus[0].mig_instances.size(), 2u);
    EXPECT_EQ(s->gpus[0].mig_instances[1].compute_instances.size(), 1u);
  }
  std::remove(state_file.c_str());
}

}  // namespace
}  // namespace tessera::agent
