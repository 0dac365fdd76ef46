// `tessera webhook`: the mutating admission webhook for pods (src/kube/webhook.h). It gives a
// container that asks only for GPU-share resources (tessera.io/gpu-memory, the HAMi ones) one
// tessera.io/gpu-slice device, so that the kubelet calls the node agent's device plugin for it,
// and optionally sets the scheduler of GPU pods.
//
//   tessera webhook --listen ADDR:PORT [--path /mutate-pods] --tls-cert F --tls-key F
//                   [--client-ca F [--allowed-client-names N,...]] [--scheduler-name NAME]
//                   [--insecure] [--health-listen ADDR:PORT]
//
// HTTPS is required (the API server calls webhooks over TLS); --insecure serves plain HTTP on a
// loopback address, for local use. The certificates are reloaded when their files change. Runs
// until SIGINT/SIGTERM. Errors: stderr "tessera: <message>", exit 1.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "apps/tessera/cli_util.h"
#include "apps/tessera/commands.h"
#include "kube/client.h"
#include "kube/webhook.h"
#include "net/http_server.h"

namespace tessera {
namespace {

std::atomic<bool> g_webhook_stop{false};
void OnWebhookSignal(int) {
  g_webhook_stop = true;
}

struct WebhookArgs {
  std::string listen = "0.0.0.0:8443";
  std::string path = "/mutate-pods";
  std::string tls_cert, tls_key, client_ca, allowed_names, health_listen, scheduler_name;
  bool insecure = false;
};

Result<kube::WebhookServerOptions> Options(const WebhookArgs& a) {
  kube::WebhookServerOptions o;
  TESSERA_RETURN_IF_ERROR(net::ParseListenAddress(a.listen, "--listen", o.address, o.port));
  if (!a.health_listen.empty())
    TESSERA_RETURN_IF_ERROR(net::ParseListenAddress(a.health_listen, "--health-listen",
                                                    o.health_address, o.health_port));
  o.path = a.path;
  auto tls = ParseServerTlsFlags(a.tls_cert, a.tls_key, a.client_ca, a.allowed_names);
  if (!tls.ok()) return tls.status();
  o.tls = std::move(*tls);
  if (!a.insecure && o.tls.cert_file.empty())
    return InvalidArgument(
        "the webhook needs --tls-cert and --tls-key (the API server calls webhooks over "
        "HTTPS); --insecure serves plain HTTP on a loopback address only");
  if (a.insecure && o.tls.cert_file.empty() && !net::IsLoopbackAddress(o.address))
    return InvalidArgument("--insecure serves plain HTTP only on a loopback address, got " +
                           o.address);
  o.insecure = a.insecure;
  if (a.path.empty() || a.path.front() != '/')
    return InvalidArgument("--path must start with '/', got \"" + a.path + "\"");
  if (!a.scheduler_name.empty()) {
    Status st = kube::ValidateDns1123Subdomain("--scheduler-name", a.scheduler_name);
    if (!st.ok()) return st;
  }
  return o;
}

int RunWebhook(const WebhookArgs& a) {
  auto opts = Options(a);
  if (!opts.ok()) return Fail(opts.status());
  kube::WebhookConfig cfg;
  cfg.scheduler_name = a.scheduler_name;
  std::signal(SIGINT, OnWebhookSignal);
  std::signal(SIGTERM, OnWebhookSignal);
  kube::WebhookServer server(cfg, *opts);
  Status st = server.Start();
  if (!st.ok()) return Fail(st);
  std::fprintf(stderr, "tessera webhook: serving %s on %s:%d, path %s\n",
               opts->tls.enabled() ? "https" : "http (insecure)", opts->address.c_str(),
               server.port(), opts->path.c_str());
  if (server.health_port() >= 0)
    std::fprintf(stderr, "tessera webhook: /healthz and /metrics on %s:%d\n",
                 opts->health_address.c_str(), server.health_port());
  while (!g_webhook_stop) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  server.Stop();
  return 0;
}

}  // namespace

void AddWebhookCommand(CLI::App& app, int& rc) {
  auto args = std::make_shared<WebhookArgs>();
  CLI::App* cmd = app.add_subcommand(
      "webhook", "Mutating admission webhook: GPU-share pods get a tessera.io/gpu-slice device");
  cmd->add_option("--listen", args->listen, "Address and port, e.g. 0.0.0.0:8443")
      ->default_val("0.0.0.0:8443");
  cmd->add_option("--path", args->path, "URL path of the webhook")->default_val("/mutate-pods");
  cmd->add_option("--tls-cert", args->tls_cert, "PEM certificate (chain) for HTTPS");
  cmd->add_option("--tls-key", args->tls_key, "PEM private key for HTTPS");
  cmd->add_option("--client-ca", args->client_ca,
                  "PEM CA bundle; the API server must present a client certificate it signed");
  cmd->add_option("--allowed-client-names", args->allowed_names,
                  "Comma-separated client certificate CNs or DNS SANs allowed");
  cmd->add_option("--scheduler-name", args->scheduler_name,
                  "Set spec.schedulerName of GPU pods that use the default scheduler");
  cmd->add_flag("--insecure", args->insecure,
                "Allow plain HTTP, on a loopback address only (local use)");
  cmd->add_option("--health-listen", args->health_listen,
                  "Also serve GET /healthz and /metrics over plain HTTP on ADDR:PORT (probes)");
  cmd->callback([args, &rc] { rc = RunWebhook(*args); });
}

}  // namespace tessera
