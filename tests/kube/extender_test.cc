#include "kube/extender.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <map>
#include <string>
#include <vector>

namespace tessera::kube {
namespace {

// A node as kube-scheduler sends it in a NodeList (nodeCacheCapable: false) and as an informer
// delivers it.
Json NodeJson(const std::string& name, const std::string& product, int gpus,
              const std::string& inventory = "") {
  Json n = R"({
    "metadata": {"name": "", "uid": "0d6a", "resourceVersion": "4711",
                 "labels": {"kubernetes.io/hostname": "", "kubernetes.io/os": "linux"}},
    "spec": {"podCIDR": "10.244.1.0/24", "providerID": "kind://docker/kind/x"},
    "status": {
      "capacity": {"cpu": "96", "ephemeral-storage": "1Ti", "hugepages-1Gi": "0",
                   "memory": "1056758468Ki", "pods": "110"},
      "allocatable": {"cpu": "95500m", "ephemeral-storage": "1Ti", "hugepages-1Gi": "0",
                      "memory": "1054661316Ki", "pods": "110"},
      "conditions": [
        {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
        {"type": "Ready", "status": "True", "reason": "KubeletReady",
         "lastHeartbeatTime": "2026-01-02T03:00:00Z"}],
      "nodeInfo": {"kubeletVersion": "v1.31.0", "architecture": "amd64"}}})"_json;
  n["metadata"]["name"] = name;
  n["metadata"]["labels"]["kubernetes.io/hostname"] = name;
  if (!product.empty()) {
    n["metadata"]["labels"]["nvidia.com/gpu.product"] = product;
    n["metadata"]["labels"]["nvidia.com/gpu.count"] = std::to_string(gpus);
    n["status"]["capacity"]["nvidia.com/gpu"] = std::to_string(gpus);
    n["status"]["allocatable"]["nvidia.com/gpu"] = std::to_string(gpus);
  }
  if (!inventory.empty()) n["metadata"]["annotations"][kAnnotationInventory] = inventory;
  return n;
}

// A pod as kube-scheduler sends it: the full v1.Pod with defaulted fields.
Json PodJson(const std::string& name, const std::string& uid, Json limits, int priority = 0,
             const std::string& node = "", Json annotations = Json::object()) {
  Json p = R"({
    "metadata": {"name": "", "namespace": "ml", "uid": "", "resourceVersion": "1234",
                 "creationTimestamp": "2026-01-02T03:04:05Z",
                 "labels": {"app": "train"},
                 "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update",
                                    "apiVersion": "v1", "time": "2026-01-02T03:04:05Z",
                                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]},
    "spec": {
      "volumes": [{"name": "kube-api-access-x", "projected": {"sources": [], "defaultMode": 420}}],
      "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                      "resources": {"limits": {}, "requests": {"cpu": "2", "memory": "8Gi"}},
                      "terminationMessagePath": "/dev/termination-log",
                      "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
      "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
      "dnsPolicy": "ClusterFirst", "serviceAccountName": "default", "serviceAccount": "default",
      "securityContext": {}, "schedulerName": "default-scheduler",
      "tolerations": [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300}],
      "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"},
    "status": {"phase": "Pending", "qosClass": "Burstable"}})"_json;
  p["metadata"]["name"] = name;
  p["metadata"]["uid"] = uid;
  p["spec"]["containers"][0]["resources"]["limits"] = limits;
  for (auto it = limits.begin(); it != limits.end(); ++it)
    p["spec"]["containers"][0]["resources"]["requests"][it.key()] = it.value();
  p["spec"]["priority"] = priority;
  if (!node.empty()) {
    p["spec"]["nodeName"] = node;
    p["status"]["phase"] = "Running";
  }
  if (!annotations.empty()) p["metadata"]["annotations"] = annotations;
  return p;
}

std::string Inventory(const std::string& model, const std::vector<std::string>& layouts) {
  std::vector<GpuInventoryEntry> gpus;
  for (size_t i = 0; i < layouts.size(); ++i)
    gpus.push_back({static_cast<int>(i), "GPU-" + model + "-" + std::to_string(i), model, 0,
                    !layouts[i].empty(), layouts[i], true});
  for (auto& g : gpus)
    g.memory_mib = GpuCatalog::Builtin().Get(*GpuCatalog::Builtin().Find(model)).memory_mib;
  return EncodeInventory(gpus);
}

