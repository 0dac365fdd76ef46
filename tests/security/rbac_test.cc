// Least privilege of the RBAC manifests, derived from the code. Each component runs against the
// fake API server, which records every request; the requests become the permissions they need
// (API group, resource[/subresource], verb, namespace or cluster-wide, object name), and those
// are compared both ways with what deploy/**/rbac*.yaml grants to the component's
// ServiceAccount: nothing the code calls may be missing, no granted rule may go unused.
//
//   tessera scheduler: the Scheduler runtime with the leader election settings of
//     deploy/scheduler/configmap.yaml, through leader election, the Queue list, the node, pod
//     and MigLayout informers, binding, preemption (eviction and its Event), a pod notice
//     (status patch and Event), a MIG re-layout (MigLayout created, reported applied, pod
//     bound), then a graceful stop (lease release).
//   tessera extender: the `tessera` binary itself (informers over nodes and pods, then a bind
//     request through its HTTP front end: the pod lookup by name and the binding).
//   tessera agent: the `tessera` binary over the fake NVML (when the build has the device
//     plugin), passes until it has published its node's inventory and reported a MigLayout
//     revision applied (node get and patch, pod list, MigLayout get and status patch).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "kube/client.h"
#include "kube/scheduler.h"
#include "kube/translate.h"
#include "tests/kube/fake_apiserver.h"
#include "tests/kube/test_objects.h"
#include "tests/support/test_paths.h"

extern char** environ;

