#include "kube/translate.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cluster/gpu_catalog.h"
#include "cluster/mig_geometry.h"

namespace tessera::kube {
namespace {

GpuModelId Model(const char* name) {
  auto id = GpuCatalog::Builtin().Find(name);
  if (!id) ADD_FAILURE() << "model " << name << " missing from the catalog";
  return id.value_or(0);
}

// A pod with one container whose resources.limits are `limits` (and requests `requests`).
Json PodWith(Json limits, Json requests = Json::object(), Json annotations = Json::object()) {
  Json pod = R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "train-0", "namespace": "ml", "uid": "6f1c-0",
                 "creationTimestamp": "2026-01-02T03:04:05Z"},
    "spec": {"schedulerName": "tessera", "priority": 100, "priorityClassName": "high",
             "containers": [{"name": "main", "image": "x"}]},
    "status": {"phase": "Pending"}})"_json;
  Json& res = pod["spec"]["containers"][0]["resources"];
  res = Json::object();
  if (!limits.empty()) res["limits"] = limits;
  if (!requests.empty()) res["requests"] = requests;
  if (!annotations.empty()) pod["metadata"]["annotations"] = annotations;
  return pod;
}

TEST(Quantity, ParsesKubernetesForms) {
  struct Case {
    Json in;
    int64_t milli;
  };
  const std::vector<Case> cases = {
      {"500m", 500},      {"1.5", 1500},    {"2", 2000},
      {4, 4000},          {"1e3", 1000000}, {"1E3", 1000000},
      {"1k", 1000000},    {"1Ki", 1024000}, {"0.1m", 1},
      {"+3", 3000},       {"-250m", -250},  {".5", 500},
      {"5.", 5000},       {"1500n", 1},     {"2u", 1},
      {"1M", 1000000000}, {"1e-3", 1},      {"1.000000000000000000000000000000000000", 1000},
  };
  for (const auto& c : cases) {
    auto v = ParseQuantityMilli(c.in);
    ASSERT_TRUE(v.ok()) << c.in << ": " << v.status().message();
    EXPECT_EQ(*v, c.milli) << c.in;
  }
}

TEST(Quantity, MemoryAndIntegers) {
  EXPECT_EQ(*ParseQuantityMiB(Json("10Gi")), 10240);
  EXPECT_EQ(*ParseQuantityMiB(Json("1.5Gi")), 1536);
  EXPECT_EQ(*ParseQuantityMiB(Json("1G")), 954);  // 10^9 bytes rounded up
  EXPECT_EQ(*ParseQuantityMiB(Json("1G"), false), 953);
  EXPECT_EQ(*ParseQuantityMiB(Json("128974848")), 123);
  EXPECT_EQ(*ParseQuantityMiB(Json("129e6")), 124);
  EXPECT_EQ(*ParseQuantityMiB(Json("1Ti")), 1048576);
  EXPECT_EQ(*ParseQuantityMiB(Json("1Ei")), int64_t{1} << 40);
  EXPECT_EQ(*ParseQuantityInt(Json("8")), 8);
  EXPECT_EQ(*ParseQuantityInt(Json(8)), 8);
  EXPECT_EQ(*ParseQuantityInt(Json("2k")), 2000);
  EXPECT_EQ(*ParseQuantityInt(Json("1.0")), 1);
  auto frac = ParseQuantityInt(Json("1.5"));
  ASSERT_FALSE(frac.ok());
  EXPECT_EQ(frac.status().message(), "must be an integer, got \"1.5\"");
  EXPECT_FALSE(ParseQuantityInt(Json("500m")).ok());
}

TEST(Quantity, RejectsMalformed) {
  for (const Json& bad :
       {Json(""), Json("abc"), Json("1.2.3"), Json("1Gb"), Json("1 Gi"), Json(" 1"), Json("1e"),
        Json("1ex"), Json("--1"), Json("m"), Json("1Ki1"), Json(true), Json::array(),
        Json("99999999999999999999999Ei"), Json("9223372036854775807k"), Json("1e200")}) {
    auto v = ParseQuantityMilli(bad);
    EXPECT_FALSE(v.ok()) << bad;
    if (!v.ok()) {
      EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
    }
  }
  EXPECT_NE(ParseQuantityMilli(Json("1Gb")).status().message().find("unknown suffix"),
            std::string::npos);
}

struct GpuCase {
  const char* name;
  Json limits;
  Json requests;
  Json annotations;
  // expectations
  int whole = 0;
  std::string mig;
  int64_t memory_mib = 0;
  int memory_pct = 0;
  int compute_pct = 0;
  int num_gpu = 0;
  int gpu_milli = 0;
};

