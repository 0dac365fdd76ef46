#include "advisor/config.h"

#include <cmath>

#include "advisor/numbers.h"
#include "cluster/gpu_catalog.h"
#include "core/text.h"

namespace tessera::advisor {
namespace {

Status Range(const char* name, double v, double lo, double hi) {
  if (!std::isfinite(v) || v < lo || v > hi)
    return InvalidArgument(Printf("advisor config: %s = %g outside %g..%g", name, v, lo, hi));
  return Status::Ok();
}

}  // namespace

Status ValidateConfig(const AdvisorConfig& c) {
  constexpr double kYear = 366.0 * 86400;
  TESSERA_RETURN_IF_ERROR(Range("window_s", static_cast<double>(c.window_s), 0, kYear));
  TESSERA_RETURN_IF_ERROR(Range("min_history_s", static_cast<double>(c.min_history_s), 0, kYear));
  TESSERA_RETURN_IF_ERROR(Range("min_samples", static_cast<double>(c.min_samples), 1, 1e7));
  TESSERA_RETURN_IF_ERROR(Range("period_s", static_cast<double>(c.period_s), 60, kYear));
  TESSERA_RETURN_IF_ERROR(
      Range("min_trend_periods", static_cast<double>(c.min_trend_periods), 2, 1000));
  TESSERA_RETURN_IF_ERROR(Range("max_trend_per_period", c.max_trend_per_period, 0, 1));
  TESSERA_RETURN_IF_ERROR(Range("trend_min_agreement", c.trend_min_agreement, 0.5, 1));
  TESSERA_RETURN_IF_ERROR(Range("memory_headroom", c.memory_headroom, 0, 1));
  TESSERA_RETURN_IF_ERROR(
      Range("memory_headroom_min_mib", static_cast<double>(c.memory_headroom_min_mib), 0, 65536));
  TESSERA_RETURN_IF_ERROR(Range("memory_spread_weight", c.memory_spread_weight, 0, 4));
  TESSERA_RETURN_IF_ERROR(Range("spike_window_s", static_cast<double>(c.spike_window_s), 0, 86400));
  TESSERA_RETURN_IF_ERROR(Range("level_tolerance", c.level_tolerance, 0, 1));
  TESSERA_RETURN_IF_ERROR(Range("max_new_level_probability", c.max_new_level_probability, 0, 1));
  TESSERA_RETURN_IF_ERROR(Range("compute_quantile", c.compute_quantile, 0.5, 1));
  TESSERA_RETURN_IF_ERROR(Range("compute_headroom", c.compute_headroom, 0, 1));
  TESSERA_RETURN_IF_ERROR(Range("idle_sm_active", c.idle_sm_active, 0, 0.5));
  TESSERA_RETURN_IF_ERROR(
      Range("timeslice_max_median_compute", c.timeslice_max_median_compute, 0, 1));
  TESSERA_RETURN_IF_ERROR(Range("whole_gpu_fraction", c.whole_gpu_fraction, 0.1, 1));
  TESSERA_RETURN_IF_ERROR(Range("other_model_max_compute", c.other_model_max_compute, 0.1, 1));
  TESSERA_RETURN_IF_ERROR(
      Range("auto_floor_mib", static_cast<double>(c.auto_floor_mib), 0, 1 << 20));
  TESSERA_RETURN_IF_ERROR(Range("oom_growth", c.oom_growth, 1.05, 16));
  TESSERA_RETURN_IF_ERROR(
      Range("oom_reserve_gpus", static_cast<double>(c.oom_reserve_gpus), 0, 64));
  TESSERA_RETURN_IF_ERROR(
      Range("oom_backoff_periods", static_cast<double>(c.oom_backoff_periods), 1, 64));
  TESSERA_RETURN_IF_ERROR(
      Range("timeslice_max_replicas", static_cast<double>(c.timeslice_max_replicas), 1, 64));
  TESSERA_RETURN_IF_ERROR(Range("mps_max_clients", static_cast<double>(c.mps_max_clients), 1, 48));
  return Status::Ok();
}

Result<double> PriceTable::Price(std::string_view model) const {
  auto it = usd_per_gpu_hour.find(std::string(model));
  if (it == usd_per_gpu_hour.end())
    return NotFound("no price for GPU model " + QuotedValue(std::string(model)) +
                    " in the price table");
  return it->second;
}

PriceTable DefaultPriceTable() {
  PriceTable t;
  t.usd_per_gpu_hour = {
      {"T4", 0.35},         {"L4", 0.80},        {"A10", 1.00},          {"A10G", 1.01},
      {"P100", 1.46},       {"V100M16", 2.48},   {"V100M32", 2.48},      {"A30", 1.20},
      {"A100-40GB", 3.67},  {"A100-80GB", 5.07}, {"H100-80GB", 9.80},    {"H100-94GB", 10.50},
      {"H100-96GB", 10.50}, {"H200", 12.30},     {"GH200-144GB", 12.30}, {"B200", 14.20},
      {"GB200", 15.00},     {"B300", 18.00},     {"GB300", 19.00},       {"RTX-PRO-6000", 3.50},
  };
  return t;
}

Result<PriceTable> ParsePriceTable(std::string_view content, const std::string& source) {
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (content.substr(0, kBom.size()) == kBom) content.remove_prefix(kBom.size());
  auto err = [&](int line, size_t col, const std::string& what) {
    return InvalidArgument(source + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " +
                           what);
  };
  PriceTable t;
  const GpuCatalog& cat = GpuCatalog::Builtin();
  bool header = false;
  int line = 0;
  size_t pos = 0;
  while (pos < content.size()) {
    ++line;
    size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    std::string_view text = content.substr(pos, end - pos);
    pos = end + 1;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (text.empty()) continue;
    const size_t q = text.find('"');
    if (q != std::string_view::npos) return err(line, q + 1, "quotes are not supported");
    if (!header) {
      if (text != "gpu_model,usd_per_hour")
        return err(line, 1, "expected the header 'gpu_model,usd_per_hour'");
      header = true;
      continue;
    }
    const size_t comma = text.find(',');
    if (comma == std::string_view::npos || text.find(',', comma + 1) != std::string_view::npos)
      return err(line, 1, "expected 2 fields: gpu_model,usd_per_hour");
    const std::string model(text.substr(0, comma));
    const std::string_view price_text = text.substr(comma + 1);
    if (!cat.Find(model))
      return err(line, 1,
                 "unknown GPU model " + QuotedValue(model) + " (known: " + cat.KnownNames() + ")");
    if (t.usd_per_gpu_hour.count(model)) return err(line, 1, "GPU model " + model + " given twice");
    auto v = ParseStrictDecimal(price_text);
    if (!v.ok()) return err(line, comma + 2, "column 'usd_per_hour': " + v.status().message());
    if (!(*v > 0 && *v <= 1000))
      return err(line, comma + 2,
                 "column 'usd_per_hour': " + FormatDecimal(*v, 6) + " outside (0, 1000]");
    t.usd_per_gpu_hour[model] = *v;
  }
  if (!header) return err(1, 1, "empty file: expected the header 'gpu_model,usd_per_hour'");
  if (t.usd_per_gpu_hour.empty()) return err(line + 1, 1, "no prices after the header");
  return t;
}

}  // namespace tessera::advisor
