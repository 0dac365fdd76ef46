#include "admission/admission.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "admission/admission_internal.h"

namespace tessera {

std::string Resources::ToString() const {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.2f GPU-eq, %g CPU, %g GiB", static_cast<double>(gpu) / 1000.0,
                static_cast<double>(cpu) / 1000.0, static_cast<double>(memory) / 1024.0);
  return buf;
}

Status AdmissionConfig::Validate() const {
  if (!(usage_half_life_s >= 0)) return InvalidArgument("usage_half_life_s must be >= 0");
  if (!(min_runtime_s >= 0)) return InvalidArgument("min_runtime_s must be >= 0");
  if (max_reserved_nodes < 0) return InvalidArgument("max_reserved_nodes must be >= 0");
  if (max_preemption_attempts_per_cycle < 0 || max_victims_per_attempt < 1)
    return InvalidArgument("preemption bounds must be >= 0 attempts and >= 1 victim");
  for (const auto& [model, w] : gpu_equivalents) {
    if (!GpuCatalog::Builtin().Find(model))
      return InvalidArgument("gpu_equivalents: unknown GPU model '" + model + "'");
    if (!(w > 0) || w > 1000)
      return InvalidArgument("gpu_equivalents: weight of " + model + " must be in (0, 1000]");
  }
  return Status::Ok();
}

Admission::Admission(std::vector<QueueSpec> queues, AdmissionConfig config,
                     std::unique_ptr<Scorer> scorer, uint64_t seed)
    : queues_(std::move(queues)),
      config_(std::move(config)),
      engine_(std::move(scorer), seed),
      impl_(std::make_shared<Impl>(this)) {}

Result<std::unique_ptr<Admission>> Admission::Create(std::vector<QueueSpec> queues,
                                                     AdmissionConfig config,
                                                     std::unique_ptr<Scorer> scorer,
                                                     uint64_t seed) {
  TESSERA_RETURN_IF_ERROR(config.Validate());
  if (!scorer) return InvalidArgument("admission needs a placement policy");
  if (queues.empty()) return InvalidArgument("no queues");
  std::set<std::string> names;
  for (const auto& q : queues) {
    if (q.name.empty()) return InvalidArgument("a queue has no name");
    if (!names.insert(q.name).second) return InvalidArgument("duplicate queue '" + q.name + "'");
    if (!(q.weight > 0)) return InvalidArgument("queue '" + q.name + "': weight must be > 0");
    if (q.flavors.empty()) return InvalidArgument("queue '" + q.name + "' has no flavor");
    std::set<std::string> fl;
    for (const auto& f : q.flavors) {
      const std::string where = "queue '" + q.name + "' flavor '" + f.name + "'";
      if (f.name.empty()) return InvalidArgument("queue '" + q.name + "': a flavor has no name");
      if (!fl.insert(f.name).second) return InvalidArgument(where + " listed twice");
      auto neg = [](const Resources& r) { return r.gpu < 0 || r.cpu < 0 || r.memory < 0; };
      if (neg(f.nominal)) return InvalidArgument(where + ": negative nominal quota");
      if (f.borrowing_limit && neg(*f.borrowing_limit))
        return InvalidArgument(where + ": negative borrowing limit");
      if (f.lending_limit && neg(*f.lending_limit))
        return InvalidArgument(where + ": negative lending limit");
      if (f.lending_limit && !f.lending_limit->FitsIn(f.nominal))
        return InvalidArgument(where + ": lending limit above nominal quota");
      if ((f.borrowing_limit || f.lending_limit) && q.cohort.empty())
        return InvalidArgument(where + ": borrowing/lending limits need a cohort");
    }
  }
  auto a = std::unique_ptr<Admission>(
      new Admission(std::move(queues), std::move(config), std::move(scorer), seed));
  Impl& im = *a->impl_;
  const GpuCatalog& cat = GpuCatalog::Builtin();
  im.gpu_eq.assign(cat.size(), 1.0);
  for (const auto& [model, w] : a->config_.gpu_equivalents) im.gpu_eq[*cat.Find(model)] = w;
  im.weights = im.gpu_eq;
  std::sort(im.weights.begin(), im.weights.end());
  im.weights.erase(std::unique(im.weights.begin(), im.weights.end()), im.weights.end());
  for (double w : im.weights) {
    ModelMask m = 0;
    for (size_t k = 0; k < im.gpu_eq.size() && k < 64; ++k)
      if (im.gpu_eq[k] <= w) m |= ModelMask{1} << k;
    im.models_upto.push_back(m);
  }
  for (size_t k = 0; k < im.gpu_eq.size() && k < 64; ++k) im.all_models |= ModelMask{1} << k;
  im.qs.resize(a->queues_.size());
  im.running.resize(a->queues_.size());
  {
    std::map<std::string, int> ids;
    for (const auto& q : a->queues_)
      for (const auto& f : q.flavors) ids.emplace(f.name, static_cast<int>(ids.size()));
    im.flavor_ids.resize(a->queues_.size());
    im.flavor_by_id.assign(a->queues_.size(), std::vector<int>(ids.size(), -1));
    for (size_t q = 0; q < a->queues_.size(); ++q) {
      for (size_t f = 0; f < a->queues_[q].flavors.size(); ++f) {
        const int id = ids.at(a->queues_[q].flavors[f].name);
        im.flavor_ids[q].push_back(id);
        im.flavor_by_id[q][static_cast<size_t>(id)] = static_cast<int>(f);
      }
    }
  }
  im.cohort_members.resize(a->queues_.size());
  for (size_t i = 0; i < a->queues_.size(); ++i) {
    im.queue_index[a->queues_[i].name] = static_cast<int>(i);
    im.qs[i].usage.assign(a->queues_[i].flavors.size(), {});
    im.qs[i].reserved.assign(a->queues_[i].flavors.size(), {});
    im.quota_memo.emplace_back(a->queues_[i].flavors.size());
    for (size_t k = 0; k < a->queues_.size(); ++k) {
      if (k == i || (!a->queues_[i].cohort.empty() && a->queues_[k].cohort == a->queues_[i].cohort))
        im.cohort_members[i].push_back(static_cast<int>(k));
    }
  }
  return a;
}

