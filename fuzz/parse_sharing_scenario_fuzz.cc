// Fuzz target for ParseSharingScenario and GenerateSharingWorkloads (src/sim/sharing_scenario.h).
//
// Properties: never crashes. A rejected scenario gets InvalidArgument starting with the file
// name. An accepted one has at least one node group and class, phases starting at 0 in
// increasing order below the horizon, class priorities within range; when it expects few workloads,
// generating them succeeds, deterministically, and every workload lies within its class's declared
// ranges: arrival in [0, horizon), in order, peak memory, compute %, duration, host CPU and memory
// within the ranges, whole GPUs one of the listed counts, an isolation class with positive
// weight, the class's patience, and a model mask of allowed models with enough memory.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "cluster/gpu_catalog.h"
#include "sim/sharing_scenario.h"

#include "fuzz/fuzz_util.h"

namespace {

using tessera::fuzz::Fail;

constexpr double kMaxGeneratedWorkloads = 20000;

bool In(int64_t v, double lo, double hi, double scale) {
  return v >= std::llround(lo * scale) && v <= std::llround(hi * scale);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto parsed = ParseSharingScenario(input, "fuzz.json");
  if (!parsed.ok()) {
    if (parsed.status().code() != StatusCode::kInvalidArgument)
      Fail("rejection is not InvalidArgument", input);
    if (parsed.status().message().rfind("fuzz.json", 0) != 0)
      Fail("error does not start with the file name", input);
    return 0;
  }
  const SharingScenario& s = *parsed;
  if (s.node_groups.empty() || s.classes.empty() || s.phases.empty())
    Fail("accepted a scenario without nodes, classes or phases", input);
  if (s.phases.front().start_s != 0) Fail("first phase not at 0", input);
  for (size_t p = 0; p < s.phases.size(); ++p) {
    if (s.phases[p].multipliers.size() != s.classes.size())
      Fail("phase multipliers do not match the classes", input);
    if (s.phases[p].start_s >= s.horizon_s ||
        (p > 0 && s.phases[p].start_s <= s.phases[p - 1].start_s))
      Fail("phase starts out of order or past the horizon", input);
  }
  for (const SharingClass& c : s.classes)
    if (c.priority < -kMaxPriority || c.priority > kMaxPriority)
      Fail("class priority out of range", input);
  if (ExpectedSharingArrivals(s) > kMaxGeneratedWorkloads) return 0;

  auto a = GenerateSharingWorkloads(s, 1);
  auto b = GenerateSharingWorkloads(s, 1);
  if (!a.ok() || !b.ok()) Fail("generation failed on an accepted scenario", input);
  if (a->size() != b->size()) Fail("generation is not deterministic", input);
  const GpuCatalog& cat = GpuCatalog::Builtin();
  SimTime last = 0;
  for (size_t i = 0; i < a->size(); ++i) {
    const SharingWorkload& w = (*a)[i];
    const SharingWorkload& v = (*b)[i];
    if (w.arrival_s != v.arrival_s || w.demand.memory_mib != v.demand.memory_mib ||
        w.duration_s != v.duration_s)
      Fail("generation is not deterministic", input);
    if (w.id != i) Fail("workloads not numbered in order", input);
    if (w.arrival_s < last || w.arrival_s < 0 || w.arrival_s >= s.horizon_s)
      Fail("arrival out of order or outside [0, horizon)", input);
    last = w.arrival_s;
    if (w.cls < 0 || static_cast<size_t>(w.cls) >= s.classes.size()) Fail("bad class", input);
    const SharingClass& c = s.classes[w.cls];
    const SliceDemand& d = w.demand;
    if (!In(d.memory_mib, c.memory_gib.lo, c.memory_gib.hi, 1024) || d.memory_mib <= 0)
      Fail("peak memory outside the class range", input);
    if (d.compute_pct < c.compute_pct.lo || d.compute_pct > c.compute_pct.hi)
      Fail("compute % outside the class range", input);
    if (w.duration_s < c.duration_s.lo || w.duration_s > c.duration_s.hi)
      Fail("duration outside the class range", input);
    if (!In(d.cpu.v, c.cpu_cores.lo, c.cpu_cores.hi, 1000))
      Fail("host CPU outside the class range", input);
    if (!In(d.host_memory.v, c.host_memory_gib.lo, c.host_memory_gib.hi, 1024))
      Fail("host memory outside the class range", input);
    if (c.whole_gpus.empty() ? d.whole_gpus != 0
                             : std::find(c.whole_gpus.begin(), c.whole_gpus.end(), d.whole_gpus) ==
                                   c.whole_gpus.end())
      Fail("whole GPUs not one of the listed counts", input);
    if (!(c.isolation_weight[static_cast<int>(d.isolation)] > 0))
      Fail("isolation class without weight", input);
    if (w.patience_s != c.patience_s) Fail("patience differs from the class", input);
    if (d.models == 0) Fail("empty model mask", input);
    for (size_t m = 0; m < cat.size() && m < 64; ++m) {
      if (!((d.models >> m) & 1)) continue;
      if (cat.Get(static_cast<GpuModelId>(m)).memory_mib < d.memory_mib)
        Fail("model mask holds a model without enough memory", input);
      if (c.gpu_models != 0 && !((c.gpu_models >> m) & 1))
        Fail("model mask holds a model the class does not allow", input);
    }
  }
  return 0;
}
