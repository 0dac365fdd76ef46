// Per-pod SM utilization: nvmlDeviceGetProcessUtilization samples read through the real dlopen
// path from the fake libnvidia-ml.so.1, attributed to pods over a fake /proc root and rendered
// as tessera_agent_pod_gpu_sm_utilization_ratio.
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/discovery.h"
#include "agent/nvml.h"
#include "agent/usage.h"
#include "tests/agent/fake_node.h"
#include "tests/support/test_paths.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;
using testing_support::FakeNode;
using testing_support::TempPath;

constexpr const char* kUidA = "1f2e3d4c-5b6a-4798-8a9b-0c1d2e3f4a5b";
constexpr const char* kUidB = "99999999-8888-7777-6666-555555555555";
constexpr const char* kSmFamily = "tessera_agent_pod_gpu_sm_utilization_ratio{";
const std::string kOldNvml = test::OldNvmlDir() + "/libnvidia-ml.so.1";

// pids 100 and 101 run in pod "a", 200 in pod "b"; 300 is a host process.
class Node {
 public:
  Node() : proc_(TempPath("proc")) {
    ::mkdir(proc_.c_str(), 0755);
    Cgroup(100, std::string("0::/kubepods/burstable/pod") + kUidA + "/c1\n");
    Cgroup(101, std::string("0::/kubepods/burstable/pod") + kUidA + "/c1\n");
    Cgroup(200, std::string("0::/kubepods/besteffort/pod") + kUidB + "/c2\n");
    Cgroup(300, "0::/system.slice/xorg.service\n");
  }

  // pod name -> value of its SM utilization series; `memory` counts the pod memory series.
  std::map<std::string, std::string> SmSeries(const NodeGpuState& state, int* memory = nullptr) {
    const PodListLookup lookup(Json::array({
        {{"metadata", {{"uid", kUidA}, {"name", "a"}, {"namespace", "ml"}}}},
        {{"metadata", {{"uid", kUidB}, {"name", "b"}, {"namespace", "ml"}}}},
    }));
    const std::string text = RenderUsageMetrics(state, CollectUsage(state, proc_, lookup), "n1");
    std::map<std::string, std::string> out;
    if (memory) *memory = 0;
    size_t i = 0;
    while (i < text.size()) {
      const size_t j = text.find('\n', i);
      const std::string line = text.substr(i, j - i);
      i = j + 1;
      if (memory && line.rfind("tessera_agent_pod_gpu_memory_used_bytes{", 0) == 0) ++*memory;
      if (line.rfind(kSmFamily, 0) != 0) continue;
      const size_t pod = line.find(",pod=\"") + 6;
      out[line.substr(pod, line.find('"', pod) - pod)] = line.substr(line.rfind(' ') + 1);
    }
    return out;
  }

 private:
  void Cgroup(int pid, const std::string& text) {
    const std::string dir = proc_ + "/" + std::to_string(pid);
    ::mkdir(dir.c_str(), 0755);
    std::ofstream(dir + "/cgroup") << text;
  }
  std::string proc_;
};

Json Sample(unsigned pid, unsigned long long ts, unsigned sm) {
  return {{"pid", pid}, {"timestamp", ts}, {"sm", sm}, {"mem", 1}};
}

Json Gpu(const Json& processes, const Json& samples) {
  return {{"model", "A100-80GB"},
          {"uuid", "GPU-sm-0"},
          {"processes", processes},
          {"process_utilization", samples}};
}

Json Procs(std::vector<unsigned> pids) {
  Json out = Json::array();
  for (unsigned p : pids) out.push_back({{"pid", p}, {"used_mib", 1024}});
  return out;
}

struct SmCase {
  const char* name;
  Json gpu;
  std::string library;  // empty: the fake on LD_LIBRARY_PATH
  std::map<std::string, std::string> want;
  bool sample_ok = true;
};

