// Checks every manifest under deploy/: structure, least-privilege RBAC, the scheduler and
// extender wiring, CRD schemas (structural, with validation) and the samples against them, and
// that sample pods translate.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "kube/scheduler.h"
#include "kube/translate.h"
#include "tests/support/test_paths.h"

namespace tessera::kube {
namespace {

namespace fs = std::filesystem;

struct Doc {
  std::string file;  // relative to deploy/
  YAML::Node node;
  std::string kind() const { return node["kind"].as<std::string>(""); }
  std::string name() const { return node["metadata"]["name"].as<std::string>(""); }
  std::string ns() const { return node["metadata"]["namespace"].as<std::string>(""); }
};

const std::vector<Doc>& AllDocs() {
  static const std::vector<Doc> docs = [] {
    std::vector<Doc> out;
    const fs::path root = fs::path(test::SourceDir()) / "deploy";
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(root))
      if (e.is_regular_file() &&
          (e.path().extension() == ".yaml" || e.path().extension() == ".yml"))
        files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::vector<YAML::Node> nodes;
      try {
        nodes = YAML::LoadAllFromFile(f.string());
      } catch (const YAML::Exception& e) {
        ADD_FAILURE() << f << ": " << e.what();
      }
      for (const auto& n : nodes)
        if (n && !n.IsNull()) out.push_back({fs::relative(f, root).string(), n});
    }
    return out;
  }();
  return docs;
}

std::vector<Doc> OfKind(const std::string& kind) {
  std::vector<Doc> out;
  for (const auto& d : AllDocs())
    if (d.kind() == kind) out.push_back(d);
  return out;
}

const Doc* Find(const std::string& kind, const std::string& name) {
  for (const auto& d : AllDocs())
    if (d.kind() == kind && d.name() == name) return &d;
  return nullptr;
}

std::vector<std::string> Strings(const YAML::Node& seq) {
  std::vector<std::string> out;
  if (seq && seq.IsSequence())
    for (const auto& s : seq) out.push_back(s.as<std::string>());
  return out;
}

Json ToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      Json o = Json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = ToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      for (const auto& v : n) a.push_back(ToJson(v));
      return a;
    }
    case YAML::NodeType::Scalar:
      return n.as<std::string>();
    default:
      return nullptr;
  }
}

// ---- A structural validator for the OpenAPI v3 subset the CRDs use ----

bool ParseInt(const std::string& s, int64_t& out) {
  static const std::regex kInt("^[-+]?[0-9]+$");
  if (!std::regex_match(s, kInt)) return false;
  out = std::stoll(s);
  return true;
}

bool ParseNumber(const std::string& s, double& out) {
  static const std::regex kNum("^[-+]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?$");
  if (!std::regex_match(s, kNum)) return false;
  out = std::stod(s);
  return true;
}

