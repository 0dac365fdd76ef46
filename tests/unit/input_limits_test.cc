// Input limits of the simulator readers: ReadFileToString refuses what is not a regular file and
// what is larger than kMaxInputFileBytes; every reader skips a leading UTF-8 byte order mark
// and still reports the positions of the text after it; the fill protocol refuses tune ratios
// outside (0, kMaxTuneRatio] and workloads it could never finish inflating.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/csv.h"
#include "sim/fill.h"
#include "sim/parva.h"
#include "sim/pollux.h"
#include "sim/pollux_sim.h"
#include "sim/queue_scenario.h"
#include "sim/report.h"
#include "sim/sharing_scenario.h"
#include "sim/trace.h"
#include "tests/support/test_paths.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

const std::string kBom = "\xEF\xBB\xBF";

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "tessera-input-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) ? pattern : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return (fs::path(path_) / name).string(); }

 private:
  std::string path_;
};

// ReadFileToString

TEST(ReadFileToStringTest, ReadsARegularFile) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string content = kBom + "a,b\n1,2\n" + std::string(200000, 'x');
  std::ofstream(dir.File("f.csv"), std::ios::binary) << content;
  auto text = ReadFileToString(dir.File("f.csv"));
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text, content);
}

TEST(ReadFileToStringTest, ReadsAnEmptyFile) {
  TempDir dir;
  std::ofstream(dir.File("empty.csv")).flush();
  auto text = ReadFileToString(dir.File("empty.csv"));
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text, "");
}

struct RefusedCase {
  const char* label;
  std::function<std::string(const TempDir&)> make;  // returns the path to read
  StatusCode code;
  std::string reason;  // the message is "PATH: reason" unless it starts with "cannot"
};

void PrintTo(const RefusedCase& c, std::ostream* os) {
  *os << c.label;
}

class ReadFileRefusedTest : public ::testing::TestWithParam<RefusedCase> {};

TEST_P(ReadFileRefusedTest, RefusesWithOneLineMessage) {
  const RefusedCase& c = GetParam();
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string path = c.make(dir);
  auto text = ReadFileToString(path);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), c.code);
  const std::string& m = text.status().message();
  if (c.reason.rfind("cannot", 0) == 0) {
    EXPECT_EQ(m.rfind(c.reason + " '" + path + "'", 0), 0u) << m;
  } else {
    EXPECT_EQ(m, path + ": " + c.reason);
  }
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ReadFileRefusedTest,
    ::testing::Values(
        RefusedCase{"Missing", [](const TempDir& d) { return d.File("missing.csv"); },
                    StatusCode::kIoError, "cannot open"},
        RefusedCase{"Directory", [](const TempDir& d) { return d.path(); },
                    StatusCode::kInvalidArgument, "not a regular file"},
        RefusedCase{"DevZero", [](const TempDir&) { return std::string("/dev/zero"); },
                    StatusCode::kInvalidArgument, "not a regular file"},
        RefusedCase{"DevNull", [](const TempDir&) { return std::string("/dev/null"); },
                    StatusCode::kInvalidArgument, "not a regular file"},
        // A FIFO nobody writes to: opening it for reading must not wait for a writer.
        RefusedCase{"Fifo",
                    [](const TempDir& d) {
                      const std::string p = d.File("fifo.csv");
                      EXPECT_EQ(::mkfifo(p.c_str(), 0600), 0);
                      return p;
                    },
                    StatusCode::kInvalidArgument, "not a regular file"},
        // Sparse: no disk space is used, the size alone is refused.
        RefusedCase{"OneBytePastTheLimit",
                    [](const TempDir& d) {
                      const std::string p = d.File("big.csv");
                      const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
                      EXPECT_GE(fd, 0);
                      EXPECT_EQ(::ftruncate(fd, kMaxInputFileBytes + 1), 0);
                      ::close(fd);
                      return p;
                    },
                    StatusCode::kInvalidArgument, "larger than the 256 MiB input limit"}),
    [](const ::testing::TestParamInfo<RefusedCase>& info) { return info.param.label; });