TEST(TranslatePod, EveryResourceKind) {
  const Json none = Json::object();
  const std::vector<GpuCase> cases = {
      {"cpu only", R"({"cpu": "2", "memory": "4Gi"})"_json, none, none, 0, "", 0, 0, 0, 0, 0},
      {"whole gpus", R"({"nvidia.com/gpu": 2})"_json, none, none, 2, "", 0, 0, 0, 2, 1000},
      {"whole gpus as string", R"({"nvidia.com/gpu": "8"})"_json, none, none, 8, "", 0, 0, 0, 8,
       1000},
      {"request only", none, R"({"nvidia.com/gpu": "1"})"_json, none, 1, "", 0, 0, 0, 1, 1000},
      {"equal request and limit", R"({"nvidia.com/gpu": 1})"_json,
       R"({"nvidia.com/gpu": "1"})"_json, none, 1, "", 0, 0, 0, 1, 1000},
      // 3 of 7 compute slices on every model offering 3g.40gb.
      {"mig", R"({"nvidia.com/mig-3g.40gb": 1})"_json, none, none, 0, "3g.40gb", 0, 0, 0, 1, 429},
      {"mig +me", R"({"nvidia.com/mig-1g.10gb.me": 1})"_json, none, none, 0, "1g.10gb+me", 0, 0, 0,
       1, 143},
      {"tessera memory", R"({"tessera.io/gpu-memory": "20Gi"})"_json, none, none, 0, "", 20480, 0,
       0, 1, 250},
      {"tessera compute", R"({"tessera.io/gpu-compute": 30})"_json, none, none, 0, "", 0, 0, 30, 1,
       300},
      {"tessera both with gpu 1",
       R"({"nvidia.com/gpu": 1, "tessera.io/gpu-memory": "8Gi", "tessera.io/gpu-compute": "50"})"_json,
       none, none, 0, "", 8192, 0, 50, 1, 500},
      {"hami memory", R"({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000})"_json, none, none, 0, "",
       3000, 0, 0, 1, 37},
      {"hami cores", R"({"nvidia.com/gpu": 1, "nvidia.com/gpucores": 25})"_json, none, none, 0, "",
       0, 0, 25, 1, 250},
      {"hami memory percentage",
       R"({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 40, "nvidia.com/gpucores": 10})"_json,
       none, none, 0, "", 0, 40, 10, 1, 400},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto p = TranslatePod(PodWith(c.limits, c.requests, c.annotations));
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(p->gpu.whole_gpus, c.whole);
    EXPECT_EQ(p->gpu.mig_profile, c.mig);
    EXPECT_EQ(p->gpu.memory_mib, c.memory_mib);
    EXPECT_EQ(p->gpu.memory_pct, c.memory_pct);
    EXPECT_EQ(p->gpu.compute_pct, c.compute_pct);
    EXPECT_EQ(p->demand.num_gpu, c.num_gpu);
    EXPECT_EQ(p->demand.gpu_milli, c.gpu_milli);
    EXPECT_EQ(p->wants_gpu(), c.num_gpu > 0);
    EXPECT_EQ(p->slices.whole_gpus, c.whole);
    EXPECT_EQ(p->slices.mig_profile, c.mig);
    EXPECT_EQ(p->slices.compute_pct, c.compute_pct);
  }
}

TEST(TranslatePod, MetadataAnnotationsAndPriority) {
  Json pod = PodWith(R"({"nvidia.com/gpu": 1})"_json, R"({"cpu": "1500m", "memory": "3Gi"})"_json,
                     R"({"tessera.io/queue": "team-a", "tessera.io/isolation": "strict",
                         "tessera.io/gang": "llm-8", "tessera.io/min-member": "6"})"_json);
  auto p = TranslatePod(pod);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->ns, "ml");
  EXPECT_EQ(p->name, "train-0");
  EXPECT_EQ(p->uid, "6f1c-0");
  EXPECT_EQ(p->scheduler_name, "tessera");
  EXPECT_EQ(p->phase, "Pending");
  EXPECT_EQ(p->creation_timestamp, "2026-01-02T03:04:05Z");
  EXPECT_EQ(p->priority, 100);
  EXPECT_EQ(p->priority_class, "high");
  EXPECT_EQ(p->queue, "team-a");
  EXPECT_EQ(p->isolation, Isolation::kStrict);
  EXPECT_EQ(p->slices.isolation, Isolation::kStrict);
  EXPECT_EQ(p->gang, "llm-8");
  EXPECT_EQ(p->min_member, 6);
  EXPECT_EQ(p->demand.cpu, MilliCpu(1500));
  EXPECT_EQ(p->demand.memory, MiB(3072));
  EXPECT_EQ(p->slices.cpu, MilliCpu(1500));
  EXPECT_EQ(p->key(), "ml/train-0");

  auto defaults = TranslatePod(PodWith(Json::object()));
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->queue, "default");
  EXPECT_EQ(defaults->isolation, Isolation::kStandard);
  EXPECT_TRUE(defaults->gang.empty());
  EXPECT_FALSE(defaults->wants_gpu());
}

TEST(TranslatePod, SumsContainersAndTakesInitMax) {
  Json pod = PodWith(R"({"nvidia.com/gpu": 1, "cpu": "1", "memory": "1Gi"})"_json);
  pod["spec"]["containers"].push_back(
      R"({"name": "side", "resources": {"limits": {"nvidia.com/gpu": 2},
                                        "requests": {"cpu": "500m", "memory": "512Mi"}}})"_json);
  pod["spec"]["initContainers"] = R"([
      {"name": "init-a", "resources": {"requests": {"cpu": "4", "memory": "256Mi"}}},
      {"name": "init-b", "resources": {"limits": {"nvidia.com/gpu": 1}}}])"_json;
  pod["spec"]["overhead"] = R"({"cpu": "100m", "memory": "64Mi"})"_json;
  auto p = TranslatePod(pod);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->gpu.whole_gpus, 3);
  EXPECT_EQ(p->demand.cpu, MilliCpu(4100));  // init max 4 > 1.5, plus overhead
  EXPECT_EQ(p->demand.memory, MiB(1536 + 64));

  Json init_heavy = PodWith(R"({"nvidia.com/gpu": 1})"_json);
  init_heavy["spec"]["initContainers"] =
      R"([{"name": "warm", "resources": {"limits": {"nvidia.com/gpu": 4}}}])"_json;
  EXPECT_EQ(TranslatePod(init_heavy)->gpu.whole_gpus, 4);
}