Json Args(const Json& pod, const std::vector<std::string>& names) {
  return {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", names}};
}

struct BindCall {
  std::string ns, name, uid, node;
  std::map<std::string, std::string> annotations;
};

class ExtenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // gpu-a: 2 H100s, GPU 0 partitioned 3g.40gb@0 3g.40gb@4, GPU 1 whole.
    ASSERT_TRUE(ext_.UpsertNode(NodeJson("gpu-a", "NVIDIA-H100-80GB-HBM3", 2,
                                         Inventory("H100-80GB", {"3g.40gb@0 3g.40gb@4", ""})))
                    .ok());
    // gpu-b: 1 A100-80GB, both 3g.40gb instances taken by bound pods below.
    ASSERT_TRUE(ext_.UpsertNode(NodeJson("gpu-b", "NVIDIA-A100-SXM4-80GB", 1,
                                         Inventory("A100-80GB", {"3g.40gb@0 3g.40gb@4"})))
                    .ok());
    // gpu-c: 4 T4s, no inventory (GFD labels only).
    ASSERT_TRUE(ext_.UpsertNode(NodeJson("gpu-c", "Tesla-T4", 4)).ok());
    ASSERT_TRUE(ext_.UpsertNode(NodeJson("cpu-1", "", 0)).ok());
    for (int start : {0, 4}) {
      Assignment a{"gpu-b", AssignmentKind::kMig, {0}, {}, "3g.40gb@" + std::to_string(start), 0, 0,
                   0};
      ASSERT_TRUE(
          ext_.UpsertPod(PodJson("old-" + std::to_string(start), "uid-old-" + std::to_string(start),
                                 R"({"nvidia.com/mig-3g.40gb": "1"})"_json, 0, "gpu-b",
                                 Json{{kAnnotationAssignment, EncodeAssignment(a)}}))
              .ok());
    }
  }

  BindFn Recorder() {
    return [this](const std::string& ns, const std::string& name, const std::string& uid,
                  const std::string& node, const std::map<std::string, std::string>& ann) {
      binds_.push_back({ns, name, uid, node, ann});
      return Status::Ok();
    };
  }

  // 70 one-GPU pods of 2 cores, then two-GPU pods of `cores` cores: the change is found at the
  // `found_at`-th.
  void FollowAChange(const char* cores, int found_at) {
    auto learn = [this](const std::string& name, const char* gpus, const char* cpu) {
      Json pod = PodJson(name, "uid-" + name, Json{{"nvidia.com/gpu", gpus}});
      pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu;
      ASSERT_TRUE(ext_.UpsertPod(pod).ok());
      (void)ext_.Filter(Args(pod, {"gpu-a", "gpu-c"}));
    };
    for (int i = 0; i < 70; ++i) learn("one-" + std::to_string(i), "1", "2");
    for (int i = 0; i + 1 < found_at; ++i) learn("two-" + std::to_string(i), "2", cores);
    EXPECT_EQ(ext_.stats().mix_changes, 0);
    learn("two-last", "2", cores);
    EXPECT_EQ(ext_.stats().mix_changes, 1);
    EXPECT_EQ(ext_.stats().learned_arrivals, 70 + found_at);
  }

  Extender ext_;
  std::vector<BindCall> binds_;
};

TEST_F(ExtenderTest, FilterNodeCacheCapable) {
  const Json pod = PodJson("train-0", "uid-t0", R"({"nvidia.com/mig-3g.40gb": "1"})"_json);
  const Json res = ext_.Filter(Args(pod, {"gpu-a", "gpu-b", "gpu-c", "cpu-1", "ghost"}));
  EXPECT_EQ(res["Error"], "");
  EXPECT_TRUE(res["Nodes"].is_null());
  EXPECT_EQ(res["NodeNames"], Json({"gpu-a"}));
  EXPECT_EQ(res["FailedNodes"], Json({{"gpu-b", "no free 3g.40gb slice"}}));
  const Json& un = res["FailedAndUnresolvableNodes"];
  EXPECT_EQ(un["gpu-c"], "GPU model T4 has no MIG profile 3g.40gb");
  EXPECT_EQ(un["cpu-1"], "node has no GPUs");
  EXPECT_EQ(un["ghost"], "node not known to the Tessera extender");
}

TEST_F(ExtenderTest, FilterFullNodeList) {
  // nodeCacheCapable: false sends the node objects; the extender returns the kept ones.
  Json list = {{"metadata", Json::object()},
               {"items", {NodeJson("gpu-c", "Tesla-T4", 4), NodeJson("cpu-2", "", 0)}}};
  const Json pod = PodJson("infer", "uid-i", R"({"tessera.io/gpu-memory": "6Gi"})"_json);
  const Json res = ext_.Filter({{"Pod", pod}, {"Nodes", list}, {"NodeNames", nullptr}});
  EXPECT_EQ(res["Error"], "");
  EXPECT_TRUE(res["NodeNames"].is_null());
  ASSERT_EQ(res["Nodes"]["items"].size(), 1u);
  EXPECT_EQ(res["Nodes"]["items"][0]["metadata"]["name"], "gpu-c");
  EXPECT_EQ(res["FailedAndUnresolvableNodes"]["cpu-2"], "node has no GPUs");
  EXPECT_EQ(ext_.stats().nodes, 5u);  // cpu-2 learned from the request
}

TEST_F(ExtenderTest, NonGpuPodsPassAndInvalidPodsExplain) {
  const Json web = PodJson("web", "uid-w", Json::object());
  Json res = ext_.Filter(Args(web, {"gpu-a", "cpu-1", "ghost"}));
  EXPECT_EQ(res["NodeNames"], Json({"gpu-a", "cpu-1", "ghost"}));
  EXPECT_TRUE(res["FailedNodes"].empty());

  const Json bad =
      PodJson("bad", "uid-b", R"({"nvidia.com/gpu": "2", "tessera.io/gpu-memory": "10Gi"})"_json);
  res = ext_.Filter(Args(bad, {"gpu-a", "gpu-c"}));
  EXPECT_EQ(res["NodeNames"], Json::array());
  const std::string msg = res["FailedAndUnresolvableNodes"]["gpu-a"];
  EXPECT_EQ(msg.rfind("invalid GPU request: nvidia.com/gpu: 2 cannot be combined with "
                      "tessera.io/gpu-memory",
                      0),
            0u)
      << msg;
  EXPECT_EQ(ext_.stats().invalid_pods, 1);

  const Json prio = ext_.Prioritize(Args(web, {"gpu-a", "cpu-1"}));
  EXPECT_EQ(prio, Json::parse(R"([{"Host": "gpu-a", "Score": 0}, {"Host": "cpu-1", "Score": 0}])"));

  EXPECT_FALSE(ext_.Filter(Json::object())["Error"].get<std::string>().empty());
  EXPECT_FALSE(ext_.Filter(Json("x"))["Error"].get<std::string>().empty());
}