int64_t Admission::GpuEquivalentMilli(GpuModelId model, int64_t milli_gpu) const {
  return impl_->EqMilli(model, milli_gpu);
}

Status Admission::Enqueue(const JobSpec& job) {
  Impl& im = *impl_;
  auto q = im.queue_index.find(job.queue);
  if (q == im.queue_index.end())
    return InvalidArgument("job '" + job.name + "': unknown queue '" + job.queue + "'");
  if (im.jobs.count(job.id)) return InvalidArgument("duplicate job id " + std::to_string(job.id));
  if (job.pods < 1 || static_cast<WorkloadId>(job.pods) >= kPodsPerJob)
    return InvalidArgument("job '" + job.name + "': pods must be 1.." +
                           std::to_string(kPodsPerJob - 1));
  if (job.min_member < 0 || job.min_member > job.pods)
    return InvalidArgument("job '" + job.name + "': min_member must be 0..pods");
  const Demand& d = job.pod;
  if (d.cpu.v < 0 || d.memory.v < 0 || d.num_gpu < 0 || d.gpu_milli < 0 || d.gpu_milli > 1000 ||
      (d.num_gpu == 0) != (d.gpu_milli == 0) || (d.num_gpu > 1 && d.gpu_milli != 1000) ||
      d.num_gpu > kMaxGpusPerNode)
    return InvalidArgument("job '" + job.name + "': invalid pod demand");
  if (job.slice) {
    Status sv = ValidateSliceDemand(*job.slice);
    if (!sv.ok()) return InvalidArgument("job '" + job.name + "': " + sv.message());
  }
  if (job.node_layouts) {
    if (job.slice || job.topology != TopologyKind::kNone ||
        (job.min_member != 0 && job.min_member != job.pods))
      return InvalidArgument("job '" + job.name +
                             "': node layouts need a gang of whole pods without topology");
    for (const auto& layout : *job.node_layouts) {
      int64_t sum = 0;
      bool positive = !layout.empty();
      for (int part : layout) {
        positive &= part > 0;
        sum += part;
      }
      if (!positive || sum != job.pods)
        return InvalidArgument("job '" + job.name +
                               "': a node layout needs positive parts summing to pods");
    }
  }
  if (job.topology == TopologyKind::kSameLabel && job.topology_label.empty())
    return InvalidArgument("job '" + job.name + "': label topology without a label key");
  if (job.id > (~WorkloadId{0}) / kPodsPerJob - 1)
    return InvalidArgument("job id " + std::to_string(job.id) + " too large");
  Impl::Job j;
  j.spec = job;
  j.queue = q->second;
  j.waiting_since = job.arrival;
  j.why = "not yet considered by a scheduling cycle";
  ++im.qs[j.queue].pending;
  im.jobs.emplace(job.id, std::move(j));
  return Status::Ok();
}

