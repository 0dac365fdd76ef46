// Attacks on the `tessera` command line and its input files, run against the real binary
// (test::TesseraBinary()) as a separate process. Every bad flag value or input file must end the
// process with a non-zero exit code, exactly one stderr line "tessera: <reason>" naming the
// flag or the file, nothing on stdout, and no output file. Each case runs with a time limit, so
// an input that makes the process loop or read forever fails the test instead of hanging it.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/test_paths.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;

const std::string kBom = "\xEF\xBB\xBF";
const std::string kScenarios = tessera::test::SourceDir() + "/bench/scenarios/";

struct Outcome {
  int exit_code = -1;  // -1: killed at the time limit or not started
  std::string out, err;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs the binary with `args` (no shell involved), stdout and stderr to files in `dir`.
Outcome RunTessera(const std::vector<std::string>& args, const std::string& dir,
                   std::chrono::seconds limit = std::chrono::seconds(60)) {
  std::vector<std::string> all = {tessera::test::TesseraBinary()};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out_file = dir + "/stdout.txt", err_file = dir + "/stderr.txt";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  Outcome o;
  if (spawned != 0) {
    o.err = "spawn failed";
    return o;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (true) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      o.out = Slurp(out_file);
      o.err = "killed after " + std::to_string(limit.count()) + " s: " + Slurp(err_file);
      return o;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.out = Slurp(out_file);
  o.err = Slurp(err_file);
  return o;
}

// A scratch directory: inputs at the top, outputs under out/ (which must stay empty when a
// command fails).
class Scratch {
 public:
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "tessera-cli-XXXXXX").string();
    if (::mkdtemp(pattern.data())) root_ = pattern;
    fs::create_directories(Out());
    Write("nodes.csv",
          "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,393216,8,G2\n"
          "n1,96000,393216,8,G2\n");
    Write("pods.csv",
          "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\n"
          "p0,1000,1024,1,1000,0,100\np1,2000,2048,1,500,10,200\np2,4000,4096,2,1000,20,300\n");
    Write("cpu_pods.csv",
          "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,0,0\n"
          "p1,2000,1024,0,0\n");
    Write("bom_nodes.csv", kBom + Slurp(File("nodes.csv")));
    Write("bom_pods.csv", kBom + Slurp(File("pods.csv")));
    const std::string history_header =
        "timestamp_s,namespace,owner_kind,owner,pod,gpu_model,gpu,source,requested_gpus,"
        "requested_memory_mib,requested_compute,requested_mig_profile,memory_used_mib,sm_active\n";
    Write("history.csv", history_header + "1000,ml,Pod,p,p,T4,g0,pod,1,0,0,,1024,0.5\n");
    Write("history_nan.csv", history_header + "1000,ml,Pod,p,p,T4,g0,pod,1,0,0,,1024,nan\n");
    Write("history_short.csv", history_header + "1000,ml,Pod,p\n");
    Write("prices_unknown.csv", "gpu_model,usd_per_hour\nX9,1.0\n");
    Write("prices_no_t4.csv", "gpu_model,usd_per_hour\nL4,1.0\n");
    ::mkfifo(File("fifo.csv").c_str(), 0600);
  }
  ~Scratch() {
    std::error_code ec;
    if (!root_.empty()) fs::remove_all(root_, ec);
  }
  const std::string& root() const { return root_; }
  std::string File(const std::string& name) const { return root_ + "/" + name; }
  std::string Out() const { return root_ + "/out"; }
  void Write(const std::string& name, const std::string& content) const {
    std::ofstream(File(name), std::ios::binary) << content;
  }
  std::vector<std::string> OutFiles() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(Out(), ec), end; !ec && it != end; it.increment(ec))
      names.push_back(it->path().string());
    return names;
  }

 private:
  std::string root_;
};

