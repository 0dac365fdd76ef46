// State of the fake libnvidia-ml.so.1 (tests/agent/fake_nvml.cc): the GPUs read from the JSON
// configuration (docs/AGENT.md), their MIG instances, and the state file that keeps MIG changes
// across restarts. The MIG geometry is the catalog's. Every function expects g_mu held.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#pragma GCC visibility push(default)
#include "agent/nvml_api.h"
#pragma GCC visibility pop

#include "cluster/mig_geometry.h"

namespace fake_nvml {

using Json = nlohmann::json;

struct Ci {
  unsigned id = 0;
  int slices = 0;
  unsigned profile = 0;
};

struct Gi {
  unsigned id = 0;
  int profile = 0;  // index into the geometry's profiles
  int start = 0;
  std::vector<Ci> cis;
};

struct Proc {
  unsigned pid = 0;
  unsigned long long used_mib = 0;
  std::string mig;  // "profile@start"; empty outside MIG
};

struct Gpu {
  std::string model, name, uuid;
  unsigned long long memory_mib = 0, used_mib = 0;
  int cc_major = 0, cc_minor = 0;
  const tessera::MigGeometry* geo = nullptr;
  bool mig = false;
  bool mig_pending = false;  // nvmlDeviceGetMigMode's pending mode
  // nvmlDeviceSetMigMode on an idle GPU: takes effect at once, or stays pending with this
  // activation status until a reset ("mig_mode_change": "pending_reset").
  bool mig_change_pending = false;
  nvmlReturn_t mig_activation = NVML_ERROR_RESET_REQUIRED;
  std::vector<Gi> gis;
  std::vector<Proc> procs;
  // nvmlDeviceGetProcessUtilization's buffer ("process_utilization"), oldest first.
  std::vector<nvmlProcessUtilizationSample_t> proc_samples;
  bool has_util = true;
  unsigned util_gpu = 0, util_mem = 0;
  int numa = 0, pcie_switch = 0;
  std::string pci_bus_id;  // empty: nvmlDeviceGetPciInfo_v3 is NOT_SUPPORTED
  std::vector<unsigned long long> xids;
  std::map<std::string, nvmlReturn_t> fail;
};

struct EventSet {
  std::vector<nvmlEventData_t> pending;
};

struct State {
  int refs = 0;
  std::vector<Gpu> gpus;
  std::vector<std::vector<int>> nvlink_groups;
  std::map<std::string, nvmlReturn_t> fail;
  std::string state_file;
  std::set<EventSet*> sets;
};

extern std::recursive_mutex g_mu;
extern State g_state;

// Reads TESSERA_FAKE_NVML_CONFIG (and the state file, if any) into g_state with refs = 1;
// throws std::exception with the reason on a bad configuration.
void Load();
// Writes the MIG state to the state file, if one is configured.
void SaveState();

std::string MigUuid(const Gpu& g, unsigned gi, unsigned ci);
unsigned GiProfileIndex(const tessera::MigProfile& p);
unsigned CiProfileIndex(int slices);
int CiSlices(unsigned profile);
tessera::MigLayout LayoutOf(const Gpu& g);  // sorted by (start, profile)
std::string Placement(const Gpu& g, const Gi& gi);
unsigned FreeGiId(const Gpu& g);

}  // namespace fake_nvml
