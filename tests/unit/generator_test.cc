#include "sim/generator.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "cluster/cluster_state.h"
#include "sim/trace.h"

namespace tessera {
namespace {

void ExpectSameNodes(const std::vector<NodeSpec>& a, const std::vector<NodeSpec>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name) << i;
    EXPECT_EQ(a[i].cpu, b[i].cpu) << i;
    EXPECT_EQ(a[i].memory, b[i].memory) << i;
    EXPECT_EQ(a[i].gpu_count, b[i].gpu_count) << i;
    EXPECT_EQ(a[i].model, b[i].model) << i;
    EXPECT_EQ(a[i].labels, b[i].labels) << i;
  }
}

void ExpectSamePods(const std::vector<Workload>& a, const std::vector<Workload>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name) << i;
    EXPECT_EQ(a[i].demand, b[i].demand) << i;
    EXPECT_EQ(a[i].creation, b[i].creation) << i;
    EXPECT_EQ(a[i].deletion, b[i].deletion) << i;
  }
}

GeneratedTrace MustGenerate(const GeneratorConfig& config, uint64_t seed) {
  auto r = Generate(config, seed);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : GeneratedTrace{};
}

int64_t GpuCapacityMilli(const std::vector<NodeSpec>& nodes) {
  int64_t c = 0;
  for (const NodeSpec& n : nodes) c += 1000 * n.gpu_count;
  return c;
}

TEST(GeneratorTest, DeterministicPerSeed) {
  const GeneratorConfig config;
  const GeneratedTrace a = MustGenerate(config, 7);
  const GeneratedTrace b = MustGenerate(config, 7);
  ExpectSameNodes(a.nodes, b.nodes);
  ExpectSamePods(a.pods, b.pods);

  const GeneratedTrace c = MustGenerate(config, 8);
  ExpectSameNodes(a.nodes, c.nodes);
  bool differs = a.pods.size() != c.pods.size();
  for (size_t i = 0; !differs && i < a.pods.size(); ++i) {
    differs = !(a.pods[i].demand == c.pods[i].demand) || a.pods[i].creation != c.pods[i].creation;
  }
  EXPECT_TRUE(differs);
}

TEST(GeneratorTest, DefaultClusterShape) {
  const GeneratedTrace t = MustGenerate(GeneratorConfig{}, kDefaultGeneratorSeed);
  ASSERT_EQ(t.nodes.size(), 400u);
  EXPECT_EQ(GpuCapacityMilli(t.nodes), 2032 * 1000);
  std::map<std::string, int> gpus_by_model;
  std::map<int, int> nodes_by_gpus;
  for (const NodeSpec& n : t.nodes) {
    gpus_by_model[GpuCatalog::Builtin().Get(n.model).name] += n.gpu_count;
    ++nodes_by_gpus[n.gpu_count];
  }
  EXPECT_EQ(gpus_by_model["A100-80GB"], 1440);
  EXPECT_EQ(gpus_by_model["T4"], 280);
  EXPECT_EQ(gpus_by_model["A10"], 2);
  EXPECT_GT(nodes_by_gpus[2], 150);  // many 2-GPU nodes
  EXPECT_GT(nodes_by_gpus[8], 190);  // mostly 8-GPU capacity
}

TEST(GeneratorTest, NodeCountsScaleExactly) {
  for (int n : {1, 11, 40, 1000, 4000}) {
    GeneratorConfig config;
    config.num_nodes = n;
    const GeneratedTrace t = MustGenerate(config, 3);
    EXPECT_EQ(static_cast<int>(t.nodes.size()), n);
    const double ratio = static_cast<double>(MixOf(t.pods).gpu_milli) /
                         static_cast<double>(GpuCapacityMilli(t.nodes));
    EXPECT_LE(ratio, config.gpu_demand_ratio + 1e-12) << n;
    EXPECT_FALSE(t.pods.empty()) << n;
    if (n >= 40) {
      EXPECT_GT(ratio, config.gpu_demand_ratio - 0.01) << n;
    }
  }
}