TEST_F(ExtenderTest, FilterReasonsForWholeGpusAndMemory) {
  const Json big = PodJson("big", "uid-big", R"({"nvidia.com/gpu": "4"})"_json);
  Json res = ext_.Filter(Args(big, {"gpu-a", "gpu-c"}));
  EXPECT_EQ(res["NodeNames"], Json({"gpu-c"}));
  EXPECT_EQ(res["FailedAndUnresolvableNodes"]["gpu-a"], "node has 2 usable GPUs, the pod needs 4");

  const Json huge = PodJson("huge", "uid-h", R"({"tessera.io/gpu-memory": "20Gi"})"_json);
  res = ext_.Filter(Args(huge, {"gpu-c"}));
  EXPECT_EQ(res["FailedAndUnresolvableNodes"]["gpu-c"],
            "insufficient GPU memory: 20 GiB requested, a T4 has 15 GiB");

  // Fill gpu-c's four T4s with 12 GiB MPS clients, then ask for 6 GiB more.
  for (int i = 0; i < 4; ++i) {
    Assignment a{"gpu-c", AssignmentKind::kMps, {i}, {}, "", 0, 80, 12288};
    ASSERT_TRUE(ext_.UpsertPod(PodJson("mps-" + std::to_string(i), "uid-mps-" + std::to_string(i),
                                       R"({"tessera.io/gpu-memory": "12Gi"})"_json, 0, "gpu-c",
                                       Json{{kAnnotationAssignment, EncodeAssignment(a)}}))
                    .ok());
  }
  const Json more = PodJson("more", "uid-m", R"({"tessera.io/gpu-memory": "6Gi"})"_json);
  res = ext_.Filter(Args(more, {"gpu-c"}));
  EXPECT_EQ(res["FailedNodes"]["gpu-c"],
            "insufficient GPU memory: 6 GiB requested, at most 3 GiB free on one GPU");
  // The same pod fits once one client is gone.
  ext_.RemovePod("uid-mps-2");
  res = ext_.Filter(Args(more, {"gpu-c"}));
  EXPECT_EQ(res["NodeNames"], Json({"gpu-c"}));
}

TEST_F(ExtenderTest, PrioritizeScoresWithinRange) {
  const Json pod = PodJson("share", "uid-s", R"({"nvidia.com/gpu": "1"})"_json);
  const Json res = ext_.Prioritize(Args(pod, {"gpu-a", "gpu-c", "cpu-1"}));
  ASSERT_TRUE(res.is_array());
  ASSERT_EQ(res.size(), 3u);
  std::map<std::string, int64_t> score;
  for (const Json& h : res) {
    ASSERT_TRUE(h.contains("Host") && h.contains("Score"));
    const int64_t s = h["Score"];
    EXPECT_GE(s, 0);
    EXPECT_LE(s, 10);
    score[h["Host"]] = s;
  }
  EXPECT_EQ(score["cpu-1"], 0);
  EXPECT_EQ(std::max(score["gpu-a"], score["gpu-c"]), 10);  // best feasible node gets 10
}

TEST_F(ExtenderTest, BindWritesAssignmentAndTakesTheSlice) {
  const Json pod = PodJson("train-0", "uid-t0", R"({"nvidia.com/mig-3g.40gb": "1"})"_json);
  ASSERT_EQ(ext_.Filter(Args(pod, {"gpu-a"}))["NodeNames"], Json({"gpu-a"}));
  const Json bind = R"({"PodName": "train-0", "PodNamespace": "ml", "PodUID": "uid-t0",
                         "Node": "gpu-a"})"_json;
  EXPECT_EQ(ext_.Bind(bind, Recorder()), Json({{"Error", ""}}));
  ASSERT_EQ(binds_.size(), 1u);
  EXPECT_EQ(binds_[0].ns, "ml");
  EXPECT_EQ(binds_[0].name, "train-0");
  EXPECT_EQ(binds_[0].uid, "uid-t0");
  EXPECT_EQ(binds_[0].node, "gpu-a");
  auto a = DecodeAssignment(binds_[0].annotations.at(kAnnotationAssignment));
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->kind, AssignmentKind::kMig);
  EXPECT_EQ(a->node, "gpu-a");
  EXPECT_EQ(a->gpus, std::vector<int>{0});
  EXPECT_EQ(a->uuids, std::vector<std::string>{"GPU-H100-80GB-0"});
  EXPECT_EQ(a->mig_instance, "3g.40gb@0");
  EXPECT_EQ(ext_.AssignmentOf("uid-t0"), *a);

  // The second 3g.40gb goes to the other instance; the third finds none.
  const Json pod1 = PodJson("train-1", "uid-t1", R"({"nvidia.com/mig-3g.40gb": "1"})"_json);
  ASSERT_EQ(ext_.Filter(Args(pod1, {"gpu-a"}))["NodeNames"], Json({"gpu-a"}));
  EXPECT_EQ(ext_.Bind(R"({"PodName": "train-1", "PodNamespace": "ml", "PodUID": "uid-t1",
                          "Node": "gpu-a"})"_json,
                      Recorder()),
            Json({{"Error", ""}}));
  EXPECT_EQ(DecodeAssignment(binds_[1].annotations.at(kAnnotationAssignment))->mig_instance,
            "3g.40gb@4");
  const Json pod2 = PodJson("train-2", "uid-t2", R"({"nvidia.com/mig-3g.40gb": "1"})"_json);
  EXPECT_EQ(ext_.Filter(Args(pod2, {"gpu-a"}))["FailedNodes"]["gpu-a"], "no free 3g.40gb slice");

  // Binding to a node that does not fit is refused without calling the API.
  const Json r = ext_.Bind(R"({"PodName": "train-2", "PodNamespace": "ml", "PodUID": "uid-t2",
                               "Node": "gpu-a"})"_json,
                           Recorder());
  EXPECT_EQ(r["Error"], "cannot bind ml/train-2 to gpu-a: no free 3g.40gb slice");
  EXPECT_EQ(binds_.size(), 2u);
  EXPECT_EQ(ext_.stats().bind_errors, 1);
}

