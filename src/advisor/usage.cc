#include "advisor/usage.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "advisor/numbers.h"
#include "cluster/gpu_catalog.h"
#include "cluster/mig_geometry.h"
#include "core/text.h"

namespace tessera::advisor {

int64_t WorkloadUsage::FirstT() const {
  int64_t t = INT64_MAX;
  for (const auto& p : pods)
    if (!p.samples.empty()) t = std::min(t, p.samples.front().t_s);
  return t == INT64_MAX ? 0 : t;
}

int64_t WorkloadUsage::LastT() const {
  int64_t t = INT64_MIN;
  for (const auto& p : pods)
    if (!p.samples.empty()) t = std::max(t, p.samples.back().t_s);
  return t == INT64_MIN ? 0 : t;
}

size_t WorkloadUsage::SampleCount() const {
  size_t n = 0;
  for (const auto& p : pods) n += p.samples.size();
  return n;
}

bool WorkloadUsage::AttributionImpossible() const {
  return std::any_of(pods.begin(), pods.end(), [](const PodSeries& p) { return p.shared_device; });
}

void MarkSharedDevices(UsageHistory& h) {
  // (gpu, t) -> number of distinct device-level series sampled there.
  std::map<std::pair<std::string, int64_t>, int> count;
  for (const auto& w : h.workloads)
    for (const auto& p : w.pods)
      if (p.device_source && !p.gpu.empty())
        for (const auto& s : p.samples) ++count[{p.gpu, s.t_s}];
  for (auto& w : h.workloads)
    for (auto& p : w.pods) {
      p.shared_device = false;
      if (!p.device_source || p.gpu.empty()) continue;
      for (const auto& s : p.samples)
        if (count[{p.gpu, s.t_s}] > 1) {
          p.shared_device = true;
          break;
        }
    }
}

namespace {

struct Field {
  std::string_view text;
  int column = 0;
};

enum Col {
  kTime,
  kNs,
  kKind,
  kOwner,
  kPod,
  kModel,
  kGpu,
  kSource,
  kReqGpus,
  kReqMem,
  kReqCompute,
  kReqMig,
  kMemUsed,
  kSm,
  kNumCols
};

const char* const kColNames[kNumCols] = {"timestamp_s",
                                         "namespace",
                                         "owner_kind",
                                         "owner",
                                         "pod",
                                         "gpu_model",
                                         "gpu",
                                         "source",
                                         "requested_gpus",
                                         "requested_memory_mib",
                                         "requested_compute",
                                         "requested_mig_profile",
                                         "memory_used_mib",
                                         "sm_active"};

class Reader {
 public:
  explicit Reader(const std::string& source) : source_(source) {}

  Status Err(int line, int col, const std::string& what) const {
    return InvalidArgument(source_ + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " +
                           what);
  }
  Status FieldErr(int line, const Field& f, int c, const std::string& what) const {
    return Err(line, f.column, std::string("column '") + kColNames[c] + "': " + what);
  }
  Result<double> Number(int line, const Field& f, int c, double lo, double hi) const {
    auto v = ParseStrictDecimal(f.text);
    if (!v.ok()) return FieldErr(line, f, c, v.status().message());
    if (*v < lo || *v > hi)
      return FieldErr(line, f, c, Printf("%g outside the allowed range %g..%g", *v, lo, hi));
    return *v;
  }
  Result<int64_t> Int(int line, const Field& f, int c, int64_t lo, int64_t hi) const {
    auto v = ParseStrictInt(f.text);
    if (!v.ok()) return FieldErr(line, f, c, v.status().message());
    if (*v < lo || *v > hi)
      return FieldErr(line, f, c,
                      std::to_string(*v) + " outside the allowed range " + std::to_string(lo) +
                          ".." + std::to_string(hi));
    return *v;
  }

 private:
  const std::string& source_;
};

bool NameOk(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_' || c == ':' || c == '/';
    if (!ok) return false;
  }
  return true;
}

struct OwnerInfo {
  size_t index = 0;
  int first_line = 0;
};

}  // namespace