void ValidateSchema(const YAML::Node& schema, const YAML::Node& v, const std::string& path,
                    std::vector<std::string>& errors) {
  auto err = [&](const std::string& m) { errors.push_back(path + ": " + m); };
  const std::string type = schema["type"].as<std::string>("");
  if (type == "object") {
    if (!v.IsMap()) return err("expected an object");
    for (const auto& r : Strings(schema["required"]))
      if (!v[r]) err("missing required field " + r);
    const YAML::Node props = schema["properties"];
    if (!props) return;  // free-form object (e.g. metadata)
    for (const auto& kv : v) {
      const std::string k = kv.first.as<std::string>();
      if (!props[k])
        err("unknown field " + k);
      else
        ValidateSchema(props[k], kv.second, path + "." + k, errors);
    }
    return;
  }
  if (type == "array") {
    if (!v.IsSequence()) return err("expected a list");
    if (schema["minItems"] && v.size() < schema["minItems"].as<size_t>())
      err("fewer than " + schema["minItems"].as<std::string>() + " items");
    if (schema["maxItems"] && v.size() > schema["maxItems"].as<size_t>())
      err("more than " + schema["maxItems"].as<std::string>() + " items");
    for (size_t i = 0; i < v.size(); ++i)
      ValidateSchema(schema["items"], v[i], path + "[" + std::to_string(i) + "]", errors);
    return;
  }
  if (!v.IsScalar()) return err("expected a " + type);
  const std::string s = v.as<std::string>();
  if (schema["enum"]) {
    const auto values = Strings(schema["enum"]);
    if (std::find(values.begin(), values.end(), s) == values.end())
      err("\"" + s + "\" is not one of the allowed values");
  }
  if (type == "string") {
    if (schema["pattern"] && !std::regex_search(s, std::regex(schema["pattern"].as<std::string>())))
      err("\"" + s + "\" does not match " + schema["pattern"].as<std::string>());
    if (schema["maxLength"] && s.size() > schema["maxLength"].as<size_t>()) err("too long");
    if (schema["minLength"] && s.size() < schema["minLength"].as<size_t>()) err("too short");
    return;
  }
  if (type == "boolean") {
    if (s != "true" && s != "false") err("expected a boolean");
    return;
  }
  double x = 0;
  if (type == "integer") {
    int64_t i = 0;
    if (!ParseInt(s, i)) return err("expected an integer, got \"" + s + "\"");
    x = static_cast<double>(i);
  } else if (type == "number") {
    if (!ParseNumber(s, x)) return err("expected a number, got \"" + s + "\"");
  } else {
    return err("schema has unsupported type \"" + type + "\"");
  }
  const bool exclusive = schema["exclusiveMinimum"] && schema["exclusiveMinimum"].as<bool>();
  if (schema["minimum"] &&
      (x < schema["minimum"].as<double>() || (exclusive && x == schema["minimum"].as<double>())))
    err(s + (exclusive ? " is not above the minimum " : " is below the minimum ") +
        schema["minimum"].as<std::string>());
  if (schema["maximum"] && x > schema["maximum"].as<double>())
    err(s + " is above the maximum " + schema["maximum"].as<std::string>());
}

// Structural schema: every node has a type; objects list their properties (except metadata).
void CheckStructural(const YAML::Node& schema, const std::string& path,
                     std::vector<std::string>& errors) {
  static const std::set<std::string> kTypes = {"object",  "array",  "string",
                                               "integer", "number", "boolean"};
  const std::string type = schema["type"].as<std::string>("");
  if (!kTypes.count(type)) errors.push_back(path + ": missing or unknown type");
  if (schema["pattern"]) {
    try {
      std::regex re(schema["pattern"].as<std::string>());
    } catch (const std::regex_error&) {
      errors.push_back(path + ": bad pattern");
    }
  }
  if (type == "object" && schema["properties"])
    for (const auto& kv : schema["properties"])
      CheckStructural(kv.second, path + "." + kv.first.as<std::string>(), errors);
  if (type == "object" && !schema["properties"] && path.find("metadata") == std::string::npos)
    errors.push_back(path + ": object without properties");
  if (type == "array") {
    if (!schema["items"])
      errors.push_back(path + ": array without items");
    else
      CheckStructural(schema["items"], path + "[]", errors);
  }
  for (const auto& r : Strings(schema["required"]))
    if (!schema["properties"] || !schema["properties"][r])
      errors.push_back(path + ": required field " + r + " is not a property");
  if (schema["default"]) {
    std::vector<std::string> def;
    ValidateSchema(schema, schema["default"], path + "(default)", def);
    errors.insert(errors.end(), def.begin(), def.end());
  }
}