// Placeholders in a case's arguments and message: {dir} is the scratch directory, {out} its
// output directory, {scenarios} bench/scenarios/.
std::string Expand(std::string s, const Scratch& d) {
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"{dir}", d.root()}, {"{out}", d.Out()}, {"{scenarios}", kScenarios}}) {
    for (size_t at; (at = s.find(key)) != std::string::npos;) s.replace(at, key.size(), value);
  }
  return s;
}

struct RefusedCase {
  const char* label;
  std::vector<std::string> args;
  std::string message;  // the whole stderr line after "tessera: "
};

void PrintTo(const RefusedCase& c, std::ostream* os) {
  *os << c.label;
}

class CliRefusesTest : public ::testing::TestWithParam<RefusedCase> {};

TEST_P(CliRefusesTest, OneLineErrorNonZeroExitNoOutput) {
  const RefusedCase& c = GetParam();
  Scratch d;
  ASSERT_FALSE(d.root().empty());
  std::vector<std::string> args;
  for (const std::string& a : c.args) args.push_back(Expand(a, d));
  const Outcome o = RunTessera(args, d.root(), std::chrono::seconds(30));
  EXPECT_NE(o.exit_code, 0) << o.err;
  EXPECT_NE(o.exit_code, -1) << "did not finish: " << o.err;
  EXPECT_EQ(o.err, "tessera: " + Expand(c.message, d) + "\n");
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(d.OutFiles(), std::vector<std::string>{});
}

// `base` with the flags of `extra` ("--flag value" or "--flag=value") replacing the same flags
// in `base` or, when `base` lacks them, appended.
std::vector<std::string> With(std::vector<std::string> base,
                              const std::vector<std::string>& extra) {
  for (size_t i = 0; i < extra.size(); ++i) {
    const size_t eq = extra[i].find('=');
    const std::string flag = extra[i].substr(0, eq);
    const bool inline_value = eq != std::string::npos;
    std::vector<std::string> item = {extra[i]};
    if (!inline_value && i + 1 < extra.size()) item.push_back(extra[++i]);
    bool replaced = false;
    for (size_t k = 0; k + 1 < base.size() && !replaced; ++k) {
      if (base[k] != flag) continue;
      base.erase(base.begin() + static_cast<std::ptrdiff_t>(k),
                 base.begin() + static_cast<std::ptrdiff_t>(k + 2));
      base.insert(base.begin() + static_cast<std::ptrdiff_t>(k), item.begin(), item.end());
      replaced = true;
    }
    if (!replaced) base.insert(base.end(), item.begin(), item.end());
  }
  return base;
}

const std::string kPolicies =
    "valid names: bestfit, clustering, dotprod, fgd, packing, random, tessera";

// sim fill, with every output option pointing into {out}.
std::vector<std::string> Fill(std::vector<std::string> extra) {
  std::vector<std::string> args = {"sim",     "fill",
                                   "--nodes", "{dir}/nodes.csv",
                                   "--pods",  "{dir}/pods.csv",
                                   "--json",  "{out}/f.json",
                                   "--curve", "{out}/f.csv",
                                   "--plot",  "{out}/f.svg",
                                   "--seeds", "1"};
  return With(args, extra);
}

std::vector<std::string> Replay(std::vector<std::string> extra) {
  std::vector<std::string> args = {
      "sim",          "replay",  "--nodes", "{dir}/nodes.csv", "--pods", "{dir}/pods.csv", "--json",
      "{out}/r.json", "--seeds", "1"};
  return With(args, extra);
}

std::vector<std::string> Sharing(std::vector<std::string> extra) {
  std::vector<std::string> args = {
      "sim", "sharing", "--scenario", "{scenarios}sharing-small.json", "--json", "{out}/s.json"};
  return With(args, extra);
}

std::vector<std::string> Queues(std::vector<std::string> extra) {
  std::vector<std::string> args = {"sim",        "queues",
                                   "--cluster",  "{scenarios}queues-fair.json",
                                   "--workload", "{scenarios}queues-fair.csv",
                                   "--json",     "{out}/q.json"};
  return With(args, extra);
}

