// The Prometheus range-query reader: DCGM label spellings, MIG labels, exported_* labels, NaN
// and infinite samples, unit conversion and exact errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "advisor/prometheus.h"

namespace tessera::advisor {
namespace {

std::string Matrix(const std::string& results) {
  return R"({"status":"success","data":{"resultType":"matrix","result":[)" + results + "]}}";
}

TEST(Prometheus, BothHostnameSpellingsAndMigLabels) {
  const std::string text =
      Matrix(R"({"metric":{"__name__":"DCGM_FI_DEV_FB_USED","Hostname":"node-a","gpu":"0",)"
             R"("UUID":"GPU-1","modelName":"NVIDIA A100-SXM4-80GB","pod":"p1","namespace":"ns",)"
             R"("container":"c"},"values":[[1700000000,"1024"],[1700000060.5,"2048"]]},)"
             R"({"metric":{"__name__":"DCGM_FI_PROF_SM_ACTIVE","hostname":"node-b","gpu":"1",)"
             R"("UUID":"GPU-2","GPU_I_PROFILE":"1g.10gb","GPU_I_ID":"7"},)"
             R"("values":[[1700000000,"0.25"]]})");
  auto r = ParsePrometheusRange(text, "q.json");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->series.size(), 2u);
  const PromSeries& a = r->series[0];
  EXPECT_EQ(a.field, DcgmField::kFbUsedMib);
  EXPECT_EQ(a.hostname, "node-a");
  EXPECT_EQ(a.gpu, "0");
  EXPECT_EQ(a.uuid, "GPU-1");
  EXPECT_EQ(a.model_name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(a.pod, "p1");
  EXPECT_EQ(a.ns, "ns");
  EXPECT_EQ(a.container, "c");
  ASSERT_EQ(a.samples.size(), 2u);
  EXPECT_DOUBLE_EQ(a.samples[1].t_s, 1700000060.5);
  EXPECT_DOUBLE_EQ(a.samples[1].value, 2048);
  const PromSeries& b = r->series[1];
  EXPECT_EQ(b.field, DcgmField::kSmActive);
  EXPECT_EQ(b.hostname, "node-b");
  EXPECT_EQ(b.mig_profile, "1g.10gb");
  EXPECT_EQ(b.mig_instance, "7");
  EXPECT_TRUE(b.pod.empty());
}

TEST(Prometheus, NonFiniteSamplesAreSkippedAndCounted) {
  const std::string text =
      Matrix(R"({"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","Hostname":"n","gpu":"0"},)"
             R"("values":[[1,"NaN"],[2,"50"],[3,"+Inf"],[4,"-Inf"],[5,"100"]]},)"
             R"({"metric":{"__name__":"DCGM_FI_PROF_GR_ENGINE_ACTIVE","Hostname":"n","gpu":"1"},)"
             R"("values":[[1,"NaN"]]})");
  auto r = ParsePrometheusRange(text, "q.json");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->skipped_non_finite, 4);
  EXPECT_EQ(r->series[0].skipped_non_finite, 3);
  EXPECT_EQ(r->series[1].skipped_non_finite, 1);
  ASSERT_EQ(r->series[0].samples.size(), 2u);
  EXPECT_DOUBLE_EQ(r->series[0].samples[0].value, 0.5);  // percent -> ratio
  EXPECT_DOUBLE_EQ(r->series[0].samples[1].value, 1.0);
  EXPECT_TRUE(r->series[1].samples.empty());
}

TEST(Prometheus, ExportedLabelsWinOverTheTargetsOwn) {
  const std::string text = Matrix(
      R"({"metric":{"__name__":"DCGM_FI_DEV_FB_USED","Hostname":"n","pod":"dcgm-exporter-x",)"
      R"("namespace":"gpu-operator","exported_pod":"train-0","exported_namespace":"ml",)"
      R"("exported_container":"main"},"values":[[1,"10"]]})");
  auto r = ParsePrometheusRange(text, "q.json");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->series[0].pod, "train-0");
  EXPECT_EQ(r->series[0].ns, "ml");
  EXPECT_EQ(r->series[0].container, "main");
}

TEST(Prometheus, MetricNameFromTheCaller) {
  const std::string text = Matrix(R"({"metric":{"UUID":"GPU-9"},"values":[[1,"3"]]})");
  EXPECT_EQ(ParsePrometheusRange(text, "q.json").status().message(),
            "q.json: data.result[0].metric: no __name__ label and no metric name given");
  auto r = ParsePrometheusRange(text, "q.json", "DCGM_FI_DEV_FB_USED");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->series[0].uuid, "GPU-9");
}

