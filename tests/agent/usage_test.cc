// Per-pod usage: cgroup parsing (v1 and v2, systemd and cgroupfs drivers), attribution over a
// fake /proc root, and the Prometheus text exposition.
#include "agent/usage.h"

#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/agent/fake_node.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;
using testing_support::TempPath;

constexpr const char* kUid = "1f2e3d4c-5b6a-4798-8a9b-0c1d2e3f4a5b";
constexpr const char* kCid = "4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c";

struct CgroupCase {
  const char* name;
  std::string text;
  std::string uid, container;  // empty uid: not a pod
};

TEST(PodFromCgroup, KubeletLayouts) {
  const std::string uscore = "1f2e3d4c_5b6a_4798_8a9b_0c1d2e3f4a5b";
  const std::vector<CgroupCase> cases = {
      {"v2 systemd burstable containerd",
       "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uscore +
           ".slice/cri-containerd-" + kCid + ".scope\n",
       kUid, kCid},
      {"v2 systemd besteffort crio",
       "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uscore +
           ".slice/crio-" + kCid + ".scope\n",
       kUid, kCid},
      {"v2 systemd guaranteed",
       "0::/kubepods.slice/kubepods-pod" + uscore + ".slice/cri-containerd-" + kCid + ".scope\n",
       kUid, kCid},
      {"v2 cgroupfs", std::string("0::/kubepods/burstable/pod") + kUid + "/" + kCid + "\n", kUid,
       kCid},
      {"v1 cgroupfs guaranteed",
       std::string("12:pids:/kubepods/pod") + kUid + "/" + kCid + "\n11:memory:/kubepods/pod" +
           kUid + "/" + kCid + "\n",
       kUid, kCid},
      {"v1 systemd docker",
       "4:devices:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uscore +
           ".slice/docker-" + kCid + ".scope\n1:name=systemd:/init.scope\n",
       kUid, kCid},
      {"pod slice only",
       "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uscore + ".slice\n",
       kUid, ""},
      {"hybrid: v2 line wins",
       std::string("5:memory:/kubepods/besteffort/pod") +
           "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee/x1\n0::/kubepods/burstable/pod" + kUid + "/" +
           kCid + "\n",
       kUid, kCid},
      {"host process", "0::/system.slice/sshd.service\n", "", ""},
      {"not a uid", "0::/kubepods/burstable/podnot-a-uid/abc\n", "", ""},
      {"pod outside kubepods", std::string("0::/user.slice/pod") + kUid + "/x\n", "", ""},
      {"empty", "", "", ""},
  };
  for (const CgroupCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto pod = PodFromCgroup(c.text);
    if (c.uid.empty()) {
      EXPECT_FALSE(pod.has_value());
      continue;
    }
    ASSERT_TRUE(pod.has_value());
    EXPECT_EQ(pod->pod_uid, c.uid);
    EXPECT_EQ(pod->container_id, c.container);
  }
}

void WriteCgroup(const std::string& root, uint32_t pid, const std::string& text) {
  const std::string dir = root + "/" + std::to_string(pid);
  ::mkdir(root.c_str(), 0755);
  ::mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/cgroup") << text;
}

NodeGpuState TwoGpus() {
  NodeGpuState s;
  GpuState a;
  a.index = 0;
  a.uuid = "GPU-a";
  a.name = "NVIDIA A100-SXM4-80GB";
  a.mig_enabled = true;
  a.mig_instances = {{"3g.40gb", 9, 0, 4, 1, {}}, {"1g.10gb", 19, 6, 1, 3, {}}};
  a.processes = {{100, 2048, 1, 0, "3g.40gb@0", {}}, {101, 1024, 1, 0, "3g.40gb@0", {}}};
  GpuState b;
  b.index = 1;
  b.uuid = "GPU-b";
  b.name = "NVIDIA A100-SXM4-80GB";
  b.used_mib = 5000;
  b.processes = {{200, 4000, -1, -1, "", 0.35}, {201, 1000, -1, -1, "", 0.5}};
  s.gpus = {a, b};
  return s;
}

