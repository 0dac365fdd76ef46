#include "sim/trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "sim/csv.h"
#include "tests/support/test_paths.h"

namespace tessera {
namespace {

const char kPodHeader[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time\n";
const char kPodOk[] = "p1,1000,2048,1,500,,0,100\n";
const char kNodeHeader[] = "sn,cpu_milli,memory_mib,gpu,model\n";
const char kNodeOk[] = "n1,64000,262144,2,T4\n";

GpuModelId Model(const char* name) {
  return GpuCatalog::Builtin().Find(name).value();
}
ModelMask Bit(const char* name) {
  return ModelMask{1} << Model(name);
}

struct ErrorCase {
  const char* label;
  std::string content;
  const char* where;  // FILE:LINE:COL
  const char* reason;
};

void PrintTo(const ErrorCase& c, std::ostream* os) {
  *os << c.label;
}

std::string Label(const ::testing::TestParamInfo<ErrorCase>& info) {
  return info.param.label;
}

void ExpectError(const Status& st, const ErrorCase& c) {
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  // The location leads the message and is followed by ": ", so "t.csv:3:1" cannot match
  // "t.csv:3:12".
  EXPECT_EQ(st.message().rfind(std::string(c.where) + ": ", 0), 0u) << st.message();
  EXPECT_NE(st.message().find(c.reason), std::string::npos) << st.message();
}

class PodErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(PodErrorTest, ReportsLocationAndReason) {
  auto r = ParsePodsCsv(GetParam().content, "t.csv");
  ExpectError(r.status(), GetParam());
}

std::string Pods(const std::string& row) {
  return std::string(kPodHeader) + kPodOk + row;
}

// Column of each field in "p2,1000,2048,1,500,,0,100": name 1, cpu_milli 4, memory_mib 9,
// num_gpu 14, gpu_milli 16, gpu_spec 20, creation_time 21, deletion_time 23.
INSTANTIATE_TEST_SUITE_P(
    Cases, PodErrorTest,
    ::testing::Values(
        ErrorCase{"NonInteger", Pods("p2,12x,2048,1,500,,0,100\n"), "t.csv:3:4",
                  "column 'cpu_milli': '12x' is not an integer"},
        ErrorCase{"Fraction", Pods("p2,1000,2048,1,0.5,,0,100\n"), "t.csv:3:16",
                  "'0.5' is not an integer"},
        ErrorCase{"LeadingSpace", Pods("p2,1000, 2048,1,500,,0,100\n"), "t.csv:3:9",
                  "is not an integer"},
        ErrorCase{"EmptyNumber", Pods("p2,,2048,1,500,,0,100\n"), "t.csv:3:4", "empty value"},
        ErrorCase{"NegativeCpu", Pods("p2,-5,2048,1,500,,0,100\n"), "t.csv:3:4",
                  "-5 outside the allowed range"},
        ErrorCase{"NegativeMemory", Pods("p2,1000,-1,1,500,,0,100\n"), "t.csv:3:9",
                  "column 'memory_mib': -1 outside the allowed range"},
        ErrorCase{"NegativeCreation", Pods("p2,1000,2048,1,500,,-3,100\n"), "t.csv:3:21",
                  "column 'creation_time'"},
        ErrorCase{"GpuMilliAboveOneGpu", Pods("p2,1000,2048,1,1001,,0,100\n"), "t.csv:3:16",
                  "1001 outside the allowed range 0..1000"},
        ErrorCase{"Int64Overflow", Pods("p2,99999999999999999999,2048,1,500,,0,100\n"), "t.csv:3:4",
                  "out of range"},
        ErrorCase{"TooManyGpus", Pods("p2,1000,2048,17,1000,,0,100\n"), "t.csv:3:14",
                  "column 'num_gpu': 17 outside the allowed range 0..16"},
        ErrorCase{"GpuCountWithoutShare", Pods("p2,1000,2048,1,0,,0,100\n"), "t.csv:3:16",
                  "both must be zero or both positive"},
        ErrorCase{"ShareWithoutGpuCount", Pods("p2,1000,2048,0,500,,0,100\n"), "t.csv:3:16",
                  "both must be zero or both positive"},
        ErrorCase{"MultiGpuShare", Pods("p2,1000,2048,2,500,,0,100\n"), "t.csv:3:16", "whole GPUs"},
        ErrorCase{"UnknownGpuSpec", Pods("p2,1000,2048,1,500,T4|X9,0,100\n"), "t.csv:3:20",
                  "unknown GPU model 'X9'"},
        ErrorCase{"EmptyGpuSpecEntry", Pods("p2,1000,2048,1,500,T4|,0,100\n"), "t.csv:3:20",
                  "unknown GPU model ''"},
        ErrorCase{"GpuSpecOnCpuOnlyPod", Pods("p2,1000,2048,0,0,T4,0,100\n"), "t.csv:3:18",
                  "CPU-only"},
        ErrorCase{"DeletionBeforeCreation", Pods("p2,1000,2048,1,500,,50,10\n"), "t.csv:3:24",
                  "deletion 10 before creation 50"},
        ErrorCase{"DuplicateName", Pods("p1,1000,2048,1,500,,0,100\n"), "t.csv:3:1",
                  "duplicate pod name 'p1'"},
        ErrorCase{"EmptyName", Pods(",1000,2048,1,500,,0,100\n"), "t.csv:3:1", "empty pod name"},
        ErrorCase{"TooFewFields", Pods("p2,1000,2048,1,500,,0\n"), "t.csv:3:1",
                  "expected 8 fields, found 7"},
        ErrorCase{"TooManyFields", Pods("p2,1000,2048,1,500,,0,100,x\n"), "t.csv:3:1",
                  "expected 8 fields, found 9"},
        ErrorCase{"UnterminatedQuote", Pods("p2,\"1000,2048,1,500,,0,100\n"), "t.csv:3:4",
                  "unterminated quote"},
        ErrorCase{"TextAfterQuote", Pods("\"p2\"x,1000,2048,1,500,,0,100\n"), "t.csv:3:5",
                  "unexpected character after quote"},
        // `"p2",` is five characters, so the quoted CPU field starts at column 6.
        ErrorCase{"QuotedFieldColumn", Pods("\"p2\",\"12x\",2048,1,500,,0,100\n"), "t.csv:3:6",
                  "'12x' is not an integer"},
        // A blank line still counts.
        ErrorCase{"AfterBlankLine", Pods("\np2,12x,2048,1,500,,0,100\n"), "t.csv:4:4",
                  "not an integer"},
        ErrorCase{"CrLf",
                  "name,cpu_milli,memory_mib,num_gpu,gpu_milli\r\np1,1000,2048,1,500\r\n"
                  "p2,1000,2048,1,1001\r\n",
                  "t.csv:3:16", "1001 outside"},
        // A quoted name spanning two lines: the CPU field is on line 4, column 4.
        ErrorCase{"AfterMultiLineField", Pods("\"p\n2\",12x,2048,1,500,,0,100\n"), "t.csv:4:4",
                  "not an integer"},
        ErrorCase{"MissingColumn", "name,cpu_milli,memory_mib,num_gpu\np1,1,1,0\n", "t.csv:1:1",
                  "missing required column(s): gpu_milli"},
        ErrorCase{"MissingColumns", "name,cpu_milli,gpu_milli\np1,1,0\n", "t.csv:1:1",
                  "memory_mib, num_gpu"},
        ErrorCase{"DuplicateColumn", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,name\n",
                  "t.csv:1:45", "duplicate column 'name'"}),
    Label);

class NodeErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(NodeErrorTest, ReportsLocationAndReason) {
  auto r = ParseNodesCsv(GetParam().content, "nodes.csv");
  ExpectError(r.status(), GetParam());
}

std::string Nodes(const std::string& row) {
  return std::string(kNodeHeader) + kNodeOk + row;
}

// Columns in "n2,64000,262144,2,T4": sn 1, cpu_milli 4, memory_mib 10, gpu 17, model 19.
INSTANTIATE_TEST_SUITE_P(
    Cases, NodeErrorTest,
    ::testing::Values(
        ErrorCase{"UnknownModel", Nodes("n2,64000,262144,2,X100\n"), "nodes.csv:3:19",
                  "unknown GPU model 'X100'"},
        ErrorCase{"GpusWithoutModel", Nodes("n2,64000,262144,2,\n"), "nodes.csv:3:19",
                  "without a model"},
        ErrorCase{"ModelWithoutGpus", Nodes("n2,64000,262144,0,T4\n"), "nodes.csv:3:19", "0 GPUs"},
        ErrorCase{"ZeroCpu", Nodes("n2,0,262144,2,T4\n"), "nodes.csv:3:4",
                  "0 outside the allowed range 1.."},
        ErrorCase{"ZeroMemory", Nodes("n2,64000,0,2,T4\n"), "nodes.csv:3:10",
                  "column 'memory_mib'"},
        ErrorCase{"TooManyGpus", Nodes("n2,64000,262144,17,G2\n"), "nodes.csv:3:17",
                  "17 outside the allowed range 0..16"},
        ErrorCase{"NonIntegerGpu", Nodes("n2,64000,262144,two,G2\n"), "nodes.csv:3:17",
                  "'two' is not an integer"},
        ErrorCase{"DuplicateName", Nodes("n1,64000,262144,2,T4\n"), "nodes.csv:3:1",
                  "duplicate node name 'n1'"},
        ErrorCase{"EmptyName", Nodes(",64000,262144,2,T4\n"), "nodes.csv:3:1", "empty node name"},
        ErrorCase{"WrongFieldCount", Nodes("n2,64000,262144,2\n"), "nodes.csv:3:1",
                  "expected 5 fields, found 4"},
        ErrorCase{"UnterminatedQuote", Nodes("n2,64000,262144,2,\"T4\n"), "nodes.csv:3:19",
                  "unterminated quote"},
        ErrorCase{"MissingModelColumn", "sn,cpu_milli,memory_mib,gpu\nn1,1,1,0\n", "nodes.csv:1:1",
                  "missing required column(s): model"}),
    Label);

TEST(TraceTest, UnknownModelMessageListsKnownModels) {
  auto r = ParseNodesCsv(Nodes("n2,64000,262144,2,X100\n"), "nodes.csv");
  ASSERT_FALSE(r.ok());
  for (const char* known : {"T4", "G2", "V100M32", "A100-80GB"})
    EXPECT_NE(r.status().message().find(known), std::string::npos) << r.status().message();
}

TEST(TraceTest, EmptyInputs) {
  for (const std::string& content : {std::string(), std::string("\n\n"), std::string("\r\n")}) {
    auto pods = ParsePodsCsv(content, "t.csv");
    ASSERT_FALSE(pods.ok());
    EXPECT_EQ(pods.status().message().rfind("t.csv", 0), 0u) << pods.status().message();
    EXPECT_NE(pods.status().message().find("empty"), std::string::npos) << pods.status().message();
    auto nodes = ParseNodesCsv(content, "n.csv");
    ASSERT_FALSE(nodes.ok());
    EXPECT_NE(nodes.status().message().find("empty"), std::string::npos)
        << nodes.status().message();
  }
  auto header_only = ParsePodsCsv(kPodHeader, "t.csv");
  ASSERT_FALSE(header_only.ok());
  EXPECT_NE(header_only.status().message().find("no pods"), std::string::npos);
  auto nodes_header_only = ParseNodesCsv(kNodeHeader, "n.csv");
  ASSERT_FALSE(nodes_header_only.ok());
  EXPECT_NE(nodes_header_only.status().message().find("no nodes"), std::string::npos);
}

TEST(TraceTest, MissingFileIsIoError) {
  auto r = ReadPodsCsv("/nonexistent/dir/pods.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_NE(r.status().message().find("/nonexistent/dir/pods.csv"), std::string::npos);
  EXPECT_EQ(ReadNodesCsv("/nonexistent/nodes.csv").status().code(), StatusCode::kIoError);
}

// ---------------------------------------------------------------------------------------
// Successful parses.

void ExpectSamePods(const std::vector<Workload>& a, const std::vector<Workload>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].demand, b[i].demand) << a[i].name;
    EXPECT_EQ(a[i].creation, b[i].creation) << a[i].name;
    EXPECT_EQ(a[i].deletion, b[i].deletion) << a[i].name;
  }
}

const char kFullSchema[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
    "pod-a,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
    "pod-b,6000,12288,1,460,V100M16|V100M32,LS,Running,427061,12902960,427061\n"
    "pod-c,88000,327680,8,1000,,BE,Pending,500000,,\n"
    "pod-d,4000,8192,0,0,,Burstable,Succeeded,600000,600100,600000\n";

TEST(TraceTest, ParsesFullSchema) {
  auto r = ParsePodsCsv(kFullSchema, "t.csv");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::vector<Workload>& p = *r;
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].name, "pod-a");
  EXPECT_EQ(p[0].demand, (Demand{MilliCpu(12000), MiB(16384), 1, 1000, 0}));
  EXPECT_EQ(p[0].creation, 0);
  EXPECT_EQ(p[0].deletion, 12537496);
  EXPECT_EQ(p[1].demand,
            (Demand{MilliCpu(6000), MiB(12288), 1, 460, Bit("V100M16") | Bit("V100M32")}));
  EXPECT_TRUE(p[1].demand.IsShare());
  EXPECT_EQ(p[1].creation, 427061);
  EXPECT_EQ(p[2].demand, (Demand{MilliCpu(88000), MiB(327680), 8, 1000, 0}));
  EXPECT_EQ(p[2].deletion, -1);
  EXPECT_TRUE(p[3].demand.IsCpuOnly());
  EXPECT_EQ(p[3].deletion, 600100);
}