std::vector<std::string> Pollux(std::vector<std::string> extra) {
  std::vector<std::string> args = {"sim", "pollux", "--dir", "{dir}", "--json", "{out}/p.json"};
  return With(args, extra);
}

std::vector<std::string> Plan(std::vector<std::string> extra) {
  std::vector<std::string> args = {"plan",       "inference",      "--profiles",    "{dir}",
                                   "--slo-rate", "{dir}/rate.csv", "--slo-latency", "{dir}/lat.csv",
                                   "--json",     "{out}/plan.json"};
  return With(args, extra);
}

std::vector<std::string> Demo(std::vector<std::string> extra) {
  std::vector<std::string> args = {"demo", "--json", "{out}/d.json", "--plot", "{out}/d.svg"};
  return With(args, extra);
}

std::vector<std::string> Generate(std::vector<std::string> extra) {
  std::vector<std::string> args = {"generate", "--out-dir", "{out}/gen"};
  return With(args, extra);
}

std::vector<std::string> Family(std::vector<std::string> extra) {
  std::vector<std::string> args = {"sim",    "family",       "--seeds", "1",
                                   "--json", "{out}/f.json", "--table", "{out}/f.md"};
  return With(args, extra);
}

std::vector<std::string> Drift(std::vector<std::string> extra) {
  std::vector<std::string> args = {"sim",    "drift",        "--seeds", "1",
                                   "--json", "{out}/d.json", "--table", "{out}/d.md"};
  return With(args, extra);
}

INSTANTIATE_TEST_SUITE_P(
    SimFill, CliRefusesTest,
    ::testing::Values(
        RefusedCase{"TuneNaN", Fill({"--tune", "nan"}),
                    "--tune: 'nan' is not a number; allowed range (0, 4]"},
        RefusedCase{"TuneInf", Fill({"--tune", "inf"}),
                    "--tune: 'inf' is not a number; allowed range (0, 4]"},
        RefusedCase{"TuneNegative", Fill({"--tune=-1"}),
                    "--tune: '-1' is outside the allowed range (0, 4]"},
        RefusedCase{"TuneZero", Fill({"--tune", "0"}),
                    "--tune: '0' is outside the allowed range (0, 4]"},
        RefusedCase{"TuneMillion", Fill({"--tune", "1e6"}),
                    "--tune: '1e6' is outside the allowed range (0, 4]"},
        RefusedCase{"TuneOverflow", Fill({"--tune", "1e999"}),
                    "--tune: '1e999' is outside the allowed range (0, 4]"},
        RefusedCase{"TuneText", Fill({"--tune", "1.3x"}),
                    "--tune: '1.3x' is not a number; allowed range (0, 4]"},
        RefusedCase{"TuneHex", Fill({"--tune", "0x1"}),
                    "--tune: '0x1' is not a number; allowed range (0, 4]"},
        RefusedCase{"ThreadsNegative", Fill({"--threads=-1"}),
                    "--threads: '-1' is outside the allowed range 0..256"},
        RefusedCase{"ThreadsHuge", Fill({"--threads", "100000"}),
                    "--threads: '100000' is outside the allowed range 0..256"},
        RefusedCase{"ThreadsFraction", Fill({"--threads", "1.5"}),
                    "--threads: '1.5' is not an integer; allowed range 0..256"},
        RefusedCase{"PolicyEmpty", Fill({"--policy", ""}), "--policy: empty list; " + kPolicies},
        RefusedCase{"PolicyEmptyEntry", Fill({"--policy", "fgd,,tessera"}),
                    "--policy: empty name in 'fgd,,tessera'; " + kPolicies},
        RefusedCase{"PolicyTrailingComma", Fill({"--policy", "fgd,"}),
                    "--policy: empty name in 'fgd,'; " + kPolicies},
        RefusedCase{"PolicyUnknown", Fill({"--policy", "fgd,kube"}),
                    "--policy: unknown name 'kube'; " + kPolicies},
        RefusedCase{"PolicyTwice", Fill({"--policy", "fgd,tessera,fgd"}),
                    "--policy: 'fgd' given twice"},
        RefusedCase{"PolicyControlBytes", Fill({"--policy", "fgd\nx"}),
                    "--policy: unknown name 'fgd\\x0ax'; " + kPolicies},
        RefusedCase{"SeedsEmpty", Fill({"--seeds", ""}),
                    "--seeds: empty seed list (use e.g. 42-51 or 1,2,3)"},
        RefusedCase{"SeedsEmptyItem", Fill({"--seeds", "1,,2"}),
                    "--seeds: empty item in '1,,2' (use e.g. 42-51 or 1,2,3)"},
        RefusedCase{"SeedsTwice", Fill({"--seeds", "1-5,3"}), "--seeds: seed 3 given twice"},
        RefusedCase{"PastPodsMissing", Fill({"--past-pods", "{dir}/none.csv"}),
                    "cannot open '{dir}/none.csv': No such file or directory"},
        RefusedCase{"SeedsDescending", Fill({"--seeds", "9-2"}),
                    "--seeds: range '9-2' is descending"},
        RefusedCase{"SeedsTooMany", Fill({"--seeds", "0-5000"}),
                    "--seeds: '0-5000' names more than 1000 seeds"},
        RefusedCase{"SeedsNegative", Fill({"--seeds=-3"}),
                    "--seeds: '-3' is not a seed or a range of seeds (use e.g. 42-51 or 1,2,3)"},
        RefusedCase{"SeedsOverflow", Fill({"--seeds", "18446744073709551616"}),
                    "--seeds: '18446744073709551616' is not a seed or a range of seeds (use e.g. "
                    "42-51 or 1,2,3)"},
        RefusedCase{"NodesDirectory", Fill({"--nodes", "{dir}"}), "{dir}: not a regular file"},
        RefusedCase{"NodesDevZero", Fill({"--nodes", "/dev/zero"}),
                    "/dev/zero: not a regular file"},
        RefusedCase{"PodsFifo", Fill({"--pods", "{dir}/fifo.csv"}),
                    "{dir}/fifo.csv: not a regular file"},
        RefusedCase{"PodsWithoutGpuDemand", Fill({"--pods", "{dir}/cpu_pods.csv"}),
                    "no pod asks for a GPU"}),
    [](const ::testing::TestParamInfo<RefusedCase>& info) { return info.param.label; });

