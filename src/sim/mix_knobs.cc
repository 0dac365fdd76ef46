#include "sim/mix_knobs.h"

#include "core/text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>

namespace tessera {
namespace {

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Status FlagError(const std::string& flag, const std::string& text, const std::string& what) {
  return InvalidArgument(flag + ": " + QuotedValue(text) + " " + what);
}

bool ParseDouble(const std::string& t, double* v) {
  if (!PlainDecimal(t)) return false;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), *v);
  return ec == std::errc() && p == t.data() + t.size() && std::isfinite(*v);
}

bool ParseInt(const std::string& t, int64_t* v) {
  if (t.empty() || t.size() > 18) return false;
  for (char c : t) {
    if (c < '0' || c > '9') return false;
  }
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), *v);
  return ec == std::errc() && p == t.data() + t.size();
}

Result<double> ParseNumber(const std::string& flag, const std::string& text, double min,
                           double max) {
  const std::string range = "[" + Number(min) + ", " + Number(max) + "]";
  double v = 0;
  if (!PlainDecimal(text)) return FlagError(flag, text, "is not a number; allowed range " + range);
  if (!ParseDouble(text, &v) || v < min || v > max)
    return FlagError(flag, text, "is outside the allowed range " + range);
  return v;
}

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t p = text.find(sep, start);
    out.push_back(text.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}

std::vector<WeightedInt> Uniform(int lo, int hi) {
  std::vector<WeightedInt> out;
  for (int v = lo; v <= hi; ++v) out.push_back({v, 1.0});
  return out;
}

void ScaleProfiles(std::vector<ResourceProfile>& profiles, double cpu, double mem) {
  for (ResourceProfile& p : profiles) {
    p.cpu_milli = std::llround(static_cast<double>(p.cpu_milli) * cpu);
    p.memory_mib = std::llround(static_cast<double>(p.memory_mib) * mem);
  }
}

}  // namespace

bool MixFlags::empty() const {
  return Given().empty();
}

std::vector<std::pair<std::string, std::string>> MixFlags::Given() const {
  const std::pair<const char*, const std::string*> all[] = {
      {"--cpu-only-fraction", &cpu_only_fraction},
      {"--share-fraction", &share_fraction},
      {"--whole-fraction", &whole_fraction},
      {"--multi-gpu-fraction", &multi_gpu_fraction},
      {"--share-sizes", &share_sizes},
      {"--multi-gpu-counts", &multi_gpu_counts},
      {"--pinned-fraction", &pinned_fraction},
      {"--cpu-per-gpu-scale", &cpu_per_gpu_scale},
      {"--memory-per-gpu-scale", &memory_per_gpu_scale},
  };
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [flag, value] : all) {
    if (!value->empty()) out.emplace_back(flag, *value);
  }
  return out;
}

std::string MixFlags::Text() const {
  std::string out;
  for (const auto& [flag, value] : Given()) {
    if (!out.empty()) out += ' ';
    out += flag + " " + value;
  }
  return out;
}

Result<std::vector<WeightedInt>> ParseWeightedInts(const std::string& flag, const std::string& text,
                                                   int min_value, int max_value) {
  const std::string syntax = "VALUE:WEIGHT,... with VALUE an integer in " +
                             std::to_string(min_value) + ".." + std::to_string(max_value) +
                             " and WEIGHT a number > 0";
  if (text.empty()) return InvalidArgument(flag + ": empty list (expected " + syntax + ")");
  const std::vector<std::string> items = Split(text, ',');
  if (items.size() > 999) return FlagError(flag, text, "has more than 999 items");
  std::vector<WeightedInt> out;
  std::set<int> seen;
  for (const std::string& item : items) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos)
      return FlagError(flag, item, "is not VALUE:WEIGHT (expected " + syntax + ")");
    const std::string v = item.substr(0, colon), w = item.substr(colon + 1);
    int64_t value = 0;
    if (!ParseInt(v, &value) || value < min_value || value > max_value)
      return FlagError(flag, item,
                       "has a value outside " + std::to_string(min_value) + ".." +
                           std::to_string(max_value) + " (expected " + syntax + ")");
    double weight = 0;
    if (!ParseDouble(w, &weight) || !(weight > 0) || weight > 1e12)
      return FlagError(flag, item, "has a weight that is not a number in (0, 1e12]");
    if (!seen.insert(static_cast<int>(value)).second)
      return FlagError(flag, item, "names the value " + v + " twice");
    out.push_back({static_cast<int>(value), weight});
  }
  return out;
}

Result<std::vector<WeightedInt>> ParseShareSizes(const std::string& text,
                                                 const std::vector<WeightedInt>& base) {
  const std::string flag = "--share-sizes";
  if (text == "trace") return base;
  if (text == "small") return Uniform(50, 300);
  if (text == "large") return Uniform(500, 950);
  if (text.rfind("uniform:", 0) == 0) {
    const std::string range = text.substr(8);
    const size_t dash = range.find('-');
    int64_t lo = 0, hi = 0;
    if (dash == std::string::npos || !ParseInt(range.substr(0, dash), &lo) ||
        !ParseInt(range.substr(dash + 1), &hi) || lo < 1 || hi > 999 || lo > hi)
      return FlagError(flag, text, "must be uniform:LO-HI with 1 <= LO <= HI <= 999");
    return Uniform(static_cast<int>(lo), static_cast<int>(hi));
  }
  if (text.find(':') == std::string::npos)
    return FlagError(flag, text,
                     "is not a distribution (expected trace, small, large, uniform:LO-HI or "
                     "VALUE:WEIGHT,... with VALUE in 1..999)");
  return ParseWeightedInts(flag, text, 1, 999);
}

