// `tessera demo` and `tessera generate`, both registered by AddDemoCommand.
//
//   tessera demo [--seeds 42-46] [--plot FILE.svg] [--json FILE] [--nodes N] [--gen-seed S]
//                [--policies LIST] [--threads T] [--metrics-listen HOST:PORT [--metrics-hold S]]
//     Generates the default cluster and workload (sim/generator.h), runs the fill protocol
//     (sim/fill.h) for every policy and seed, and prints a one-screen report: the cluster, the
//     workload mix, one row per policy and conclusions computed from the numbers against
//     bestfit, the stand-in for the Kubernetes default scheduler. Optional SVG plot and JSON
//     are written atomically. With --metrics-listen, GET /metrics (demo_metrics.h) and /healthz
//     are served while the experiments run and for --metrics-hold seconds after the report
//     (SIGINT or SIGTERM ends the hold early); an empty HOST is 127.0.0.1. The report and the
//     files are the same with or without it.
//   tessera generate --out-dir DIR [--nodes N] [--seed S] [mix knobs]
//     Writes the same cluster and workload as DIR/nodes.csv and DIR/pods.csv, readable by
//     `tessera sim fill` and `tessera sim replay`. The mix knobs (sim/mix_knobs.h:
//     --cpu-only-fraction, --share-fraction, --whole-fraction, --multi-gpu-fraction,
//     --share-sizes, --multi-gpu-counts, --pinned-fraction, --cpu-per-gpu-scale,
//     --memory-per-gpu-scale) change the workload; the cluster stays the default one.
// Both exit 0 on success and 1 with a message on stderr otherwise.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <tuple>

#include <httplib.h>

#include "apps/tessera/cli_util.h"
#include "apps/tessera/commands.h"
#include "apps/tessera/demo_metrics.h"
#include "core/text.h"
#include "net/http_server.h"
#include "policies/builtin.h"
#include "sim/fill.h"
#include "sim/generator.h"
#include "sim/mix_knobs.h"
#include "sim/report.h"

