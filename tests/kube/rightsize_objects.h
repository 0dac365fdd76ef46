// Objects for the rightsizing tests (rightsize_test.cc, rightsize_loop_test.cc): a pod of a
// Deployment in namespace ml, a scheduler core, and lookups of the Events a cycle or the fake API
// server holds.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "kube/scheduler_core.h"
#include "tests/kube/fake_apiserver.h"

namespace tessera::kube::rightsizetest {

// A pod of Deployment "llm" (ReplicaSet llm-7f9c) in namespace ml.
inline Json PodJson(const std::string& name, Json limits, Json annotations,
                    const std::string& node = "") {
  Json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", "ml"},
        {"uid", "uid-" + name},
        {"labels", {{"pod-template-hash", "7f9c"}}},
        {"ownerReferences", Json::array({{{"apiVersion", "apps/v1"},
                                          {"kind", "ReplicaSet"},
                                          {"name", "llm-7f9c"},
                                          {"controller", true}}})},
        {"annotations", annotations}}},
      {"spec",
       {{"schedulerName", "tessera"},
        {"containers", Json::array({{{"name", "main"},
                                     {"resources",
                                      {{"limits", limits},
                                       {"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}})}}},
      {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

inline std::unique_ptr<SchedulerCore> Core(int64_t floor_mib = 1024) {
  SchedulerConfig cfg;
  cfg.rightsize_floor_mib = floor_mib;
  auto c = SchedulerCore::Create(cfg);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return std::move(c.value());
}

inline const PodEventAction* EventFor(const CycleOutput& out, const std::string& pod) {
  for (const auto& e : out.events)
    if (e.name == pod) return &e;
  return nullptr;
}

inline bool HasEvent(testing::FakeApiServer& server, const std::string& pod,
                     const std::string& reason) {
  for (const auto& e : server.List("/apis/events.k8s.io/v1/namespaces/ml/events"))
    if (e.value("reason", "") == reason && e["regarding"].value("name", "") == pod) return true;
  return false;
}

}  // namespace tessera::kube::rightsizetest