TEST_F(ExtenderTest, BindFailureReleasesTheSlice) {
  const Json pod = PodJson("w", "uid-w", R"({"nvidia.com/gpu": "2"})"_json);
  ASSERT_EQ(ext_.Filter(Args(pod, {"gpu-c"}))["NodeNames"], Json({"gpu-c"}));
  BindFn refuse = [](const std::string&, const std::string&, const std::string&, const std::string&,
                     const std::map<std::string, std::string>&) {
    return Status(StatusCode::kAlreadyExists, "pod w is already assigned to node \"x\"");
  };
  const Json r = ext_.Bind(R"({"PodName": "w", "PodNamespace": "ml", "PodUID": "uid-w",
                               "Node": "gpu-c"})"_json,
                           refuse);
  EXPECT_EQ(r["Error"], "binding ml/w to gpu-c: pod w is already assigned to node \"x\"");
  EXPECT_FALSE(ext_.AssignmentOf("uid-w").has_value());
  // Not bound: another 4-GPU pod still fits the four T4s.
  const Json four = PodJson("four", "uid-4", R"({"nvidia.com/gpu": "4"})"_json);
  EXPECT_EQ(ext_.Filter(Args(four, {"gpu-c"}))["NodeNames"], Json({"gpu-c"}));

  // Pods the extender does not track as pending GPU pods are never bound.
  const Json unknown = ext_.Bind(R"({"PodName": "web", "PodNamespace": "ml", "PodUID": "u",
                                     "Node": "cpu-1"})"_json,
                                 Recorder());
  EXPECT_NE(unknown["Error"].get<std::string>().find("is not a pending GPU pod known"),
            std::string::npos)
      << unknown;
  EXPECT_TRUE(binds_.empty());
}

TEST_F(ExtenderTest, BoundPodWithAnInvalidAssignmentStillHoldsItsGpus) {
  // gpu-c has 4 T4s; a pod bound there with an annotation that does not decode holds 3.
  EXPECT_FALSE(ext_.UpsertPod(PodJson("foreign", "uid-f", R"({"nvidia.com/gpu": "3"})"_json, 0,
                                      "gpu-c", Json{{kAnnotationAssignment, "not json"}}))
                   .ok());
  const Json two = PodJson("two", "uid-2", R"({"nvidia.com/gpu": "2"})"_json);
  EXPECT_EQ(ext_.Filter(Args(two, {"gpu-c"}))["FailedNodes"]["gpu-c"],
            "insufficient free GPUs: 2 requested, 1 idle");
  const Json one = PodJson("one", "uid-1", R"({"nvidia.com/gpu": "1"})"_json);
  EXPECT_EQ(ext_.Filter(Args(one, {"gpu-c"}))["NodeNames"], Json({"gpu-c"}));
}

TEST_F(ExtenderTest, CountsMigWithoutInventory) {
  Json node = NodeJson("mig-x", "NVIDIA-A100-SXM4-80GB", 0);
  node["metadata"]["labels"]["nvidia.com/mig.strategy"] = "mixed";
  node["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "2";
  ASSERT_TRUE(ext_.UpsertNode(node).ok());
  const Json pod = PodJson("small", "uid-s1", R"({"nvidia.com/mig-1g.10gb": "1"})"_json);
  ASSERT_EQ(ext_.Filter(Args(pod, {"mig-x"}))["NodeNames"], Json({"mig-x"}));
  ASSERT_EQ(ext_.Bind(R"({"PodName": "small", "PodNamespace": "ml", "PodUID": "uid-s1",
                          "Node": "mig-x"})"_json,
                      Recorder())["Error"],
            "");
  auto a = DecodeAssignment(binds_[0].annotations.at(kAnnotationAssignment));
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->gpus.empty());
  EXPECT_EQ(a->mig_instance, "1g.10gb");
  const Json pod2 = PodJson("small2", "uid-s2", R"({"nvidia.com/mig-1g.10gb": "1"})"_json);
  ASSERT_EQ(ext_.Filter(Args(pod2, {"mig-x"}))["NodeNames"], Json({"mig-x"}));
  ASSERT_EQ(ext_.Bind(R"({"PodName": "small2", "PodNamespace": "ml", "PodUID": "uid-s2",
                          "Node": "mig-x"})"_json,
                      Recorder())["Error"],
            "");
  const Json pod3 = PodJson("small3", "uid-s3", R"({"nvidia.com/mig-1g.10gb": "1"})"_json);
  EXPECT_EQ(ext_.Filter(Args(pod3, {"mig-x"}))["FailedNodes"]["mig-x"], "no free 1g.10gb slice");
  const Json pod4 = PodJson("big", "uid-s4", R"({"nvidia.com/mig-3g.40gb": "1"})"_json);
  EXPECT_EQ(ext_.Filter(Args(pod4, {"mig-x"}))["FailedAndUnresolvableNodes"]["mig-x"],
            "node offers no 3g.40gb MIG instances");
}

