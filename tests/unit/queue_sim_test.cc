#include "sim/queue_sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "sim/queue_scenario.h"
#include "sim/trace.h"
#include "tests/support/test_paths.h"

#include <unistd.h>

namespace tessera {
namespace {

const std::string kScenarios = test::SourceDir() + "/bench/scenarios/";

struct Loaded {
  QueueCluster cluster;
  std::vector<QueueJob> jobs;
};

Loaded Load(const std::string& name) {
  Loaded l;
  auto c = ReadQueueCluster(kScenarios + name + ".json");
  EXPECT_TRUE(c.ok()) << c.status().message();
  if (!c.ok()) return l;
  l.cluster = *c;
  auto j = ReadQueueWorkload(kScenarios + name + ".csv", l.cluster);
  EXPECT_TRUE(j.ok()) << j.status().message();
  if (j.ok()) l.jobs = *j;
  return l;
}

QueueSimResult MustRun(const Loaded& l, QueueSimOptions opt) {
  auto r = RunQueueSim(l.cluster, l.jobs, opt);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : QueueSimResult{};
}

const QueueMetrics& Queue(const QueueSimResult& r, const std::string& name) {
  for (const QueueMetrics& m : r.queues) {
    if (m.name == name) return m;
  }
  ADD_FAILURE() << "no queue " << name;
  return r.overall;
}

// ---- readers ----

const std::string kNodes =
    R"("nodes": [{"name_prefix": "n", "count": 2, "gpu_model": "H100-80GB", "gpus": 8,)"
    R"( "cpu_cores": 64, "memory_gib": 512}])";
const std::string kQueue = R"({"name": "a", "flavors": [{"name": "h100", "nominal": {"gpu": 8}}]})";

TEST(QueueScenarioTest, ReadsTheBenchScenarios) {
  for (const char* name : {"queues-fair", "queues-reclaim", "queues-gangs", "queues-kueue-loop"}) {
    SCOPED_TRACE(name);
    const Loaded l = Load(name);
    EXPECT_FALSE(l.cluster.nodes.empty());
    EXPECT_FALSE(l.jobs.empty());
    EXPECT_EQ(l.cluster.name, name);
  }
  const Loaded g = Load("queues-gangs");
  ASSERT_EQ(g.cluster.nodes.size(), 16u);
  EXPECT_EQ(g.cluster.nodes[0].labels.at("rack"), "rack-0");
  EXPECT_EQ(g.cluster.nodes[7].labels.at("rack"), "rack-1");
  EXPECT_EQ(g.cluster.nodes[15].labels.at("rack"), "rack-3");
}

TEST(QueueScenarioTest, UnitsAndDefaults) {
  const std::string text = R"({)" + kNodes + R"(, "cohorts": ["org"], "queues": [
    {"name": "a", "cohort": "org", "weight": 2.5, "reclaim": false,
     "flavors": [{"name": "f", "models": ["H100-80GB", "A100-80GB"],
                  "nominal": {"gpu": 2.5, "cpu": 16},
                  "borrowing_limit": {"gpu": 1}, "lending_limit": {"gpu": 0.5}}]}],
    "admission": {"usage_half_life_s": 0, "backfill": false, "fair_sharing": false,
                  "gpu_equivalents": {"A100-80GB": 0.5}}})";
  auto c = ParseQueueCluster(text, "dir/t.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->name, "t");
  EXPECT_EQ(c->cycle_s, 10);
  ASSERT_EQ(c->nodes.size(), 2u);
  EXPECT_EQ(c->nodes[1].name, "n-1");
  EXPECT_EQ(c->nodes[1].gpu_count, 8);
  EXPECT_EQ(c->nodes[1].cpu.v, 64000);
  EXPECT_EQ(c->nodes[1].memory.v, 512 * 1024);
  const QueueSpec& q = c->queues.at(0);
  EXPECT_EQ(q.cohort, "org");
  EXPECT_EQ(q.weight, 2.5);
  EXPECT_EQ(q.reclaim, ReclaimPreemption::kNever);
  EXPECT_EQ(q.within_queue, WithinQueuePreemption::kLowerPriority);
  EXPECT_EQ(q.queueing, QueueingStrategy::kBestEffortFifo);
  const FlavorQuota& f = q.flavors.at(0);
  EXPECT_EQ(f.nominal, (Resources{2500, 16000, kUnlimitedQuota}));
  ASSERT_TRUE(f.borrowing_limit.has_value());
  EXPECT_EQ(*f.borrowing_limit, (Resources{1000, kUnlimitedQuota, kUnlimitedQuota}));
  ASSERT_TRUE(f.lending_limit.has_value());
  EXPECT_EQ(*f.lending_limit, (Resources{500, 16000, kUnlimitedQuota}));
  EXPECT_EQ(__builtin_popcountll(f.models), 2);
  EXPECT_EQ(c->admission.usage_half_life_s, 0);
  EXPECT_FALSE(c->admission.backfill);
  EXPECT_FALSE(c->admission.fair_sharing);
  EXPECT_TRUE(c->admission.reservations);
  EXPECT_EQ(c->admission.gpu_equivalents.at("A100-80GB"), 0.5);
}