TEST(SmUtilization, PerPodFromProcessSamples) {
  const Json shared = Json::array({Sample(100, 10, 30), Sample(200, 15, 20), Sample(100, 20, 50),
                                   Sample(300, 16, 90), Sample(999, 17, 80)});
  Json mig = Gpu(Json::array({{{"pid", 100}, {"used_mib", 1024}, {"mig", "7g.80gb@0"}}}),
                 Json::array({Sample(100, 10, 30)}));
  mig["mig"] = true;
  mig["mig_layout"] = "7g.80gb@0";
  Json unsupported = Gpu(Procs({100, 200}), shared);
  unsupported["fail"] = {{"nvmlDeviceGetProcessUtilization", "NVML_ERROR_NOT_SUPPORTED"}};
  Json broken = Gpu(Procs({100, 200}), shared);
  broken["fail"] = {{"nvmlDeviceGetProcessUtilization", "NVML_ERROR_UNKNOWN"}};
  const std::vector<SmCase> cases = {
      {"two pods share a GPU: mean per process",
       Gpu(Procs({100, 200, 300}), shared),
       "",
       {{"a", "0.4"}, {"b", "0.2"}}},
      {"a pod's processes add up, capped at 1",
       Gpu(Procs({100, 101, 200}),
           Json::array({Sample(100, 10, 60), Sample(101, 11, 70), Sample(200, 12, 5)})),
       "",
       {{"a", "1"}, {"b", "0.05"}}},
      {"no samples: idle processes",
       Gpu(Procs({100, 200}), Json::array()),
       "",
       {{"a", "0"}, {"b", "0"}}},
      {"not supported", unsupported, "", {}},
      {"MIG mode", mig, "", {}},
      {"driver without the function", Gpu(Procs({100, 200}), shared), kOldNvml, {}},
      {"failing call", broken, "", {}, false},
  };
  for (const SmCase& c : cases) {
    SCOPED_TRACE(c.name);
    FakeNode fake(Json{{"gpus", Json::array({c.gpu})}});
    auto nvml = c.library.empty() ? OpenNvml() : OpenNvml(c.library);
    ASSERT_TRUE(nvml.ok()) << nvml.status().message();
    auto state = Discover(**nvml);
    ASSERT_TRUE(state.ok()) << state.status().message();
    SmSampler sampler;
    const Status s = sampler.Sample(**nvml, *state);
    EXPECT_EQ(s.ok(), c.sample_ok) << s.message();
    if (!s.ok()) {
      EXPECT_NE(s.message().find("nvmlDeviceGetProcessUtilization(gpu 0)"), std::string::npos);
    }
    Node node;
    int memory = 0;
    EXPECT_EQ(node.SmSeries(*state, &memory), c.want);
    EXPECT_GT(memory, 0);  // the pods are attributed either way
  }
}

// A sample is counted in the pass that first sees it: the sampler asks for samples newer than
// the newest it saw on that GPU.
TEST(SmUtilization, SamplesAreCountedOnce) {
  Node node;
  const Json first = Json::array({Sample(100, 10, 30), Sample(100, 20, 50), Sample(200, 20, 20)});
  FakeNode fake(Json{{"gpus", Json::array({Gpu(Procs({100, 200}), first)})}});
  SmSampler sampler;
  using Want = std::map<std::string, std::string>;
  {
    auto nvml = OpenNvml();
    ASSERT_TRUE(nvml.ok()) << nvml.status().message();
    for (const Want& want : {Want{{"a", "0.4"}, {"b", "0.2"}}, Want{{"a", "0"}, {"b", "0"}}}) {
      auto state = Discover(**nvml);
      ASSERT_TRUE(state.ok()) << state.status().message();
      ASSERT_TRUE(sampler.Sample(**nvml, *state).ok());
      EXPECT_EQ(node.SmSeries(*state), want);
    }
  }
  // The buffer still holds the old samples, one older than the last seen, and two new ones.
  Json more = first;
  more.push_back(Sample(100, 15, 100));
  more.push_back(Sample(100, 30, 90));
  more.push_back(Sample(100, 40, 70));
  fake.Write(Json{{"gpus", Json::array({Gpu(Procs({100, 200}), more)})}});
  auto nvml = OpenNvml();
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  auto state = Discover(**nvml);
  ASSERT_TRUE(state.ok()) << state.status().message();
  ASSERT_TRUE(sampler.Sample(**nvml, *state).ok());
  EXPECT_EQ(node.SmSeries(*state), (Want{{"a", "0.8"}, {"b", "0"}}));
}

}  // namespace
}  // namespace tessera::agent