TEST(ReadFileToStringTest, FileReadersRefuseNonRegularFiles) {
  TempDir dir;
  const std::vector<std::function<Status(const std::string&)>> readers = {
      [](const std::string& p) { return ReadNodesCsv(p).status(); },
      [](const std::string& p) { return ReadPodsCsv(p).status(); },
      [](const std::string& p) { return ReadSharingScenario(p).status(); },
      [](const std::string& p) { return ReadQueueCluster(p).status(); },
      [](const std::string& p) { return ReadPolluxWorkload(p).status(); },
      [](const std::string& p) { return ReadParvaSlo(p, {"a"}).status(); },
      [](const std::string& p) { return ReadParvaDeploy(p, {"a"}).status(); },
  };
  for (const std::string& path : {dir.path(), std::string("/dev/zero")}) {
    for (size_t i = 0; i < readers.size(); ++i) {
      const Status st = readers[i](path);
      EXPECT_EQ(st.message(), path + ": not a regular file") << "reader " << i;
    }
  }
}

// UTF-8 byte order mark

TEST(SkipUtf8BomTest, RemovesOnlyALeadingMark) {
  EXPECT_EQ(SkipUtf8Bom(kBom + "a,b"), "a,b");
  EXPECT_EQ(SkipUtf8Bom(kBom), "");
  EXPECT_EQ(SkipUtf8Bom(kBom + kBom + "x"), kBom + "x");
  EXPECT_EQ(SkipUtf8Bom("a" + kBom), "a" + kBom);
  EXPECT_EQ(SkipUtf8Bom("\xEF\xBB"), "\xEF\xBB");
  EXPECT_EQ(SkipUtf8Bom(""), "");
}

struct BomCase {
  const char* label;
  std::function<Status(std::string_view)> parse;
  std::string content;
  std::string message;  // "" when the content is valid
};

void PrintTo(const BomCase& c, std::ostream* os) {
  *os << c.label;
}

class BomTest : public ::testing::TestWithParam<BomCase> {};

// With or without the mark, the result is the same, and an error points at the same line and
// column (the mark is not counted).
TEST_P(BomTest, SameResultWithAndWithoutBom) {
  const BomCase& c = GetParam();
  const Status plain = c.parse(c.content);
  const Status marked = c.parse(kBom + c.content);
  EXPECT_EQ(plain.message(), c.message);
  EXPECT_EQ(marked.message(), c.message);
  EXPECT_EQ(marked.code(), plain.code());
}

const std::vector<std::string> kQueues = {"a", "b"};

Status ParseNodes(std::string_view t) {
  return ParseNodesCsv(t, "n.csv").status();
}
Status ParsePods(std::string_view t) {
  return ParsePodsCsv(t, "p.csv").status();
}
Status ParseProfile(std::string_view t) {
  return ParseParvaProfile(t, "m.csv", "m").status();
}
Status ParseSlo(std::string_view t) {
  return ParseParvaSlo(t, "slo.csv", {"a", "b"}).status();
}
Status ParseDeploy(std::string_view t) {
  return ParseParvaDeploy(t, "d.csv", {"bert"}).status();
}
Status ParsePlacements(std::string_view t) {
  return ParsePolluxPlacements(t, "pl.csv").status();
}
Status ParsePolluxJobs(std::string_view t) {
  return ParsePolluxWorkload(t, "w.csv").status();
}
Status ParseQueueJobs(std::string_view t) {
  return ParseQueueWorkload(t, "q.csv", kQueues).status();
}
Status ParseQueueClusterJson(std::string_view t) {
  return ParseQueueCluster(t, "c.json").status();
}
Status ParseSharing(std::string_view t) {
  return ParseSharingScenario(t, "s.json").status();
}
Status ParseSummary(std::string_view t) {
  return ParsePolluxSummary(t, "sum.json", "fifo").status();
}

const std::string kQueueCluster =
    R"({"nodes": [{"name_prefix": "n", "count": 1, "gpu_model": "T4", "gpus": 2, "cpu_cores": 8,)"
    R"( "memory_gib": 32}], "queues": [{"name": "a", "flavors": [{"name": "t4",)"
    R"( "nominal": {"gpu": 2}}]}]})";
const std::string kQueueHeader =
    "name,queue,arrival_s,duration_s,cpu_milli,memory_mib,num_gpu,gpu_milli\n";

