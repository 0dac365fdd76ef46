#include "cluster/cluster_state.h"

#include <algorithm>
#include <atomic>
#include <bit>

namespace tessera {
namespace {
std::atomic<uint64_t> g_next_stamp{0};
}  // namespace

Status ValidateNodeSpec(const NodeSpec& spec) {
  if (spec.name.empty()) return InvalidArgument("node name is empty");
  if (spec.cpu.v <= 0) return InvalidArgument("node '" + spec.name + "': CPU must be positive");
  if (spec.memory.v <= 0)
    return InvalidArgument("node '" + spec.name + "': memory must be positive");
  if (spec.gpu_count < 0 || spec.gpu_count > kMaxGpusPerNode)
    return InvalidArgument("node '" + spec.name + "': GPU count " + std::to_string(spec.gpu_count) +
                           " outside 0.." + std::to_string(kMaxGpusPerNode));
  if ((spec.gpu_count > 0) != (spec.model != kNoGpuModel))
    return InvalidArgument("node '" + spec.name + "': GPU count and GPU model must go together");
  if (spec.gpu_memory_mib < 0)
    return InvalidArgument("node '" + spec.name + "': GPU memory must not be negative");
  if (spec.model != kNoGpuModel && spec.model >= GpuCatalog::Builtin().size())
    return InvalidArgument("node '" + spec.name + "': GPU model id " + std::to_string(spec.model) +
                           " is not in the catalog");
  return Status::Ok();
}

uint64_t ClusterState::ComputeGpuStateKey(NodeIdx n) const {
  uint64_t h = 0x9e3779b97f4a7c15ULL;
  auto mix = [&h](uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
    h ^= h >> 31;
  };
  mix(specs_[n].model);
  mix(gpus_[n].size());
  for (const GpuSlices& g : gpus_[n]) {
    mix(static_cast<uint64_t>(g.mode));
    mix(static_cast<uint64_t>(g.memory_mib));
    mix(static_cast<uint64_t>(g.clients));
    mix(static_cast<uint64_t>(g.thread_pct_used));
    mix(static_cast<uint64_t>(g.memory_used));
    mix(static_cast<uint64_t>(g.milli_used));
    mix(g.blocked ? 1 : 0);
    mix(g.instances.size());
    for (const MigSlot& m : g.instances) {
      mix(static_cast<uint64_t>(m.instance.profile));
      mix(static_cast<uint64_t>(m.instance.start));
      mix(static_cast<uint64_t>(m.memory_mib));
      mix(static_cast<uint64_t>(m.use));
      mix(static_cast<uint64_t>(m.clients));
      mix(static_cast<uint64_t>(m.thread_pct_used));
      mix(static_cast<uint64_t>(m.memory_used));
    }
  }
  return h;
}

void ClusterState::Touch(NodeIdx n) {
  free_[n].stamp = g_next_stamp.fetch_add(1, std::memory_order_relaxed) + 1;
  gpu_state_key_[n] = ComputeGpuStateKey(n);
}

Result<NodeIdx> ClusterState::AddNode(NodeSpec spec) {
  if (by_name_.count(spec.name)) return AlreadyExists("duplicate node name '" + spec.name + "'");
  TESSERA_RETURN_IF_ERROR(ValidateNodeSpec(spec));
  NodeFree f;
  f.cpu = spec.cpu.v;
  f.memory = spec.memory.v;
  f.gpu_count = static_cast<uint8_t>(spec.gpu_count);
  f.model = spec.model;
  for (int g = 0; g < spec.gpu_count; ++g) f.gpu[g] = 1000;
  f.gpu_total = 1000 * spec.gpu_count;
  std::vector<GpuSlices> gpus(spec.gpu_count);
  if (spec.model != kNoGpuModel) {
    const int64_t memory = spec.gpu_memory_mib > 0
                               ? spec.gpu_memory_mib
                               : GpuCatalog::Builtin().Get(spec.model).memory_mib;
    for (auto& g : gpus) {
      g.model = spec.model;
      g.memory_mib = memory;
    }
    if (spec.gpu_count > 0 && memory > 0) {
      min_gpu_memory_mib_ =
          min_gpu_memory_mib_ == 0 ? memory : std::min(min_gpu_memory_mib_, memory);
      max_gpu_memory_mib_ = std::max(max_gpu_memory_mib_, memory);
    }
  }
  const NodeIdx idx = static_cast<NodeIdx>(specs_.size());
  balance_.push_back({f.cpu, f.memory});
  gpu_capacity_milli_ += f.gpu_total;
  if (spec.model < free_gpu_by_model_.size()) free_gpu_by_model_[spec.model] += f.gpu_total;
  free_cpu_milli_ += f.cpu;
  cpu_capacity_milli_ += f.cpu;
  by_name_.emplace(spec.name, idx);
  specs_.push_back(std::move(spec));
  free_.push_back(f);
  gpus_.push_back(std::move(gpus));
  gpu_state_key_.push_back(0);
  Touch(idx);
  return idx;
}

Status ClusterState::CheckFit(NodeIdx n, const Demand& d, GpuMask gpus) const {
  if (n >= free_.size()) return NotFound("no node index " + std::to_string(n));
  const NodeFree& f = free_[n];
  if (d.cpu.v < 0 || d.memory.v < 0 || d.num_gpu < 0 || d.gpu_milli < 0 || d.gpu_milli > 1000)
    return InvalidArgument("negative or out-of-range demand");
  if ((d.num_gpu == 0) != (d.gpu_milli == 0))
    return InvalidArgument("GPU count and per-GPU share must both be zero or both positive");
  if (d.num_gpu > 1 && d.gpu_milli != 1000)
    return InvalidArgument("a multi-GPU demand must ask for whole GPUs");
  if (d.cpu.v > f.cpu) return ResourceExhausted("insufficient CPU");
  if (d.memory.v > f.memory) return ResourceExhausted("insufficient memory");
  if (std::popcount(gpus) != d.num_gpu)
    return InvalidArgument("placement names " + std::to_string(std::popcount(gpus)) +
                           " GPUs for a demand of " + std::to_string(d.num_gpu));
  if (d.num_gpu == 0) return Status::Ok();
  if (!d.AllowsModel(f.model)) return FailedPrecondition("GPU model not allowed");
  if (gpus >> f.gpu_count) return InvalidArgument("placement names a GPU the node lacks");
  for (int g = 0; g < f.gpu_count; ++g)
    if (((gpus >> g) & 1) && gpus_[n][g].blocked)
      return FailedPrecondition("GPU " + std::to_string(g) + " is blocked (unhealthy)");
  for (int g = 0; g < f.gpu_count; ++g) {
    if (((gpus >> g) & 1) && f.gpu[g] < d.gpu_milli)
      return ResourceExhausted("insufficient share on GPU " + std::to_string(g));
  }
  return Status::Ok();
}

int ClusterState::ShapeClass(const SliceAssignment& a) {
  if (a.gpus == 0) return -1;
  return a.kind == SliceKind::kExclusive ? std::popcount(a.gpus) : 0;
}

void ClusterState::Sync(NodeIdx n, int g, int held_before) {
  NodeFree& f = free_[n];
  const GpuSlices& gpu = gpus_[n][g];
  const int free_now = gpu.FreeMilli();
  f.gpu_total += free_now - f.gpu[g];
  if (f.model < free_gpu_by_model_.size()) free_gpu_by_model_[f.model] += free_now - f.gpu[g];
  f.gpu[g] = static_cast<int16_t>(free_now);
  gpu_allocated_milli_ += gpu.HeldMilli() - held_before;
}

void ClusterState::Apply(const Entry& e, int sign) {
  const SliceAssignment& a = e.slice;
  NodeFree& f = free_[a.node];
  balance_[a.node].cpu -= sign * e.cpu;
  balance_[a.node].memory -= sign * e.memory;
  SyncHost(a.node);
  const int shape = ShapeClass(a);
  if (shape >= 0) f.shape_pods[shape] = static_cast<uint16_t>(f.shape_pods[shape] + sign);
  auto& gpus = gpus_[a.node];
  for (int g = 0; g < static_cast<int>(gpus.size()); ++g) {
    if (!((a.gpus >> g) & 1)) continue;
    GpuSlices& gpu = gpus[g];
    const int held_before = gpu.HeldMilli();
    gpu.clients += sign;
    switch (a.kind) {
      case SliceKind::kExclusive:
        gpu.mode = gpu.clients ? GpuMode::kExclusive : GpuMode::kIdle;
        break;
      case SliceKind::kShare:
        gpu.milli_used += sign * a.gpu_milli;
        gpu.mode = gpu.clients ? GpuMode::kShare : GpuMode::kIdle;
        break;
      case SliceKind::kMps:
      case SliceKind::kTimeSlice:
        gpu.thread_pct_used += sign * (a.kind == SliceKind::kMps ? a.thread_pct : 0);
        gpu.memory_used += sign * a.memory_mib;
        gpu.mode = gpu.clients == 0            ? GpuMode::kIdle
                   : a.kind == SliceKind::kMps ? GpuMode::kMps
                                               : GpuMode::kTimeSlice;
        break;
      case SliceKind::kMig:
      case SliceKind::kMigMps:
        for (auto& slot : gpu.instances) {
          if (slot.instance.start != a.mig_start) continue;
          slot.clients += sign;
          if (a.kind == SliceKind::kMigMps) {
            slot.thread_pct_used += sign * a.thread_pct;
            slot.memory_used += sign * a.memory_mib;
          }
          slot.use = slot.clients == 0           ? MigSlot::Use::kFree
                     : a.kind == SliceKind::kMig ? MigSlot::Use::kWhole
                                                 : MigSlot::Use::kMps;
        }
        break;
    }
    Sync(a.node, g, held_before);
  }
  Touch(a.node);
}

void ClusterState::SyncHost(NodeIdx n) {
  NodeFree& f = free_[n];
  const int64_t cpu = std::max<int64_t>(0, balance_[n].cpu);
  free_cpu_milli_ += cpu - f.cpu;
  f.cpu = cpu;
  f.memory = std::max<int64_t>(0, balance_[n].memory);
}

Status ClusterState::SetGpuBlocked(NodeIdx n, int g, bool blocked) {
  if (n >= specs_.size() || g < 0 || g >= specs_[n].gpu_count)
    return NotFound("no GPU " + std::to_string(g) + " on node index " + std::to_string(n));
  GpuSlices& gpu = gpus_[n][g];
  if (gpu.blocked == blocked) return Status::Ok();
  const int held = gpu.HeldMilli();
  gpu.blocked = blocked;
  Sync(n, g, held);
  Touch(n);
  return Status::Ok();
}

GpuMask ClusterState::Unblock(NodeIdx n, GpuMask gpus) {
  GpuMask was = 0;
  for (int g = 0; n < specs_.size() && g < specs_[n].gpu_count; ++g)
    if (((gpus >> g) & 1) && gpus_[n][g].blocked) {
      was |= GpuMask{1} << g;
      (void)SetGpuBlocked(n, g, false);
    }
  return was;
}

void ClusterState::Reblock(NodeIdx n, GpuMask gpus) {
  for (int g = 0; g < kMaxGpusPerNode; ++g)
    if ((gpus >> g) & 1) (void)SetGpuBlocked(n, g, true);
}

Status ClusterState::AllocateBeyondHost(WorkloadId id, const Demand& d, Placement p) {
  Demand gpu_part = d;
  gpu_part.cpu.v = 0;
  gpu_part.memory.v = 0;
  if (d.cpu.v < 0 || d.memory.v < 0) return InvalidArgument("negative or out-of-range demand");
  const GpuMask was = Unblock(p.node, p.gpus);
  const Status st = Allocate(id, gpu_part, p);
  Reblock(p.node, was);
  TESSERA_RETURN_IF_ERROR(st);
  MoveHost(id, d.cpu.v, d.memory.v);
  return Status::Ok();
}

Status ClusterState::AllocateBeyondHost(WorkloadId id, const SliceDemand& d,
                                        const SliceAssignment& a) {
  SliceDemand gpu_part = d;
  gpu_part.cpu.v = 0;
  gpu_part.host_memory.v = 0;
  if (d.cpu.v < 0 || d.host_memory.v < 0) return InvalidArgument("negative request");
  const GpuMask was = Unblock(a.node, a.gpus);
  const Status st = Allocate(id, gpu_part, a);
  Reblock(a.node, was);
  TESSERA_RETURN_IF_ERROR(st);
  MoveHost(id, d.cpu.v, d.host_memory.v);
  return Status::Ok();
}

void ClusterState::MoveHost(WorkloadId id, int64_t cpu, int64_t memory) {
  Entry& e = ledger_.at(id);
  const NodeIdx n = e.slice.node;
  balance_[n].cpu -= cpu - e.cpu;
  balance_[n].memory -= memory - e.memory;
  e.cpu = cpu;
  e.memory = memory;
  SyncHost(n);
  Touch(n);
}

Status ClusterState::ResizeHost(NodeIdx n, MilliCpu cpu, MiB memory) {
  if (n >= specs_.size()) return NotFound("no node index " + std::to_string(n));
  if (cpu.v <= 0 || memory.v <= 0)
    return InvalidArgument("node '" + specs_[n].name + "': non-positive CPU or memory");
  balance_[n].cpu += cpu.v - specs_[n].cpu.v;
  balance_[n].memory += memory.v - specs_[n].memory.v;
  cpu_capacity_milli_ += cpu.v - specs_[n].cpu.v;
  specs_[n].cpu = cpu;
  specs_[n].memory = memory;
  SyncHost(n);
  Touch(n);
  return Status::Ok();
}

Status ClusterState::Allocate(WorkloadId id, const Demand& d, Placement p) {
  if (ledger_.count(id)) return AlreadyExists("workload " + std::to_string(id) + " allocated");
  TESSERA_RETURN_IF_ERROR(CheckFit(p.node, d, p.gpus));
  Entry e;
  e.cpu = d.cpu.v;
  e.memory = d.memory.v;
  e.slice.node = p.node;
  e.slice.gpus = p.gpus;
  if (d.IsShare()) {
    e.slice.kind = SliceKind::kShare;
    e.slice.gpu_milli = d.gpu_milli;
  }
  Apply(e, +1);
  ledger_.emplace(id, std::move(e));
  return Status::Ok();
}

Status ClusterState::Allocate(WorkloadId id, const SliceDemand& d, const SliceAssignment& a) {
  if (ledger_.count(id)) return AlreadyExists("workload " + std::to_string(id) + " allocated");
  TESSERA_RETURN_IF_ERROR(CheckFit(d, a));
  Entry e{d.cpu.v, d.host_memory.v, a};
  Apply(e, +1);
  ledger_.emplace(id, std::move(e));
  return Status::Ok();
}

Status ClusterState::Release(WorkloadId id) {
  auto it = ledger_.find(id);
  if (it == ledger_.end()) return NotFound("workload " + std::to_string(id) + " not allocated");
  Apply(it->second, -1);
  ledger_.erase(it);
  return Status::Ok();
}

const SliceAssignment* ClusterState::Find(WorkloadId id) const {
  auto it = ledger_.find(id);
  return it == ledger_.end() ? nullptr : &it->second.slice;
}

std::vector<WorkloadId> ClusterState::OnGpu(NodeIdx n, int g) const {
  std::vector<WorkloadId> out;
  for (const auto& [id, e] : ledger_)
    if (e.slice.node == n && ((e.slice.gpus >> g) & 1)) out.push_back(id);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::vector<std::vector<WorkloadId>>> ClusterState::Occupants() const {
  std::vector<std::vector<std::vector<WorkloadId>>> out(num_nodes());
  for (NodeIdx n = 0; n < num_nodes(); ++n) out[n].resize(std::max(0, gpu_count(n)));
  for (const auto& [id, e] : ledger_) {
    if (e.slice.node >= out.size()) continue;
    auto& gpus = out[e.slice.node];
    for (size_t g = 0; g < gpus.size(); ++g)
      if ((e.slice.gpus >> g) & 1) gpus[g].push_back(id);
  }
  for (auto& gpus : out)
    for (auto& ids : gpus) std::sort(ids.begin(), ids.end());
  return out;
}

namespace {

// Checks one GPU's incremental state against the state recomputed from the ledger, and its
// mode's limits.
Status CheckGpu(const GpuSlices& s, const GpuSlices& e, const SliceLimits& limits,
                const std::string& gname) {
  if (e.clients != s.clients || e.thread_pct_used != s.thread_pct_used ||
      e.memory_used != s.memory_used || e.milli_used != s.milli_used)
    return Internal(gname + ": counters differ from the ledger");
  if (s.mode == GpuMode::kExclusive && s.clients != 1)
    return Internal(gname + ": exclusive GPU with " + std::to_string(s.clients) + " workloads");
  if (s.mode != GpuMode::kMig && (s.mode == GpuMode::kIdle) != (s.clients == 0))
    return Internal(gname + ": mode does not match occupancy");
  if (s.mode == GpuMode::kShare && (s.milli_used < 1 || s.milli_used > 1000))
    return Internal(gname + " over-allocated");
  if (s.mode == GpuMode::kMps && (s.thread_pct_used > 100 || s.memory_used > s.memory_mib ||
                                  s.clients > limits.mps_max_clients))
    return Internal(gname + ": MPS limits over-allocated");
  if (s.mode == GpuMode::kTimeSlice &&
      (s.memory_used > s.memory_mib || s.clients > limits.timeslice_max_replicas))
    return Internal(gname + ": time-slice replicas over-allocated");
  if (s.mode != GpuMode::kMig && !s.instances.empty())
    return Internal(gname + ": MIG instances on a MIG-disabled GPU");
  if (s.mode != GpuMode::kMig) return Status::Ok();
  const MigGeometry* geo = MigGeometryFor(s.model);
  if (!geo) return Internal(gname + ": MIG mode on a model without MIG");
  Status st = CheckMigLayout(*geo, s.Layout());
  if (!st.ok()) return Internal(gname + ": illegal layout: " + st.message());
  for (size_t i = 0; i < s.instances.size(); ++i) {
    const MigSlot& a = s.instances[i];
    const MigSlot& b = e.instances[i];
    if (a.clients != b.clients || a.thread_pct_used != b.thread_pct_used ||
        a.memory_used != b.memory_used)
      return Internal(gname + ": instance counters differ from the ledger");
    if (a.use == MigSlot::Use::kWhole && a.clients != 1)
      return Internal(gname + ": whole instance shared");
    if (a.memory_used > a.memory_mib || a.thread_pct_used > 100)
      return Internal(gname + ": MPS limits exceed an instance");
    if ((a.use == MigSlot::Use::kFree) != (a.clients == 0))
      return Internal(gname + ": instance use does not match occupancy");
  }
  return Status::Ok();
}

}  // namespace

Status ClusterState::CheckInvariants() const {
  std::vector<NodeFree> expect(free_.size());
  std::vector<std::vector<GpuSlices>> slices = gpus_;
  std::vector<Balance> balance(specs_.size());
  for (size_t n = 0; n < specs_.size(); ++n) {
    balance[n] = {specs_[n].cpu.v, specs_[n].memory.v};
    for (auto& g : slices[n]) {
      g.clients = 0;
      g.thread_pct_used = 0;
      g.memory_used = 0;
      g.milli_used = 0;
      for (auto& s : g.instances) s = MigSlot{s.instance, s.memory_mib};
    }
  }
  for (const auto& [id, e] : ledger_) {
    const SliceAssignment& a = e.slice;
    if (a.node >= specs_.size()) return Internal("workload " + std::to_string(id) + " off-cluster");
    NodeFree& f = expect[a.node];
    balance[a.node].cpu -= e.cpu;
    balance[a.node].memory -= e.memory;
    const int shape = ShapeClass(a);
    if (shape >= 0) ++f.shape_pods[shape];
    if (a.gpus >> slices[a.node].size())
      return Internal("workload " + std::to_string(id) + " on a GPU the node lacks");
    for (int g = 0; g < static_cast<int>(slices[a.node].size()); ++g) {
      if (!((a.gpus >> g) & 1)) continue;
      GpuSlices& gpu = slices[a.node][g];
      ++gpu.clients;
      if (a.kind == SliceKind::kShare) gpu.milli_used += a.gpu_milli;
      if (a.kind == SliceKind::kMps || a.kind == SliceKind::kTimeSlice) {
        gpu.memory_used += a.memory_mib;
        if (a.kind == SliceKind::kMps) gpu.thread_pct_used += a.thread_pct;
      }
      if (a.kind == SliceKind::kMig || a.kind == SliceKind::kMigMps) {
        bool found = false;
        for (auto& s : gpu.instances) {
          if (s.instance.start != a.mig_start) continue;
          found = true;
          ++s.clients;
          if (a.kind == SliceKind::kMigMps) {
            s.thread_pct_used += a.thread_pct;
            s.memory_used += a.memory_mib;
          }
        }
        if (!found)
          return Internal("workload " + std::to_string(id) + " on a missing MIG instance");
      }
    }
  }
  int64_t allocated = 0;
  for (size_t n = 0; n < specs_.size(); ++n) {
    const NodeFree& a = free_[n];
    const NodeFree& b = expect[n];
    const std::string where = "node '" + specs_[n].name + "'";
    if (balance[n].cpu != balance_[n].cpu || balance[n].memory != balance_[n].memory)
      return Internal(where + ": host balance disagrees with the ledger");
    if (a.cpu != std::max<int64_t>(0, balance[n].cpu) ||
        a.memory != std::max<int64_t>(0, balance[n].memory))
      return Internal(where + ": free host resources disagree with the balance");
    if (gpu_state_key_[n] != ComputeGpuStateKey(n))
      return Internal(where + ": GPU state key is stale");
    if (a.cpu < 0 || a.cpu > specs_[n].cpu.v) return Internal(where + ": CPU over-allocated");
    if (a.memory < 0 || a.memory > specs_[n].memory.v)
      return Internal(where + ": memory over-allocated");
    int32_t total = 0;
    for (int g = 0; g < kMaxGpusPerNode; ++g) {
      const std::string gname = where + " GPU " + std::to_string(g);
      if (g < specs_[n].gpu_count) {
        TESSERA_RETURN_IF_ERROR(CheckGpu(gpus_[n][g], slices[n][g], limits_, gname));
        if (a.gpu[g] != gpus_[n][g].FreeMilli())
          return Internal(gname + ": free share disagrees with the slice state");
        allocated += gpus_[n][g].HeldMilli();
      } else if (a.gpu[g] != 0) {
        return Internal(gname + ": free share on a GPU the node lacks");
      }
      total += a.gpu[g];
    }
    if (total != a.gpu_total) return Internal(where + ": GPU total disagrees with per-GPU shares");
    if (a.shape_pods != b.shape_pods) return Internal(where + ": pod shape counts disagree");
  }
  if (allocated != gpu_allocated_milli_) return Internal("cluster GPU allocation total disagrees");
  std::array<int64_t, 64> by_model{};
  int64_t free_cpu = 0;
  for (size_t n = 0; n < specs_.size(); ++n) {
    free_cpu += free_[n].cpu;
    if (free_[n].model < by_model.size()) by_model[free_[n].model] += free_[n].gpu_total;
  }
  if (by_model != free_gpu_by_model_) return Internal("cluster free GPU by model disagrees");
  if (free_cpu != free_cpu_milli_) return Internal("cluster free CPU total disagrees");
  return Status::Ok();
}

}  // namespace tessera