TEST_F(ExtenderTest, PreemptKeepsHelpfulNodesAndDropsOthers) {
  // gpu-b's two 3g.40gb instances are held by priority-0 pods; a priority-100 pod needs one.
  const Json pod = PodJson("urgent", "uid-u", R"({"nvidia.com/mig-3g.40gb": "1"})"_json, 100);
  // kube-scheduler proposes a victim on gpu-b that holds a slice, and on gpu-c one that holds
  // nothing relevant (T4s have no MIG): gpu-c must be dropped.
  Json args = {{"Pod", pod},
               {"NodeNameToVictims", nullptr},
               {"NodeNameToMetaVictims",
                {{"gpu-b", {{"Pods", {{{"UID", "uid-old-0"}}}}, {"NumPDBViolations", 0}}},
                 {"gpu-c", {{"Pods", {{{"UID", "uid-web"}}}}, {"NumPDBViolations", 1}}}}}};
  Json res = ext_.Preempt(args);
  ASSERT_TRUE(res.contains("NodeNameToMetaVictims"));
  const Json& v = res["NodeNameToMetaVictims"];
  EXPECT_EQ(v.size(), 1u) << v;
  EXPECT_EQ(v["gpu-b"]["Pods"], Json::parse(R"([{"UID": "uid-old-0"}])"));
  EXPECT_EQ(v["gpu-b"]["NumPDBViolations"], 0);

  // Victims that free nothing on the GPU: the MIG pods there are counted by kube-scheduler
  // itself, so its choice stands on its own view and the extender adds none of them; the node
  // is dropped.
  args["NodeNameToMetaVictims"] = {
      {"gpu-b", {{"Pods", {{{"UID", "uid-cpu"}}}}, {"NumPDBViolations", 0}}}};
  res = ext_.Preempt(args);
  EXPECT_TRUE(res["NodeNameToMetaVictims"].empty()) << res;

  // Full-victims form (nodeCacheCapable: false) is answered in meta form too.
  Json full = {
      {"Pod", pod},
      {"NodeNameToMetaVictims", nullptr},
      {"NodeNameToVictims",
       {{"gpu-b",
         {{"Pods",
           {PodJson("old-4", "uid-old-4", R"({"nvidia.com/mig-3g.40gb": "1"})"_json, 0, "gpu-b")}},
          {"NumPDBViolations", 0}}}}}};
  res = ext_.Preempt(full);
  EXPECT_EQ(res["NodeNameToMetaVictims"]["gpu-b"]["Pods"],
            Json::parse(R"([{"UID": "uid-old-4"}])"));

  // Equal priority: nothing to add, the node is dropped.
  const Json peer = PodJson("peer", "uid-p", R"({"nvidia.com/mig-3g.40gb": "1"})"_json, 0);
  args["Pod"] = peer;
  EXPECT_TRUE(ext_.Preempt(args)["NodeNameToMetaVictims"].empty());
}

TEST_F(ExtenderTest, PreemptAddsSharesKubeSchedulerCannotSeeButWaitsForTerminatingPods) {
  // gpu-c has 4 T4s. Three hold priority-0 whole-GPU pods; a priority-0 share holds the fourth,
  // which kube-scheduler does not count (it ignores share resources).
  for (int i = 0; i < 3; ++i) {
    const std::string n = std::to_string(i);
    ASSERT_TRUE(ext_.UpsertPod(PodJson("whole-" + n, "uid-w" + n, R"({"nvidia.com/gpu": "1"})"_json,
                                       0, "gpu-c"))
                    .ok());
  }
  ASSERT_TRUE(ext_.UpsertPod(PodJson("share", "uid-sh", R"({"tessera.io/gpu-memory": "4Gi"})"_json,
                                     0, "gpu-c"))
                  .ok());
  const Json urgent = PodJson("urgent", "uid-u1", R"({"nvidia.com/gpu": "2"})"_json, 100);
  // kube-scheduler counts one GPU free, so it names one whole-GPU victim: not enough here.
  Json args = {{"Pod", urgent},
               {"NodeNameToVictims", nullptr},
               {"NodeNameToMetaVictims",
                {{"gpu-c", {{"Pods", {{{"UID", "uid-w0"}}}}, {"NumPDBViolations", 0}}}}}};
  Json res = ext_.Preempt(args);
  EXPECT_EQ(res["NodeNameToMetaVictims"]["gpu-c"]["Pods"],
            Json::parse(R"([{"UID": "uid-w0"}, {"UID": "uid-sh"}])"))
      << res;

  // Without the share, nothing kube-scheduler cannot see is in the way: its single victim does
  // not free two GPUs, and the extender adds none of the whole-GPU pods it counts itself.
  ext_.RemovePod("uid-sh");
  ASSERT_TRUE(
      ext_.UpsertPod(PodJson("share2", "uid-sh2", R"({"nvidia.com/gpu": "1"})"_json, 0, "gpu-c"))
          .ok());
  res = ext_.Preempt(args);
  EXPECT_TRUE(res["NodeNameToMetaVictims"].empty()) << res;

  // While a pod on the node terminates, capacity is being freed and this view may lag
  // kube-scheduler's: no victims are added (the pod retries once the deletion is seen).
  ext_.RemovePod("uid-sh2");
  ASSERT_TRUE(ext_.UpsertPod(PodJson("share", "uid-sh", R"({"tessera.io/gpu-memory": "4Gi"})"_json,
                                     0, "gpu-c"))
                  .ok());
  Json leaving = PodJson("whole-1", "uid-w1", R"({"nvidia.com/gpu": "1"})"_json, 0, "gpu-c");
  leaving["metadata"]["deletionTimestamp"] = "2026-01-02T03:05:00Z";
  ASSERT_TRUE(ext_.UpsertPod(leaving).ok());
  res = ext_.Preempt(args);
  EXPECT_TRUE(res["NodeNameToMetaVictims"].empty()) << res;
}

