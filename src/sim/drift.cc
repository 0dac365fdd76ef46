#include "sim/drift.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/stats.h"
#include "sim/family.h"
#include "sim/mix_knobs.h"

namespace tessera {

const std::vector<DriftPair>& DefaultDriftPairs() {
  static const std::vector<DriftPair> pairs = {
      {"inference-heavy", "training-heavy"},
      {"training-heavy", "inference-heavy"},
      {"share-only", "whole-only"},
      {"whole-only", "share-only"},
      {"small-shares", "large-shares"},
      {"large-shares", "small-shares"},
      {"unpinned", "pinned-half"},
      {"pinned-half", "unpinned"},
      {"cpu-lean", "cpu-rich"},
      {"cpu-rich", "cpu-lean"},
      {"base", "base"},
  };
  return pairs;
}

std::vector<DriftVariant> DefaultDriftVariants() {
  TesseraConfig never;
  never.mix_window = 0;
  return {{"fgd", "fgd", {}}, {"tessera", "tessera", {}}, {"tessera-window-0", "tessera", never}};
}

std::vector<Workload> ChainWorkloads(const std::vector<Workload>& first,
                                     const std::vector<Workload>& second) {
  std::vector<Workload> out;
  out.reserve(first.size() + second.size());
  SimTime last = 0;
  for (const Workload& w : first) {
    out.push_back(w);
    out.back().name = "a-" + w.name;
    last = std::max(last, w.creation);
  }
  SimTime start = std::numeric_limits<SimTime>::max();
  for (const Workload& w : second) start = std::min(start, w.creation);
  const SimTime shift = second.empty() ? 0 : last + 1 - start;
  for (const Workload& w : second) {
    out.push_back(w);
    Workload& c = out.back();
    c.name = "b-" + w.name;
    c.creation += shift;
    if (c.deletion >= 0) c.deletion += shift;
  }
  return out;
}

namespace {

const FamilyMix* FindMix(const std::string& name) {
  for (const FamilyMix& m : DefaultMixFamily()) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

Result<GeneratedTrace> GenerateMix(const std::string& name, const DriftOptions& o, uint64_t seed) {
  const FamilyMix* mix = FindMix(name);
  if (mix == nullptr) return InvalidArgument("drift: unknown mix '" + name + "'");
  GeneratorConfig config;
  config.num_nodes = o.generated_nodes;
  Status st = ApplyMixFlags(mix->flags, config);
  if (!st.ok()) return Status(st.code(), "mix '" + name + "': " + st.message());
  return Generate(config, seed);
}

// Allocated GPU over [from, to] as % of capacity, and the p95 wait of pods index >= first_b.
void MeasureAfterSwitch(const std::vector<Workload>& pods, const ReplayRun& run, size_t first_b,
                        SimTime from, SimTime to, int64_t capacity_milli, double& alloc_pct,
                        double& wait_p95) {
  double integral = 0;
  std::vector<double> waits;
  for (size_t i = 0; i < pods.size() && i < run.outcomes.size(); ++i) {
    const PodOutcome& o = run.outcomes[i];
    if (o.fate != PodFate::kPlaced) continue;
    if (i >= first_b) waits.push_back(static_cast<double>(o.start - pods[i].creation));
    const double s = static_cast<double>(std::max(o.start, from));
    const double e = static_cast<double>(o.end < 0 ? to : std::min(o.end, to));
    if (e <= s) continue;
    integral += (e - s) * static_cast<double>(pods[i].demand.TotalMilliGpu());
  }
  const double span = static_cast<double>(to - from);
  alloc_pct = span > 0 && capacity_milli > 0
                  ? integral / (span * static_cast<double>(capacity_milli)) * 100.0
                  : 0.0;
  wait_p95 = Quantile(std::move(waits), 0.95);
}

}  // namespace

Result<DriftResult> RunDrift(const DriftPair& pair, const std::vector<DriftVariant>& variants,
                             const DriftOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (variants.empty()) return InvalidArgument("drift: no variants");
  if (o.seeds.empty()) return InvalidArgument("drift: no seeds");
  for (const DriftVariant& v : variants) {
    if (v.policy == "tessera") {
      Status st = v.tessera.Validate();
      if (!st.ok()) return Status(st.code(), "drift variant '" + v.name + "': " + st.message());
    }
  }
  auto a = GenerateMix(pair.from, o, o.gen_seed);
  if (!a.ok()) return a.status();
  auto b = GenerateMix(pair.to, o, o.gen_seed + 1);
  if (!b.ok()) return b.status();
  auto pods = CompressArrivals(ChainWorkloads(a->pods, b->pods), o.time_scale);
  if (!pods.ok()) return pods.status();

  DriftResult r;
  r.pair = pair;
  r.nodes = static_cast<int64_t>(a->nodes.size());
  int64_t capacity_milli = 0;
  for (const NodeSpec& n : a->nodes) {
    r.gpus += n.gpu_count;
    capacity_milli += int64_t{1000} * n.gpu_count;
  }
  r.pods_from = static_cast<int64_t>(a->pods.size());
  r.pods_to = static_cast<int64_t>(b->pods.size());
  const size_t first_b = a->pods.size();
  r.switch_s = first_b < pods->size() ? (*pods)[first_b].creation : 0;

  std::vector<ReplayOptions> options;
  for (const DriftVariant& v : variants) {
    ReplayOptions& ro = options.emplace_back();
    ro.policy = v.policy;
    ro.tessera = v.tessera;
  }
  auto replays = RunReplayVariants(a->nodes, *pods, options, o.seeds, o.threads,
                                   /*keep_outcomes=*/true);
  if (!replays.ok())
    return Status(replays.status().code(),
                  pair.from + " -> " + pair.to + ": " + replays.status().message());

  for (size_t vi = 0; vi < variants.size(); ++vi) {
    DriftVariantResult vr;
    vr.name = variants[vi].name;
    vr.replay = std::move((*replays)[vi]);
    vr.replay.policy = vr.name;
    std::vector<double> changes;
    for (ReplayRun& run : vr.replay.runs) {
      double alloc = 0, p95 = 0;
      MeasureAfterSwitch(*pods, run, first_b, r.switch_s, run.last_arrival, capacity_milli, alloc,
                         p95);
      vr.alloc_after_pct.push_back(alloc);
      vr.wait_p95_after_s.push_back(p95);
      changes.push_back(static_cast<double>(run.mix_changes));
      run.outcomes.clear();
      run.outcomes.shrink_to_fit();
    }
    vr.alloc_after = Stats::Of(vr.alloc_after_pct);
    vr.wait_p95_after = Stats::Of(vr.wait_p95_after_s);
    vr.mix_changes = Stats::Of(std::move(changes));
    r.variants.push_back(std::move(vr));
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string DriftTable(const std::vector<DriftResult>& results) {
  std::string out =
      "| from -> to | variant | alloc % (arrivals) | alloc % after switch | p95 wait s | p95 wait "
      "after switch s | never placed | mix changes |\n|---|---|---:|---:|---:|---:|---:|---:|\n";
  char line[512];
  for (const DriftResult& r : results) {
    for (const DriftVariantResult& v : r.variants) {
      std::snprintf(line, sizeof(line),
                    "| %s -> %s | %s | %.2f ± %.2f | %.2f ± %.2f | %.0f | %.0f | %.1f | %.1f |\n",
                    r.pair.from.c_str(), r.pair.to.c_str(), v.name.c_str(),
                    v.replay.gpu_alloc_arrival_window_pct.mean,
                    v.replay.gpu_alloc_arrival_window_pct.stddev, v.alloc_after.mean,
                    v.alloc_after.stddev, v.replay.wait_p95_s.mean, v.wait_p95_after.mean,
                    v.replay.never_placed.mean, v.mix_changes.mean);
      out += line;
    }
  }
  return out;
}

std::string DriftJson(const std::vector<DriftResult>& results, const DriftOptions& o) {
  nlohmann::json j;
  j["options"] = {{"time_scale", o.time_scale},
                  {"seeds", o.seeds},
                  {"generated_nodes", o.generated_nodes},
                  {"gen_seed", o.gen_seed}};
  j["pairs"] = nlohmann::json::array();
  auto stats = [](const Stats& s) {
    return nlohmann::json{{"mean", s.mean}, {"sd", s.stddev}, {"min", s.min}, {"max", s.max}};
  };
  for (const DriftResult& r : results) {
    nlohmann::json p = {{"from", r.pair.from},
                        {"to", r.pair.to},
                        {"nodes", r.nodes},
                        {"gpus", r.gpus},
                        {"pods_from", r.pods_from},
                        {"pods_to", r.pods_to},
                        {"switch_s", r.switch_s},
                        {"wall_seconds", r.wall_seconds},
                        {"variants", nlohmann::json::object()}};
    for (const DriftVariantResult& v : r.variants) {
      nlohmann::json runs = nlohmann::json::array();
      for (size_t i = 0; i < v.replay.runs.size(); ++i) {
        const ReplayRun& x = v.replay.runs[i];
        runs.push_back({{"seed", x.seed},
                        {"gpu_alloc_arrival_window_pct", x.gpu_alloc_arrival_window_pct},
                        {"gpu_alloc_after_switch_pct", v.alloc_after_pct[i]},
                        {"wait_p95_s", x.wait_p95_s},
                        {"wait_p95_after_switch_s", v.wait_p95_after_s[i]},
                        {"never_placed", x.never_placed},
                        {"mix_changes", x.mix_changes},
                        {"wall_seconds", x.wall_seconds}});
      }
      p["variants"][v.name] = {
          {"gpu_alloc_arrival_window_pct", stats(v.replay.gpu_alloc_arrival_window_pct)},
          {"gpu_alloc_after_switch_pct", stats(v.alloc_after)},
          {"wait_p95_s", stats(v.replay.wait_p95_s)},
          {"wait_p95_after_switch_s", stats(v.wait_p95_after)},
          {"never_placed", stats(v.replay.never_placed)},
          {"mix_changes", stats(v.mix_changes)},
          {"runs", runs}};
    }
    j["pairs"].push_back(std::move(p));
  }
  return j.dump(2) + "\n";
}

}  // namespace tessera