TEST(TraceTest, ColumnOrderDoesNotMatter) {
  const char shuffled[] =
      "scheduled_time,deletion_time,gpu_milli,qos,name,gpu_spec,memory_mib,creation_time,"
      "pod_phase,num_gpu,cpu_milli\n"
      "0,12537496,1000,LS,pod-a,,16384,0,Running,1,12000\n"
      "427061,12902960,460,LS,pod-b,V100M16|V100M32,12288,427061,Running,1,6000\n"
      ",,1000,BE,pod-c,,327680,500000,Pending,8,88000\n"
      "600000,600100,0,Burstable,pod-d,,8192,600000,Succeeded,0,4000\n";
  auto a = ParsePodsCsv(kFullSchema, "a.csv");
  auto b = ParsePodsCsv(shuffled, "b.csv");
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
  ExpectSamePods(*a, *b);

  auto n1 = ParseNodesCsv("sn,cpu_milli,memory_mib,gpu,model\nx,64000,1024,2,T4\n", "n");
  auto n2 = ParseNodesCsv("model,gpu,extra,memory_mib,sn,cpu_milli\nT4,2,zz,1024,x,64000\n", "n");
  ASSERT_TRUE(n1.ok() && n2.ok()) << n1.status().ToString() << n2.status().ToString();
  ASSERT_EQ(n2->size(), 1u);
  EXPECT_EQ((*n2)[0].name, "x");
  EXPECT_EQ((*n2)[0].cpu, MilliCpu(64000));
  EXPECT_EQ((*n2)[0].memory, MiB(1024));
  EXPECT_EQ((*n2)[0].gpu_count, 2);
  EXPECT_EQ((*n2)[0].model, Model("T4"));
  EXPECT_EQ((*n1)[0].model, (*n2)[0].model);
}

