// The MigLayout loop end to end: a MigLayout object in the in-test fake API server, one sync
// pass over the fake NVML, the status written through the status subresource and the GPU
// state in the fake's state file. No scheduler: the object is created directly.
#include "agent/miglayout_sync.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/nvml.h"
#include "kube/translate.h"
#include "tests/agent/fake_node.h"
#include "tests/kube/fake_apiserver.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;
using kube::testing::FakeApiServer;
using testing_support::FakeNode;
using testing_support::TempPath;

Json Node(Json gpu0_procs = Json::array()) {
  Json gpus = Json::array();
  for (int i = 0; i < 2; ++i)
    gpus.push_back({{"model", "A100-80GB"},
                    {"uuid", "GPU-a100-" + std::to_string(i)},
                    {"mig", true},
                    {"mig_layout", "3g.40gb@0 2g.20gb@4 1g.10gb@6"}});
  gpus[0]["processes"] = gpu0_procs;
  return {{"gpus", gpus}};
}

Json Layout(const Json& gpus) {
  return {{"apiVersion", "tessera.io/v1alpha1"},
          {"kind", "MigLayout"},
          {"metadata", {{"name", "gpu-a"}}},
          {"spec", {{"nodeName", "gpu-a"}, {"gpus", gpus}}}};
}

class MigLayoutSync : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    auto c = kube::Client::Create(server_.client_config());
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
    options_.node_name = "gpu-a";
    options_.apply.state_dir = TempPath("state");
  }
  void TearDown() override { client_.reset(); }

  Json Object() {
    return server_.Get(std::string(kube::kMigLayoutsPath) + "/gpu-a").value_or(Json());
  }
  Result<MigSyncResult> Sync() {
    auto nvml = OpenNvml();
    if (!nvml.ok()) return nvml.status();
    return SyncMigLayout(*client_, **nvml, options_);
  }

  FakeApiServer server_;
  std::unique_ptr<kube::Client> client_;
  MigSyncOptions options_;
};

TEST_F(MigLayoutSync, NoObjectIsNothingToDo) {
  FakeNode fake(Node());
  auto r = Sync();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->found);
  EXPECT_TRUE(fake.State().is_null());
}

TEST_F(MigLayoutSync, AppliesNewRevisionsAndWritesStatus) {
  FakeNode fake(Node());
  ASSERT_TRUE(server_
                  .Create(kube::kMigLayoutsPath,
                          Layout({{"1",
                                   {{"revision", 7},
                                    {"migEnabled", true},
                                    {"layout", "3g.40gb@0 1g.10gb@4 1g.10gb@5 1g.10gb@6"},
                                    {"reason", "test"}}}}))
                  .ok());
  server_.ClearRequests();
  auto r = Sync();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->gpus, std::vector<std::string>{"1"});
  const Json obj = Object();
  const Json& st = obj["status"]["gpus"]["1"];
  EXPECT_EQ(st["observedRevision"], 7);
  EXPECT_EQ(st["state"], "Applied");
  EXPECT_EQ(st["layout"], "3g.40gb@0 1g.10gb@4 1g.10gb@5 1g.10gb@6");
  EXPECT_TRUE(st.contains("lastTransitionTime"));
  EXPECT_EQ(fake.Instances(1), "3g.40gb@0 1g.10gb@4 1g.10gb@5 1g.10gb@6");
  EXPECT_EQ(fake.Instances(0), "3g.40gb@0 2g.20gb@4 1g.10gb@6");

  // GET, then two merge patches of the status subresource (Applying, then the outcome).
  std::vector<std::string> calls;
  for (const auto& q : server_.Requests()) calls.push_back(q.method + " " + q.path);
  const std::string obj_path = std::string(kube::kMigLayoutsPath) + "/gpu-a";
  EXPECT_EQ(calls, (std::vector<std::string>{"GET " + obj_path, "PATCH " + obj_path + "/status",
                                             "PATCH " + obj_path + "/status"}));

  // A second pass is a no-op: nothing newer than the observed revision.
  server_.ClearRequests();
  r = Sync();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->gpus.empty());
  EXPECT_EQ(server_.Requests().size(), 1u);
  EXPECT_EQ(Object()["status"], obj["status"]);
}