INSTANTIATE_TEST_SUITE_P(
    OtherCommands, CliRefusesTest,
    ::testing::Values(
        RefusedCase{"ReplayTimeScaleNaN", Replay({"--time-scale", "nan"}),
                    "--time-scale: 'nan' is not a number; allowed range [1, 1e+06]"},
        RefusedCase{"ReplayTimeScaleBelowOne", Replay({"--time-scale", "0.5"}),
                    "--time-scale: '0.5' is outside the allowed range [1, 1e+06]"},
        RefusedCase{"ReplayThreads", Replay({"--threads", "999"}),
                    "--threads: '999' is outside the allowed range 0..256"},
        RefusedCase{"ReplayPolicyEmptyEntry", Replay({"--policy", ",fgd"}),
                    "--policy: empty name in ',fgd'; " + kPolicies},
        RefusedCase{"ReplaySeedsTwice", Replay({"--seeds", "4,4"}), "--seeds: seed 4 given twice"},
        RefusedCase{"ReplayPodsDirectory", Replay({"--pods", "{out}"}),
                    "{out}: not a regular file"},
        RefusedCase{"SharingStrategyEmpty", Sharing({"--strategy", ""}),
                    "--strategy: empty list; valid names: exclusive, static-mig, timeslice, mps, "
                    "tessera"},
        RefusedCase{"SharingStrategyEmptyEntry", Sharing({"--strategy", "mps,,tessera"}),
                    "--strategy: empty name in 'mps,,tessera'; valid names: exclusive, "
                    "static-mig, timeslice, mps, tessera"},
        RefusedCase{"SharingStrategyTwice", Sharing({"--strategy", "mps,mps"}),
                    "--strategy: 'mps' given twice"},
        RefusedCase{"SharingSeedNegative", Sharing({"--seed=-1"}),
                    "--seed: '-1' is not a seed; allowed range 0..18446744073709551615"},
        RefusedCase{"SharingSeedEmpty", Sharing({"--seed", ""}),
                    "--seed: '' is not a seed; allowed range 0..18446744073709551615"},
        RefusedCase{"SharingScenarioDirectory",
                    {"sim", "sharing", "--scenario", "{dir}", "--json", "{out}/s.json"},
                    "{dir}: not a regular file"},
        RefusedCase{"SharingScenarioFifo",
                    {"sim", "sharing", "--scenario", "{dir}/fifo.csv", "--json", "{out}/s.json"},
                    "{dir}/fifo.csv: not a regular file"},
        RefusedCase{"QueuesHorizonInf", Queues({"--horizon", "inf"}),
                    "--horizon: 'inf' is not a number; allowed range [0, 1e+09]"},
        RefusedCase{"QueuesHorizonNegative", Queues({"--horizon=-5"}),
                    "--horizon: '-5' is outside the allowed range [0, 1e+09]"},
        RefusedCase{"QueuesTimeScaleZero", Queues({"--time-scale", "0"}),
                    "--time-scale: '0' is outside the allowed range [1, 1e+06]"},
        RefusedCase{"QueuesPolicyEmptyEntry", Queues({"--policy", "fifo,,kueue"}),
                    "--policy: empty name in 'fifo,,kueue'; valid names: fifo, kueue, tessera"},
        RefusedCase{"QueuesPlacementUnknown", Queues({"--placement", "spread"}),
                    "--placement: unknown name 'spread'; " + kPolicies},
        RefusedCase{"QueuesPlacementList", Queues({"--placement", "fgd,tessera"}),
                    "--placement: one policy name expected, got 'fgd,tessera'"},
        RefusedCase{"QueuesSeedText", Queues({"--seed", "seven"}),
                    "--seed: 'seven' is not a seed; allowed range 0..18446744073709551615"},
        RefusedCase{"QueuesClusterDevZero",
                    {"sim", "queues", "--cluster", "/dev/zero", "--workload",
                     "{scenarios}queues-fair.csv", "--json", "{out}/q.json"},
                    "/dev/zero: not a regular file"},
        RefusedCase{"PolluxThreads", Pollux({"--threads=-2"}),
                    "--threads: '-2' is outside the allowed range 0..256"},
        RefusedCase{"PolluxPolicyTwice", Pollux({"--policy", "fifo,fifo"}),
                    "--policy: 'fifo' given twice"},
        RefusedCase{"PolluxPolicyEmpty", Pollux({"--policy", ""}),
                    "--policy: empty list; valid names: fifo, fifo-strict, tiresias, tessera"},
        RefusedCase{"PlanMaxProcsZero", Plan({"--scenario", "1", "--max-procs", "0"}),
                    "--max-procs: '0' is outside the allowed range 1..48"},
        RefusedCase{"PlanMaxProcsHuge", Plan({"--scenario", "1", "--max-procs", "100000"}),
                    "--max-procs: '100000' is outside the allowed range 1..48"},
        RefusedCase{"PlanScenarioZero", Plan({"--scenario", "0"}),
                    "--scenario: '0' is outside the allowed range 1..999999 (or 'all' for every "
                    "scenario)"},
        RefusedCase{"PlanGpuModel", Plan({"--scenario", "1", "--gpu-model", "T4"}),
                    "--gpu-model: 'T4' is not a MIG-capable model"},
        RefusedCase{"DemoThreads", Demo({"--threads", "1000"}),
                    "--threads: '1000' is outside the allowed range 0..256"},
        RefusedCase{"DemoNodesZero", Demo({"--nodes", "0"}),
                    "--nodes: '0' is outside the allowed range 1..100000"},
        RefusedCase{"DemoGenSeedNegative", Demo({"--gen-seed=-1"}),
                    "--gen-seed: '-1' is not a seed; allowed range 0..18446744073709551615"},
        RefusedCase{"DemoPoliciesEmptyEntry", Demo({"--policies", "fgd,"}),
                    "--policies: empty name in 'fgd,'; " + kPolicies},
        RefusedCase{"DemoSeedsTwice", Demo({"--seeds", "1,2,1"}), "--seeds: seed 1 given twice"},
        RefusedCase{"GenerateNodesText", Generate({"--nodes", "1e3"}),
                    "--nodes: '1e3' is not an integer; allowed range 1..100000"},
        RefusedCase{"GenerateNodesHuge", Generate({"--nodes", "100001"}),
                    "--nodes: '100001' is outside the allowed range 1..100000"},
        RefusedCase{"GenerateSeedFraction", Generate({"--seed", "1.5"}),
                    "--seed: '1.5' is not a seed; allowed range 0..18446744073709551615"},
        RefusedCase{"GenerateShareFractionAboveOne", Generate({"--share-fraction", "1.2"}),
                    "--share-fraction: '1.2' is outside the allowed range [0, 1]"},
        RefusedCase{"GenerateFractionsAboveOne",
                    Generate({"--share-fraction", "0.7", "--whole-fraction", "0.5"}),
                    "--share-fraction + --whole-fraction sum to 1.2, more than 1"},
        RefusedCase{"GenerateShareSizesUnknown", Generate({"--share-sizes", "tiny"}),
                    "--share-sizes: 'tiny' is not a distribution (expected trace, small, large, "
                    "uniform:LO-HI or VALUE:WEIGHT,... with VALUE in 1..999)"},
        RefusedCase{"GenerateMultiGpuCountsTooLarge", Generate({"--multi-gpu-counts", "2:1,9:1"}),
                    "--multi-gpu-counts: '9:1' has a value outside 2..8 (expected VALUE:WEIGHT,... "
                    "with VALUE an integer in 2..8 and WEIGHT a number > 0)"},
        RefusedCase{"GenerateCpuScaleNaN", Generate({"--cpu-per-gpu-scale", "nan"}),
                    "--cpu-per-gpu-scale: 'nan' is not a number; allowed range [0.1, 10]"},
        RefusedCase{"FamilyMixUnknown", Family({"--mixes", "base,nope"}),
                    "--mixes: unknown name 'nope' (`tessera sim family --list` lists the mixes)"},
        RefusedCase{"FamilyTraceNameUnknown",
                    Family({"--traces", "{dir}", "--trace-names", "default,x"}),
                    "--trace-names: unknown name 'x'; valid names: default, cpu050, cpu100, "
                    "cpu200, cpu250, gpushare40, gpushare60, gpushare80, gpushare100, gpuspec10, "
                    "gpuspec20, gpuspec25, gpuspec33, multigpu20, multigpu30, multigpu40, "
                    "multigpu50"},
        RefusedCase{"FamilyCandidateNotRun", Family({"--policy", "fgd,bestfit"}),
                    "--candidate: 'tessera' is not one of the --policy list (fgd,bestfit)"},
        RefusedCase{"FamilyModeUnknown", Family({"--mode", "live"}),
                    "--mode: 'live' must be fill or replay"},
        RefusedCase{"DriftPairWithoutColon", Drift({"--pairs", "base"}),
                    "--pairs: 'base' is not FROM:TO"},
        RefusedCase{"DriftMixUnknown", Drift({"--pairs", "base:base,base:nope"}),
                    "--pairs: unknown mix 'nope' (`tessera sim family --list` lists the mixes)"},
        RefusedCase{"DriftTimeScaleBelowOne", Drift({"--time-scale", "0.5"}),
                    "--time-scale: '0.5' is outside the allowed range [1, 1e+06]"},
        RefusedCase{"FamilyNothingToRun", Family({"--mixes", "none"}),
                    "nothing to run: --mixes none and no --traces DIR"},
        RefusedCase{"FamilyTracesMissing", Family({"--mixes", "none", "--traces", "{dir}/none"}),
                    "cannot open '{dir}/none/openb_node_list_gpu_node.csv': No such file or "
                    "directory"},
        RefusedCase{"FamilyTimeScaleBelowOne", Family({"--time-scale", "0.5"}),
                    "--time-scale: '0.5' is outside the allowed range [1, 1e+06]"},
        RefusedCase{"FamilyPastSeedIsTheMeasuredOne", Family({"--past-gen-seed", "1"}),
                    "--past-gen-seed: 1 is the --gen-seed of the measured workload; the past "
                    "needs another sample"},
        RefusedCase{"FamilyPastSeedNegative", Family({"--past-gen-seed=-2"}),
                    "--past-gen-seed: '-2' is not a seed; allowed range 0..18446744073709551615"},
        RefusedCase{"FamilyPastSeedInReplay", Family({"--past-gen-seed", "2", "--mode", "replay"}),
                    "--past-gen-seed applies to --mode fill only"}),
    [](const ::testing::TestParamInfo<RefusedCase>& info) { return info.param.label; });