TEST(TraceTest, CrLfAndMissingFinalNewline) {
  std::string crlf;
  for (const char* c = kFullSchema; *c; ++c) {
    if (*c == '\n') crlf += '\r';
    crlf += *c;
  }
  auto a = ParsePodsCsv(kFullSchema, "a.csv");
  auto b = ParsePodsCsv(crlf, "b.csv");
  std::string no_final(kFullSchema);
  no_final.pop_back();
  auto c = ParsePodsCsv(no_final, "c.csv");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ExpectSamePods(*a, *b);
  ExpectSamePods(*a, *c);
  EXPECT_EQ((*b)[3].deletion, 600100);  // no stray '\r' in the last field
}

TEST(TraceTest, QuotedFields) {
  const char content[] =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,qos\n"
      "\"pod, \"\"one\"\"\",\"1000\",2048,1,\"250\",\"LS, BE\"\n"
      "\"multi\nline\",0,0,0,0,\"\"\n";
  auto r = ParsePodsCsv(content, "q.csv");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].name, "pod, \"one\"");
  EXPECT_EQ((*r)[0].demand, (Demand{MilliCpu(1000), MiB(2048), 1, 250, 0}));
  EXPECT_EQ((*r)[1].name, "multi\nline");
  EXPECT_TRUE((*r)[1].demand.IsCpuOnly());
}

