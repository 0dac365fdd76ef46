#include "sim/sharing_strategies.h"

#include <algorithm>
#include <bit>

#include "sharing/allocator.h"

namespace tessera::sharing_detail {
namespace {

bool ModelAllowed(const SliceDemand& d, GpuModelId m) {
  return d.models == 0 || (m < 64 && ((d.models >> m) & 1));
}

// What the device plugin knows of a workload: the GPUs it asks for and its host resources.
SliceDemand PluginDemand(const SliceDemand& d, bool first_part) {
  SliceDemand p;
  p.isolation = Isolation::kBestEffort;
  p.models = d.models;
  if (first_part) {
    p.cpu = d.cpu;
    p.host_memory = d.host_memory;
  }
  return p;
}

// Allocates the parts in order; on a refusal releases the ones done and reports Internal.
Status AllocateParts(ClusterState& c, const SliceDemand& d, const std::vector<Part>& parts,
                     const char* strategy) {
  for (size_t i = 0; i < parts.size(); ++i) {
    SliceDemand pd = PluginDemand(d, i == 0);
    if (parts[i].a.kind == SliceKind::kExclusive) pd.whole_gpus = std::popcount(parts[i].a.gpus);
    Status st = c.Allocate(parts[i].ledger_id, pd, parts[i].a);
    if (!st.ok()) {
      for (size_t j = 0; j < i; ++j) (void)c.Release(parts[j].ledger_id);
      return Internal(std::string(strategy) +
                      ": the ledger refused a chosen slice: " + st.message());
    }
  }
  return Status::Ok();
}

// k idle non-MIG GPUs on the node with the fewest idle GPUs that suffices.
bool FindExclusive(const ClusterState& c, const SliceDemand& d, int k, SliceAssignment* out) {
  int best_idle = kMaxGpusPerNode + 1;
  const SliceDemand pd = PluginDemand(d, true);
  for (NodeIdx n = 0; n < c.num_nodes(); ++n) {
    if (c.gpu_count(n) < k || !ModelAllowed(d, c.spec(n).model)) continue;
    int idle = 0;
    GpuMask mask = 0;
    for (int g = 0; g < c.gpu_count(n); ++g) {
      if (c.gpu(n, g).mode != GpuMode::kIdle) continue;
      if (idle < k) mask |= GpuMask{1} << g;
      ++idle;
    }
    if (idle < k || idle >= best_idle) continue;
    SliceAssignment a;
    a.kind = SliceKind::kExclusive;
    a.node = n;
    a.gpus = mask;
    if (!c.CheckFit(pd, a).ok()) continue;
    best_idle = idle;
    *out = a;
  }
  return best_idle <= kMaxGpusPerNode;
}

Result<bool> PlaceExclusive(ClusterState& c, const SharingWorkload& w, WorkloadId base,
                            Placement* out, const char* strategy) {
  SliceAssignment a;
  if (!FindExclusive(c, w.demand, std::max(1, w.demand.whole_gpus), &a)) return false;
  out->parts = {Part{base, a}};
  TESSERA_RETURN_IF_ERROR(AllocateParts(c, w.demand, out->parts, strategy));
  return true;
}

class ExclusiveStrategy final : public Strategy {
 public:
  Result<bool> Place(ClusterState& c, const SharingWorkload& w, WorkloadId base,
                     Placement* out) override {
    return PlaceExclusive(c, w, base, out, "exclusive");
  }
};

class StaticMigStrategy final : public Strategy {
 public:
  explicit StaticMigStrategy(const SharingScenario& s) : s_(s) {}

  Status Init(ClusterState& c) override {
    NodeIdx n = 0;
    for (const SharingNodeGroup& g : s_.node_groups) {
      for (int i = 0; i < g.count; ++i, ++n) {
        for (int gpu = 0; gpu < g.static_mig_gpus; ++gpu) {
          auto diff = c.SetMigLayout(n, gpu, true, g.static_mig_layout);
          if (!diff.ok())
            return Internal("static-mig: cannot apply the static layout: " +
                            diff.status().message());
        }
      }
    }
    return Status::Ok();
  }

  Result<bool> Place(ClusterState& c, const SharingWorkload& w, WorkloadId base,
                     Placement* out) override {
    const SliceDemand& d = w.demand;
    if (d.whole_gpus > 0) return PlaceExclusive(c, w, base, out, "static-mig");
    struct Slot {
      int64_t memory;
      int compute;
      NodeIdx n;
      int g;
      int start;
      int profile;
      auto operator<=>(const Slot&) const = default;
    };
    std::vector<Slot> slots;
    for (NodeIdx n = 0; n < c.num_nodes(); ++n) {
      if (!ModelAllowed(d, c.spec(n).model)) continue;
      for (int g = 0; g < c.gpu_count(n); ++g) {
        const GpuSlices& gpu = c.gpu(n, g);
        if (!gpu.mig_enabled()) continue;
        const MigGeometry* geo = MigGeometryFor(gpu.model);
        for (const MigSlot& s : gpu.instances) {
          if (s.use != MigSlot::Use::kFree || s.memory_mib < d.memory_mib) continue;
          slots.push_back(Slot{s.memory_mib, geo->profiles[s.instance.profile].compute_slices, n, g,
                               s.instance.start, s.instance.profile});
        }
      }
    }
    std::sort(slots.begin(), slots.end());
    for (const Slot& s : slots) {
      SliceAssignment a;
      a.kind = SliceKind::kMig;
      a.node = s.n;
      a.gpus = GpuMask{1} << s.g;
      a.mig_start = s.start;
      if (!c.CheckFit(PluginDemand(d, true), a).ok()) continue;
      out->parts = {Part{base, a, s.profile}};
      TESSERA_RETURN_IF_ERROR(AllocateParts(c, d, out->parts, "static-mig"));
      return true;
    }
    return PlaceExclusive(c, w, base, out, "static-mig");
  }

