// The sharing simulation's report: the comparison table and the JSON document.
#include <cstdio>
#include <functional>

#include <nlohmann/json.hpp>

#include "sim/sharing_sim.h"

namespace tessera {
namespace {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string SharingTable(const SharingScenario& scenario, uint64_t seed,
                         const std::vector<SharingMetrics>& results) {
  std::string out;
  const int64_t arrived = results.empty() ? 0 : results.front().workloads;
  out += "scenario " + scenario.name + ", seed " + std::to_string(seed) + ": " +
         std::to_string(SharingNodeSpecs(scenario).size()) + " nodes, " +
         std::to_string(SharingGpuCount(scenario)) + " GPUs, " + std::to_string(arrived) +
         " workloads over " + std::to_string(scenario.horizon_s) +
         " s (timeslice N=" + std::to_string(scenario.timeslice_replicas) +
         ", mps N=" + std::to_string(scenario.mps_clients) +
         (scenario.tessera_protection == "on" ? ", tessera node protection on" : "") + ")\n";
  auto row = [&](const std::string& label,
                 const std::function<std::string(const SharingMetrics&)>& f) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%-24s", label.c_str());
    out += buf;
    for (const SharingMetrics& m : results) {
      std::snprintf(buf, sizeof buf, " %11s", f(m).c_str());
      out += buf;
    }
    out += "\n";
  };
  row("", [](const SharingMetrics& m) { return m.strategy; });
  out += std::string(24 + 12 * results.size(), '-') + "\n";
  auto count = [](int64_t v) { return std::to_string(v); };
  row("placed", [&](const SharingMetrics& m) { return count(m.placed); });
  row("placed %", [&](const SharingMetrics& m) {
    return Fixed(m.workloads ? 100.0 * static_cast<double>(m.placed) / m.workloads : 0, 1);
  });
  row("abandoned", [&](const SharingMetrics& m) { return count(m.abandoned); });
  row("never placed", [&](const SharingMetrics& m) { return count(m.never_placed); });
  row("wait p50 s", [](const SharingMetrics& m) { return Fixed(m.p50_wait_s, 0); });
  row("wait p95 s", [](const SharingMetrics& m) { return Fixed(m.p95_wait_s, 0); });
  row("wait p99 s", [](const SharingMetrics& m) { return Fixed(m.p99_wait_s, 0); });
  row("GPUs busy (avg)", [](const SharingMetrics& m) { return Fixed(m.gpus_busy_avg, 1); });
  row("GPU busy %", [](const SharingMetrics& m) { return Fixed(m.gpu_busy_pct, 1); });
  row("isolation violations",
      [&](const SharingMetrics& m) { return count(m.isolation_violations); });
  row("memory oversubscribed",
      [&](const SharingMetrics& m) { return count(m.memory_oversubscribed); });
  row("MIG reconfigurations", [&](const SharingMetrics& m) { return count(m.reconfigurations); });
  row("  MIG on/off/re-layout", [&](const SharingMetrics& m) {
    return count(m.mig_enabled) + "/" + count(m.mig_disabled) + "/" + count(m.mig_relayouts);
  });
  row("  free instances destroyed",
      [&](const SharingMetrics& m) { return count(m.mig_instances_destroyed); });
  row("disturbed", [&](const SharingMetrics& m) { return count(m.disturbed); });
  if (SharingPreemption(scenario)) {
    row("preempted", [&](const SharingMetrics& m) { return count(m.preemptions); });
    row("  never placed again",
        [&](const SharingMetrics& m) { return count(m.preempted_not_replaced); });
  }
  for (size_t c = 0; c < scenario.classes.size(); ++c) {
    row("placed " + scenario.classes[c].name, [&](const SharingMetrics& m) {
      return c < m.placed_by_class.size()
                 ? count(m.placed_by_class[c]) + "/" + count(m.arrived_by_class[c])
                 : std::string("-");
    });
  }
  for (const SharingMetrics& m : results) {
    if (!m.explanations.empty()) {
      out += "\n" + m.strategy + " placements (first of each kind):\n";
      for (const std::string& e : m.explanations) out += "  " + e + "\n";
    }
    if (!m.reconfiguration_reasons.empty()) {
      out += m.strategy + " MIG reconfigurations (first " +
             std::to_string(m.reconfiguration_reasons.size()) + " of " +
             std::to_string(m.reconfigurations) + "):\n";
      for (const std::string& r : m.reconfiguration_reasons) out += "  " + r + "\n";
    }
  }
  return out;
}

std::string SharingJson(const SharingScenario& scenario, uint64_t seed,
                        const std::vector<SharingMetrics>& results) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["scenario"] = scenario.name;
  j["seed"] = seed;
  j["horizon_s"] = scenario.horizon_s;
  j["nodes"] = SharingNodeSpecs(scenario).size();
  j["gpus"] = SharingGpuCount(scenario);
  j["timeslice_replicas"] = scenario.timeslice_replicas;
  j["mps_clients"] = scenario.mps_clients;
  j["tessera_protection"] = scenario.tessera_protection;
  ordered_json strategies = ordered_json::object();
  for (const SharingMetrics& m : results) {
    ordered_json o;
    o["workloads"] = m.workloads;
    o["placed"] = m.placed;
    o["abandoned"] = m.abandoned;
    o["never_placed"] = m.never_placed;
    o["p50_wait_s"] = m.p50_wait_s;
    o["p95_wait_s"] = m.p95_wait_s;
    o["p99_wait_s"] = m.p99_wait_s;
    o["mean_wait_s"] = m.mean_wait_s;
    o["gpus_busy_avg"] = m.gpus_busy_avg;
    o["gpu_busy_pct"] = m.gpu_busy_pct;
    o["isolation_violations"] = m.isolation_violations;
    o["memory_oversubscribed"] = m.memory_oversubscribed;
    o["reconfigurations"] = m.reconfigurations;
    o["disturbed"] = m.disturbed;
    o["mig_enabled"] = m.mig_enabled;
    o["mig_disabled"] = m.mig_disabled;
    o["mig_relayouts"] = m.mig_relayouts;
    o["mig_instances_destroyed"] = m.mig_instances_destroyed;
    o["preemptions"] = m.preemptions;
    o["preempted_not_replaced"] = m.preempted_not_replaced;
    ordered_json by_class = ordered_json::object();
    for (size_t c = 0; c < scenario.classes.size() && c < m.placed_by_class.size(); ++c)
      by_class[scenario.classes[c].name] = {{"arrived", m.arrived_by_class[c]},
                                            {"placed", m.placed_by_class[c]}};
    o["by_class"] = by_class;
    ordered_json by_kind = ordered_json::object();
    for (const auto& [k, v] : m.placed_by_kind) by_kind[k] = v;
    o["placed_by_kind"] = by_kind;
    o["explanations"] = m.explanations;
    o["reconfiguration_reasons"] = m.reconfiguration_reasons;
    strategies[m.strategy] = o;
  }
  j["strategies"] = strategies;
  return j.dump(2) + "\n";
}

}  // namespace tessera