TEST(TranslatePod, InvalidRequestsExplainThemselves) {
  struct Bad {
    const char* name;
    Json limits;
    Json requests;
    Json annotations;
    std::string message;
  };
  const Json none = Json::object();
  const std::vector<Bad> cases = {
      {"gpu 2 with memory", R"({"nvidia.com/gpu": 2, "tessera.io/gpu-memory": "10Gi"})"_json, none,
       none,
       "nvidia.com/gpu: 2 cannot be combined with tessera.io/gpu-memory / tessera.io/gpu-compute: "
       "a share is part of one GPU; ask for whole GPUs or one share (nvidia.com/gpu: 1 or none)"},
      {"unknown mig profile", R"({"nvidia.com/mig-3g.41gb": 1})"_json, none, none,
       "container \"main\": nvidia.com/mig-3g.41gb: unknown MIG profile \"3g.41gb\" (known: "},
      {"gpucores above 100", R"({"nvidia.com/gpu": 1, "nvidia.com/gpucores": 150})"_json, none,
       none, "container \"main\": nvidia.com/gpucores must be at most 100 (% of one GPU), got 150"},
      {"gpu-compute above 100", R"({"tessera.io/gpu-compute": 101})"_json, none, none,
       "container \"main\": tessera.io/gpu-compute must be at most 100 (% of one GPU), got 101"},
      {"fractional gpu", R"({"nvidia.com/gpu": "1.5"})"_json, none, none,
       "container \"main\": nvidia.com/gpu must be an integer, got \"1.5\""},
      {"milli gpu", R"({"nvidia.com/gpu": "500m"})"_json, none, none,
       "container \"main\": nvidia.com/gpu must be an integer, got \"500m\""},
      {"negative gpu", R"({"nvidia.com/gpu": -1})"_json, none, none,
       "container \"main\": nvidia.com/gpu must not be negative"},
      {"request differs from limit", R"({"nvidia.com/gpu": 2})"_json,
       R"({"nvidia.com/gpu": 1})"_json, none,
       "container \"main\": nvidia.com/gpu request 1 must equal its limit 2"},
      {"malformed cpu", none, R"({"cpu": "two"})"_json, none,
       "container \"main\": cpu: malformed quantity \"two\": no digits"},
      {"malformed memory", none, R"({"memory": "1GB"})"_json, none,
       "container \"main\": memory: malformed quantity \"1GB\": unknown suffix \"GB\""},
      {"two mig instances", R"({"nvidia.com/mig-1g.10gb": 2})"_json, none, none,
       "at most one MIG instance per pod is supported; got 2 (nvidia.com/mig-1g.10gb ...)"},
      {"mig with gpu", R"({"nvidia.com/mig-1g.10gb": 1, "nvidia.com/gpu": 1})"_json, none, none,
       "nvidia.com/mig-1g.10gb cannot be combined with nvidia.com/gpu or GPU share resources; a "
       "MIG instance is the pod's whole GPU request"},
      {"mixed styles", R"({"tessera.io/gpu-memory": "1Gi", "nvidia.com/gpucores": 10})"_json, none,
       none, "the pod mixes Tessera share resources"},
      {"hami alternatives",
       R"({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100, "nvidia.com/gpumem-percentage": 10})"_json,
       none, none, "nvidia.com/gpumem and nvidia.com/gpumem-percentage are alternatives; set one"},
      {"hami two vgpus", R"({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 3000})"_json, none, none,
       "nvidia.com/gpu: 2 cannot be combined with nvidia.com/gpumem / nvidia.com/gpucores"},
      {"too many gpus", R"({"nvidia.com/gpu": 17})"_json, none, none,
       "nvidia.com/gpu: 17 exceeds the 16 GPUs a node can have"},
      {"bad isolation", R"({"nvidia.com/gpu": 1})"_json, none,
       R"({"tessera.io/isolation": "paranoid"})"_json,
       "annotation tessera.io/isolation: unknown isolation class 'paranoid' (known: strict, "
       "standard, best-effort)"},
      {"bad min-member", R"({"nvidia.com/gpu": 1})"_json, none,
       R"({"tessera.io/gang": "g", "tessera.io/min-member": "zero"})"_json,
       "annotation tessera.io/min-member must be a positive integer, got \"zero\""},
      {"min-member without gang", R"({"nvidia.com/gpu": 1})"_json, none,
       R"({"tessera.io/min-member": "2"})"_json,
       "annotation tessera.io/min-member needs tessera.io/gang"},
      {"unknown model", R"({"nvidia.com/gpu": 1})"_json, none,
       R"({"tessera.io/gpu-models": "H100-80GB, Z9"})"_json,
       "annotation tessera.io/gpu-models: unknown GPU model \"Z9\""},
      {"model without profile", R"({"nvidia.com/mig-3g.40gb": 1})"_json, none,
       R"({"tessera.io/gpu-models": "T4"})"_json,
       "none of the models in annotation tessera.io/gpu-models offers MIG profile 3g.40gb"},
      {"bad assignment", R"({"nvidia.com/gpu": 1})"_json, none,
       R"({"tessera.io/assignment": "{\"node\": \"a\"}"})"_json,
       "annotation tessera.io/assignment: assignment.kind \"\" unknown"},
      {"original resources not JSON", R"({"tessera.io/gpu-slice": 1})"_json, none,
       R"({"tessera.io/original-resources": "{\"main\":"})"_json,
       "annotation tessera.io/original-resources: must be a non-empty JSON object"},
      {"original resources without a slice handle", R"({"cpu": 1})"_json, none,
       R"({"tessera.io/original-resources": "{\"main\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}"})"_json,
       "annotation tessera.io/original-resources: container \"main\" has no tessera.io/gpu-slice "
       "handle"},
      {"original resources the container states",
       R"({"tessera.io/gpu-slice": 1, "nvidia.com/gpu": 8})"_json, none,
       R"({"tessera.io/original-resources": "{\"main\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}"})"_json,
       "annotation tessera.io/original-resources: container \"main\" states nvidia.com/gpu itself"},
      {"original resources for a missing container", R"({"tessera.io/gpu-slice": 1})"_json, none,
       R"({"tessera.io/original-resources": "{\"other\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}"})"_json,
       "annotation tessera.io/original-resources: the pod has no container \"other\""},
      {"original resources not a GPU", R"({"tessera.io/gpu-slice": 1})"_json, none,
       R"({"tessera.io/original-resources": "{\"main\":{\"limits\":{\"cpu\":\"64\"}}}"})"_json,
       "annotation tessera.io/original-resources: container \"main\": \"cpu\" is not a GPU "
       "resource"},
      {"original resources malformed count", R"({"tessera.io/gpu-slice": 1})"_json, none,
       R"({"tessera.io/original-resources": "{\"main\":{\"limits\":{\"nvidia.com/gpu\":\"1.5\"}}}"})"_json,
       "container \"main\": nvidia.com/gpu must be an integer, got \"1.5\""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto p = TranslatePod(PodWith(c.limits, c.requests, c.annotations));
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(p.status().message().substr(0, c.message.size()), c.message) << p.status().message();
  }
}

