// The pod webhook: which containers get a tessera.io/gpu-slice device, the JSON Patch applied to
// the pod as the API server would apply it, idempotence, bad reviews, and the HTTP front end.
#include "kube/webhook.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>

#include <string>
#include <vector>

namespace tessera::kube {
namespace {

using Json = nlohmann::json;

std::string Unbase64(const std::string& in) {
  std::string out(in.size(), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  EXPECT_GE(n, 0);
  out.resize(static_cast<size_t>(n));
  while (!out.empty() && out.back() == '\0') out.pop_back();  // padding
  return out;
}

Json Review(const Json& pod, const std::string& kind = "Pod") {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
            {"kind", {{"group", ""}, {"version", "v1"}, {"kind", kind}}},
            {"operation", "CREATE"},
            {"object", pod}}}};
}

Json Container(const std::string& name, const Json& limits) {
  Json c = {{"name", name}, {"image", "cuda"}};
  if (!limits.is_null()) c["resources"] = {{"limits", limits}};
  return c;
}

Json Pod(std::vector<Json> containers) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "p"}, {"namespace", "ml"}}},
          {"spec", {{"containers", containers}}}};
}

// Applies the review's patch to `pod` as the API server does.
Json Apply(const Json& pod, const Json& reply) {
  const Json& r = reply.at("response");
  if (!r.contains("patch")) return pod;
  EXPECT_EQ(r.at("patchType"), "JSONPatch");
  return pod.patch(Json::parse(Unbase64(r.at("patch").get<std::string>())));
}

std::string SliceOf(const Json& pod, size_t i) {
  const Json& c = pod["spec"]["containers"][i];
  if (!c.contains("resources") || !c["resources"].contains("limits") ||
      !c["resources"]["limits"].contains(kResourceGpuSlice))
    return "";
  return c["resources"]["limits"][kResourceGpuSlice].get<std::string>();
}

struct Case {
  const char* name;
  Json limits;
  std::string want;  // gpu-slice limit after the webhook ("" = none)
};

TEST(WebhookTest, ContainersThatNoPluginServesGetOneSliceDevice) {
  const std::vector<Case> cases = {
      {"memory only", {{"tessera.io/gpu-memory", "10Gi"}}, "1"},
      {"memory and cpu", {{"tessera.io/gpu-memory", "4Gi"}, {"cpu", "2"}}, "1"},
      {"compute is served by the plugin", {{"tessera.io/gpu-compute", "30"}}, ""},
      {"memory and compute",
       {{"tessera.io/gpu-memory", "4Gi"}, {"tessera.io/gpu-compute", "30"}},
       ""},
      {"HAMi memory", {{"nvidia.com/gpumem", "3000"}}, "1"},
      {"HAMi cores and memory %",
       {{"nvidia.com/gpucores", "30"}, {"nvidia.com/gpumem-percentage", "20"}},
       "1"},
      {"HAMi with a whole GPU", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}}, ""},
      {"whole GPU", {{"nvidia.com/gpu", "2"}}, ""},
      {"MIG", {{"nvidia.com/mig-1g.10gb", "1"}}, ""},
      {"no GPU", {{"cpu", "1"}}, ""},
      {"no resources", Json(), ""},
      {"already has a slice", {{"tessera.io/gpu-memory", "4Gi"}, {kResourceGpuSlice, "1"}}, "1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Json pod = Pod({Container("main", c.limits)});
    WebhookOutcome outcome;
    auto reply = ReviewPod(Review(pod), {}, &outcome);
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    EXPECT_EQ(reply->at("kind"), "AdmissionReview");
    EXPECT_EQ(reply->at("response").at("uid"), "705ab4f5-6393-11e8-b7cc-42010a800002");
    EXPECT_EQ(reply->at("response").at("allowed"), true);
    const Json after = Apply(pod, *reply);
    EXPECT_EQ(SliceOf(after, 0), c.want);
    const bool changed = c.want == "1" && SliceOf(pod, 0).empty();
    EXPECT_EQ(outcome.containers_changed, changed ? 1 : 0);
    EXPECT_EQ(reply->at("response").contains("patch"), changed);
    // The patch adds, never rewrites: every other field is as it was.
    Json back = after;
    if (changed) back["spec"]["containers"][0]["resources"]["limits"].erase(kResourceGpuSlice);
    EXPECT_EQ(back, pod);
    // A second pass over the patched pod changes nothing.
    auto again = ReviewPod(Review(after), {});
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE(again->at("response").contains("patch"));
  }
}

