// A bounded HTTP(S) server for every network surface of Tessera (extender, scheduler health and
// metrics, later the node agent and the dashboard). Routing and HTTP parsing come from
// cpp-httplib; this layer owns the sockets, so every connection is bounded:
//
//   * Whole-request deadline: the request line, headers and body must arrive within
//     `read_timeout_s` of the request's first byte (a client that drips one header line every
//     few seconds is cut off), and the response must be written within `write_timeout_s`.
//   * Size: request line + headers at most `max_header_bytes`; a body over `max_body_bytes` is
//     refused with 413 before it is read; a body without Content-Length (chunked) gets 411.
//   * Connections: at most `workers` are served at once and `max_connections` held in all;
//     beyond that a new connection gets 503 and is closed. Idle keep-alive connections are
//     closed after `idle_timeout_s`, or as soon as a new connection has waited 100 ms for a
//     worker (every worker busy).
//   * Binding: the port is exclusive (no SO_REUSEPORT): a port in use is IoError
//     "ADDR:PORT: address in use".
//   * TLS (`tls.cert_file` + `tls.key_file`): TLS 1.2 or later. With `tls.client_ca_file`,
//     clients must present a certificate signed by that CA (mutual TLS); with
//     `tls.allowed_client_names`, its subject CN or a DNS SAN must also be in the list, else the
//     request gets 403. Certificate, key and CA files are re-read when they change on disk
//     (checked at most every `tls.reload_interval_s` on new connections), so a rotated Secret
//     takes effect without a restart; a reload that fails keeps the previous credentials.
//
// Handlers run on worker threads and may be called concurrently. A handler that throws gets a
// 500 with a generic body (the exception text is not sent). Thread-safety: register routes
// before Start(); stats() and port() may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace tessera::net {

struct HttpLimits {
  size_t max_body_bytes = size_t{64} << 20;  // fits a 5,000-node NodeList with status
  size_t max_header_bytes = size_t{64} << 10;
  double read_timeout_s = 2;   // whole request, from its first byte
  double write_timeout_s = 2;  // whole response
  double idle_timeout_s = 60;  // keep-alive wait for the next request
  int workers = 32;            // connections served at once
  int max_connections = 256;   // served + waiting for a worker
  int max_requests_per_connection = 10000;

  // InvalidArgument naming the field when a limit is not positive and finite, or workers >
  // max_connections.
  Status Validate() const;
};

struct TlsOptions {
  std::string cert_file;       // PEM certificate chain; empty = plain HTTP
  std::string key_file;        // PEM private key
  std::string client_ca_file;  // PEM CA bundle; set = client certificates required
  std::vector<std::string> allowed_client_names;  // CN or DNS SAN; empty = any verified client
  double reload_interval_s = 10;

  bool enabled() const { return !cert_file.empty(); }
};

struct HttpServerOptions {
  std::string address = "127.0.0.1";
  int port = 0;  // 0 = an ephemeral port (see HttpServer::port)
  TlsOptions tls;
  HttpLimits limits;
};

struct HttpServerStats {
  int64_t connections = 0;           // accepted and served
  int64_t connections_refused = 0;   // 503: over max_connections
  int64_t requests = 0;              // requests whose handler ran (any status)
  int64_t too_large = 0;             // 413 (body) and 431 (headers)
  int64_t length_required = 0;       // 411
  int64_t timeouts = 0;              // requests cut off by the read or write deadline
  int64_t tls_failures = 0;          // failed handshakes (including unverified clients)
  int64_t clients_denied = 0;        // 403: verified certificate with a name not allowed
  int64_t idle_closed_for_load = 0;  // idle keep-alive connections closed for a waiting one
};

using HttpHandler = std::function<void(const httplib::Request&, httplib::Response&)>;

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();  // stops
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void Get(const std::string& path, HttpHandler handler);
  void Post(const std::string& path, HttpHandler handler);

  // Validates the options, loads TLS credentials, binds and serves on background threads.
  // InvalidArgument for bad options, IoError for unreadable TLS files or a port that cannot be
  // bound ("address in use" when another socket holds it).
  Status Start();
  // The bound port (after Start).
  int port() const;
  // Stops accepting, closes idle connections and waits for running requests (each bounded by
  // the deadlines above). Idempotent.
  void Stop();

  HttpServerStats stats() const;
  const HttpServerOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "ADDR:PORT" (IPv6 as "[ADDR]:PORT") into address and port; an empty ADDR is "0.0.0.0".
// InvalidArgument naming `flag` on a malformed value or a port outside 0..65535.
Status ParseListenAddress(const std::string& value, const std::string& flag, std::string& address,
                          int& port);
// Whether `address` is a loopback address (127.0.0.0/8, ::1, "localhost").
bool IsLoopbackAddress(const std::string& address);
// The server's guard counters as Prometheus text (the tessera_http_* families of
// docs/OPERATIONS.md), for the /metrics of the component that runs the server.
std::string HttpServerMetrics(const HttpServerStats& s);

}  // namespace tessera::net