INSTANTIATE_TEST_SUITE_P(
    Readers, BomTest,
    ::testing::Values(
        BomCase{"NodesValid", ParseNodes,
                "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,393216,8,G2\n", ""},
        BomCase{"NodesDuplicateColumn", ParseNodes, "sn,cpu_milli,sn\n",
                "n.csv:1:14: duplicate column 'sn'"},
        BomCase{"NodesBadCpu", ParseNodes, "sn,cpu_milli,memory_mib,gpu,model\nn0,x,393216,8,G2\n",
                "n.csv:2:4: column 'cpu_milli': 'x' is not an integer"},
        BomCase{"PodsValid", ParsePods,
                "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,500\n", ""},
        BomCase{"PodsDuplicateColumn", ParsePods, "name,cpu_milli,name\n",
                "p.csv:1:16: duplicate column 'name'"},
        BomCase{"ParvaProfileValid", ParseProfile,
                "Mig instance,Batch size,Workload Number,Throughput,Latency\n1,1,1,196.5,0.005\n",
                ""},
        BomCase{"ParvaSloValid", ParseSlo, "10,N/A\n", ""},
        BomCase{"ParvaDeployValid", ParseDeploy,
                "Num instance,Num GPU,Model,Placement,Instance size,Batch size,Num proc\n"
                "0,0,bert,4,3,64,2\n",
                ""},
        BomCase{"PolluxPlacementsValid", ParsePlacements,
                "placement,local_bsz,step_time,sync_time\n1,4,0.5,0.1\n", ""},
        BomCase{"PolluxHeaderColumn", ParsePlacements, "placement,local_bsz,step,sync_time\n",
                "pl.csv:1:21: unexpected column 'step' (expected the header "
                "'placement,local_bsz,step_time,sync_time')"},
        BomCase{"PolluxWorkloadValid", ParsePolluxJobs,
                "name,time,application,num_replicas,batch_size\ncifar10-0,107,cifar10,6,2048\n",
                ""},
        BomCase{"QueueWorkloadValid", ParseQueueJobs, kQueueHeader + "j,a,0,60,1000,1024,1,1000\n",
                ""},
        BomCase{"QueueWorkloadUnknownColumn", ParseQueueJobs, "name,queue,colour\n",
                "q.csv:1:12: unknown column 'colour'"},
        BomCase{"QueueClusterValid", ParseQueueClusterJson, kQueueCluster, ""},
        BomCase{"QueueClusterSyntax", ParseQueueClusterJson, "{\"nodes\": ]",
                "c.json:1:11: JSON syntax error: syntax error while parsing value - unexpected "
                "']'; expected '[', '{', or a literal"},
        BomCase{"SharingUnknownKey", ParseSharing, "{\"horizon_s\": 1, \"colour\": 2}",
                "s.json:1:18: colour: unknown key 'colour' (known: name, seed, horizon_s, nodes, "
                "strategies, workloads)"},
        BomCase{"PolluxSummaryValid", ParseSummary, R"({"mean": 1.5, "avgs": {"cifar10": 2}})",
                ""}),
    [](const ::testing::TestParamInfo<BomCase>& info) { return info.param.label; });

TEST(BomTest, SharingScenarioFileWithBom) {
  auto text = ReadFileToString(test::SourceDir() + "/bench/scenarios/sharing-small.json");
  ASSERT_TRUE(text.ok()) << text.status().message();
  auto plain = ParseSharingScenario(*text, "s.json");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  auto marked = ParseSharingScenario(kBom + *text, "s.json");
  ASSERT_TRUE(marked.ok()) << marked.status().message();
  EXPECT_EQ(marked->name, plain->name);
  EXPECT_EQ(marked->node_groups.size(), plain->node_groups.size());
  EXPECT_EQ(marked->classes.size(), plain->classes.size());
}

TEST(BomTest, NodesCsvFileWithBomReadsLikeWithout) {
  TempDir dir;
  const std::string csv = "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,393216,8,G2\n";
  std::ofstream(dir.File("bom.csv"), std::ios::binary) << kBom + csv;
  auto nodes = ReadNodesCsv(dir.File("bom.csv"));
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].name, "n0");
  EXPECT_EQ((*nodes)[0].gpu_count, 8);
}

// Fill protocol limits

std::vector<NodeSpec> TwoNodes() {
  auto nodes = ParseNodesCsv(
      "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,393216,8,G2\n"
      "n1,96000,393216,8,G2\n",
      "n.csv");
  EXPECT_TRUE(nodes.ok());
  return nodes.ok() ? *nodes : std::vector<NodeSpec>{};
}