TEST(TranslatePod, OriginalResourcesAreTheRequestOfARewrittenPod) {
  struct Case {
    const char* name;
    Json limits, requests;
    std::string original;  // tessera.io/original-resources; "" = none
    int whole_gpus;
    int64_t memory_mib;
  };
  const Json none = Json::object();
  const std::vector<Case> cases = {
      {"one GPU", R"({"tessera.io/gpu-slice": "1"})"_json, none,
       R"({"main":{"limits":{"nvidia.com/gpu":"1"}}})", 1, 0},
      {"two GPUs, limits and requests", R"({"tessera.io/gpu-slice": "1"})"_json,
       R"({"tessera.io/gpu-slice": "1"})"_json,
       R"({"main":{"limits":{"nvidia.com/gpu":"2"},"requests":{"nvidia.com/gpu":"2"}}})", 2, 0},
      {"requests only", R"({"tessera.io/gpu-slice": "1"})"_json,
       R"({"tessera.io/gpu-slice": "1"})"_json, R"({"main":{"requests":{"nvidia.com/gpu":"3"}}})",
       3, 0},
      {"share resources stay", R"({"tessera.io/gpu-slice": "1", "nvidia.com/gpumem": 3000})"_json,
       none, R"({"main":{"limits":{"nvidia.com/gpu":"1"}}})", 0, 3000},
      {"a slice handle alone is no GPU request", R"({"tessera.io/gpu-slice": "1"})"_json, none, "",
       0, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Json ann = Json::object();
    if (!c.original.empty()) ann["tessera.io/original-resources"] = c.original;
    auto p = TranslatePod(PodWith(c.limits, c.requests, ann));
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(p->gpu.whole_gpus, c.whole_gpus);
    EXPECT_EQ(p->gpu.memory_mib, c.memory_mib);
    EXPECT_EQ(p->wants_gpu(), c.whole_gpus > 0 || c.memory_mib > 0);
  }
}

TEST(TranslatePod, MalformedObjectsNeverCrash) {
  const std::vector<Json> bad = {
      Json(),
      Json(3),
      Json::array(),
      R"({"metadata": 5})"_json,
      R"({"metadata": {"name": 5}})"_json,
      R"({"metadata": {"name": "x", "labels": []}})"_json,
      R"({"metadata": {"name": "x", "annotations": {"a": 1}}})"_json,
      R"({"metadata": {"name": "x"}, "spec": {"containers": {}}})"_json,
      R"({"metadata": {"name": "x"}, "spec": {"containers": [{"resources": []}]}})"_json,
      R"({"metadata": {"name": "x"}, "spec": {"containers": [{"resources": {"limits": 1}}]}})"_json,
      R"({"metadata": {"name": "x"}, "spec": {"priority": "high"}})"_json,
      R"({"metadata": {"name": "x"}, "spec": {"tolerations": [{"operator": "Equal"}]}})"_json,
      R"({"metadata": {"name": "x"}, "spec": {"affinity": {"nodeAffinity": {
           "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
             {"matchExpressions": [{"key": "a", "operator": "Near"}]}]}}}}})"_json,
      R"({"metadata": {"name": "x"}, "spec": {"affinity": {"nodeAffinity": {
           "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
             {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]}]}}}}})"_json,
  };
  for (const Json& j : bad) {
    auto p = TranslatePod(j);
    EXPECT_FALSE(p.ok()) << j;
  }
  // A missing spec is a pod without requests, not an error.
  EXPECT_TRUE(TranslatePod(R"({"metadata": {"name": "x"}})"_json).ok());
}

TEST(TranslatePod, DemandOnModel) {
  auto mig = TranslatePod(PodWith(R"({"nvidia.com/mig-2g.10gb": 1})"_json));
  ASSERT_TRUE(mig.ok()) << mig.status().message();
  // 2g.10gb exists on A100-40GB (7 slices) and on A30 as 2g.12gb? only A100-40GB here.
  EXPECT_EQ(DemandOn(*mig, Model("A100-40GB")).gpu_milli, 286);
  EXPECT_TRUE(mig->demand.AllowsModel(Model("A100-40GB")));
  EXPECT_FALSE(mig->demand.AllowsModel(Model("T4")));

  auto mem = TranslatePod(PodWith(R"({"tessera.io/gpu-memory": "7680Mi"})"_json));
  ASSERT_TRUE(mem.ok());
  EXPECT_EQ(DemandOn(*mem, Model("T4")).gpu_milli, 500);  // half of a 15 GiB T4
  EXPECT_EQ(DemandOn(*mem, Model("H100-80GB")).gpu_milli, 94);

  auto pct =
      TranslatePod(PodWith(R"({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 50})"_json));
  ASSERT_TRUE(pct.ok());
  EXPECT_EQ(SliceDemandOn(*pct, Model("T4")).memory_mib, 7680);
  EXPECT_EQ(SliceDemandOn(*pct, Model("H100-80GB")).memory_mib, 40960);

  auto restricted =
      TranslatePod(PodWith(R"({"tessera.io/gpu-memory": "7680Mi"})"_json, Json::object(),
                           R"({"tessera.io/gpu-models": "T4,L4"})"_json));
  ASSERT_TRUE(restricted.ok());
  EXPECT_EQ(restricted->demand.gpu_milli, 500);  // measured on the smaller T4
  EXPECT_TRUE(restricted->demand.AllowsModel(Model("L4")));
  EXPECT_FALSE(restricted->demand.AllowsModel(Model("H100-80GB")));
}