YAML::Node CrdSchema(const std::string& crd_name) {
  const Doc* d = Find("CustomResourceDefinition", crd_name);
  if (!d) {
    ADD_FAILURE() << "CRD " << crd_name << " missing";
    return YAML::Node();
  }
  return d->node["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
}

std::vector<std::string> Validate(const std::string& crd_name, const YAML::Node& obj) {
  std::vector<std::string> errors;
  ValidateSchema(CrdSchema(crd_name), obj, obj["kind"].as<std::string>("?"), errors);
  return errors;
}

// ---- Tests ----

TEST(Manifests, EveryDocumentHasIdentityAndKnownKind) {
  const std::set<std::string> kKnown = {"Namespace",
                                        "ServiceAccount",
                                        "ClusterRole",
                                        "ClusterRoleBinding",
                                        "Role",
                                        "RoleBinding",
                                        "ConfigMap",
                                        "Deployment",
                                        "DaemonSet",
                                        "Service",
                                        "NetworkPolicy",
                                        "CustomResourceDefinition",
                                        "PrometheusRule",
                                        "Pod",
                                        "Job",
                                        "PriorityClass",
                                        "Queue",
                                        "WorkloadGroup",
                                        "MutatingWebhookConfiguration"};
  const std::set<std::string> kClusterScoped = {
      "Namespace",     "ClusterRole", "ClusterRoleBinding",          "CustomResourceDefinition",
      "PriorityClass", "Queue",       "MutatingWebhookConfiguration"};
  ASSERT_GE(AllDocs().size(), 25u);
  std::set<std::string> dirs;
  for (const auto& d : AllDocs()) {
    SCOPED_TRACE(d.file + " " + d.kind() + "/" + d.name());
    EXPECT_FALSE(d.node["apiVersion"].as<std::string>("").empty());
    EXPECT_TRUE(kKnown.count(d.kind())) << "unknown kind " << d.kind();
    EXPECT_FALSE(d.name().empty());
    if (!kClusterScoped.count(d.kind())) {
      EXPECT_FALSE(d.ns().empty()) << "namespace missing";
    }
    dirs.insert(d.file.substr(0, d.file.find('/')));
  }
  EXPECT_EQ(dirs, (std::set<std::string>{"agent", "crds", "extender", "monitoring", "samples",
                                         "scheduler", "webhook"}));
}

TEST(Manifests, RbacIsLeastPrivilege) {
  std::map<std::string, std::set<std::string>> grants;  // "role|group/resource" -> verbs
  for (const std::string kind : {"ClusterRole", "Role"}) {
    for (const auto& d : OfKind(kind)) {
      ASSERT_TRUE(d.node["rules"].IsSequence()) << d.name();
      for (const auto& rule : d.node["rules"]) {
        const auto verbs = Strings(rule["verbs"]);
        const auto resources = Strings(rule["resources"]);
        const auto groups = Strings(rule["apiGroups"]);
        EXPECT_FALSE(verbs.empty());
        EXPECT_FALSE(resources.empty());
        for (const auto* list : {&verbs, &resources, &groups})
          for (const auto& s : *list) EXPECT_EQ(s.find('*'), std::string::npos) << d.name();
        for (const auto& g : groups)
          for (const auto& r : resources)
            grants[d.name() + "|" + g + "/" + r].insert(verbs.begin(), verbs.end());
      }
    }
  }
  auto has = [&](const std::string& key, const std::string& verb) {
    return grants.count(key) && grants[key].count(verb);
  };
  // Which verbs each component needs is derived from its code and compared with these roles,
  // both ways, by tests/security/rbac_test.cc; here only the structure is checked.
  EXPECT_TRUE(has("tessera-scheduler|/pods/binding", "create"));
  EXPECT_TRUE(has("tessera-extender|/pods/binding", "create"));
  // The node agent patches nodes and MigLayout status, and never binds, evicts or writes pods.
  EXPECT_TRUE(has("tessera-agent|/nodes", "patch"));
  EXPECT_TRUE(has("tessera-agent|tessera.io/miglayouts/status", "patch"));
  EXPECT_FALSE(grants.count("tessera-agent|/pods/binding"));
  EXPECT_FALSE(has("tessera-agent|/pods", "patch"));
  // Leases only in the scheduler's namespace, never cluster-wide; nothing may delete.
  EXPECT_FALSE(grants.count("tessera-scheduler|coordination.k8s.io/leases"));
  EXPECT_EQ(Find("Role", "tessera-scheduler-leader-election")->ns(), "tessera-system");
  for (const auto& [key, verbs] : grants) {
    EXPECT_FALSE(verbs.count("delete")) << key;
    EXPECT_FALSE(verbs.count("deletecollection")) << key;
    EXPECT_EQ(key.find("secrets"), std::string::npos) << key;
  }
  // Every binding points at an existing role and service account.
  for (const std::string kind : {"ClusterRoleBinding", "RoleBinding"}) {
    for (const auto& d : OfKind(kind)) {
      const std::string role_kind = d.node["roleRef"]["kind"].as<std::string>();
      EXPECT_NE(Find(role_kind, d.node["roleRef"]["name"].as<std::string>()), nullptr) << d.name();
      for (const auto& s : d.node["subjects"]) {
        const Doc* sa = Find("ServiceAccount", s["name"].as<std::string>());
        ASSERT_NE(sa, nullptr) << d.name();
        EXPECT_EQ(sa->ns(), s["namespace"].as<std::string>());
      }
    }
  }
}

TEST(Manifests, SchedulerDeployment) {
  const Doc* d = Find("Deployment", "tessera-scheduler");
  ASSERT_NE(d, nullptr);
  const YAML::Node spec = d->node["spec"];
  EXPECT_EQ(spec["replicas"].as<int>(), 2);
  const YAML::Node pod = spec["template"]["spec"];
  EXPECT_TRUE(pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]);
  EXPECT_EQ(pod["serviceAccountName"].as<std::string>(), "tessera-scheduler");
  const YAML::Node c = pod["containers"][0];
  std::vector<std::string> cmd = Strings(c["command"]);
  const auto args = Strings(c["args"]);
  cmd.insert(cmd.end(), args.begin(), args.end());
  EXPECT_EQ(cmd, (std::vector<std::string>{"tessera", "scheduler", "--config",
                                           "/etc/tessera/config.yaml", "--leader-elect"}));
  EXPECT_TRUE(c["livenessProbe"]);
  EXPECT_TRUE(c["readinessProbe"]);
  EXPECT_TRUE(c["resources"]["requests"]["cpu"]);
  EXPECT_TRUE(c["resources"]["limits"]["memory"]);
  // The selector matches the template, the Service selects the pods, the config is mounted.
  const std::string app =
      spec["selector"]["matchLabels"]["app.kubernetes.io/name"].as<std::string>();
  EXPECT_EQ(spec["template"]["metadata"]["labels"]["app.kubernetes.io/name"].as<std::string>(),
            app);
  const Doc* svc = Find("Service", "tessera-scheduler-metrics");
  ASSERT_NE(svc, nullptr);
  EXPECT_EQ(svc->node["spec"]["selector"]["app.kubernetes.io/name"].as<std::string>(), app);
  const std::string cm = pod["volumes"][0]["configMap"]["name"].as<std::string>();
  EXPECT_EQ(c["volumeMounts"][0]["mountPath"].as<std::string>(), "/etc/tessera");
  const Doc* config = Find("ConfigMap", cm);
  ASSERT_NE(config, nullptr);

  // The configuration parses and validates with the scheduler's own loader.
  auto cfg = ParseSchedulerConfig(config->node["data"]["config.yaml"].as<std::string>());
  ASSERT_TRUE(cfg.ok()) << cfg.status().message();
  EXPECT_TRUE(cfg->Validate().ok()) << cfg->Validate().message();
  EXPECT_EQ(cfg->leader.ns, d->ns());
  EXPECT_EQ(cfg->core.scheduler_name, "tessera");
}

