#include "sharing/selector.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <unordered_set>

namespace tessera {
namespace {

// Cost added for opening an idle GPU, so that shared GPUs fill before new ones are touched.
constexpr double kOpenIdleGpu = 0.05;
// Cost added for turning an idle MIG-capable GPU into an MPS or time-sliced one: it can no
// longer be partitioned until it empties.
constexpr double kBlockMigGpu = 0.15;
// Cost per fraction of the node's GPUs that are idle, added when a slice opens an idle GPU or
// takes whole GPUs: new work goes to nodes already in use, so that whole idle nodes remain for
// multi-GPU jobs. Smaller than kOpenIdleGpu: a shared GPU with room still comes first.
constexpr double kOpenIdleNode = 0.04;

int64_t CeilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

std::string Gib(int64_t mib) {
  char buf[32];
  if (mib % 1024 == 0)
    std::snprintf(buf, sizeof buf, "%lld GiB", static_cast<long long>(mib / 1024));
  else
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(mib) / 1024.0);
  return buf;
}

}  // namespace

bool WantsWholeGpus(const SliceDemand& d) {
  return d.whole_gpus > 0 || d.compute_pct == 100 ||
         (d.memory_mib == 0 && d.compute_pct == 0 && d.mig_profile.empty());
}

double CapacityWeight(const ClusterState& cluster, NodeIdx n) {
  const int64_t largest = cluster.max_gpu_memory_mib();
  if (largest <= 0 || cluster.gpu_count(n) == 0) return 1.0;
  const int64_t mine = cluster.gpu(n, 0).memory_mib;
  return mine > 0 ? static_cast<double>(mine) / static_cast<double>(largest) : 1.0;
}

int64_t EffectiveMemoryMib(const SliceDemand& d, GpuModelId model) {
  if (d.memory_mib > 0) return d.memory_mib;
  const int64_t card = GpuCatalog::Builtin().Get(model).memory_mib;
  if (!d.mig_profile.empty()) {
    const MigGeometry* geo = MigGeometryFor(model);
    const int p = geo ? geo->Find(d.mig_profile) : -1;
    if (p >= 0) return geo->profiles[p].memory_mib;
  }
  if (d.compute_pct > 0) return CeilDiv(card * d.compute_pct, 100);
  return card;
}

Result<SizedSlice> SizeSlice(const SliceDemand& d, GpuModelId model, SliceKind kind) {
  const GpuModelInfo& info = GpuCatalog::Builtin().Get(model);
  if (!SliceKindSatisfies(kind, d.isolation))
    return FailedPrecondition(std::string(IsolationName(d.isolation)) + " isolation rules out " +
                              SliceKindName(kind));
  const MigGeometry* geo = MigGeometryFor(model);
  SizedSlice s;
  s.kind = kind;
  if (WantsWholeGpus(d)) {
    if (kind != SliceKind::kExclusive)
      return FailedPrecondition("whole GPUs are served exclusively");
    s.gpus = std::max(1, d.whole_gpus);
    s.memory_mib = info.memory_mib;
    return s;
  }
  if (!d.mig_profile.empty()) {
    if (!geo) return FailedPrecondition(info.name + " does not support MIG");
    const int p = geo->Find(d.mig_profile);
    if (p < 0) return FailedPrecondition(info.name + " has no MIG profile " + d.mig_profile);
    if (kind != SliceKind::kMig) return FailedPrecondition("an explicit MIG profile needs MIG");
    s.mig_profile = p;
    s.memory_mib = geo->profiles[p].memory_mib;
    if (d.memory_mib > s.memory_mib)
      return FailedPrecondition(d.mig_profile + " has " + Gib(s.memory_mib) + ", " +
                                Gib(d.memory_mib) + " needed");
    return s;
  }
  const int64_t mem = EffectiveMemoryMib(d, model);
  if (mem > info.memory_mib)
    return FailedPrecondition(info.name + " has " + Gib(info.memory_mib) + ", " + Gib(mem) +
                              " needed");
  s.memory_mib = mem;
  switch (kind) {
    case SliceKind::kExclusive:
      s.gpus = 1;
      s.memory_mib = info.memory_mib;
      return s;
    case SliceKind::kMig: {
      if (!geo) return FailedPrecondition(info.name + " does not support MIG");
      const int slices = static_cast<int>(CeilDiv(d.compute_pct * geo->compute_slices, 100));
      s.mig_profile = geo->SmallestCovering(mem, slices);
      if (s.mig_profile < 0)
        return FailedPrecondition("no MIG profile of " + info.name + " covers it");
      s.memory_mib = geo->profiles[s.mig_profile].memory_mib;
      return s;
    }
    case SliceKind::kMps:
    case SliceKind::kMigMps:
      if (kind == SliceKind::kMigMps && !geo)
        return FailedPrecondition(info.name + " does not support MIG");
      s.thread_pct =
          d.compute_pct > 0
              ? d.compute_pct
              : static_cast<int>(std::max<int64_t>(1, CeilDiv(100 * mem, info.memory_mib)));
      return s;
    case SliceKind::kTimeSlice:
      return s;
    case SliceKind::kShare:
      return FailedPrecondition("milli-GPU shares are placed by the placement engine");
  }
  return InvalidArgument("unknown slice kind");
}