TEST(Usage, AttributesProcessesAndRendersMetrics) {
  const std::string proc = TempPath("proc");
  const std::string sys = "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod";
  WriteCgroup(
      proc, 100,
      sys + "1f2e3d4c_5b6a_4798_8a9b_0c1d2e3f4a5b.slice/cri-containerd-" + kCid + ".scope\n");
  WriteCgroup(proc, 101, std::string("0::/kubepods/burstable/pod") + kUid + "/" + kCid + "\n");
  WriteCgroup(proc, 200,
              "0::/kubepods/besteffort/pod99999999-8888-7777-6666-555555555555/c0ffee\n");
  WriteCgroup(proc, 201, "0::/system.slice/xorg.service\n");
  const Json pods = {
      {"items",
       {{{"metadata", {{"uid", kUid}, {"name", "llm-0"}, {"namespace", "ml"}}},
         {"status",
          {{"containerStatuses",
            {{{"name", "server"}, {"containerID", std::string("containerd://") + kCid}}}}}}},
        {{"metadata",
          {{"uid", "99999999-8888-7777-6666-555555555555"},
           {"name", "say \"hi\""},
           {"namespace", "batch"}}}}}}};
  PodListLookup lookup(pods);
  const NodeGpuState state = TwoGpus();
  const auto usage = CollectUsage(state, proc, lookup);
  ASSERT_EQ(usage.size(), 4u);
  EXPECT_EQ(usage[0].pod_uid, kUid);
  EXPECT_EQ(usage[0].pod.name, "llm-0");
  EXPECT_EQ(usage[0].pod.container, "server");
  EXPECT_EQ(usage[2].pod.name, "say \"hi\"");
  EXPECT_EQ(usage[2].pod.container, "");
  EXPECT_EQ(usage[3].pod_uid, "");

  const std::string text = RenderUsageMetrics(state, usage, "gpu-a");
  const std::string a =
      "gpu=\"0\",UUID=\"GPU-a\",device=\"nvidia0\",modelName=\"NVIDIA A100-SXM4-80GB\","
      "Hostname=\"gpu-a\"";
  const std::string b =
      "gpu=\"1\",UUID=\"GPU-b\",device=\"nvidia1\",modelName=\"NVIDIA A100-SXM4-80GB\","
      "Hostname=\"gpu-a\"";
  const std::string want =
      "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n"
      "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
      "DCGM_FI_DEV_FB_USED{" +
      a +
      ",GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"3\",pod=\"\",namespace=\"\",container=\"\"} 0\n"
      "DCGM_FI_DEV_FB_USED{" +
      a +
      ",GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"1\",pod=\"llm-0\",namespace=\"ml\","
      "container=\"server\"} 3072\n"
      "DCGM_FI_DEV_FB_USED{" +
      b +
      ",pod=\"say \\\"hi\\\"\",namespace=\"batch\",container=\"\"} 5000\n"
      "# HELP tessera_agent_pod_gpu_memory_used_bytes GPU memory used by a pod's processes on "
      "one GPU or MIG instance.\n"
      "# TYPE tessera_agent_pod_gpu_memory_used_bytes gauge\n"
      "tessera_agent_pod_gpu_memory_used_bytes{node=\"gpu-a\",gpu=\"0\",gpu_uuid=\"GPU-a\","
      "mig_instance=\"3g.40gb@0\",namespace=\"ml\",pod=\"llm-0\",container=\"server\"} "
      "3221225472\n"
      "tessera_agent_pod_gpu_memory_used_bytes{node=\"gpu-a\",gpu=\"1\",gpu_uuid=\"GPU-b\","
      "mig_instance=\"\",namespace=\"batch\",pod=\"say \\\"hi\\\"\",container=\"\"} 4194304000\n"
      "# HELP tessera_agent_pod_gpu_processes GPU processes of a pod on one GPU or MIG "
      "instance.\n"
      "# TYPE tessera_agent_pod_gpu_processes gauge\n"
      "tessera_agent_pod_gpu_processes{node=\"gpu-a\",gpu=\"0\",gpu_uuid=\"GPU-a\","
      "mig_instance=\"3g.40gb@0\",namespace=\"ml\",pod=\"llm-0\",container=\"server\"} 2\n"
      "tessera_agent_pod_gpu_processes{node=\"gpu-a\",gpu=\"1\",gpu_uuid=\"GPU-b\","
      "mig_instance=\"\",namespace=\"batch\",pod=\"say \\\"hi\\\"\",container=\"\"} 1\n"
      "# HELP tessera_agent_pod_gpu_sm_utilization_ratio SM utilization (0..1) of a pod's "
      "processes on one GPU over the last sampling window.\n"
      "# TYPE tessera_agent_pod_gpu_sm_utilization_ratio gauge\n"
      "tessera_agent_pod_gpu_sm_utilization_ratio{node=\"gpu-a\",gpu=\"1\",gpu_uuid=\"GPU-b\","
      "mig_instance=\"\",namespace=\"batch\",pod=\"say \\\"hi\\\"\",container=\"\"} 0.35\n"
      "# HELP tessera_agent_gpu_unattributed_memory_used_bytes GPU memory used by processes not "
      "attributed to a pod.\n"
      "# TYPE tessera_agent_gpu_unattributed_memory_used_bytes gauge\n"
      "tessera_agent_gpu_unattributed_memory_used_bytes{node=\"gpu-a\",gpu=\"0\","
      "gpu_uuid=\"GPU-a\"} 0\n"
      "tessera_agent_gpu_unattributed_memory_used_bytes{node=\"gpu-a\",gpu=\"1\","
      "gpu_uuid=\"GPU-b\"} 1048576000\n";
  EXPECT_EQ(text, want);
}

TEST(Usage, VanishedProcessIsUnattributed) {
  PodListLookup lookup(Json::array());
  NodeGpuState state = TwoGpus();
  const auto usage = CollectUsage(state, TempPath("no-proc"), lookup);
  ASSERT_EQ(usage.size(), 4u);
  for (const ProcessUsage& u : usage) EXPECT_TRUE(u.pod_uid.empty());
}

}  // namespace
}  // namespace tessera::agent