TEST(QueueScenarioTest, ClusterErrorsNamePositionAndPath) {
  const std::string q = kQueue;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "t.json:1:2: JSON syntax error"},
      {"[]", "t.json:1:1: must be an object"},
      {"{" + kNodes + "}", "t.json:1:1: missing required key 'queues'"},
      {"{\"queues\": [" + q + "]}", "t.json:1:1: needs exactly one of"},
      {"{" + kNodes + ",\n \"queues\": [" + q + "], \"colour\": 1}",
       "t.json:2:83: colour: unknown key 'colour'"},
      {"{" + kNodes + ", \"queues\": [" + q + "],\n\"queues\": []}",
       "t.json:2:1: queues: duplicate key"},
      {"{" + kNodes + ", \"cycle_s\": 0, \"queues\": [" + q + "]}",
       "t.json:1:131: cycle_s: must be in (0, 86400]"},
      {R"({"nodes": [{"name_prefix": "n", "count": 1, "gpu_model": "X1", "gpus": 8,)"
       R"( "cpu_cores": 1, "memory_gib": 1}], "queues": [)" +
           q + "]}",
       "t.json:1:58: nodes[0].gpu_model: unknown GPU model 'X1'"},
      {R"({"nodes": [{"name_prefix": "n", "count": 1, "gpus": 8,)"
       R"( "cpu_cores": 1, "memory_gib": 1}], "queues": [)" +
           q + "]}",
       "t.json:1:12: nodes[0]: missing required key 'gpu_model'"},
      {R"({"nodes": [{"name_prefix": "n", "count": 1, "cpu_cores": 1, "memory_gib": 1,)"
       R"( "labels": {"rack": "r{j}"}}], "queues": [)" +
           q + "]}",
       "t.json:1:97: nodes[0].labels.rack: unknown placeholder '{j}'"},
      {"{" + kNodes + ", \"queues\": [" + q + ", " + q + "]}",
       "t.json:1:209: queues[1].name: duplicate queue 'a'"},
      {"{" + kNodes + R"(, "queues": [{"name": "a", "cohort": "org", "flavors": [)" +
           R"({"name": "f", "nominal": {"gpu": 1}}]}]})",
       "t.json:1:155: queues[0].cohort: cohort 'org' is not declared"},
      {"{" + kNodes + R"(, "queues": [{"name": "a", "flavors": [{"name": "f",)" +
           R"( "nominal": {"gpu": -1}}]}]})",
       "t.json:1:190: queues[0].flavors[0].nominal.gpu: must be in [0, 1e+07]"},
      {"{" + kNodes + R"(, "queues": [{"name": "a", "flavors": [{"name": "f",)" +
           R"( "nominal": {"cpu": 1}}]}]})",
       "t.json:1:182: queues[0].flavors[0].nominal: missing required key 'gpu'"},
      {"{" + kNodes + R"(, "queues": [{"name": "a", "flavors": [{"name": "f",)" +
           R"( "nominal": {"gpu": 1}, "lending_limit": {"gpu": 2}}]}]})",
       "t.json:1:219: queues[0].flavors[0].lending_limit.gpu: lends more than the nominal"},
      {"{" + kNodes + R"(, "queues": [{"name": "a", "weight": 0, "flavors": []}]})",
       "t.json:1:155: queues[0].weight: must be in (0, 1e+06]"},
      {"{" + kNodes + ", \"queues\": [" + q + R"(], "admission": {"gpu_equivalents": {"Z": 1}}})",
       "t.json:1:235: admission.gpu_equivalents.Z: unknown GPU model 'Z'"},
      {"{" + kNodes + ", \"queues\": [" + q + R"(], "admission": {"backfill": 1}})",
       "t.json:1:227: admission.backfill: must be true or false"},
      {"{\"a\":" + std::string(70, '[') + std::string(70, ']') + "}",
       "t.json:1:69: nesting deeper than 64 levels"},
  };
  for (const auto& [text, want] : cases) {
    auto c = ParseQueueCluster(text, "t.json");
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(c.status().message().rfind(want, 0), 0u)
        << "text: " << text << "\n got: " << c.status().message() << "\nwant: " << want;
  }
}