Status Admission::Submit(const JobSpec& job) {
  TESSERA_RETURN_IF_ERROR(Enqueue(job));
  // Online placement policies learn the mix from arrivals.
  for (int i = 0; i < job.pods; ++i) engine_.Observe(job.pod);
  return Status::Ok();
}

Status Admission::Finish(ClusterState& state, WorkloadId job) {
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end() || it->second.st != JobState::kRunning)
    return NotFound("job " + std::to_string(job) + " is not running");
  impl_->Release(state, it->second);
  impl_->jobs.erase(it);  // finished jobs are forgotten: state() reports kFinished
  return Status::Ok();
}

Status Admission::Cancel(WorkloadId job) {
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end() || it->second.st != JobState::kPending)
    return NotFound("job " + std::to_string(job) + " is not pending");
  impl_->DropReservation(it->second);
  --impl_->qs[it->second.queue].pending;
  impl_->jobs.erase(it);
  return Status::Ok();
}

Status Admission::Adopt(ClusterState& state, const JobSpec& job,
                        const std::vector<Placement>& placements, double start,
                        const std::vector<SliceAssignment>& slices) {
  Impl& im = *impl_;
  TESSERA_RETURN_IF_ERROR(Enqueue(job));
  Impl::Job& j = im.jobs.at(job.id);
  auto undo = [&](const std::string& why) {
    for (auto it = j.pods.rbegin(); it != j.pods.rend(); ++it) (void)state.Release(*it);
    --im.qs[j.queue].pending;
    im.jobs.erase(job.id);
    return FailedPrecondition("job '" + job.name + "' cannot be adopted: " + why);
  };
  if (placements.empty() || static_cast<int>(placements.size()) > job.pods)
    return undo("needs 1.." + std::to_string(job.pods) + " placements");
  if (job.slice && slices.size() != placements.size())
    return undo("a slice job needs one slice per placement");
  Demand d = job.pod;
  d.models = 0;
  std::optional<SliceDemand> sd = job.slice;
  if (sd) sd->models = 0;
  Resources charge;
  GpuModelId model = kNoGpuModel;
  for (size_t i = 0; i < placements.size(); ++i) {
    const WorkloadId pid = job.id * kPodsPerJob + static_cast<WorkloadId>(i);
    if (placements[i].node >= state.num_nodes()) return undo("unknown node index");
    if (sd && (slices[i].node != placements[i].node || slices[i].gpus != placements[i].gpus))
      return undo("slice and placement disagree");
    // Running work is adopted even beyond the CPU and memory its node has free in the ledger
    // (the node's allocatable shrank, or pods run there that the ledger counts differently):
    // its full request is counted, the node's balance goes negative, and its GPUs are held.
    Status st = sd ? state.AllocateBeyondHost(pid, *sd, slices[i])
                   : state.AllocateBeyondHost(pid, d, placements[i]);
    if (!st.ok()) return undo(state.spec(placements[i].node).name + ": " + st.message());
    j.pods.push_back(pid);
    j.placements.push_back(placements[i]);
    if (sd) j.slices.push_back(slices[i]);
    model = state.spec(placements[i].node).model;
    charge += sd ? im.SliceCharge(state, d, slices[i]) : im.PodCharge(d, model);
  }
  int flavor = -1;
  for (size_t f = 0; f < queues_[j.queue].flavors.size() && flavor < 0; ++f) {
    const ModelMask m = queues_[j.queue].flavors[f].models;
    if (m == 0 || d.num_gpu == 0 || (model != kNoGpuModel && ((m >> model) & 1)))
      flavor = static_cast<int>(f);
  }
  if (flavor < 0) return undo("no flavor of queue " + job.queue + " covers its GPU model");
  // Running work is adopted even above quota: it is there. Later admissions see the usage.
  j.flavor = flavor;
  j.charged = charge;
  j.st = JobState::kRunning;
  im.running[j.queue].insert(job.id);
  j.start = start;
  j.why.clear();
  im.qs[j.queue].usage[flavor] += charge;
  --im.qs[j.queue].pending;
  ++im.qs[j.queue].running;
  for (int i = 0; i < job.pods; ++i) engine_.ObservePast(job.pod);
  return Status::Ok();
}