Status ApplyMixFlags(const MixFlags& f, GeneratorConfig& config) {
  GeneratorConfig c = config;
  // Class fractions: cpu-only, share, whole, multi.
  struct Class {
    const char* flag;
    const std::string* text;
    double base;
    double value = 0;
    bool given = false;
  };
  const double base_whole = 1.0 - c.cpu_only_share - c.gpu_share_share - c.multi_gpu_share;
  Class classes[] = {
      {"--cpu-only-fraction", &f.cpu_only_fraction, c.cpu_only_share},
      {"--share-fraction", &f.share_fraction, c.gpu_share_share},
      {"--whole-fraction", &f.whole_fraction, std::max(0.0, base_whole)},
      {"--multi-gpu-fraction", &f.multi_gpu_fraction, c.multi_gpu_share},
  };
  double given_sum = 0, free_base = 0;
  std::string given_names;
  int given = 0;
  for (Class& k : classes) {
    if (k.text->empty()) {
      free_base += k.base;
      continue;
    }
    auto v = ParseNumber(k.flag, *k.text, 0, 1);
    if (!v.ok()) return v.status();
    k.value = *v;
    k.given = true;
    given_sum += *v;
    given_names += std::string(given_names.empty() ? "" : " + ") + k.flag;
    ++given;
  }
  if (given > 0) {
    if (given_sum > 1 + 1e-9)
      return InvalidArgument(given_names + " sum to " + Number(given_sum) + ", more than 1");
    if (given == 4 && given_sum < 1 - 1e-6)
      return InvalidArgument(given_names + " name all four pod classes and must sum to 1 (they " +
                             "sum to " + Number(given_sum) + ")");
    const double rest = std::max(0.0, 1.0 - given_sum);
    if (rest > 1e-9 && !(free_base > 0))
      return InvalidArgument(given_names + " sum to " + Number(given_sum) +
                             " and the other pod classes have no base share to take the rest");
    for (Class& k : classes) {
      if (!k.given) k.value = free_base > 0 ? rest * k.base / free_base : 0.0;
    }
    c.cpu_only_share = classes[0].value;
    c.gpu_share_share = classes[1].value;
    c.multi_gpu_share = classes[3].value;
    // The whole-GPU share is the rest; keep the sum of the three at most 1 after rounding.
    const double three = c.cpu_only_share + c.gpu_share_share + c.multi_gpu_share;
    if (three > 1) c.gpu_share_share = std::max(0.0, c.gpu_share_share - (three - 1));
    if (c.cpu_only_share > 0.999)
      return InvalidArgument(given_names + " leave " + Number(c.cpu_only_share * 100) +
                             "% CPU-only pods; at most 99.9% may be CPU-only");
  }
  if (!f.share_sizes.empty()) {
    auto sizes = ParseShareSizes(f.share_sizes, c.share_milli);
    if (!sizes.ok()) return sizes.status();
    c.share_milli = std::move(sizes).value();
  }
  if (!f.multi_gpu_counts.empty()) {
    int largest = 0;
    for (const NodePool& p : c.pools) {
      if (p.weight > 0) largest = std::max(largest, p.gpus_per_node);
    }
    if (largest < 2)
      return InvalidArgument("--multi-gpu-counts: no node pool has 2 or more GPUs per node");
    auto counts = ParseWeightedInts("--multi-gpu-counts", f.multi_gpu_counts, 2, largest);
    if (!counts.ok()) return counts.status();
    c.multi_gpu_count = std::move(counts).value();
  }
  if (!f.pinned_fraction.empty()) {
    auto v = ParseNumber("--pinned-fraction", f.pinned_fraction, 0, 1);
    if (!v.ok()) return v.status();
    c.pinned_share = *v;
  }
  double cpu_scale = 1, mem_scale = 1;
  if (!f.cpu_per_gpu_scale.empty()) {
    auto v =
        ParseNumber("--cpu-per-gpu-scale", f.cpu_per_gpu_scale, kMinProfileScale, kMaxProfileScale);
    if (!v.ok()) return v.status();
    cpu_scale = *v;
  }
  if (!f.memory_per_gpu_scale.empty()) {
    auto v = ParseNumber("--memory-per-gpu-scale", f.memory_per_gpu_scale, kMinProfileScale,
                         kMaxProfileScale);
    if (!v.ok()) return v.status();
    mem_scale = *v;
  }
  if (cpu_scale != 1 || mem_scale != 1) {
    ScaleProfiles(c.share_profiles, cpu_scale, mem_scale);
    ScaleProfiles(c.whole_profiles, cpu_scale, mem_scale);
    ScaleProfiles(c.multi_profiles_per_gpu, cpu_scale, mem_scale);
  }
  config = std::move(c);
  return Status::Ok();
}

double WeightedMean(const std::vector<WeightedInt>& items) {
  double sum = 0, weight = 0;
  for (const WeightedInt& it : items) {
    sum += it.value * it.weight;
    weight += it.weight;
  }
  return weight > 0 ? sum / weight : 0.0;
}

}  // namespace tessera