TEST(QueueScenarioTest, PriorityPolicyPerQueue) {
  auto queue = [](const std::string& extra) {
    return "{" + kNodes + R"(, "queues": [{"name": "a", )" + extra +
           R"("flavors": [{"name": "f", "nominal": {"gpu": 1}}]}]})";
  };
  struct Case {
    std::string keys;
    WithinQueuePreemption within;
    ReclaimPreemption reclaim;
    QueueingStrategy queueing;
    std::string error;  // "" when valid
  };
  const Case cases[] = {
      {"", WithinQueuePreemption::kLowerPriority, ReclaimPreemption::kAny,
       QueueingStrategy::kBestEffortFifo, ""},
      {R"("preempt_within_queue": false, "reclaim": false, )", WithinQueuePreemption::kNever,
       ReclaimPreemption::kNever, QueueingStrategy::kBestEffortFifo, ""},
      {R"("within_queue_preemption": "LowerOrNewerEqualPriority", "reclaim_within_cohort": )"
       R"("LowerPriority", "queueing_strategy": "StrictFIFO", )",
       WithinQueuePreemption::kLowerOrNewerEqualPriority, ReclaimPreemption::kLowerPriority,
       QueueingStrategy::kStrictFifo, ""},
      {R"("reclaim": true, "reclaim_within_cohort": "Any", )",
       {},
       {},
       {},
       "queues[0].reclaim_within_cohort: give either reclaim or reclaim_within_cohort"},
      {R"("within_queue_preemption": "Always", )",
       {},
       {},
       {},
       "queues[0].within_queue_preemption: within-queue preemption: 'Always' is not one of "
       "Never, LowerPriority, LowerOrNewerEqualPriority"},
      {R"("queueing_strategy": "strict", )",
       {},
       {},
       {},
       "queues[0].queueing_strategy: queueing strategy: 'strict' is not one of BestEffortFIFO, "
       "StrictFIFO"},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.keys);
    auto c = ParseQueueCluster(queue(tc.keys), "t.json");
    if (!tc.error.empty()) {
      ASSERT_FALSE(c.ok());
      EXPECT_NE(c.status().message().find(tc.error), std::string::npos) << c.status().message();
      continue;
    }
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->queues[0].within_queue, tc.within);
    EXPECT_EQ(c->queues[0].reclaim, tc.reclaim);
    EXPECT_EQ(c->queues[0].queueing, tc.queueing);
  }
}

TEST(QueueScenarioTest, NodesCsvIsResolvedNextToTheFile) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("queue_sim_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "sub");
  {
    std::ofstream(dir / "sub" / "nodes.csv") << "sn,cpu_milli,memory_mib,gpu,model\n"
                                                "a,32000,262144,8,A100-80GB\n";
    std::ofstream(dir / "c.json") << R"({"nodes_csv": "sub/nodes.csv", "queues": [)" + kQueue +
                                         "]}";
    std::ofstream(dir / "bad.json")
        << R"({"nodes_csv": "missing.csv", "queues": [)" + kQueue + "]}";
  }
  auto c = ReadQueueCluster((dir / "c.json").string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->nodes.size(), 1u);
  EXPECT_EQ(c->nodes[0].name, "a");
  EXPECT_EQ(c->nodes_csv, "sub/nodes.csv");
  auto bad = ReadQueueCluster((dir / "bad.json").string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("missing.csv"), std::string::npos);
  std::filesystem::remove_all(dir);
}

const std::string kHeader =
    "name,queue,arrival_s,duration_s,pods,min_member,cpu_milli,memory_mib,num_gpu,gpu_milli,"
    "gpu_model,priority,topology\n";

