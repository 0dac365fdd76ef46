#include "sim/sharing_sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "sim/sharing_scenario.h"
#include "tests/support/test_paths.h"

namespace tessera {
namespace {

const std::string kNodes =
    R"([{"name_prefix": "h", "count": 1, "gpu_model": "H100-80GB", "gpus_per_node": 8,)"
    R"( "cpu_cores": 64, "memory_gib": 512}])";
const std::string kClass =
    R"({"name": "inf", "arrivals_per_hour": 10, "memory_gib": [1, 8], "duration_s": [60, 600]})";

std::string Doc(const std::string& nodes, const std::string& classes,
                const std::string& extra = "") {
  return R"({"horizon_s": 3600, "nodes": )" + nodes + ", " + extra +
         R"("workloads": {"classes": [)" + classes + "]}}";
}

SharingScenario MustParse(const std::string& text) {
  auto s = ParseSharingScenario(text, "t.json");
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : SharingScenario{};
}

TEST(SharingScenarioTest, ReadsTheBenchScenarios) {
  for (const char* name :
       {"sharing-small.json", "sharing-mixed.json", "sharing-steady-training.json",
        "sharing-long-evening.json", "sharing-fewer-80gb.json", "sharing-no-training.json"}) {
    auto s = ReadSharingScenario(test::SourceDir() + "/bench/scenarios/" + name);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_FALSE(s->classes.empty());
    EXPECT_GT(SharingGpuCount(*s), 0);
  }
  auto s = ReadSharingScenario(test::SourceDir() + "/bench/scenarios/sharing-mixed.json");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->name, "sharing-mixed");
  EXPECT_EQ(SharingGpuCount(*s), 128);
  EXPECT_EQ(s->phases.size(), 3u);
  EXPECT_EQ(s->node_groups[0].static_mig_layout.size(), 4u);
  EXPECT_EQ(s->node_groups[0].static_mig_gpus, 4);
}

TEST(SharingScenarioTest, Defaults) {
  const SharingScenario s = MustParse(Doc(kNodes, kClass));
  EXPECT_EQ(s.name, "t");
  EXPECT_EQ(s.seed, 1u);
  EXPECT_EQ(s.timeslice_replicas, 4);
  EXPECT_EQ(s.mps_clients, 4);
  EXPECT_EQ(s.tessera_protection, "off");
  EXPECT_EQ(MustParse(Doc(kNodes, kClass, R"("strategies": {"tessera_protection": "on"}, )"))
                .tessera_protection,
            "on");
  ASSERT_EQ(s.phases.size(), 1u);
  EXPECT_EQ(s.phases[0].multipliers, std::vector<double>{1.0});
  const SharingClass& c = s.classes[0];
  EXPECT_EQ(c.patience_s, 1800);
  EXPECT_EQ(c.compute_pct.hi, 0);
  EXPECT_TRUE(c.whole_gpus.empty());
  EXPECT_EQ(c.isolation_weight[static_cast<int>(Isolation::kStandard)], 1);
  EXPECT_EQ(c.cpu_cores.lo, 1);
  EXPECT_EQ(c.host_memory_gib.lo, 4);
  EXPECT_EQ(s.node_groups[0].cpu_milli, 64000);
  EXPECT_EQ(s.node_groups[0].memory_mib, 512 * 1024);
  EXPECT_TRUE(s.node_groups[0].static_mig_layout.empty());
}

struct BadCase {
  std::string text;
  std::vector<std::string> fragments;
};

TEST(SharingScenarioTest, RejectsBadInput) {
  const std::string n = kNodes;
  const std::string c = kClass;
  auto cls = [](const std::string& extra) {
    return R"({"name": "inf", "arrivals_per_hour": 10, "duration_s": [60, 600], )" + extra + "}";
  };
  auto node = [](const std::string& extra) {
    return R"([{"name_prefix": "h", "count": 1, "gpus_per_node": 8, "cpu_cores": 64, )"
           R"("memory_gib": 512, )" +
           extra + "}]";
  };
  const std::vector<BadCase> cases = {
      {"", {"t.json:1:1:", "syntax error"}},
      {"{\"horizon_s\": 10,\n  \"nodes\": }", {"t.json:2:12:", "syntax error"}},
      {"[1, 2]", {"t.json:1:1:", "must be an object"}},
      {Doc(n, c, R"("colour": 1, )"), {"t.json:1:148:", "unknown key 'colour'"}},
      {"{\"horizon_s\": 3600, \"horizon_s\": 5}", {"t.json:1:21:", "horizon_s: duplicate key"}},
      {R"({"nodes": [], "workloads": {}})", {"missing required key 'horizon_s'"}},
      {R"({"horizon_s": "1h", "nodes": [], "workloads": {}})",
       {"t.json:1:15:", "horizon_s: must be an integer"}},
      {R"({"horizon_s": 0, "nodes": [], "workloads": {}})", {"horizon_s: must be in 1..31622400"}},
      {Doc("[]", c), {"nodes: must be a non-empty array"}},
      {Doc(node(R"("gpu_model": "V200")"), c),
       {"t.json:1:", "nodes[0].gpu_model: unknown GPU model 'V200'"}},
      {Doc(node(R"("gpu_model": "G1")"), c), {"nodes[0].gpu_model", "no known memory size"}},
      {Doc(node(R"("gpu_model": 4)"), c), {"nodes[0].gpu_model: must be a string"}},
      {Doc(R"([{"name_prefix": "h", "count": -2, "gpu_model": "T4", "gpus_per_node": 1,)"
           R"( "cpu_cores": 4, "memory_gib": 8}])",
           c),
       {"nodes[0].count: must be in 1..10000"}},
      {Doc(R"([{"name_prefix": "h", "count": 1, "gpu_model": "T4", "gpus_per_node": 1,)"
           R"( "cpu_cores": 4, "memory_gib": 8, "static_mig_layout": "1g.5gb"}])",
           c),
       {"nodes[0].static_mig_layout", "has no MIG"}},
      {Doc(node(R"("gpu_model": "H100-80GB", "static_mig_layout": "4g.40gb 4g.40gb")"), c),
       {"nodes[0].static_mig_layout"}},
      {Doc(node(R"("gpu_model": "H100-80GB", "static_mig_gpus": 2)"), c),
       {"nodes[0].static_mig_gpus: needs a static_mig_layout"}},
      {Doc(node(
               R"("gpu_model": "H100-80GB", "static_mig_layout": "7g.80gb", "static_mig_gpus": 9)"),
           c),
       {"nodes[0].static_mig_gpus: must be in 0..8"}},
      {Doc(R"([{"name_prefix": "h", "count": 1, "gpu_model": "T4", "gpus_per_node": 1,)"
           R"( "cpu_cores": 4, "memory_gib": 8}, {"name_prefix": "h", "count": 1,)"
           R"( "gpu_model": "T4", "gpus_per_node": 1, "cpu_cores": 4, "memory_gib": 8}])",
           c),
       {"nodes[1].name_prefix: duplicate name prefix 'h'"}},
      {Doc(n, c, R"("strategies": {"timeslice_replicas": 0}, )"),
       {"strategies.timeslice_replicas: must be in 1..48"}},
      {Doc(n, c, R"("strategies": {"mig": 1}, )"), {"strategies.mig: unknown key 'mig'"}},
      {Doc(n, c, R"("strategies": {"tessera_protection": "yes"}, )"),
       {"strategies.tessera_protection: must be \"off\" or \"on\""}},
      {Doc(n, c, R"("strategies": {"tessera_protection": true}, )"),
       {"strategies.tessera_protection: must be a string"}},
      {Doc(n, c, R"("seed": -1, )"), {"seed: must be a non-negative integer"}},
      {Doc(n, cls(R"("memory_gib": [30, 20])")),
       {"t.json:1:", "workloads.classes[0].memory_gib: low end 30 exceeds high end 20"}},
      {Doc(n, cls(R"("memory_gib": [1, 2, 3])")),
       {"workloads.classes[0].memory_gib: must be a number or a [low, high] pair"}},
      {Doc(n, cls(R"("memory_gib": -1)")), {"workloads.classes[0].memory_gib: must be in"}},
      {Doc(n, cls(R"("memory_gib": 90)")), {"workloads.classes[0]:", "no node group can host"}},
      {Doc(n, cls(R"("memory_gib": 4, "compute_pct": [10, 150])")),
       {"workloads.classes[0].compute_pct[1]: must be in 1..100"}},
      {Doc(n, cls(R"("memory_gib": 4, "compute_pct": 12.5)")),
       {"workloads.classes[0].compute_pct: must be an integer"}},
      {Doc(n, cls(R"("memory_gib": 4, "whole_gpus": 2, "compute_pct": 50)")),
       {"workloads.classes[0].compute_pct", "whole-GPU"}},
      {Doc(n, cls(R"("memory_gib": 4, "whole_gpus": [1, 16])")),
       {"workloads.classes[0]:", "no node group can host", "16 GPU(s)"}},
      {Doc(n, cls(R"("memory_gib": 4, "whole_gpus": [])")),
       {"workloads.classes[0].whole_gpus: needs at least one GPU count"}},
      {Doc(n, cls(R"("memory_gib": 4, "isolation": {"paranoid": 1})")),
       {"workloads.classes[0].isolation.paranoid", "unknown isolation class 'paranoid'"}},
      {Doc(n, cls(R"("memory_gib": 4, "isolation": {"strict": 0})")),
       {"workloads.classes[0].isolation: needs a positive weight"}},
      {Doc(n, cls(R"("memory_gib": 4, "gpu_models": ["T4"])")),
       {"no node group can host", "allowed models"}},
      {Doc(n, cls(R"("memory_gib": 4, "gpu_models": ["T5"])")),
       {"workloads.classes[0].gpu_models[0]: unknown GPU model 'T5'"}},
      {Doc(n, cls(R"("memory_gib": 4, "patience_s": 1.5)")),
       {"workloads.classes[0].patience_s: must be an integer"}},
      {Doc(n, cls(R"("memory_gib": 4, "speed": 3)")),
       {"workloads.classes[0].speed: unknown key 'speed'"}},
      {Doc(n, R"({"name": "inf", "memory_gib": 4, "duration_s": 60})"),
       {"workloads.classes[0]: missing required key 'arrivals_per_hour'"}},
      {Doc(n, c + ", " + c), {"workloads.classes[1].name: duplicate class 'inf'"}},
      {R"({"horizon_s": 3600, "nodes": )" + n + R"(, "workloads": {"classes": [)" + c +
           R"(], "phases": [{"start_s": 60}]}})",
       {"workloads.phases[0].start_s: the first phase starts at 0"}},
      {R"({"horizon_s": 3600, "nodes": )" + n + R"(, "workloads": {"classes": [)" + c +
           R"(], "phases": [{"start_s": 0}, {"start_s": 0}]}})",
       {"workloads.phases[1].start_s: phases must start in increasing order"}},
      {R"({"horizon_s": 3600, "nodes": )" + n + R"(, "workloads": {"classes": [)" + c +
           R"(], "phases": [{"start_s": 0, "rate_multipliers": {"train": 2}}]}})",
       {"workloads.phases[0].rate_multipliers.train: no workload class named 'train'"}},
      {R"({"horizon_s": 3600, "nodes": )" + n + R"(, "workloads": {"classes": [)" + c +
           R"(], "phases": [{"start_s": 7200}]}})",
       {"workloads.phases[0].start_s: must be in 0..3599"}},
      {R"({"horizon_s": 31622400, "nodes": )" + n +
           R"(, "workloads": {"classes": [{"name": "x", "arrivals_per_hour": 1000000,)"
           R"( "memory_gib": 1, "duration_s": 1}]}})",
       {"workloads:", "more than the limit of 2000000"}},
  };
  for (const BadCase& bc : cases) {
    auto s = ParseSharingScenario(bc.text, "t.json");
    ASSERT_FALSE(s.ok()) << bc.text;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    for (const std::string& f : bc.fragments)
      EXPECT_NE(s.status().message().find(f), std::string::npos)
          << "missing '" << f << "' in: " << s.status().message() << "\ninput: " << bc.text;
  }
}

TEST(SharingScenarioTest, SemanticErrorsPointAtTheValue) {
  const std::string text =
      "{\n"
      "  \"horizon_s\": 3600,\n"
      "  \"nodes\": [{\"name_prefix\": \"t4\", \"count\": 1, \"gpu_model\": \"T4\",\n"
      "             \"gpus_per_node\": 2, \"cpu_cores\": 8, \"memory_gib\": 32}],\n"
      "  \"workloads\": {\"classes\": [\n"
      "    {\"name\": \"a\", \"arrivals_per_hour\": 1, \"memory_gib\": 2, \"duration_s\": 60},\n"
      "    {\"name\": \"b\", \"arrivals_per_hour\": 1, \"duration_s\": 60,\n"
      "     \"memory_gib\": [8, 4]}\n"
      "  ]}\n"
      "}\n";
  auto s = ParseSharingScenario(text, "x.json");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "x.json:8:20: workloads.classes[1].memory_gib: low end 8 exceeds high end 4");
}