namespace {

struct Tally {
  int nodes_host = 0, nodes_model = 0;
  std::string size_reason;
  bool any_gpu_checked = false;
};

std::string Describe(const SliceChoice& c, const GpuSlices& gpu) {
  const auto& a = c.assignment;
  switch (a.kind) {
    case SliceKind::kExclusive: {
      const int n = std::popcount(a.gpus);
      return "exclusive " + std::to_string(n) + (n == 1 ? " GPU" : " GPUs");
    }
    case SliceKind::kMig:
    case SliceKind::kMigMps: {
      const MigGeometry* geo = MigGeometryFor(gpu.model);
      const MigSlot* slot = gpu.Instance(a.mig_start);
      const std::string prof = slot ? geo->profiles[slot->instance.profile].name : "?";
      if (a.kind == SliceKind::kMig) return "MIG " + prof;
      return "MPS " + std::to_string(a.thread_pct) + "% / " + Gib(a.memory_mib) + " in MIG " + prof;
    }
    case SliceKind::kMps:
      return "MPS " + std::to_string(a.thread_pct) + "% / " + Gib(a.memory_mib);
    case SliceKind::kTimeSlice:
      return "time-slice replica (" + Gib(a.memory_mib) + " declared)";
    case SliceKind::kShare:
      return "share " + std::to_string(a.gpu_milli) + " milli-GPU";
  }
  return "?";
}

}  // namespace