// ---- Nodes ----

Json NodeJson(const std::string& name, Json labels, Json alloc, Json annotations = Json::object()) {
  Json n = {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", name}, {"labels", labels}, {"annotations", annotations}}},
            {"spec", Json::object()},
            {"status",
             {{"allocatable", alloc},
              {"capacity", alloc},
              {"conditions", R"([{"type": "MemoryPressure", "status": "False"},
                                  {"type": "Ready", "status": "True"}])"_json}}}};
  return n;
}

TEST(TranslateNode, CapacityAndGfdLabels) {
  Json node = NodeJson("gpu-a",
                       R"({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                           "nvidia.com/gpu.count": "8", "zone": "z1"})"_json,
                       R"({"cpu": "191500m", "memory": "2113276Mi", "nvidia.com/gpu": "8",
                           "pods": "110"})"_json);
  node["spec"]["taints"] = R"([{"key": "nvidia.com/gpu", "value": "present",
                                "effect": "NoSchedule"}])"_json;
  auto n = TranslateNode(node);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(n->spec.name, "gpu-a");
  EXPECT_EQ(n->spec.cpu, MilliCpu(191500));
  EXPECT_EQ(n->spec.memory, MiB(2113276));
  EXPECT_EQ(n->spec.gpu_count, 8);
  EXPECT_EQ(n->spec.model, Model("H100-80GB"));
  EXPECT_EQ(n->model, Model("H100-80GB"));
  EXPECT_EQ(n->spec.labels.at("zone"), "z1");
  EXPECT_TRUE(n->ready);
  EXPECT_FALSE(n->unschedulable);
  EXPECT_TRUE(Schedulable(*n));
  ASSERT_EQ(n->taints.size(), 1u);
  EXPECT_EQ(n->taints[0], (Taint{"nvidia.com/gpu", "present", "NoSchedule"}));

  Json cpu_only = NodeJson("cpu-1", Json::object(), R"({"cpu": "8", "memory": "32Gi"})"_json);
  cpu_only["spec"]["unschedulable"] = true;
  cpu_only["status"]["conditions"][1]["status"] = "Unknown";
  auto c = TranslateNode(cpu_only);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->spec.gpu_count, 0);
  EXPECT_EQ(c->spec.model, kNoGpuModel);
  EXPECT_FALSE(c->ready);
  EXPECT_TRUE(c->unschedulable);
  EXPECT_FALSE(Schedulable(*c));
}

TEST(TranslateNode, ReplicasMigResourcesAndErrors) {
  Json shared = NodeJson("ts", R"({"nvidia.com/gpu.product": "Tesla-T4-SHARED",
                                   "nvidia.com/gpu.replicas": "4",
                                   "nvidia.com/gpu.sharing-strategy": "time-slicing"})"_json,
                         R"({"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "8"})"_json);
  auto s = TranslateNode(shared);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->spec.gpu_count, 2);
  EXPECT_EQ(s->spec.model, Model("T4"));
  EXPECT_EQ(s->sharing_strategy, "time-slicing");

  Json mig = NodeJson("mig", R"({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                                 "nvidia.com/mig.strategy": "mixed"})"_json,
                      R"({"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "0",
                          "nvidia.com/mig-3g.40gb": "4", "nvidia.com/mig-1g.10gb.me": "1"})"_json);
  auto m = TranslateNode(mig);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->spec.gpu_count, 0);
  EXPECT_EQ(m->spec.model, kNoGpuModel);
  EXPECT_EQ(m->model, Model("A100-80GB"));
  EXPECT_EQ(m->mig_allocatable.at("3g.40gb"), 4);
  EXPECT_EQ(m->mig_allocatable.at("1g.10gb+me"), 1);

  struct Bad {
    Json node;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {NodeJson("u", R"({"nvidia.com/gpu.product": "NVIDIA-L40S"})"_json,
                R"({"cpu": "8", "memory": "8Gi", "nvidia.com/gpu": "1"})"_json),
       "node u: unknown GPU product \"NVIDIA-L40S\""},
      {NodeJson("nolabel", Json::object(),
                R"({"cpu": "8", "memory": "8Gi", "nvidia.com/gpu": "1"})"_json),
       "node nolabel: has GPUs but neither a nvidia.com/gpu.product label nor a "
       "tessera.io/gpu-inventory annotation"},
      {NodeJson("big", R"({"nvidia.com/gpu.product": "Tesla-T4"})"_json,
                R"({"cpu": "8", "memory": "8Gi", "nvidia.com/gpu": "32"})"_json),
       "node big: 32 GPUs; at most 16 per node are supported"},
      {NodeJson("nocpu", Json::object(), R"({"memory": "8Gi"})"_json),
       "node nocpu: allocatable cpu or memory missing"},
      {NodeJson("badinv", Json::object(), R"({"cpu": "8", "memory": "8Gi"})"_json,
                R"({"tessera.io/gpu-inventory": "[{\"index\": 0}]"})"_json),
       "node badinv: annotation tessera.io/gpu-inventory: entry 0: uuid is required"},
  };
  for (const auto& b : bad) {
    auto r = TranslateNode(b.node);
    ASSERT_FALSE(r.ok()) << b.message;
    EXPECT_EQ(r.status().message().substr(0, b.message.size()), b.message) << r.status().message();
  }
  EXPECT_FALSE(TranslateNode(Json("node")).ok());
  EXPECT_FALSE(
      TranslateNode(R"({"metadata": {"name": "x"}, "status": {"allocatable": 3}})"_json).ok());
}