std::vector<WorkloadId> Admission::RequeueNode(ClusterState& state, NodeIdx n,
                                               const std::string& why) {
  Impl& im = *impl_;
  std::vector<WorkloadId> out;
  for (auto& [id, j] : im.jobs) {
    if (j.st != JobState::kRunning) continue;
    bool on = false;
    for (const auto& p : j.placements) on |= p.node == n;
    if (!on) continue;
    im.Release(state, j);
    j.st = JobState::kPending;
    j.start = -1;
    j.why = why;
    j.why_reason = PendingReason::kOther;
    ++im.qs[j.queue].pending;
    out.push_back(id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status Admission::Requeue(ClusterState& state, WorkloadId job, const std::string& why) {
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end() || it->second.st != JobState::kRunning)
    return NotFound("job " + std::to_string(job) + " is not running");
  impl_->Release(state, it->second);
  it->second.st = JobState::kPending;
  it->second.start = -1;
  it->second.why = why;
  it->second.why_reason = PendingReason::kOther;
  ++impl_->qs[it->second.queue].pending;
  return Status::Ok();
}

std::vector<WorkloadId> Admission::PendingJobs() const {
  std::vector<WorkloadId> out;
  for (const auto& [id, j] : impl_->jobs)
    if (j.st == JobState::kPending) out.push_back(id);
  return out;
}

Status Admission::SetPriority(WorkloadId job, int priority) {
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end() || it->second.st == JobState::kFinished)
    return NotFound("job " + std::to_string(job) + " is neither pending nor running");
  it->second.spec.priority = priority;
  return Status::Ok();
}

void Admission::SetFrozenGpus(std::vector<GpuMask> frozen) {
  impl_->frozen_base = std::move(frozen);
}

Status Admission::SetAllowedNodes(WorkloadId job,
                                  std::shared_ptr<const std::vector<uint8_t>> allowed) {
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end() || it->second.st != JobState::kPending)
    return NotFound("job " + std::to_string(job) + " is not pending");
  it->second.spec.allowed_nodes = std::move(allowed);
  return Status::Ok();
}

Status Admission::SetLayoutReady(WorkloadId job, std::optional<SliceAssignment> slice) {
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end() || it->second.st != JobState::kPending)
    return NotFound("job " + std::to_string(job) + " is not pending");
  it->second.layout_ready = true;
  it->second.ready_slice = slice;
  return Status::Ok();
}

JobState Admission::state(WorkloadId job) const {
  auto it = impl_->jobs.find(job);
  return it == impl_->jobs.end() ? JobState::kFinished : it->second.st;
}

std::string Admission::WhyPending(WorkloadId job) const {
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end() || it->second.st != JobState::kPending) return "";
  return it->second.why;
}

PendingReason Admission::WhyPendingReason(WorkloadId job) const {
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end() || it->second.st != JobState::kPending) return PendingReason::kOther;
  return it->second.why_reason;
}

std::vector<uint8_t> Admission::ReservedForOthers(WorkloadId job, size_t nodes) const {
  std::vector<uint8_t> out(nodes, 0);
  for (WorkloadId id : impl_->reserving) {
    if (id == job) continue;
    auto it = impl_->jobs.find(id);
    if (it == impl_->jobs.end()) continue;
    for (NodeIdx n : it->second.reserved_nodes)
      if (n < nodes) out[n] = 1;
  }
  return out;
}

std::vector<Placement> Admission::Placements(WorkloadId job) const {
  auto it = impl_->jobs.find(job);
  return it == impl_->jobs.end() ? std::vector<Placement>{} : it->second.placements;
}

std::vector<SliceAssignment> Admission::Slices(WorkloadId job) const {
  auto it = impl_->jobs.find(job);
  return it == impl_->jobs.end() ? std::vector<SliceAssignment>{} : it->second.slices;
}

double Admission::StartTime(WorkloadId job) const {
  auto it = impl_->jobs.find(job);
  return it == impl_->jobs.end() ? -1 : it->second.start;
}

std::vector<QueueStatus> Admission::Queues() const {
  std::vector<QueueStatus> out;
  for (size_t q = 0; q < queues_.size(); ++q) {
    QueueStatus s;
    s.name = queues_[q].name;
    for (size_t f = 0; f < queues_[q].flavors.size(); ++f) {
      s.usage += impl_->qs[q].usage[f] - impl_->qs[q].reserved[f];
      s.reserved += impl_->qs[q].reserved[f];
      s.borrowed += Max0(impl_->qs[q].usage[f] - queues_[q].flavors[f].nominal);
    }
    s.share = impl_->Share(static_cast<int>(q));
    s.pending = impl_->qs[q].pending;
    s.running = impl_->qs[q].running;
    out.push_back(s);
  }
  return out;
}

}  // namespace tessera