TEST(GeneratorTest, ProportionsResembleTheTrace) {
  GeneratorConfig config;
  config.num_nodes = 2000;  // ~13,000 pods: tight sampling error
  const GeneratedTrace t = MustGenerate(config, 11);
  const WorkloadMix m = MixOf(t.pods);
  const double pods = static_cast<double>(m.pods);
  const double gpu_pods = static_cast<double>(m.share + m.whole + m.multi);
  EXPECT_NEAR(m.cpu_only / pods, 0.133, 0.015);
  EXPECT_NEAR(m.share / pods, 0.378, 0.02);
  EXPECT_NEAR(m.whole / pods, 0.48, 0.02);
  EXPECT_NEAR(m.multi / pods, 0.009, 0.004);
  EXPECT_GE(m.pinned / gpu_pods, 0.15);
  EXPECT_LE(m.pinned / gpu_pods, 0.30);
  const double demand = static_cast<double>(m.gpu_milli) / GpuCapacityMilli(t.nodes);
  EXPECT_GE(demand, 0.95);
  EXPECT_LE(demand, 1.0);

  std::map<int, int> milli;
  std::vector<SimTime> lifetimes;
  int64_t long_running = 0;
  for (const Workload& w : t.pods) {
    if (w.demand.IsShare()) ++milli[w.demand.gpu_milli];
    lifetimes.push_back(w.deletion - w.creation);
    long_running += w.deletion - w.creation > 86400;
  }
  std::vector<std::pair<int, int>> by_count(milli.begin(), milli.end());
  std::sort(by_count.begin(), by_count.end(), [](auto a, auto b) { return a.second > b.second; });
  ASSERT_GE(by_count.size(), 4u);
  EXPECT_EQ(by_count[0].first, 810);
  EXPECT_EQ(by_count[1].first, 470);

  std::sort(lifetimes.begin(), lifetimes.end());
  const SimTime median = lifetimes[lifetimes.size() / 2];
  EXPECT_GE(median, 450);
  EXPECT_LE(median, 650);
  EXPECT_GT(long_running, 0);
  EXPECT_GT(lifetimes.back(), 30 * 86400);

  const double span = static_cast<double>(t.pods.back().creation - t.pods.front().creation);
  EXPECT_NEAR(span / (pods - 1), config.mean_interarrival_s, 0.05 * config.mean_interarrival_s);
}