TEST(SharingScenarioTest, ReadMissingFileIsIoError) {
  auto s = ReadSharingScenario("/nonexistent/scenario.json");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kIoError);
}

const std::string kMixText = R"({
  "horizon_s": 36000,
  "nodes": [{"name_prefix": "h", "count": 2, "gpu_model": "H100-80GB", "gpus_per_node": 8,
             "cpu_cores": 128, "memory_gib": 1024},
            {"name_prefix": "t", "count": 2, "gpu_model": "T4", "gpus_per_node": 4,
             "cpu_cores": 48, "memory_gib": 256}],
  "workloads": {
    "phases": [{"start_s": 0}, {"start_s": 18000, "rate_multipliers": {"inf": 0, "train": 3}}],
    "classes": [
      {"name": "inf", "arrivals_per_hour": 2000, "memory_gib": [2, 12], "compute_pct": [5, 20],
       "isolation": {"strict": 1, "standard": 2, "best-effort": 1},
       "duration_s": [60, 6000], "cpu_cores": [1, 3], "host_memory_gib": [2, 6]},
      {"name": "train", "arrivals_per_hour": 100, "memory_gib": [40, 70], "whole_gpus": [2, 4, 8],
       "isolation": {"strict": 1}, "duration_s": 3600, "gpu_models": ["H100-80GB"]}
    ]
  }
})";