namespace tessera {
namespace {

constexpr const char* kBaseline = "bestfit";
constexpr const char* kAllPolicies = "random,dotprod,clustering,packing,bestfit,fgd,tessera";

// Cluster size bounds of --nodes (demo and generate).
constexpr int64_t kMinNodes = 1, kMaxNodes = 100000;

struct DemoArgs {
  std::string seeds = "42-46";
  std::string plot, json;
  std::string policies = kAllPolicies;
  std::string nodes = std::to_string(GeneratorConfig{}.num_nodes);
  std::string gen_seed = std::to_string(kDefaultGeneratorSeed);
  std::string threads = "2";
  std::string metrics_listen;  // empty: no /metrics
  std::string metrics_hold = "0";
};

struct GenerateArgs {
  std::string out_dir;
  std::string nodes = std::to_string(GeneratorConfig{}.num_nodes);
  std::string seed = std::to_string(kDefaultGeneratorSeed);
  MixFlags mix;
};

// Wraps `text` at `width` columns as a bullet: "  - " on the first line, 4 spaces after.
std::string Bullet(const std::string& text, size_t width = 100) {
  std::string out, line;
  std::stringstream ss(text);
  std::string word;
  while (ss >> word) {
    if (!line.empty() && 4 + line.size() + 1 + word.size() > width) {
      out += (out.empty() ? "  - " : "    ") + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += (out.empty() ? "  - " : "    ") + line + "\n";
  return out;
}

std::string Thousands(int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(i, ",");
  return v < 0 ? "-" + s : s;
}

double Pct(int64_t part, int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

int64_t Gpus(double pct, int64_t total_gpus) {
  return std::llround(pct * static_cast<double>(total_gpus) / 100.0);
}

std::string ClusterSection(const std::vector<NodeSpec>& nodes) {
  using Shape = std::tuple<GpuModelId, int, int64_t, int64_t>;
  std::vector<Shape> order;
  std::map<Shape, int64_t> count;
  int64_t gpus = 0;
  for (const NodeSpec& n : nodes) {
    const Shape s{n.model, n.gpu_count, n.cpu.v, n.memory.v};
    if (count[s]++ == 0) order.push_back(s);
    gpus += n.gpu_count;
  }
  std::map<GpuModelId, int64_t> model_gpus;
  for (const Shape& s : order) model_gpus[std::get<0>(s)] += count[s] * std::get<1>(s);
  std::stable_sort(order.begin(), order.end(), [&](const Shape& a, const Shape& b) {
    const int64_t ma = model_gpus[std::get<0>(a)], mb = model_gpus[std::get<0>(b)];
    if (ma != mb) return ma > mb;
    if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) < std::get<0>(b);
    return count[a] * std::get<1>(a) > count[b] * std::get<1>(b);
  });
  const GpuCatalog& cat = GpuCatalog::Builtin();
  std::string out = "Cluster: " + Thousands(static_cast<int64_t>(nodes.size())) + " nodes, " +
                    Thousands(gpus) + " GPUs\n";
  out += Printf("  %-10s %6s %6s   %s\n", "GPU model", "nodes", "GPUs", "each node");
  for (const Shape& s : order) {
    const auto [model, g, cpu, mem] = s;
    const std::string name = model == kNoGpuModel ? "(none)" : cat.Get(model).name;
    out += Printf("  %-10s %6lld %6lld   %d GPU%s, %g cores, %g GiB\n", name.c_str(),
                  static_cast<long long>(count[s]), static_cast<long long>(count[s] * g), g,
                  g == 1 ? "" : "s", static_cast<double>(cpu) / 1000.0,
                  static_cast<double>(mem) / 1024.0);
  }
  return out;
}

std::string WorkloadSection(const std::vector<Workload>& pods, int64_t gpus) {
  const WorkloadMix m = MixOf(pods);
  const int64_t gpu_pods = m.share + m.whole + m.multi;
  int64_t share_milli = 0;
  for (const Workload& w : pods) {
    if (w.demand.IsShare()) share_milli += w.demand.gpu_milli;
  }
  std::string out = "Workload: " + Thousands(m.pods) + " pods asking for " +
                    Thousands(std::llround(static_cast<double>(m.gpu_milli) / 1000.0)) +
                    Printf(" GPUs (%.0f%% of capacity)\n", Pct(m.gpu_milli, gpus * 1000));
  out += Printf(
      "  CPU-only %.1f%% | fraction of one GPU %.1f%% | one whole GPU %.1f%% | 2-8 GPUs %.1f%%\n",
      Pct(m.cpu_only, m.pods), Pct(m.share, m.pods), Pct(m.whole, m.pods), Pct(m.multi, m.pods));
  out += Printf(
      "  %.1f%% of GPU pods are pinned to a set of GPU models; fractional pods ask for %.2f "
      "GPU on average\n",
      Pct(m.pinned, gpu_pods),
      m.share > 0 ? static_cast<double>(share_milli) / static_cast<double>(m.share) / 1000.0 : 0.0);
  return out;
}

std::string PolicyTable(const std::vector<FillSummary>& results, int64_t gpus) {
  std::string out = Printf("  %-11s %-27s %-27s %s\n", "policy", "unallocated @100% arrival",
                           "unallocated @130% arrival", "fragmented idle GPU @90%");
  for (const FillSummary& s : results) {
    const std::string name = s.policy + (s.policy == kBaseline ? " *" : "");
    const std::string a =
        Printf("%5.2f%% ±%.2f (%lld GPUs)", s.unalloc_at_100.mean, s.unalloc_at_100.stddev,
               static_cast<long long>(Gpus(s.unalloc_at_100.mean, gpus)));
    const std::string b =
        Printf("%5.2f%% ±%.2f (%lld GPUs)", s.unalloc_at_130.mean, s.unalloc_at_130.stddev,
               static_cast<long long>(Gpus(s.unalloc_at_130.mean, gpus)));
    out += Printf("  %-11s %-28s %-28s %5.1f%%\n", name.c_str(), a.c_str(), b.c_str(),
                  s.frag_ratio_at_90.mean);
  }
  return out;
}

const FillSummary* Find(const std::vector<FillSummary>& results, const std::string& policy) {
  for (const FillSummary& s : results) {
    if (s.policy == policy) return &s;
  }
  return nullptr;
}

// The policy with the lowest mean; on a tie the baseline wins, then the earlier policy.
const FillSummary* Min(const std::vector<FillSummary>& results, Stats FillSummary::*metric) {
  const FillSummary* best = Find(results, kBaseline);
  for (const FillSummary& s : results) {
    if (!best || (s.*metric).mean < (best->*metric).mean) best = &s;
  }
  return best;
}

bool WithinNoise(const Stats& a, const Stats& b) {
  return std::fabs(a.mean - b.mean) <= std::hypot(a.stddev, b.stddev);
}

std::string UnallocSentence(const std::vector<FillSummary>& results, Stats FillSummary::*metric,
                            const char* when, int64_t gpus) {
  const FillSummary* best = Min(results, metric);
  const FillSummary* base = Find(results, kBaseline);
  const Stats& bs = best->*metric;
  std::string out = Printf(
      "%s, %s strands the least capacity: %.2f%% of the GPUs (%lld) stay "
      "unallocated",
      when, best->policy.c_str(), bs.mean, static_cast<long long>(Gpus(bs.mean, gpus)));
  if (!base) return out + ".";
  const Stats& ks = base->*metric;
  if (base == best) return out + "; that is the baseline itself, no policy beats it here.";
  const int64_t saved = Gpus(ks.mean, gpus) - Gpus(bs.mean, gpus);
  out += Printf(", versus %.2f%% (%lld) with the baseline", ks.mean,
                static_cast<long long>(Gpus(ks.mean, gpus)));
  if (saved > 0) out += Printf(": %lld more GPUs put to work", static_cast<long long>(saved));
  out += WithinNoise(bs, ks) ? ", a gap within the seed-to-seed spread." : ".";
  return out;
}

std::string Conclusion(const std::vector<FillSummary>& results, int64_t gpus) {
  std::string out =
      "Conclusion (baseline: bestfit, least leftover CPU and GPU, the stand-in for the\n"
      "Kubernetes default scheduler):\n";
  out += Bullet(UnallocSentence(results, &FillSummary::unalloc_at_100,
                                "With pods asking for exactly the cluster's GPU capacity", gpus));
  out += Bullet(UnallocSentence(results, &FillSummary::unalloc_at_130,
                                "With 30% more demand than capacity", gpus));
  const FillSummary* frag = Min(results, &FillSummary::frag_ratio_at_90);
  const FillSummary* base = Find(results, kBaseline);
  std::string s;
  if (base && base != frag && WithinNoise(frag->frag_ratio_at_90, base->frag_ratio_at_90)) {
    s = Printf(
        "At 90%% arrival, %s and the baseline leave idle GPUs about equally usable: %.1f%% and "
        "%.1f%% of the idle capacity is fragmented (no typical pod fits)",
        frag->policy.c_str(), frag->frag_ratio_at_90.mean, base->frag_ratio_at_90.mean);
  } else {
    s = Printf(
        "At 90%% arrival, %s%s keeps idle GPUs the most usable: %.1f%% of the idle capacity is "
        "fragmented (no typical pod fits)",
        frag->policy.c_str(), frag == base ? " (the baseline)" : "", frag->frag_ratio_at_90.mean);
    if (base && base != frag)
      s += Printf(", versus %.1f%% with the baseline", base->frag_ratio_at_90.mean);
  }
  const FillSummary* tessera = Find(results, "tessera");
  if (tessera) {
    int rank = 1;
    for (const FillSummary& r : results)
      rank += r.unalloc_at_100.mean < tessera->unalloc_at_100.mean;
    if (rank > 1) s += Printf("; tessera ranks %d of %zu at 100%% arrival", rank, results.size());
  }
  out += Bullet(s + ".");
  return out;
}

Status AddGeneratorInfo(std::string& json, const GeneratedTrace& trace, uint64_t gen_seed) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded()) return Internal("report JSON does not parse");
  const WorkloadMix m = MixOf(trace.pods);
  int64_t gpus = 0;
  for (const NodeSpec& n : trace.nodes) gpus += n.gpu_count;
  j["generator"] = {{"seed", gen_seed},
                    {"nodes", trace.nodes.size()},
                    {"gpus", gpus},
                    {"pods", m.pods},
                    {"gpu_demand", static_cast<double>(m.gpu_milli) / 1000.0},
                    {"cpu_only_pods", m.cpu_only},
                    {"share_pods", m.share},
                    {"whole_gpu_pods", m.whole},
                    {"multi_gpu_pods", m.multi},
                    {"pinned_gpu_pods", m.pinned}};
  j["baseline"] = kBaseline;
  json = j.dump(2) + "\n";
  return Status::Ok();
}

Result<GeneratedTrace> GenerateDefault(int nodes, uint64_t seed) {
  GeneratorConfig config;
  config.num_nodes = nodes;
  return Generate(config, seed);
}

volatile std::sig_atomic_t g_demo_signal = 0;
void OnDemoSignal(int) {
  g_demo_signal = 1;
}

// The /metrics server of --metrics-listen; null without the flag.
Result<std::unique_ptr<net::HttpServer>> StartMetricsServer(const std::string& listen,
                                                            const DemoMetrics* metrics) {
  if (listen.empty()) return std::unique_ptr<net::HttpServer>();
  net::HttpServerOptions o;
  TESSERA_RETURN_IF_ERROR(net::ParseListenAddress(listen, "--metrics-listen", o.address, o.port));
  if (listen.front() == ':') o.address = "127.0.0.1";
  auto http = std::make_unique<net::HttpServer>(o);
  http->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });
  http->Get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics->Exposition(), "text/plain; version=0.0.4");
  });
  if (Status st = http->Start(); !st.ok())
    return IoError("--metrics-listen " + listen + ": " + st.message());
  std::fprintf(stderr, "tessera demo: serving /metrics on %s:%d\n", o.address.c_str(),
               http->port());
  return http;
}

