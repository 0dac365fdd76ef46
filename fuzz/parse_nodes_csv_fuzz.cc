// Fuzz target for ParseNodesCsv (src/sim/trace.h).
//
// Properties: never crashes; errors name the source. On success: at least one node; names
// non-empty and unique; CPU in 1..65,536,000 milli-CPU, memory in 1..2^40 MiB; GPU count in
// 0..kMaxGpusPerNode; a catalog model iff the node has GPUs; no labels. Every parsed node is
// accepted by ClusterState::AddNode, and the resulting cluster passes CheckInvariants with the
// GPU capacity equal to the sum of the GPU counts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "cluster/cluster_state.h"
#include "cluster/gpu_catalog.h"
#include "sim/trace.h"

#include "fuzz/fuzz_util.h"

namespace {

const std::string kSource = "fuzz_nodes.csv";

using tessera::fuzz::Fail;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto nodes = ParseNodesCsv(input, kSource);
  if (!nodes.ok()) {
    if (nodes.status().message().rfind(kSource + ":", 0) != 0)
      Fail("error message does not start with the source name", input);
    return 0;
  }
  if (nodes->empty()) Fail("success with no nodes", input);
  const size_t models = GpuCatalog::Builtin().size();
  std::set<std::string> names;
  ClusterState state;
  int64_t gpus = 0;
  for (const NodeSpec& n : *nodes) {
    if (n.name.empty()) Fail("empty node name", input);
    if (!names.insert(n.name).second) Fail("duplicate node name", input);
    if (n.cpu.v < 1 || n.cpu.v > 64LL * 1024 * 1000) Fail("CPU out of range", input);
    if (n.memory.v < 1 || n.memory.v > (int64_t{1} << 40)) Fail("memory out of range", input);
    if (n.gpu_count < 0 || n.gpu_count > kMaxGpusPerNode) Fail("GPU count out of range", input);
    if ((n.gpu_count > 0) != (n.model != kNoGpuModel)) Fail("model iff GPUs violated", input);
    if (n.model != kNoGpuModel && n.model >= models) Fail("model id outside the catalog", input);
    if (!n.labels.empty()) Fail("labels from a CSV", input);
    gpus += n.gpu_count;
    if (!state.AddNode(n).ok()) Fail("ClusterState::AddNode refused a parsed node", input);
  }
  if (!state.CheckInvariants().ok()) Fail("cluster invariants fail", input);
  if (state.gpu_capacity_milli() != gpus * kMilliPerGpu) Fail("GPU capacity mismatch", input);
  return 0;
}