TEST(TranslateNode, GfdProductMapping) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"NVIDIA-H100-80GB-HBM3", "H100-80GB"},
      {"NVIDIA-H100-PCIe", "H100-80GB"},
      {"NVIDIA-H100-NVL", "H100-94GB"},
      {"NVIDIA-H100-SXM5-94GB", "H100-94GB"},
      {"NVIDIA-H200", "H200"},
      {"NVIDIA-H200-NVL", "H200"},
      {"NVIDIA-GH200-480GB", "H100-96GB"},
      {"NVIDIA-GH200-144G-HBM3e", "GH200-144GB"},
      {"NVIDIA-A100-SXM4-40GB", "A100-40GB"},
      {"NVIDIA-A100-PCIE-40GB", "A100-40GB"},
      {"NVIDIA-A100-SXM4-80GB", "A100-80GB"},
      {"NVIDIA-A100-80GB-PCIe", "A100-80GB"},
      {"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100-40GB"},
      {"NVIDIA-A100-SXM4-80GB-SHARED", "A100-80GB"},
      {"NVIDIA-A30", "A30"},
      {"NVIDIA-A10", "A10"},
      {"NVIDIA-A10G", "A10G"},
      {"NVIDIA-L4", "L4"},
      {"Tesla-T4", "T4"},
      {"Tesla-T4-SHARED", "T4"},
      {"Tesla-V100-SXM2-16GB", "V100M16"},
      {"Tesla-V100-SXM2-32GB", "V100M32"},
      {"Tesla-V100S-PCIE-32GB", "V100M32"},
      {"Tesla-P100-PCIE-16GB", "P100"},
      {"NVIDIA-B200", "B200"},
      {"NVIDIA-GB200", "GB200"},
      {"NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "RTX-PRO-6000"},
      {"H100-80GB", "H100-80GB"},
  };
  for (const auto& [product, model] : cases) {
    auto id = ModelFromProduct(product);
    ASSERT_TRUE(id.ok()) << product << ": " << id.status().message();
    EXPECT_EQ(GpuCatalog::Builtin().Get(*id).name, model) << product;
  }
  for (const char* unknown : {"NVIDIA-L40S", "Quadro-RTX-8000", "", "NVIDIA", "NVIDIA-A100X9"}) {
    auto id = ModelFromProduct(unknown);
    EXPECT_FALSE(id.ok()) << unknown;
  }
}

TEST(TranslateNode, InventoryAnnotation) {
  const std::vector<GpuInventoryEntry> inv = {
      {0, "GPU-aaaa", "A100-80GB", 81920, true, "3g.40gb@0 2g.20gb@4 1g.10gb@6", true},
      {1, "GPU-bbbb", "A100-80GB", 81920, false, "", true},
      {2, "GPU-cccc", "A100-80GB", 81920, false, "", false},
  };
  const std::string text = EncodeInventory(inv);
  auto back = DecodeInventory(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, inv);

  Json node = NodeJson("inv", R"({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})"_json,
                       R"({"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "2"})"_json,
                       Json{{kAnnotationInventory, text}});
  auto n = TranslateNode(node);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(n->spec.gpu_count, 3);  // inventory wins over allocatable
  EXPECT_EQ(n->spec.model, Model("A100-80GB"));
  EXPECT_EQ(n->unhealthy, GpuMask{1} << 2);
  EXPECT_EQ(n->inventory, inv);

  // GFD product strings are accepted as the model and mapped; indices may come in any order.
  auto gfd = DecodeInventory(
      R"([{"index": 1, "uuid": "GPU-2", "model": "NVIDIA-H100-80GB-HBM3", "memory_mib": 81559},
          {"index": 0, "uuid": "GPU-1", "model": "NVIDIA-H100-80GB-HBM3", "memory_mib": 81559,
           "health": "healthy"}])");
  ASSERT_TRUE(gfd.ok()) << gfd.status().message();
  EXPECT_EQ((*gfd)[0].uuid, "GPU-1");
  EXPECT_EQ((*gfd)[1].model, "H100-80GB");

  struct Bad {
    const char* text;
    const char* message;
  };
  const std::vector<Bad> bad = {
      {"{}", "not a JSON list"},
      {"[1]", "entry 0 is not an object"},
      {R"([{"index": 0, "uuid": "G", "model": "Z9"}])", "entry 0: unknown GPU product \"Z9\""},
      {R"([{"index": 0, "uuid": "G", "model": "T4", "mig_enabled": true}])",
       "entry 0: T4 has no MIG mode"},
      {R"([{"index": 0, "uuid": "G", "model": "A100-80GB", "mig_enabled": true,
            "mig_layout": "3g.40gb@2"}])",
       "entry 0: mig_layout: "},
      {R"([{"index": 0, "uuid": "G", "model": "A100-80GB", "mig_layout": "3g.40gb@0"}])",
       "entry 0: mig_layout given but mig_enabled is false"},
      {R"([{"index": 0, "uuid": "G", "model": "T4", "health": "sick"}])",
       "entry 0: health must be \"healthy\" or \"unhealthy\", got \"sick\""},
      {R"([{"index": 0, "uuid": "G", "model": "T4"}, {"index": 0, "uuid": "H", "model": "T4"}])",
       "GPU indices must be 0..1, each once"},
      {R"([{"index": 5, "uuid": "G", "model": "T4"}])", "entry 0: index 5 out of range"},
      {"not json", "not a JSON list"},
  };
  for (const auto& b : bad) {
    auto r = DecodeInventory(b.text);
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_EQ(r.status().message().substr(0, std::string(b.message).size()), b.message)
        << r.status().message();
  }
  const std::string mixed = EncodeInventory(
      {{0, "GPU-a", "T4", 15360, false, "", true}, {1, "GPU-b", "L4", 23034, false, "", true}});
  auto mixed_node =
      TranslateNode(NodeJson("mixed", Json::object(), R"({"cpu": "8", "memory": "8Gi"})"_json,
                             Json{{kAnnotationInventory, mixed}}));
  ASSERT_FALSE(mixed_node.ok());
  EXPECT_EQ(mixed_node.status().message(),
            "node mixed: mixed GPU models (T4, L4) on one node are not supported");
}

