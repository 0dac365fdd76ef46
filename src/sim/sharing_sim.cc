#include "sim/sharing_sim.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <memory>
#include <optional>
#include <queue>
#include <set>

#include "admission/admission.h"
#include "core/stats.h"
#include "sharing/eviction.h"
#include "sim/sharing_strategies.h"

namespace tessera {
namespace {

using sharing_detail::MakeStrategy;
using sharing_detail::Part;
using sharing_detail::Placement;
using sharing_detail::Strategy;

constexpr int64_t kInvariantEvery = 256;
constexpr size_t kMaxReasons = 5;
constexpr WorkloadId kPartsPerWorkload = 32;

bool IsolationHolds(SliceKind k, Isolation i) {
  switch (i) {
    case Isolation::kStrict:
      return k == SliceKind::kMig || k == SliceKind::kExclusive;
    case Isolation::kStandard:
      return k == SliceKind::kMig || k == SliceKind::kMps || k == SliceKind::kMigMps ||
             k == SliceKind::kExclusive;
    case Isolation::kBestEffort:
      return true;
  }
  return false;
}

bool OnMig(const SliceAssignment& a) {
  return a.kind == SliceKind::kMig || a.kind == SliceKind::kMigMps;
}

class Simulation {
 public:
  Simulation(const SharingScenario& s, const std::vector<SharingWorkload>& w, std::string name,
             Strategy& strategy, ClusterState& c)
      : s_(s),
        w_(w),
        strategy_(strategy),
        c_(c),
        state_(w.size(), State::kWaiting),
        parts_(w.size()),
        oversub_(w.size(), false),
        disturbed_(w.size(), false) {
    m_.strategy = std::move(name);
    preemption_ = SharingPreemption(s);
    for (NodeIdx n = 0; n < c.num_nodes(); ++n) {
      occupancy_.emplace_back(c.gpu_count(n), 0);
      on_gpu_.emplace_back(c.gpu_count(n));
      ts_peak_.emplace_back(c.gpu_count(n), 0);
    }
  }

  Result<SharingMetrics> Run();

 private:
  enum class State : uint8_t { kWaiting, kQueued, kRunning, kDone, kAbandoned };
  enum EventType : int { kDeparture = 0, kGiveUp = 1, kArrival = 2 };
  struct Event {
    SimTime t;
    int type;
    size_t w;
    bool operator>(const Event& o) const {
      return t != o.t ? t > o.t : type != o.type ? type > o.type : w > o.w;
    }
  };

  Result<bool> TryPlace(size_t wi, SimTime t);
  // After `wi` failed to fit: evicts running workloads of lower priority if that lets it fit
  // (PlanEviction), placing it into *p; the victims wait again (requeue_). False, with the
  // ledger unchanged, when no eviction helps.
  Result<bool> TryPreempt(size_t wi, SimTime t, Placement* p);
  // Takes the workload off the ledger (unless already done) and out of the running set.
  Status Release(size_t wi, bool ledger = true);
  // Tries the waiting workloads again: higher priority first, then in the order they queued.
  // Without `room_freed` (nothing left the ledger since the queue was last tried), a workload
  // that was tried before and can preempt nobody is passed over: it would not fit now either.
  Status RetryQueue(SimTime t, bool room_freed);
  // Orders workloads by class priority, higher first, keeping the order of equals.
  void SortByPriority(std::vector<size_t>& ws) const {
    std::stable_sort(ws.begin(), ws.end(), [&](size_t a, size_t b) {
      return s_.classes[w_[a].cls].priority > s_.classes[w_[b].cls].priority;
    });
  }
  void Record(size_t wi, const Placement& p);
  void CheckDisturbed(const Placement& p);
  void Advance(SimTime t) {
    busy_area_ += static_cast<double>(busy_) * static_cast<double>(t - last_t_);
    last_t_ = t;
  }
  void Occupy(const SliceAssignment& a, int delta) {
    for (int g = 0; g < c_.gpu_count(a.node); ++g) {
      if (!((a.gpus >> g) & 1)) continue;
      int& occ = occupancy_[a.node][g];
      if (occ == 0 && delta > 0) ++busy_;
      occ += delta;
      if (occ == 0) --busy_;
    }
  }