namespace tessera::kube {
namespace {

namespace fs = std::filesystem;
using testing::FakeApiServer;
using testing::RecordedRequest;

// ---- requests -> permissions ------------------------------------------------------------------

// What one API call needs from RBAC.
struct Need {
  std::string group, resource, verb;
  std::string ns;    // "" = cluster-wide (cluster-scoped resource or all namespaces)
  std::string name;  // object name; "" for collection requests
  auto Key() const { return std::tie(group, resource, verb, ns, name); }
  bool operator<(const Need& o) const { return Key() < o.Key(); }
};

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// Kubernetes request attributes: /api/v1/... (core group) or /apis/<group>/<version>/...,
// optional namespaces/<ns>, then resource, name, subresource. GET collection = list (watch
// with watch=true), GET item = get, POST = create, PUT = update, PATCH = patch, DELETE item =
// delete, DELETE collection = deletecollection.
bool NeedOf(const RecordedRequest& r, Need* need, std::string* error) {
  const std::string path = r.target.substr(0, r.target.find('?'));
  std::vector<std::string> seg;
  for (size_t i = 1; i <= path.size();) {
    const size_t slash = std::min(path.find('/', i), path.size());
    seg.push_back(PercentDecode(std::string_view(path).substr(i, slash - i)));
    i = slash + 1;
  }
  size_t k;
  if (seg.size() >= 3 && seg[0] == "api") {
    need->group = "";
    k = 2;
  } else if (seg.size() >= 4 && seg[0] == "apis") {
    need->group = seg[1];
    k = 3;
  } else {
    *error = "not a resource request: " + r.method + " " + r.target;
    return false;
  }
  need->ns.clear();
  if (seg.size() - k >= 3 && seg[k] == "namespaces") {
    need->ns = seg[k + 1];
    k += 2;
  }
  const size_t rest = seg.size() - k;
  if (rest < 1 || rest > 3) {
    *error = "unexpected path: " + r.method + " " + r.target;
    return false;
  }
  need->resource = seg[k] + (rest == 3 ? "/" + seg[k + 2] : "");
  need->name = rest >= 2 ? seg[k + 1] : "";
  const bool item = !need->name.empty();
  const auto watch = r.query.find("watch");
  if (r.method == "GET") {
    need->verb = item ? "get"
                 : watch != r.query.end() && (watch->second == "true" || watch->second == "1")
                     ? "watch"
                     : "list";
  } else if (r.method == "POST") {
    need->verb = "create";
  } else if (r.method == "PUT") {
    need->verb = "update";
  } else if (r.method == "PATCH") {
    need->verb = "patch";
  } else if (r.method == "DELETE") {
    need->verb = item ? "delete" : "deletecollection";
  } else {
    *error = "unexpected method: " + r.method + " " + r.target;
    return false;
  }
  return true;
}

// The permissions behind the recorded requests, each with one request as an example.
std::map<Need, std::string> NeedsOf(const std::vector<RecordedRequest>& requests) {
  std::map<Need, std::string> needs;
  for (const auto& r : requests) {
    Need n;
    std::string error;
    if (!NeedOf(r, &n, &error)) {
      ADD_FAILURE() << error;
      continue;
    }
    needs.emplace(n, r.method + " " + r.target);
  }
  return needs;
}

// ---- manifests -> grants ----------------------------------------------------------------------

// One (group, resource, verb) of a rule, in the scope its binding gives it.
struct Grant {
  std::string group, resource, verb;
  std::string scope;            // "" = cluster-wide (ClusterRoleBinding), else a namespace
  std::set<std::string> names;  // resourceNames; empty = any
  std::string source;           // "deploy/x/rbac.yaml: ClusterRole y"
  bool Covers(const Need& n) const {
    if (group != n.group || resource != n.resource || verb != n.verb) return false;
    if (!scope.empty() && scope != n.ns) return false;
    return names.empty() || names.count(n.name) > 0;
  }
};

std::string Describe(const std::string& group, const std::string& resource, const std::string& verb,
                     const std::string& scope) {
  return "group \"" + group + "\" " + resource + " " + verb + " (" +
         (scope.empty() ? "cluster-wide" : "namespace " + scope) + ")";
}

struct Role {
  std::string source;
  YAML::Node rules;
  bool bound = false;
};

struct Manifests {
  std::map<std::string, Role> roles;  // "ClusterRole/name" or "Role/ns/name"
  // Per ServiceAccount ("ns/name"): the grants its bindings give.
  std::map<std::string, std::vector<Grant>> grants;
  std::vector<std::string> problems;  // wildcards, dangling references, unbound roles
};

std::vector<std::string> Strings(const YAML::Node& n) {
  std::vector<std::string> out;
  if (n && n.IsSequence())
    for (const auto& v : n) out.push_back(v.as<std::string>());
  return out;
}

Manifests LoadManifests(const fs::path& deploy) {
  Manifests m;
  std::vector<std::pair<std::string, YAML::Node>> bindings;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(deploy)) {
    const std::string f = e.path().filename().string();
    if (e.is_regular_file() && f.rfind("rbac", 0) == 0 &&
        (e.path().extension() == ".yaml" || e.path().extension() == ".yml"))
      files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    const std::string rel = fs::relative(file, deploy.parent_path()).string();
    for (const YAML::Node& doc : YAML::LoadAllFromFile(file.string())) {
      if (!doc || !doc.IsMap()) continue;
      const std::string kind = doc["kind"].as<std::string>("");
      const std::string name = doc["metadata"]["name"].as<std::string>("");
      const std::string ns = doc["metadata"]["namespace"].as<std::string>("");
      if (kind == "ClusterRole") {
        m.roles["ClusterRole/" + name] = {rel + ": ClusterRole " + name, doc["rules"]};
      } else if (kind == "Role") {
        m.roles["Role/" + ns + "/" + name] = {rel + ": Role " + ns + "/" + name, doc["rules"]};
      } else if (kind == "ClusterRoleBinding" || kind == "RoleBinding") {
        bindings.emplace_back(rel, doc);
      }
    }
  }
  for (const auto& [rel, doc] : bindings) {
    const bool cluster = doc["kind"].as<std::string>() == "ClusterRoleBinding";
    const std::string ns = doc["metadata"]["namespace"].as<std::string>("");
    const std::string ref_kind = doc["roleRef"]["kind"].as<std::string>("");
    const std::string ref_name = doc["roleRef"]["name"].as<std::string>("");
    const std::string key =
        ref_kind == "ClusterRole" ? "ClusterRole/" + ref_name : "Role/" + ns + "/" + ref_name;
    const auto role = m.roles.find(key);
    if (role == m.roles.end() || (cluster && ref_kind != "ClusterRole")) {
      m.problems.push_back(rel + ": " + doc["kind"].as<std::string>() + " " +
                           doc["metadata"]["name"].as<std::string>("") + " refers to " + key +
                           ", which no RBAC manifest defines");
      continue;
    }
    role->second.bound = true;
    for (const auto& subject : doc["subjects"]) {
      if (subject["kind"].as<std::string>("") != "ServiceAccount") {
        m.problems.push_back(rel + ": binding to a " + subject["kind"].as<std::string>("") +
                             "; only ServiceAccounts are expected");
        continue;
      }
      const std::string sa =
          subject["namespace"].as<std::string>(ns) + "/" + subject["name"].as<std::string>("");
      auto& out = m.grants[sa];
      for (const auto& rule : role->second.rules) {
        if (rule["nonResourceURLs"]) {
          m.problems.push_back(role->second.source + ": nonResourceURLs are never requested");
          continue;
        }
        const auto names = Strings(rule["resourceNames"]);
        for (const auto& g : Strings(rule["apiGroups"]))
          for (const auto& res : Strings(rule["resources"]))
            for (const auto& verb : Strings(rule["verbs"])) {
              if (g == "*" || res == "*" || verb == "*")
                m.problems.push_back(role->second.source + ": wildcard in " +
                                     Describe(g, res, verb, ""));
              out.push_back({g, res, verb, cluster ? "" : ns,
                             std::set<std::string>(names.begin(), names.end()),
                             role->second.source});
            }
      }
    }
  }
  for (const auto& [key, role] : m.roles)
    if (!role.bound) m.problems.push_back(role.source + " is bound to no ServiceAccount");
  return m;
}

// The ServiceAccount ("ns/name") a component's Deployment runs as.
std::string ServiceAccountOf(const fs::path& deployment) {
  for (const YAML::Node& doc : YAML::LoadAllFromFile(deployment.string())) {
    const std::string kind = doc && doc.IsMap() ? doc["kind"].as<std::string>("") : "";
    if (kind != "Deployment" && kind != "DaemonSet") continue;
    return doc["metadata"]["namespace"].as<std::string>("default") + "/" +
           doc["spec"]["template"]["spec"]["serviceAccountName"].as<std::string>("default");
  }
  return "";
}

// Both directions; returns the report ("" when the grants are exactly what is needed).
std::string Compare(const std::string& component, const std::string& sa,
                    const std::map<Need, std::string>& needs, const std::vector<Grant>& grants) {
  std::string missing, unused;
  std::set<std::string> seen;
  for (const auto& [n, example] : needs) {
    bool covered = false;
    for (const auto& g : grants) covered |= g.Covers(n);
    const std::string line = "  missing: " + Describe(n.group, n.resource, n.verb, n.ns) +
                             (n.name.empty() ? "" : " name " + n.name) + "  (" + example + ")\n";
    if (!covered && seen.insert(line).second) missing += line;
  }
  for (const auto& g : grants) {
    bool used = false;
    for (const auto& [n, example] : needs) used |= g.Covers(n);
    std::string names;
    for (const auto& x : g.names) names += (names.empty() ? " resourceNames " : ",") + x;
    const std::string line = "  unused: " + Describe(g.group, g.resource, g.verb, g.scope) + names +
                             "  (" + g.source + ")\n";
    if (!used && seen.insert(line).second) unused += line;
  }
  if (missing.empty() && unused.empty()) return "";
  return component + " (ServiceAccount " + sa + "):\n" + missing + unused;
}

// ---- running the components -------------------------------------------------------------------

template <typename Pred>
bool WaitUntil(Pred pred, double timeout_s = 60) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

Json PodJson(const std::string& name, const std::string& gpus, int priority = 0,
             const std::string& scheduler = "tessera") {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "ml"}}},
          {"spec",
           {{"schedulerName", scheduler},
            {"priority", priority},
            {"containers", Json::array({{{"name", "main"},
                                         {"resources",
                                          {{"limits", {{"nvidia.com/gpu", gpus}}},
                                           {"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}})}}}};
}

std::string NodeOf(const FakeApiServer& s, const std::string& pod) {
  const auto p = s.Get("/api/v1/namespaces/ml/pods/" + pod);
  return p ? (*p)["spec"].value("nodeName", "") : "";
}

const fs::path kDeploy = fs::path(test::SourceDir()) / "deploy";

// The requests of `tessera scheduler`, run with the deployed leader election settings.
std::vector<RecordedRequest> SchedulerRequests() {
  FakeApiServer server;
  EXPECT_TRUE(server.Start().ok());
  auto client = Client::Create(server.client_config());
  EXPECT_TRUE(client.ok());
  if (!client.ok()) return {};

  SchedulerRuntimeConfig cfg;
  const YAML::Node cm = YAML::LoadFile((kDeploy / "scheduler" / "configmap.yaml").string());
  auto deployed = ParseSchedulerConfig(cm["data"]["config.yaml"].as<std::string>());
  EXPECT_TRUE(deployed.ok()) << deployed.status().ToString();
  if (!deployed.ok()) return {};
  cfg.leader = deployed->leader;
  cfg.leader_elect = true;  // deploy/scheduler/deployment.yaml passes --leader-elect
  cfg.leader.identity = "replica-a";
  cfg.pod_conditions = deployed->pod_conditions;
  cfg.pod_events = deployed->pod_events;
  cfg.cycle_interval_s = 0.01;
  cfg.core.gang_settle_s = 0;
  EXPECT_TRUE(cfg.pod_conditions && cfg.pod_events);

  EXPECT_TRUE(server.Create("/api/v1/nodes", kubetest::GpuNodeJson("gpu-node-0", 2)).ok());
  EXPECT_TRUE(server.Create("/api/v1/namespaces/ml/pods", PodJson("low", "2")).ok());
  EXPECT_TRUE(server.Create("/api/v1/namespaces/ml/pods", PodJson("invalid", "1.5")).ok());
  {
    Scheduler sched(**client, cfg);
    std::atomic<bool> stop{false};
    std::thread run([&] { EXPECT_TRUE(sched.Run(stop).ok()); });
    // Binding, and a notice for the invalid request (status patch and Event).
    EXPECT_TRUE(WaitUntil([&] { return NodeOf(server, "low") == "gpu-node-0"; }));
    EXPECT_TRUE(WaitUntil([&] { return sched.stats().notices >= 1; }));
    // Preemption: a higher-priority pod evicts the bound one, then binds.
    EXPECT_TRUE(server.Create("/api/v1/namespaces/ml/pods", PodJson("high", "2", 10)).ok());
    EXPECT_TRUE(WaitUntil([&] { return NodeOf(server, "high") == "gpu-node-0"; }));
    // A MIG pod no layout can host: the scheduler records a MIG layout for the idle A100 (the
    // MigLayout object is created), the node reports it applied, and the pod binds.
    EXPECT_TRUE(
        server.Create("/api/v1/nodes", kubetest::GpuNodeJson("mig-node", 1, "A100-80GB")).ok());
    Json mig = PodJson("mig", "1");
    mig["spec"]["containers"][0]["resources"]["limits"] = {{"nvidia.com/mig-3g.40gb", "1"}};
    EXPECT_TRUE(server.Create("/api/v1/namespaces/ml/pods", mig).ok());
    const std::string layout_path = std::string(kMigLayoutsPath) + "/mig-node";
    EXPECT_TRUE(WaitUntil([&] { return server.Get(layout_path).has_value(); }));
    if (auto obj = server.Get(layout_path)) {
      const Json& g = (*obj)["spec"]["gpus"]["0"];
      EXPECT_TRUE(server
                      .MergePatch(layout_path, {{"status",
                                                 {{"gpus",
                                                   {{"0",
                                                     {{"observedRevision", g.value("revision", 0)},
                                                      {"state", "Applied"},
                                                      {"layout", g.value("layout", "")}}}}}}}})
                      .ok());
    }
    EXPECT_TRUE(WaitUntil([&] { return NodeOf(server, "mig") == "mig-node"; }));
    stop = true;
    run.join();
    const RuntimeStats st = sched.stats();
    EXPECT_GE(st.binds_ok, 2);
    EXPECT_GE(st.evictions, 1);
    EXPECT_GE(st.notices, 1);
  }
  EXPECT_FALSE(server.List("/apis/events.k8s.io/v1/namespaces/ml/events").empty());
  client->reset();
  return server.Requests();
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "tessera-rbac-XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A child process, terminated (SIGTERM, then SIGKILL) and reaped on destruction.
class Child {
 public:
  Child(const std::vector<std::string>& args, const fs::path& stderr_file) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Child() { Stop(); }
  bool running() const { return pid_ > 0; }
  // SIGTERM, waits up to 20 s, then SIGKILL. The exit status (-1 if killed or not started).
  int Stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 1000; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return -1;
  }

 private:
  pid_t pid_ = -1;
};

// The --help text of a `tessera` subcommand.
std::string HelpOf(const std::string& command) {
  std::string out;
  if (FILE* f =
          popen(("'" + test::TesseraBinary() + "' " + command + " --help 2>&1").c_str(), "r")) {
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
    pclose(f);
  }
  return out;
}

bool Watched(const FakeApiServer& s, const std::string& path) {
  for (const auto& r : s.Requests())
    if (r.method == "GET" && r.path == path && r.query.count("watch")) return true;
  return false;
}

// The requests of `tessera extender`: the binary with a kubeconfig for the fake API server,
// asked to bind a GPU pod through its HTTP front end.
std::vector<RecordedRequest> ExtenderRequests() {
  FakeApiServer server;
  EXPECT_TRUE(server.Start().ok());
  EXPECT_TRUE(server.Create("/api/v1/nodes", kubetest::GpuNodeJson("gpu-node-0", 2)).ok());
  auto pod = server.Create("/api/v1/namespaces/ml/pods", PodJson("infer", "1", 0, "tessera"));
  EXPECT_TRUE(pod.ok());
  if (!pod.ok()) return {};
  const std::string uid = (*pod)["metadata"]["uid"];

  TempDir dir;
  const fs::path kubeconfig = dir.path() / "kubeconfig";
  std::ofstream(kubeconfig)
      << "apiVersion: v1\nkind: Config\n"
      << "clusters: [{name: fake, cluster: {server: \"" << server.url() << "\"}}]\n"
      << "users: [{name: extender, user: {token: test-token}}]\n"
      << "contexts: [{name: fake, context: {cluster: fake, user: extender}}]\n"
      << "current-context: fake\n";
  const fs::path log = dir.path() / "extender.log";
  std::vector<std::string> args = {
      test::TesseraBinary(), "extender", "--kubeconfig", kubeconfig.string(), "--listen",
      "127.0.0.1:0",         "--prefix", "/tessera"};
  // Plain HTTP on loopback, where the binary requires saying so.
  if (HelpOf("extender").find("--insecure") != std::string::npos) args.push_back("--insecure");
  Child child(args, log);
  EXPECT_TRUE(child.running());
  if (!child.running()) return {};
  int port = 0;
  const std::string marker = "on 127.0.0.1:";
  EXPECT_TRUE(WaitUntil([&] {
    const std::string text = ReadFile(log);
    const size_t at = text.find(marker);
    if (at == std::string::npos) return false;
    port = std::atoi(text.c_str() + at + marker.size());
    return port > 0;
  })) << ReadFile(log);
  // Informers: the initial lists happen before serving; wait for both watches.
  EXPECT_TRUE(WaitUntil(
      [&] { return Watched(server, "/api/v1/nodes") && Watched(server, "/api/v1/pods"); }));
  httplib::Client http("127.0.0.1", port);
  const Json bind_args = {
      {"PodName", "infer"}, {"PodNamespace", "ml"}, {"PodUID", uid}, {"Node", "gpu-node-0"}};
  auto res = http.Post("/tessera/bind", bind_args.dump(), "application/json");
  EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no reply");
  if (res) {
    EXPECT_EQ(Json::parse(res->body, nullptr, false).value("Error", "?"), "") << res->body;
  }
  EXPECT_EQ(NodeOf(server, "infer"), "gpu-node-0") << ReadFile(log);
  (void)child.Stop();

  return server.Requests();
}

#ifdef TESSERA_HAVE_FAKE_NVML
std::vector<RecordedRequest> AgentRequests() {
  FakeApiServer server;
  EXPECT_TRUE(server.Start().ok());
  EXPECT_TRUE(server.Create("/api/v1/nodes", kubetest::GpuNodeJson("gpu-node-0", 1)).ok());
  const std::string layout_path = std::string(kMigLayoutsPath) + "/gpu-node-0";
  EXPECT_TRUE(server
                  .Create(kMigLayoutsPath, {{"apiVersion", "tessera.io/v1alpha1"},
                                            {"kind", "MigLayout"},
                                            {"metadata", {{"name", "gpu-node-0"}}},
                                            {"spec",
                                             {{"nodeName", "gpu-node-0"},
                                              {"gpus",
                                               {{"0",
                                                 {{"revision", 1},
                                                  {"migEnabled", true},
                                                  {"layout", "3g.40gb@0 3g.40gb@4"}}}}}}}})
                  .ok());
  TempDir dir;
  const fs::path kubeconfig = dir.path() / "kubeconfig";
  std::ofstream(kubeconfig) << "apiVersion: v1\nkind: Config\n"
                            << "clusters: [{name: fake, cluster: {server: \"" << server.url()
                            << "\"}}]\n"
                            << "users: [{name: agent, user: {token: test-token}}]\n"
                            << "contexts: [{name: fake, context: {cluster: fake, user: agent}}]\n"
                            << "current-context: fake\n";
  const fs::path nvml = dir.path() / "nvml.json";
  std::ofstream(nvml) << R"({"gpus": [{"model": "A100-80GB", "uuid": "GPU-rbac-0", "mig": true,
                             "mig_layout": "3g.40gb@0 3g.40gb@4"}]})";
  setenv("LD_LIBRARY_PATH", test::FakeNvmlDir().c_str(), 1);
  setenv("TESSERA_FAKE_NVML_CONFIG", nvml.c_str(), 1);
  const std::string d = dir.path().string();
  Child child({test::TesseraBinary(),
               "agent",
               "--node",
               "gpu-node-0",
               "--kubeconfig",
               kubeconfig.string(),
               "--plugin-dir",
               d,
               "--cdi-dir",
               d + "/cdi",
               "--mps-root",
               d + "/mps",
               "--mps-control",
               d + "/no-mps-control",
               "--state-dir",
               d + "/state",
               "--metrics-address",
               "127.0.0.1:0",
               "--interval",
               "0.2"},
              dir.path() / "agent.log");
  unsetenv("TESSERA_FAKE_NVML_CONFIG");
  unsetenv("LD_LIBRARY_PATH");
  EXPECT_TRUE(child.running());
  if (!child.running()) return {};
  EXPECT_TRUE(WaitUntil([&] {
    Json layout = server.Get(layout_path).value_or(Json::object());
    Json node = server.Get("/api/v1/nodes/gpu-node-0").value_or(Json::object());
    const Json state = layout["status"]["gpus"]["0"]["state"];
    const Json inventory = node["metadata"]["annotations"][kAnnotationInventory];
    return state == "Applied" && inventory.is_string() &&
           inventory.get<std::string>().find("GPU-rbac-0") != std::string::npos;
  })) << ReadFile(dir.path() / "agent.log");
  EXPECT_EQ(child.Stop(), 0) << ReadFile(dir.path() / "agent.log");
  return server.Requests();
}
#endif

// ---- the test ---------------------------------------------------------------------------------

TEST(RbacTest, MappingOfRequestsToPermissions) {
  auto need = [](const std::string& method, const std::string& target,
                 std::multimap<std::string, std::string> query = {}) {
    Need n;
    std::string error;
    EXPECT_TRUE(NeedOf({method, target, "", std::move(query), ""}, &n, &error)) << error;
    return n.group + "|" + n.resource + "|" + n.verb + "|" + n.ns + "|" + n.name;
  };
  EXPECT_EQ(need("GET", "/api/v1/pods?limit=500"), "|pods|list||");
  EXPECT_EQ(need("GET", "/api/v1/pods?watch=true", {{"watch", "true"}}), "|pods|watch||");
  EXPECT_EQ(need("GET", "/api/v1/namespaces/ml/pods/a"), "|pods|get|ml|a");
  EXPECT_EQ(need("POST", "/api/v1/namespaces/ml/pods/a/binding"), "|pods/binding|create|ml|a");
  EXPECT_EQ(need("PATCH", "/api/v1/namespaces/ml/pods/a/status"), "|pods/status|patch|ml|a");
  EXPECT_EQ(need("PUT", "/apis/coordination.k8s.io/v1/namespaces/s/leases/l"),
            "coordination.k8s.io|leases|update|s|l");
  EXPECT_EQ(need("POST", "/apis/events.k8s.io/v1/namespaces/ml/events"),
            "events.k8s.io|events|create|ml|");
  EXPECT_EQ(need("GET", "/apis/tessera.io/v1alpha1/queues"), "tessera.io|queues|list||");
  EXPECT_EQ(need("DELETE", "/api/v1/nodes/n%2Ex"), "|nodes|delete||n.x");
  EXPECT_EQ(need("DELETE", "/api/v1/namespaces/ml/pods"), "|pods|deletecollection|ml|");
  // A cluster-wide grant covers every namespace; a namespaced one only its own; resourceNames
  // only the named objects.
  Need lease{"coordination.k8s.io", "leases", "get", "s", "l"};
  EXPECT_TRUE((Grant{"coordination.k8s.io", "leases", "get", "", {}, ""}).Covers(lease));
  EXPECT_TRUE((Grant{"coordination.k8s.io", "leases", "get", "s", {"l"}, ""}).Covers(lease));
  EXPECT_FALSE((Grant{"coordination.k8s.io", "leases", "get", "t", {}, ""}).Covers(lease));
  EXPECT_FALSE((Grant{"coordination.k8s.io", "leases", "get", "s", {"m"}, ""}).Covers(lease));
  EXPECT_FALSE((Grant{"", "pods", "list", "ml", {}, ""}).Covers({"", "pods", "list", "", ""}));
}

TEST(RbacTest, ManifestsGrantExactlyWhatTheComponentsCall) {
  const Manifests m = LoadManifests(kDeploy);
  for (const auto& p : m.problems) ADD_FAILURE() << p;
  struct Component {
    std::string name, workload;  // deploy/<name>/<workload>
    std::vector<RecordedRequest> requests;
  };
  std::vector<Component> components = {{"scheduler", "deployment.yaml", SchedulerRequests()},
                                       {"extender", "deployment.yaml", ExtenderRequests()}};
#ifdef TESSERA_HAVE_FAKE_NVML
  components.push_back({"agent", "daemonset.yaml", AgentRequests()});
#endif
  std::set<std::string> accounts;
  std::string report;
  for (const auto& [component, workload, requests] : components) {
    ASSERT_FALSE(requests.empty()) << component << " made no request";
    const std::string sa = ServiceAccountOf(kDeploy / component / workload);
    ASSERT_FALSE(sa.empty()) << "no workload in deploy/" << component << "/" << workload;
    accounts.insert(sa);
    const auto it = m.grants.find(sa);
    report += Compare("tessera " + component, sa, NeedsOf(requests),
                      it == m.grants.end() ? std::vector<Grant>{} : it->second);
  }
  for (const auto& [sa, grants] : m.grants)
#ifndef TESSERA_HAVE_FAKE_NVML
    if (sa != "tessera-system/tessera-agent")  // the build cannot run the agent
#endif
      if (!accounts.count(sa))
        report += "ServiceAccount " + sa + " has RBAC bindings but runs no component\n";
  EXPECT_TRUE(report.empty()) << "RBAC differs from the API calls the code makes:\n" << report;
}

}  // namespace
}  // namespace tessera::kube