TEST(Annotations, AssignmentGpus) {
  const GpuModelId a100 = *GpuCatalog::Builtin().Find("A100-80GB");
  const GpuModelId t4 = *GpuCatalog::Builtin().Find("T4");
  struct Case {
    Assignment a;
    GpuModelId model;
    double gpus;
  };
  const std::vector<Case> cases = {
      {{"n", AssignmentKind::kExclusive, {0, 1}, {}, "", 0, 0, 0}, a100, 2},
      {{"n", AssignmentKind::kShare, {3}, {}, "", 250, 0, 0}, a100, 0.25},
      {{"n", AssignmentKind::kMps, {2}, {}, "", 0, 30, 12288}, a100, 0.3},
      {{"n", AssignmentKind::kTimeSlice, {1}, {}, "", 0, 0, 3840}, t4, 0.25},
      {{"n", AssignmentKind::kMig, {4}, {}, "3g.40gb@4", 0, 0, 0}, a100, 3.0 / 7},
      {{"n", AssignmentKind::kMig, {}, {}, "1g.10gb", 0, 0, 0}, a100, 1.0 / 7},
      {{"n", AssignmentKind::kMigMps, {0}, {}, "3g.40gb@0", 0, 50, 20480}, a100, 1.5 / 7},
      {{"n", AssignmentKind::kMig, {0}, {}, "3g.40gb@0", 0, 0, 0}, t4, 0},  // no MIG on a T4
  };
  for (const Case& c : cases)
    EXPECT_NEAR(AssignmentGpus(c.a, c.model), c.gpus, 1e-12) << EncodeAssignment(c.a);
}

TEST(Annotations, AssignmentRoundTrip) {
  const std::vector<Assignment> cases = {
      {"gpu-a",
       AssignmentKind::kExclusive,
       {0, 1, 2, 3},
       {"GPU-0", "GPU-1", "GPU-2", "GPU-3"},
       "",
       0,
       0,
       0},
      {"gpu-a", AssignmentKind::kMig, {4}, {"GPU-4"}, "3g.40gb@4", 0, 0, 0},
      {"gpu-b", AssignmentKind::kMig, {}, {}, "1g.10gb", 0, 0, 0},
      {"gpu-b", AssignmentKind::kMps, {2}, {}, "", 0, 30, 12288},
      {"gpu-b", AssignmentKind::kTimeSlice, {1}, {}, "", 0, 0, 4096},
      {"gpu-c", AssignmentKind::kMigMps, {0}, {"GPU-x"}, "3g.40gb@0", 0, 50, 20480},
      {"gpu-d", AssignmentKind::kShare, {3}, {}, "", 250, 0, 0},
  };
  for (const auto& a : cases) {
    const std::string text = EncodeAssignment(a);
    auto back = DecodeAssignment(text);
    ASSERT_TRUE(back.ok()) << text << ": " << back.status().message();
    EXPECT_EQ(*back, a) << text;
  }
  EXPECT_EQ(
      EncodeAssignment(cases[1]),
      R"({"gpus":[4],"kind":"mig","mig_instance":"3g.40gb@4","node":"gpu-a","uuids":["GPU-4"]})");

  struct Bad {
    const char* text;
    const char* message;
  };
  const std::vector<Bad> bad = {
      {"[]", "not a JSON object"},
      {R"({"kind": "mig", "gpus": [0], "mig_instance": "1g.10gb@0"})",
       "assignment.node is required"},
      {R"({"node": "a", "kind": "vgpu", "gpus": [0]})", "assignment.kind \"vgpu\" unknown"},
      {R"({"node": "a", "kind": "exclusive", "gpus": []})", "assignment.gpus must not be empty"},
      {R"({"node": "a", "kind": "exclusive", "gpus": [16]})", "assignment.gpus: indices must be"},
      {R"({"node": "a", "kind": "mps", "gpus": [0, 1]})",
       "assignment.gpus: kind mps uses exactly one GPU"},
      {R"({"node": "a", "kind": "mig", "gpus": [0], "mig_instance": "3g.40gb"})",
       "assignment.mig_instance must be \"<profile>@<start>\""},
      {R"({"node": "a", "kind": "mig", "gpus": [0], "mig_instance": "3g.40gb@x"})",
       "assignment.mig_instance must be"},
      {R"({"node": "a", "kind": "mps", "gpus": [0], "mig_instance": "3g.40gb@0"})",
       "assignment.mig_instance is only for kinds mig and mig-mps"},
      {R"({"node": "a", "kind": "mps", "gpus": [0], "mps_thread_pct": 101})",
       "assignment.mps_thread_pct must be within 0..100"},
      {R"({"node": "a", "kind": "share", "gpus": [0], "gpu_milli": 1001})",
       "assignment.gpu_milli must be within 0..1000"},
      {R"({"node": "a", "kind": "mps", "gpus": [0], "memory_limit_mib": "lots"})",
       "assignment.memory_limit_mib must be an integer"},
      {R"({"node": "a", "kind": "exclusive", "gpus": [0], "uuids": ["a", "b"]})",
       "assignment.uuids must match assignment.gpus"},
  };
  for (const auto& b : bad) {
    auto r = DecodeAssignment(b.text);
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_EQ(r.status().message().substr(0, std::string(b.message).size()), b.message)
        << r.status().message();
  }
  // A bound pod carries its assignment.
  auto p = TranslatePod(PodWith(R"({"nvidia.com/mig-3g.40gb": 1})"_json, Json::object(),
                                Json{{kAnnotationAssignment, EncodeAssignment(cases[1])}}));
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(p->assignment.has_value());
  EXPECT_EQ(*p->assignment, cases[1]);
}

