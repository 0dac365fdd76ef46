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

// The node agent's per-pod memory (bytes): labels node, gpu, gpu_uuid, mig_instance.
std::string AgentLabels(const std::string& uuid, const std::string& ns, const std::string& pod,
                        const std::string& mig = "") {
  return R"("node":"n1","gpu":"0","gpu_uuid":")" + uuid + R"(","mig_instance":")" + mig +
         R"(","namespace":")" + ns + R"(","pod":")" + pod + R"(","container":"main")";
}

TEST(DcgmHistory, AgentSeriesAttributePodsDcgmCannot) {
  // DCGM without the Kubernetes mapping: no pod labels. The agent names the pods.
  const std::string dev_a =
      R"("Hostname":"n1","gpu":"0","UUID":"GPU-a","modelName":"NVIDIA A100-SXM4-80GB")";
  const std::string dev_b =
      R"("Hostname":"n1","gpu":"1","UUID":"GPU-b","modelName":"NVIDIA A100-SXM4-80GB",)"
      R"("GPU_I_PROFILE":"3g.40gb","GPU_I_ID":"2")";
  const std::string dev_c =
      R"("Hostname":"n1","gpu":"2","UUID":"GPU-c","modelName":"NVIDIA A100-SXM4-80GB")";
  struct Case {
    std::string name;
    std::vector<std::pair<std::string, std::string>> agent;
    std::string pod;      // workload to check
    double memory_mib;    // its first memory sample
    double compute;       // its first compute sample
    std::string profile;  // its request's MIG profile
    bool shared;          // attribution impossible
    int64_t unmatched;    // samples without a device match
  };
  const std::string one_gib = R"([[100,"1073741824"],[400,"1073741824"]])";
  // clang-format off
  const std::vector<Case> cases = {
      {"alone on a whole GPU",
       {{AgentLabels("GPU-a", "ml", "solo"), R"([[100,"2147483648"],[400,"3221225472"]])"}},
       "solo", 2048, 0.4, "", false, 0},
      {"alone on a MIG instance (compute scaled by 3 of 7 slices)",
       {{AgentLabels("GPU-b", "dev", "nb", "3g.40gb@4"), R"([[100,"1073741824"]])"}},
       "nb", 1024, 0.7 * 3 / 7, "3g.40gb", false, 0},
      {"two pods time-sliced on one GPU: memory per pod, compute only per GPU",
       {{AgentLabels("GPU-a", "ml", "x"), one_gib},
        {AgentLabels("GPU-a", "ml", "y"), R"([[100,"2147483648"],[400,"1073741824"]])"}},
       "y", 2048, 0.4, "", true, 0},
      {"a GPU DCGM has no compute for",
       {{AgentLabels("GPU-c", "ml", "lost"), R"([[100,"1073741824"]])"},
        {AgentLabels("GPU-a", "ml", "solo"), one_gib}},
       "solo", 1024, 0.4, "", false, 1},
  };
  // clang-format on
  for (const Case& c : cases) {
    const std::vector<PromRange> ranges = {
        Parse("DCGM_FI_DEV_FB_USED", {{dev_a, R"([[100,"9000"],[400,"9000"]])"},
                                      {dev_b, R"([[100,"5000"]])"},
                                      {dev_c, R"([[100,"5000"]])"}}),
        Parse("DCGM_FI_PROF_SM_ACTIVE", {{dev_a, R"([[100,"0.4"],[400,"0.5"]])"}}),
        Parse("DCGM_FI_PROF_GR_ENGINE_ACTIVE", {{dev_b, R"([[100,"0.7"]])"}}),
        Parse("tessera_agent_pod_gpu_memory_used_bytes", c.agent),
    };
    auto h = DcgmToHistory(ranges, "prom");
    ASSERT_TRUE(h.ok()) << c.name << ": " << h.status().message();
    EXPECT_EQ(h->unmatched_samples, c.unmatched) << c.name;
    const advisor::WorkloadUsage* w = nullptr;
    for (const auto& x : h->history.workloads)
      if (x.owner == c.pod) w = &x;
    ASSERT_NE(w, nullptr) << c.name;
    ASSERT_EQ(w->pods.size(), 1u) << c.name;
    const auto& ps = w->pods[0];
    EXPECT_TRUE(ps.memory_per_pod) << c.name;
    ASSERT_FALSE(ps.samples.empty()) << c.name;
    EXPECT_DOUBLE_EQ(ps.samples[0].memory_mib, c.memory_mib) << c.name;
    EXPECT_NEAR(ps.samples[0].sm_active, c.compute, 1e-9) << c.name;
    EXPECT_EQ(w->request.mig_profile, c.profile) << c.name;
    EXPECT_EQ(w->gpu_model, "A100-80GB") << c.name;
    EXPECT_EQ(w->AttributionImpossible(), c.shared) << c.name;
  }
}

