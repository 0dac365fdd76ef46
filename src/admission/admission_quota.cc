// Quota accounting: GPU-equivalent charges, quota checks with cohort borrowing and lending,
// and the decayed fair share.
#include "admission/admission_internal.h"

#include <bit>
#include <cmath>

namespace tessera {

int64_t Admission::Impl::EqMilli(GpuModelId m, int64_t milli) const {
  const double w = m < gpu_eq.size() ? gpu_eq[m] : 1.0;
  return static_cast<int64_t>(std::llround(static_cast<double>(milli) * w));
}

double Admission::Impl::MinWeight(ModelMask models) const {
  auto it = min_weight.find(models);
  if (it != min_weight.end()) return it->second;
  double w = 0;
  for (size_t m = 0; m < gpu_eq.size(); ++m)
    if (models == 0 || ((models >> m) & 1)) w = w == 0 ? gpu_eq[m] : std::min(w, gpu_eq[m]);
  return min_weight[models] = w > 0 ? w : 1.0;
}

Resources Admission::Impl::PodCharge(const Demand& d, GpuModelId model) const {
  return {d.num_gpu > 0 ? EqMilli(model, d.TotalMilliGpu()) : 0, d.cpu.v, d.memory.v};
}

Resources Admission::Impl::SliceCharge(const ClusterState& state, const Demand& d,
                                       const SliceAssignment& s) const {
  const int g = std::countr_zero(s.gpus);
  if (s.node >= state.num_nodes() || g >= state.gpu_count(s.node)) return PodCharge(d, kNoGpuModel);
  const GpuSlices& gpu = state.gpu(s.node, g);
  return {EqMilli(gpu.model, SliceMilli(gpu, s)), d.cpu.v, d.memory.v};
}

Resources Admission::Impl::EstimateCharge(const JobSpec& j, int pods, ModelMask models) const {
  return ChargeAt(j, pods, MinWeight(models));
}

Resources Admission::Impl::ChargeAt(const JobSpec& j, int pods, double w) const {
  const int64_t g =
      static_cast<int64_t>(std::llround(static_cast<double>(j.pod.TotalMilliGpu()) * w));
  return {g * pods, j.pod.cpu.v * pods, j.pod.memory.v * pods};
}

ModelMask Admission::Impl::AffordableModels(const Job& j, int f, ModelMask models, int need) const {
  if (j.spec.pod.num_gpu == 0 || weights.size() < 2) return models;
  const ModelMask allowed = models == 0 ? all_models : models;
  ModelMask ok = 0;
  for (size_t k = 0; k < weights.size(); ++k) {
    const ModelMask upto = allowed & models_upto[k];
    if (upto == ok) continue;
    Resources c = ChargeAt(j.spec, need, weights[k]);
    if (j.has_reservation && j.res_flavor == f) c = Max0(c - j.res_charge);
    if (!QuotaFits(j.queue, f, c, false).ok()) break;
    ok = upto;
  }
  return ok == allowed || ok == 0 ? models : ok;
}

Status Admission::Impl::QuotaFits(int q, int f, const Resources& r, bool explain) const {
  const FlavorQuota& fq = Q(q).flavors[f];
  const Resources& u = qs[q].usage[f];
  const Resources after = u + r;
  if (after.FitsIn(fq.nominal)) return Status::Ok();
  const Resources need = Max0(after - fq.nominal);
  auto refuse = [&](int kind, int d, const Resources& pool, auto&& make) {
    QuotaMemos& ms = quota_memo[q][f];
    for (const QuotaMemo& m : ms.slot)
      if (m.kind == kind && m.dim == d && m.asked == Dim(r, d) && m.usage == u && m.pool == pool)
        return ResourceExhausted(m.message);
    QuotaMemo& m = ms.slot[ms.next];
    ms.next = (ms.next + 1) % kQuotaMemos;
    m = {kind, d, Dim(r, d), u, pool, make()};
    return ResourceExhausted(m.message);
  };
  if (fq.borrowing_limit && !after.FitsIn(fq.nominal + *fq.borrowing_limit)) {
    if (!explain) return ResourceExhausted("");
    for (int d = 0; d < kDims; ++d) {
      if (Dim(after, d) > Dim(fq.nominal + *fq.borrowing_limit, d))
        return refuse(0, d, Resources{}, [&] {
          return std::string(DimName(d)) + " borrowing limit of " + fq.name + " in " + Q(q).name +
                 " reached (" + Usage(u, fq, d) + ", " + Amount(r, d) + " asked)";
        });
    }
  }
  const Resources pool = Lendable(q, f);
  for (int d = 0; d < kDims; ++d) {
    if (Dim(need, d) > Dim(pool, d)) {
      if (!explain) return ResourceExhausted("");
      return refuse(1, d, pool, [&] {
        if (Q(q).cohort.empty())
          return "quota of " + fq.name + " in " + Q(q).name + " exhausted (" + Usage(u, fq, d) +
                 ", " + Amount(r, d) + " asked; no cohort to borrow from)";
        return "quota of " + fq.name + " in " + Q(q).name + " exhausted (" + Usage(u, fq, d) +
               ", " + Amount(r, d) + " asked; cohort " + Q(q).cohort + " lends " + Amount(pool, d) +
               ", " + Amount(Max0(pool - Max0(u - fq.nominal)), d) + " of it left)";
      });
    }
  }
  return Status::Ok();
}

std::string Admission::Impl::Amount(const Resources& r, int d) const {
  if (d == 0) return Gpu2(r.gpu) + " GPU-eq";
  if (d == 1) return Gpu2(r.cpu) + " CPU";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(r.memory) / 1024.0);
  return buf;
}