TEST_F(ExtenderTest, PodLifecycleFromInformers) {
  const Json pending = PodJson("p", "uid-p", R"({"nvidia.com/gpu": "4"})"_json);
  ASSERT_TRUE(ext_.UpsertPod(pending).ok());
  Json bound = PodJson("p", "uid-p", R"({"nvidia.com/gpu": "4"})"_json, 0, "gpu-c");
  ASSERT_TRUE(ext_.UpsertPod(bound).ok());
  // Bound without an assignment annotation (e.g. by another scheduler): still counted.
  const Json other = PodJson("o", "uid-o", R"({"nvidia.com/gpu": "1"})"_json);
  EXPECT_EQ(ext_.Filter(Args(other, {"gpu-c"}))["FailedNodes"]["gpu-c"],
            "insufficient free GPUs: 1 requested, 0 idle");
  bound["status"]["phase"] = "Succeeded";
  ASSERT_TRUE(ext_.UpsertPod(bound).ok());
  EXPECT_EQ(ext_.Filter(Args(other, {"gpu-c"}))["NodeNames"], Json({"gpu-c"}));

  EXPECT_FALSE(ext_.UpsertNode(NodeJson("weird", "NVIDIA-L40S", 2)).ok());
  EXPECT_EQ(ext_.Filter(Args(other, {"weird"}))["FailedAndUnresolvableNodes"]["weird"],
            "node weird: unknown GPU product \"NVIDIA-L40S\" (known models: " +
                GpuCatalog::Builtin().KnownNames() + ")");
  ext_.RemoveNode("weird");
  EXPECT_EQ(ext_.Filter(Args(other, {"weird"}))["FailedAndUnresolvableNodes"]["weird"],
            "node not known to the Tessera extender");
}

// The pods bound when the extender starts (old-0 and old-4 of the fixture) are the placement
// policy's past; pods it is asked to place are arrivals, each learned once; a pod found bound
// after the first arrival is one of them.
TEST_F(ExtenderTest, PodsBoundAtStartAreThePolicysPastAndArrivalsAreNot) {
  auto learned = [this] {
    const ExtenderStats s = ext_.stats();
    return std::make_pair(s.learned_past, s.learned_arrivals);
  };
  EXPECT_EQ(learned(), std::make_pair(int64_t{2}, int64_t{0}));
  const Json pending = PodJson("p", "uid-p", R"({"nvidia.com/gpu": "1"})"_json);
  ASSERT_TRUE(ext_.UpsertPod(pending).ok());
  EXPECT_EQ(learned(), std::make_pair(int64_t{2}, int64_t{0}));
  (void)ext_.Filter(Args(pending, {"gpu-c"}));
  (void)ext_.Prioritize(Args(pending, {"gpu-c"}));
  EXPECT_EQ(learned(), std::make_pair(int64_t{2}, int64_t{1}));
  ASSERT_TRUE(
      ext_.UpsertPod(PodJson("p", "uid-p", R"({"nvidia.com/gpu": "1"})"_json, 0, "gpu-c")).ok());
  ASSERT_TRUE(
      ext_.UpsertPod(PodJson("q", "uid-q", R"({"nvidia.com/gpu": "1"})"_json, 0, "gpu-c")).ok());
  EXPECT_EQ(learned(), std::make_pair(int64_t{2}, int64_t{2}));
  // Pods that leave are forgotten, so a long-running extender does not grow with every pod it
  // ever saw; each was still learned once.
  EXPECT_EQ(ext_.stats().learned_tracked, 4u);
  ext_.RemovePod("uid-p");
  Json done = PodJson("q", "uid-q", R"({"nvidia.com/gpu": "1"})"_json, 0, "gpu-c");
  done["status"]["phase"] = "Succeeded";
  ASSERT_TRUE(ext_.UpsertPod(done).ok());
  EXPECT_EQ(ext_.stats().learned_tracked, 2u);
  EXPECT_EQ(learned(), std::make_pair(int64_t{2}, int64_t{2}));
}

// The policy follows a change of the pods' mix (TesseraConfig::mix_window). The reference is
// the 2 pods bound at start and 70 one-GPU pods of 2 cores. Two-GPU pods of 4 cores (the same
// cores per GPU) are a disjoint shape class, found at the 32nd (L1 distance 2 > eps(72) +
// eps(32) = 1.90 over the 18 shape classes); two-GPU pods of 2 cores are also a disjoint class
// of cores per GPU, found at the 16th (2 > eps(72) + eps(16) = 1.84 over the 6 CPU classes).
// /metrics counts the change.
TEST_F(ExtenderTest, TheLearnedMixFollowsAChangeOfThePodsShape) {
  FollowAChange("4", 32);
}

TEST_F(ExtenderTest, TheLearnedMixFollowsAChangeOfThePodsCpuPerGpu) {
  FollowAChange("2", 16);
}

// A node update reaches the next request: gpu-a's whole GPU turning unhealthy leaves no GPU for a
// 1-GPU pod (GPU 0 is MIG-partitioned), and its recovery brings it back.
TEST_F(ExtenderTest, NodeUpdatesReachTheNextFilter) {
  const Json pod = PodJson("one", "uid-one", R"({"nvidia.com/gpu": "1"})"_json);
  ASSERT_EQ(ext_.Filter(Args(pod, {"gpu-a"}))["NodeNames"], Json({"gpu-a"}));
  auto inventory = [](bool gpu1_healthy) {
    std::vector<GpuInventoryEntry> gpus = {
        {0, "GPU-H100-0", "H100-80GB", 81920, true, "3g.40gb@0 3g.40gb@4", true},
        {1, "GPU-H100-1", "H100-80GB", 81920, false, "", gpu1_healthy}};
    return EncodeInventory(gpus);
  };
  ASSERT_TRUE(
      ext_.UpsertNode(NodeJson("gpu-a", "NVIDIA-H100-80GB-HBM3", 2, inventory(false))).ok());
  EXPECT_EQ(ext_.Filter(Args(pod, {"gpu-a"}))["FailedNodes"]["gpu-a"],
            "insufficient free GPUs: 1 requested, 0 idle (and 1 MIG-partitioned)");
  ASSERT_TRUE(ext_.UpsertNode(NodeJson("gpu-a", "NVIDIA-H100-80GB-HBM3", 2, inventory(true))).ok());
  EXPECT_EQ(ext_.Filter(Args(pod, {"gpu-a"}))["NodeNames"], Json({"gpu-a"}));
}

