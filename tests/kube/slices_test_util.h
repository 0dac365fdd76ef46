// Helpers of the scheduler's slice tests (slices_test.cc, slices_relayout_test.cc): pods as the
// API server returns them, a scheduler core, and what a cycle bound or told.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kube/scheduler_core.h"
#include "tests/kube/test_objects.h"

namespace tessera::kube::slicetest {

inline Json PodJson(const std::string& name, Json limits, Json annotations = Json::object(),
                    const std::string& node = "") {
  Json spec = {
      {"schedulerName", "tessera"},
      {"containers",
       Json::array({{{"name", "main"},
                     {"resources",
                      {{"limits", limits}, {"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}})}};
  if (!node.empty()) spec["nodeName"] = node;
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}, {"annotations", annotations}}},
      {"spec", spec},
      {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
}

inline const Json kMig1g = {{"nvidia.com/mig-1g.10gb", "1"}};
inline const std::vector<std::string> kLayouts = {
    "1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 3g.40gb@4", ""};

inline std::unique_ptr<SchedulerCore> Core(bool relayout = true, bool select_shares = true) {
  SchedulerConfig cfg;
  cfg.gang_settle_s = 0;
  cfg.select_share_mechanism = select_shares;
  cfg.mig_relayout = relayout;
  cfg.mig_relayout_timeout_s = 60;
  auto c = SchedulerCore::Create(cfg);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return std::move(c.value());
}

inline std::map<std::string, Assignment> Assignments(const CycleOutput& out) {
  std::map<std::string, Assignment> m;
  for (const auto& b : out.binds) {
    auto a = DecodeAssignment(b.annotations.at(kAnnotationAssignment));
    EXPECT_TRUE(a.ok()) << a.status().message();
    if (a.ok()) m[b.name] = *a;
  }
  return m;
}

inline std::string Notice(const CycleOutput& out, const std::string& pod) {
  for (const auto& n : out.notices)
    if (n.name == pod) return n.reason + ": " + n.message;
  return "";
}

// A pod bound to `node` holding whole GPUs `gpus` (its assignment names them), asking `cpu`.
inline Json BoundWholePod(const std::string& name, const std::string& node,
                          const std::vector<int>& gpus, const std::string& cpu = "1") {
  std::string list, uuids;
  for (int g : gpus) {
    list += (list.empty() ? "" : ",") + std::to_string(g);
    uuids +=
        std::string(uuids.empty() ? "" : ",") + "\"GPU-" + node + "-" + std::to_string(g) + "\"";
  }
  Json p =
      PodJson(name, {{"nvidia.com/gpu", std::to_string(gpus.size())}},
              {{kAnnotationAssignment, R"({"node":")" + node + R"(","kind":"exclusive","gpus":[)" +
                                           list + R"(],"uuids":[)" + uuids + "]}"}},
              node);
  p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu;
  return p;
}

inline int64_t Gauge(const SchedulerCore& core, const std::string& gauge) {
  const std::string m = core.Metrics(0);
  const std::string name = "\n" + gauge + " ";
  const size_t at = m.find(name);
  return at == std::string::npos ? -1 : std::stoll(m.substr(at + name.size()));
}

}  // namespace tessera::kube::slicetest