TEST(QueueScenarioTest, ParsesWorkloadRows) {
  auto jobs = ParseQueueWorkload(kHeader +
                                     "j1,a,0,60,1,0,1000,1024,1,500,,0,\n"
                                     "j2,b,2.5,1e3,8,6,8000,65536,1,1000,H100-80GB|A100-80GB,"
                                     "-3,label:rack\n"
                                     "j3,a,3,10,2,,0,0,0,0,,,same-node\n",
                                 "w.csv", {"a", "b"});
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  ASSERT_EQ(jobs->size(), 3u);
  const JobSpec& a = (*jobs)[0].spec;
  EXPECT_EQ(a.id, 1u);
  EXPECT_TRUE(a.pod.IsShare());
  EXPECT_EQ(a.topology, TopologyKind::kNone);
  const QueueJob& b = (*jobs)[1];
  EXPECT_EQ(b.spec.id, 2u);
  EXPECT_EQ(b.spec.arrival, 2.5);
  EXPECT_EQ(b.duration_s, 1000);
  EXPECT_EQ(b.spec.pods, 8);
  EXPECT_EQ(b.spec.min_member, 6);
  EXPECT_EQ(b.spec.priority, -3);
  EXPECT_EQ(__builtin_popcountll(b.spec.pod.models), 2);
  EXPECT_EQ(b.spec.topology, TopologyKind::kSameLabel);
  EXPECT_EQ(b.spec.topology_label, "rack");
  const JobSpec& c = (*jobs)[2].spec;
  EXPECT_EQ(c.min_member, 0);
  EXPECT_TRUE(c.pod.IsCpuOnly());
  EXPECT_EQ(c.topology, TopologyKind::kSameNode);

  // Optional columns may be left out.
  auto minimal = ParseQueueWorkload(
      "queue,name,arrival_s,duration_s,cpu_milli,memory_mib,num_gpu,gpu_milli\na,x,0,1,0,0,2,"
      "1000\n",
      "w.csv", {});
  ASSERT_TRUE(minimal.ok()) << minimal.status().message();
  EXPECT_EQ((*minimal)[0].spec.pods, 1);
  EXPECT_EQ((*minimal)[0].spec.pod.num_gpu, 2);
}

TEST(QueueScenarioTest, WorkloadErrorsNameLineAndColumn) {
  const std::string ok = "j,a,0,60,1,0,1000,1024,1,1000,,0,\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "w.csv: empty file"},
      {kHeader, "w.csv: no jobs"},
      {"name,queue,colour\n", "w.csv:1:12: unknown column 'colour'"},
      {"name,queue,name\n", "w.csv:1:12: duplicate column 'name'"},
      {"name,queue\n", "w.csv:1:1: missing required column(s): arrival_s, duration_s"},
      {kHeader + ok + "k,a,0,60\n", "w.csv:3:1: expected 13 fields, found 4"},
      {kHeader + ok + ok, "w.csv:3:1: column 'name': duplicate job name 'j'"},
      {kHeader + "j,zz,0,60,1,0,1000,1024,1,1000,,0,\n",
       "w.csv:2:3: column 'queue': no queue named 'zz'"},
      {kHeader + "j,a,-1,60,1,0,1000,1024,1,1000,,0,\n",
       "w.csv:2:5: column 'arrival_s': -1 outside the allowed range [0, 1e+10]"},
      {kHeader + "j,a,0,0,1,0,1000,1024,1,1000,,0,\n",
       "w.csv:2:7: column 'duration_s': 0 outside the allowed range (0, 1e+10]"},
      {kHeader + "j,a,0,inf,1,0,1000,1024,1,1000,,0,\n",
       "w.csv:2:7: column 'duration_s': 'inf' is not a number"},
      {kHeader + "j,a,0,60,1024,0,1000,1024,1,1000,,0,\n",
       "w.csv:2:10: column 'pods': 1024 outside the allowed range 1..1023"},
      {kHeader + "j,a,0,60,2,3,1000,1024,1,1000,,0,\n",
       "w.csv:2:12: column 'min_member': 3 outside the allowed range 0..2"},
      {kHeader + "j,a,0,60,1,0,x,1024,1,1000,,0,\n",
       "w.csv:2:14: column 'cpu_milli': 'x' is not an integer"},
      {kHeader + "j,a,0,60,1,0,1000,1024,2,500,,0,\n",
       "w.csv:2:26: column 'gpu_milli': a multi-GPU pod must ask for whole GPUs"},
      {kHeader + "j,a,0,60,1,0,1000,1024,0,500,,0,\n",
       "w.csv:2:26: column 'gpu_milli': num_gpu 0 with gpu_milli 500"},
      {kHeader + "j,a,0,60,1,0,1000,1024,1,1000,Z80,0,\n",
       "w.csv:2:31: column 'gpu_model': unknown GPU model 'Z80'"},
      {kHeader + "j,a,0,60,1,0,1000,1024,0,0,T4,0,\n",
       "w.csv:2:28: column 'gpu_model': GPU models given for a CPU-only job"},
      {kHeader + "j,a,0,60,1,0,1000,1024,1,1000,,high,\n",
       "w.csv:2:32: column 'priority': 'high' is not an integer"},
      {kHeader + "j,a,0,60,1,0,1000,1024,1,1000,,0,label:\n",
       "w.csv:2:34: column 'topology': 'label:' is not empty, 'same-node' or 'label:<key>'"},
      {kHeader + "j,a,0,60,1,0,1000,1024,1,1000,,0,\"rack\n", "w.csv:2:34: unterminated quote"},
  };
  for (const auto& [text, want] : cases) {
    auto jobs = ParseQueueWorkload(text, "w.csv", {"a"});
    ASSERT_FALSE(jobs.ok()) << text;
    EXPECT_EQ(jobs.status().message().rfind(want, 0), 0u)
        << "text: " << text << "\n got: " << jobs.status().message() << "\nwant: " << want;
  }
}