// The fleet view is built at the first prioritize and then kept: binds and pod updates rebuild
// the nodes they touch only; a node removed rebuilds it whole.
TEST_F(ExtenderTest, TheFleetViewIsRebuiltOnlyWhenANodeLeavesOrResizes) {
  const Json pod = PodJson("one", "uid-one", R"({"nvidia.com/gpu": "1"})"_json);
  EXPECT_EQ(ext_.stats().view_rebuilds, 0);
  (void)ext_.Prioritize(Args(pod, {"gpu-a", "gpu-c"}));
  EXPECT_EQ(ext_.stats().view_rebuilds, 1);
  const Json bind = R"({"PodName": "one", "PodNamespace": "ml", "PodUID": "uid-one",
                        "Node": "gpu-c"})"_json;
  ASSERT_TRUE(ext_.UpsertPod(pod).ok());
  ASSERT_EQ(ext_.Bind(bind, Recorder())["Error"], "");
  ASSERT_TRUE(ext_.UpsertNode(NodeJson("gpu-c", "Tesla-T4", 4)).ok());
  const Json two = PodJson("two", "uid-two", R"({"nvidia.com/gpu": "1"})"_json);
  (void)ext_.Prioritize(Args(two, {"gpu-a", "gpu-c"}));
  EXPECT_EQ(ext_.stats().view_rebuilds, 1);
  ext_.RemoveNode("gpu-a");
  (void)ext_.Prioritize(Args(two, {"gpu-c"}));
  EXPECT_EQ(ext_.stats().view_rebuilds, 2);
}

// Prioritize takes each candidate's fit from the filter call just before it for the same pod,
// and asks the selector again once a node or its pods changed, or for another pod.
TEST_F(ExtenderTest, PrioritizeReusesTheFilterVerdictsUntilSomethingChanges) {
  const Json pod = PodJson("pair", "uid-pair", R"({"nvidia.com/gpu": "2"})"_json);
  const Json filtered = ext_.Filter(Args(pod, {"gpu-a", "gpu-c"}));
  ASSERT_EQ(filtered["NodeNames"], Json({"gpu-c"}));
  EXPECT_EQ(ext_.stats().fits_reused, 0);
  auto score = [](const Json& out, const std::string& node) {
    for (const Json& e : out)
      if (e["Host"] == node) return e["Score"].get<int64_t>();
    return int64_t{-1};
  };
  Json out = ext_.Prioritize(Args(pod, {"gpu-a", "gpu-c"}));
  EXPECT_EQ(ext_.stats().fits_reused, 2);
  EXPECT_EQ(score(out, "gpu-a"), 0);
  EXPECT_EQ(score(out, "gpu-c"), 10);

  // A node update that changes nothing the extender keeps (a status heartbeat) keeps them.
  ASSERT_EQ(ext_.Filter(Args(pod, {"gpu-a", "gpu-c"}))["NodeNames"], Json({"gpu-c"}));
  Json heartbeat = NodeJson("gpu-c", "Tesla-T4", 4);
  heartbeat["metadata"]["resourceVersion"] = "4712";
  heartbeat["status"]["conditions"][1]["lastHeartbeatTime"] = "2026-01-02T03:00:10Z";
  ASSERT_TRUE(ext_.UpsertNode(heartbeat).ok());
  out = ext_.Prioritize(Args(pod, {"gpu-a", "gpu-c"}));
  EXPECT_EQ(ext_.stats().fits_reused, 4);
  EXPECT_EQ(score(out, "gpu-c"), 10);

  // Another pod: its fits are its own.
  const Json one = PodJson("one", "uid-one", R"({"nvidia.com/gpu": "1"})"_json);
  out = ext_.Prioritize(Args(one, {"gpu-a", "gpu-c"}));
  EXPECT_EQ(ext_.stats().fits_reused, 4);
  EXPECT_GT(score(out, "gpu-a") + score(out, "gpu-c"), 0);

  // Three of gpu-c's four GPUs are taken after the filter: the pair no longer fits there.
  ASSERT_EQ(ext_.Filter(Args(pod, {"gpu-a", "gpu-c"}))["NodeNames"], Json({"gpu-c"}));
  ASSERT_TRUE(
      ext_.UpsertPod(PodJson("three", "uid-three", R"({"nvidia.com/gpu": "3"})"_json, 0, "gpu-c"))
          .ok());
  out = ext_.Prioritize(Args(pod, {"gpu-c"}));
  EXPECT_EQ(ext_.stats().fits_reused, 4);
  EXPECT_EQ(score(out, "gpu-c"), 0);
}

// Prioritize scores the candidates in the whole fleet, not in a cluster of the candidates
// alone. Half the GPU pods seen are pinned, a quarter to H100s and a quarter to T4s; the
// policy's model prices make an unpinned pod avoid the model whose free GPUs that pinned demand
// would claim most. Among the two candidates alone (8 H100s, 4 T4s) that is the T4s; in the
// fleet, with 10 more T4 nodes, it is the H100s.
TEST(ExtenderFleetTest, PrioritizeScoresTheCandidatesInTheWholeFleet) {
  auto scores = [](int more_t4_nodes) {
    Extender ext;
    EXPECT_TRUE(ext.UpsertNode(NodeJson("h100-0", "NVIDIA-H100-80GB-HBM3", 8)).ok());
    for (int i = 0; i <= more_t4_nodes; ++i)
      EXPECT_TRUE(ext.UpsertNode(NodeJson("t4-" + std::to_string(i), "Tesla-T4", 4)).ok());
    for (int i = 0; i < 64; ++i) {
      Json ann = Json::object();
      if (i % 4 == 0) ann[kAnnotationGpuModels] = "H100-80GB";
      if (i % 4 == 1) ann[kAnnotationGpuModels] = "T4";
      const Json pod = PodJson("seen-" + std::to_string(i), "uid-seen-" + std::to_string(i),
                               R"({"nvidia.com/gpu": "1"})"_json, 0, "", ann);
      (void)ext.Filter(Args(pod, {"h100-0", "t4-0"}));
    }
    const Json pod = PodJson("new", "uid-new", R"({"nvidia.com/gpu": "1"})"_json);
    std::map<std::string, int64_t> out;
    for (const Json& h : ext.Prioritize(Args(pod, {"h100-0", "t4-0"})))
      out[h["Host"].get<std::string>()] = h["Score"].get<int64_t>();
    return out;
  };
  const auto alone = scores(0);
  EXPECT_EQ(alone.at("h100-0"), 10);
  EXPECT_EQ(alone.at("t4-0"), 0);
  const auto fleet = scores(10);
  EXPECT_EQ(fleet.at("h100-0"), 0);
  EXPECT_EQ(fleet.at("t4-0"), 10);
}