 private:
  const SharingScenario& s_;
};

// The device plugin's replicated resources (time-slicing or MPS): `limit` slices per GPU.
class ReplicaStrategy final : public Strategy {
 public:
  ReplicaStrategy(SliceKind kind, int limit) : kind_(kind), limit_(limit) {}

  Result<bool> Place(ClusterState& c, const SharingWorkload& w, WorkloadId base,
                     Placement* out) override {
    const SliceDemand& d = w.demand;
    const int k = std::max(1, d.whole_gpus);
    const GpuMode mode = kind_ == SliceKind::kMps ? GpuMode::kMps : GpuMode::kTimeSlice;
    const char* name = kind_ == SliceKind::kMps ? "mps" : "timeslice";
    int best_score = -1;
    std::vector<Part> best;
    for (NodeIdx n = 0; n < c.num_nodes(); ++n) {
      if (c.gpu_count(n) < k || !ModelAllowed(d, c.spec(n).model)) continue;
      std::vector<std::pair<int, int>> load;  // (clients, GPU)
      for (int g = 0; g < c.gpu_count(n); ++g) {
        const GpuSlices& gpu = c.gpu(n, g);
        if ((gpu.mode == GpuMode::kIdle || gpu.mode == mode) && gpu.clients < limit_)
          load.emplace_back(gpu.clients, g);
      }
      if (static_cast<int>(load.size()) < k) continue;
      std::sort(load.begin(), load.end());
      int score = 0;
      for (int i = 0; i < k; ++i) score += load[i].first;
      if (best_score >= 0 && score >= best_score) continue;
      std::vector<Part> parts;
      bool fits = true;
      for (int i = 0; i < k && fits; ++i) {
        const GpuSlices& gpu = c.gpu(n, load[i].second);
        SliceAssignment a;
        a.kind = kind_;
        a.node = n;
        a.gpus = GpuMask{1} << load[i].second;
        if (kind_ == SliceKind::kMps) {
          a.thread_pct = 100 / limit_;
          a.memory_mib = gpu.memory_mib / limit_;
        }
        fits = c.CheckFit(PluginDemand(d, i == 0), a).ok();
        parts.push_back(Part{base + static_cast<WorkloadId>(i), a});
      }
      if (!fits) continue;
      best_score = score;
      best = std::move(parts);
    }
    if (best.empty()) return false;
    out->parts = std::move(best);
    TESSERA_RETURN_IF_ERROR(AllocateParts(c, d, out->parts, name));
    return true;
  }

 private:
  SliceKind kind_;
  int limit_;
};

class TesseraStrategy final : public Strategy {
 public:
  explicit TesseraStrategy(SharingConfig config) : alloc_(config) {}
  void Observe(const SliceDemand& d, SimTime t) override {
    alloc_.Observe(d, static_cast<double>(t));
  }
  void Clock(SimTime t) override { alloc_.AdvanceClock(static_cast<double>(t)); }
  bool GaveUp(WorkloadId base) override { return alloc_.Forget(base); }
  size_t Reservations() const override { return alloc_.reserved_nodes(); }
  const std::vector<uint8_t>* PreemptNodes(const ClusterState& c, WorkloadId base) override {
    return alloc_.NodesFor(c, base);
  }

  Result<bool> Place(ClusterState& c, const SharingWorkload& w, WorkloadId base,
                     Placement* out) override {
    PlaceOutcome o = alloc_.Place(c, base, w.demand);
    const SliceAssignment* held = c.Find(base);
    out->reconfigs = std::move(o.reconfigs);
    if (!o.placed) {
      if (held) return Internal("tessera: workload not placed but held by the ledger");
      return false;
    }
    if (!held || !(*held == o.assignment))
      return Internal("tessera: reported placement differs from the ledger");
    Part p{base, *held};
    if (held->kind == SliceKind::kMig || held->kind == SliceKind::kMigMps) {
      const MigSlot* slot =
          c.gpu(held->node, std::countr_zero(held->gpus)).Instance(held->mig_start);
      if (!slot) return Internal("tessera: placed on a MIG instance that does not exist");
      p.mig_profile = slot->instance.profile;
    }
    out->parts = {p};
    out->explanation = std::move(o.explanation);
    return true;
  }

 private:
  SharingAllocator alloc_;
};

}  // namespace

Result<std::unique_ptr<Strategy>> MakeStrategy(const SharingScenario& s, const std::string& name,
                                               SliceLimits* limits) {
  if (name == "exclusive") return std::unique_ptr<Strategy>(new ExclusiveStrategy());
  if (name == "static-mig") return std::unique_ptr<Strategy>(new StaticMigStrategy(s));
  if (name == "timeslice") {
    limits->timeslice_max_replicas = s.timeslice_replicas;
    return std::unique_ptr<Strategy>(
        new ReplicaStrategy(SliceKind::kTimeSlice, s.timeslice_replicas));
  }
  if (name == "mps") {
    limits->mps_max_clients = s.mps_clients;
    return std::unique_ptr<Strategy>(new ReplicaStrategy(SliceKind::kMps, s.mps_clients));
  }
  if (name == "tessera") {
    SharingConfig config;
    config.protect_nodes = s.tessera_protection == "on";
    return std::unique_ptr<Strategy>(new TesseraStrategy(config));
  }
  std::string known;
  for (const auto& n : SharingStrategyNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgument("unknown strategy '" + name + "' (known: " + known + ")");
}

}  // namespace tessera::sharing_detail