TEST(TraceTest, OptionalColumnsAbsent) {
  const char content[] =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
      "openb-pod-0000,12000,16384,1,1000\n"
      "\n"
      "openb-pod-0001,6000,12288,4,1000\n"
      "openb-pod-0002,6000,12288,0,0\n";
  auto r = ParsePodsCsv(content, "multigpu.csv");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  for (const Workload& w : *r) {
    EXPECT_EQ(w.creation, 0);
    EXPECT_EQ(w.deletion, -1);
    EXPECT_EQ(w.demand.models, 0u);
  }
  EXPECT_EQ((*r)[1].demand.num_gpu, 4);
  EXPECT_EQ((*r)[1].demand.TotalMilliGpu(), 4000);
}

TEST(TraceTest, CpuOnlyNodes) {
  auto r = ParseNodesCsv("sn,cpu_milli,memory_mib,gpu,model\nc,32000,262144,0,\ng,8000,1024,8,G2\n",
                         "n.csv");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].gpu_count, 0);
  EXPECT_EQ((*r)[0].model, kNoGpuModel);
  EXPECT_EQ((*r)[1].model, Model("G2"));
}

TEST(ModelListTest, Parses) {
  EXPECT_EQ(ParseModelList("").value(), 0u);
  EXPECT_EQ(ParseModelList("T4").value(), Bit("T4"));
  EXPECT_EQ(ParseModelList("V100M16|V100M32|A10").value(),
            Bit("V100M16") | Bit("V100M32") | Bit("A10"));
  auto bad = ParseModelList("T4|Q7");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'Q7'"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(ParseModelList("|T4").ok());
}

