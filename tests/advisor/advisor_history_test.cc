// The history CSV reader: exact error messages with positions, series grouping, shared-GPU
// attribution, the writer's round trip, and the price table.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "advisor/config.h"
#include "advisor/numbers.h"
#include "advisor/usage.h"

namespace tessera::advisor {
namespace {

const std::string kHeader = std::string(kHistoryHeader) + "\n";
// Column of memory_used_mib in kRow is 57, of sm_active 62.
const std::string kRow = "1000,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,1,0,0,,1024,0.5\n";

struct ErrorCase {
  const char* name;
  std::string body;  // after the header (the header itself when header_too)
  bool header_too;
  std::string message;  // exact, or a prefix when it ends in "..."
};

TEST(HistoryCsv, ErrorsNameTheField) {
  const std::vector<ErrorCase> cases = {
      {"empty", "", true, "h.csv:1:1: empty file: expected the header"},
      {"header", "timestamp,namespace\n", true,
       "h.csv:1:1: header: expected 'timestamp_s', found 'timestamp'"},
      {"header short", "timestamp_s,namespace\n", true,
       "h.csv:1:22: header: missing column 'owner_kind'"},
      {"no rows", "", false, "h.csv:2:1: no samples after the header"},
      {"nan memory", "1000,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,1,0,0,,NaN,0.5\n", false,
       "h.csv:2:57: column 'memory_used_mib': NaN is not a valid value"},
      {"inf sm", "1000,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,1,0,0,,1024,+Inf\n", false,
       "h.csv:2:62: column 'sm_active': an infinity is not a valid value"},
      {"negative memory", "1000,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,1,0,0,,-5,0.5\n", false,
       "h.csv:2:57: column 'memory_used_mib': -5 outside the allowed range 0..81920"},
      {"memory above the GPU",
       "1000,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,1,0,0,,90000,0.5\n", false,
       "h.csv:2:57: column 'memory_used_mib': 90000 outside the allowed range 0..81920"},
      {"sm above one", "1000,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,1,0,0,,1024,1.5\n", false,
       "h.csv:2:62: column 'sm_active': 1.5 outside the allowed range 0..1"},
      {"not a number", "1000,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,1,0,0,,12a,0.5\n", false,
       "h.csv:2:57: column 'memory_used_mib': '12a' is not a number"},
      {"not monotonic", kRow + kRow, false,
       "h.csv:3:1: column 'timestamp_s': 1000 is not after the previous sample (1000) of pod "
       "svc-1"},
      {"going back", kRow + "999,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,1,0,0,,1024,0.5\n",
       false,
       "h.csv:3:1: column 'timestamp_s': 999 is not after the previous sample (1000) of pod svc-1"},
      {"fractional time", "10.5,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,1,0,0,,1024,0.5\n",
       false, "h.csv:2:1: column 'timestamp_s': '10.5' is not an integer"},
      {"unknown model", "1000,ns,Deployment,svc,svc-1,A200,gpu-0,pod,1,0,0,,1024,0.5\n", false,
       "h.csv:2:30: column 'gpu_model': unknown GPU model 'A200' (known: T4, L4, ..."},
      {"owner kind", "1000,ns,ReplicaSet,svc,svc-1,A100-80GB,gpu-0,pod,1,0,0,,1024,0.5\n", false,
       "h.csv:2:9: column 'owner_kind': 'ReplicaSet' is not an owner kind (Deployment, "
       "StatefulSet, Job, JobSet, WorkloadGroup, Pod)"},
      {"source", "1000,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,dcgm,1,0,0,,1024,0.5\n", false,
       "h.csv:2:46: column 'source': 'dcgm' is not a source (pod, device)"},
      {"field count", "1000,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,1,0,0,,1024\n", false,
       "h.csv:2:61: expected 14 fields, found 13"},
      {"quotes", "1000,\"ns\",Deployment,svc,svc-1,A100-80GB,gpu-0,pod,1,0,0,,1024,0.5\n", false,
       "h.csv:2:6: quotes are not supported"},
      {"mig profile of another model",
       "1000,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,0,0,0,1g.5gb,1024,0.5\n", false,
       "h.csv:2:56: column 'requested_mig_profile': '1g.5gb' is not a MIG profile of A100-80GB"},
      {"whole and memory", "1000,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,1,4096,0,,1024,0.5\n",
       false,
       "h.csv:2:50: column 'requested_gpus': whole GPUs exclude a memory, compute or MIG request"},
      {"no request", "1000,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,0,0,0,,1024,0.5\n", false,
       "h.csv:2:50: column 'requested_gpus': no request: give whole GPUs, memory or a MIG "
       "profile"},
      {"request changes",
       kRow + "1300,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,2,0,0,,1024,0.5\n", false,
       "h.csv:3:50: column 'requested_gpus': request of owner ns/Deployment/svc differs from its "
       "first row (line 2)"},
      {"device without gpu", "1000,ns,Deployment,svc,svc-1,A100-80GB,,device,1,0,0,,1024,0.5\n",
       false, "h.csv:2:40: column 'gpu': empty value: a device reading names its GPU"},
      {"pod of two owners", kRow + "1300,ns,Job,other,svc-1,A100-80GB,gpu-0,pod,1,0,0,,1024,0.5\n",
       false, "h.csv:3:19: column 'pod': pod ns/svc-1 already belongs to owner ns/Deployment/svc"},
  };
  for (const ErrorCase& c : cases) {
    const std::string text = c.header_too ? c.body : kHeader + c.body;
    auto h = ParseHistoryCsv(text, "h.csv");
    ASSERT_FALSE(h.ok()) << c.name;
    EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument) << c.name;
    const std::string& m = h.status().message();
    if (c.message.size() > 3 && c.message.compare(c.message.size() - 3, 3, "...") == 0) {
      EXPECT_EQ(m.substr(0, c.message.size() - 3), c.message.substr(0, c.message.size() - 3))
          << c.name;
    } else {
      EXPECT_EQ(m, c.message) << c.name;
    }
  }
}

TEST(HistoryCsv, GroupsPodsByOwnerAndKeepsSeriesApart) {
  const std::string text = kHeader +
                           "1000,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,1,0,0,,1024,0.5\r\n"
                           "1000,ns,Deployment,svc,svc-2,A100-80GB,gpu-1,pod,1,0,0,,2048,0.25\n"
                           "\n"
                           "1300,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,1,0,0,,1100,0.5\n"
                           "1300,ns,Job,train,train-0,H100-80GB,gpu-9,pod,2,0,0,,50000,0.9\n";
  auto h = ParseHistoryCsv(text, "h.csv");
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_EQ(h->workloads.size(), 2u);
  const WorkloadUsage& svc = h->workloads[0];
  EXPECT_EQ(svc.Key(), "ns/Deployment/svc");
  ASSERT_EQ(svc.pods.size(), 2u);
  EXPECT_EQ(svc.pods[0].samples.size(), 2u);
  EXPECT_EQ(svc.pods[1].samples.size(), 1u);
  EXPECT_DOUBLE_EQ(svc.pods[1].samples[0].sm_active, 0.25);
  EXPECT_EQ(svc.FirstT(), 1000);
  EXPECT_EQ(svc.LastT(), 1300);
  EXPECT_EQ(h->workloads[1].request.whole_gpus, 2);
  EXPECT_FALSE(svc.AttributionImpossible());
}

TEST(HistoryCsv, DeviceReadingsOfOneGpuByTwoPodsCannotBeAttributed) {
  const std::string row_a = "1000,ns,Pod,nb-a,nb-a,T4,node1/0,device,0,6144,0,,3000,0.4\n";
  const std::string row_b = "1000,ns,Pod,nb-b,nb-b,T4,node1/0,device,0,6144,0,,3000,0.4\n";
  const std::string row_c = "1000,ns,Pod,nb-c,nb-c,T4,node1/1,device,0,6144,0,,3000,0.4\n";
  auto h = ParseHistoryCsv(kHeader + row_a + row_b + row_c, "h.csv");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_TRUE(h->workloads[0].AttributionImpossible());
  EXPECT_TRUE(h->workloads[1].AttributionImpossible());
  EXPECT_FALSE(h->workloads[2].AttributionImpossible());
  // The same two pods read per pod (the node agent) are attributable.
  std::string a = row_a, b = row_b;
  a.replace(a.find("device"), 6, "pod");
  b.replace(b.find("device"), 6, "pod");
  auto per_pod = ParseHistoryCsv(kHeader + a + b, "h.csv");
  ASSERT_TRUE(per_pod.ok());
  EXPECT_FALSE(per_pod->workloads[0].AttributionImpossible());
}

TEST(HistoryCsv, WriterRoundTrips) {
  const std::string text = kHeader +
                           "1000,ns,Job,mig,mig-0,A100-40GB,gpu-3,device,0,0,0,1g.5gb,12,0\n"
                           "1000,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,0,8192,0.25,,1024.5,"
                           "0.123456\n"
                           "1300,ns,Deployment,svc,svc-1,A100-80GB,gpu-0,pod,0,8192,0.25,,1100,1\n";
  auto h = ParseHistoryCsv(text, "h.csv");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(HistoryCsv(*h), text);
}

TEST(Numbers, PercentileNearestRank) {
  struct Case {
    std::vector<double> v;
    double q, want;
  };
  const std::vector<Case> cases = {
      {{}, 0.5, 0},
      {{7}, 0.99, 7},
      {{1, 2, 3, 4}, 0.5, 2},
      {{4, 3, 2, 1}, 0.75, 3},
      {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.95, 10},
      {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.9, 9},
      {{5, 1, 3}, 0.0, 1},
      {{5, 1, 3}, 1.0, 5},
  };
  for (const Case& c : cases) {
    std::vector<double> v = c.v;
    EXPECT_DOUBLE_EQ(Percentile(v, c.q), c.want) << c.q;
  }
}

TEST(Numbers, TheilSenIgnoresAnOutlierAndReportsAgreement) {
  double agreement = 0;
  EXPECT_DOUBLE_EQ(TheilSenSlope({0, 1, 2, 3, 4}, {1, 3, 5, 100, 9}, &agreement), 2.0);
  EXPECT_GE(agreement, 0.7);
  EXPECT_DOUBLE_EQ(TheilSenSlope({0, 1, 2, 3}, {5, 4, 4, 5}, &agreement), 0.0);
  EXPECT_DOUBLE_EQ(agreement, 0.0);
  EXPECT_DOUBLE_EQ(TheilSenSlope({1}, {1}), 0.0);
}

TEST(Numbers, StrictDecimals) {
  EXPECT_EQ(ParseStrictDecimal("nan").status().message(), "NaN is not a valid value");
  EXPECT_EQ(ParseStrictDecimal("-Infinity").status().message(), "an infinity is not a valid value");
  EXPECT_EQ(ParseStrictDecimal(" 1").status().message(), "' 1' is not a number");
  EXPECT_EQ(ParseStrictDecimal("1e999").status().message(), "'1e999' is out of range");
  EXPECT_DOUBLE_EQ(*ParseStrictDecimal("-2.5e1"), -25);
  EXPECT_EQ(FormatDecimal(1.5000, 3), "1.5");
  EXPECT_EQ(FormatDecimal(-0.0001, 2), "0");
}

TEST(PriceTable, ErrorsAndLookup) {
  struct Case {
    std::string text, message;
  };
  const std::vector<Case> cases = {
      {"", "p.csv:1:1: empty file: expected the header 'gpu_model,usd_per_hour'"},
      {"model,price\nT4,1\n", "p.csv:1:1: expected the header 'gpu_model,usd_per_hour'"},
      {"gpu_model,usd_per_hour\n", "p.csv:2:1: no prices after the header"},
      {"gpu_model,usd_per_hour\nT4,0.35\nA200,2\n",
       "p.csv:3:1: unknown GPU model 'A200' (known: T4, L4, A10, A10G, P100, V100M16, V100M32, "
       "A30, A100-40GB, A100-80GB, H100-80GB, H200, B200, G1, G2, G3, H100-94GB, H100-96GB, "
       "GH200-144GB, GB200, B300, GB300, RTX-PRO-6000)"},
      {"gpu_model,usd_per_hour\nT4,0.35\nT4,0.4\n", "p.csv:3:1: GPU model T4 given twice"},
      {"gpu_model,usd_per_hour\nT4,-1\n", "p.csv:2:4: column 'usd_per_hour': -1 outside (0, 1000]"},
      {"gpu_model,usd_per_hour\nT4,NaN\n",
       "p.csv:2:4: column 'usd_per_hour': NaN is not a valid value"},
      {"gpu_model,usd_per_hour\nT4\n", "p.csv:2:1: expected 2 fields: gpu_model,usd_per_hour"},
  };
  for (const Case& c : cases) {
    auto t = ParsePriceTable(c.text, "p.csv");
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_EQ(t.status().message(), c.message);
  }
  auto ok = ParsePriceTable("gpu_model,usd_per_hour\nT4,0.35\nA100-80GB,4.1\n", "p.csv");
  ASSERT_TRUE(ok.ok());
  EXPECT_DOUBLE_EQ(*ok->Price("A100-80GB"), 4.1);
  EXPECT_EQ(ok->Price("L4").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ok->Price("L4").status().message(), "no price for GPU model 'L4' in the price table");
}

TEST(AdvisorConfig, ValidationNamesTheField) {
  AdvisorConfig c;
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.memory_headroom = -0.1;
  EXPECT_EQ(ValidateConfig(c).message(), "advisor config: memory_headroom = -0.1 outside 0..1");
  c = AdvisorConfig{};
  c.compute_quantile = 0.2;
  EXPECT_EQ(ValidateConfig(c).message(), "advisor config: compute_quantile = 0.2 outside 0.5..1");
}

}  // namespace
}  // namespace tessera::advisor