TEST(SharingGeneratorTest, DeterministicAndWithinRanges) {
  const SharingScenario s = MustParse(kMixText);
  auto a = GenerateSharingWorkloads(s, 5);
  auto b = GenerateSharingWorkloads(s, 5);
  auto c = GenerateSharingWorkloads(s, 6);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    const SharingWorkload& x = (*a)[i];
    const SharingWorkload& y = (*b)[i];
    EXPECT_EQ(x.id, i);
    EXPECT_EQ(x.cls, y.cls);
    EXPECT_EQ(x.arrival_s, y.arrival_s);
    EXPECT_EQ(x.duration_s, y.duration_s);
    EXPECT_EQ(x.demand.memory_mib, y.demand.memory_mib);
    EXPECT_EQ(x.demand.compute_pct, y.demand.compute_pct);
    EXPECT_EQ(x.demand.isolation, y.demand.isolation);
    EXPECT_EQ(x.demand.cpu, y.demand.cpu);
  }
  bool differs = a->size() != c->size();
  for (size_t i = 0; !differs && i < a->size(); ++i)
    differs = (*a)[i].arrival_s != (*c)[i].arrival_s;
  EXPECT_TRUE(differs);

  const GpuCatalog& cat = GpuCatalog::Builtin();
  const GpuModelId t4 = *cat.Find("T4"), h100 = *cat.Find("H100-80GB");
  std::map<int, int64_t> by_class, iso, gpus;
  SimTime last = 0;
  for (const SharingWorkload& w : *a) {
    EXPECT_GE(w.arrival_s, last);
    last = w.arrival_s;
    EXPECT_LT(w.arrival_s, s.horizon_s);
    ++by_class[w.cls];
    const SliceDemand& d = w.demand;
    EXPECT_TRUE(d.models & (ModelMask{1} << h100));
    if (w.cls == 0) {
      EXPECT_LT(w.arrival_s, 18000);
      EXPECT_GE(d.memory_mib, 2 * 1024);
      EXPECT_LE(d.memory_mib, 12 * 1024);
      EXPECT_GE(d.compute_pct, 5);
      EXPECT_LE(d.compute_pct, 20);
      EXPECT_EQ(d.whole_gpus, 0);
      EXPECT_GE(w.duration_s, 60);
      EXPECT_LE(w.duration_s, 6000);
      EXPECT_GE(d.cpu.v, 1000);
      EXPECT_LE(d.cpu.v, 3000);
      EXPECT_GE(d.host_memory.v, 2048);
      EXPECT_LE(d.host_memory.v, 6144);
      EXPECT_EQ(w.patience_s, 1800);
      EXPECT_EQ((d.models >> t4) & 1, d.memory_mib <= cat.Get(t4).memory_mib ? 1u : 0u);
      ++iso[static_cast<int>(d.isolation)];
    } else {
      EXPECT_GE(d.memory_mib, 40 * 1024);
      EXPECT_LE(d.memory_mib, 70 * 1024);
      EXPECT_EQ(d.compute_pct, 0);
      EXPECT_EQ(w.duration_s, 3600);
      EXPECT_EQ(d.isolation, Isolation::kStrict);
      EXPECT_EQ(d.models, ModelMask{1} << h100);
      ++gpus[d.whole_gpus];
    }
  }
  // inf: 2000/h for 5 h; train: 100/h for 5 h, then 300/h for 5 h.
  EXPECT_NEAR(ExpectedSharingArrivals(s), 12000, 1e-6);
  EXPECT_NEAR(static_cast<double>(by_class[0]), 10000, 400);
  EXPECT_NEAR(static_cast<double>(by_class[1]), 2000, 180);
  const double inf = static_cast<double>(by_class[0]);
  EXPECT_NEAR(iso[0] / inf, 0.25, 0.02);
  EXPECT_NEAR(iso[1] / inf, 0.50, 0.02);
  EXPECT_NEAR(iso[2] / inf, 0.25, 0.02);
  ASSERT_EQ(gpus.size(), 3u);
  for (int g : {2, 4, 8})
    EXPECT_NEAR(static_cast<double>(gpus[g]) / static_cast<double>(by_class[1]), 1.0 / 3, 0.05);
}