TEST(WebhookTest, RequestsOnlyAndMissingLimitsGetTheirParentsCreated) {
  Json c = {{"name", "a"}, {"resources", {{"requests", {{"tessera.io/gpu-memory", "2Gi"}}}}}};
  Json pod =
      Pod({c, Container("b", {{"cpu", "1"}}), Container("c", {{"nvidia.com/gpumem", "500"}})});
  pod["spec"]["initContainers"] =
      Json::array({Container("init", {{"tessera.io/gpu-memory", "1Gi"}})});
  pod["spec"]["containers"][1].erase("resources");
  pod["spec"]["containers"][1]["name"] = "b";
  WebhookOutcome outcome;
  auto reply = ReviewPod(Review(pod), {}, &outcome);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  const Json after = Apply(pod, *reply);
  EXPECT_EQ(outcome.containers_changed, 3);
  EXPECT_EQ(SliceOf(after, 0), "1");
  EXPECT_EQ(after["spec"]["containers"][0]["resources"]["requests"]["tessera.io/gpu-memory"],
            "2Gi");
  EXPECT_EQ(SliceOf(after, 1), "");
  EXPECT_EQ(SliceOf(after, 2), "1");
  EXPECT_EQ(after["spec"]["initContainers"][0]["resources"]["limits"][kResourceGpuSlice], "1");
}

// A resources object's GPU entries (limits and requests) as "limits.<name>=<value>" lines.
std::string GpuEntries(const Json& c) {
  std::string out;
  if (!c.contains("resources")) return out;
  for (const char* part : {"limits", "requests"}) {
    if (!c["resources"].contains(part)) continue;
    for (const auto& [k, v] : c["resources"][part].items())
      if (k != "cpu" && k != "memory")
        out += std::string(part) + "." + k + "=" +
               (v.is_string() ? v.get<std::string>() : v.dump()) + " ";
  }
  return out;
}

struct RewriteCase {
  const char* name;
  Json annotations;               // null: none
  std::vector<Json> containers;   // name + resources
  Json init_containers;           // null: none
  std::vector<std::string> want;  // GpuEntries of each container, then init containers, after
  Json want_original;             // the tessera.io/original-resources value; null: not added
};

