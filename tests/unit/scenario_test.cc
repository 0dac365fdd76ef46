// Runs every tests/scenarios/*.scn file through the engine and checks its expectations.
//
// Format (one directive per line, '#' starts a comment):
//   policy NAME [seed N]
//   node NAME cpu=MILLI mem=MIB [gpus=N model=MODEL]
//   pod NAME cpu=MILLI mem=MIB [gpus=N milli=M] [models=A|B]
//   expect POD on NODE [gpus=I,J]      the pod is placed there (on exactly those GPUs)
//   expect POD unschedulable [REASON]  the pod fits nowhere; REASON must appear in Explain()
// Pods are decided and allocated in file order. For fgd the target workload is built from
// the scenario's pods.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "cluster/cluster_state.h"
#include "engine/engine.h"
#include "policies/builtin.h"
#include "sim/trace.h"
#include "tests/support/test_paths.h"

namespace tessera {
namespace {

struct Expectation {
  std::string pod;
  bool placed = true;
  std::string node;
  std::string gpus;  // "" = any
  std::string reason;
  int line = 0;
};

struct Scenario {
  std::string policy = "bestfit";
  uint64_t seed = 1;
  std::vector<NodeSpec> nodes;
  std::vector<Workload> pods;
  std::vector<Expectation> expect;
};

std::map<std::string, std::string> KeyValues(std::istringstream& in) {
  std::map<std::string, std::string> kv;
  std::string tok;
  while (in >> tok) {
    const auto eq = tok.find('=');
    kv[tok.substr(0, eq)] = eq == std::string::npos ? "" : tok.substr(eq + 1);
  }
  return kv;
}

int64_t Num(const std::map<std::string, std::string>& kv, const std::string& k, int64_t dflt) {
  auto it = kv.find(k);
  return it == kv.end() ? dflt : std::stoll(it->second);
}

Scenario Parse(const std::string& path) {
  Scenario s;
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    line = line.substr(0, line.find('#'));
    std::istringstream ls(line);
    std::string word;
    if (!(ls >> word)) continue;
    if (word == "policy") {
      ls >> s.policy;
      std::string seed_kw;
      if (ls >> seed_kw && seed_kw == "seed") ls >> s.seed;
    } else if (word == "node") {
      NodeSpec node;
      ls >> node.name;
      auto kv = KeyValues(ls);
      node.cpu = MilliCpu(Num(kv, "cpu", 0));
      node.memory = MiB(Num(kv, "mem", 0));
      node.gpu_count = static_cast<int>(Num(kv, "gpus", 0));
      if (node.gpu_count > 0) node.model = *GpuCatalog::Builtin().Find(kv.at("model"));
      s.nodes.push_back(node);
    } else if (word == "pod") {
      Workload w;
      ls >> w.name;
      auto kv = KeyValues(ls);
      w.demand.cpu = MilliCpu(Num(kv, "cpu", 0));
      w.demand.memory = MiB(Num(kv, "mem", 0));
      w.demand.num_gpu = static_cast<int>(Num(kv, "gpus", 0));
      w.demand.gpu_milli = static_cast<int>(Num(kv, "milli", w.demand.num_gpu > 0 ? 1000 : 0));
      if (kv.count("models")) w.demand.models = *ParseModelList(kv.at("models"));
      s.pods.push_back(w);
    } else if (word == "expect") {
      Expectation e;
      e.line = n;
      std::string what;
      ls >> e.pod >> what;
      if (what == "on") {
        ls >> e.node;
        auto kv = KeyValues(ls);
        if (kv.count("gpus")) e.gpus = kv.at("gpus");
      } else {
        EXPECT_EQ(what, "unschedulable") << path << ":" << n;
        e.placed = false;
        std::getline(ls, e.reason);
        e.reason.erase(0, e.reason.find_first_not_of(' '));
      }
      s.expect.push_back(e);
    } else {
      ADD_FAILURE() << path << ":" << n << ": unknown directive '" << word << "'";
    }
  }
  return s;
}

std::string GpuList(GpuMask m) {
  std::string out;
  for (int g = 0; g < kMaxGpusPerNode; ++g) {
    if (!((m >> g) & 1)) continue;
    if (!out.empty()) out += ",";
    out += std::to_string(g);
  }
  return out;
}

std::vector<std::string> ScenarioFiles() {
  const std::string dir = test::SourceDir() + "/tests/scenarios";
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 4 && name.substr(name.size() - 4) == ".scn")
        out.push_back(dir + "/" + name);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

class ScenarioTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScenarioTest, MeetsExpectations) {
  const Scenario s = Parse(GetParam());
  ASSERT_FALSE(s.expect.empty()) << "a scenario must expect something";
  ClusterState state;
  std::map<std::string, NodeIdx> node_idx;
  for (const auto& n : s.nodes) {
    auto r = state.AddNode(n);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  std::vector<Demand> demands;
  for (const auto& p : s.pods) demands.push_back(p.demand);
  auto scorer = BuiltinPolicies().Create({s.policy, TargetWorkload::FromDemands(demands)});
  ASSERT_TRUE(scorer.ok()) << scorer.status().ToString();
  Engine engine(std::move(scorer).value(), s.seed);
  std::map<std::string, Decision> decided;
  WorkloadId id = 0;
  for (const auto& p : s.pods) {
    engine.Observe(p.demand);
    Decision d = engine.Decide(state, id, p.demand);
    if (d.placed) {
      ASSERT_TRUE(state.Allocate(id, p.demand, d.placement).ok());
    }
    decided[p.name] = d;
    ++id;
  }
  ASSERT_TRUE(state.CheckInvariants().ok());
  for (const auto& e : s.expect) {
    SCOPED_TRACE(GetParam() + ":" + std::to_string(e.line));
    ASSERT_TRUE(decided.count(e.pod)) << "no pod " << e.pod;
    const Decision& d = decided.at(e.pod);
    ASSERT_EQ(d.placed, e.placed) << d.Explain(state);
    if (e.placed) {
      EXPECT_EQ(state.spec(d.placement.node).name, e.node) << d.Explain(state);
      if (!e.gpus.empty()) {
        EXPECT_EQ(GpuList(d.placement.gpus), e.gpus) << d.Explain(state);
      }
    } else if (!e.reason.empty()) {
      EXPECT_NE(d.Explain(state).find(e.reason), std::string::npos) << d.Explain(state);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Files, ScenarioTest, ::testing::ValuesIn(ScenarioFiles()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(info.param.rfind('/') + 1);
                           name = name.substr(0, name.size() - 4);
                           std::replace_if(
                               name.begin(), name.end(), [](char c) { return !std::isalnum(c); },
                               '_');
                           return name;
                         });

}  // namespace
}  // namespace tessera