TEST(SharingGeneratorTest, AddingAClassKeepsTheOthersDraws) {
  const SharingScenario one = MustParse(Doc(kNodes, kClass));
  const SharingScenario two =
      MustParse(Doc(kNodes, kClass + R"(, {"name": "nb", "arrivals_per_hour": 30, "memory_gib": 2,)"
                                     R"( "duration_s": 60})"));
  auto a = GenerateSharingWorkloads(one, 9);
  auto b = GenerateSharingWorkloads(two, 9);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<std::pair<SimTime, int64_t>> x, y;
  for (const auto& w : *a) x.emplace_back(w.arrival_s, w.demand.memory_mib);
  for (const auto& w : *b) {
    if (w.cls == 0) y.emplace_back(w.arrival_s, w.demand.memory_mib);
  }
  EXPECT_EQ(x, y);
  EXPECT_GT(b->size(), a->size());
}

// Hand-made scenarios: one node, one class; workloads are given explicitly.
SharingScenario Tiny(const std::string& model, int gpus, const std::string& extra_node = "",
                     const std::string& strategies = "") {
  const std::string nodes = R"([{"name_prefix": "n", "count": 1, "gpu_model": ")" + model +
                            R"(", "gpus_per_node": )" + std::to_string(gpus) +
                            R"(, "cpu_cores": 64, "memory_gib": 512)" + extra_node + "}]";
  return MustParse(R"({"horizon_s": 10000, "nodes": )" + nodes + ", " +
                   (strategies.empty() ? "" : R"("strategies": )" + strategies + ", ") +
                   R"("workloads": {"classes": [{"name": "w", "arrivals_per_hour": 1,)"
                   R"( "memory_gib": 1, "duration_s": 60}]}})");
}