std::vector<SliceChoice> SliceSelector::Collect(const ClusterState& cluster, const SliceDemand& d,
                                                const std::vector<uint8_t>* allowed, bool best_only,
                                                size_t* nodes) const {
  std::vector<SliceChoice> out;
  size_t eligible = 0;
  std::unordered_set<uint64_t> states_seen;
  // SizeSlice per (model, kind), computed on first use: it is the same for every node.
  constexpr int kKinds = 5;
  std::vector<std::optional<Result<SizedSlice>>> sizes;
  // The sort order below: cost, then node, then GPUs, then the order found.
  auto before = [](const SliceChoice& a, const SliceChoice& b) {
    if (a.cost != b.cost) return a.cost < b.cost;
    if (a.assignment.node != b.assignment.node) return a.assignment.node < b.assignment.node;
    return a.assignment.gpus < b.assignment.gpus;
  };
  const SliceKind kinds[] = {SliceKind::kMig, SliceKind::kMigMps, SliceKind::kMps,
                             SliceKind::kTimeSlice, SliceKind::kExclusive};
  for (NodeIdx n = 0; n < cluster.num_nodes(); ++n) {
    if (allowed && (n >= allowed->size() || !(*allowed)[n])) continue;
    if (cluster.gpu_count(n) == 0) continue;
    if (d.cpu.v > cluster.free_cpu(n) || d.host_memory.v > cluster.free_host_memory(n)) continue;
    const GpuModelId model = cluster.spec(n).model;
    if (d.models != 0 && !((d.models >> model) & 1)) continue;
    ++eligible;
    if (best_only && !states_seen.insert(cluster.gpu_state_key(n)).second) continue;
    const int64_t card = GpuCatalog::Builtin().Get(model).memory_mib;
    const MigGeometry* geo = MigGeometryFor(model);
    const double weight = CapacityWeight(cluster, n);
    for (int k = 0; k < kKinds; ++k) {
      const SliceKind kind = kinds[k];
      if ((kind == SliceKind::kMig && !config_.allow_mig) ||
          (kind == SliceKind::kMps && !config_.allow_mps) ||
          (kind == SliceKind::kMigMps && (!config_.allow_mig_mps || !config_.allow_mig)) ||
          (kind == SliceKind::kTimeSlice && !config_.allow_timeslice))
        continue;
      const size_t slot = static_cast<size_t>(model) * kKinds + k;
      if (slot >= sizes.size()) sizes.resize(slot + 1);
      if (!sizes[slot]) sizes[slot] = SizeSlice(d, model, kind);
      const Result<SizedSlice>& sized = *sizes[slot];
      if (!sized.ok()) continue;
      auto push = [&](SliceAssignment a, double cost) {
        cost *= weight;
        if (best_only && !out.empty()) {
          const SliceChoice& b = out.front();
          // Nodes come in index order: a later candidate wins only by a strictly lower cost.
          if (cost > b.cost) return;
          if (cost == b.cost && (a.node > b.assignment.node ||
                                 (a.node == b.assignment.node && a.gpus >= b.assignment.gpus)))
            return;
        }
        if (!cluster.CheckFit(d, a).ok()) return;
        SliceChoice c;
        c.placed = true;
        c.assignment = a;
        c.cost = cost;
        if (!best_only)
          out.push_back(std::move(c));
        else if (out.empty())
          out.push_back(std::move(c));
        else if (before(c, out.front()))
          out.front() = std::move(c);
      };
      const int gcount = cluster.gpu_count(n);
      int idle_gpus = 0;
      for (int g = 0; g < gcount; ++g) {
        const GpuSlices& gpu = cluster.gpu(n, g);
        idle_gpus += gpu.mode == GpuMode::kIdle && !gpu.blocked;
      }
      const double node_idle = kOpenIdleNode * idle_gpus / gcount;
      if (kind == SliceKind::kExclusive) {
        SliceAssignment a{SliceKind::kExclusive, n, 0};
        int got = 0;
        bool mig_capable_used = false;
        for (int g = 0; g < gcount && got < sized->gpus; ++g) {
          const GpuSlices& gpu = cluster.gpu(n, g);
          if (gpu.mode != GpuMode::kIdle || gpu.blocked) continue;
          a.gpus |= GpuMask{1} << g;
          mig_capable_used |= geo != nullptr;
          ++got;
        }
        if (got < sized->gpus) continue;
        push(a, sized->gpus + (mig_capable_used ? 0.01 : 0.0) + node_idle);
        continue;
      }
      for (int g = 0; g < gcount; ++g) {
        const GpuSlices& gpu = cluster.gpu(n, g);
        const double idle_penalty = gpu.Idle() ? kOpenIdleGpu + node_idle : 0.0;
        if (kind == SliceKind::kMps || kind == SliceKind::kTimeSlice) {
          if (gpu.mode == GpuMode::kMig) continue;
          SliceAssignment a{kind, n, GpuMask{1} << g};
          a.memory_mib = sized->memory_mib;
          a.thread_pct = sized->thread_pct;
          const double used =
              std::max(static_cast<double>(a.thread_pct) / 100.0,
                       static_cast<double>(a.memory_mib) / static_cast<double>(card));
          const double block = gpu.Idle() && geo ? kBlockMigGpu : 0.0;
          // Time-slicing guarantees no compute: rank it after MPS at equal memory.
          push(a, (kind == SliceKind::kTimeSlice ? static_cast<double>(a.memory_mib) / card + 0.02
                                                 : used) +
                      idle_penalty + block);
          continue;
        }
        if (gpu.mode != GpuMode::kMig) continue;
        int free_instance_slices = 0;
        for (const MigSlot& slot : gpu.instances)
          if (slot.use == MigSlot::Use::kFree)
            free_instance_slices += geo->profiles[slot.instance.profile].compute_slices;
        for (const MigSlot& slot : gpu.instances) {
          const MigProfile& prof = geo->profiles[slot.instance.profile];
          const double frac = static_cast<double>(prof.compute_slices) / geo->compute_slices;
          SliceAssignment a{kind, n, GpuMask{1} << g, slot.instance.start};
          if (kind == SliceKind::kMig) {
            if (slot.use != MigSlot::Use::kFree) continue;
            // An explicit profile is pinned: the container asks for that device resource.
            if (!d.mig_profile.empty() && slot.instance.profile != sized->mig_profile) continue;
            if (prof.memory_mib < sized->memory_mib) continue;
            if (prof.compute_slices < geo->profiles[sized->mig_profile].compute_slices) continue;
            if (prof.media_extensions) continue;
            // Packing: among equal sizes prefer GPUs with fewer free slices left.
            const double left = static_cast<double>(free_instance_slices - prof.compute_slices) /
                                geo->compute_slices;
            push(a, frac + 0.01 * left);
          } else {
            if (slot.use == MigSlot::Use::kWhole) continue;
            a.memory_mib = sized->memory_mib;
            a.thread_pct = static_cast<int>(std::min<int64_t>(
                100, CeilDiv(static_cast<int64_t>(sized->thread_pct) * geo->compute_slices,
                             prof.compute_slices)));
            const double used = frac * std::max(static_cast<double>(a.thread_pct) / 100.0,
                                                static_cast<double>(a.memory_mib) /
                                                    static_cast<double>(prof.memory_mib));
            push(a, used + (slot.use == MigSlot::Use::kFree ? 0.5 * frac : 0.0));
          }
        }
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), before);
  if (nodes) *nodes = eligible;
  return out;
}

std::vector<SliceChoice> SliceSelector::Candidates(const ClusterState& cluster,
                                                   const SliceDemand& d,
                                                   const std::vector<uint8_t>* allowed) const {
  auto out = Collect(cluster, d, allowed);
  for (auto& c : out) Explain(cluster, d, c);
  return out;
}

void SliceSelector::Explain(const ClusterState& cluster, const SliceDemand& d,
                            SliceChoice& c) const {
  {
    const GpuSlices& gpu = cluster.gpu(c.assignment.node, std::countr_zero(c.assignment.gpus));
    c.mechanism = Describe(c, gpu);
    std::string gpus;
    for (int g = 0; g < kMaxGpusPerNode; ++g)
      if ((c.assignment.gpus >> g) & 1) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
    const int64_t mem = EffectiveMemoryMib(d, gpu.model);
    c.explanation =
        c.mechanism + " on GPU" + (std::popcount(c.assignment.gpus) > 1 ? "s " : " ") + gpus +
        " of " + cluster.spec(c.assignment.node).name + ": " + IsolationName(d.isolation) +
        " isolation, " +
        (WantsWholeGpus(d)
             ? std::string("whole GPUs requested")
             : Gib(mem) + " peak" +
                   (d.compute_pct > 0 ? ", " + std::to_string(d.compute_pct) + "% compute"
                                      : std::string()));
  }
}

SliceChoice SliceSelector::Select(const ClusterState& cluster, const SliceDemand& d,
                                  const std::vector<uint8_t>* allowed) const {
  size_t nodes = 0;
  auto all = Collect(cluster, d, allowed, /*best_only=*/true, &nodes);
  if (!all.empty()) {
    SliceChoice best = std::move(all.front());
    Explain(cluster, d, best);
    best.explanation +=
        " (cheapest over " + std::to_string(nodes) + (nodes == 1 ? " node)" : " nodes)");
    return best;
  }
  // Nothing fits: say why, from the most specific obstacle found.
  SliceChoice none;
  Status st = ValidateSliceDemand(d);
  if (!st.ok()) {
    none.reason = st.message();
    return none;
  }
  int host = 0, model = 0, sized = 0, excluded = 0;
  const bool whole = WantsWholeGpus(d);
  int few_idle = 0;  // whole GPUs: nodes with fewer idle GPUs than asked for
  int mig_gpus = 0, instances = 0, busy = 0;  // explicit MIG profile: what the layouts hold
  std::set<GpuModelId> models_seen;
  std::string size_reason;
  for (NodeIdx n = 0; n < cluster.num_nodes(); ++n) {
    if (cluster.gpu_count(n) == 0) continue;
    if (allowed && (n >= allowed->size() || !(*allowed)[n])) {
      ++excluded;
      continue;
    }
    if (d.cpu.v > cluster.free_cpu(n) || d.host_memory.v > cluster.free_host_memory(n)) {
      ++host;
      continue;
    }
    const GpuModelId m = cluster.spec(n).model;
    if (d.models != 0 && !((d.models >> m) & 1)) {
      ++model;
      continue;
    }
    if (!d.mig_profile.empty()) {
      const MigGeometry* geo = MigGeometryFor(m);
      const int want = geo ? geo->Find(d.mig_profile) : -1;
      if (want >= 0) {
        models_seen.insert(m);
        for (int g = 0; g < cluster.gpu_count(n); ++g) {
          const GpuSlices& gpu = cluster.gpu(n, g);
          if (!gpu.mig_enabled()) continue;
          ++mig_gpus;
          for (const MigSlot& slot : gpu.instances)
            if (slot.instance.profile == want) ++instances, busy += slot.clients > 0;
        }
      }
    }
    bool any = false;
    for (SliceKind k : {SliceKind::kMig, SliceKind::kMps, SliceKind::kTimeSlice,
                        SliceKind::kExclusive, SliceKind::kMigMps}) {
      auto s = SizeSlice(d, m, k);
      if (s.ok())
        any = true;
      else if (size_reason.empty() && k == SliceKind::kExclusive)
        size_reason = s.status().message();
    }
    if (!any) ++sized;
    if (whole) {
      int idle = 0;
      for (int g = 0; g < cluster.gpu_count(n); ++g)
        idle += cluster.gpu(n, g).mode == GpuMode::kIdle && !cluster.gpu(n, g).blocked ? 1 : 0;
      if (idle < std::max(1, d.whole_gpus)) ++few_idle;
    }
  }
  std::string what;
  switch (d.isolation) {
    case Isolation::kStrict:
      what = "a free MIG instance or idle GPU";
      break;
    case Isolation::kStandard:
      what = "a free MIG instance, MPS room or an idle GPU";
      break;
    case Isolation::kBestEffort:
      what = "any GPU room";
      break;
  }
  if (whole) what = d.whole_gpus > 1 ? std::to_string(d.whole_gpus) + " idle GPUs" : "an idle GPU";
  none.reason = "no GPU node has " + what + " for it";
  if (!d.mig_profile.empty() && !models_seen.empty()) {
    std::string names;
    for (GpuModelId m : models_seen)
      names += (names.empty() ? "" : "/") + GpuCatalog::Builtin().Get(m).name;
    none.reason = "no free " + d.mig_profile + " on " + names +
                  " nodes: " + std::to_string(instances) + " such instances in the layouts of " +
                  std::to_string(mig_gpus) + " MIG-enabled GPUs, " + std::to_string(busy) +
                  " in use";
  }
  if (host || model || sized || excluded || few_idle) {
    none.reason += " (";
    std::string parts;
    if (excluded) parts += std::to_string(excluded) + " excluded by node constraints";
    if (host && !parts.empty()) parts += ", ";
    if (host) parts += std::to_string(host) + " nodes short of host CPU/memory";
    if (model)
      parts += (parts.empty() ? "" : ", ") + std::to_string(model) + " of another GPU model";
    if (sized)
      parts += (parts.empty() ? "" : ", ") + std::to_string(sized) + " too small" +
               (size_reason.empty() ? "" : ": " + size_reason);
    if (few_idle)
      parts += (parts.empty() ? "" : ", ") + std::to_string(few_idle) + " with fewer idle GPUs";
    none.reason += parts + ")";
  }
  return none;
}

}  // namespace tessera
