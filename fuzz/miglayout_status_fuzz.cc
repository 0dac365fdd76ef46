// Fuzz target for SchedulerCore::UpsertMigLayout (MigLayout objects as the API server sends
// them, written by node agents: deploy/crds/miglayout.yaml).
//
// Properties: never crashes or throws, whatever the object holds. A report is taken only for
// the revision in flight: the ledger's invariants hold afterwards, and the GPU's MIG layout is
// either the one before the plan or the one planned, never anything else.
#include <cstdint>
#include <string>
#include <string_view>

#include "kube/scheduler_core.h"

#include "fuzz/fuzz_util.h"

namespace {

using tessera::kube::Json;

Json Node() {
  tessera::kube::GpuInventoryEntry e{0, "GPU-m-0", "A100-80GB", 81920, false, "", true};
  return {{"metadata",
           {{"name", "m"},
            {"annotations",
             {{tessera::kube::kAnnotationInventory, tessera::kube::EncodeInventory({e})}}}}},
          {"status",
           {{"allocatable", {{"cpu", "8"}, {"memory", "64Gi"}, {"nvidia.com/gpu", "1"}}},
            {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

Json Pod() {
  return {{"metadata", {{"name", "p"}, {"namespace", "ml"}, {"uid", "u"}}},
          {"spec",
           {{"schedulerName", "tessera"},
            {"containers",
             Json::array({{{"name", "c"},
                           {"resources", {{"limits", {{"nvidia.com/mig-3g.40gb", "1"}}}}}}})}}},
          {"status", {{"phase", "Pending"}}}};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tessera::fuzz::Fail;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const Json obj = Json::parse(input.begin(), input.end(), nullptr, false);
  if (obj.is_discarded()) return 0;
  tessera::kube::SchedulerConfig cfg;
  cfg.gang_settle_s = 0;
  auto core = tessera::kube::SchedulerCore::Create(cfg);
  if (!core.ok()) Fail("scheduler core refused the default config", input);
  (*core)->UpsertNode(Node());
  (*core)->UpsertPod(Pod());
  const auto out = (*core)->Cycle(1);
  if (out.layouts.size() != 1) Fail("no re-layout planned for the MIG pod", input);
  (*core)->UpsertMigLayout(obj);
  const auto& cluster = (*core)->cluster();
  if (!cluster.CheckInvariants().ok()) Fail("ledger invariants broken", input);
  const tessera::GpuSlices& gpu = cluster.gpu(0, 0);
  if (gpu.mig_enabled()) {
    const auto* geo = tessera::MigGeometryFor(gpu.model);
    if (!geo || tessera::MigLayoutString(*geo, gpu.Layout()) != out.layouts[0].layout)
      Fail("the GPU took a layout that was not planned", input);
  }
  return 0;
}
