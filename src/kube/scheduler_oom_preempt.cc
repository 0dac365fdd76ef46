// SchedulerCore's room for the out-of-memory retry of a rightsized owner: the retry pod that fits
// nowhere evicts rightsized pods bound after the killed one from one node (scheduler_core.h,
// OomPreempt).
#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "kube/rightsize.h"
#include "kube/scheduler_core.h"
#include "kube/scheduler_core_internal.h"

namespace tessera::kube {

void SchedulerCore::OomPreempt(CycleOutput& out) {
  // Each trial copies the ledger: bounded per cycle; candidates beyond the bound are not tried.
  int trials_left = kOomPreemptTrialsPerCycle;
  struct Victim {
    PodEntry* pod = nullptr;
    WorkloadId ledger_id = 0;
    double share = 0;  // of one GPU of the node's model, times its GPUs
  };
  struct Choice {
    NodeIdx node = 0;
    std::vector<Victim> victims;
    double freed = 0;
  };
  for (WorkloadId id : admission_->PendingJobs()) {
    auto jt = jobs_.find(id);
    if (jt == jobs_.end() || jt->second->pods.size() != 1) continue;
    auto pt = pods_.find(jt->second->pods.front());
    if (pt == pods_.end()) continue;
    PodEntry& p = *pt->second;
    if (p.oom_killed_seq < 0 || p.oom_preempted || !p.req.gang.empty()) continue;
    if (relayout_wait_.count(id)) continue;  // a MIG re-layout is making room
    // The owner's killed pod is being evicted to restart here: its room comes back.
    if (std::any_of(oom_restarting_.begin(), oom_restarting_.end(),
                    [&](const auto& r) { return r.second == p.oom_retry_of; }))
      continue;
    const auto mask = MaskFor(p.req);
    const bool slice = WantsSlice(p.req, config_.select_share_mechanism);
    const WorkloadId trial_id = id * kPodsPerJob;
    auto fits = [&](const ClusterState& st, const std::vector<uint8_t>& allowed) {
      return slice ? trial_engine_->DecideSlice(st, trial_id, p.req.slices, &allowed).placed
                   : trial_engine_->Decide(st, trial_id, p.req.demand, &allowed).placed;
    };
    if (fits(state_, *mask)) continue;  // room exists: admission places it
    // Candidates by node.
    std::map<NodeIdx, std::vector<Victim>> by_node;
    for (auto& [key, qp] : pods_) {
      PodEntry& q = *qp;
      if (&q == &p || !q.bound || !q.ours || !q.rightsize_auto || q.req.deleting ||
          !q.req.gang.empty() || q.admitted_seq <= p.oom_killed_seq ||
          q.req.priority > p.req.priority || q.job == 0)
        continue;
      if (auto r = eviction_retry_.find(key); r != eviction_retry_.end() && r->second.at >= 0)
        continue;
      auto qj = jobs_.find(q.job);
      if (qj == jobs_.end() || qj->second->pods.size() != 1 ||
          admission_->state(q.job) != JobState::kRunning)
        continue;
      auto nt = node_index_.find(q.req.node_name);
      if (nt == node_index_.end() || !(*mask)[nt->second]) continue;
      if (terminating_.count(nt->second) && terminating_[nt->second].count(key)) continue;
      const GpuModelId model = node_info_[nt->second].model;
      const double share = SizeOn(q.req.gpu, model).fraction * std::max(1, q.req.gpu.whole_gpus);
      by_node[nt->second].push_back({&q, q.job * kPodsPerJob + q.index, share});
    }
    std::optional<Choice> best;
    for (auto& [n, cands] : by_node) {
      std::vector<uint8_t> only(mask->size(), 0);
      only[n] = 1;
      auto try_set = [&](const std::vector<Victim>& set) {
        if (trials_left <= 0) return false;
        --trials_left;
        ClusterState trial = state_;
        for (const Victim& v : set)
          if (!trial.Release(v.ledger_id).ok()) return false;
        return fits(trial, only);
      };
      // Smallest first, the latest bound first on ties.
      std::sort(cands.begin(), cands.end(), [](const Victim& a, const Victim& b) {
        if (a.share != b.share) return a.share < b.share;
        return a.pod->admitted_seq > b.pod->admitted_seq;
      });
      std::optional<Choice> here;
      for (const Victim& v : cands)
        if (try_set({v})) {
          here = Choice{n, {v}, v.share};
          break;
        }
      if (!here && cands.size() > 1) {
        std::vector<Victim> set;
        double freed = 0;
        for (auto it = cands.rbegin(); it != cands.rend(); ++it) {
          set.push_back(*it);
          freed += it->share;
          if (try_set(set)) {
            here = Choice{n, set, freed};
            break;
          }
        }
      }
      if (!here) continue;
      if (!best || here->victims.size() < best->victims.size() ||
          (here->victims.size() == best->victims.size() && here->freed < best->freed - 1e-9))
        best = std::move(here);
    }
    if (!best) continue;
    p.oom_preempted = true;
    const std::string why = "making room for the out-of-memory retry of " + p.oom_retry_of;
    std::string names;
    for (const Victim& v : best->victims) {
      PodEntry& q = *v.pod;
      const WorkloadId job = q.job;
      if (!admission_->Finish(state_, job).ok()) continue;
      jobs_.erase(job);
      q.job = 0;
      q.index = -1;
      out.evictions.push_back({q.req.ns, q.req.name, q.req.uid, why});
      terminating_[best->node].insert(q.key);
      ++stats_.rightsize_oom_preemptions;
      names += (names.empty() ? "" : ", ") + q.key;
    }
    if (names.empty()) continue;
    RightsizeEvent(p, "Normal", "RightsizeOomPreempting",
                   "no node has room for the out-of-memory retry of " + p.oom_retry_of +
                       "; evicting " + names + " (rightsized, bound after the killed pod) on " +
                       node_info_[best->node].spec.name);
  }
}

}  // namespace tessera::kube