TEST(Manifests, AgentDaemonSet) {
  const Doc* d = Find("DaemonSet", "tessera-agent");
  ASSERT_NE(d, nullptr);
  const YAML::Node spec = d->node["spec"];
  const YAML::Node pod = spec["template"]["spec"];
  EXPECT_EQ(pod["serviceAccountName"].as<std::string>(), "tessera-agent");
  EXPECT_TRUE(pod["nodeSelector"].IsMap());
  const YAML::Node c = pod["containers"][0];
  const auto args = Strings(c["args"]);
  ASSERT_FALSE(args.empty());
  EXPECT_EQ(args[0], "agent");
  EXPECT_NE(std::find(args.begin(), args.end(), "--node=$(NODE_NAME)"), args.end());
  bool node_from_downward_api = false;
  for (const auto& e : c["env"])
    if (e["name"].as<std::string>() == "NODE_NAME")
      node_from_downward_api =
          e["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>("") == "spec.nodeName";
  EXPECT_TRUE(node_from_downward_api);
  EXPECT_TRUE(c["securityContext"]["privileged"].as<bool>(false));
  EXPECT_TRUE(c["livenessProbe"]);
  EXPECT_TRUE(c["resources"]["limits"]["memory"]);
  std::set<std::string> host_paths, mounts;
  for (const auto& v : pod["volumes"]) host_paths.insert(v["hostPath"]["path"].as<std::string>(""));
  for (const auto& m : c["volumeMounts"]) mounts.insert(m["mountPath"].as<std::string>(""));
  for (const char* p : {"/var/lib/kubelet/device-plugins", "/var/run/cdi", "/run/tessera/mps",
                        "/var/lib/tessera/agent"}) {
    EXPECT_TRUE(host_paths.count(p)) << p;
    EXPECT_TRUE(mounts.count(p)) << p;
  }
  EXPECT_EQ(spec["selector"]["matchLabels"]["app.kubernetes.io/name"].as<std::string>(),
            spec["template"]["metadata"]["labels"]["app.kubernetes.io/name"].as<std::string>());
}

TEST(Manifests, ExtenderWiring) {
  const Doc* d = Find("Deployment", "tessera-extender");
  ASSERT_NE(d, nullptr);
  const YAML::Node c = d->node["spec"]["template"]["spec"]["containers"][0];
  const auto args = Strings(c["args"]);
  ASSERT_GE(args.size(), 1u);
  EXPECT_EQ(args[0], "extender");
  std::map<std::string, std::string> flags;  // --flag=value or --flag value
  for (size_t i = 1; i < args.size(); ++i) {
    const size_t eq = args[i].find('=');
    if (eq != std::string::npos) {
      flags[args[i].substr(0, eq)] = args[i].substr(eq + 1);
    } else if (i + 1 < args.size()) {
      flags[args[i]] = args[i + 1];
      ++i;
    }
  }
  const std::string prefix = flags["--prefix"], listen = flags["--listen"];
  // HTTPS with client certificates, never the insecure mode.
  EXPECT_EQ(flags.count("--insecure"), 0u);
  for (const char* f : {"--tls-cert", "--tls-key", "--client-ca", "--allowed-client-names"})
    EXPECT_FALSE(flags[f].empty()) << f;
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"].as<std::string>(), "/healthz");
  // Probes use the plain health port, which serves no verb.
  const std::string health = flags["--health-listen"];
  ASSERT_FALSE(health.empty());
  for (const YAML::Node& p : c["ports"]) {
    if (p["name"].as<std::string>() != c["livenessProbe"]["httpGet"]["port"].as<std::string>())
      continue;
    EXPECT_EQ(p["containerPort"].as<std::string>(), health.substr(health.rfind(':') + 1));
  }

  const Doc* cm = Find("ConfigMap", "kube-scheduler-tessera-extender");
  ASSERT_NE(cm, nullptr);
  const YAML::Node ksc =
      YAML::Load(cm->node["data"]["kube-scheduler-config.yaml"].as<std::string>());
  EXPECT_EQ(ksc["apiVersion"].as<std::string>(), "kubescheduler.config.k8s.io/v1");
  EXPECT_EQ(ksc["kind"].as<std::string>(), "KubeSchedulerConfiguration");
  ASSERT_EQ(ksc["extenders"].size(), 1u);
  const YAML::Node e = ksc["extenders"][0];
  const std::string url = e["urlPrefix"].as<std::string>();
  const Doc* svc = Find("Service", "tessera-extender");
  ASSERT_NE(svc, nullptr);
  const std::string port = svc->node["spec"]["ports"][0]["port"].as<std::string>();
  EXPECT_EQ(url, "https://tessera-extender." + svc->ns() + ".svc:" + port + prefix);
  EXPECT_TRUE(e["enableHTTPS"].as<bool>());
  for (const char* f : {"certFile", "keyFile", "caFile"})
    EXPECT_FALSE(e["tlsConfig"][f].as<std::string>().empty()) << f;
  EXPECT_EQ(listen.substr(listen.rfind(':') + 1), port);
  EXPECT_EQ(e["filterVerb"].as<std::string>(), "filter");
  EXPECT_EQ(e["prioritizeVerb"].as<std::string>(), "prioritize");
  EXPECT_EQ(e["bindVerb"].as<std::string>(), "bind");
  EXPECT_EQ(e["preemptVerb"].as<std::string>(), "preempt");
  EXPECT_GT(e["weight"].as<int>(), 0);
  EXPECT_TRUE(e["nodeCacheCapable"].as<bool>());
  std::map<std::string, bool> managed;
  for (const auto& r : e["managedResources"])
    managed[r["name"].as<std::string>()] = r["ignoredByScheduler"].as<bool>();
  EXPECT_FALSE(managed.at("nvidia.com/gpu"));
  EXPECT_TRUE(managed.at("tessera.io/gpu-memory"));
  EXPECT_TRUE(managed.at("tessera.io/gpu-compute"));
  EXPECT_TRUE(managed.at("nvidia.com/gpumem"));
  EXPECT_TRUE(managed.at("nvidia.com/gpucores"));
  EXPECT_TRUE(managed.count("nvidia.com/mig-3g.40gb"));
}

TEST(Manifests, PrometheusRules) {
  const auto rules = OfKind("PrometheusRule");
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules[0].node["apiVersion"].as<std::string>(), "monitoring.coreos.com/v1");
  std::set<std::string> alerts, records;
  // Tessera's own series, DCGM exporter series (the GPU alerts) or a scrape target's `up`.
  static const std::regex kMetric("\\b(tessera_[a-z_]+|DCGM_FI_[A-Z_]+|up\\{)");
  // Recording rules are named level:metric:operations.
  static const std::regex kRecord("^tessera:[a-z_]+:[a-z_]+$");
  for (const auto& g : rules[0].node["spec"]["groups"]) {
    for (const auto& r : g["rules"]) {
      if (r["record"]) {
        const std::string record = r["record"].as<std::string>();
        records.insert(record);
        EXPECT_TRUE(std::regex_match(record, kRecord)) << record;
        EXPECT_TRUE(std::regex_search(r["expr"].as<std::string>(), kMetric)) << record;
        continue;
      }
      const std::string alert = r["alert"].as<std::string>();
      alerts.insert(alert);
      const std::string expr = r["expr"].as<std::string>();
      EXPECT_TRUE(r["labels"]["severity"]) << alert;
      EXPECT_TRUE(r["annotations"]["summary"]) << alert;
      if (alert != "TesseraExtenderDown") {
        EXPECT_TRUE(std::regex_search(expr, kMetric)) << alert << ": " << expr;
      }
    }
  }
  for (const char* a : {"TesseraPodsPendingTooLong", "TesseraNoLeader", "TesseraBindingErrors",
                        "TesseraGpuFragmentationHigh"})
    EXPECT_TRUE(alerts.count(a)) << a;
  EXPECT_TRUE(records.count("tessera:gpu_allocated_idle:gpus"));
}