TEST_F(ExtenderTest, ServesHttp) {
  ExtenderServerOptions opts;
  opts.address = "127.0.0.1";
  opts.port = 0;
  opts.prefix = "/scheduler";
  opts.insecure = true;
  ExtenderServer server(ext_, Recorder(), opts);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_GT(server.port(), 0);
  httplib::Client cli("127.0.0.1", server.port());
  cli.set_connection_timeout(5);
  cli.set_read_timeout(5);

  auto health = cli.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);

  // The reference's filter request, verbatim in shape.
  const Json pod = PodJson("train-0", "6f1c-0", R"({"nvidia.com/mig-3g.40gb": "1"})"_json);
  auto filter =
      cli.Post("/scheduler/filter", Args(pod, {"gpu-a", "gpu-b"}).dump(), "application/json");
  ASSERT_TRUE(filter);
  EXPECT_EQ(filter->status, 200);
  const Json fr = Json::parse(filter->body);
  EXPECT_EQ(fr["NodeNames"], Json({"gpu-a"}));
  EXPECT_EQ(fr["FailedNodes"], Json({{"gpu-b", "no free 3g.40gb slice"}}));
  EXPECT_EQ(fr["FailedAndUnresolvableNodes"], Json::object());
  EXPECT_EQ(fr["Error"], "");

  auto prio = cli.Post("/scheduler/prioritize", Args(pod, {"gpu-a"}).dump(), "application/json");
  ASSERT_TRUE(prio);
  EXPECT_EQ(prio->status, 200);
  EXPECT_EQ(Json::parse(prio->body), Json::parse(R"([{"Host": "gpu-a", "Score": 10}])"));

  auto bind = cli.Post(
      "/scheduler/bind",
      R"({"PodName": "train-0", "PodNamespace": "ml", "PodUID": "6f1c-0", "Node": "gpu-a"})",
      "application/json");
  ASSERT_TRUE(bind);
  EXPECT_EQ(bind->status, 200);
  EXPECT_EQ(Json::parse(bind->body), Json({{"Error", ""}}));
  ASSERT_EQ(binds_.size(), 1u);

  auto preempt = cli.Post("/scheduler/preempt",
                          Json({{"Pod", pod}, {"NodeNameToMetaVictims", Json::object()}}).dump(),
                          "application/json");
  ASSERT_TRUE(preempt);
  EXPECT_EQ(preempt->status, 200);
  EXPECT_EQ(Json::parse(preempt->body), Json::parse(R"({"NodeNameToMetaVictims": {}})"));

  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/scheduler/filter", "{not json"},
           {"/scheduler/filter", R"({"NodeNames": ["a"]})"},
           {"/scheduler/prioritize", "[]"},
           {"/scheduler/bind", R"({"PodName": "x"})"},
           {"/scheduler/preempt", ""}}) {
    auto r = cli.Post(path, body, "application/json");
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 400) << path << " " << body;
    const Json e = Json::parse(r->body, nullptr, false);
    ASSERT_TRUE(e.is_object()) << r->body;
    EXPECT_NE(e["Error"].get<std::string>().find("malformed request"), std::string::npos);
  }
  auto metrics = cli.Get("/metrics");
  ASSERT_TRUE(metrics);
  // One prioritize: the fleet view (for MIG pods) was built once.
  EXPECT_NE(metrics->body.find("tessera_extender_view_rebuilds_total 1"), std::string::npos);
  EXPECT_NE(metrics->body.find("tessera_policy_mix_changes_total 0"), std::string::npos);
  // The prioritize after the filter of the same pod took gpu-a's fit from it.
  EXPECT_NE(metrics->body.find("tessera_extender_fits_reused_total 1"), std::string::npos);
  EXPECT_NE(metrics->body.find("tessera_extender_requests_total{verb=\"filter\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics->body.find("tessera_extender_bad_requests_total{verb=\"filter\"} 2"),
            std::string::npos);
  // The fixture's two bound pods are the past; train-0 is the one arrival.
  EXPECT_NE(metrics->body.find("tessera_extender_learned_pods_total{as=\"past\"} 2"),
            std::string::npos);
  EXPECT_NE(metrics->body.find("tessera_extender_learned_pods_total{as=\"arrival\"} 1"),
            std::string::npos);
  server.Stop();
}

TEST(ExtenderServerTest, RefusesBadTlsFiles) {
  Extender ext;
  ExtenderServerOptions opts;
  opts.address = "127.0.0.1";
  opts.port = 0;
  opts.tls.cert_file = "/nonexistent/cert.pem";
  opts.tls.key_file = "/nonexistent/key.pem";
  opts.tls.client_ca_file = "/nonexistent/ca.pem";
  ExtenderServer server(ext, nullptr, opts);
  const Status st = server.Start();
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  opts.tls.key_file.clear();
  ExtenderServer half(ext, nullptr, opts);
  EXPECT_EQ(half.Start().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::kube