TEST(WebhookTest, RightsizeAutoPodsTradeWholeGpusForOneSliceDevice) {
  const Json auto_ann = {{"tessera.io/rightsize", "auto"}};
  auto c = [](const std::string& name, const Json& resources) {
    Json out = {{"name", name}, {"image", "cuda"}};
    if (!resources.is_null()) out["resources"] = resources;
    return out;
  };
  const Json one = {{"limits", {{"nvidia.com/gpu", "1"}}}};
  const std::vector<RewriteCase> cases = {
      {"one GPU in limits",
       auto_ann,
       {c("main", one)},
       nullptr,
       {"limits.tessera.io/gpu-slice=1 "},
       {{"main", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}},
      {"two GPUs in limits and requests",
       auto_ann,
       {c("main", {{"limits", {{"nvidia.com/gpu", "2"}, {"cpu", "4"}}},
                   {"requests", {{"nvidia.com/gpu", "2"}}}})},
       nullptr,
       {"limits.tessera.io/gpu-slice=1 requests.tessera.io/gpu-slice=1 "},
       {{"main",
         {{"limits", {{"nvidia.com/gpu", "2"}}}, {"requests", {{"nvidia.com/gpu", "2"}}}}}}},
      {"requests only: limits created",
       auto_ann,
       {c("main", {{"requests", {{"nvidia.com/gpu", "1"}}}})},
       nullptr,
       {"limits.tessera.io/gpu-slice=1 requests.tessera.io/gpu-slice=1 "},
       {{"main", {{"requests", {{"nvidia.com/gpu", "1"}}}}}}},
      {"requests only, limits without a GPU",
       auto_ann,
       {c("main", {{"limits", {{"cpu", "1"}}}, {"requests", {{"nvidia.com/gpu", "1"}}}})},
       nullptr,
       {"limits.tessera.io/gpu-slice=1 requests.tessera.io/gpu-slice=1 "},
       {{"main", {{"requests", {{"nvidia.com/gpu", "1"}}}}}}},
      {"HAMi memory beside a whole GPU",
       auto_ann,
       {c("main", {{"limits", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}}}})},
       nullptr,
       {"limits.nvidia.com/gpumem=3000 limits.tessera.io/gpu-slice=1 "},
       {{"main", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}},
      {"several containers and an init container",
       auto_ann,
       {c("a", one), c("b", {{"limits", {{"cpu", "1"}}}}),
        c("c", {{"limits", {{"nvidia.com/gpu", "3"}}}})},
       Json::array({c("init", one)}),
       {"limits.tessera.io/gpu-slice=1 ", "", "limits.tessera.io/gpu-slice=1 ",
        "limits.tessera.io/gpu-slice=1 "},
       {{"a", {{"limits", {{"nvidia.com/gpu", "1"}}}}},
        {"c", {{"limits", {{"nvidia.com/gpu", "3"}}}}},
        {"init", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}},
      {"recommend is not rewritten",
       {{"tessera.io/rightsize", "recommend"}},
       {c("main", one)},
       nullptr,
       {"limits.nvidia.com/gpu=1 "},
       nullptr},
      {"off is not rewritten",
       {{"tessera.io/rightsize", "off"}},
       {c("main", one)},
       nullptr,
       {"limits.nvidia.com/gpu=1 "},
       nullptr},
      {"no rightsize annotation",
       nullptr,
       {c("main", one)},
       nullptr,
       {"limits.nvidia.com/gpu=1 "},
       nullptr},
      {"already rewritten",
       {{"tessera.io/rightsize", "auto"},
        {"tessera.io/original-resources", R"({"main":{"limits":{"nvidia.com/gpu":"1"}}})"}},
       {c("main", one)},
       nullptr,
       {"limits.nvidia.com/gpu=1 "},
       nullptr},
      {"MIG is left alone",
       auto_ann,
       {c("main", {{"limits", {{"nvidia.com/mig-1g.10gb", "1"}}}})},
       nullptr,
       {"limits.nvidia.com/mig-1g.10gb=1 "},
       nullptr},
      {"zero GPUs are left alone",
       auto_ann,
       {c("main", {{"limits", {{"nvidia.com/gpu", "0"}}}})},
       nullptr,
       {"limits.nvidia.com/gpu=0 "},
       nullptr},
      {"a malformed count is left for the scheduler to report",
       auto_ann,
       {c("main", {{"limits", {{"nvidia.com/gpu", "1.5"}}}})},
       nullptr,
       {"limits.nvidia.com/gpu=1.5 "},
       nullptr},
      {"a container with a slice handle is left alone",
       auto_ann,
       {c("main", {{"limits", {{"nvidia.com/gpu", "1"}, {kResourceGpuSlice, "1"}}}})},
       nullptr,
       {"limits.nvidia.com/gpu=1 limits.tessera.io/gpu-slice=1 "},
       nullptr},
      {"a memory share still gets its handle",
       auto_ann,
       {c("main", {{"limits", {{"tessera.io/gpu-memory", "4Gi"}}}})},
       nullptr,
       {"limits.tessera.io/gpu-memory=4Gi limits.tessera.io/gpu-slice=1 "},
       nullptr},
  };
  for (const RewriteCase& rc : cases) {
    SCOPED_TRACE(rc.name);
    Json pod = Pod(rc.containers);
    if (!rc.annotations.is_null()) pod["metadata"]["annotations"] = rc.annotations;
    if (!rc.init_containers.is_null()) pod["spec"]["initContainers"] = rc.init_containers;
    WebhookOutcome outcome;
    auto reply = ReviewPod(Review(pod), {}, &outcome);
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    const Json after = Apply(pod, *reply);
    std::vector<std::string> got;
    for (const Json& ct : after["spec"]["containers"]) got.push_back(GpuEntries(ct));
    if (after["spec"].contains("initContainers"))
      for (const Json& ct : after["spec"]["initContainers"]) got.push_back(GpuEntries(ct));
    EXPECT_EQ(got, rc.want);
    const Json& ann = after["metadata"].contains("annotations") ? after["metadata"]["annotations"]
                                                                : Json::object();
    const bool added = !rc.want_original.is_null();
    EXPECT_EQ(outcome.containers_rewritten, added ? static_cast<int>(rc.want_original.size()) : 0);
    if (added) {
      ASSERT_TRUE(ann.contains(kAnnotationOriginalResources));
      EXPECT_EQ(Json::parse(ann[kAnnotationOriginalResources].get<std::string>()),
                rc.want_original);
      // Every other annotation and field outside the GPU resources is as it was.
      Json back = after;
      back["metadata"]["annotations"].erase(kAnnotationOriginalResources);
      EXPECT_EQ(back["metadata"], pod["metadata"]);
      // The scheduler reads the original ask back from the annotation.
      auto before_req = TranslatePod(pod);
      auto after_req = TranslatePod(after);
      ASSERT_TRUE(before_req.ok() && after_req.ok()) << after_req.status().message();
      EXPECT_EQ(after_req->gpu, before_req->gpu);
      EXPECT_EQ(after_req->demand.num_gpu, before_req->demand.num_gpu);
      EXPECT_EQ(after_req->demand.gpu_milli, before_req->demand.gpu_milli);
    } else if (!(pod["metadata"].contains("annotations") &&
                 pod["metadata"]["annotations"].contains(kAnnotationOriginalResources))) {
      EXPECT_FALSE(ann.contains(kAnnotationOriginalResources));
    }
    // A second pass over the patched pod changes nothing.
    auto again = ReviewPod(Review(after), {});
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE(again->at("response").contains("patch"));
  }
}

TEST(WebhookTest, SchedulerNameIsSetOnlyForGpuPodsOnTheDefaultScheduler) {
  WebhookConfig cfg;
  cfg.scheduler_name = "tessera";
  struct SCase {
    const char* name;
    Json limits;
    Json scheduler;  // null = absent
    std::string want;
  };
  const std::vector<SCase> cases = {
      {"absent", {{"nvidia.com/gpu", "1"}}, Json(), "tessera"},
      {"default", {{"tessera.io/gpu-memory", "1Gi"}}, "default-scheduler", "tessera"},
      {"another scheduler stays", {{"nvidia.com/gpu", "1"}}, "volcano", "volcano"},
      {"no GPU", {{"cpu", "1"}}, Json(), ""},
  };
  for (const SCase& c : cases) {
    SCOPED_TRACE(c.name);
    Json pod = Pod({Container("main", c.limits)});
    if (!c.scheduler.is_null()) pod["spec"]["schedulerName"] = c.scheduler;
    WebhookOutcome outcome;
    auto reply = ReviewPod(Review(pod), cfg, &outcome);
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    const Json after = Apply(pod, *reply);
    EXPECT_EQ(after["spec"].value("schedulerName", ""), c.want);
    EXPECT_EQ(outcome.scheduler_set, c.want == "tessera");
  }
}

TEST(WebhookTest, OtherKindsPassUnchanged) {
  auto reply = ReviewPod(Review({{"spec", {}}}, "Deployment"), {});
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->at("response").at("allowed"), true);
  EXPECT_FALSE(reply->at("response").contains("patch"));
}