TEST(DcgmHistory, AgentMemoryReplacesDcgmsDeviceReading) {
  // DCGM labels the GPU with the pod but reads the whole device (9000 MiB); the agent's
  // per-pod series (1 GiB) wins.
  const std::vector<PromRange> ranges = {
      Parse("DCGM_FI_DEV_FB_USED", {{kWhole, R"([[100,"9000"]])"}}),
      Parse("DCGM_FI_PROF_SM_ACTIVE", {{kWhole, R"([[100,"0.25"]])"}}),
      Parse("tessera_agent_pod_gpu_memory_used_bytes",
            {{AgentLabels("GPU-a", "ml", "infer-0"), R"([[100,"1073741824"]])"}}),
  };
  auto h = DcgmToHistory(ranges, "prom");
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_EQ(h->history.workloads.size(), 1u);
  const auto& ps = h->history.workloads[0].pods.at(0);
  EXPECT_DOUBLE_EQ(ps.samples.at(0).memory_mib, 1024);
  EXPECT_DOUBLE_EQ(ps.samples.at(0).sm_active, 0.25);
  EXPECT_TRUE(ps.memory_per_pod);
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

std::string Vector(const std::vector<std::string>& metrics) {
  std::string out = R"({"status":"success","data":{"resultType":"vector","result":[)";
  for (size_t i = 0; i < metrics.size(); ++i)
    out += (i ? "," : "") + std::string(R"({"metric":{)") + metrics[i] + R"(},"value":[700,"1"]})";
  return out + "]}}";
}

TEST(DcgmHistory, PodsOfOneOwnerAreOneWorkload) {
  auto owners = ParsePodOwners(
      Vector(
          {R"("namespace":"ml","pod":"infer-0","owner_kind":"ReplicaSet","owner_name":"infer-6f9")",
           R"("namespace":"ml","pod":"infer-1","owner_kind":"ReplicaSet","owner_name":"infer-6f9")",
           R"("namespace":"ml","pod":"db-0","owner_kind":"StatefulSet","owner_name":"db")",
           R"("namespace":"ml","pod":"agent-x","owner_kind":"DaemonSet","owner_name":"agent")"}),
      Vector(
          {R"("namespace":"ml","replicaset":"infer-6f9","owner_kind":"Deployment","owner_name":"infer")"}),
      "prom");
  ASSERT_TRUE(owners.ok()) << owners.status().message();
  ASSERT_EQ(owners->size(), 3u);  // the DaemonSet's pod is not grouped
  EXPECT_EQ(owners->at({"ml", "infer-1"}).kind, "Deployment");
  EXPECT_EQ(owners->at({"ml", "infer-1"}).name, "infer");
  EXPECT_EQ(owners->at({"ml", "db-0"}).kind, "StatefulSet");

  auto pod = [](const std::string& name, const std::string& uuid, const std::string& model) {
    return R"("Hostname":"n1","gpu":"0","UUID":")" + uuid + R"(","modelName":")" + model +
           R"(","namespace":"ml","pod":")" + name + R"(")";
  };
  const std::string a = pod("infer-0", "GPU-a", "NVIDIA A100-SXM4-80GB");
  const std::string b = pod("infer-1", "GPU-b", "NVIDIA A100-SXM4-80GB");
  const std::string d = pod("db-0", "GPU-d", "Tesla T4");
  const std::vector<PromRange> ranges = {
      Parse("DCGM_FI_DEV_FB_USED",
            {{a, R"([[100,"1000"]])"}, {b, R"([[100,"2000"]])"}, {d, R"([[100,"3000"]])"}}),
      Parse("DCGM_FI_DEV_GPU_UTIL",
            {{a, R"([[100,"10"]])"}, {b, R"([[100,"20"]])"}, {d, R"([[100,"30"]])"}}),
  };
  auto h = DcgmToHistory(ranges, "prom", *owners);
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_EQ(h->history.workloads.size(), 2u);
  EXPECT_EQ(h->history.workloads[0].Key(), "ml/Deployment/infer");
  EXPECT_EQ(h->history.workloads[0].pods.size(), 2u);
  EXPECT_EQ(h->history.workloads[1].Key(), "ml/StatefulSet/db");
  EXPECT_EQ(h->history.workloads[1].gpu_model, "T4");

  // A replica on another model is judged alone.
  const std::string t4 = pod("infer-1", "GPU-e", "Tesla T4");
  const std::vector<PromRange> mixed = {
      Parse("DCGM_FI_DEV_FB_USED", {{a, R"([[100,"1000"]])"}, {t4, R"([[100,"2000"]])"}}),
      Parse("DCGM_FI_DEV_GPU_UTIL", {{a, R"([[100,"10"]])"}, {t4, R"([[100,"20"]])"}}),
  };
  h = DcgmToHistory(mixed, "prom", *owners);
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_EQ(h->history.workloads.size(), 2u);
  EXPECT_EQ(h->history.workloads[0].Key(), "ml/Deployment/infer");
  EXPECT_EQ(h->history.workloads[1].Key(), "ml/Pod/infer-1");

  auto bad = ParsePodOwners("[]", Vector({}), "prom");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("kube_pod_owner"), std::string::npos);
  auto error = ParsePodOwners(R"({"status":"error","errorType":"bad_data","error":"x"})",
                              Vector({}), "prom");
  ASSERT_FALSE(error.ok());
  EXPECT_EQ(error.status().code(), StatusCode::kUnavailable);
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