SharingWorkload W(SimTime at, double gib, Isolation iso, SimTime duration = 1000,
                  SimTime patience = 5000, int whole = 0) {
  SharingWorkload w;
  w.arrival_s = at;
  w.duration_s = duration;
  w.patience_s = patience;
  w.demand.memory_mib = static_cast<int64_t>(gib * 1024);
  w.demand.compute_pct = whole ? 0 : 10;
  w.demand.whole_gpus = whole;
  w.demand.isolation = iso;
  return w;
}

std::vector<SharingWorkload> Number(std::vector<SharingWorkload> ws) {
  for (size_t i = 0; i < ws.size(); ++i) ws[i].id = i;
  return ws;
}

SharingMetrics Simulate(const SharingScenario& s, const std::vector<SharingWorkload>& ws,
                        const std::string& strategy) {
  auto m = SimulateSharing(s, Number(ws), strategy);
  EXPECT_TRUE(m.ok()) << strategy << ": " << m.status().message();
  return m.ok() ? *m : SharingMetrics{};
}

constexpr Isolation kBE = Isolation::kBestEffort;
constexpr Isolation kStd = Isolation::kStandard;
constexpr Isolation kStrict = Isolation::kStrict;

TEST(SharingSimTest, ExclusivePlacesOneAndTheOtherWaits) {
  const SharingScenario s = Tiny("T4", 1);
  const SharingMetrics m = Simulate(s, {W(0, 6, kBE), W(0, 6, kBE)}, "exclusive");
  EXPECT_EQ(m.workloads, 2);
  EXPECT_EQ(m.placed, 2);
  EXPECT_DOUBLE_EQ(m.p50_wait_s, 500);
  EXPECT_DOUBLE_EQ(m.p95_wait_s, 950);
  EXPECT_DOUBLE_EQ(m.p99_wait_s, 990);
  EXPECT_DOUBLE_EQ(m.gpus_busy_avg, 0.2);
  EXPECT_DOUBLE_EQ(m.gpu_busy_pct, 20);
  EXPECT_EQ(m.isolation_violations, 0);
  EXPECT_EQ(m.memory_oversubscribed, 0);
  EXPECT_EQ(m.placed_by_kind.at("exclusive"), 2);

  const SharingMetrics impatient =
      Simulate(s, {W(0, 6, kBE), W(0, 6, kBE, 1000, 500)}, "exclusive");
  EXPECT_EQ(impatient.placed, 1);
  EXPECT_EQ(impatient.abandoned, 1);
  EXPECT_EQ(impatient.never_placed, 0);
  EXPECT_EQ(impatient.placed_workloads, (std::vector<uint8_t>{1, 0}));

  // A departure at the give-up time comes first: the waiting workload starts.
  const SharingMetrics exact = Simulate(s, {W(0, 6, kBE), W(0, 6, kBE, 1000, 1000)}, "exclusive");
  EXPECT_EQ(exact.placed, 2);

  const SharingMetrics late =
      Simulate(s, {W(0, 6, kBE, 20000), W(10, 6, kBE, 100, 20000)}, "exclusive");
  EXPECT_EQ(late.placed, 1);
  EXPECT_EQ(late.never_placed, 1);
  EXPECT_EQ(late.placed_workloads, (std::vector<uint8_t>{1, 0}));
  EXPECT_DOUBLE_EQ(late.gpus_busy_avg, 1.0);
}

