#include "apps/tessera/demo_metrics.h"

#include <algorithm>
#include <cstdio>
#include <tuple>
#include <utility>

#include "cluster/gpu_catalog.h"

namespace tessera {
namespace {

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string Num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string ModelName(GpuModelId m) {
  return m == kNoGpuModel ? "none" : GpuCatalog::Builtin().Get(m).name;
}

void Family(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

DemoMetrics::DemoMetrics(std::vector<NodeSpec> nodes, int64_t experiments_planned)
    : nodes_(std::move(nodes)), planned_(experiments_planned) {}

void DemoMetrics::Record(const FillRun& run) {
  FillRun copy = run;
  std::lock_guard<std::mutex> l(mu_);
  runs_.push_back(std::move(copy));
}

void DemoMetrics::SetRunning(bool running) {
  std::lock_guard<std::mutex> l(mu_);
  running_ = running;
}

std::string DemoMetrics::Exposition() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<const FillRun*> runs;
  for (const FillRun& r : runs_) runs.push_back(&r);
  std::sort(runs.begin(), runs.end(), [](const FillRun* a, const FillRun* b) {
    return std::tie(a->policy, a->seed) < std::tie(b->policy, b->seed);
  });
  auto run_labels = [](const FillRun& r) {
    return "policy=\"" + Escape(r.policy) + "\",seed=\"" + std::to_string(r.seed) + "\"";
  };
  std::string out;
  Family(out, "tessera_demo_running", "gauge", "1 while the demo's experiments run, then 0.");
  out += std::string("tessera_demo_running ") + (running_ ? "1" : "0") + "\n";
  Family(out, "tessera_demo_experiments_planned", "gauge", "Policy x seed runs of this demo.");
  out += "tessera_demo_experiments_planned " + std::to_string(planned_) + "\n";
  Family(out, "tessera_demo_experiments_completed_total", "counter", "Runs ended so far.");
  out += "tessera_demo_experiments_completed_total " + std::to_string(runs_.size()) + "\n";

  std::map<std::string, int64_t> capacity;
  for (const NodeSpec& n : nodes_)
    if (n.gpu_count > 0) capacity[ModelName(n.model)] += n.gpu_count;
  Family(out, "tessera_demo_gpus", "gauge", "GPUs of the generated cluster, per GPU model.");
  for (const auto& [model, gpus] : capacity)
    out += "tessera_demo_gpus{model=\"" + Escape(model) + "\"} " + std::to_string(gpus) + "\n";

  Family(out, "tessera_demo_gpu_allocated_gpus", "gauge",
         "GPUs held at the end of a run, per GPU model and slice kind (exclusive or share).");
  for (const FillRun* r : runs) {
    if (!r->detail) continue;
    std::map<std::pair<std::string, std::string>, int64_t> held;
    for (size_t n = 0; n < r->detail->node_held_milli.size() && n < nodes_.size(); ++n)
      for (const auto& [kind, milli] : r->detail->node_held_milli[n])
        held[{ModelName(nodes_[n].model), kind}] += milli;
    for (const auto& [key, milli] : held)
      out += "tessera_demo_gpu_allocated_gpus{" + run_labels(*r) + ",model=\"" + Escape(key.first) +
             "\",kind=\"" + key.second + "\"} " + Num(milli / 1000.0) + "\n";
  }
  Family(out, "tessera_demo_node_gpu_allocated_gpus", "gauge",
         "GPUs held at the end of a run, per node and slice kind (nodes holding none are left "
         "out).");
  for (const FillRun* r : runs) {
    if (!r->detail) continue;
    for (size_t n = 0; n < r->detail->node_held_milli.size() && n < nodes_.size(); ++n)
      for (const auto& [kind, milli] : r->detail->node_held_milli[n])
        out += "tessera_demo_node_gpu_allocated_gpus{" + run_labels(*r) + ",node=\"" +
               Escape(nodes_[n].name) + "\",model=\"" + Escape(ModelName(nodes_[n].model)) +
               "\",kind=\"" + kind + "\"} " + Num(milli / 1000.0) + "\n";
  }
  Family(out, "tessera_demo_gpu_unallocated_ratio", "gauge",
         "Unallocated share of the GPU capacity when arrivals reach 100% of it and at the end "
         "of a run.");
  for (const FillRun* r : runs) {
    out += "tessera_demo_gpu_unallocated_ratio{" + run_labels(*r) + ",stage=\"arrival_100pct\"} " +
           Num(r->unalloc_pct_at_100 / 100) + "\n";
    out += "tessera_demo_gpu_unallocated_ratio{" + run_labels(*r) + ",stage=\"end\"} " +
           Num(r->unalloc_pct_at_130 / 100) + "\n";
  }
  Family(out, "tessera_demo_gpu_fragmentation_ratio", "gauge",
         "Fragmented share of the idle GPU capacity (FGD measure: idle GPU no typical pod can "
         "use) at 90% arrival and at the end of a run.");
  for (const FillRun* r : runs) {
    out += "tessera_demo_gpu_fragmentation_ratio{" + run_labels(*r) + ",stage=\"arrival_90pct\"} " +
           Num(r->frag_ratio_at_90 / 100) + "\n";
    out += "tessera_demo_gpu_fragmentation_ratio{" + run_labels(*r) + ",stage=\"end\"} " +
           Num(r->frag_ratio_pct[kArrivalBuckets - 1] / 100) + "\n";
  }
  Family(out, "tessera_demo_pods_placed_total", "counter", "Pods placed in a run.");
  for (const FillRun* r : runs)
    out += "tessera_demo_pods_placed_total{" + run_labels(*r) + "} " + std::to_string(r->placed) +
           "\n";
  Family(out, "tessera_demo_pods_not_placed_total", "counter",
         "Pods not placed in a run, by the filter check that the most nodes failed.");
  for (const FillRun* r : runs) {
    if (!r->detail) continue;
    for (const auto& [reason, n] : r->detail->not_placed)
      out += "tessera_demo_pods_not_placed_total{" + run_labels(*r) + ",reason=\"" + reason +
             "\"} " + std::to_string(n) + "\n";
  }
  Family(out, "tessera_demo_scheduling_decisions_total", "counter",
         "Scheduling decisions made in a run (one per arriving pod).");
  for (const FillRun* r : runs)
    out += "tessera_demo_scheduling_decisions_total{" + run_labels(*r) + "} " +
           std::to_string(r->decisions) + "\n";
  Family(out, "tessera_demo_decision_duration_seconds", "histogram",
         "Wall time of one scheduling decision.");
  for (const FillRun* r : runs) {
    if (!r->detail) continue;
    const std::string labels = run_labels(*r);
    int64_t cumulative = 0;
    for (size_t b = 0; b < kDecisionLatencyBounds.size(); ++b) {
      cumulative += r->detail->latency_count[b];
      out += "tessera_demo_decision_duration_seconds_bucket{" + labels + ",le=\"" +
             Num(kDecisionLatencyBounds[b]) + "\"} " + std::to_string(cumulative) + "\n";
    }
    cumulative += r->detail->latency_count.back();
    out += "tessera_demo_decision_duration_seconds_bucket{" + labels + ",le=\"+Inf\"} " +
           std::to_string(cumulative) + "\n";
    out += "tessera_demo_decision_duration_seconds_sum{" + labels + "} " +
           Num(r->detail->latency_sum_seconds) + "\n";
    out += "tessera_demo_decision_duration_seconds_count{" + labels + "} " +
           std::to_string(cumulative) + "\n";
  }
  return out;
}

}  // namespace tessera
