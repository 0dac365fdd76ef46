#include "sim/generator.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/random.h"
#include "sim/report.h"
#include "sim/trace.h"

namespace tessera {
namespace {

constexpr int kMaxNodes = 1000000;
constexpr int kMaxRedraws = 1000;
constexpr int kMaxDropped = 20;
constexpr size_t kMaxPods = 50000000;
constexpr double kMaxLifetimeS = 1e12;
// The largest node ParseNodesCsv reads back.
constexpr int64_t kMaxNodeCpuMilli = 64LL * 1024 * 1000;
constexpr int64_t kMaxNodeMemMib = 1LL << 40;

enum class PodClass { kCpuOnly, kShare, kWhole, kMulti };

const char* ClassName(PodClass c) {
  switch (c) {
    case PodClass::kCpuOnly:
      return "CPU-only";
    case PodClass::kShare:
      return "GPU-share";
    case PodClass::kWhole:
      return "whole-GPU";
    case PodClass::kMulti:
      return "multi-GPU";
  }
  return "?";
}

bool InUnitInterval(double v) {
  return std::isfinite(v) && v >= 0 && v <= 1;
}

template <typename T>
Status CheckWeights(const std::vector<T>& items, const std::string& field, bool required) {
  double total = 0;
  for (const T& it : items) {
    if (!std::isfinite(it.weight) || it.weight < 0)
      return InvalidArgument(field + ": weights must be finite and non-negative");
    total += it.weight;
  }
  if (required && !(total > 0)) return InvalidArgument(field + ": needs a positive weight");
  return Status::Ok();
}

Status CheckProfiles(const std::vector<ResourceProfile>& profiles, const std::string& field,
                     bool required) {
  TESSERA_RETURN_IF_ERROR(CheckWeights(profiles, field, required));
  for (const ResourceProfile& p : profiles) {
    if (p.cpu_milli < 0 || p.memory_mib < 0 || p.cpu_milli > (1LL << 32) ||
        p.memory_mib > (1LL << 32))
      return InvalidArgument(field + ": CPU and memory must be in 0..2^32");
  }
  return Status::Ok();
}

Status Validate(const GeneratorConfig& c) {
  if (c.num_nodes < 1 || c.num_nodes > kMaxNodes)
    return InvalidArgument("num_nodes must be in 1.." + std::to_string(kMaxNodes));
  if (c.pools.empty()) return InvalidArgument("pools: no node pool");
  TESSERA_RETURN_IF_ERROR(CheckWeights(c.pools, "pools", true));
  std::set<std::string> names;
  const GpuCatalog& cat = GpuCatalog::Builtin();
  for (const NodePool& p : c.pools) {
    const std::string where = "pools['" + p.name + "']";
    if (p.name.empty()) return InvalidArgument("pools: empty pool name");
    if (!names.insert(p.name).second) return InvalidArgument(where + ": duplicate pool name");
    if (p.gpus_per_node < 0 || p.gpus_per_node > kMaxGpusPerNode)
      return InvalidArgument(where + ": gpus_per_node outside 0.." +
                             std::to_string(kMaxGpusPerNode));
    if (p.gpus_per_node > 0 && !cat.Find(p.model))
      return InvalidArgument(where + ": unknown GPU model '" + p.model +
                             "' (known: " + cat.KnownNames() + ")");
    if (p.gpus_per_node == 0 && !p.model.empty())
      return InvalidArgument(where + ": a model on a pool without GPUs");
    if (p.cpu_milli <= 0 || p.memory_mib <= 0 || p.cpu_milli > kMaxNodeCpuMilli ||
        p.memory_mib > kMaxNodeMemMib)
      return InvalidArgument(where +
                             ": CPU must be in 1..65536000 milli-cores and memory in "
                             "1..2^40 MiB");
  }
  if (!(c.gpu_demand_ratio > 0 && c.gpu_demand_ratio <= 100))
    return InvalidArgument("gpu_demand_ratio must be in (0, 100]");
  if (!InUnitInterval(c.cpu_only_share) || !InUnitInterval(c.gpu_share_share) ||
      !InUnitInterval(c.multi_gpu_share))
    return InvalidArgument("pod class shares must be in [0, 1]");
  if (c.cpu_only_share + c.gpu_share_share + c.multi_gpu_share > 1 + 1e-9)
    return InvalidArgument("cpu_only_share + gpu_share_share + multi_gpu_share exceeds 1");
  if (!(c.cpu_only_share <= 0.999)) return InvalidArgument("cpu_only_share must be <= 0.999");
  TESSERA_RETURN_IF_ERROR(CheckWeights(c.share_milli, "share_milli", c.gpu_share_share > 0));
  for (const WeightedInt& m : c.share_milli) {
    if (m.value < 1 || m.value > 999) return InvalidArgument("share_milli: values must be 1..999");
  }
  TESSERA_RETURN_IF_ERROR(
      CheckWeights(c.multi_gpu_count, "multi_gpu_count", c.multi_gpu_share > 0));
  for (const WeightedInt& m : c.multi_gpu_count) {
    if (m.value < 2 || m.value > kMaxGpusPerNode)
      return InvalidArgument("multi_gpu_count: values must be 2.." +
                             std::to_string(kMaxGpusPerNode));
  }
  TESSERA_RETURN_IF_ERROR(
      CheckProfiles(c.cpu_only_profiles, "cpu_only_profiles", c.cpu_only_share > 0));
  TESSERA_RETURN_IF_ERROR(CheckProfiles(c.share_profiles, "share_profiles", c.gpu_share_share > 0));
  const bool whole = c.cpu_only_share + c.gpu_share_share + c.multi_gpu_share < 1 - 1e-9;
  TESSERA_RETURN_IF_ERROR(CheckProfiles(c.whole_profiles, "whole_profiles", whole));
  TESSERA_RETURN_IF_ERROR(
      CheckProfiles(c.multi_profiles_per_gpu, "multi_profiles_per_gpu", c.multi_gpu_share > 0));
  if (!InUnitInterval(c.pinned_share)) return InvalidArgument("pinned_share must be in [0, 1]");
  TESSERA_RETURN_IF_ERROR(CheckWeights(c.pins, "pins", c.pinned_share > 0));
  for (const ModelPin& p : c.pins) {
    if (p.models.empty()) return InvalidArgument("pins: empty model set");
    auto mask = ParseModelList(p.models);
    if (!mask.ok()) return InvalidArgument("pins: " + mask.status().message());
  }
  if (!(std::isfinite(c.mean_interarrival_s) && c.mean_interarrival_s >= 0 &&
        c.mean_interarrival_s <= 1e6))
    return InvalidArgument("mean_interarrival_s must be in [0, 1e6]");
  if (!(c.lifetime_median_s >= 1 && c.lifetime_median_s <= kMaxLifetimeS))
    return InvalidArgument("lifetime_median_s must be in [1, 1e12]");
  if (!(c.lifetime_sigma >= 0 && c.lifetime_sigma <= 10))
    return InvalidArgument("lifetime_sigma must be in [0, 10]");
  if (!InUnitInterval(c.long_running_share))
    return InvalidArgument("long_running_share must be in [0, 1]");
  if (!(c.long_running_min_s >= 1 && c.long_running_min_s <= c.long_running_max_s &&
        c.long_running_max_s <= kMaxLifetimeS))
    return InvalidArgument("long-running lifetimes need 1 <= min <= max <= 1e12");
  return Status::Ok();
}

template <typename T>
const T& Pick(Rng& rng, const std::vector<T>& items) {
  double total = 0;
  for (const T& it : items) total += it.weight;
  double x = rng.UniformDouble() * total;
  for (const T& it : items) {
    if (x < it.weight) return it;
    x -= it.weight;
  }
  for (auto it = items.rbegin(); it != items.rend(); ++it) {
    if (it->weight > 0) return *it;
  }
  return items.back();
}

std::vector<int> SplitNodes(const std::vector<NodePool>& pools, int n) {
  double total = 0;
  for (const NodePool& p : pools) total += p.weight;
  std::vector<int> count(pools.size());
  std::vector<double> frac(pools.size());
  int used = 0;
  for (size_t i = 0; i < pools.size(); ++i) {
    const double exact = static_cast<double>(n) * pools[i].weight / total;
    count[i] = static_cast<int>(std::floor(exact));
    frac[i] = exact - count[i];
    used += count[i];
  }
  std::vector<size_t> order(pools.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return frac[a] > frac[b]; });
  for (size_t k = 0; used < n; k = (k + 1) % order.size()) {
    if (pools[order[k]].weight > 0) {
      ++count[order[k]];
      ++used;
    }
  }
  return count;
}

std::string Padded(size_t i, int width) {
  std::string s = std::to_string(i);
  if (static_cast<int>(s.size()) < width) s.insert(0, width - s.size(), '0');
  return s;
}

int Digits(size_t n) {
  return static_cast<int>(std::to_string(n).size());
}

bool Fits(const Demand& d, const NodeSpec& n) {
  if (d.cpu > n.cpu || d.memory > n.memory) return false;
  if (d.num_gpu == 0) return true;
  return n.gpu_count >= d.num_gpu && d.AllowsModel(n.model);
}

class PodDrawer {
 public:
  PodDrawer(const GeneratorConfig& c, std::vector<NodeSpec> shapes)
      : c_(c), shapes_(std::move(shapes)) {
    for (const ModelPin& p : c.pins) masks_.push_back(ParseModelList(p.models).value());
    for (const ResourceProfile& p : c.whole_profiles) whole_ok_ = whole_ok_ || p.weight > 0;
  }