TEST(WebhookTest, MalformedReviewsAreRejectedWithTheField) {
  const Json pod = Pod({Container("main", {{"tessera.io/gpu-memory", "1Gi"}})});
  struct BCase {
    const char* name;
    Json review;
    std::string field;
  };
  Json no_uid = Review(pod);
  no_uid["request"].erase("uid");
  Json bad_kind = Review(pod);
  bad_kind["kind"] = "Pod";
  Json kind_not_string = Review(pod);
  kind_not_string["kind"] = Json::object();
  Json no_object = Review(pod);
  no_object["request"].erase("object");
  Json bad_containers = Review(pod);
  bad_containers["request"]["object"]["spec"]["containers"] = "x";
  Json bad_limits = Review(pod);
  bad_limits["request"]["object"]["spec"]["containers"][0]["resources"]["limits"] = 3;
  Json bad_sched = Review(pod);
  bad_sched["request"]["object"]["spec"]["schedulerName"] = 7;
  const std::vector<BCase> cases = {
      {"not an object", Json::array(), "JSON object"},
      {"wrong kind", bad_kind, "kind"},
      {"kind not a string", kind_not_string, "kind"},
      {"no uid", no_uid, "request.uid"},
      {"no object", no_object, "request.object"},
      {"containers not an array", bad_containers, "spec.containers"},
      {"limits not an object", bad_limits, "spec.containers[0].resources.limits"},
      {"schedulerName not a string", bad_sched, "spec.schedulerName"},
  };
  WebhookConfig cfg;
  cfg.scheduler_name = "tessera";
  for (const BCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto reply = ReviewPod(c.review, cfg);
    ASSERT_FALSE(reply.ok());
    EXPECT_NE(reply.status().message().find(c.field), std::string::npos)
        << reply.status().message();
  }
}