TEST(SharingSimTest, TimesliceSharesAndCountsViolations) {
  const SharingScenario s = Tiny("T4", 1);
  SharingMetrics m = Simulate(s, {W(0, 6, kBE), W(0, 6, kBE)}, "timeslice");
  EXPECT_EQ(m.placed, 2);
  EXPECT_DOUBLE_EQ(m.p99_wait_s, 0);
  EXPECT_DOUBLE_EQ(m.gpus_busy_avg, 0.1);
  EXPECT_EQ(m.isolation_violations, 0);
  EXPECT_EQ(m.memory_oversubscribed, 0);
  EXPECT_EQ(m.placed_by_kind.at("timeslice"), 2);

  m = Simulate(s, {W(0, 6, kStrict), W(0, 6, kBE)}, "timeslice");
  EXPECT_EQ(m.isolation_violations, 1);
  m = Simulate(s, {W(0, 6, kStd), W(0, 2, kStrict), W(0, 1, kBE)}, "timeslice");
  EXPECT_EQ(m.isolation_violations, 2);

  // 3 x 6 GiB on a 15 GiB T4: all three shared an oversubscribed GPU; the fourth came later.
  m = Simulate(s, {W(0, 6, kBE), W(0, 6, kBE), W(0, 6, kBE), W(2000, 6, kBE)}, "timeslice");
  EXPECT_EQ(m.placed, 4);
  EXPECT_EQ(m.memory_oversubscribed, 3);

  // Five on four replicas: the fifth waits for the first departure.
  m = Simulate(s, {W(0, 1, kBE, 500), W(0, 1, kBE), W(0, 1, kBE), W(0, 1, kBE), W(0, 1, kBE)},
               "timeslice");
  EXPECT_EQ(m.placed, 5);
  EXPECT_DOUBLE_EQ(m.p99_wait_s, 500 * 0.96);
}

TEST(SharingSimTest, TimesliceWholeGpusTakeReplicasOnDistinctGpus) {
  const SharingScenario s = Tiny("L4", 4, "", R"({"timeslice_replicas": 2})");
  const SharingMetrics m = Simulate(
      s, {W(0, 4, kBE, 1000, 5000, 4), W(0, 4, kBE, 1000, 5000, 4), W(0, 4, kBE, 1000, 5000, 1)},
      "timeslice");
  // Two 4-GPU workloads fill both replicas of all four GPUs; the third waits for them.
  EXPECT_EQ(m.placed, 3);
  EXPECT_EQ(m.never_placed + m.abandoned, 0);
  EXPECT_DOUBLE_EQ(m.p50_wait_s, 0);
  EXPECT_DOUBLE_EQ(m.p99_wait_s, 980);
  EXPECT_DOUBLE_EQ(m.gpus_busy_avg, 0.5);
  EXPECT_EQ(m.placed_by_kind.at("timeslice"), 3);
}

TEST(SharingSimTest, MpsPinsAnEqualShareWhateverTheNeed) {
  const SharingScenario s = Tiny("T4", 1, "", R"({"mps_clients": 2})");
  SharingMetrics m = Simulate(s, {W(0, 10, kStd), W(0, 2, kBE)}, "mps");
  EXPECT_EQ(m.placed, 2);
  EXPECT_EQ(m.memory_oversubscribed, 1);
  EXPECT_EQ(m.isolation_violations, 0);
  EXPECT_EQ(m.placed_by_kind.at("mps"), 2);
  m = Simulate(s, {W(0, 2, kStrict), W(0, 2, kStrict), W(0, 2, kStrict, 1000, 100)}, "mps");
  EXPECT_EQ(m.placed, 2);
  EXPECT_EQ(m.abandoned, 1);
  EXPECT_EQ(m.isolation_violations, 2);
  EXPECT_EQ(m.memory_oversubscribed, 0);
}