std::vector<Workload> PodList(const std::string& rows) {
  auto pods = ParsePodsCsv("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" + rows, "p.csv");
  EXPECT_TRUE(pods.ok()) << pods.status().message();
  return pods.ok() ? *pods : std::vector<Workload>{};
}

struct TuneCase {
  const char* label;
  double tune;
  bool ok;
};

void PrintTo(const TuneCase& c, std::ostream* os) {
  *os << c.label;
}

class TuneRatioTest : public ::testing::TestWithParam<TuneCase> {};

TEST_P(TuneRatioTest, OnlyRatiosInRangeRun) {
  const TuneCase& c = GetParam();
  EXPECT_EQ(ValidateTuneRatio(c.tune).ok(), c.ok);
  auto r = RunFillMatrix(TwoNodes(), PodList("p0,1000,1024,1,1000\np1,1000,1024,0,0\n"),
                         {"bestfit"}, {1}, c.tune, 1);
  EXPECT_EQ(r.ok(), c.ok) << (r.ok() ? "" : r.status().message());
  if (!c.ok) {
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("outside the allowed range (0, 4]"), std::string::npos)
        << r.status().message();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TuneRatioTest,
    ::testing::Values(TuneCase{"Default", 1.3, true}, TuneCase{"Max", kMaxTuneRatio, true},
                      TuneCase{"Small", 0.01, true}, TuneCase{"Zero", 0, false},
                      TuneCase{"Negative", -1, false}, TuneCase{"AboveMax", 4.0001, false},
                      TuneCase{"Million", 1e6, false},
                      TuneCase{"NaN", std::numeric_limits<double>::quiet_NaN(), false},
                      TuneCase{"Inf", std::numeric_limits<double>::infinity(), false}),
    [](const ::testing::TestParamInfo<TuneCase>& info) { return info.param.label; });

TEST(FillLimitsTest, WorkloadWithoutGpuDemandIsRefusedNotInflatedForever) {
  FillOptions opt;
  opt.policy = "bestfit";
  auto r = RunFill(TwoNodes(), PodList("p0,1000,1024,0,0\np1,2000,1024,0,0\n"), opt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "no pod asks for a GPU");
  // The sequence builder on its own returns the pods without inflating.
  EXPECT_EQ(PrepareFillSequence(PodList("p0,1000,1024,0,0\n"), 16000, 1.3, 1).size(), 1u);
}

TEST(FillLimitsTest, InflationBeyondThePodLimitIsRefused) {
  // 3,200 GPUs at 4x capacity need about 12,800,000 pods of 1 milli-GPU.
  std::string csv = "sn,cpu_milli,memory_mib,gpu,model\n";
  for (int i = 0; i < 400; ++i) csv += "n" + std::to_string(i) + ",96000,393216,8,G2\n";
  auto nodes = ParseNodesCsv(csv, "n.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  FillOptions opt;
  opt.policy = "bestfit";
  opt.tune_ratio = 4;
  auto r = RunFill(*nodes, PodList("p0,1000,1024,1,1\n"), opt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "inflating the workload to 4 x GPU capacity needs about 12800000 pods, more than the "
            "limit of 10000000");
}

TEST(ReadFileToStringTest, ReadsPastAnAnnouncedSizeOfZero) {
  // /proc files announce size 0 and are read in chunks up to their end.
  auto text = ReadFileToString("/proc/self/status");
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_NE(text->find("Name:"), std::string::npos);
}

TEST(FillLimitsTest, TableLabelsTheEndColumnWithTheTuneRatio) {
  for (const auto& [tune, label] :
       std::vector<std::pair<double, std::string>>{{1.3, "unalloc%@130 (sd)"},
                                                   {2, "unalloc%@200 (sd)"},
                                                   {0.75, "unalloc%@75 (sd)"},
                                                   {1.255, "unalloc%@125.5 (sd)"}}) {
    auto r = RunFillMatrix(TwoNodes(), PodList("p0,1000,1024,1,1000\np1,1000,1024,2,1000\n"),
                           {"bestfit"}, {1}, tune, 1);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const std::string table = FillTable(*r);
    EXPECT_NE(table.find(label), std::string::npos) << table;
    if (tune != 1.3) {
      EXPECT_EQ(table.find("@130"), std::string::npos) << table;
    }
    EXPECT_NE(FillJson(*r, "n", "p").find("\"tune_ratio\""), std::string::npos);
  }
}

}  // namespace
}  // namespace tessera
