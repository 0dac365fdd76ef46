// Preemption: victim choice within a queue and reclaim of lent quota across a cohort.
#include "admission/admission_internal.h"

#include <bit>

#include "sharing/eviction.h"

namespace tessera {

bool Admission::Impl::Newer(const JobSpec& v, const JobSpec& j) {
  return v.arrival != j.arrival ? v.arrival > j.arrival : v.id > j.id;
}

bool Admission::Impl::Preempt(ClusterState& state, Job& j, int f, double now, bool placement_failed,
                              CycleResult& out) {
  const bool cache = failure_cache;
  failure_cache = false;
  const bool admitted = PreemptImpl(state, j, f, now, placement_failed, out);
  failure_cache = cache;
  if (admitted || !j.relayouts.empty()) failures.clear();  // capacity was freed
  return admitted;
}

bool Admission::Impl::PreemptImpl(ClusterState& state, Job& j, int f, double now,
                                  bool placement_failed, CycleResult& out) {
  const QueueSpec& qspec = Q(j.queue);
  const int need = j.spec.min_member > 0 ? j.spec.min_member : j.spec.pods;
  const Resources est = EstimateCharge(j.spec, need, j.spec.pod.models);
  // Reclaim only when the job keeps its queue within nominal quota.
  const bool within_nominal = (qs[j.queue].usage[f] + est).FitsIn(qspec.flavors[f].nominal);
  struct Cand {
    WorkloadId id;
    const Job* job;
    double lost;  // GPU-seconds of progress lost
    int priority;
    double start;
    bool reclaim;
  };
  std::vector<Cand> cands;
  // Only two kinds of victims exist: jobs of the same queue below j in its order, and jobs of
  // borrowing queues of the cohort (reclaim). Look only there.
  std::vector<int> where;
  if (qspec.within_queue != WithinQueuePreemption::kNever) where.push_back(j.queue);
  if (qspec.reclaim != ReclaimPreemption::kNever && within_nominal && !qspec.cohort.empty()) {
    for (int o : cohort_members[j.queue]) {
      if (o == j.queue) continue;
      const int vf = FlavorIn(o, j.queue, f);
      if (vf >= 0 && Borrowing(o, vf)) where.push_back(o);
    }
  }
  for (int q : where) {
    for (WorkloadId id : running[q]) {
      const Job& v = jobs.at(id);
      if (id == j.spec.id || !v.spec.preemptible) continue;
      // A job admitted at this very time is never a victim: evicting it loses nothing but
      // undoes a decision of the same moment.
      if (now - v.start < self->config_.min_runtime_s || now <= v.admitted_at) continue;
      bool ok = false, reclaim = false;
      if (v.queue == j.queue) {
        ok = qspec.within_queue != WithinQueuePreemption::kNever &&
             (v.spec.priority < j.spec.priority ||
              (qspec.within_queue == WithinQueuePreemption::kLowerOrNewerEqualPriority &&
               v.spec.priority == j.spec.priority && Newer(v.spec, j.spec)));
      } else {
        const int vf = FlavorIn(v.queue, j.queue, f);
        if (vf >= 0 && vf == v.flavor &&
            (qspec.reclaim == ReclaimPreemption::kAny || v.spec.priority < j.spec.priority))
          ok = reclaim = true;
      }
      if (!ok) continue;
      const double gpus = static_cast<double>(v.spec.pod.TotalMilliGpu()) / 1000.0 *
                          static_cast<double>(v.pods.size());
      cands.push_back({id, &v, gpus * (now - v.start), v.spec.priority, v.start, reclaim});
    }
  }
  if (cands.empty()) return false;
  auto cheaper = [](const Cand& a, const Cand& b) {
    if (a.lost != b.lost) return a.lost < b.lost;
    if (a.priority != b.priority) return a.priority < b.priority;
    if (a.start != b.start) return a.start > b.start;
    return a.id < b.id;
  };
  // One pod in the sharing path (whole GPUs or a fraction): the victims are PlanEviction's
  // over every candidate (sharing/eviction.h), the rule the sharing simulation follows too.
  const bool one_slice = j.spec.slice && j.spec.pods == 1;
  const size_t limit = static_cast<size_t>(self->config_.max_victims_per_attempt);
  if (one_slice) {
    // PlanEviction weighs every candidate itself: no bound, no order.
  } else if (cands.size() > limit) {
    std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(limit),
                      cands.end(), cheaper);
    cands.resize(limit);
  } else {
    std::sort(cands.begin(), cands.end(), cheaper);
  }
  // Necessary conditions for fits(), cheap to check: the quota check TryAdmit starts with,
  // and, for a single pod that found no node before, a node freed by a victim that now fits.
  Demand fd = j.spec.pod;
  const FlavorQuota& ffq = qspec.flavors[f];
  if (fd.num_gpu > 0 && ffq.models != 0) {
    fd.models = fd.models == 0 ? ffq.models : (fd.models & ffq.models);
    if (fd.models == 0) return false;  // TryAdmit refuses this flavor
  }
  Resources est_rest = EstimateCharge(j.spec, need, fd.models);
  if (j.has_reservation && j.res_flavor == f) est_rest = Max0(est_rest - j.res_charge);
  // The free-capacity screens below read NodeFree, which does not describe slice room.
  const bool single_pod =
      j.spec.pods == 1 && j.spec.topology == TopologyKind::kNone && !j.spec.slice;
  const auto* only = j.spec.allowed_nodes.get();
  auto node_allowed = [&](NodeIdx n) {
    return (!any_reservation || free_mask[n] ||
            (j.has_reservation && n < j.reserved.size() && j.reserved[n])) &&
           (!only || (n < only->size() && (*only)[n]));
  };
  // Whether the allowed nodes have at least the milli-GPUs j asks for (a necessary condition
  // of any placement), now or, with `with_candidates`, once every candidate is evicted.
  auto gpu_room_left = [&](bool with_candidates) {
    if (j.spec.slice || fd.num_gpu == 0) return true;
    int64_t room = 0;
    for (NodeIdx n = 0; n < state.num_nodes(); ++n)
      if (node_allowed(n) && fd.AllowsModel(state.free(n).model)) room += state.free(n).gpu_total;
    if (with_candidates)
      for (const Cand& c : cands)
        for (const Placement& p : c.job->placements)
          if (node_allowed(p.node) && fd.AllowsModel(state.free(p.node).model))
            room += c.job->spec.slice ? 1000LL * std::popcount(p.gpus)  // may idle the GPU
                                      : c.job->spec.pod.TotalMilliGpu();
    return room >= static_cast<int64_t>(need) * fd.TotalMilliGpu();
  };
  // A hopeless attempt ends here, before anything is evicted: with every candidate gone the
  // quota check still refuses j, the allowed nodes lack the milli-GPUs j asks for, or (a
  // single pod that found no node) no freed node fits it.
  {
    for (const Cand& c : cands) {
      const Job& v = *c.job;
      qs[v.queue].usage[v.flavor] -= v.charged;
    }
    const bool quota_ok = QuotaFits(j.queue, f, est_rest, false).ok();
    for (const Cand& c : cands) {
      const Job& v = *c.job;
      qs[v.queue].usage[v.flavor] += v.charged;
    }
    if (!quota_ok) return false;
    if (!gpu_room_left(true)) return false;
    if (placement_failed && single_pod) {
      std::vector<std::pair<NodeIdx, NodeFree>> freed;
      for (const Cand& c : cands) {
        const Job& v = *c.job;
        for (const Placement& p : v.placements) {
          auto it = std::find_if(freed.begin(), freed.end(),
                                 [&](const auto& x) { return x.first == p.node; });
          if (it == freed.end()) {
            // From the balance: on an over-committed node, evicting frees less than it asks.
            NodeFree nf = state.free(p.node);
            nf.cpu = state.cpu_balance(p.node);
            nf.memory = state.memory_balance(p.node);
            freed.push_back({p.node, nf});
            it = freed.end() - 1;
          }
          NodeFree& nf = it->second;
          nf.cpu += v.spec.pod.cpu.v;
          nf.memory += v.spec.pod.memory.v;
          for (int g = 0; g < nf.gpu_count; ++g)
            if ((p.gpus >> g) & 1)
              nf.gpu[g] = static_cast<int16_t>(nf.gpu[g] + v.spec.pod.gpu_milli);
        }
      }
      bool any = false;
      for (const auto& [n, nf] : freed)
        any |= node_allowed(n) && FilterNode(nf, fd) == FilterVerdict::kFits;
      if (!any) return false;
    }
  }
  // Greedy: evict until j fits, then put back the victims it does not need (reverse order).
  struct Saved {
    WorkloadId id;
    std::vector<WorkloadId> pods;
    std::vector<Placement> places;
    std::vector<SliceAssignment> slices;
    int flavor;
    Resources charged;
  };
  std::vector<Saved> taken;
  auto evict = [&](WorkloadId id) {
    Job& v = jobs.at(id);
    taken.push_back({id, v.pods, v.placements, v.slices, v.flavor, v.charged});
    Release(state, v);
  };
  // Puts a victim back exactly as it ran, also on a node whose balance its eviction did not
  // bring back above 0.
  auto restore = [&](const Saved& s) {
    Job& v = jobs.at(s.id);
    Demand d = v.spec.pod;
    for (size_t i = 0; i < s.pods.size(); ++i) {
      Demand pd = d;
      pd.models = 0;
      if (v.spec.slice && i < s.slices.size()) {
        SliceDemand sd = *v.spec.slice;
        sd.models = 0;
        (void)state.AllocateBeyondHost(s.pods[i], sd, s.slices[i]);
      } else {
        (void)state.AllocateBeyondHost(s.pods[i], pd, s.places[i]);
      }
    }
    v.pods = s.pods;
    v.placements = s.places;
    v.slices = s.slices;
    v.flavor = s.flavor;
    v.charged = s.charged;
    qs[v.queue].usage[s.flavor] += s.charged;
    ++qs[v.queue].running;
    running[v.queue].insert(s.id);
  };
  auto could_fit = [&]() {
    if (!QuotaFits(j.queue, f, est_rest, false).ok()) return false;
    if (!gpu_room_left(false)) return false;
    if (!placement_failed || !single_pod) return true;
    for (const auto& t : taken)
      for (const Placement& p : t.places)
        if (node_allowed(p.node) && FilterNode(state.free(p.node), fd) == FilterVerdict::kFits)
          return true;
    return false;
  };
  auto fits = [&]() {
    if (!could_fit()) return false;
    bool pf = false;
    Job probe = j;
    const QueueState saved = qs[j.queue];
    if (!TryAdmit(state, probe, f, now, &pf)) return false;
    for (auto it = probe.pods.rbegin(); it != probe.pods.rend(); ++it) (void)state.Release(*it);
    qs[j.queue] = saved;
    running[j.queue].erase(j.spec.id);
    return true;
  };
  auto mark_victims = [&](const std::vector<Saved>& victims) {
    for (const Saved& s : victims) {
      Job& v = jobs.at(s.id);
      v.st = JobState::kPending;
      v.start = -1;
      v.waiting_since = now;
      ++qs[v.queue].pending;
      const bool reclaim =
          v.queue != j.queue;  // within-queue preemption needs a strictly higher priority
      v.why = reclaim ? "preempted: " + Q(j.queue).name + " reclaimed its lent quota of " +
                            Q(j.queue).flavors[f].name + " for " + j.spec.name
              : v.spec.priority < j.spec.priority
                  ? "preempted by " + j.spec.name + " (priority " +
                        std::to_string(j.spec.priority) + " > " + std::to_string(v.spec.priority) +
                        ")"
                  : "preempted by " + j.spec.name + " (same priority " +
                        std::to_string(j.spec.priority) + ", arrived earlier)";
      v.why_reason = PendingReason::kOther;
      out.preempted.push_back({s.id, j.spec.id, v.why});
    }
  };
  std::vector<Saved> victims;
  if (one_slice) {
    std::map<WorkloadId, EvictionCandidate> pods;
    std::map<WorkloadId, WorkloadId> job_of;  // pod -> job
    for (const Cand& c : cands) {
      const Job& v = *c.job;
      for (WorkloadId pod : v.pods) {
        const SliceAssignment* a = state.Find(pod);
        if (!a) continue;
        EvictionCandidate& e = pods[pod];
        e.cost = HeldGpuShare(state, *a) * (now - v.start);
        e.since = v.spec.arrival;
        e.cpu = v.spec.pod.cpu;
        e.host_memory = v.spec.pod.memory;
        job_of[pod] = c.id;
      }
    }
    std::vector<uint8_t> allowed(state.num_nodes(), 0);
    for (NodeIdx n = 0; n < state.num_nodes(); ++n) allowed[n] = node_allowed(n) ? 1 : 0;
    SliceDemand sd = *j.spec.slice;
    sd.models = fd.models;
    // Whether j fits, at once or after a MIG re-layout of the node the victims are on, with
    // exactly the jobs of `victims` evicted; the ledger and queues are left as they were.
    auto probe = [&](const std::vector<WorkloadId>& victims) {
      std::set<WorkloadId> out_jobs;
      for (WorkloadId pod : victims) out_jobs.insert(job_of.at(pod));
      const SliceAssignment* at = state.Find(victims.front());
      const NodeIdx node = at ? at->node : state.num_nodes();
      for (WorkloadId id : out_jobs) evict(id);
      Job p = j;
      p.relayouts.clear();
      const QueueState saved = qs[j.queue];
      bool pf = false;
      bool ok = TryAdmit(state, p, f, now, &pf);
      if (ok) {
        for (auto it = p.pods.rbegin(); it != p.pods.rend(); ++it) (void)state.Release(*it);
        qs[j.queue] = saved;
        running[j.queue].erase(j.spec.id);
      } else {
        ok = !p.relayouts.empty() && p.relayouts.front().node == node;
      }
      for (auto it = taken.rbegin(); it != taken.rend(); ++it) restore(*it);
      taken.clear();
      return ok;
    };
    const auto plan = PlanEviction(state, sd, pods, &allowed, probe);
    if (!plan) return false;
    std::set<WorkloadId> chosen;
    for (WorkloadId pod : plan->victims) chosen.insert(job_of.at(pod));
    for (WorkloadId id : chosen) evict(id);
    bool pf = false;
    j.relayouts.clear();
    if (TryAdmit(state, j, f, now, &pf)) {
      mark_victims(taken);
      return true;
    }
    // The cleared GPUs may need a MIG re-layout first (MIG off for whole GPUs): the victims
    // stay evicted and the job waits for the layout, which the caller proposes.
    if (!j.relayouts.empty() && j.relayouts.front().node == plan->node) {
      mark_victims(taken);
      return false;
    }
    j.relayouts.clear();
    for (auto it = taken.rbegin(); it != taken.rend(); ++it) restore(*it);
    return false;
  } else {
    size_t k = 0;
    bool ok = false;
    for (; k < cands.size(); ++k) {
      evict(cands[k].id);
      if (fits()) {
        ok = true;
        break;
      }
    }
    if (!ok) {
      for (auto it = taken.rbegin(); it != taken.rend(); ++it) restore(*it);
      return false;
    }
    // Drop victims that are not needed, latest first (the last one is needed by construction).
    victims.push_back(taken.back());
    for (int i = static_cast<int>(taken.size()) - 2; i >= 0; --i) {
      restore(taken[i]);
      if (fits()) continue;  // not needed
      Job& v = jobs.at(taken[i].id);
      Release(state, v);
      victims.push_back(taken[i]);
    }
  }
  bool pf = false;
  if (!TryAdmit(state, j, f, now, &pf)) {
    for (auto it = victims.rbegin(); it != victims.rend(); ++it) restore(*it);
    return false;
  }
  mark_victims(victims);
  return true;
}

}  // namespace tessera