TEST(Crds, StructuralSchemasWithValidation) {
  struct Want {
    const char* crd;
    const char* kind;
    const char* scope;
    std::vector<std::string> spec_required;
  };
  for (const Want& w :
       {Want{"queues.tessera.io", "Queue", "Cluster", {"flavors"}},
        Want{"workloadgroups.tessera.io", "WorkloadGroup", "Namespaced", {"minMember"}}}) {
    SCOPED_TRACE(w.crd);
    const Doc* d = Find("CustomResourceDefinition", w.crd);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->node["apiVersion"].as<std::string>(), "apiextensions.k8s.io/v1");
    EXPECT_EQ(d->node["spec"]["group"].as<std::string>(), "tessera.io");
    EXPECT_EQ(d->node["spec"]["names"]["kind"].as<std::string>(), w.kind);
    EXPECT_EQ(d->node["spec"]["scope"].as<std::string>(), w.scope);
    EXPECT_EQ(d->node["spec"]["names"]["plural"].as<std::string>() + ".tessera.io", w.crd);
    ASSERT_TRUE(d->node["spec"]["versions"].IsSequence());
    int storage = 0;
    for (const auto& v : d->node["spec"]["versions"]) {
      storage += v["storage"].as<bool>();
      const YAML::Node schema = v["schema"]["openAPIV3Schema"];
      ASSERT_TRUE(schema);
      EXPECT_EQ(schema["type"].as<std::string>(), "object");
      EXPECT_EQ(Strings(schema["properties"]["spec"]["required"]), w.spec_required);
      std::vector<std::string> errors;
      CheckStructural(schema, w.kind, errors);
      EXPECT_TRUE(errors.empty()) << ::testing::PrintToString(errors);
    }
    EXPECT_EQ(storage, 1);
  }
}

