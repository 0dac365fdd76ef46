// MIG apply: converges one GPU to the layout a MigLayout object (deploy/crds/miglayout.yaml)
// asks for, and builds the object's status.
//
// Contract:
// * ApplyGpuLayout validates before it changes anything: the GPU index exists, every token is
//   "<profile>@<start>" with a profile the catalog knows for the GPU's model, the layout is
//   legal for that model (cluster/mig_geometry.h), and migEnabled false comes with no layout.
//   Any failure is state Failed with one message naming the GPU, and nothing on the node
//   changes.
// * MIG mode. When migEnabled differs from the GPU's current mode, the GPU must run no
//   process (else Failed "not changed, turning MIG on|off needs the GPU idle; in use by pid
//   ...", nothing changes). Turning MIG off destroys every (free) instance first. The mode is
//   set with nvmlDeviceSetMigMode: if it takes effect at once, an enable goes on to create the
//   layout in the same run (message "MIG mode on; created ..."); if NVML leaves it pending a
//   GPU reset, the outcome is Failed with "PendingReset: MIG mode on|off is set but takes
//   effect only after a GPU reset ...; with the GPU idle run `nvidia-smi -r -i <index>`", the
//   layout is not touched, and a later revision asking for the same mode reports the same
//   without calling NVML. migEnabled false on a GPU whose enable is pending cancels it, and
//   migEnabled true on a GPU whose disable is pending cancels that.
// * It then reads the GPU's instances from NVML and works only from what NVML reports, so
//   applying the same spec twice changes nothing the second time and a restarted agent
//   converges from whatever a crashed one left (a mode change included). The plan: destroy every
//   GPU instance the layout does not have (its compute instances first), destroy every GPU instance
//   without a compute instance that the layout does not have, give a desired GPU instance that
//   lacks a compute instance its full-size compute instance, create the missing GPU instances at
//   their explicit placement, each with one compute instance covering it.
// * Right before the first change, the GPU's processes are read: if any runs on an instance to
//   be destroyed, the result is Failed naming the instance and the pids, and nothing changes.
// * With a state_dir, a journal file "<state_dir>/miglayout-gpu<index>.json" (GPU, UUID,
//   revision, layout) is written atomically before the first change and removed once the
//   outcome is Applied or Failed. A journal left by an interrupted run is reported in the
//   message of the next outcome for that GPU ("resumed revision R interrupted at <step>").
// * The outcome: observedRevision = spec revision, state Applied (NVML reports exactly the
//   layout) or Failed (message), layout = the layout NVML reports afterwards ("" with MIG off
//   or no instance). Applying is returned only when the `after_step` hook stops the run, which
//   stands for an agent that died at that point (tests).
// * ApplyMigLayoutObject takes a whole MigLayout object for this node and returns its status
//   object {"gpus": {...}}: every GPU in spec.gpus whose revision is newer than its
//   status.observedRevision, whose status is still Applying, or that has a journal, is
//   applied; the other entries of status.gpus are returned unchanged. A malformed spec entry
//   (no or bad revision, bad migEnabled, non-string layout, key not a GPU index) is Failed for
//   that key with observedRevision = its revision if readable, else 0.
// * Not thread-safe (the backend is not); one GPU at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/nvml.h"
#include "core/status.h"

namespace tessera::agent {

// spec.gpus.<index> of a MigLayout object.
struct GpuLayoutSpec {
  int index = 0;
  int64_t revision = 0;
  bool mig_enabled = true;
  std::string layout;  // "3g.40gb@0 2g.20gb@4 1g.10gb@6"
  std::string reason;
};

enum class LayoutState { kApplying, kApplied, kFailed };
const char* LayoutStateName(LayoutState s);  // "Applying", "Applied", "Failed"

// status.gpus.<index> of a MigLayout object.
struct GpuLayoutStatus {
  int64_t observed_revision = 0;
  LayoutState state = LayoutState::kFailed;
  std::string message;
  std::string layout;
};

struct MigApplyOptions {
  std::string state_dir;  // journal directory; empty = no journal
  // Called after every NVML change with its description ("destroy GPU instance 2g.20gb@4");
  // a non-ok Status stops the run there, leaving the node and the journal as a crash would.
  std::function<Status(const std::string& step)> after_step;
  // lastTransitionTime of the outcomes; empty = the system clock in RFC 3339 UTC.
  std::function<std::string()> now;
};

// Reads spec.gpus.<key>; InvalidArgument with the reason for a malformed entry.
Result<GpuLayoutSpec> ParseGpuLayoutSpec(const std::string& key, const nlohmann::json& entry);

GpuLayoutStatus ApplyGpuLayout(GpuBackend& backend, const GpuLayoutSpec& spec,
                               const MigApplyOptions& options = {});

// The CRD's status.gpus.<index> form: observedRevision, state, message (when not empty),
// layout, lastTransitionTime (when given).
nlohmann::json GpuLayoutStatusJson(const GpuLayoutStatus& status,
                                   const std::string& transition_time = "");

// Whether spec.gpus.<key> needs applying given the object's status and the journals.
bool NeedsApply(const nlohmann::json& object, const std::string& key,
                const MigApplyOptions& options);

// See the contract. `applied_keys`, when given, receives the keys that were applied.
nlohmann::json ApplyMigLayoutObject(GpuBackend& backend, const nlohmann::json& object,
                                    const MigApplyOptions& options = {},
                                    std::vector<std::string>* applied_keys = nullptr);

// The journal of one GPU, if a run left one: its revision and the last step it recorded.
struct MigJournal {
  int gpu = 0;
  std::string uuid;
  int64_t revision = 0;
  std::string layout;
  std::string step;  // last change made ("" before the first)
};
Result<MigJournal> ReadMigJournal(const std::string& state_dir, int gpu);  // NotFound if none

}  // namespace tessera::agent
