// `tessera extender`: serves the kube-scheduler extender protocol (filter, prioritize, bind,
// preempt) over HTTPS with client certificates, for clusters that keep kube-scheduler
// (src/kube/extender.h).
//
//   tessera extender --listen ADDR:PORT [--prefix /tessera]
//                    --tls-cert F --tls-key F --client-ca F [--allowed-client-names N,...]
//                    [--insecure] [--health-listen ADDR:PORT]
//                    [--max-body-bytes N] [--request-timeout S] [--max-connections N]
//                    [--kubeconfig F [--context C]] [--no-cluster]
//
// The extender's view of nodes and bound GPU pods is fed by informers (list + watch) from the
// API server named by --kubeconfig, or the in-cluster service account; request bodies never
// change it. Bind reads the pod from the API server and binds it, with the tessera.io/assignment
// annotation, only if it is a pending GPU pod with the request's UID. --insecure allows plain
// HTTP (or TLS without client certificates) on a loopback address, for local use. --no-cluster
// serves without an API server (nodes then come only from requests with nodeCacheCapable:
// false; bind fails). Runs until SIGINT/SIGTERM. Errors: stderr "tessera: <message>", exit 1
// (a port in use: "...: address in use").
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "apps/tessera/cli_util.h"
#include "apps/tessera/commands.h"
#include "kube/client.h"
#include "kube/extender.h"
#include "kube/informer.h"
#include "net/http_server.h"