TEST_F(MigLayoutSync, AgentKilledMidApplyConvergesOnRestart) {
  FakeNode fake(Node());
  ASSERT_TRUE(server_
                  .Create(kube::kMigLayoutsPath, Layout({{"0",
                                                          {{"revision", 3},
                                                           {"migEnabled", true},
                                                           {"layout", "3g.40gb@0 3g.40gb@4"}}}}))
                  .ok());
  MigSyncOptions killed = options_;
  killed.apply.after_step = [](const std::string& step) {
    return step.rfind("destroy GPU instance", 0) == 0 ? Internal("agent killed") : Status::Ok();
  };
  {
    auto nvml = OpenNvml();
    ASSERT_TRUE(nvml.ok());
    auto r = SyncMigLayout(*client_, **nvml, killed);
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
  Json st = Object()["status"]["gpus"]["0"];
  EXPECT_EQ(st["state"], "Applying");
  EXPECT_EQ(st["observedRevision"], 3);
  EXPECT_EQ(fake.Instances(0), "3g.40gb@0 1g.10gb@6");

  auto r = Sync();  // a fresh agent: new NVML session, same state dir
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->gpus, std::vector<std::string>{"0"});
  st = Object()["status"]["gpus"]["0"];
  EXPECT_EQ(st["state"], "Applied") << st.dump();
  EXPECT_EQ(st["layout"], "3g.40gb@0 3g.40gb@4");
  EXPECT_EQ(st["message"],
            "resumed revision 3 interrupted after: destroy GPU instance 2g.20gb@4; destroyed "
            "1g.10gb@6; created 3g.40gb@4");
  EXPECT_EQ(fake.Instances(0), "3g.40gb@0 3g.40gb@4") << "no half-made instance";
  EXPECT_FALSE(ReadMigJournal(options_.apply.state_dir, 0).ok());
}

TEST_F(MigLayoutSync, BusyInstanceIsFailedWithThePid) {
  FakeNode fake(Node({{{"pid", 31337}, {"used_mib", 4096}, {"mig", "2g.20gb@4"}}}));
  ASSERT_TRUE(server_
                  .Create(kube::kMigLayoutsPath, Layout({{"0",
                                                          {{"revision", 2},
                                                           {"migEnabled", true},
                                                           {"layout", "3g.40gb@0 3g.40gb@4"}}}}))
                  .ok());
  auto r = Sync();
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Json st = Object()["status"]["gpus"]["0"];
  EXPECT_EQ(st["state"], "Failed");
  EXPECT_EQ(st["observedRevision"], 2);
  EXPECT_EQ(st["message"],
            "GPU 0 (A100-80GB): not changed, instances to destroy are in use: 2g.20gb@4 (GI 2) "
            "by pid 31337");
  EXPECT_EQ(st["layout"], "3g.40gb@0 2g.20gb@4 1g.10gb@6");
  EXPECT_TRUE(fake.State().is_null()) << "nothing changed on the node";
}

struct BadSpec {
  const char* name;
  Json entry;
  int64_t observed;
  const char* message;
};

TEST_F(MigLayoutSync, BadSpecsAreFailedWithAClearMessage) {
  const std::vector<BadSpec> cases = {
      {"malformed layout",
       {{"revision", 2}, {"migEnabled", true}, {"layout", "3g.40gb@0,,@4"}},
       2,
       "GPU 0 (A100-80GB): malformed layout token '@4': expected <profile>@<start>"},
      {"unknown profile",
       {{"revision", 2}, {"migEnabled", true}, {"layout", "9g.90gb@0"}},
       2,
       "GPU 0 (A100-80GB): unknown MIG profile '9g.90gb' for A100-80GB (known: "},
      {"illegal layout",
       {{"revision", 2}, {"migEnabled", true}, {"layout", "7g.80gb@0 1g.10gb@6"}},
       2,
       "GPU 0 (A100-80GB): illegal layout: "},
      {"revision missing",
       {{"migEnabled", true}, {"layout", "7g.80gb@0"}},
       0,
       "spec.gpus.0.revision is missing"},
      {"revision not a number",
       {{"revision", "7"}, {"migEnabled", true}},
       0,
       "spec.gpus.0.revision must be an integer >= 1"},
      {"migEnabled missing",
       {{"revision", 2}, {"layout", "7g.80gb@0"}},
       2,
       "spec.gpus.0.migEnabled must be true or false"},
  };
  for (const BadSpec& c : cases) {
    SCOPED_TRACE(c.name);
    FakeNode fake(Node());
    ASSERT_TRUE(server_.Upsert(kube::kMigLayoutsPath, Layout({{"0", c.entry}})).ok());
    auto r = Sync();
    ASSERT_TRUE(r.ok()) << r.status().message();
    const Json st = Object()["status"]["gpus"]["0"];
    EXPECT_EQ(st["state"], "Failed");
    EXPECT_EQ(st["observedRevision"], c.observed);
    EXPECT_EQ(st["message"].get<std::string>().rfind(c.message, 0), 0u) << st.dump();
    EXPECT_TRUE(fake.State().is_null()) << "nothing changed on the node";
    ASSERT_TRUE(server_.Delete(std::string(kube::kMigLayoutsPath) + "/gpu-a").ok());
  }

  FakeNode fake(Node());
  ASSERT_TRUE(
      server_
          .Create(kube::kMigLayoutsPath,
                  Layout({{"4", {{"revision", 5}, {"migEnabled", true}, {"layout", "7g.80gb@0"}}}}))
          .ok());
  auto r = Sync();
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Json st = Object()["status"]["gpus"]["4"];
  EXPECT_EQ(st["state"], "Failed");
  EXPECT_EQ(st["observedRevision"], 5);
  EXPECT_EQ(st["message"], "GPU 4 does not exist on this node (2 GPU(s), indexes 0-1)");
}

}  // namespace
}  // namespace tessera::agent