int RunDemo(const DemoArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  auto seeds = ParseSeedList("--seeds", a.seeds);
  if (!seeds.ok()) return Fail(seeds.status());
  auto policies = ParseNameList("--policies", a.policies, BuiltinPolicies().Names());
  if (!policies.ok()) return Fail(policies.status());
  auto nodes = ParseIntFlag("--nodes", a.nodes, kMinNodes, kMaxNodes);
  if (!nodes.ok()) return Fail(nodes.status());
  auto gen_seed = ParseSeedFlag("--gen-seed", a.gen_seed);
  if (!gen_seed.ok()) return Fail(gen_seed.status());
  auto parsed_threads = ParseThreadsFlag("--threads", a.threads);
  if (!parsed_threads.ok()) return Fail(parsed_threads.status());
  auto hold = ParseIntFlag("--metrics-hold", a.metrics_hold, 0, 7 * 86400);
  if (!hold.ok()) return Fail(hold.status());
  if (*hold > 0 && a.metrics_listen.empty())
    return Fail(InvalidArgument("--metrics-hold needs --metrics-listen"));
  auto trace = GenerateDefault(static_cast<int>(*nodes), *gen_seed);
  if (!trace.ok()) return Fail(trace.status());
  int64_t gpus = 0;
  for (const NodeSpec& n : trace->nodes) gpus += n.gpu_count;

  DemoMetrics metrics(trace->nodes, static_cast<int64_t>(policies->size() * seeds->size()));
  auto server = StartMetricsServer(a.metrics_listen, &metrics);
  if (!server.ok()) return Fail(server.status());
  FillHooks hooks;
  if (*server) {
    hooks.detail = true;
    hooks.on_run = [&metrics](const FillRun& run) { metrics.Record(run); };
  }
  auto results =
      RunFillMatrix(trace->nodes, trace->pods, *policies, *seeds, 1.3, *parsed_threads, hooks);
  metrics.SetRunning(false);
  if (!results.ok()) return Fail(results.status());
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::string out = Printf(
      "Tessera demo: a generated cluster and workload shaped like the Alibaba GPU trace "
      "(generator seed %llu)\n\n",
      static_cast<unsigned long long>(*gen_seed));
  out += ClusterSection(trace->nodes) + "\n";
  out += WorkloadSection(trace->pods, gpus) + "\n";
  out += Printf(
      "Placement policies (fill protocol: pods arrive in random order until 130%% of GPU\n"
      "capacity and never leave; mean ± std dev over %zu seeds: %s)\n",
      seeds->size(), a.seeds.c_str());
  out += PolicyTable(*results, gpus);
  out +=
      "  * baseline. Fragmented idle GPU: share of idle GPU capacity no typical pod can use.\n\n";
  out += Conclusion(*results, gpus) + "\n";
  const std::string threads =
      *parsed_threads == 0 ? "all cores" : std::to_string(*parsed_threads) + " threads";
  out += Printf("%zu experiments in %.1f s on %s.\n", results->size() * seeds->size(), wall,
                threads.c_str());
  std::fputs(out.c_str(), stdout);

  const std::string source = "generated: tessera generate --nodes " + std::to_string(*nodes) +
                             " --seed " + std::to_string(*gen_seed);
  if (!a.json.empty()) {
    std::string json = FillJson(*results, source + " (nodes.csv)", source + " (pods.csv)");
    Status st = AddGeneratorInfo(json, *trace, *gen_seed);
    if (!st.ok()) return Fail(st);
    st = WriteFileAtomic(a.json, json);
    if (!st.ok()) return Fail(st);
  }
  if (!a.plot.empty()) {
    const std::string title = "Unallocated GPU vs arrival: generated " +
                              std::to_string(trace->nodes.size()) + "-node cluster, seeds " +
                              a.seeds;
    Status st = WriteFileAtomic(a.plot, FillPlotSvg(*results, title));
    if (!st.ok()) return Fail(st);
  }
  if (*server && *hold > 0) {
    std::fflush(stdout);
    std::signal(SIGINT, OnDemoSignal);
    std::signal(SIGTERM, OnDemoSignal);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(*hold);
    while (!g_demo_signal && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return 0;
}

int RunGenerate(const GenerateArgs& a) {
  auto nodes = ParseIntFlag("--nodes", a.nodes, kMinNodes, kMaxNodes);
  if (!nodes.ok()) return Fail(nodes.status());
  auto seed = ParseSeedFlag("--seed", a.seed);
  if (!seed.ok()) return Fail(seed.status());
  GeneratorConfig config;
  config.num_nodes = static_cast<int>(*nodes);
  Status st = ApplyMixFlags(a.mix, config);
  if (!st.ok()) return Fail(st);
  auto trace = Generate(config, *seed);
  if (!trace.ok()) return Fail(trace.status());
  st = WriteTraceCsv(*trace, a.out_dir);
  if (!st.ok()) return Fail(st);
  const WorkloadMix m = MixOf(trace->pods);
  int64_t gpus = 0;
  for (const NodeSpec& n : trace->nodes) gpus += n.gpu_count;
  std::printf(
      "wrote %s/nodes.csv (%zu nodes, %lld GPUs) and %s/pods.csv (%lld pods, %.1f GPUs "
      "of demand)\n",
      a.out_dir.c_str(), trace->nodes.size(), static_cast<long long>(gpus), a.out_dir.c_str(),
      static_cast<long long>(m.pods), static_cast<double>(m.gpu_milli) / 1000.0);
  return 0;
}

}  // namespace

void AddMixFlagOptions(CLI::App& cmd, MixFlags& m) {
  cmd.add_option("--cpu-only-fraction", m.cpu_only_fraction,
                 "Share of CPU-only pods, [0, 1]; unnamed classes share the rest by their "
                 "default proportions")
      ->type_name("FRACTION")
      ->group("Workload mix");
  cmd.add_option("--share-fraction", m.share_fraction, "Share of GPU-share pods (< 1 GPU), [0, 1]")
      ->type_name("FRACTION")
      ->group("Workload mix");
  cmd.add_option("--whole-fraction", m.whole_fraction, "Share of one-whole-GPU pods, [0, 1]")
      ->type_name("FRACTION")
      ->group("Workload mix");
  cmd.add_option("--multi-gpu-fraction", m.multi_gpu_fraction, "Share of multi-GPU pods, [0, 1]")
      ->type_name("FRACTION")
      ->group("Workload mix");
  cmd.add_option("--share-sizes", m.share_sizes,
                 "gpu_milli of share pods: V:W,... (V in 1..999), uniform:LO-HI, trace, small "
                 "(uniform:50-300) or large (uniform:500-950)")
      ->type_name("DIST")
      ->group("Workload mix");
  cmd.add_option("--multi-gpu-counts", m.multi_gpu_counts,
                 "GPUs per multi-GPU pod: V:W,... (V from 2 to the largest node's GPUs)")
      ->type_name("DIST")
      ->group("Workload mix");
  cmd.add_option("--pinned-fraction", m.pinned_fraction,
                 "Share of GPU pods restricted to a set of GPU models, [0, 1]")
      ->type_name("FRACTION")
      ->group("Workload mix");
  cmd.add_option("--cpu-per-gpu-scale", m.cpu_per_gpu_scale,
                 "Multiply the CPU request of every GPU pod by X, [0.1, 10]")
      ->type_name("X")
      ->group("Workload mix");
  cmd.add_option("--memory-per-gpu-scale", m.memory_per_gpu_scale,
                 "Multiply the memory request of every GPU pod by X, [0.1, 10]")
      ->type_name("X")
      ->group("Workload mix");
}

void AddDemoCommand(CLI::App& app, int& rc) {
  static DemoArgs demo;
  auto* d = app.add_subcommand(
      "demo", "Compare the placement policies on a generated cluster and workload");
  d->add_option("--seeds", demo.seeds, "Fill seeds, e.g. 42-46 or 1,2,3 (at most 1000, none twice)")
      ->default_val("42-46");
  d->add_option("--plot", demo.plot, "Write unallocated GPU vs arrival as SVG");
  d->add_option("--json", demo.json, "Write the results as JSON");
  d->add_option("--nodes", demo.nodes, "Cluster size in nodes, 1..100000")
      ->type_name("INT")
      ->default_val(demo.nodes);
  d->add_option("--gen-seed", demo.gen_seed, "Seed of the generated workload, 0..2^64-1")
      ->type_name("UINT")
      ->default_val(demo.gen_seed);
  d->add_option(
       "--policies", demo.policies,
       "Policies to compare, comma-separated, each once: " + JoinNames(BuiltinPolicies().Names()))
      ->default_val(kAllPolicies);
  d->add_option("--threads", demo.threads, "Worker threads, 0..256 (0 = all cores)")
      ->type_name("INT")
      ->default_val("2");
  d->add_option("--metrics-listen", demo.metrics_listen,
                "Serve Prometheus /metrics of the experiments on HOST:PORT (off by default; "
                "an empty HOST is 127.0.0.1)")
      ->type_name("HOST:PORT");
  d->add_option("--metrics-hold", demo.metrics_hold,
                "Keep serving /metrics this many seconds after the report, 0..604800 (SIGINT "
                "or SIGTERM ends it)")
      ->type_name("SECONDS")
      ->default_val("0");
  d->callback([&rc] { rc = RunDemo(demo); });

  static GenerateArgs gen;
  auto* g = app.add_subcommand(
      "generate", "Write the generated default cluster and workload as nodes.csv and pods.csv");
  g->add_option("--out-dir", gen.out_dir, "Output directory (created if missing)")->required();
  g->add_option("--nodes", gen.nodes, "Cluster size in nodes, 1..100000")
      ->type_name("INT")
      ->default_val(gen.nodes);
  g->add_option("--seed", gen.seed, "Seed of the generated workload, 0..2^64-1")
      ->type_name("UINT")
      ->default_val(gen.seed);
  AddMixFlagOptions(*g, gen.mix);
  g->callback([&rc] { rc = RunGenerate(gen); });
}

}  // namespace tessera