TEST(Crds, SamplesValidateAndBadObjectsDoNot) {
  const auto queues = OfKind("Queue");
  const auto groups = OfKind("WorkloadGroup");
  ASSERT_EQ(queues.size(), 2u);
  ASSERT_GE(groups.size(), 1u);
  std::set<std::string> cohorts;
  for (const auto& q : queues) {
    EXPECT_EQ(q.node["apiVersion"].as<std::string>(), "tessera.io/v1alpha1");
    const auto errors = Validate("queues.tessera.io", q.node);
    EXPECT_TRUE(errors.empty()) << q.name() << ": " << ::testing::PrintToString(errors);
    cohorts.insert(q.node["spec"]["cohort"].as<std::string>());
  }
  EXPECT_EQ(cohorts, std::set<std::string>{"research"});
  for (const auto& g : groups) {
    const auto errors = Validate("workloadgroups.tessera.io", g.node);
    EXPECT_TRUE(errors.empty()) << g.name() << ": " << ::testing::PrintToString(errors);
  }

  struct Bad {
    const char* crd;
    const char* yaml;
    const char* error;
  };
  const std::vector<Bad> bad = {
      {"queues.tessera.io", "kind: Queue\nmetadata: {name: q}\nspec: {weight: 1}",
       "Queue.spec: missing required field flavors"},
      {"queues.tessera.io", "kind: Queue\nmetadata: {name: q}\nspec: {flavors: []}",
       "Queue.spec.flavors: fewer than 1 items"},
      {"queues.tessera.io",
       "kind: Queue\nmetadata: {name: q}\nspec: {weight: 0, flavors: [{name: a, nominal: {gpu: "
       "1}}]}",
       "Queue.spec.weight: 0 is not above the minimum 0"},
      {"queues.tessera.io",
       "kind: Queue\nmetadata: {name: q}\nspec: {flavors: [{name: a, nominal: {gpu: -1}}]}",
       "Queue.spec.flavors[0].nominal.gpu: -1 is below the minimum 0"},
      {"queues.tessera.io",
       "kind: Queue\nmetadata: {name: q}\nspec: {flavors: [{name: A_B, nominal: {gpu: 1}}]}",
       "Queue.spec.flavors[0].name: \"A_B\" does not match"},
      {"queues.tessera.io",
       "kind: Queue\nmetadata: {name: q}\nspec: {flavors: [{name: a, nominal: {gpus: 1}}]}",
       "Queue.spec.flavors[0].nominal: unknown field gpus"},
      {"queues.tessera.io",
       "kind: Queue\nmetadata: {name: q}\nspec: {flavors: [{name: a, nominal: {gpu: 1}}], "
       "preemption: {withinQueue: Always}}",
       "Queue.spec.preemption.withinQueue: \"Always\" is not one of the allowed values"},
      {"workloadgroups.tessera.io", "kind: WorkloadGroup\nmetadata: {name: g}\nspec: {}",
       "WorkloadGroup.spec: missing required field minMember"},
      {"workloadgroups.tessera.io",
       "kind: WorkloadGroup\nmetadata: {name: g}\nspec: {minMember: 0}",
       "WorkloadGroup.spec.minMember: 0 is below the minimum 1"},
      {"workloadgroups.tessera.io",
       "kind: WorkloadGroup\nmetadata: {name: g}\nspec: {minMember: 2.5}",
       "WorkloadGroup.spec.minMember: expected an integer, got \"2.5\""},
      {"workloadgroups.tessera.io",
       "kind: WorkloadGroup\nmetadata: {name: g}\nspec: {minMember: 2, topology: rack}",
       "WorkloadGroup.spec.topology: \"rack\" does not match"},
      {"workloadgroups.tessera.io",
       "kind: WorkloadGroup\nmetadata: {name: g}\nspec: {minMember: 2, timeoutSeconds: -5}",
       "WorkloadGroup.spec.timeoutSeconds: -5 is below the minimum 0"},
  };
  for (const auto& b : bad) {
    const auto errors = Validate(b.crd, YAML::Load(b.yaml));
    ASSERT_FALSE(errors.empty()) << b.yaml;
    EXPECT_EQ(errors[0].substr(0, std::string(b.error).size()), b.error) << errors[0];
  }
  // The topology forms the admission model knows.
  for (const char* ok : {"same-node", "label:rack", "label:nvidia.com/gpu.clique",
                         "label:topology.kubernetes.io/zone"}) {
    const std::string y = std::string(
                              "kind: WorkloadGroup\nmetadata: {name: g}\n"
                              "spec: {minMember: 2, topology: \"") +
                          ok + "\"}";
    EXPECT_TRUE(Validate("workloadgroups.tessera.io", YAML::Load(y)).empty()) << ok;
  }
}