// ---- Taints, tolerations, selectors, affinity ----

NodeInfo LabelledNode(std::map<std::string, std::string> labels, std::vector<Taint> taints = {}) {
  NodeInfo n;
  n.spec.name = "node-1";
  n.spec.labels = std::move(labels);
  n.taints = std::move(taints);
  n.ready = true;
  return n;
}

TEST(Constraints, Tolerations) {
  struct Case {
    const char* name;
    Json tolerations;
    std::vector<Taint> taints;
    bool tolerated;
  };
  const std::vector<Case> cases = {
      {"no taints", Json::array(), {}, true},
      {"untolerated NoSchedule", Json::array(), {{"gpu", "true", "NoSchedule"}}, false},
      {"PreferNoSchedule ignored", Json::array(), {{"gpu", "true", "PreferNoSchedule"}}, true},
      {"untolerated NoExecute", Json::array(), {{"gpu", "", "NoExecute"}}, false},
      {"Equal match",
       R"([{"key": "gpu", "operator": "Equal", "value": "true"}])"_json,
       {{"gpu", "true", "NoSchedule"}},
       true},
      {"default operator is Equal",
       R"([{"key": "gpu", "value": "true"}])"_json,
       {{"gpu", "true", "NoSchedule"}},
       true},
      {"Equal value mismatch",
       R"([{"key": "gpu", "value": "false"}])"_json,
       {{"gpu", "true", "NoSchedule"}},
       false},
      {"Exists any value",
       R"([{"key": "gpu", "operator": "Exists"}])"_json,
       {{"gpu", "x", "NoExecute"}},
       true},
      {"effect must match",
       R"([{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}])"_json,
       {{"gpu", "x", "NoSchedule"}},
       false},
      {"empty key Exists tolerates all",
       R"([{"operator": "Exists"}])"_json,
       {{"a", "1", "NoSchedule"}, {"b", "", "NoExecute"}},
       true},
      {"one of two tolerated",
       R"([{"key": "a", "operator": "Exists"}])"_json,
       {{"a", "1", "NoSchedule"}, {"b", "", "NoExecute"}},
       false},
      {"cordon taint",
       R"([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                            "effect": "NoSchedule"}])"_json,
       {{"node.kubernetes.io/unschedulable", "", "NoSchedule"}},
       true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Json pod = PodWith(Json::object());
    pod["spec"]["tolerations"] = c.tolerations;
    auto p = TranslatePod(pod);
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(Tolerates(*p, LabelledNode({}, c.taints)), c.tolerated);
  }
}

TEST(Constraints, SelectorsAndRequiredAffinity) {
  const std::map<std::string, std::string> labels = {
      {"zone", "z1"}, {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}, {"gpus", "8"}};
  struct Case {
    const char* name;
    Json selector;
    Json terms;  // null: no affinity
    bool matches;
  };
  const std::vector<Case> cases = {
      {"nothing", Json::object(), nullptr, true},
      {"selector hit", R"({"zone": "z1"})"_json, nullptr, true},
      {"selector miss", R"({"zone": "z2"})"_json, nullptr, false},
      {"selector missing label", R"({"rack": "r1"})"_json, nullptr, false},
      {"In", Json::object(),
       R"([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z0", "z1"]}]}])"_json,
       true},
      {"NotIn", Json::object(),
       R"([{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z1"]}]}])"_json,
       false},
      {"NotIn absent label", Json::object(),
       R"([{"matchExpressions": [{"key": "rack", "operator": "NotIn", "values": ["r1"]}]}])"_json,
       true},
      {"Exists", Json::object(),
       R"([{"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "Exists"}]}])"_json,
       true},
      {"DoesNotExist", Json::object(),
       R"([{"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}])"_json, false},
      {"Gt", Json::object(),
       R"([{"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["4"]}]}])"_json,
       true},
      {"Gt equal", Json::object(),
       R"([{"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["8"]}]}])"_json,
       false},
      {"Lt", Json::object(),
       R"([{"matchExpressions": [{"key": "gpus", "operator": "Lt", "values": ["16"]}]}])"_json,
       true},
      {"Lt non-integer label", Json::object(),
       R"([{"matchExpressions": [{"key": "zone", "operator": "Lt", "values": ["16"]}]}])"_json,
       false},
      {"ANDed within a term", Json::object(),
       R"([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]},
                                 {"key": "gpus", "operator": "Gt", "values": ["8"]}]}])"_json,
       false},
      {"ORed terms", Json::object(),
       R"([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z9"]}]},
           {"matchExpressions": [{"key": "gpus", "operator": "In", "values": ["8"]}]}])"_json,
       true},
      {"empty term matches nothing", Json::object(), R"([{}])"_json, false},
      {"matchFields name", Json::object(),
       R"([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}])"_json,
       true},
      {"matchFields other name", Json::object(),
       R"([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}])"_json,
       false},
      {"selector and affinity both", R"({"zone": "z2"})"_json,
       R"([{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}])"_json, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Json pod = PodWith(Json::object());
    if (!c.selector.empty()) pod["spec"]["nodeSelector"] = c.selector;
    if (!c.terms.is_null())
      pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
         ["nodeSelectorTerms"] = c.terms;
    auto p = TranslatePod(pod);
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(MatchesNode(*p, LabelledNode(labels)), c.matches);
  }
}

}  // namespace
}  // namespace tessera::kube