TEST(Prometheus, TesseraSeries) {
  const std::string text = Matrix(
      R"({"metric":{"__name__":"tessera_agent_pod_gpu_memory_used_bytes","node":"n1","gpu":"2",)"
      R"("gpu_uuid":"GPU-9","mig_instance":"3g.40gb@4","namespace":"ml","pod":"p",)"
      R"("container":"c","model":"ignored"},"values":[[10,"1073741824"]]},)"
      R"({"metric":{"__name__":"tessera_pod_allocated_gpus","namespace":"ml","pod":"p",)"
      R"("queue":"team-a","model":"A100-80GB","kind":"mig","Hostname":"x"},)"
      R"("values":[[10,"0.428571"]]},)"
      R"({"metric":{"__name__":"tessera_gpu_allocated_ratio"},"values":[[10,"0.75"]]})");
  auto r = ParsePrometheusRange(text, "q.json");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->series.size(), 3u);
  const PromSeries& a = r->series[0];
  EXPECT_EQ(a.field, DcgmField::kAgentPodMemoryMib);
  EXPECT_EQ(a.hostname, "n1");
  EXPECT_EQ(a.gpu, "2");
  EXPECT_EQ(a.uuid, "GPU-9");
  EXPECT_EQ(a.mig_profile, "3g.40gb");
  EXPECT_EQ(a.mig_instance, "3g.40gb@4");
  EXPECT_EQ(a.model_name, "");
  EXPECT_EQ(a.pod, "p");
  EXPECT_DOUBLE_EQ(a.samples.at(0).value, 1024);
  const PromSeries& b = r->series[1];
  EXPECT_EQ(b.field, DcgmField::kPodAllocatedGpus);
  EXPECT_EQ(b.queue, "team-a");
  EXPECT_EQ(b.model_name, "A100-80GB");
  EXPECT_EQ(b.kind, "mig");
  EXPECT_EQ(b.hostname, "");  // DCGM's label is not read on the scheduler's series
  EXPECT_DOUBLE_EQ(b.samples.at(0).value, 0.428571);
  EXPECT_EQ(r->series[2].field, DcgmField::kAllocatedRatio);
  EXPECT_DOUBLE_EQ(r->series[2].samples.at(0).value, 0.75);
}

TEST(Prometheus, Errors) {
  struct Case {
    std::string text, message;
  };
  const std::string fb = R"("__name__":"DCGM_FI_DEV_FB_USED")";
  const std::vector<Case> cases = {
      {"{\"status\":", "q.json:11: JSON syntax error"},
      {"[]", "q.json: $: expected an object"},
      {R"({"status":"success","x":1e999})", "q.json: a JSON number is out of range"},
      {R"({"status":"error","errorType":"bad_data","error":"invalid query"})",
       "q.json: Prometheus error bad_data: 'invalid query'"},
      {R"({"status":"success","data":{"resultType":"vector","result":[]}})",
       "q.json: data.resultType: 'vector' is not \"matrix\" (use /api/v1/query_range)"},
      {R"({"status":"success"})", "q.json: data: missing or not an object"},
      {Matrix(R"({"metric":{"__name__":"node_load1","Hostname":"n"},"values":[]})"),
       "q.json: data.result[0].metric: unsupported series 'node_load1' (DCGM_FI_DEV_FB_USED, "
       "DCGM_FI_PROF_SM_ACTIVE, DCGM_FI_PROF_GR_ENGINE_ACTIVE, DCGM_FI_DEV_GPU_UTIL, "
       "tessera_agent_pod_gpu_memory_used_bytes, tessera_pod_allocated_gpus, "
       "tessera_gpu_allocated_ratio)"},
      {Matrix(R"({"metric":{"__name__":"tessera_pod_allocated_gpus","pod":"p"},)"
              R"("values":[[1,"1"]]})"),
       "q.json: data.result[0].metric: no pod or model label"},
      {Matrix(R"({"metric":{"__name__":"tessera_pod_allocated_gpus","pod":"p","model":"T4"},)"
              R"("values":[[1,"2000"]]})"),
       "q.json: data.result[0].values[0][1]: 2000 outside 0..1024 for "
       "tessera_pod_allocated_gpus"},
      {Matrix(R"({"metric":{"__name__":"tessera_gpu_allocated_ratio"},"values":[[1,"1.5"]]})"),
       "q.json: data.result[0].values[0][1]: 1.5 outside 0..1 for tessera_gpu_allocated_ratio"},
      {Matrix(R"({"metric":{)" + fb + R"(,"Hostname":"a","hostname":"b"},"values":[]})"),
       "q.json: data.result[0].metric: Hostname 'a' and hostname 'b' disagree"},
      {Matrix(R"({"metric":{)" + fb + R"(},"values":[]})"),
       "q.json: data.result[0].metric: neither Hostname/hostname nor UUID: the GPU cannot be "
       "identified"},
      {Matrix(R"({"metric":{)" + fb + R"(,"UUID":"g"},"value":[1,"2"]})"),
       "q.json: data.result[0].values: missing or not an array (a range query gives "
       "\"values\")"},
      {Matrix(R"({"metric":{)" + fb + R"(,"UUID":"g"},"values":[[1,"2"],[2,"x"]]})"),
       "q.json: data.result[0].values[1][1]: 'x' is not a number"},
      {Matrix(R"({"metric":{)" + fb + R"(,"UUID":"g"},"values":[[1,2]]})"),
       "q.json: data.result[0].values[0][1]: sample value is not a string"},
      {Matrix(R"({"metric":{)" + fb + R"(,"UUID":"g"},"values":[[2,"1"],[2,"1"]]})"),
       "q.json: data.result[0].values[1][0]: timestamp 2 is not after the previous sample"},
      {Matrix(R"({"metric":{)" + fb + R"(,"UUID":"g"},"values":[[1,"-3"]]})"),
       "q.json: data.result[0].values[0][1]: -3 outside 0..16777216 for DCGM_FI_DEV_FB_USED"},
      {Matrix(R"({"metric":{"__name__":"DCGM_FI_PROF_SM_ACTIVE","UUID":"g"},)"
              R"("values":[[1,"1.5"]]})"),
       "q.json: data.result[0].values[0][1]: 1.5 outside 0..1 for DCGM_FI_PROF_SM_ACTIVE"},
      {Matrix(R"({"metric":{)" + fb + R"(,"UUID":7},"values":[]})"),
       "q.json: data.result[0].metric.UUID: label value is not a string"},
  };
  for (const Case& c : cases) {
    auto r = ParsePrometheusRange(c.text, "q.json");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().message(), c.message) << c.text;
  }
  EXPECT_EQ(ParsePrometheusRange(R"({"status":"error"})", "q.json").status().code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tessera::advisor