TEST(CsvTest, FieldPositions) {
  auto r = ParseCsv("a,\"b,c\",d\n\nxy,,\"z\"\"\"\r\n", "f");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  const CsvRow& r0 = (*r)[0];
  ASSERT_EQ(r0.fields.size(), 3u);
  EXPECT_EQ(r0.line, 1);
  EXPECT_EQ(r0.fields[1].text, "b,c");
  EXPECT_EQ(r0.fields[1].column, 3);
  EXPECT_EQ(r0.fields[2].column, 9);
  const CsvRow& r1 = (*r)[1];
  EXPECT_EQ(r1.line, 3);
  ASSERT_EQ(r1.fields.size(), 3u);
  EXPECT_EQ(r1.fields[1].text, "");
  EXPECT_EQ(r1.fields[1].column, 4);
  EXPECT_EQ(r1.fields[2].text, "z\"");
  EXPECT_EQ(r1.fields[2].column, 5);
  EXPECT_EQ(Where("f.csv", 3, 12), "f.csv:3:12");
}

// ---------------------------------------------------------------------------------------
// The real trace files.

const std::string kTraceDir = test::SharedDir() + "/traces/alibaba-gpu-2023";

int64_t CountLines(const std::string& path) {
  auto text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  if (!text.ok()) return -1;
  return std::count(text->begin(), text->end(), '\n');
}

TEST(RealTraceTest, EveryFileParsesWithAllRows) {
  if (!std::filesystem::is_directory(kTraceDir)) GTEST_SKIP() << kTraceDir << " not present";
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(kTraceDir)) {
    if (e.path().extension() == ".csv") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 2u);
  int node_files = 0, pod_files = 0;
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    const int64_t rows = CountLines(f) - 1;
    if (f.find("node_list") != std::string::npos) {
      auto r = ReadNodesCsv(f);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(static_cast<int64_t>(r->size()), rows);
      ++node_files;
    } else {
      auto r = ReadPodsCsv(f);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(static_cast<int64_t>(r->size()), rows);
      ++pod_files;
    }
  }
  EXPECT_GE(node_files, 1);
  EXPECT_GE(pod_files, 1);
}

// Figures from the trace's README.
TEST(RealTraceTest, DefaultFilesMatchPublishedSummary) {
  const std::string nodes_path = kTraceDir + "/openb_node_list_gpu_node.csv";
  const std::string pods_path = kTraceDir + "/openb_pod_list_default.csv";
  if (!std::filesystem::exists(nodes_path) || !std::filesystem::exists(pods_path))
    GTEST_SKIP() << "default trace not present";
  auto nodes = ReadNodesCsv(nodes_path);
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  EXPECT_EQ(nodes->size(), 1213u);
  int64_t gpus = 0, cpu = 0, g2_gpus = 0;
  for (const NodeSpec& n : *nodes) {
    gpus += n.gpu_count;
    cpu += n.cpu.v;
    if (n.model == Model("G2")) g2_gpus += n.gpu_count;
  }
  EXPECT_EQ(gpus, 6212);
  EXPECT_EQ(cpu, 107018 * 1000);
  EXPECT_EQ(g2_gpus, 4392);

  auto pods = ReadPodsCsv(pods_path);
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  EXPECT_EQ(pods->size(), 8152u);
  int cpu_only = 0, share = 0, one = 0, multi = 0;
  int64_t milli = 0;
  for (const Workload& w : *pods) {
    const Demand& d = w.demand;
    cpu_only += d.IsCpuOnly();
    share += d.IsShare();
    one += d.num_gpu == 1 && d.gpu_milli == 1000;
    multi += d.num_gpu > 1;
    milli += d.TotalMilliGpu();
  }
  EXPECT_EQ(cpu_only, 1088);
  EXPECT_EQ(share, 3078);
  EXPECT_EQ(one, 3911);
  EXPECT_EQ(multi, 75);
  EXPECT_NEAR(static_cast<double>(milli) / 1000.0, 6086.8, 0.05);
}

}  // namespace
}  // namespace tessera
