#include "advisor/report.h"

#include <nlohmann/json.hpp>

#include "advisor/numbers.h"
#include "core/text.h"

namespace tessera::advisor {
namespace {

using nlohmann::json;

std::string RequestText(const Recommendation& r) {
  return r.requested.Describe();
}

json SliceJson(const Slice& s) {
  json j;
  j["slice"] = SliceTypeName(s.type);
  j["model"] = s.model;
  if (s.type == SliceType::kMig) j["mig_profile"] = s.mig_profile;
  if (s.type == SliceType::kWhole) j["gpus"] = s.whole_gpus;
  if (s.type == SliceType::kMps) j["thread_pct"] = s.thread_pct;
  if (s.type != SliceType::kRelease) j["memory_mib"] = s.memory_mib;
  j["gpu_fraction"] = std::round(s.gpu_fraction * 1e4) / 1e4;
  return j;
}

json StatsJson(const UsageStats& s, double scale) {
  return {{"peak", s.peak * scale},
          {"p50", s.p50 * scale},
          {"p95", s.p95 * scale},
          {"p99", s.p99 * scale}};
}

double R4(double v) {
  return std::round(v * 1e4) / 1e4;
}

const char* ApiVersion(const std::string& kind) {
  if (kind == "Deployment" || kind == "StatefulSet") return "apps/v1";
  if (kind == "Job") return "batch/v1";
  if (kind == "JobSet") return "jobset.x-k8s.io/v1alpha2";
  if (kind == "Pod") return "v1";
  return nullptr;
}

std::string YamlSingleQuoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

}  // namespace

std::string ReportTable(const AdvisorReport& r) {
  std::string out =
      Printf("%-44s %-10s %-24s %15s %6s %15s %-30s %8s  %s\n", "WORKLOAD", "MODEL", "REQUEST",
             "MEM PEAK/P95", "SM95", "PREDICTED", "RECOMMEND", "SAVE$/H", "STATE");
  for (const Recommendation& x : r.items) {
    const std::string mem = FormatDecimal(x.memory_mib.peak / 1024, 1) + "/" +
                            FormatDecimal(x.memory_mib.p95 / 1024, 1) + "G";
    const std::string pred = x.state == AdviceState::kOk
                                 ? FormatDecimal(x.predicted_memory_mib / 1024, 1) + "G " +
                                       FormatDecimal(x.predicted_compute * 100, 0) + "%"
                                 : "-";
    const std::string rec = x.keep ? "keep" : x.recommended.Describe();
    out += Printf("%-44s %-10s %-24s %15s %5s%% %15s %-30s %8s  %s\n", x.key.c_str(),
                  x.model.c_str(), RequestText(x).c_str(), mem.c_str(),
                  FormatDecimal(x.compute.p95 * 100, 0).c_str(), pred.c_str(), rec.c_str(),
                  FormatDecimal(x.cost_requested_per_hour - x.cost_recommended_per_hour, 2).c_str(),
                  AdviceStateName(x.state));
    out += "    " + x.reason + "\n";
  }
  out += Printf(
      "\n%zu workloads: %d resized, %d idle, %d history too short, %d attribution impossible\n",
      r.items.size(), r.resized, r.idle, r.too_short, r.unattributed);
  out += "GPUs requested " + FormatDecimal(r.gpus_requested, 2) + ", recommended " +
         FormatDecimal(r.gpus_recommended, 2) + ", freed " + FormatDecimal(r.gpus_freed, 2) +
         "; cost $" + FormatDecimal(r.cost_requested_per_hour, 2) + "/h -> $" +
         FormatDecimal(r.cost_recommended_per_hour, 2) + "/h, saving $" +
         FormatDecimal(r.savings_per_hour, 2) + "/h ($" +
         FormatDecimal(r.savings_per_hour * 24 * 30, 0) + " per 30 days)\n";
  return out;
}

std::string RecommendationAnnotation(const Recommendation& rec) {
  json j = SliceJson(rec.recommended);
  j["predicted_memory_mib"] = std::round(rec.predicted_memory_mib);
  j["predicted_compute"] = R4(rec.predicted_compute);
  return j.dump();
}

std::string ReportJson(const AdvisorReport& r) {
  json j;
  j["window"] = {{"start_s", r.window_start}, {"end_s", r.window_end}};
  j["totals"] = {{"workloads", r.items.size()},
                 {"resized", r.resized},
                 {"idle", r.idle},
                 {"history_too_short", r.too_short},
                 {"attribution_impossible", r.unattributed},
                 {"gpus_requested", R4(r.gpus_requested)},
                 {"gpus_recommended", R4(r.gpus_recommended)},
                 {"gpus_freed", R4(r.gpus_freed)},
                 {"cost_requested_per_hour", R4(r.cost_requested_per_hour)},
                 {"cost_recommended_per_hour", R4(r.cost_recommended_per_hour)},
                 {"savings_per_hour", R4(r.savings_per_hour)}};
  json items = json::array();
  for (const Recommendation& x : r.items) {
    json w;
    w["key"] = x.key;
    w["namespace"] = x.ns;
    w["owner_kind"] = x.owner_kind;
    w["owner"] = x.owner;
    w["gpu_model"] = x.model;
    w["state"] = AdviceStateName(x.state);
    w["pods"] = x.pods;
    w["samples"] = x.samples;
    w["covered_s"] = x.covered_s;
    w["memory_mib"] = StatsJson(x.memory_mib, 1);
    w["compute"] = StatsJson(x.compute, 1);
    w["predicted_memory_mib"] = R4(x.predicted_memory_mib);
    w["predicted_compute"] = R4(x.predicted_compute);
    w["memory_trend_mib_per_period"] = R4(x.memory_trend_per_period);
    w["idle"] = x.idle;
    w["keep"] = x.keep;
    w["requested"] = SliceJson(x.requested);
    w["recommended"] = SliceJson(x.recommended);
    w["cost_requested_per_hour"] = R4(x.cost_requested_per_hour);
    w["cost_recommended_per_hour"] = R4(x.cost_recommended_per_hour);
    w["reason"] = x.reason;
    items.push_back(std::move(w));
  }
  j["workloads"] = std::move(items);
  return j.dump(2) + "\n";
}

std::string ReportPatches(const AdvisorReport& r) {
  std::string out;
  for (const Recommendation& x : r.items) {
    if (x.keep || x.state != AdviceState::kOk) continue;
    const char* api = ApiVersion(x.owner_kind);
    if (!api) {
      out += "# " + x.owner_kind + " " + x.ns + "/" + x.owner + ": annotate its pods with " +
             kRecommendationAnnotation + ": " + RecommendationAnnotation(x) + "\n";
      continue;
    }
    const std::string annotations =
        std::string(kRecommendationAnnotation) + ": " +
        YamlSingleQuoted(RecommendationAnnotation(x)) +
        "\n    tessera.io/rightsize-reason: " + YamlSingleQuoted(x.reason) + "\n";
    out += "---\napiVersion: " + std::string(api) + "\nkind: " + x.owner_kind +
           "\nmetadata:\n  name: " + x.owner + "\n  namespace: " + x.ns + "\n  annotations:\n    " +
           annotations;
    // The scheduler reads the recommendation from the pod: a Deployment's or StatefulSet's pod
    // template carries it to new pods (a rollout). Job templates are immutable once created.
    if (x.owner_kind == "Deployment" || x.owner_kind == "StatefulSet") {
      std::string indented;
      for (size_t i = 0; i < annotations.size(); ++i) {
        indented += annotations[i];
        if (annotations[i] == '\n' && i + 1 < annotations.size()) indented += "    ";
      }
      out += "spec:\n  template:\n    metadata:\n      annotations:\n        " + indented;
    }
  }
  if (out.empty()) out = "# no resized owners\n";
  return out;
}

}  // namespace tessera::advisor