TEST(QueueScenarioTest, TraceModeAssignsQueuesByNameHash) {
  auto pods = ParsePodsCsv(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\n"
      "p0,1000,1024,1,1000,10,70\n"
      "p1,1000,1024,1,500,20,20\n"
      "p2,1000,1024,0,0,30,\n",
      "pods.csv");
  ASSERT_TRUE(pods.ok()) << pods.status().message();
  const std::vector<std::string> queues = {"q0", "q1", "q2"};
  auto none = QueueJobsFromTrace(*pods, queues);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("'p2' has no deletion_time"), std::string::npos);
  pods->pop_back();
  auto jobs = QueueJobsFromTrace(*pods, queues);
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ(QueueHash(""), 0xefd01f60ba992926ULL);
  EXPECT_EQ(QueueHash("a"), 0x82a2a958a9bece5bULL);
  for (size_t i = 0; i < jobs->size(); ++i) {
    const QueueJob& j = (*jobs)[i];
    EXPECT_EQ(j.spec.id, i + 1);
    EXPECT_EQ(j.spec.queue, queues[QueueHash(j.spec.name) % 3]);
    EXPECT_EQ(j.spec.pods, 1);
  }
  EXPECT_EQ((*jobs)[0].spec.arrival, 10);
  EXPECT_EQ((*jobs)[0].duration_s, 60);
  EXPECT_EQ((*jobs)[1].duration_s, 1);  // zero lifetime runs one second
}

TEST(QueueScenarioTest, ReadsTheAlibabaTrace) {
  const std::string pods =
      test::SharedDir() + "/traces/alibaba-gpu-2023/openb_pod_list_default.csv";
  if (!std::filesystem::exists(pods)) GTEST_SKIP() << "no trace at " << pods;
  Loaded l = Load("queues-fair");
  auto jobs = ReadQueueWorkload(pods, l.cluster);
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  std::map<std::string, int> per_queue;
  for (const QueueJob& j : *jobs) ++per_queue[j.spec.queue];
  EXPECT_EQ(per_queue.size(), l.cluster.queues.size());
  for (const auto& [q, n] : per_queue) {
    EXPECT_GT(n, static_cast<int>(jobs->size() / l.cluster.queues.size() * 9 / 10)) << q;
  }
}

// ---- simulation ----