TEST(SharingSimTest, StaticMigUsesTheSmallestFittingInstance) {
  const SharingScenario s =
      Tiny("H100-80GB", 2,
           R"(, "static_mig_layout": "1g.10gb 1g.10gb 2g.20gb 3g.40gb", "static_mig_gpus": 1)");
  const SharingMetrics m =
      Simulate(s,
               {W(0, 5, kStrict), W(0, 5, kStrict), W(0, 15, kStd), W(0, 30, kStrict), W(0, 5, kBE),
                W(0, 5, kBE, 1000, 100), W(0, 60, kStrict, 1000, 100, 1)},
               "static-mig");
  EXPECT_EQ(m.placed_by_kind.at("mig"), 4);
  EXPECT_EQ(m.placed_by_kind.at("exclusive"), 1);  // the 5th: the non-MIG GPU
  EXPECT_EQ(m.placed, 5);
  EXPECT_EQ(m.abandoned, 2);
  EXPECT_EQ(m.reconfigurations, 0);
  EXPECT_EQ(m.isolation_violations, 0);
  EXPECT_EQ(m.memory_oversubscribed, 0);
  EXPECT_DOUBLE_EQ(m.gpus_busy_avg, 0.2);
}

TEST(SharingSimTest, TesseraGuaranteesIsolationAndMemory) {
  const SharingScenario t4 = Tiny("T4", 1);
  SharingMetrics m = Simulate(t4, {W(0, 6, kBE), W(0, 6, kBE)}, "tessera");
  EXPECT_EQ(m.placed, 2);
  EXPECT_EQ(m.isolation_violations, 0);
  EXPECT_EQ(m.memory_oversubscribed, 0);
  ASSERT_FALSE(m.explanations.empty());

  m = Simulate(t4, {W(0, 6, kStrict), W(0, 6, kStrict, 1000, 100)}, "tessera");
  EXPECT_EQ(m.placed, 1);
  EXPECT_EQ(m.abandoned, 1);
  EXPECT_EQ(m.isolation_violations, 0);

  const SharingScenario h100 = Tiny("H100-80GB", 1);
  std::vector<SharingWorkload> ws;
  for (int i = 0; i < 7; ++i) ws.push_back(W(0, 5, kStrict));
  m = Simulate(h100, ws, "tessera");
  EXPECT_EQ(m.placed, 7);
  EXPECT_EQ(m.placed_by_kind.at("mig"), 7);
  EXPECT_GE(m.reconfigurations, 1);
  EXPECT_FALSE(m.reconfiguration_reasons.empty());
  EXPECT_EQ(m.isolation_violations, 0);
  EXPECT_EQ(m.memory_oversubscribed, 0);
  EXPECT_EQ(m.disturbed, 0);
}

TEST(SharingSimTest, RejectsUnknownStrategies) {
  const SharingScenario s = Tiny("T4", 1);
  auto m = SimulateSharing(s, {}, "mig-all");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("unknown strategy 'mig-all'"), std::string::npos);
  auto c = CompareSharing(s, 1, {"mps", "mps"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("listed twice"), std::string::npos);
}

std::vector<SharingMetrics> Compare(const std::string& file) {
  auto s = ReadSharingScenario(test::SourceDir() + "/bench/scenarios/" + file);
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return {};
  auto r = CompareSharing(*s, s->seed, SharingStrategyNames());
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<SharingMetrics>{};
}

void ExpectAcceptance(const std::vector<SharingMetrics>& r) {
  ASSERT_EQ(r.size(), 5u);
  std::map<std::string, SharingMetrics> by;
  for (const auto& m : r) by[m.strategy] = m;
  const SharingMetrics& t = by.at("tessera");
  EXPECT_GE(static_cast<double>(t.placed), 1.5 * static_cast<double>(by.at("exclusive").placed));
  for (const auto& [name, m] : by) {
    if (name != "tessera") {
      EXPECT_GT(t.placed, m.placed) << name;
    }
    EXPECT_EQ(m.workloads, t.workloads);
    EXPECT_EQ(m.placed + m.abandoned + m.never_placed, m.workloads) << name;
    EXPECT_EQ(m.disturbed, 0) << name;
  }
  EXPECT_EQ(t.isolation_violations, 0);
  EXPECT_EQ(t.memory_oversubscribed, 0);
  EXPECT_EQ(by.at("exclusive").isolation_violations, 0);
  EXPECT_EQ(by.at("static-mig").isolation_violations, 0);
  EXPECT_EQ(by.at("static-mig").reconfigurations, 0);
  EXPECT_GT(by.at("timeslice").isolation_violations, 0);
  EXPECT_GT(by.at("mps").memory_oversubscribed, 0);
  // Every MIG change is in the diff log, and each MIG node's state is a mig-parted config.
  ASSERT_GT(t.reconfigurations, 0);
  int64_t destroyed = 0, enabled = 0;
  for (const std::string& line : t.mig_diff_log) {
    EXPECT_EQ(line.rfind("t=", 0), 0u) << line;
    destroyed += line.find(": destroy ") != std::string::npos;
    enabled += line.find(": enable MIG mode") != std::string::npos;
  }
  EXPECT_EQ(destroyed, t.mig_instances_destroyed);
  EXPECT_EQ(enabled, t.mig_enabled);
  ASSERT_FALSE(t.mig_parted_configs.empty());
  for (const auto& [node, yaml] : t.mig_parted_configs)
    EXPECT_EQ(yaml.rfind("version: v1\nmig-configs:\n  tessera:\n    - devices: [", 0), 0u)
        << node << ":\n"
        << yaml;
  EXPECT_TRUE(by.at("exclusive").mig_diff_log.empty());
}

