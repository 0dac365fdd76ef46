// Fuzz target for ParseQueueCluster and ParseQueueWorkload (src/sim/queue_scenario.h). Every input
// goes through both parsers.
//
// Properties: never crashes. A rejection is InvalidArgument starting with the source name.
// An accepted cluster has exactly one of nodes and nodes_csv, unique node names, a positive
// cycle, 1..kMaxQueues queues with unique names, declared cohorts, positive weights and
// 1..16 uniquely named flavors with non-negative quotas, lending limits within the nominal
// quota, and GPU-equivalent weights in (0, 1000]. An accepted workload has ids 1..N in order,
// unique non-empty names, finite arrivals >= 0, positive finite durations, 1..kPodsPerJob-1 pods,
// min_member within 0..pods, a valid pod demand, models only for GPU pods, and a label key for
// label topology. Parsing is deterministic.
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "sim/queue_scenario.h"

#include "fuzz/fuzz_util.h"

namespace {

using tessera::fuzz::Fail;

void CheckResources(const tessera::Resources& r, std::string_view input) {
  if (r.gpu < 0 || r.cpu < 0 || r.memory < 0) Fail("negative quota", input);
}

void CheckCluster(std::string_view input) {
  using namespace tessera;
  auto parsed = ParseQueueCluster(input, "fuzz.json");
  if (!parsed.ok()) {
    if (parsed.status().code() != StatusCode::kInvalidArgument)
      Fail("cluster rejection is not InvalidArgument", input);
    if (parsed.status().message().rfind("fuzz.json", 0) != 0)
      Fail("cluster error does not start with the file name", input);
    return;
  }
  const QueueCluster& c = *parsed;
  if (c.nodes.empty() == c.nodes_csv.empty()) Fail("not exactly one of nodes, nodes_csv", input);
  std::set<std::string> names;
  for (const NodeSpec& n : c.nodes) {
    if (!names.insert(n.name).second) Fail("duplicate node name", input);
    if (n.cpu.v <= 0 || n.memory.v <= 0 || n.gpu_count < 0 || n.gpu_count > kMaxGpusPerNode ||
        (n.gpu_count == 0) != (n.model == kNoGpuModel))
      Fail("impossible node", input);
  }
  if (!(c.cycle_s > 0) || !std::isfinite(c.cycle_s)) Fail("bad cycle", input);
  if (c.queues.empty() || c.queues.size() > static_cast<size_t>(kMaxQueues))
    Fail("queue count out of range", input);
  std::set<std::string> queues;
  const std::set<std::string> cohorts(c.cohorts.begin(), c.cohorts.end());
  if (cohorts.size() != c.cohorts.size()) Fail("duplicate cohort", input);
  for (const QueueSpec& q : c.queues) {
    if (q.name.empty() || !queues.insert(q.name).second) Fail("bad queue name", input);
    if (!q.cohort.empty() && !cohorts.count(q.cohort)) Fail("undeclared cohort", input);
    if (!(q.weight > 0) || !std::isfinite(q.weight)) Fail("bad weight", input);
    if (q.flavors.empty() || q.flavors.size() > 16) Fail("flavor count out of range", input);
    std::set<std::string> flavors;
    for (const FlavorQuota& f : q.flavors) {
      if (f.name.empty() || !flavors.insert(f.name).second) Fail("bad flavor name", input);
      CheckResources(f.nominal, input);
      if (f.borrowing_limit) CheckResources(*f.borrowing_limit, input);
      if (f.lending_limit) {
        CheckResources(*f.lending_limit, input);
        if (!f.lending_limit->FitsIn(f.nominal)) Fail("lending limit above nominal", input);
      }
    }
  }
  if (!(c.admission.usage_half_life_s >= 0) || !(c.admission.min_runtime_s >= 0))
    Fail("negative admission time", input);
  for (const auto& [model, w] : c.admission.gpu_equivalents) {
    if (!GpuCatalog::Builtin().Find(model) || !(w > 0) || w > 1000)
      Fail("bad GPU equivalent", input);
  }
  auto again = ParseQueueCluster(input, "fuzz.json");
  if (!again.ok() || again->queues.size() != c.queues.size() ||
      again->nodes.size() != c.nodes.size())
    Fail("cluster parsing is not deterministic", input);
}

void CheckWorkload(std::string_view input) {
  using namespace tessera;
  auto parsed = ParseQueueWorkload(input, "fuzz.csv", {});
  if (!parsed.ok()) {
    if (parsed.status().code() != StatusCode::kInvalidArgument)
      Fail("workload rejection is not InvalidArgument", input);
    if (parsed.status().message().rfind("fuzz.csv", 0) != 0)
      Fail("workload error does not start with the file name", input);
    return;
  }
  std::set<std::string> names;
  for (size_t i = 0; i < parsed->size(); ++i) {
    const QueueJob& j = (*parsed)[i];
    const JobSpec& s = j.spec;
    if (s.id != i + 1) Fail("jobs not numbered in file order", input);
    if (s.name.empty() || !names.insert(s.name).second) Fail("bad job name", input);
    if (s.queue.empty()) Fail("empty queue", input);
    if (!std::isfinite(s.arrival) || s.arrival < 0) Fail("bad arrival", input);
    if (!std::isfinite(j.duration_s) || !(j.duration_s > 0)) Fail("bad duration", input);
    if (s.pods < 1 || static_cast<WorkloadId>(s.pods) >= kPodsPerJob) Fail("bad pods", input);
    if (s.min_member < 0 || s.min_member > s.pods) Fail("bad min_member", input);
    const Demand& d = s.pod;
    if (d.cpu.v < 0 || d.memory.v < 0 || d.num_gpu < 0 || d.num_gpu > kMaxGpusPerNode ||
        d.gpu_milli < 0 || d.gpu_milli > 1000 || (d.num_gpu == 0) != (d.gpu_milli == 0) ||
        (d.num_gpu > 1 && d.gpu_milli != 1000))
      Fail("invalid demand", input);
    if (d.models != 0 && d.num_gpu == 0) Fail("models on a CPU-only job", input);
    if ((s.topology == TopologyKind::kSameLabel) == s.topology_label.empty())
      Fail("label topology and label key disagree", input);
    if (!(s.gang_timeout_s >= 0)) Fail("bad gang timeout", input);
  }
  auto again = ParseQueueWorkload(input, "fuzz.csv", {});
  if (!again.ok() || again->size() != parsed->size())
    Fail("workload parsing is not deterministic", input);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  CheckCluster(input);
  CheckWorkload(input);
  return 0;
}