TEST(QueueSimTest, RejectsUnknownPolicies) {
  const Loaded l = Load("queues-reclaim");
  QueueSimOptions opt;
  opt.policy = "drf";
  auto r = RunQueueSim(l.cluster, l.jobs, opt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown queue policy 'drf'"), std::string::npos);
  opt.policy = "tessera";
  opt.placement = "nope";
  EXPECT_FALSE(RunQueueSim(l.cluster, l.jobs, opt).ok());
}

// Three teams with weights 1:1:2 share a 64-GPU pool under sustained contention: each team's
// long-run GPU share is within 5% of its weighted fair share (25/25/50).
TEST(QueueSimTest, FairShareFollowsWeights) {
  const Loaded l = Load("queues-fair");
  for (const char* policy : {"tessera", "kueue"}) {
    SCOPED_TRACE(policy);
    QueueSimOptions opt;
    opt.policy = policy;
    opt.horizon_s = 7200;
    const QueueSimResult r = MustRun(l, opt);
    const std::map<std::string, double> want = {
        {"team-a", 0.25}, {"team-b", 0.25}, {"team-c", 0.50}};
    for (const auto& [team, share] : want) {
      const QueueMetrics& m = Queue(r, team);
      EXPECT_NEAR(m.gpu_share, share, 0.05 * share) << team;
      EXPECT_NEAR(m.fair_share, share, 0.05 * share) << team;
      EXPECT_LT(m.fair_share_deviation, 0.05) << team;
    }
    EXPECT_EQ(Queue(r, "org-pool").gpu_share, 0);
    EXPECT_GT(r.gpu_utilization, 0.95);
    EXPECT_EQ(r.overall.preemptions, 0);
  }
  // Without fair sharing the shares follow the arrivals instead (one third each).
  QueueSimOptions fifo;
  fifo.policy = "fifo";
  fifo.horizon_s = 7200;
  const QueueSimResult r = MustRun(l, fifo);
  EXPECT_LT(Queue(r, "team-c").gpu_share, 0.40);
  EXPECT_GT(Queue(r, "team-c").fair_share_deviation, 0.1);
}

// Team B borrows team A's idle quota; when A's demand arrives, the lent quota is reclaimed in the
// first cycle at or after each arrival.
TEST(QueueSimTest, ReclaimWithinOneCycle) {
  const Loaded l = Load("queues-reclaim");
  for (const char* policy : {"tessera", "kueue"}) {
    SCOPED_TRACE(policy);
    QueueSimOptions opt;
    opt.policy = policy;
    const QueueSimResult r = MustRun(l, opt);
    double lost = 0;
    for (size_t i = 0; i < l.jobs.size(); ++i) {
      const QueueJob& j = l.jobs[i];
      const QueueJobOutcome& o = r.outcomes[i];
      EXPECT_GE(o.end, 0) << j.spec.name;
      if (j.spec.queue == "team-a") {
        EXPECT_GE(o.first_start, j.spec.arrival) << j.spec.name;
        EXPECT_LE(o.first_start - j.spec.arrival, l.cluster.cycle_s) << j.spec.name;
        EXPECT_EQ(o.preemptions, 0);
      } else {
        lost += o.lost_gpu_hours;
      }
    }
    EXPECT_EQ(Queue(r, "team-b").preemptions, 32);
    EXPECT_EQ(r.max_preemptions_per_job, 1);
    EXPECT_NEAR(Queue(r, "team-b").lost_gpu_hours, lost, 1e-9);
    EXPECT_GT(lost, 32 * 0.5);
    EXPECT_LT(lost, 32 * 0.52);
  }
  // FIFO without preemption: A waits for B's jobs to end.
  QueueSimOptions fifo;
  fifo.policy = "fifo";
  const QueueSimResult r = MustRun(l, fifo);
  EXPECT_GT(Queue(r, "team-a").p50_wait_s, 7200 - 1831);
  EXPECT_EQ(r.overall.preemptions, 0);
}

// Many 8-pod gangs and one-pod jobs compete: every gang is admitted eventually, no gang ever
// runs with fewer than min_member pods, no pending job holds pods, and gang waits are reported.
TEST(QueueSimTest, GangsNeverPartialAndNeverDeadlock) {
  const Loaded l = Load("queues-gangs");
  std::map<WorkloadId, const QueueJob*> by_id;
  for (const QueueJob& j : l.jobs) by_id[j.spec.id] = &j;
  int64_t checks = 0;
  QueueSimOptions opt;
  opt.on_cycle = [&](const QueueCycleView& v) -> Status {
    for (const auto& [id, job] : by_id) {
      int allocated = 0;
      for (int i = 0; i < job->spec.pods; ++i)
        allocated += v.state.IsAllocated(id * kPodsPerJob + static_cast<WorkloadId>(i));
      const JobState st = v.admission.state(id);
      const int need = job->spec.min_member > 0 ? job->spec.min_member : job->spec.pods;
      if (st == JobState::kRunning) {
        if (allocated < need || allocated != static_cast<int>(v.admission.Placements(id).size()))
          return Internal(job->spec.name + " runs with " + std::to_string(allocated) + " pods");
        if (job->spec.topology == TopologyKind::kSameNode) {
          std::set<NodeIdx> nodes;
          for (const Placement& p : v.admission.Placements(id)) nodes.insert(p.node);
          if (nodes.size() != 1) return Internal(job->spec.name + " spans nodes");
        }
        if (job->spec.topology == TopologyKind::kSameLabel) {
          std::set<std::string> racks;
          for (const Placement& p : v.admission.Placements(id))
            racks.insert(v.state.spec(p.node).labels.at("rack"));
          if (racks.size() != 1) return Internal(job->spec.name + " spans racks");
        }
      } else if (allocated != 0) {
        return Internal(job->spec.name + " holds pods while not running");
      }
      ++checks;
    }
    return Status::Ok();
  };
  const QueueSimResult r = MustRun(l, opt);
  EXPECT_GT(checks, 0);
  EXPECT_FALSE(r.truncated);
  const QueueMetrics& t = Queue(r, "training");
  EXPECT_EQ(t.gangs, 60);
  EXPECT_EQ(t.gangs_admitted, 60);
  EXPECT_EQ(t.gangs_waiting, 0);
  EXPECT_GT(t.gang_wait_p95_s, 0);
  EXPECT_EQ(r.overall.completed, r.overall.jobs);
  EXPECT_EQ(r.overall.never_admitted, 0);
}

// A #3779-style cohort (two guaranteed teams and a best-effort queue without quota): borrowing,
// reclaim and gangs that naive fair-sharing preemption would keep evicting. Preemptions stay
// bounded, no job is preempted twice, and everything completes.
TEST(QueueSimTest, NoPreemptionLoop) {
  const Loaded l = Load("queues-kueue-loop");
  for (const char* policy : {"tessera", "kueue"}) {
    SCOPED_TRACE(policy);
    QueueSimOptions opt;
    opt.policy = policy;
    const QueueSimResult r = MustRun(l, opt);
    EXPECT_FALSE(r.truncated);
    EXPECT_LE(r.max_preemptions_per_job, 1);
    EXPECT_LE(r.overall.preemptions, 9);
    EXPECT_EQ(r.overall.completed, r.overall.jobs);
    EXPECT_LT(r.cycles, 2000);
  }
}

TEST(QueueSimTest, DeterministicAndJson) {
  const Loaded l = Load("queues-kueue-loop");
  QueueSimOptions opt;
  const QueueSimResult a = MustRun(l, opt);
  const QueueSimResult b = MustRun(l, opt);
  ASSERT_EQ(a.outcomes.size(), b.outcomes.size());
  for (size_t i = 0; i < a.outcomes.size(); ++i) {
    EXPECT_EQ(a.outcomes[i].first_start, b.outcomes[i].first_start);
    EXPECT_EQ(a.outcomes[i].end, b.outcomes[i].end);
    EXPECT_EQ(a.outcomes[i].preemptions, b.outcomes[i].preemptions);
  }
  const auto one = nlohmann::json::parse(QueueSimJson({a}, "c.json", "w.csv"));
  EXPECT_EQ(one["policy"], "tessera");
  for (const char* key : {"p50_wait_s", "p95_wait_s", "p99_wait_s", "avg_jct_s", "gpu_share",
                          "fair_share", "fair_share_deviation", "preemptions", "lost_gpu_hours"}) {
    EXPECT_TRUE(one["queues"]["team-a"].contains(key)) << key;
    EXPECT_TRUE(one["overall"].contains(key)) << key;
  }
  EXPECT_TRUE(one["overall"].contains("gpu_utilization"));
  QueueSimResult c = a;
  c.policy = "fifo";
  const auto two = nlohmann::json::parse(QueueSimJson({a, c}, "c.json", "w.csv"));
  EXPECT_TRUE(two["policies"].contains("tessera"));
  EXPECT_TRUE(two["policies"].contains("fifo"));
  EXPECT_NE(QueueSimTable({a}).find("team-a"), std::string::npos);
}

}  // namespace
}  // namespace tessera