TEST(SharingSimTest, AcceptanceOnTheSmallScenario) {
  ExpectAcceptance(Compare("sharing-small.json"));
}

// About 2 s in a release build, 20 s with AddressSanitizer.
TEST(SharingSimTest, AcceptanceOnTheMixedScenario) {
  ExpectAcceptance(Compare("sharing-mixed.json"));
}

SharingMetrics Tessera(const std::string& file, const std::string& protection) {
  auto s = ReadSharingScenario(test::SourceDir() + "/bench/scenarios/" + file);
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return {};
  s->tessera_protection = protection;
  auto r = CompareSharing(*s, s->seed, {"tessera"});
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() && r->size() == 1 ? r->front() : SharingMetrics{};
}

int64_t PlacedOf(const SharingScenario& s, const SharingMetrics& m, const std::string& cls) {
  for (size_t i = 0; i < s.classes.size(); ++i)
    if (s.classes[i].name == cls && i < m.placed_by_class.size()) return m.placed_by_class[i];
  return -1;
}

// Node protection only acts on observed multi-GPU demand: without any, tessera is unchanged.
TEST(SharingSimTest, NodeProtectionCostsNothingWithoutMultiGpuDemand) {
  const SharingMetrics off = Tessera("sharing-no-training.json", "off");
  const SharingMetrics on = Tessera("sharing-no-training.json", "on");
  EXPECT_GT(off.placed, 0);
  EXPECT_EQ(on.placed, off.placed);
  EXPECT_EQ(on.placed_by_class, off.placed_by_class);
  EXPECT_EQ(on.reconfigurations, off.reconfigurations);
  EXPECT_EQ(on.p95_wait_s, off.p95_wait_s);
}

// With steady multi-GPU demand, protection places more training jobs, still without isolation
// violations or oversubscribed memory.
TEST(SharingSimTest, NodeProtectionPlacesMoreSteadyTraining) {
  auto s = ReadSharingScenario(test::SourceDir() + "/bench/scenarios/sharing-steady-training.json");
  ASSERT_TRUE(s.ok());
  const SharingMetrics off = Tessera("sharing-steady-training.json", "off");
  const SharingMetrics on = Tessera("sharing-steady-training.json", "on");
  EXPECT_GT(PlacedOf(*s, on, "training"), PlacedOf(*s, off, "training"));
  for (const SharingMetrics* m : {&off, &on}) {
    EXPECT_EQ(m->isolation_violations, 0);
    EXPECT_EQ(m->memory_oversubscribed, 0);
    EXPECT_EQ(m->disturbed, 0);
  }
}

TEST(SharingSimTest, DeterministicAndJsonHasTheFixedFields) {
  auto s = ReadSharingScenario(test::SourceDir() + "/bench/scenarios/sharing-small.json");
  ASSERT_TRUE(s.ok());
  auto a = CompareSharing(*s, 3, SharingStrategyNames());
  auto b = CompareSharing(*s, 3, SharingStrategyNames());
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string ja = SharingJson(*s, 3, *a);
  EXPECT_EQ(ja, SharingJson(*s, 3, *b));
  EXPECT_EQ(SharingTable(*s, 3, *a), SharingTable(*s, 3, *b));
  const nlohmann::json j = nlohmann::json::parse(ja);
  EXPECT_EQ(j["scenario"], "sharing-small");
  EXPECT_EQ(j["seed"], 3);
  EXPECT_EQ(j["tessera_protection"], "off");
  for (const std::string& name : SharingStrategyNames()) {
    ASSERT_TRUE(j["strategies"].contains(name)) << name;
    for (const char* key :
         {"placed", "isolation_violations", "memory_oversubscribed", "reconfigurations",
          "disturbed", "p95_wait_s", "abandoned", "never_placed", "p50_wait_s", "p99_wait_s",
          "gpus_busy_avg", "gpu_busy_pct", "workloads"})
      EXPECT_TRUE(j["strategies"][name].contains(key)) << name << "." << key;
  }
}

}  // namespace
}  // namespace tessera