std::string Admission::Impl::Usage(const Resources& u, const FlavorQuota& fq, int d) const {
  return Amount(u, d) + " used of " + Amount(fq.nominal, d);
}

Resources Admission::Impl::Lendable(int q, int qf) const {
  Resources lend, borrowed;
  for (int o : cohort_members[q]) {
    const int f = FlavorIn(o, q, qf);
    if (f < 0) continue;
    const FlavorQuota& fq = Q(o).flavors[f];
    const Resources& u = qs[o].usage[f];
    const Resources own = Min(u, fq.nominal);
    if (o == q) continue;
    borrowed += Max0(u - fq.nominal);
    Resources cap = Max0(fq.nominal - own);
    if (fq.lending_limit) cap = Min(cap, *fq.lending_limit);
    lend += cap;
  }
  return Max0(lend - borrowed);
}

bool Admission::Impl::WithinNominal(const Job& j) const {
  const int need = j.spec.min_member > 0 ? j.spec.min_member : j.spec.pods;
  for (size_t f = 0; f < Q(j.queue).flavors.size(); ++f) {
    const FlavorQuota& fq = Q(j.queue).flavors[f];
    const Resources est = EstimateCharge(j.spec, need, fq.models);
    if ((qs[j.queue].usage[f] + est).FitsIn(fq.nominal)) return true;
  }
  return false;
}

double Admission::Impl::Share(int q) const {
  const QueueState& s = qs[q];
  Resources u;
  for (const auto& x : s.usage) u += x;
  const double w = Q(q).weight;
  double share = 0;
  const double cur[kDims] = {static_cast<double>(u.gpu), static_cast<double>(u.cpu),
                             static_cast<double>(u.memory)};
  const bool decay = self->config_.usage_half_life_s > 0;
  for (int d = 0; d < kDims; ++d) {
    const double v = decay ? 0.5 * s.decayed[d] + 0.5 * cur[d] : cur[d];
    share = std::max(share, v / (w * capacity[d]));
  }
  return share;
}

void Admission::Impl::Decay(double now) {
  if (last_now < 0) {
    last_now = now;
    return;
  }
  const double dt = now - last_now;
  last_now = now;
  const double h = self->config_.usage_half_life_s;
  if (h <= 0 || dt <= 0) return;
  const double keep = std::exp2(-dt / h);
  for (auto& s : qs) {
    Resources u;
    for (const auto& x : s.usage) u += x;
    const double cur[kDims] = {static_cast<double>(u.gpu), static_cast<double>(u.cpu),
                               static_cast<double>(u.memory)};
    for (int d = 0; d < kDims; ++d) s.decayed[d] = keep * s.decayed[d] + (1 - keep) * cur[d];
  }
}

}  // namespace tessera
