// KubePodSource against the fake API server: only this node's non-terminal pods, with their
// integer resource counts, annotations and binding time (PodScheduled, else creation).
#include "agent/kube_pod_source.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/kube/fake_apiserver.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;
using kube::testing::FakeApiServer;

Json Pod(const std::string& name, const std::string& node, Json limits, Json status = Json()) {
  Json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", "ml"},
        {"uid", "uid-" + name},
        {"annotations", {{"tessera.io/assignment", "{}"}}}}},
      {"spec",
       {{"nodeName", node},
        {"containers", Json::array({{{"name", "main"}, {"resources", {{"limits", limits}}}},
                                    {{"name", "side"},
                                     {"resources", {{"requests", {{"nvidia.com/gpu", 2}}}}}}})}}}};
  if (!status.is_null()) pod["status"] = status;
  return pod;
}

class KubePodSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    auto c = kube::Client::Create(server_.client_config());
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
  }
  void TearDown() override { client_.reset(); }

  FakeApiServer server_;
  std::unique_ptr<kube::Client> client_;
};

TEST_F(KubePodSourceTest, ListsThisNodesRunningPodsWithCountsAndBindingTime) {
  const Json limits = {
      {"nvidia.com/mig-1g.10gb", "1"}, {"tessera.io/gpu-memory", "10Gi"}, {"cpu", "2"}};
  const std::string pods = "/api/v1/namespaces/ml/pods";
  ASSERT_TRUE(server_.Create(pods, Pod("a", "gpu-a", limits)).ok());
  ASSERT_TRUE(
      server_
          .Create(pods, Pod("b", "gpu-a", {{"tessera.io/gpu-compute", "30"}},
                            {{"phase", "Running"},
                             {"containerStatuses",
                              Json::array({{{"name", "side"}, {"containerID", "containerd://1f"}},
                                           {{"name", "main"}, {"containerID", ""}}})},
                             {"conditions",
                              Json::array({{{"type", "PodScheduled"},
                                            {"status", "True"},
                                            {"lastTransitionTime", "2026-02-02T00:00:00Z"}}})}}))
          .ok());
  ASSERT_TRUE(server_.Create(pods, Pod("c", "gpu-b", limits)).ok());
  ASSERT_TRUE(server_.Create(pods, Pod("done", "gpu-a", limits, {{"phase", "Succeeded"}})).ok());

  KubePodSource source(*client_, "gpu-a");
  auto list = source.ListBoundPods();
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->size(), 2u);
  const BoundPod& a = (*list)[0].name == "a" ? (*list)[0] : (*list)[1];
  const BoundPod& b = (*list)[0].name == "a" ? (*list)[1] : (*list)[0];
  EXPECT_EQ(a.uid, "uid-a");
  EXPECT_EQ(a.ns, "ml");
  EXPECT_EQ(a.bound_at,
            server_.Get("/api/v1/namespaces/ml/pods/a")->at("metadata").at("creationTimestamp"));
  EXPECT_EQ(a.annotations.at("tessera.io/assignment"), "{}");
  ASSERT_EQ(a.containers.size(), 2u);
  EXPECT_EQ(a.containers[0].name, "main");
  EXPECT_EQ(a.containers[0].requests,
            (std::map<std::string, int64_t>{{"nvidia.com/mig-1g.10gb", 1}}));
  EXPECT_EQ(a.containers[1].requests, (std::map<std::string, int64_t>{{"nvidia.com/gpu", 2}}));
  EXPECT_EQ(b.bound_at, "2026-02-02T00:00:00Z");
  EXPECT_EQ(b.containers[0].requests,
            (std::map<std::string, int64_t>{{"tessera.io/gpu-compute", 30}}));
  // A container with a container ID was created, hence allocated; the others were not.
  EXPECT_FALSE(a.containers[0].started);
  EXPECT_FALSE(a.containers[1].started);
  EXPECT_FALSE(b.containers[0].started);
  EXPECT_TRUE(b.containers[1].started);

  bool selected = false;
  for (const auto& r : server_.Requests())
    if (r.path == "/api/v1/pods") {
      auto it = r.query.find("fieldSelector");
      selected = it != r.query.end() && it->second == "spec.nodeName=gpu-a";
    }
  EXPECT_TRUE(selected);
}

TEST_F(KubePodSourceTest, AFailedListIsTheError) {
  KubePodSource source(*client_, "gpu-a");
  server_.SetFailureRate(1.0);
  auto list = source.ListBoundPods();
  EXPECT_FALSE(list.ok());
  server_.ClearFaults();
}

TEST(PodFromObject, APodWithoutUidIsRefused) {
  EXPECT_FALSE(PodFromObject({{"metadata", {{"name", "x"}}}}).ok());
  EXPECT_FALSE(PodFromObject(Json::array()).ok());
}

}  // namespace
}  // namespace tessera::agent
