// Helpers of the admission tests (admission_test.cc, admission_recovery_test.cc): clusters of
// identical nodes, queues with one flavor, jobs, and an Admission with the best-fit scorer.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "admission/admission.h"
#include "cluster/gpu_catalog.h"
#include "policies/builtin.h"

namespace tessera::admissiontest {

inline constexpr int64_t kGpu = 1000;  // milli GPU-equivalents of one weight-1 GPU

inline GpuModelId Model(const char* name) {
  return *GpuCatalog::Builtin().Find(name);
}

inline ClusterState Cluster(int nodes, int gpus, const char* model = "H100-80GB",
                            std::map<std::string, std::string> labels = {}) {
  ClusterState c;
  for (int i = 0; i < nodes; ++i) {
    NodeSpec s;
    s.name = "n" + std::to_string(i);
    s.cpu = MilliCpu(64000);
    s.memory = MiB(512 * 1024);
    s.gpu_count = gpus;
    s.model = Model(model);
    s.labels = labels;
    EXPECT_TRUE(c.AddNode(s).ok());
  }
  return c;
}

inline FlavorQuota Flavor(const std::string& name, int64_t gpus, ModelMask models = 0) {
  FlavorQuota f;
  f.name = name;
  f.models = models;
  f.nominal = {gpus * kGpu, 1000 * 1000, 1 << 30};
  return f;
}

inline QueueSpec Queue(const std::string& name, const std::string& cohort, int64_t gpus,
                       double weight = 1) {
  QueueSpec q;
  q.name = name;
  q.cohort = cohort;
  q.flavors = {Flavor("gpu", gpus)};
  q.weight = weight;
  return q;
}

inline JobSpec Job(WorkloadId id, const std::string& queue, int gpus_per_pod = 1, int pods = 1,
                   int priority = 0, double arrival = 0) {
  JobSpec j;
  j.id = id;
  j.name = "job-" + std::to_string(id);
  j.queue = queue;
  j.priority = priority;
  j.arrival = arrival;
  j.pod.cpu = MilliCpu(1000);
  j.pod.memory = MiB(1024);
  j.pod.num_gpu = gpus_per_pod;
  j.pod.gpu_milli = gpus_per_pod > 0 ? 1000 : 0;
  j.pods = pods;
  return j;
}

inline std::unique_ptr<Admission> Make(std::vector<QueueSpec> qs, AdmissionConfig cfg = {}) {
  auto a = Admission::Create(std::move(qs), std::move(cfg), MakeBestFitScorer(), 1);
  EXPECT_TRUE(a.ok()) << a.status().message();
  return a.ok() ? std::move(*a) : nullptr;
}

inline int Running(const Admission& a, WorkloadId from, WorkloadId to) {
  int n = 0;
  for (WorkloadId id = from; id <= to; ++id) n += a.state(id) == JobState::kRunning;
  return n;
}

inline void Contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

}  // namespace tessera::admissiontest
