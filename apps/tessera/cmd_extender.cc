// `tessera extender`: serves the kube-scheduler extender protocol (filter, prioritize, bind,
// preempt) over HTTP(S) for clusters that keep kube-scheduler (src/kube/extender.h).
//
//   tessera extender --listen ADDR:PORT [--prefix /tessera] [--tls-cert F --tls-key F]
//                    [--kubeconfig F [--context C]] [--no-cluster]
//
// The extender's view of nodes and bound GPU pods is fed by informers (list + watch) from the
// API server named by --kubeconfig, or the in-cluster service account; bind creates the
// Binding with the tessera.io/assignment annotation. --no-cluster serves without an API server
// (nodes then come only from requests with nodeCacheCapable: false; bind fails). Runs until
// SIGINT/SIGTERM. Errors: stderr "tessera: <message>", exit 1.
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

namespace tessera {
namespace {

std::atomic<bool> g_extender_stop{false};
void OnExtenderSignal(int) {
  g_extender_stop = true;
}

struct ExtenderArgs {
  std::string listen = "0.0.0.0:8888";
  std::string prefix = "/tessera";
  std::string tls_cert, tls_key, kubeconfig, context;
  bool no_cluster = false;
};

Result<kube::ExtenderServerOptions> ServerOptions(const ExtenderArgs& a) {
  kube::ExtenderServerOptions o;
  const size_t colon = a.listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == a.listen.size())
    return InvalidArgument("--listen must be ADDR:PORT, got \"" + a.listen + "\"");
  o.address = a.listen.substr(0, colon);
  if (o.address.size() >= 2 && o.address.front() == '[' && o.address.back() == ']')
    o.address = o.address.substr(1, o.address.size() - 2);
  if (o.address.empty()) o.address = "0.0.0.0";
  const std::string port = a.listen.substr(colon + 1);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) > 65535)
    return InvalidArgument("--listen: bad port \"" + port + "\"");
  o.port = std::stoi(port);
  o.prefix = a.prefix;
  o.tls_cert_file = a.tls_cert;
  o.tls_key_file = a.tls_key;
  if (o.tls_cert_file.empty() != o.tls_key_file.empty())
    return InvalidArgument("--tls-cert and --tls-key must be given together");
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
  kube::Extender ext;
  std::unique_ptr<kube::Client> client;
  std::unique_ptr<kube::Informer> nodes, pods;
  kube::BindFn bind = [](const std::string& ns, const std::string& name, const std::string&,
                         const std::string&, const std::map<std::string, std::string>&) {
    return FailedPrecondition("cannot bind " + ns + "/" + name + ": no API server (--no-cluster)");
  };
  if (!a.no_cluster) {
    auto cfg = a.kubeconfig.empty() ? kube::InClusterConfig()
                                    : kube::LoadKubeconfig(a.kubeconfig, a.context);
    if (!cfg.ok()) return Fail(cfg.status());
    auto c = kube::Client::Create(*cfg);
    if (!c.ok()) return Fail(c.status());
    client = std::move(*c);
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
               opts->tls_cert_file.empty() ? "http" : "https", opts->address.c_str(), server.port(),
               a.no_cluster ? "no API server" : "fed by informers");
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
  cmd->add_option("--tls-cert", args->tls_cert, "PEM certificate for HTTPS");
  cmd->add_option("--tls-key", args->tls_key, "PEM private key for HTTPS");
  cmd->add_option("--kubeconfig", args->kubeconfig,
                  "kubeconfig file (default: in-cluster service account)");
  cmd->add_option("--context", args->context, "kubeconfig context (default: current-context)");
  cmd->add_flag("--no-cluster", args->no_cluster,
                "Serve without an API server (nodes only from nodeCacheCapable: false requests)");
  cmd->callback([args, &rc] { rc = RunExtender(*args); });
}

}  // namespace tessera