// The pod (or pod template) of a workload manifest, as the API server would show the pod.
Json PodOf(const Doc& d) {
  if (d.kind() == "Pod") return ToJson(d.node);
  Json pod = ToJson(d.node["spec"]["template"]);
  pod["metadata"]["name"] = d.name() + "-0";
  pod["metadata"]["namespace"] = d.ns();
  return pod;
}

TEST(Samples, WorkloadsTranslate) {
  std::map<std::string, PodRequest> pods;
  for (const auto& d : AllDocs()) {
    if (d.kind() != "Pod" && d.kind() != "Deployment" && d.kind() != "Job") continue;
    if (d.file.rfind("samples/", 0) != 0) continue;
    auto p = TranslatePod(PodOf(d));
    ASSERT_TRUE(p.ok()) << d.file << " " << d.name() << ": " << p.status().message();
    EXPECT_TRUE(p->wants_gpu()) << d.name();
    EXPECT_EQ(p->scheduler_name, "tessera") << d.name();
    pods.emplace(d.name(), std::move(*p));
  }
  ASSERT_EQ(pods.size(), 4u);
  const PodRequest& nb = pods.at("notebook-alice");
  EXPECT_EQ(nb.queue, "team-a");
  EXPECT_EQ(nb.gpu.memory_mib, 10240);
  EXPECT_EQ(nb.gpu.compute_pct, 25);
  EXPECT_EQ(nb.demand.cpu, MilliCpu(2000));

  const PodRequest& inf = pods.at("llm-inference");
  EXPECT_EQ(inf.gpu.mig_profile, "3g.40gb");
  EXPECT_EQ(inf.isolation, Isolation::kStrict);
  EXPECT_EQ(inf.queue, "team-b");

  const PodRequest& emb = pods.at("embedder");
  EXPECT_EQ(emb.gpu.memory_mib, 6144);
  EXPECT_TRUE(emb.demand.AllowsModel(*GpuCatalog::Builtin().Find("L4")));
  EXPECT_FALSE(emb.demand.AllowsModel(*GpuCatalog::Builtin().Find("T4")));

  const PodRequest& train = pods.at("llm-pretrain");
  EXPECT_EQ(train.gpu.whole_gpus, 8);
  EXPECT_EQ(train.gang, "llm-pretrain");
  EXPECT_EQ(train.min_member, 8);
  EXPECT_EQ(train.priority_class, "training-high");
  ASSERT_EQ(train.tolerations.size(), 1u);
  // The gang's WorkloadGroup exists in the pod's namespace with the same minMember.
  const Doc* wg = Find("WorkloadGroup", train.gang);
  ASSERT_NE(wg, nullptr);
  EXPECT_EQ(wg->ns(), train.ns);
  EXPECT_EQ(wg->node["spec"]["minMember"].as<int>(), train.min_member);
  const Doc* job = Find("Job", "llm-pretrain");
  EXPECT_EQ(job->node["spec"]["parallelism"].as<int>(), 8);
  // Every queue a sample uses exists as a Queue sample.
  for (const auto& [name, p] : pods) EXPECT_NE(Find("Queue", p.queue), nullptr) << name;
}

}  // namespace
}  // namespace tessera::kube