// Inputs that must be accepted.

std::vector<std::string> Report(std::vector<std::string> extra) {
  std::vector<std::string> args = {"report", "--history", "{dir}/history.csv", "--json",
                                   "{out}/report.json"};
  return With(args, extra);
}

INSTANTIATE_TEST_SUITE_P(
    Report, CliRefusesTest,
    ::testing::Values(
        RefusedCase{"HistoryNaN", Report({"--history", "{dir}/history_nan.csv"}),
                    "{dir}/history_nan.csv:2:39: column 'sm_active': NaN is not a valid value"},
        RefusedCase{"HistoryShortRow", Report({"--history", "{dir}/history_short.csv"}),
                    "{dir}/history_short.csv:2:14: expected 14 fields, found 4"},
        RefusedCase{"HistoryMissing", Report({"--history", "{dir}/none.csv"}),
                    "cannot open '{dir}/none.csv': No such file or directory"},
        RefusedCase{"PricesUnknownModel", Report({"--prices", "{dir}/prices_unknown.csv"}),
                    "{dir}/prices_unknown.csv:2:1: unknown GPU model 'X9' (known: T4, L4, A10, "
                    "A10G, P100, V100M16, V100M32, A30, A100-40GB, A100-80GB, H100-80GB, H200, "
                    "B200, G1, G2, G3, H100-94GB, H100-96GB, GH200-144GB, GB200, B300, GB300, "
                    "RTX-PRO-6000)"},
        RefusedCase{"PricesWithoutTheModel", Report({"--prices", "{dir}/prices_no_t4.csv"}),
                    "{dir}/history.csv: pod ml/p: no price for GPU model 'T4' in the price table"},
        RefusedCase{"PrometheusUnreachable",
                    {"report", "--prometheus", "http://127.0.0.1:1", "--timeout", "2", "--json",
                     "{out}/report.json"},
                    "cannot reach Prometheus at http://127.0.0.1:1: connection refused or host "
                    "unreachable"},
        RefusedCase{"PrometheusNotHttp",
                    {"report", "--prometheus", "ftp://x"},
                    "--prometheus: 'ftp://x' is not an http:// or https:// URL"},
        RefusedCase{"BothSources", Report({"--prometheus", "http://127.0.0.1:1"}),
                    "--history and --prometheus exclude each other"},
        RefusedCase{"NoSource",
                    {"report", "--json", "{out}/report.json"},
                    "give --history FILE or --prometheus URL"},
        RefusedCase{"WindowText", Report({"--window", "5x"}),
                    "--window: '5x' is not a duration of at most 366 days (use e.g. 7d, 36h, "
                    "3600s)"},
        RefusedCase{"StepZero", Report({"--step", "0"}),
                    "--step: '0' is outside the allowed range 1..86400"},
        RefusedCase{"StartWithoutPrometheus", Report({"--start", "5"}),
                    "--start and --end need --prometheus"}),
    [](const ::testing::TestParamInfo<RefusedCase>& info) { return info.param.label; });