TEST(WebhookServerTest, ServesReviewsAndRejectsGarbage) {
  WebhookServerOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  o.insecure = true;
  o.limits.max_body_bytes = 64 << 10;
  WebhookServer server({}, o);
  ASSERT_TRUE(server.Start().ok());
  httplib::Client cli("127.0.0.1", server.port());
  const Json pod = Pod({Container("main", {{"tessera.io/gpu-memory", "1Gi"}})});
  auto res = cli.Post("/mutate-pods", Review(pod).dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  const Json reply = Json::parse(res->body);
  EXPECT_EQ(SliceOf(Apply(pod, reply), 0), "1");
  auto bad = cli.Post("/mutate-pods", "{not json", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  auto metrics = cli.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("tessera_webhook_reviews_total{result=\"patched\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics->body.find("tessera_webhook_reviews_total{result=\"bad_request\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics->body.find("tessera_webhook_containers_patched_total 1"), std::string::npos);
  // The server's guard counters are part of the webhook's metrics.
  EXPECT_NE(metrics->body.find("tessera_http_requests_too_large_total 0\n"), std::string::npos);
  auto large = cli.Post("/mutate-pods", std::string(128 << 10, ' '), "application/json");
  ASSERT_TRUE(large);
  EXPECT_EQ(large->status, 413);
  metrics = cli.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("tessera_http_requests_too_large_total 1\n"), std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("tessera_http_tls_failures_total 0\n"), std::string::npos);
  server.Stop();
}

TEST(WebhookServerTest, PlainHttpIsRefusedOffLoopbackAndWithoutInsecure) {
  WebhookServerOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  EXPECT_FALSE(WebhookServer({}, o).Start().ok());  // no TLS, not insecure
  o.insecure = true;
  o.address = "0.0.0.0";
  EXPECT_FALSE(WebhookServer({}, o).Start().ok());
}

}  // namespace
}  // namespace tessera::kube
