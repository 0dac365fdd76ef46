// One pass of the node agent's MigLayout loop: read this node's MigLayout object, apply what is
// new, write the outcome back to the API server.
//
// Contract:
// * SyncMigLayout GETs /apis/tessera.io/v1alpha1/miglayouts/<node>. No such object (404) is a
//   pass with nothing to do. Otherwise every GPU that needs it (NeedsApply, agent/mig_apply.h:
//   a spec revision newer than status.observedRevision, a status still Applying, or a journal
//   left by an interrupted run) is first reported Applying for its revision, then applied, and
//   the outcomes (Applied / Failed) are written. Status is written with a JSON merge patch
//   {"status": {"gpus": {"<index>": {...}}}} on the status subresource (.../miglayouts/<node>/
//   status; the CRD declares it), so only the entries of the GPUs applied are touched. The
//   scheduler reads them from its MigLayout informer (kube::SchedulerCore::UpsertMigLayout).
// * Errors: a failed GET or status patch is returned (the caller retries on its next pass);
//   an apply failure is not an error of the pass, it is the GPU's Failed status.
// * Not thread-safe (the backend is not).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/mig_apply.h"
#include "agent/nvml.h"
#include "core/status.h"
#include "kube/client.h"

namespace tessera::agent {

struct MigSyncOptions {
  std::string node_name;
  MigApplyOptions apply;
};

struct MigSyncResult {
  bool found = false;             // the node has a MigLayout object
  std::vector<std::string> gpus;  // spec.gpus keys applied in this pass
  nlohmann::json status;          // the status object written (null when nothing was applied)
};

Result<MigSyncResult> SyncMigLayout(kube::Client& client, GpuBackend& backend,
                                    const MigSyncOptions& options);

}  // namespace tessera::agent
