// Fuzz target for ParsePodsCsv (src/sim/trace.h).
//
// Properties: never crashes; errors name the source. On success: at least one pod; names
// non-empty and unique; CPU in 0..65,536,000 milli-CPU and memory in 0..2^40 MiB; num_gpu in
// 0..kMaxGpusPerNode and gpu_milli in 0..1000, both zero or both positive, whole GPUs when
// num_gpu > 1; GPU models only for GPU pods and only catalog bits; creation >= 0 and deletion
// either -1 or >= creation. Every demand is accepted by ClusterState::CheckFit on a node large
// enough for any parsed demand, and TargetWorkload::FromDemands of the demands yields shapes
// whose popularities sum to 1.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/cluster_state.h"
#include "cluster/gpu_catalog.h"
#include "cluster/target_workload.h"
#include "sim/trace.h"

#include "fuzz/fuzz_util.h"

namespace {

const std::string kSource = "fuzz_pods.csv";

using tessera::fuzz::Fail;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto pods = ParsePodsCsv(input, kSource);
  if (!pods.ok()) {
    if (pods.status().message().rfind(kSource + ":", 0) != 0)
      Fail("error message does not start with the source name", input);
    return 0;
  }
  if (pods->empty()) Fail("success with no pods", input);
  const GpuCatalog& catalog = GpuCatalog::Builtin();
  const ModelMask catalog_bits =
      catalog.size() >= 64 ? ~ModelMask{0} : (ModelMask{1} << catalog.size()) - 1;
  // One node per catalog model, large enough for any demand the parser accepts.
  ClusterState state;
  for (size_t m = 0; m < catalog.size(); ++m) {
    NodeSpec big{"big-" + std::to_string(m), MilliCpu(64LL * 1024 * 1000),
                 MiB(int64_t{1} << 40),      kMaxGpusPerNode,
                 static_cast<GpuModelId>(m), {}};
    if (!state.AddNode(std::move(big)).ok()) Fail("cannot build the reference node", input);
  }
  std::set<std::string> names;
  std::vector<Demand> demands;
  for (const Workload& w : *pods) {
    const Demand& d = w.demand;
    if (w.name.empty()) Fail("empty pod name", input);
    if (!names.insert(w.name).second) Fail("duplicate pod name", input);
    if (d.cpu.v < 0 || d.cpu.v > 64LL * 1024 * 1000) Fail("CPU out of range", input);
    if (d.memory.v < 0 || d.memory.v > (int64_t{1} << 40)) Fail("memory out of range", input);
    if (d.num_gpu < 0 || d.num_gpu > kMaxGpusPerNode) Fail("num_gpu out of range", input);
    if (d.gpu_milli < 0 || d.gpu_milli > 1000) Fail("gpu_milli out of range", input);
    if ((d.num_gpu == 0) != (d.gpu_milli == 0)) Fail("num_gpu/gpu_milli zero mismatch", input);
    if (d.num_gpu > 1 && d.gpu_milli != 1000) Fail("multi-GPU share below 1000", input);
    if (d.models != 0 && d.num_gpu == 0) Fail("GPU models on a CPU-only pod", input);
    if ((d.models & ~catalog_bits) != 0) Fail("model bit outside the catalog", input);
    if (w.creation < 0) Fail("negative creation time", input);
    if (w.deletion != -1 && w.deletion < w.creation) Fail("deletion before creation", input);
    const GpuModelId model =
        d.models == 0 ? GpuModelId{0} : static_cast<GpuModelId>(std::countr_zero(d.models));
    const GpuMask gpus = d.num_gpu == 0 ? 0 : (GpuMask{1} << d.num_gpu) - 1;
    if (!state.CheckFit(model, d, gpus).ok()) Fail("CheckFit refused a parsed demand", input);
    demands.push_back(d);
  }
  const TargetWorkload target = TargetWorkload::FromDemands(demands);
  if (target.shapes.empty()) Fail("no target shapes from a non-empty pod list", input);
  double sum = 0;
  for (const TaskShape& s : target.shapes) sum += s.popularity;
  if (std::abs(sum - 1.0) > 1e-9) Fail("target popularities do not sum to 1", input);
  return 0;
}
