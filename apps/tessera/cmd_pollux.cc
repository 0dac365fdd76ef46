// `tessera sim pollux`: the Pollux (OSDI'21) simulator benchmark (sim/pollux_sim.h) for one or
// more policies over the workload files DIR/<workloads>/workload-N.csv, with the profiles in
// DIR/traces/<app>/. Prints a table (with the published results from
// DIR/results-jobload/<policy>-<load>/summary.json when present); --json writes the results
// atomically after every run succeeded. Errors go to stderr as "tessera: <message>", exit 1.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "apps/tessera/cli_util.h"
#include "apps/tessera/commands.h"
#include "sim/csv.h"
#include "sim/pollux.h"
#include "sim/pollux_sim.h"
#include "sim/report.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

struct PolluxArgs {
  std::string dir, policies = "fifo,tiresias,tessera", json, workloads = "workloads",
                   model = "pollux", threads = "0";
};

std::vector<std::string> PolicyNames() {
  std::vector<std::string> names;
  for (PolluxPolicy p : {PolluxPolicy::kFifo, PolluxPolicy::kFifoStrict, PolluxPolicy::kTiresias,
                         PolluxPolicy::kTessera})
    names.push_back(PolluxPolicyName(p));
  return names;
}

// workload-<N>.csv files of `dir`, by N.
Result<std::vector<std::string>> WorkloadFiles(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound("no workload directory '" + dir.string() + "'");
  std::vector<std::pair<long long, std::string>> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string prefix = "workload-", suffix = ".csv";
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.substr(name.size() - suffix.size()) != suffix)
      continue;
    const std::string n = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (n.size() > 9 || n.find_first_not_of("0123456789") != std::string::npos) continue;
    files.push_back({std::stoll(n), it->path().string()});
  }
  if (ec) return IoError("cannot list '" + dir.string() + "': " + ec.message());
  if (files.empty()) return NotFound("no workload-<N>.csv files in '" + dir.string() + "'");
  std::sort(files.begin(), files.end());
  std::vector<std::string> out;
  for (auto& f : files) out.push_back(std::move(f.second));
  return out;
}

// "workloads" -> "1.0", "workloads-1.5" -> "1.5"; anything else has no published results.
std::string LoadOf(const std::string& workloads) {
  const std::string base = fs::path(workloads).lexically_normal().filename().string();
  if (base == "workloads") return "1.0";
  if (base.rfind("workloads-", 0) == 0) return base.substr(10);
  return "";
}

std::vector<PolluxReference> References(const fs::path& dir, const std::string& load) {
  std::vector<PolluxReference> refs;
  if (load.empty()) return refs;
  for (const char* policy : {"pollux", "tiresias", "optimus"}) {
    const fs::path path =
        dir / "results-jobload" / (std::string(policy) + "-" + load) / "summary.json";
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;
    auto text = ReadFileToString(path.string());
    Result<PolluxReference> ref =
        text.ok() ? ParsePolluxSummary(*text, path.string(), policy) : text.status();
    if (!ref.ok()) {
      std::fprintf(stderr, "tessera: warning: ignoring %s\n", ref.status().message().c_str());
      continue;
    }
    refs.push_back(std::move(ref).value());
  }
  return refs;
}

int RunSimPollux(const PolluxArgs& a) {
  auto policy_names = ParseNameList("--policy", a.policies, PolicyNames());
  if (!policy_names.ok()) return Fail(policy_names.status());
  std::vector<PolluxPolicy> policies;
  for (const auto& name : *policy_names) {
    auto p = ParsePolluxPolicy(name);
    if (!p.ok()) return Fail(p.status());
    policies.push_back(*p);
  }
  auto threads = ParseThreadsFlag("--threads", a.threads);
  if (!threads.ok()) return Fail(threads.status());
  if (a.model != "pollux" && a.model != "profile")
    return Fail(InvalidArgument("unknown model '" + a.model + "' (known: pollux, profile)"));
  if (!a.json.empty()) {
    const fs::path dir = fs::path(a.json).parent_path();
    std::error_code ec;
    if (!dir.empty() && !fs::is_directory(dir, ec))
      return Fail(IoError("cannot write '" + a.json + "': no directory '" + dir.string() + "'"));
  }
  const fs::path root(a.dir);
  auto files = WorkloadFiles(root / a.workloads);
  if (!files.ok()) return Fail(files.status());
  std::vector<PolluxWorkload> workloads;
  std::set<std::string> names;
  for (const auto& f : *files) {
    auto w = ReadPolluxWorkload(f);
    if (!w.ok()) return Fail(w.status());
    for (const auto& j : w->jobs) names.insert(j.application);
    workloads.push_back(std::move(w).value());
  }
  PolluxApps apps;
  for (const auto& name : names) {
    const fs::path dir = root / "traces" / name;
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
      return Fail(
          NotFound("no profile folder '" + dir.string() + "' for application '" + name + "'"));
    const PolluxModelOptions options =
        a.model == "pollux" ? PolluxSimulatorModel(name) : PolluxModelOptions{};
    auto app = ReadPolluxApp(dir.string(), name, options);
    if (!app.ok()) return Fail(app.status());
    apps.emplace(name, std::move(app).value());
  }
  const PolluxSimConfig config;
  auto results = RunPolluxMatrix(apps, workloads, policies, config, *threads);
  if (!results.ok()) return Fail(results.status());
  const auto refs = References(root, LoadOf(a.workloads));
  if (!a.json.empty()) {
    Status st = WriteFileAtomic(a.json, PolluxJson(*results, refs, config, a.model));
    if (!st.ok()) return Fail(st);
  }
  std::fputs(PolluxTable(*results, refs).c_str(), stdout);
  return 0;
}

}  // namespace

void AddSimPolluxCommand(CLI::App& sim, int& rc) {
  auto args = std::make_shared<PolluxArgs>();
  auto* p = sim.add_subcommand(
      "pollux",
      "Pollux (OSDI'21) benchmark: rigid jobs on 16 nodes x 4 GPUs, profile-driven progress");
  p->add_option("--dir", args->dir,
                "Pollux benchmark folder (traces/<app>/ profiles, workloads/, results-jobload/)")
      ->required();
  p->add_option("--policy", args->policies,
                "Policy name(s), comma-separated, each once: " + JoinNames(PolicyNames()))
      ->default_val("fifo,tiresias,tessera");
  p->add_option("--workloads", args->workloads,
                "Workload folder under --dir holding workload-<N>.csv")
      ->default_val("workloads");
  p->add_option("--model", args->model,
                "Job model: pollux (the Pollux simulator's conventions, reproduces its published "
                "results) or profile (measured steps, local batch cap from placements.csv)")
      ->default_val("pollux");
  p->add_option("--threads", args->threads, "Worker threads, 0..256 (0 = all cores)")
      ->type_name("INT")
      ->default_val("0");
  p->add_option("--json", args->json, "Write results as JSON");
  p->callback([args, &rc] { rc = RunSimPollux(*args); });
}

}  // namespace tessera
