#include "advisor/prometheus.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "advisor/numbers.h"
#include "core/text.h"

namespace tessera::advisor {

const char* DcgmFieldName(DcgmField f) {
  switch (f) {
    case DcgmField::kFbUsedMib:
      return "DCGM_FI_DEV_FB_USED";
    case DcgmField::kSmActive:
      return "DCGM_FI_PROF_SM_ACTIVE";
    case DcgmField::kGrEngineActive:
      return "DCGM_FI_PROF_GR_ENGINE_ACTIVE";
    case DcgmField::kGpuUtil:
      return "DCGM_FI_DEV_GPU_UTIL";
    case DcgmField::kAgentPodMemoryMib:
      return "tessera_agent_pod_gpu_memory_used_bytes";
    case DcgmField::kPodAllocatedGpus:
      return "tessera_pod_allocated_gpus";
    case DcgmField::kAllocatedRatio:
      return "tessera_gpu_allocated_ratio";
  }
  return "?";
}

namespace {

using nlohmann::json;

bool FieldByName(const std::string& name, DcgmField& out) {
  for (DcgmField f : {DcgmField::kFbUsedMib, DcgmField::kSmActive, DcgmField::kGrEngineActive,
                      DcgmField::kGpuUtil, DcgmField::kAgentPodMemoryMib,
                      DcgmField::kPodAllocatedGpus, DcgmField::kAllocatedRatio})
    if (name == DcgmFieldName(f)) {
      out = f;
      return true;
    }
  return false;
}

struct Ctx {
  const std::string& source;
  Status Err(const std::string& path, const std::string& what) const {
    return InvalidArgument(source + ": " + path + ": " + what);
  }
};

// The label's string value, "" when absent; an error when present but not a string.
Result<std::string> Label(const Ctx& c, const json& metric, const std::string& path,
                          const char* name) {
  auto it = metric.find(name);
  if (it == metric.end()) return std::string();
  if (!it->is_string()) return c.Err(path + "." + name, "label value is not a string");
  return it->get<std::string>();
}

// Whether a series of field f is read for this label: DCGM's labels for DCGM series, the node
// agent's (node, gpu, gpu_uuid, mig_instance) for its series, the scheduler's (queue, model, kind)
// for its; the workload labels for all.
bool LabelApplies(DcgmField f, std::string_view label) {
  if (label == "pod" || label == "namespace" || label == "container") return true;
  const int family = f == DcgmField::kAgentPodMemoryMib                                     ? 1
                     : f == DcgmField::kPodAllocatedGpus || f == DcgmField::kAllocatedRatio ? 2
                                                                                            : 0;
  if (label == "gpu") return family != 2;
  if (label == "node" || label == "gpu_uuid" || label == "mig_instance") return family == 1;
  if (label == "queue" || label == "model" || label == "kind") return family == 2;
  return family == 0;
}

}  // namespace

Result<PromRange> ParsePrometheusRange(std::string_view text, const std::string& source,
                                       const std::string& metric_name) {
  const Ctx c{source};
  if (text.size() > kMaxPromResponseBytes)
    return InvalidArgument(source + ": response larger than the " +
                           std::to_string(kMaxPromResponseBytes >> 20) + " MiB limit");
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    return InvalidArgument(source + ":" + std::to_string(e.byte) + ": JSON syntax error");
  } catch (const json::exception&) {
    return InvalidArgument(source + ": a JSON number is out of range");
  }
  if (!doc.is_object()) return c.Err("$", "expected an object");
  auto status = doc.find("status");
  if (status == doc.end() || !status->is_string())
    return c.Err("status", "missing or not a string");
  if (*status == "error") {
    auto type = doc.find("errorType");
    auto msg = doc.find("error");
    return Unavailable(source + ": Prometheus error " +
                       (type != doc.end() && type->is_string() ? type->get<std::string>() : "?") +
                       ": " +
                       (msg != doc.end() && msg->is_string() ? QuotedValue(msg->get<std::string>())
                                                             : "(no message)"));
  }
  if (*status != "success")
    return c.Err("status",
                 QuotedValue(status->get<std::string>()) + " is neither success nor error");
  PromRange out;
  if (auto w = doc.find("warnings"); w != doc.end()) {
    if (!w->is_array()) return c.Err("warnings", "not an array");
    for (const json& x : *w)
      if (x.is_string()) out.warnings.push_back(x.get<std::string>());
  }
  auto data = doc.find("data");
  if (data == doc.end() || !data->is_object()) return c.Err("data", "missing or not an object");
  auto type = data->find("resultType");
  if (type == data->end() || !type->is_string())
    return c.Err("data.resultType", "missing or not a string");
  if (*type != "matrix")
    return c.Err("data.resultType", QuotedValue(type->get<std::string>()) +
                                        " is not \"matrix\" (use /api/v1/query_range)");
  auto result = data->find("result");
  if (result == data->end() || !result->is_array())
    return c.Err("data.result", "missing or not an array");
  for (size_t i = 0; i < result->size(); ++i) {
    const json& r = (*result)[i];
    const std::string path = "data.result[" + std::to_string(i) + "]";
    if (!r.is_object()) return c.Err(path, "not an object");
    auto metric = r.find("metric");
    if (metric == r.end() || !metric->is_object())
      return c.Err(path + ".metric", "missing or not an object");
    const std::string mpath = path + ".metric";
    PromSeries s;
    auto name = Label(c, *metric, mpath, "__name__");
    if (!name.ok()) return name.status();
    const std::string series_name = name->empty() ? metric_name : *name;
    if (series_name.empty()) return c.Err(mpath, "no __name__ label and no metric name given");
    if (!FieldByName(series_name, s.field))
      return c.Err(mpath, "unsupported series " + QuotedValue(series_name) +
                              " (DCGM_FI_DEV_FB_USED, DCGM_FI_PROF_SM_ACTIVE, "
                              "DCGM_FI_PROF_GR_ENGINE_ACTIVE, DCGM_FI_DEV_GPU_UTIL, "
                              "tessera_agent_pod_gpu_memory_used_bytes, "
                              "tessera_pod_allocated_gpus, tessera_gpu_allocated_ratio)");
    auto upper = Label(c, *metric, mpath, "Hostname");
    auto lower = Label(c, *metric, mpath, "hostname");
    if (!upper.ok()) return upper.status();
    if (!lower.ok()) return lower.status();
    if (!upper->empty() && !lower->empty() && *upper != *lower)
      return c.Err(mpath, "Hostname " + QuotedValue(*upper) + " and hostname " +
                              QuotedValue(*lower) + " disagree");
    if (LabelApplies(s.field, "Hostname")) s.hostname = upper->empty() ? *lower : *upper;
    struct Bind {
      std::string* dst;
      const char* label;
      const char* exported;
    };
    for (const Bind& b :
         {Bind{&s.gpu, "gpu", nullptr}, Bind{&s.uuid, "UUID", nullptr},
          Bind{&s.model_name, "modelName", nullptr}, Bind{&s.mig_profile, "GPU_I_PROFILE", nullptr},
          Bind{&s.mig_instance, "GPU_I_ID", nullptr}, Bind{&s.pod, "pod", "exported_pod"},
          Bind{&s.ns, "namespace", "exported_namespace"},
          Bind{&s.container, "container", "exported_container"}, Bind{&s.hostname, "node", nullptr},
          Bind{&s.uuid, "gpu_uuid", nullptr}, Bind{&s.mig_instance, "mig_instance", nullptr},
          Bind{&s.queue, "queue", nullptr}, Bind{&s.model_name, "model", nullptr},
          Bind{&s.kind, "kind", nullptr}}) {
      if (!LabelApplies(s.field, b.label)) continue;
      auto v = Label(c, *metric, mpath, b.label);
      if (!v.ok()) return v.status();
      *b.dst = *v;
      if (b.exported) {
        auto e = Label(c, *metric, mpath, b.exported);
        if (!e.ok()) return e.status();
        if (!e->empty()) *b.dst = *e;
      }
    }
    if (s.field == DcgmField::kAgentPodMemoryMib && !s.mig_instance.empty())
      s.mig_profile = s.mig_instance.substr(0, s.mig_instance.find('@'));
    const bool gpu_series =
        s.field != DcgmField::kPodAllocatedGpus && s.field != DcgmField::kAllocatedRatio;
    if (s.field == DcgmField::kPodAllocatedGpus && (s.pod.empty() || s.model_name.empty()))
      return c.Err(mpath, "no pod or model label");
    if (gpu_series && s.hostname.empty() && s.uuid.empty())
      return c.Err(mpath, "neither Hostname/hostname nor UUID: the GPU cannot be identified");
    auto values = r.find("values");
    if (values == r.end() || !values->is_array())
      return c.Err(path + ".values", "missing or not an array (a range query gives \"values\")");
    for (size_t k = 0; k < values->size(); ++k) {
      const json& v = (*values)[k];
      const std::string vpath = path + ".values[" + std::to_string(k) + "]";
      if (!v.is_array() || v.size() != 2) return c.Err(vpath, "expected [timestamp, \"value\"]");
      if (!v[0].is_number()) return c.Err(vpath + "[0]", "timestamp is not a number");
      const double t = v[0].get<double>();
      if (!std::isfinite(t) || t < 0)
        return c.Err(vpath + "[0]", "timestamp is not finite and >= 0");
      if (!v[1].is_string()) return c.Err(vpath + "[1]", "sample value is not a string");
      const std::string sv = v[1].get<std::string>();
      if (sv == "NaN" || sv == "+Inf" || sv == "-Inf") {
        ++s.skipped_non_finite;
        ++out.skipped_non_finite;
        continue;
      }
      auto num = ParseStrictDecimal(sv);
      if (!num.ok()) return c.Err(vpath + "[1]", num.status().message());
      if (!s.samples.empty() && t <= s.samples.back().t_s)
        return c.Err(vpath + "[0]",
                     "timestamp " + FormatDecimal(t, 3) + " is not after the previous sample");
      double value = *num;
      double hi = 0;
      switch (s.field) {
        case DcgmField::kFbUsedMib:
          hi = 16.0 * 1024 * 1024;  // 16 TiB: beyond any GPU
          break;
        case DcgmField::kGpuUtil:
          hi = 100;
          break;
        case DcgmField::kAgentPodMemoryMib:
          hi = 16.0 * 1024 * 1024 * 1024 * 1024;
          break;
        case DcgmField::kPodAllocatedGpus:
          hi = 1024;
          break;
        default:
          hi = 1;
          break;
      }
      if (value < 0 || value > hi)
        return c.Err(vpath + "[1]",
                     sv + " outside 0.." + FormatDecimal(hi, 0) + " for " + DcgmFieldName(s.field));
      if (s.field == DcgmField::kGpuUtil) value /= 100.0;
      if (s.field == DcgmField::kAgentPodMemoryMib) value /= 1024.0 * 1024.0;
      s.samples.push_back({t, value});
    }
    out.series.push_back(std::move(s));
  }
  return out;
}

}  // namespace tessera::advisor