// `tessera webhook`: it refuses to start on options that would serve plain HTTP off loopback,
// and on malformed flags, before binding anything.
INSTANTIATE_TEST_SUITE_P(
    Webhook, CliRefusesTest,
    ::testing::Values(
        RefusedCase{"NoTls",
                    {"webhook"},
                    "the webhook needs --tls-cert and --tls-key (the API server calls webhooks "
                    "over HTTPS); --insecure serves plain HTTP on a loopback address only"},
        RefusedCase{"InsecureOffLoopback",
                    {"webhook", "--insecure", "--listen", "0.0.0.0:0"},
                    "--insecure serves plain HTTP only on a loopback address, got 0.0.0.0"},
        RefusedCase{"CertWithoutKey",
                    {"webhook", "--tls-cert", "{dir}/a.crt"},
                    "--tls-cert and --tls-key must be given together"},
        RefusedCase{"MissingCertificate",
                    {"webhook", "--tls-cert", "{dir}/none.crt", "--tls-key", "{dir}/none.key",
                     "--listen", "127.0.0.1:0"},
                    "cannot load TLS certificate {dir}/none.crt: error:80000002:system "
                    "library::No such file or directory"},
        RefusedCase{
            "SchedulerName",
            {"webhook", "--insecure", "--listen", "127.0.0.1:0", "--scheduler-name", "Bad_Name"},
            "--scheduler-name 'Bad_Name' is not a valid DNS-1123 subdomain (at most 253 "
            "characters of a-z, 0-9, '-' and '.', each '.'-separated part starting and "
            "ending with a letter or digit)"},
        RefusedCase{"PathWithoutSlash",
                    {"webhook", "--insecure", "--listen", "127.0.0.1:0", "--path", "mutate"},
                    "--path must start with '/', got \"mutate\""},
        RefusedCase{"ListenWithoutPort",
                    {"webhook", "--insecure", "--listen", "nohost"},
                    "--listen must be ADDR:PORT, got \"nohost\""},
        RefusedCase{
            "EmptyClientName",
            {"webhook", "--insecure", "--listen", "127.0.0.1:0", "--allowed-client-names", "a,,b"},
            "--allowed-client-names: empty name in 'a,,b'"}),
    [](const ::testing::TestParamInfo<RefusedCase>& info) { return info.param.label; });