namespace tessera {
namespace {

std::atomic<bool> g_extender_stop{false};
void OnExtenderSignal(int) {
  g_extender_stop = true;
}

struct ExtenderArgs {
  std::string listen = "0.0.0.0:8888";
  std::string prefix = "/tessera";
  std::string tls_cert, tls_key, client_ca, allowed_names, health_listen, kubeconfig, context;
  bool insecure = false;
  bool no_cluster = false;
  std::string max_body_bytes = "67108864";
  std::string request_timeout_s = "2";
  std::string max_connections = "256";
};

Result<kube::ExtenderServerOptions> ServerOptions(const ExtenderArgs& a) {
  kube::ExtenderServerOptions o;
  TESSERA_RETURN_IF_ERROR(net::ParseListenAddress(a.listen, "--listen", o.address, o.port));
  if (!a.health_listen.empty())
    TESSERA_RETURN_IF_ERROR(net::ParseListenAddress(a.health_listen, "--health-listen",
                                                    o.health_address, o.health_port));
  o.prefix = a.prefix;
  auto tls = ParseServerTlsFlags(a.tls_cert, a.tls_key, a.client_ca, a.allowed_names);
  if (!tls.ok()) return tls.status();
  o.tls = std::move(*tls);
  o.insecure = a.insecure;
  if (!a.insecure && (o.tls.cert_file.empty() || o.tls.client_ca_file.empty()))
    return InvalidArgument(
        "the extender needs --tls-cert, --tls-key and --client-ca (HTTPS with client "
        "certificates); --insecure serves without them, on a loopback address only");
  if (a.insecure && !net::IsLoopbackAddress(o.address))
    return InvalidArgument(
        "--insecure serves without authentication and only on a loopback "
        "address, got " +
        o.address);
  auto body = ParseIntFlag("--max-body-bytes", a.max_body_bytes, 1024, int64_t{1} << 30);
  if (!body.ok()) return body.status();
  auto timeout = ParseNumberFlag("--request-timeout", a.request_timeout_s, 0.1, 60);
  if (!timeout.ok()) return timeout.status();
  auto conns = ParseIntFlag("--max-connections", a.max_connections, 1, 65536);
  if (!conns.ok()) return conns.status();
  o.limits.max_body_bytes = static_cast<size_t>(*body);
  o.limits.read_timeout_s = *timeout;
  o.limits.write_timeout_s = *timeout;
  o.limits.max_connections = static_cast<int>(*conns);
  o.limits.workers = std::min(o.limits.workers, o.limits.max_connections);
  return o;
}

std::string UidOf(const kube::Json& obj) {
  const auto* uid = obj.is_object() && obj.contains("metadata") && obj["metadata"].is_object() &&
                            obj["metadata"].contains("uid") && obj["metadata"]["uid"].is_string()
                        ? &obj["metadata"]["uid"]
                        : nullptr;
  return uid ? uid->get<std::string>() : std::string();
}

std::string NameOf(const kube::Json& obj) {
  return obj.is_object() ? obj.value("/metadata/name"_json_pointer, std::string()) : std::string();
}

int RunExtender(const ExtenderArgs& a) {
  auto opts = ServerOptions(a);
  if (!opts.ok()) return Fail(opts.status());
  kube::ExtenderOptions ext_opts;
  ext_opts.trust_request_nodes = a.no_cluster;
  std::unique_ptr<kube::Client> client;
  if (!a.no_cluster) {
    auto cfg = a.kubeconfig.empty() ? kube::InClusterConfig()
                                    : kube::LoadKubeconfig(a.kubeconfig, a.context);
    if (!cfg.ok()) return Fail(cfg.status());
    auto c = kube::Client::Create(*cfg);
    if (!c.ok()) return Fail(c.status());
    client = std::move(*c);
    kube::Client* cl = client.get();
    ext_opts.lookup_pod = [cl](const std::string& ns,
                               const std::string& name) -> Result<kube::Json> {
      TESSERA_RETURN_IF_ERROR(kube::ValidateDns1123Label("namespace", ns));
      TESSERA_RETURN_IF_ERROR(kube::ValidateDns1123Subdomain("pod name", name));
      auto path = kube::BuildApiPath({"api", "v1", "namespaces", ns, "pods", name});
      if (!path.ok()) return path.status();
      return cl->Get(*path);
    };
  }
  kube::Extender ext(ext_opts);
  std::unique_ptr<kube::Informer> nodes, pods;
  kube::BindFn bind = [](const std::string& ns, const std::string& name, const std::string&,
                         const std::string&, const std::map<std::string, std::string>&) {
    return FailedPrecondition("cannot bind " + ns + "/" + name + ": no API server (--no-cluster)");
  };
  if (client) {
    kube::Client* cl = client.get();
    bind = [cl](const std::string& ns, const std::string& name, const std::string& uid,
                const std::string& node, const std::map<std::string, std::string>& ann) {
      return cl->Bind(ns, name, uid, node, ann);
    };
    // Node handlers run on the node informer's thread only; a node's error is logged when it
    // changes, not on every status update.
    auto last_error = std::make_shared<std::map<std::string, std::string>>();
    auto upsert = [&ext, last_error](const kube::Json& n) {
      const Status st = ext.UpsertNode(n);
      std::string& last = (*last_error)[NameOf(n)];
      if (!st.ok() && st.message() != last)
        std::fprintf(stderr, "tessera extender: %s\n", st.message().c_str());
      last = st.ok() ? "" : st.message();
    };
    nodes = std::make_unique<kube::Informer>(
        *client, "/api/v1/nodes", std::map<std::string, std::string>{},
        kube::InformerHandlers{upsert,
                               [upsert](const kube::Json&, const kube::Json& n) { upsert(n); },
                               [&ext, last_error](const kube::Json& n) {
                                 ext.RemoveNode(NameOf(n));
                                 last_error->erase(NameOf(n));
                               },
                               nullptr});
    pods = std::make_unique<kube::Informer>(
        *client, "/api/v1/pods",
        std::map<std::string, std::string>{
            {"fieldSelector", "status.phase!=Succeeded,status.phase!=Failed"}},
        kube::InformerHandlers{
            [&ext](const kube::Json& p) { (void)ext.UpsertPod(p); },
            [&ext](const kube::Json&, const kube::Json& p) { (void)ext.UpsertPod(p); },
            [&ext](const kube::Json& p) { ext.RemovePod(UidOf(p)); }, nullptr});
    Status st = nodes->Start();
    if (st.ok()) st = pods->Start();
    if (!st.ok()) return Fail(st);
  }
  std::signal(SIGINT, OnExtenderSignal);
  std::signal(SIGTERM, OnExtenderSignal);
  kube::ExtenderServer server(ext, bind, *opts);
  Status st = server.Start();
  if (!st.ok()) return Fail(st);
  std::fprintf(stderr, "tessera extender: serving %s on %s:%d (%s)\n",
               opts->tls.client_ca_file.empty()
                   ? (opts->tls.enabled() ? "https without client certificates (insecure)"
                                          : "http (insecure)")
                   : "https with client certificates",
               opts->address.c_str(), server.port(),
               a.no_cluster ? "no API server" : "fed by informers");
  if (server.health_port() >= 0)
    std::fprintf(stderr, "tessera extender: /healthz and /metrics on %s:%d\n",
                 opts->health_address.c_str(), server.health_port());
  while (!g_extender_stop) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  server.Stop();
  if (pods) pods->Stop();
  if (nodes) nodes->Stop();
  return 0;
}

}  // namespace

void AddExtenderCommand(CLI::App& app, int& rc) {
  auto args = std::make_shared<ExtenderArgs>();
  CLI::App* cmd =
      app.add_subcommand("extender", "Serve the kube-scheduler extender protocol over HTTP(S)");
  cmd->add_option("--listen", args->listen, "Address and port, e.g. 0.0.0.0:8888")
      ->default_val("0.0.0.0:8888");
  cmd->add_option("--prefix", args->prefix, "URL prefix of the verbs (urlPrefix path)")
      ->default_val("/tessera");
  cmd->add_option("--tls-cert", args->tls_cert, "PEM certificate (chain) for HTTPS");
  cmd->add_option("--tls-key", args->tls_key, "PEM private key for HTTPS");
  cmd->add_option("--client-ca", args->client_ca,
                  "PEM CA bundle; clients must present a certificate it signed");
  cmd->add_option("--allowed-client-names", args->allowed_names,
                  "Comma-separated client certificate CNs or DNS SANs allowed (default: any "
                  "certificate the client CA signed)");
  cmd->add_flag("--insecure", args->insecure,
                "Allow plain HTTP or TLS without client certificates, on a loopback address "
                "only (local use)");
  cmd->add_option("--health-listen", args->health_listen,
                  "Also serve GET /healthz and /metrics over plain HTTP on ADDR:PORT (probes)");
  cmd->add_option("--max-body-bytes", args->max_body_bytes,
                  "Largest request body accepted; larger ones get 413")
      ->default_val("67108864");
  cmd->add_option("--request-timeout", args->request_timeout_s,
                  "Seconds to receive a whole request, and to send a response")
      ->default_val("2");
  cmd->add_option("--max-connections", args->max_connections,
                  "Connections held at once; more get 503")
      ->default_val("256");
  cmd->add_option("--kubeconfig", args->kubeconfig,
                  "kubeconfig file (default: in-cluster service account)");
  cmd->add_option("--context", args->context, "kubeconfig context (default: current-context)");
  cmd->add_flag("--no-cluster", args->no_cluster,
                "Serve without an API server (nodes only from nodeCacheCapable: false requests)");
  cmd->callback([args, &rc] { rc = RunExtender(*args); });
}

}  // namespace tessera