TEST(GeneratorTest, EveryNodeAndPodIsValid) {
  const GeneratedTrace t = MustGenerate(GeneratorConfig{}, 5);
  ClusterState state;
  for (const NodeSpec& n : t.nodes) {
    auto r = state.AddNode(n);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  SimTime last_creation = 0;
  std::set<std::string> names;
  for (const Workload& w : t.pods) {
    const Demand& d = w.demand;
    EXPECT_TRUE(names.insert(w.name).second) << w.name;
    EXPECT_GE(d.cpu.v, 0);
    EXPECT_GE(d.memory.v, 0);
    EXPECT_GE(d.num_gpu, 0);
    EXPECT_LE(d.num_gpu, kMaxGpusPerNode);
    EXPECT_GE(d.gpu_milli, 0);
    EXPECT_LE(d.gpu_milli, 1000);
    EXPECT_EQ(d.num_gpu == 0, d.gpu_milli == 0) << w.name;
    if (d.num_gpu > 1) {
      EXPECT_EQ(d.gpu_milli, 1000) << w.name;
    }
    if (d.num_gpu == 0) {
      EXPECT_EQ(d.models, 0u) << w.name;
    }
    EXPECT_GE(w.creation, last_creation) << w.name;
    EXPECT_GE(w.deletion, w.creation) << w.name;
    last_creation = w.creation;

    const GpuMask gpus = d.num_gpu == 0 ? 0 : (GpuMask{1} << d.num_gpu) - 1;
    bool fits = false;
    for (NodeIdx n = 0; n < state.num_nodes() && !fits; ++n) {
      fits = state.spec(n).gpu_count >= d.num_gpu && state.CheckFit(n, d, gpus).ok();
    }
    EXPECT_TRUE(fits) << w.name << " fits no node of the empty cluster";
  }
  EXPECT_EQ(t.pods.front().creation, 0);
}

TEST(GeneratorTest, CsvRoundTrip) {
  const GeneratedTrace t = MustGenerate(GeneratorConfig{}, 9);
  auto nodes = ParseNodesCsv(NodesCsv(t.nodes), "nodes.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ExpectSameNodes(t.nodes, *nodes);
  auto pods = ParsePodsCsv(PodsCsv(t.pods), "pods.csv");
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ExpectSamePods(t.pods, *pods);
}

TEST(GeneratorTest, CsvQuotesAndOpenEndedPods) {
  std::vector<NodeSpec> nodes(1);
  nodes[0].name = "rack \"a\", slot 1";
  nodes[0].cpu = MilliCpu(4000);
  nodes[0].memory = MiB(8192);
  auto back = ParseNodesCsv(NodesCsv(nodes), "n");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameNodes(nodes, *back);

  std::vector<Workload> pods(1);
  pods[0].name = "p,1";
  pods[0].demand = Demand{MilliCpu(1000), MiB(512), 1, 500, *ParseModelList("T4|A10")};
  pods[0].creation = 12;
  pods[0].deletion = -1;
  auto pback = ParsePodsCsv(PodsCsv(pods), "p");
  ASSERT_TRUE(pback.ok()) << pback.status().ToString();
  ExpectSamePods(pods, *pback);
}

TEST(GeneratorTest, WritesReadableFiles) {
  GeneratorConfig config;
  config.num_nodes = 30;
  const GeneratedTrace t = MustGenerate(config, 2);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("tessera_generator_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(WriteTraceCsv(t, (dir / "sub").string()).ok());
  auto nodes = ReadNodesCsv((dir / "sub" / "nodes.csv").string());
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ExpectSameNodes(t.nodes, *nodes);
  auto pods = ReadPodsCsv((dir / "sub" / "pods.csv").string());
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ExpectSamePods(t.pods, *pods);
  std::filesystem::remove_all(dir);
}

TEST(GeneratorTest, RejectsInconsistentConfig) {
  {
    GeneratorConfig c;
    c.pools[0].model = "NoSuchGPU";
    auto r = Generate(c, 1);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("NoSuchGPU"), std::string::npos);
  }
  {
    GeneratorConfig c;
    c.cpu_only_share = 0.7;
    c.gpu_share_share = 0.5;
    EXPECT_FALSE(Generate(c, 1).ok());
  }
  {
    GeneratorConfig c;
    c.num_nodes = 0;
    EXPECT_FALSE(Generate(c, 1).ok());
  }
  {
    GeneratorConfig c;
    c.pins = {{"T4|Bogus", 1.0}};
    EXPECT_FALSE(Generate(c, 1).ok());
  }
  {
    GeneratorConfig c;
    c.pools = {{"cpu", "", 0, 64000, 262144, 1.0}};
    auto r = Generate(c, 1);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("no GPUs"), std::string::npos);
  }
  {
    // Only 8-GPU pods, but the cluster's nodes have 2 GPUs: no pod can ever fit.
    GeneratorConfig c;
    c.pools = {{"t4", "T4", 2, 104000, 524288, 1.0}};
    c.cpu_only_share = 0;
    c.gpu_share_share = 0;
    c.multi_gpu_share = 1;
    c.multi_gpu_count = {{8, 1.0}};
    auto r = Generate(c, 1);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  }
}

}  // namespace
}  // namespace tessera