Result<UsageHistory> ParseHistoryCsv(std::string_view content, const std::string& source) {
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (content.substr(0, kBom.size()) == kBom) content.remove_prefix(kBom.size());
  const Reader rd(source);
  UsageHistory h;
  std::unordered_map<std::string, OwnerInfo> owners;
  // (namespace, pod, gpu) -> (workload index, pod index)
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<size_t, size_t>> series;
  const GpuCatalog& cat = GpuCatalog::Builtin();
  bool header_seen = false;
  size_t rows = 0;
  int line = 0;
  size_t pos = 0;
  std::vector<Field> f;
  while (pos < content.size()) {
    ++line;
    size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    std::string_view text = content.substr(pos, end - pos);
    pos = end + 1;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (text.empty()) continue;
    f.clear();
    size_t start = 0;
    while (true) {
      const size_t comma = text.find(',', start);
      const size_t stop = comma == std::string_view::npos ? text.size() : comma;
      f.push_back({text.substr(start, stop - start), static_cast<int>(start) + 1});
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    for (const Field& x : f) {
      const size_t q = x.text.find('"');
      if (q != std::string_view::npos)
        return rd.Err(line, x.column + static_cast<int>(q), "quotes are not supported");
    }
    if (!header_seen) {
      if (text != kHistoryHeader) {
        for (int c = 0; c < kNumCols; ++c) {
          if (c >= static_cast<int>(f.size()))
            return rd.Err(line, static_cast<int>(text.size()) + 1,
                          std::string("header: missing column '") + kColNames[c] + "'");
          if (f[c].text != kColNames[c])
            return rd.Err(line, f[c].column,
                          std::string("header: expected '") + kColNames[c] + "', found " +
                              QuotedValue(std::string(f[c].text)));
        }
        return rd.Err(line, f[kNumCols].column, "header: unexpected extra column");
      }
      header_seen = true;
      continue;
    }
    if (f.size() != kNumCols)
      return rd.Err(
          line, f.size() > kNumCols ? f[kNumCols].column : static_cast<int>(text.size()) + 1,
          "expected " + std::to_string(kNumCols) + " fields, found " + std::to_string(f.size()));
    if (++rows > kMaxHistoryRows)
      return rd.Err(line, 1, "more than " + std::to_string(kMaxHistoryRows) + " rows");
    auto t = rd.Int(line, f[kTime], kTime, 0, int64_t{1} << 40);
    if (!t.ok()) return t.status();
    for (int c : {kNs, kOwner, kPod})
      if (!NameOk(f[c].text))
        return rd.FieldErr(line, f[c], c,
                           f[c].text.empty()
                               ? "empty value"
                               : QuotedValue(std::string(f[c].text)) + " is not a Kubernetes name");
    const std::string kind(f[kKind].text);
    if (std::find_if(std::begin(kOwnerKinds), std::end(kOwnerKinds),
                     [&](const char* k) { return kind == k; }) == std::end(kOwnerKinds))
      return rd.FieldErr(line, f[kKind], kKind,
                         QuotedValue(kind) +
                             " is not an owner kind (Deployment, StatefulSet, Job, JobSet, "
                             "WorkloadGroup, Pod)");
    const std::string model(f[kModel].text);
    const auto model_id = cat.Find(model);
    if (!model_id || cat.Get(*model_id).memory_mib == 0)
      return rd.FieldErr(
          line, f[kModel], kModel,
          "unknown GPU model " + QuotedValue(model) + " (known: " + cat.KnownNames() + ")");
    const int64_t model_mem = cat.Get(*model_id).memory_mib;
    if (!f[kGpu].text.empty() && !NameOk(f[kGpu].text))
      return rd.FieldErr(line, f[kGpu], kGpu,
                         QuotedValue(std::string(f[kGpu].text)) + " is not a GPU identifier");
    bool device;
    if (f[kSource].text == "device") {
      device = true;
    } else if (f[kSource].text == "pod") {
      device = false;
    } else {
      return rd.FieldErr(
          line, f[kSource], kSource,
          QuotedValue(std::string(f[kSource].text)) + " is not a source (pod, device)");
    }
    if (device && f[kGpu].text.empty())
      return rd.FieldErr(line, f[kGpu], kGpu, "empty value: a device reading names its GPU");
    GpuRequest req;
    auto gpus = rd.Int(line, f[kReqGpus], kReqGpus, 0, 8);
    if (!gpus.ok()) return gpus.status();
    req.whole_gpus = static_cast<int>(*gpus);
    auto rmem = rd.Int(line, f[kReqMem], kReqMem, 0, model_mem);
    if (!rmem.ok()) return rmem.status();
    req.memory_mib = *rmem;
    auto rcomp = rd.Number(line, f[kReqCompute], kReqCompute, 0, 1);
    if (!rcomp.ok()) return rcomp.status();
    req.compute = *rcomp;
    req.mig_profile = std::string(f[kReqMig].text);
    if (!req.mig_profile.empty()) {
      const MigGeometry* geo = MigGeometryFor(model);
      if (!geo || geo->Find(req.mig_profile) < 0)
        return rd.FieldErr(line, f[kReqMig], kReqMig,
                           QuotedValue(req.mig_profile) + " is not a MIG profile of " + model);
    }
    if (req.whole_gpus > 0 && (req.memory_mib > 0 || req.compute > 0 || !req.mig_profile.empty()))
      return rd.FieldErr(line, f[kReqGpus], kReqGpus,
                         "whole GPUs exclude a memory, compute or MIG request");
    if (req.whole_gpus == 0 && req.memory_mib == 0 && req.mig_profile.empty())
      return rd.FieldErr(line, f[kReqGpus], kReqGpus,
                         "no request: give whole GPUs, memory or a MIG profile");
    auto used = rd.Number(line, f[kMemUsed], kMemUsed, 0, static_cast<double>(model_mem));
    if (!used.ok()) return used.status();
    auto sm = rd.Number(line, f[kSm], kSm, 0, 1);
    if (!sm.ok()) return sm.status();

    const std::string ns(f[kNs].text), owner(f[kOwner].text), pod(f[kPod].text), gpu(f[kGpu].text);
    const std::string key = ns + "/" + kind + "/" + owner;
    auto [it, fresh] = owners.try_emplace(key, OwnerInfo{h.workloads.size(), line});
    if (fresh) {
      WorkloadUsage w;
      w.ns = ns;
      w.owner_kind = kind;
      w.owner = owner;
      w.gpu_model = model;
      w.request = req;
      h.workloads.push_back(std::move(w));
    }
    WorkloadUsage& w = h.workloads[it->second.index];
    const std::string first = " (line " + std::to_string(it->second.first_line) + ")";
    if (w.gpu_model != model)
      return rd.FieldErr(line, f[kModel], kModel,
                         "owner " + key + " ran on " + w.gpu_model + first + ", not " + model);
    if (!(w.request == req))
      return rd.FieldErr(line, f[kReqGpus], kReqGpus,
                         "request of owner " + key + " differs from its first row" + first);
    auto [sit, sfresh] = series.try_emplace({ns, pod, gpu}, it->second.index, w.pods.size());
    if (sfresh) {
      PodSeries p;
      p.pod = pod;
      p.gpu = gpu;
      p.device_source = device;
      w.pods.push_back(std::move(p));
    } else if (sit->second.first != it->second.index) {
      return rd.FieldErr(line, f[kPod], kPod,
                         "pod " + ns + "/" + pod + " already belongs to owner " +
                             h.workloads[sit->second.first].Key());
    }
    PodSeries& p = h.workloads[sit->second.first].pods[sit->second.second];
    if (p.device_source != device)
      return rd.FieldErr(line, f[kSource], kSource, "source changes within the series");
    if (!p.samples.empty() && *t <= p.samples.back().t_s)
      return rd.FieldErr(line, f[kTime], kTime,
                         std::to_string(*t) + " is not after the previous sample (" +
                             std::to_string(p.samples.back().t_s) + ") of pod " + pod);
    p.samples.push_back({*t, *used, *sm});
  }
  if (!header_seen) return rd.Err(1, 1, "empty file: expected the header");
  if (h.workloads.empty()) return rd.Err(line + 1, 1, "no samples after the header");
  MarkSharedDevices(h);
  return h;
}

std::string HistoryCsv(const UsageHistory& h) {
  struct Row {
    int64_t t;
    size_t series, w, p, s;
  };
  // Series in (namespace, pod, gpu) order, so the text does not depend on the input's order.
  std::vector<std::pair<size_t, size_t>> order;
  for (size_t w = 0; w < h.workloads.size(); ++w)
    for (size_t p = 0; p < h.workloads[w].pods.size(); ++p) order.push_back({w, p});
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    const WorkloadUsage& wa = h.workloads[a.first];
    const WorkloadUsage& wb = h.workloads[b.first];
    const PodSeries& pa = wa.pods[a.second];
    const PodSeries& pb = wb.pods[b.second];
    return std::tie(wa.ns, pa.pod, pa.gpu) < std::tie(wb.ns, pb.pod, pb.gpu);
  });
  std::vector<Row> rows;
  for (size_t k = 0; k < order.size(); ++k) {
    const auto [w, p] = order[k];
    for (size_t s = 0; s < h.workloads[w].pods[p].samples.size(); ++s)
      rows.push_back({h.workloads[w].pods[p].samples[s].t_s, k, w, p, s});
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return std::tie(a.t, a.series, a.s) < std::tie(b.t, b.series, b.s);
  });
  std::string out = std::string(kHistoryHeader) + "\n";
  out.reserve(rows.size() * 120);
  for (const Row& r : rows) {
    const WorkloadUsage& w = h.workloads[r.w];
    const PodSeries& p = w.pods[r.p];
    const UsageSample& s = p.samples[r.s];
    out += std::to_string(s.t_s) + "," + w.ns + "," + w.owner_kind + "," + w.owner + "," + p.pod +
           "," + w.gpu_model + "," + p.gpu + "," + (p.device_source ? "device" : "pod") + "," +
           std::to_string(w.request.whole_gpus) + "," + std::to_string(w.request.memory_mib) + "," +
           FormatDecimal(w.request.compute, 6) + "," + w.request.mig_profile + "," +
           FormatDecimal(s.memory_mib, 3) + "," + FormatDecimal(s.sm_active, 6) + "\n";
  }
  return out;
}

}  // namespace tessera::advisor
