#include "cluster/cluster_state.h"

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
  if (spec.model != kNoGpuModel && spec.model >= GpuCatalog::Builtin().size())
    return InvalidArgument("node '" + spec.name + "': GPU model id " + std::to_string(spec.model) +
                           " is not in the catalog");
  return Status::Ok();
}

void ClusterState::Touch(NodeIdx n) {
  free_[n].stamp = g_next_stamp.fetch_add(1, std::memory_order_relaxed) + 1;
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
  const NodeIdx idx = static_cast<NodeIdx>(specs_.size());
  gpu_capacity_milli_ += f.gpu_total;
  by_name_.emplace(spec.name, idx);
  specs_.push_back(std::move(spec));
  free_.push_back(f);
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
  for (int g = 0; g < f.gpu_count; ++g) {
    if (((gpus >> g) & 1) && f.gpu[g] < d.gpu_milli)
      return ResourceExhausted("insufficient share on GPU " + std::to_string(g));
  }
  return Status::Ok();
}

Status ClusterState::Allocate(WorkloadId id, const Demand& d, Placement p) {
  if (ledger_.count(id)) return AlreadyExists("workload " + std::to_string(id) + " allocated");
  TESSERA_RETURN_IF_ERROR(CheckFit(p.node, d, p.gpus));
  NodeFree& f = free_[p.node];
  f.cpu -= d.cpu.v;
  f.memory -= d.memory.v;
  for (int g = 0; g < f.gpu_count; ++g) {
    if ((p.gpus >> g) & 1) f.gpu[g] = static_cast<int16_t>(f.gpu[g] - d.gpu_milli);
  }
  f.gpu_total -= static_cast<int32_t>(d.TotalMilliGpu());
  if (d.num_gpu > 0) ++f.shape_pods[ShapeClass(d)];
  gpu_allocated_milli_ += d.TotalMilliGpu();
  ledger_.emplace(id, Entry{d, p});
  Touch(p.node);
  return Status::Ok();
}

Status ClusterState::Release(WorkloadId id) {
  auto it = ledger_.find(id);
  if (it == ledger_.end()) return NotFound("workload " + std::to_string(id) + " not allocated");
  const Demand& d = it->second.demand;
  const Placement& p = it->second.placement;
  NodeFree& f = free_[p.node];
  f.cpu += d.cpu.v;
  f.memory += d.memory.v;
  for (int g = 0; g < f.gpu_count; ++g) {
    if ((p.gpus >> g) & 1) f.gpu[g] = static_cast<int16_t>(f.gpu[g] + d.gpu_milli);
  }
  f.gpu_total += static_cast<int32_t>(d.TotalMilliGpu());
  if (d.num_gpu > 0) --f.shape_pods[ShapeClass(d)];
  gpu_allocated_milli_ -= d.TotalMilliGpu();
  Touch(p.node);
  ledger_.erase(it);
  return Status::Ok();
}

Status ClusterState::CheckInvariants() const {
  std::vector<NodeFree> expect(free_.size());
  for (size_t n = 0; n < specs_.size(); ++n) {
    expect[n].cpu = specs_[n].cpu.v;
    expect[n].memory = specs_[n].memory.v;
    for (int g = 0; g < specs_[n].gpu_count; ++g) expect[n].gpu[g] = 1000;
  }
  int64_t allocated = 0;
  for (const auto& [id, e] : ledger_) {
    NodeFree& f = expect[e.placement.node];
    f.cpu -= e.demand.cpu.v;
    f.memory -= e.demand.memory.v;
    for (int g = 0; g < kMaxGpusPerNode; ++g) {
      if ((e.placement.gpus >> g) & 1)
        f.gpu[g] = static_cast<int16_t>(f.gpu[g] - e.demand.gpu_milli);
    }
    if (e.demand.num_gpu > 0) ++f.shape_pods[ShapeClass(e.demand)];
    allocated += e.demand.TotalMilliGpu();
  }
  for (size_t n = 0; n < specs_.size(); ++n) {
    const NodeFree& a = free_[n];
    const NodeFree& b = expect[n];
    const std::string where = "node '" + specs_[n].name + "': ";
    if (a.cpu != b.cpu) return Internal(where + "free CPU disagrees with the ledger");
    if (a.memory != b.memory) return Internal(where + "free memory disagrees with the ledger");
    if (a.cpu < 0 || a.cpu > specs_[n].cpu.v) return Internal(where + "CPU over-allocated");
    if (a.memory < 0 || a.memory > specs_[n].memory.v)
      return Internal(where + "memory over-allocated");
    int32_t total = 0;
    for (int g = 0; g < kMaxGpusPerNode; ++g) {
      if (a.gpu[g] != b.gpu[g]) return Internal(where + "GPU share disagrees with the ledger");
      if (g < a.gpu_count && (a.gpu[g] < 0 || a.gpu[g] > 1000))
        return Internal(where + "GPU " + std::to_string(g) + " over-allocated");
      total += a.gpu[g];
    }
    if (total != a.gpu_total) return Internal(where + "GPU total disagrees with per-GPU shares");
    if (a.shape_pods != b.shape_pods) return Internal(where + "pod shape counts disagree");
  }
  if (allocated != gpu_allocated_milli_) return Internal("cluster GPU allocation total disagrees");
  return Status::Ok();
}

}  // namespace tessera