  PodClass DrawClass(Rng& rng) const {
    const double u = rng.UniformDouble();
    if (u < c_.cpu_only_share) return PodClass::kCpuOnly;
    if (u < c_.cpu_only_share + c_.gpu_share_share) return PodClass::kShare;
    if (u < c_.cpu_only_share + c_.gpu_share_share + c_.multi_gpu_share) return PodClass::kMulti;
    if (whole_ok_) return PodClass::kWhole;
    // Shares summing to 1 up to rounding, without whole-GPU profiles.
    if (c_.multi_gpu_share > 0) return PodClass::kMulti;
    return c_.gpu_share_share > 0 ? PodClass::kShare : PodClass::kCpuOnly;
  }

  // A demand of class `cls` that fits some node shape.
  Result<Demand> Draw(Rng& rng, PodClass cls) const {
    for (int attempt = 0; attempt < kMaxRedraws; ++attempt) {
      const Demand d = DrawOnce(rng, cls);
      for (const NodeSpec& n : shapes_) {
        if (Fits(d, n)) return d;
      }
    }
    return FailedPrecondition(std::string("no node can host a ") + ClassName(cls) + " pod after " +
                              std::to_string(kMaxRedraws) +
                              " draws; check the pools, profiles and pins");
  }

 private:
  Demand DrawOnce(Rng& rng, PodClass cls) const {
    Demand d;
    if (cls == PodClass::kCpuOnly) {
      const ResourceProfile& p = Pick(rng, c_.cpu_only_profiles);
      d.cpu = MilliCpu(p.cpu_milli);
      d.memory = MiB(p.memory_mib);
      return d;
    }
    if (cls == PodClass::kShare) {
      const ResourceProfile& p = Pick(rng, c_.share_profiles);
      d.cpu = MilliCpu(p.cpu_milli);
      d.memory = MiB(p.memory_mib);
      d.num_gpu = 1;
      d.gpu_milli = Pick(rng, c_.share_milli).value;
    } else if (cls == PodClass::kWhole) {
      const ResourceProfile& p = Pick(rng, c_.whole_profiles);
      d.cpu = MilliCpu(p.cpu_milli);
      d.memory = MiB(p.memory_mib);
      d.num_gpu = 1;
      d.gpu_milli = 1000;
    } else {
      const int k = Pick(rng, c_.multi_gpu_count).value;
      const ResourceProfile& p = Pick(rng, c_.multi_profiles_per_gpu);
      d.cpu = MilliCpu(p.cpu_milli * k);
      d.memory = MiB(p.memory_mib * k);
      d.num_gpu = k;
      d.gpu_milli = 1000;
    }
    if (rng.UniformDouble() < c_.pinned_share) {
      const ModelPin& pin = Pick(rng, c_.pins);
      d.models = masks_[static_cast<size_t>(&pin - c_.pins.data())];
    }
    return d;
  }

