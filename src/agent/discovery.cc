#include "agent/discovery.h"

#include <algorithm>
#include <map>

#include "cluster/mig_geometry.h"
#include "kube/translate.h"

namespace tessera::agent {
namespace {

constexpr int kMaxXidsPerSnapshot = 1024;

std::string Where(const GpuState& g) {
  return "gpu " + std::to_string(g.index) + (g.model.empty() ? "" : " (" + g.model + ")");
}

Status Context(const Status& st, const std::string& what) {
  return Status(st.code(), what + ": " + st.message());
}

// Maps the GPU instances NVML reports onto the catalog's geometry.
Status ReadMig(GpuBackend& backend, GpuState& g) {
  auto profiles = backend.GiProfiles(g.index);
  if (!profiles.ok()) return profiles.status();
  g.mig_profiles = *profiles;
  auto gis = backend.GpuInstances(g.index);
  if (!gis.ok()) return gis.status();
  auto devs = backend.MigDevices(g.index);
  if (!devs.ok()) return devs.status();

  const MigGeometry* geo = g.model_id == kNoGpuModel ? nullptr : MigGeometryFor(g.model_id);
  if (!geo && !gis->empty())
    return InvalidArgument(Where(g) +
                           ": MIG instances on a GPU whose MIG geometry Tessera "
                           "does not know (product \"" +
                           g.product + "\")");
  MigLayout layout;
  for (const GiInfo& gi : *gis) {
    MigInstanceState m;
    m.profile_id = gi.profile_id;
    m.start = gi.start;
    m.size = gi.size;
    m.gi_id = gi.id;
    int idx = -1;
    for (size_t i = 0; i < geo->profiles.size(); ++i)
      if (geo->profiles[i].id == gi.profile_id) idx = static_cast<int>(i);
    if (idx < 0)
      return InvalidArgument(Where(g) + ": GPU instance " + std::to_string(gi.id) +
                             " has GI profile id " + std::to_string(gi.profile_id) +
                             ", unknown to the catalog's " + geo->model + " MIG geometry");
    const MigProfile& p = geo->profiles[static_cast<size_t>(idx)];
    if (gi.size != p.memory_slices)
      return InvalidArgument(Where(g) + ": GPU instance " + std::to_string(gi.id) + " (" + p.name +
                             ") spans " + std::to_string(gi.size) +
                             " memory slices; the catalog says " + std::to_string(p.memory_slices));
    m.profile = p.name;
    for (const MigDeviceInfo& d : *devs)
      if (d.gi_id == gi.id) m.compute_instances.push_back(d);
    layout.push_back({idx, gi.start});
    g.mig_instances.push_back(std::move(m));
  }
  std::sort(layout.begin(), layout.end(), [](const MigInstance& a, const MigInstance& b) {
    return std::pair(a.start, a.profile) < std::pair(b.start, b.profile);
  });
  std::sort(g.mig_instances.begin(), g.mig_instances.end(),
            [](const MigInstanceState& a, const MigInstanceState& b) { return a.start < b.start; });
  if (geo) {
    Status legal = CheckMigLayout(*geo, layout);
    if (!legal.ok())
      return InvalidArgument(Where(g) +
                             ": the driver reports a MIG layout the catalog calls "
                             "illegal: " +
                             legal.message());
    g.mig_layout = layout.empty() ? "" : MigLayoutString(*geo, layout);
  }
  return Status::Ok();
}

Result<GpuState> ReadGpu(GpuBackend& backend, int index) {
  GpuState g;
  g.index = index;
  auto uuid = backend.Uuid(index);
  if (!uuid.ok()) return uuid.status();
  g.uuid = *uuid;
  auto name = backend.Name(index);
  if (!name.ok()) return name.status();
  g.name = *name;
  g.product = GfdProduct(g.name);
  if (auto id = kube::ModelFromProduct(g.product); id.ok()) {
    g.model_id = *id;
    g.model = GpuCatalog::Builtin().Get(*id).name;
  }
  auto mem = backend.Memory(index);
  if (!mem.ok()) return mem.status();
  g.memory_mib = mem->total_mib;
  g.used_mib = mem->used_mib;
  auto cc = backend.ComputeCapability(index);
  if (!cc.ok()) return cc.status();
  g.compute_capability = *cc;
  auto mig = backend.MigEnabled(index);
  if (!mig.ok()) return mig.status();
  g.mig_capable = mig->has_value();
  g.mig_enabled = mig->value_or(false);
  if (g.mig_enabled) TESSERA_RETURN_IF_ERROR(ReadMig(backend, g));
  auto numa = backend.NumaNode(index);
  if (!numa.ok()) return numa.status();
  g.numa_node = *numa;
  auto pci = backend.PciBusId(index);
  if (!pci.ok()) return pci.status();
  g.pci_bus_id = *pci;
  auto util = backend.Utilization(index);
  if (!util.ok()) return util.status();
  g.utilization = *util;
  auto procs = backend.Processes(index);
  if (!procs.ok()) return procs.status();
  for (const ProcessInfo& p : *procs) {
    GpuProcess q;
    q.pid = p.pid;
    q.used_mib = p.used_mib;
    q.gi_id = p.gi_id;
    q.ci_id = p.ci_id;
    for (const MigInstanceState& m : g.mig_instances)
      if (m.gi_id == p.gi_id) q.mig_instance = m.placement();
    g.processes.push_back(std::move(q));
  }
  std::sort(g.processes.begin(), g.processes.end(),
            [](const GpuProcess& a, const GpuProcess& b) { return a.pid < b.pid; });
  return g;
}

}  // namespace

std::string GfdProduct(const std::string& nvml_name) {
  std::string out = nvml_name;
  std::replace(out.begin(), out.end(), ' ', '-');
  return out;
}

bool IsFatalXid(uint64_t xid) {
  switch (xid) {
    case 48:
    case 61:
    case 62:
    case 64:
    case 74:
    case 79:
    case 95:
    case 119:
    case 120:
    case 140:
    case 999:
      return true;
    default:
      return false;
  }
}

void ApplyXid(NodeGpuState& state, const XidEvent& event) {
  if (event.gpu < 0 || event.gpu >= static_cast<int>(state.gpus.size())) return;
  GpuState& g = state.gpus[static_cast<size_t>(event.gpu)];
  g.xids.push_back(event.xid);
  if (IsFatalXid(event.xid) && g.healthy) {
    g.healthy = false;
    g.health_reason = "XID " + std::to_string(event.xid);
  }
}

Result<NodeGpuState> Discover(GpuBackend& backend, const DiscoverOptions& options) {
  NodeGpuState state;
  auto n = backend.DeviceCount();
  if (!n.ok()) return n.status();
  for (int i = 0; i < *n; ++i) {
    auto g = ReadGpu(backend, i);
    if (!g.ok()) return g.status();
    state.gpus.push_back(std::move(*g));
  }
  state.links.assign(static_cast<size_t>(*n),
                     std::vector<GpuLink>(static_cast<size_t>(*n), GpuLink::kSelf));
  for (int a = 0; a < *n; ++a)
    for (int b = a + 1; b < *n; ++b) {
      auto link = backend.Link(a, b);
      if (!link.ok()) return link.status();
      state.links[static_cast<size_t>(a)][static_cast<size_t>(b)] = *link;
      state.links[static_cast<size_t>(b)][static_cast<size_t>(a)] = *link;
    }
  if (options.watch_xids && *n > 0) {
    Status st = backend.WatchXids();
    if (!st.ok()) return Context(st, "watching XID events");
    for (int k = 0; k < kMaxXidsPerSnapshot; ++k) {
      auto ev = backend.NextXid(options.xid_wait_ms);
      if (!ev.ok()) return Context(ev.status(), "reading XID events");
      if (!ev->has_value()) break;
      ApplyXid(state, **ev);
    }
  }
  return state;
}

}  // namespace tessera::agent