  const SharingScenario& s_;
  const std::vector<SharingWorkload>& w_;
  Strategy& strategy_;
  ClusterState& c_;
  SharingMetrics m_;
  std::vector<State> state_;
  std::vector<std::vector<Part>> parts_;
  std::vector<bool> oversub_, disturbed_, seen_kind_ = std::vector<bool>(5, false);
  std::vector<std::vector<int>> occupancy_;
  std::vector<std::vector<std::vector<size_t>>> on_gpu_;  // running workloads per GPU
  std::vector<std::vector<int64_t>> ts_peak_;             // time-sliced GPUs: sum of real peaks
  std::set<size_t> running_;
  std::map<int, int> running_by_priority_;  // running workloads per class priority
  std::vector<size_t> queue_;
  std::vector<double> waits_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  int busy_ = 0;
  SimTime last_t_ = 0;
  SimTime placing_t_ = 0;  // the time of the TryPlace in progress
  double busy_area_ = 0;
  // Per workload: when its current run started and ends, and when its current wait gives up
  // (events at other times are stale: the workload was evicted and waits or runs again).
  std::vector<SimTime> start_t_, end_t_, giveup_t_;
  std::vector<SimTime> evicted_t_;  // when it was last evicted (if evicted_)
  std::vector<uint8_t> evicted_;
  std::vector<uint8_t> untried_;  // queued and not tried since it arrived or was evicted
  std::vector<size_t> requeue_;   // evicted during the current event: join queue_ at its end
  bool preemption_ = false;
  // Workloads of this pass that may still try preemption: a pass is a scheduling cycle, and
  // the scheduler bounds the attempts per cycle (AdmissionConfig).
  int preemption_attempts_left_ = 0;
  bool retry_at_arrival_ = false;   // a reservation ended; the next arrival tries the queue
  bool reservation_ended_ = false;  // in the current pass; the queue is tried again at once
  bool departed_ = false;           // a departure of the current second; the queue is tried after
};

Result<bool> Simulation::TryPlace(size_t wi, SimTime t) {
  const SharingWorkload& w = w_[wi];
  const int64_t before = c_.reconfigurations();
  Placement p;
  strategy_.Clock(t);
  placing_t_ = t;
  const size_t reservations = strategy_.Reservations();
  auto placed = strategy_.Place(c_, w, (wi + 1) * kPartsPerWorkload, &p);
  if (!placed.ok()) return placed.status();
  // A reservation that ended opens its node, and its slot to a waiting gang: the scheduler
  // sees both at its next cycle, at once after a bind and otherwise at the next arrival.
  if (strategy_.Reservations() < reservations) retry_at_arrival_ = reservation_ended_ = true;
  if (!*placed && preemption_ && preemption_attempts_left_ > 0) {
    --preemption_attempts_left_;
    placed = TryPreempt(wi, t, &p);
    if (!placed.ok()) return placed.status();
  }
  for (const MigReconfig& r : p.reconfigs) {
    if (m_.reconfiguration_reasons.size() < kMaxReasons)
      m_.reconfiguration_reasons.push_back(r.reason);
    const std::string diff = MigDiffText(c_, r);
    for (size_t at = 0; at < diff.size();) {
      const size_t nl = diff.find('\n', at);
      m_.mig_diff_log.push_back("t=" + std::to_string(t) + "s " + diff.substr(at, nl - at));
      at = nl == std::string::npos ? diff.size() : nl + 1;
    }
    if (r.mig_before != r.mig_after) {
      ++(r.mig_after ? m_.mig_enabled : m_.mig_disabled);
    } else {
      ++m_.mig_relayouts;
    }
    m_.mig_instances_destroyed += static_cast<int64_t>(r.diff.destroy.size());
  }
  if (c_.reconfigurations() != before || !p.reconfigs.empty()) CheckDisturbed(p);
  if (!*placed) return false;
  if (p.parts.empty()) return Internal(m_.strategy + ": a placement without slices");
  for (const Part& part : p.parts) {
    if (c_.Find(part.ledger_id) == nullptr)
      return Internal(m_.strategy + ": a placed slice is missing from the ledger");
  }
  state_[wi] = State::kRunning;
  if (!evicted_[wi]) waits_.push_back(static_cast<double>(t - w.arrival_s));
  start_t_[wi] = t;
  end_t_[wi] = t + w.duration_s;
  events_.push(Event{end_t_[wi], kDeparture, wi});
  Record(wi, p);
  parts_[wi] = std::move(p.parts);
  running_.insert(wi);
  ++running_by_priority_[s_.classes[w.cls].priority];
  return true;
}

Status Simulation::RetryQueue(SimTime t, bool room_freed) {
  while (true) {
    std::vector<size_t> order;
    for (size_t q : queue_)
      if (state_[q] == State::kQueued) order.push_back(q);
    SortByPriority(order);
    std::vector<size_t> still;
    bool placed_any = false;
    preemption_attempts_left_ = AdmissionConfig{}.max_preemption_attempts_per_cycle;
    reservation_ended_ = false;
    for (size_t q : order) {
      const bool may_preempt = preemption_ && !running_by_priority_.empty() &&
                               running_by_priority_.begin()->first < s_.classes[w_[q].cls].priority;
      if (!room_freed && !untried_[q] && !may_preempt) {
        // The scheduler would try it, fail and count a preemption attempt for it.
        if (preemption_attempts_left_ > 0) --preemption_attempts_left_;
        still.push_back(q);
        continue;
      }
      untried_[q] = 0;
      auto placed = TryPlace(q, t);
      if (!placed.ok()) return placed.status();
      if (*placed) {
        placed_any = true;
      } else {
        still.push_back(q);
      }
      room_freed |= !requeue_.empty();
    }
    queue_ = std::move(still);
    // A pass is followed by another, as a scheduler cycles again after binds and evictions,
    // when a placement ended a reservation (its node is open to the rest of the queue) or,
    // with priorities, when it placed or evicted anything (what was just placed may be a
    // victim for a waiting workload of higher priority). Evicted workloads join the queue at
    // its end, in workload order (their pods are recreated after the cycle).
    const bool evicted = !requeue_.empty();
    std::sort(requeue_.begin(), requeue_.end());
    // A victim comes back as a new pod, which the scheduler observes like any arrival: the
    // strategy sees its demand again (the MIG planner's recent mix counts it once more).
    for (size_t v : requeue_) {
      untried_[v] = 1;
      strategy_.Observe(w_[v].demand, t);
    }
    queue_.insert(queue_.end(), requeue_.begin(), requeue_.end());
    requeue_.clear();
    if (!reservation_ended_ && !(preemption_ && (placed_any || evicted))) return Status::Ok();
    room_freed = evicted || reservation_ended_;
  }
}

Result<bool> Simulation::TryPreempt(size_t wi, SimTime t, Placement* p) {
  const SharingWorkload& w = w_[wi];
  const int priority = s_.classes[w.cls].priority;
  if (running_by_priority_.empty() || running_by_priority_.begin()->first >= priority)
    return false;  // nothing of lower priority runs
  std::map<WorkloadId, EvictionCandidate> candidates;
  for (size_t o : running_) {
    // Placed at this very time: not a victim (as in the scheduler's Admission).
    if (s_.classes[w_[o].cls].priority >= priority || parts_[o].empty() || start_t_[o] >= t)
      continue;
    const SliceDemand& d = w_[o].demand;
    for (size_t i = 0; i < parts_[o].size(); ++i) {
      EvictionCandidate& c = candidates[parts_[o][i].ledger_id];
      c.cost = HeldGpuShare(c_, parts_[o][i].a) * static_cast<double>(t - start_t_[o]);
      // Queued since its arrival, or since its last eviction (its pod was re-created then).
      c.since = static_cast<double>(evicted_[o] ? evicted_t_[o] : w_[o].arrival_s);
      if (i > 0) continue;
      c.cpu = d.cpu;
      c.host_memory = d.host_memory;
    }
  }
  if (candidates.empty()) return false;
  const WorkloadId base = (wi + 1) * kPartsPerWorkload;
  std::optional<ClusterState> saved;  // the ledger before any eviction, copied when needed
  // Evicts the workloads of the ledger ids `ids` (all their parts) from c_.
  auto evict = [&](const std::vector<WorkloadId>& ids, std::set<size_t>* victims) -> Status {
    for (WorkloadId id : ids) victims->insert(static_cast<size_t>(id / kPartsPerWorkload - 1));
    for (size_t v : *victims) {
      for (const Part& part : parts_[v]) {
        Status st = c_.Release(part.ledger_id);
        if (!st.ok()) return Internal(m_.strategy + ": eviction failed: " + st.message());
      }
    }
    return Status::Ok();
  };
  Status probe_error = Status::Ok();
  auto probe = [&](const std::vector<WorkloadId>& ids) {
    if (!saved) saved.emplace(c_);
    std::set<size_t> victims;
    Status st = evict(ids, &victims);
    Placement q;
    auto placed = st.ok() ? strategy_.Place(c_, w, base, &q) : Result<bool>(st);
    c_ = *saved;
    if (!placed.ok() && probe_error.ok()) probe_error = placed.status();
    return placed.ok() && *placed;
  };
  const auto plan = PlanEviction(c_, w.demand, candidates, strategy_.PreemptNodes(c_, base), probe);
  TESSERA_RETURN_IF_ERROR(probe_error);
  if (!plan) return false;
  if (!saved) saved.emplace(c_);
  std::set<size_t> victims;
  TESSERA_RETURN_IF_ERROR(evict(plan->victims, &victims));
  Placement q;
  auto placed = strategy_.Place(c_, w, base, &q);
  if (!placed.ok()) return placed.status();
  if (!*placed) {
    c_ = *saved;
    return false;
  }
  for (size_t v : victims) {
    TESSERA_RETURN_IF_ERROR(Release(v, /*ledger=*/false));
    state_[v] = State::kQueued;
    evicted_[v] = 1;
    ++m_.preemptions;
    --m_.placed;
    --m_.placed_by_class[w_[v].cls];
    m_.placed_workloads[v] = 0;
    evicted_t_[v] = t;
    giveup_t_[v] = t + w_[v].patience_s;
    events_.push(Event{giveup_t_[v], kGiveUp, v});
    requeue_.push_back(v);
  }
  *p = std::move(q);
  return true;
}

void Simulation::Record(size_t wi, const Placement& p) {
  const SharingWorkload& w = w_[wi];
  const int64_t peak = w.demand.memory_mib;
  ++m_.placed;
  ++m_.placed_by_class[w.cls];
  m_.placed_workloads[wi] = 1;
  const SliceKind first = p.parts.front().a.kind;
  if (m_.placement_of[wi].empty()) {
    const SliceAssignment& a = p.parts.front().a;
    std::string gpus;
    for (int g = 0; g < c_.gpu_count(a.node); ++g)
      if ((a.gpus >> g) & 1) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
    m_.placement_of[wi] = "t=" + std::to_string(placing_t_) + " " + c_.spec(a.node).name + " gpu" +
                          gpus + " " + SliceKindName(first);
  }
  ++m_.placed_by_kind[SliceKindName(first)];
  if (!p.explanation.empty() && !seen_kind_[static_cast<int>(first)]) {
    seen_kind_[static_cast<int>(first)] = true;
    m_.explanations.push_back("workload " + std::to_string(w.id) + " (" + s_.classes[w.cls].name +
                              ", " + IsolationName(w.demand.isolation) + "): " + p.explanation);
  }
  bool violates = false;
  for (const Part& part : p.parts) {
    const SliceAssignment& a = part.a;
    if (!IsolationHolds(a.kind, w.demand.isolation)) violates = true;
    const int g0 = std::countr_zero(a.gpus);
    switch (a.kind) {
      case SliceKind::kExclusive:
        for (int g = 0; g < c_.gpu_count(a.node); ++g) {
          if (((a.gpus >> g) & 1) && c_.gpu(a.node, g).memory_mib < peak) oversub_[wi] = true;
        }
        break;
      case SliceKind::kMig: {
        const MigSlot* slot = c_.gpu(a.node, g0).Instance(a.mig_start);
        if (!slot || slot->memory_mib < peak) oversub_[wi] = true;
        break;
      }
      case SliceKind::kMps:
      case SliceKind::kMigMps:
        if (a.memory_mib < peak) oversub_[wi] = true;
        break;
      case SliceKind::kTimeSlice: {
        int64_t& sum = ts_peak_[a.node][g0];
        sum += peak;
        if (sum > c_.gpu(a.node, g0).memory_mib) {
          oversub_[wi] = true;
          for (size_t o : on_gpu_[a.node][g0]) {
            for (const Part& op : parts_[o]) {
              if (op.a.kind == SliceKind::kTimeSlice && op.a.node == a.node && op.a.gpus == a.gpus)
                oversub_[o] = true;
            }
          }
        }
        break;
      }
      case SliceKind::kShare:  // no memory guarantee: the sharing strategies never use it
        oversub_[wi] = true;
        break;
    }
    Occupy(a, +1);
    for (int g = 0; g < c_.gpu_count(a.node); ++g) {
      if ((a.gpus >> g) & 1) on_gpu_[a.node][g].push_back(wi);
    }
  }
  if (violates) ++m_.isolation_violations;
}

Status Simulation::Release(size_t wi, bool ledger) {
  for (const Part& part : parts_[wi]) {
    if (ledger) {
      Status st = c_.Release(part.ledger_id);
      if (!st.ok()) return Internal(m_.strategy + ": release failed: " + st.message());
    }
    const SliceAssignment& a = part.a;
    Occupy(a, -1);
    for (int g = 0; g < c_.gpu_count(a.node); ++g) {
      if (!((a.gpus >> g) & 1)) continue;
      auto& list = on_gpu_[a.node][g];
      list.erase(std::find(list.begin(), list.end(), wi));
      if (a.kind == SliceKind::kTimeSlice) ts_peak_[a.node][g] -= w_[wi].demand.memory_mib;
    }
  }
  if (running_.erase(wi) > 0) {
    auto it = running_by_priority_.find(s_.classes[w_[wi].cls].priority);
    if (it != running_by_priority_.end() && --it->second == 0) running_by_priority_.erase(it);
  }
  state_[wi] = State::kDone;
  return Status::Ok();
}

void Simulation::CheckDisturbed(const Placement& p) {
  for (size_t wi : running_) {
    bool hit = false;
    for (const Part& part : parts_[wi]) {
      const SliceAssignment& a = part.a;
      const SliceAssignment* now = c_.Find(part.ledger_id);
      if (!now || !(*now == a)) hit = true;
      const int g0 = std::countr_zero(a.gpus);
      if (OnMig(a)) {
        const GpuSlices& gpu = c_.gpu(a.node, g0);
        const MigSlot* slot = gpu.Instance(a.mig_start);
        if (!gpu.mig_enabled() || !slot || slot->instance.profile != part.mig_profile) hit = true;
      }
      for (const MigReconfig& r : p.reconfigs) {
        if (r.node != a.node || !((a.gpus >> r.gpu) & 1)) continue;
        if (r.diff.mode_change) hit = true;
        for (const MigInstance& in : r.diff.destroy) {
          if (OnMig(a) && in.start == a.mig_start) hit = true;
        }
      }
    }
    if (hit) disturbed_[wi] = true;
  }
}

Result<SharingMetrics> Simulation::Run() {
  m_.workloads = static_cast<int64_t>(w_.size());
  m_.arrived_by_class.assign(s_.classes.size(), 0);
  m_.placed_by_class.assign(s_.classes.size(), 0);
  m_.placed_workloads.assign(w_.size(), 0);
  m_.placement_of.assign(w_.size(), "");
  start_t_.assign(w_.size(), -1);
  end_t_.assign(w_.size(), -1);
  giveup_t_.assign(w_.size(), -1);
  evicted_t_.assign(w_.size(), -1);
  evicted_.assign(w_.size(), 0);
  untried_.assign(w_.size(), 0);
  const int64_t initial_reconfigs = c_.reconfigurations();
  for (size_t i = 0; i < w_.size(); ++i) {
    if (w_[i].arrival_s < s_.horizon_s) events_.push(Event{w_[i].arrival_s, kArrival, i});
  }
  int64_t processed = 0;
  while (!events_.empty() && events_.top().t < s_.horizon_s) {
    const Event e = events_.top();
    events_.pop();
    Advance(e.t);
    if (e.type == kDeparture) {
      // The queue is tried once after the last departure of a second; a stale one (the
      // workload was evicted since) frees nothing but may be that last one.
      if (state_[e.w] == State::kRunning && end_t_[e.w] == e.t) {
        TESSERA_RETURN_IF_ERROR(Release(e.w));
        departed_ = true;
      }
      const bool more =
          !events_.empty() && events_.top().t == e.t && events_.top().type == kDeparture;
      if (!more && departed_) {
        departed_ = false;
        TESSERA_RETURN_IF_ERROR(RetryQueue(e.t, /*room_freed=*/true));
      }
    } else if (e.type == kGiveUp) {
      if (state_[e.w] == State::kQueued && giveup_t_[e.w] == e.t) {
        state_[e.w] = State::kAbandoned;
        if (strategy_.GaveUp((e.w + 1) * kPartsPerWorkload)) retry_at_arrival_ = true;
      }
    } else {
      // Arrivals of one second: with priorities, the higher first (as one scheduling cycle
      // takes them); otherwise in id order.
      std::vector<size_t> arrivals = {e.w};
      while (!events_.empty() && events_.top().t == e.t && events_.top().type == kArrival) {
        arrivals.push_back(events_.top().w);
        events_.pop();
      }
      SortByPriority(arrivals);
      // With priorities, or when a reservation ended since the queue was last tried, the
      // arrivals join the queue and the whole queue is tried, like a scheduling cycle (a
      // waiting workload may preempt one placed since). Otherwise each arrival is tried alone.
      const bool whole_queue = retry_at_arrival_ || preemption_;
      const bool room_freed = retry_at_arrival_;
      retry_at_arrival_ = false;
      // Every arrival of this second is observed before any is placed, as the scheduler
      // submits all new pods at the start of its cycle.
      for (size_t a : arrivals) {
        ++m_.arrived_by_class[w_[a].cls];
        strategy_.Observe(w_[a].demand, e.t);
      }
      for (size_t a : arrivals) {
        if (!whole_queue) {
          auto placed = TryPlace(a, e.t);
          if (!placed.ok()) return placed.status();
          if (*placed) continue;
        }
        state_[a] = State::kQueued;
        untried_[a] = whole_queue ? 1 : 0;
        queue_.push_back(a);
        giveup_t_[a] = e.t + w_[a].patience_s;
        events_.push(Event{giveup_t_[a], kGiveUp, a});
      }
      if (whole_queue) TESSERA_RETURN_IF_ERROR(RetryQueue(e.t, room_freed));
    }
    // Evicted workloads wait at the end of the queue; the queue is tried again with the room
    // the evictions left.
    if (!requeue_.empty()) TESSERA_RETURN_IF_ERROR(RetryQueue(e.t, /*room_freed=*/true));
    if (++processed % kInvariantEvery == 0) {
      Status st = c_.CheckInvariants();
      if (!st.ok()) return Internal(m_.strategy + ": ledger invariant broken: " + st.message());
    }
  }
  Advance(s_.horizon_s);
  Status st = c_.CheckInvariants();
  if (!st.ok()) return Internal(m_.strategy + ": ledger invariant broken: " + st.message());
  size_t held = 0;
  for (size_t wi : running_) held += parts_[wi].size();
  if (held != c_.num_allocations())
    return Internal(m_.strategy + ": the ledger holds " + std::to_string(c_.num_allocations()) +
                    " slices, the running workloads " + std::to_string(held));

  if (!m_.mig_diff_log.empty()) {
    for (NodeIdx n = 0; n < c_.num_nodes(); ++n)
      if (c_.gpu_count(n) > 0 && MigGeometryFor(c_.spec(n).model))
        m_.mig_parted_configs[c_.spec(n).name] = MigPartedConfig(c_, n, m_.strategy);
  }
  for (size_t i = 0; i < state_.size(); ++i) {
    if (state_[i] == State::kAbandoned) ++m_.abandoned;
    if (state_[i] == State::kQueued) ++m_.never_placed;
    if (evicted_[i] && (state_[i] == State::kAbandoned || state_[i] == State::kQueued))
      ++m_.preempted_not_replaced;
  }
  m_.p50_wait_s = Quantile(waits_, 0.50);
  m_.p95_wait_s = Quantile(waits_, 0.95);
  m_.p99_wait_s = Quantile(waits_, 0.99);
  double total = 0;
  for (double x : waits_) total += x;
  m_.mean_wait_s = waits_.empty() ? 0 : total / static_cast<double>(waits_.size());
  m_.gpus_busy_avg = busy_area_ / static_cast<double>(s_.horizon_s);
  const int gpus = SharingGpuCount(s_);
  m_.gpu_busy_pct = gpus > 0 ? 100.0 * m_.gpus_busy_avg / gpus : 0;
  m_.memory_oversubscribed = std::count(oversub_.begin(), oversub_.end(), true);
  m_.disturbed = std::count(disturbed_.begin(), disturbed_.end(), true);
  m_.reconfigurations = c_.reconfigurations() - initial_reconfigs;
  return m_;
}

}  // namespace

bool SharingPreemption(const SharingScenario& s) {
  for (const SharingClass& c : s.classes)
    if (c.priority != s.classes.front().priority) return true;
  return false;
}

const std::vector<std::string>& SharingStrategyNames() {
  static const std::vector<std::string> kNames = {"exclusive", "static-mig", "timeslice", "mps",
                                                  "tessera"};
  return kNames;
}

Result<SharingMetrics> SimulateSharing(const SharingScenario& scenario,
                                       const std::vector<SharingWorkload>& workloads,
                                       const std::string& strategy) {
  SliceLimits limits;
  auto made = MakeStrategy(scenario, strategy, &limits);
  if (!made.ok()) return made.status();
  ClusterState cluster(limits);
  for (NodeSpec& spec : SharingNodeSpecs(scenario)) {
    auto added = cluster.AddNode(std::move(spec));
    if (!added.ok())
      return InvalidArgument("scenario '" + scenario.name + "': " + added.status().message());
  }
  for (const SharingWorkload& w : workloads) {
    if (w.cls < 0 || static_cast<size_t>(w.cls) >= scenario.classes.size() || w.arrival_s < 0 ||
        w.duration_s < 0 || w.patience_s < 0)
      return InvalidArgument("workload " + std::to_string(w.id) + " does not match the scenario");
  }
  TESSERA_RETURN_IF_ERROR((*made)->Init(cluster));
  Simulation sim(scenario, workloads, strategy, **made, cluster);
  return sim.Run();
}

Result<std::vector<SharingMetrics>> CompareSharing(const SharingScenario& scenario, uint64_t seed,
                                                   const std::vector<std::string>& strategies) {
  if (strategies.empty()) return InvalidArgument("no strategy to compare");
  std::set<std::string> seen;
  SliceLimits unused;
  for (const std::string& s : strategies) {
    auto made = MakeStrategy(scenario, s, &unused);
    if (!made.ok()) return made.status();
    if (!seen.insert(s).second) return InvalidArgument("strategy '" + s + "' listed twice");
  }
  auto workloads = GenerateSharingWorkloads(scenario, seed);
  if (!workloads.ok()) return workloads.status();
  std::vector<SharingMetrics> out;
  for (const std::string& s : strategies) {
    auto m = SimulateSharing(scenario, *workloads, s);
    if (!m.ok()) return m.status();
    out.push_back(std::move(m).value());
  }
  return out;
}

}  // namespace tessera