TEST(CliAcceptsTest, CsvFilesWithUtf8Bom) {
  Scratch d;
  const Outcome o = RunTessera(
      {"sim", "fill", "--nodes", d.File("bom_nodes.csv"), "--pods", d.File("bom_pods.csv"),
       "--policy", "bestfit", "--seeds", "1", "--json", d.Out() + "/f.json"},
      d.root());
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.err, "");
  EXPECT_TRUE(fs::exists(d.Out() + "/f.json"));
}

TEST(CliAcceptsTest, FillLabelsTheEndColumnWithTheTuneRatio) {
  Scratch d;
  for (const auto& [tune, label] : std::vector<std::pair<std::string, std::string>>{
           {"1.3", "unalloc%@130 "}, {"2", "unalloc%@200 "}, {"0.5", "unalloc%@50 "}}) {
    const Outcome o =
        RunTessera({"sim", "fill", "--nodes", d.File("nodes.csv"), "--pods", d.File("pods.csv"),
                    "--policy", "bestfit", "--seeds", "1", "--tune", tune},
                   d.root());
    EXPECT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find(label), std::string::npos) << o.out;
    if (tune != "1.3") {
      EXPECT_EQ(o.out.find("@130"), std::string::npos) << o.out;
    }
  }
}

}  // namespace