  const GeneratorConfig& c_;
  std::vector<NodeSpec> shapes_;
  std::vector<ModelMask> masks_;
  bool whole_ok_ = false;
};

double Lifetime(Rng& rng, const GeneratorConfig& c) {
  double s;
  if (rng.UniformDouble() < c.long_running_share) {
    const double lo = std::log(c.long_running_min_s), hi = std::log(c.long_running_max_s);
    s = std::exp(lo + rng.UniformDouble() * (hi - lo));
  } else {
    s = c.lifetime_median_s * std::exp(c.lifetime_sigma * rng.Normal());
  }
  return std::clamp(std::round(s), 1.0, kMaxLifetimeS);
}

std::string CsvQuote(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

std::string ModelList(ModelMask mask) {
  const GpuCatalog& cat = GpuCatalog::Builtin();
  std::string out;
  for (size_t i = 0; i < cat.size() && i < 64; ++i) {
    if ((mask >> i) & 1) {
      if (!out.empty()) out += '|';
      out += cat.Get(static_cast<GpuModelId>(i)).name;
    }
  }
  return out;
}

}  // namespace

Result<GeneratedTrace> Generate(const GeneratorConfig& config, uint64_t seed) {
  TESSERA_RETURN_IF_ERROR(Validate(config));
  const GpuCatalog& cat = GpuCatalog::Builtin();
  GeneratedTrace out;
  std::vector<NodeSpec> shapes;
  const std::vector<int> counts = SplitNodes(config.pools, config.num_nodes);
  int64_t capacity_milli = 0;
  for (size_t i = 0; i < config.pools.size(); ++i) {
    const NodePool& p = config.pools[i];
    NodeSpec shape;
    shape.cpu = MilliCpu(p.cpu_milli);
    shape.memory = MiB(p.memory_mib);
    shape.gpu_count = p.gpus_per_node;
    shape.model = p.gpus_per_node > 0 ? *cat.Find(p.model) : kNoGpuModel;
    if (counts[i] > 0) shapes.push_back(shape);
    const int width = std::max(4, Digits(static_cast<size_t>(counts[i])));
    for (int k = 0; k < counts[i]; ++k) {
      NodeSpec n = shape;
      n.name = p.name + "-" + Padded(static_cast<size_t>(k), width);
      capacity_milli += kMilliPerGpu * n.gpu_count;
      out.nodes.push_back(std::move(n));
    }
  }
  if (capacity_milli == 0) return InvalidArgument("pools: the generated cluster has no GPUs");

  const PodDrawer drawer(config, std::move(shapes));
  Rng rng(seed);
  const double target = config.gpu_demand_ratio * static_cast<double>(capacity_milli);
  int64_t demand = 0;
  double t = 0;
  int dropped = 0;
  while (dropped < kMaxDropped) {
    const PodClass cls = drawer.DrawClass(rng);
    auto d = drawer.Draw(rng, cls);
    if (!d.ok()) return d.status();
    const bool over = static_cast<double>(demand + d->TotalMilliGpu()) > target;
    if (over || (dropped > 0 && d->num_gpu == 0)) {
      dropped += over;
      continue;
    }
    if (out.pods.size() >= kMaxPods)
      return ResourceExhausted("more than " + std::to_string(kMaxPods) +
                               " pods; raise the GPU share sizes or shrink the cluster");
    demand += d->TotalMilliGpu();
    Workload w;
    w.demand = *d;
    if (!out.pods.empty()) t += -config.mean_interarrival_s * std::log(1.0 - rng.UniformDouble());
    w.creation = static_cast<SimTime>(std::floor(t));
    w.deletion = w.creation + static_cast<SimTime>(Lifetime(rng, config));
    out.pods.push_back(std::move(w));
  }
  const int width = std::max(5, Digits(out.pods.size()));
  for (size_t i = 0; i < out.pods.size(); ++i) out.pods[i].name = "pod-" + Padded(i, width);
  return out;
}

WorkloadMix MixOf(const std::vector<Workload>& pods) {
  WorkloadMix m;
  for (const Workload& w : pods) {
    const Demand& d = w.demand;
    ++m.pods;
    m.gpu_milli += d.TotalMilliGpu();
    if (d.IsCpuOnly()) {
      ++m.cpu_only;
      continue;
    }
    if (d.IsShare()) {
      ++m.share;
    } else if (d.num_gpu == 1) {
      ++m.whole;
    } else {
      ++m.multi;
    }
    if (d.models != 0) ++m.pinned;
  }
  return m;
}

std::string NodesCsv(const std::vector<NodeSpec>& nodes) {
  const GpuCatalog& cat = GpuCatalog::Builtin();
  std::string out = "sn,cpu_milli,memory_mib,gpu,model\n";
  for (const NodeSpec& n : nodes) {
    out += CsvQuote(n.name) + "," + std::to_string(n.cpu.v) + "," + std::to_string(n.memory.v) +
           "," + std::to_string(n.gpu_count) + ",";
    if (n.model != kNoGpuModel && n.model < cat.size()) out += CsvQuote(cat.Get(n.model).name);
    out += "\n";
  }
  return out;
}

std::string PodsCsv(const std::vector<Workload>& pods) {
  std::string out =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time\n";
  for (const Workload& w : pods) {
    const Demand& d = w.demand;
    out += CsvQuote(w.name) + "," + std::to_string(d.cpu.v) + "," + std::to_string(d.memory.v) +
           "," + std::to_string(d.num_gpu) + "," + std::to_string(d.gpu_milli) + "," +
           ModelList(d.models) + "," + std::to_string(w.creation) + ",";
    if (w.deletion >= 0) out += std::to_string(w.deletion);
    out += "\n";
  }
  return out;
}

Status WriteTraceCsv(const GeneratedTrace& trace, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("cannot create directory '" + dir + "': " + ec.message());
  const std::filesystem::path base(dir);
  TESSERA_RETURN_IF_ERROR(WriteFileAtomic((base / "nodes.csv").string(), NodesCsv(trace.nodes)));
  return WriteFileAtomic((base / "pods.csv").string(), PodsCsv(trace.pods));
}

}  // namespace tessera
