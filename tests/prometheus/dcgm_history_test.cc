// DcgmToHistory: DCGM range-query results into the advisor's usage model.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "advisor/prometheus.h"
#include "apps/tessera/advise_prometheus.h"

namespace tessera {
namespace {

using advisor::ParsePrometheusRange;
using advisor::PromRange;

// A query_range response with one series per (labels, values) pair.
std::string Response(const std::vector<std::pair<std::string, std::string>>& series) {
  std::string out = R"({"status":"success","data":{"resultType":"matrix","result":[)";
  for (size_t i = 0; i < series.size(); ++i) {
    if (i) out += ",";
    out += R"({"metric":{)" + series[i].first + R"(},"values":)" + series[i].second + "}";
  }
  return out + "]}}";
}

PromRange Parse(const std::string& name,
                const std::vector<std::pair<std::string, std::string>>& series) {
  auto r = ParsePrometheusRange(Response(series), "test", name);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : PromRange{};
}

const std::string kWhole =
    R"("Hostname":"n1","gpu":"0","UUID":"GPU-a","modelName":"NVIDIA A100-SXM4-80GB",)"
    R"("namespace":"ml","pod":"infer-0")";
const std::string kMig =
    R"("hostname":"n2","gpu":"0","UUID":"GPU-b","modelName":"NVIDIA A100-SXM4-80GB",)"
    R"("GPU_I_PROFILE":"3g.40gb","GPU_I_ID":"1","namespace":"dev","pod":"nb-0")";
const std::string kFree =
    R"("Hostname":"n1","gpu":"1","UUID":"GPU-c","modelName":"NVIDIA A100-SXM4-80GB")";

TEST(DcgmHistory, WholeGpuAndMigInstance) {
  const std::vector<PromRange> ranges = {
      Parse("DCGM_FI_DEV_FB_USED", {{kWhole, R"([[100,"7000"],[400,"7100"],[700,"7200"]])"},
                                    {kMig, R"([[100,"4000"],[400,"4100"]])"},
                                    {kFree, R"([[100,"0"]])"}}),
      // GPU_UTIL and SM_ACTIVE on the whole GPU: SM_ACTIVE wins.
      Parse("DCGM_FI_DEV_GPU_UTIL",
            {{kWhole, R"([[100,"90"],[400,"90"],[700,"90"]])"}, {kFree, R"([[100,"0"]])"}}),
      Parse("DCGM_FI_PROF_SM_ACTIVE", {{kWhole, R"([[100,"0.2"],[400,"NaN"],[700,"0.3"]])"}}),
      Parse("DCGM_FI_PROF_GR_ENGINE_ACTIVE", {{kMig, R"([[100,"0.7"],[400,"0.35"]])"}}),
  };
  auto h = DcgmToHistory(ranges, "prom");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->skipped_non_finite, 1);
  EXPECT_EQ(h->unmatched_samples, 1);  // t=400 of infer-0: memory without compute
  EXPECT_EQ(h->unattributed_series, 2);
  ASSERT_EQ(h->history.workloads.size(), 2u);
  const auto& w = h->history.workloads[0];
  EXPECT_EQ(w.Key(), "ml/Pod/infer-0");
  EXPECT_EQ(w.gpu_model, "A100-80GB");
  EXPECT_EQ(w.request.whole_gpus, 1);
  ASSERT_EQ(w.pods.size(), 1u);
  ASSERT_EQ(w.pods[0].samples.size(), 2u);
  EXPECT_EQ(w.pods[0].samples[1].t_s, 700);
  EXPECT_DOUBLE_EQ(w.pods[0].samples[1].memory_mib, 7200);
  EXPECT_DOUBLE_EQ(w.pods[0].samples[1].sm_active, 0.3);
  const auto& m = h->history.workloads[1];
  EXPECT_EQ(m.Key(), "dev/Pod/nb-0");
  EXPECT_EQ(m.request.mig_profile, "3g.40gb");
  EXPECT_EQ(m.request.whole_gpus, 0);
  ASSERT_EQ(m.pods.size(), 1u);
  ASSERT_EQ(m.pods[0].samples.size(), 2u);
  EXPECT_NEAR(m.pods[0].samples[0].sm_active, 0.7 * 3 / 7, 1e-9);  // a 3g instance of 7 slices
  EXPECT_FALSE(m.pods[0].shared_device);
}

TEST(DcgmHistory, PodsReadOnOneGpuAreShared) {
  const std::string a = R"("Hostname":"n1","gpu":"0","UUID":"GPU-a",)"
                        R"("modelName":"Tesla T4","namespace":"ml","pod":"a")";
  const std::string b = R"("Hostname":"n1","gpu":"0","UUID":"GPU-a",)"
                        R"("modelName":"Tesla T4","namespace":"ml","pod":"b")";
  const std::vector<PromRange> ranges = {
      Parse("DCGM_FI_DEV_FB_USED", {{a, R"([[100,"1000"]])"}, {b, R"([[100,"1000"]])"}}),
      Parse("DCGM_FI_DEV_GPU_UTIL", {{a, R"([[100,"50"]])"}, {b, R"([[100,"50"]])"}}),
  };
  auto h = DcgmToHistory(ranges, "prom");
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_EQ(h->history.workloads.size(), 2u);
  EXPECT_EQ(h->history.workloads[0].gpu_model, "T4");
  EXPECT_TRUE(h->history.workloads[0].AttributionImpossible());
  EXPECT_TRUE(h->history.workloads[1].AttributionImpossible());
}

TEST(DcgmHistory, Errors) {
  const auto memory = Parse("DCGM_FI_DEV_FB_USED", {{kWhole, R"([[100,"1000"]])"}});
  const auto compute = Parse("DCGM_FI_DEV_GPU_UTIL", {{kWhole, R"([[100,"10"]])"}});
  struct Case {
    std::vector<PromRange> ranges;
    std::string want;
  };
  const std::string unknown = R"("Hostname":"n1","gpu":"0","UUID":"GPU-z",)"
                              R"("modelName":"NVIDIA Z9000","namespace":"ml","pod":"z")";
  const std::string bad_profile =
      R"("Hostname":"n1","gpu":"0","UUID":"GPU-y","modelName":"NVIDIA A100-SXM4-80GB",)"
      R"("GPU_I_PROFILE":"5g.50gb","GPU_I_ID":"1","namespace":"ml","pod":"y")";
  const std::vector<Case> cases = {
      {{Parse("DCGM_FI_DEV_FB_USED", {{kFree, R"([[100,"0"]])"}}), compute},
       "no DCGM_FI_DEV_FB_USED series held by a pod"},
      {{memory}, "no pod has both memory and compute"},
      {{memory, memory, compute}, "two DCGM_FI_DEV_FB_USED series for pod ml/infer-0"},
      {{Parse("DCGM_FI_DEV_FB_USED", {{unknown, R"([[100,"1"]])"}}),
        Parse("DCGM_FI_DEV_GPU_UTIL", {{unknown, R"([[100,"1"]])"}})},
       "modelName: unknown GPU product"},
      {{Parse("DCGM_FI_DEV_FB_USED", {{bad_profile, R"([[100,"1"]])"}}),
        Parse("DCGM_FI_PROF_GR_ENGINE_ACTIVE", {{bad_profile, R"([[100,"0.1"]])"}})},
       "MIG profile '5g.50gb' is not one of A100-80GB"},
  };
  for (const Case& c : cases) {
    auto h = DcgmToHistory(c.ranges, "prom");
    ASSERT_FALSE(h.ok()) << c.want;
    EXPECT_NE(h.status().message().find(c.want), std::string::npos) << h.status().message();
    EXPECT_EQ(h.status().message().rfind("prom: ", 0), 0u) << h.status().message();
  }
}

TEST(DcgmHistory, FetchRejectsBadUrls) {
  for (const char* url : {"ftp://x", "localhost:9090", "http://"}) {
    PrometheusQuery q;
    q.url = url;
    q.start_s = 0;
    q.end_s = 600;
    auto h = FetchDcgmHistory(q);
    ASSERT_FALSE(h.ok()) << url;
    EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument) << h.status().message();
  }
}

}  // namespace
}  // namespace tessera
