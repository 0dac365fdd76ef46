// tessera-bench-extender-slow: filter latency of `tessera extender`'s HTTP server with and
// without slow clients, in one run.
//
//   tessera-bench-extender-slow [--nodes 100] [--requests 2000] [--seconds 10] [--slow 10] [--tls]
//                               [--json FILE]
//
// Serves an Extender holding `nodes` 8-GPU H100 nodes on 127.0.0.1 (plain HTTP in the insecure
// mode, or HTTPS with client certificates with --tls, made with the openssl CLI). Phase 1 sends
// filter calls (a 1-GPU pod, every node a candidate) one after another over a keep-alive
// connection, at least `requests` of them and for at least `seconds`, and records each latency.
// Phase 2 opens `slow` connections that each send one header line every 3 s (reconnecting when the
// server cuts them off), then repeats phase 1. Prints p50/p99/max per phase and the ratio of the
// p99s; --json writes
// {"nodes", "slow_clients", "baseline_p50_ms", "baseline_p99_ms", "slow_p50_ms", "slow_p99_ms",
//  "slow_max_ms", "p99_ratio", "slow_connections_cut"}.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "kube/extender.h"

namespace tessera::kube {
namespace {

using Clock = std::chrono::steady_clock;

Json Node(const std::string& name) {
  return {
      {"metadata",
       {{"name", name},
        {"labels",
         {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}, {"nvidia.com/gpu.count", "8"}}}}},
      {"status",
       {{"capacity", {{"cpu", "64"}, {"memory", "512Gi"}, {"nvidia.com/gpu", "8"}}},
        {"allocatable", {{"cpu", "64"}, {"memory", "512Gi"}, {"nvidia.com/gpu", "8"}}}}}};
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool Send(int fd, const std::string& s) {
  return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
}

struct Pki {
  std::string dir;
  bool Make() {
    char t[] = "/tmp/tessera-bench-pki-XXXXXX";
    if (!::mkdtemp(t)) return false;
    dir = t;
    const std::string k = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string sh =
        "set -e; cd '" + dir + "'; openssl req -x509" + k +
        " -keyout ca.key -out ca.crt -days 1 -subj /CN=ca; printf 'subjectAltName=IP:127.0.0.1\\n'"
        " > s.ext; openssl req" +
        k +
        " -keyout s.key -out s.csr -subj /CN=s; openssl x509 -req -in s.csr -CA ca.crt -CAkey "
        "ca.key -CAcreateserial -out s.crt -days 1 -extfile s.ext; openssl req" +
        k +
        " -keyout c.key -out c.csr -subj /CN=kube-scheduler; openssl x509 -req -in c.csr -CA "
        "ca.crt -CAkey ca.key -CAcreateserial -out c.crt -days 1";
    std::ofstream(dir + "/make.sh") << sh;
    return std::system(("sh '" + dir + "/make.sh' >/dev/null 2>&1").c_str()) == 0;
  }
  ~Pki() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

int Run(int nodes, int requests, double seconds, int slow, bool tls, const std::string& json_path) {
  Extender ext;
  std::vector<std::string> names;
  for (int i = 0; i < nodes; ++i) {
    names.push_back("gpu-" + std::to_string(i));
    if (!ext.UpsertNode(Node(names.back())).ok()) return 1;
  }
  ExtenderServerOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  Pki pki;
  if (tls) {
    if (!pki.Make()) {
      std::fprintf(stderr, "tessera-bench-extender-slow: openssl failed\n");
      return 1;
    }
    o.tls.cert_file = pki.dir + "/s.crt";
    o.tls.key_file = pki.dir + "/s.key";
    o.tls.client_ca_file = pki.dir + "/ca.crt";
  } else {
    o.insecure = true;
  }
  BindFn none = [](const std::string&, const std::string&, const std::string&, const std::string&,
                   const std::map<std::string, std::string>&) { return Status::Ok(); };
  ExtenderServer server(ext, none, o);
  if (Status st = server.Start(); !st.ok()) {
    std::fprintf(stderr, "tessera-bench-extender-slow: %s\n", st.message().c_str());
    return 1;
  }
  const Json pod = {
      {"metadata", {{"name", "p"}, {"namespace", "ml"}, {"uid", "u"}}},
      {"spec",
       {{"containers",
         {{{"name", "m"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}};
  const std::string body = Json({{"Pod", pod}, {"NodeNames", names}}).dump();

  auto phase = [&](std::vector<double>& ms) {
    std::unique_ptr<httplib::ClientImpl> cli;
    if (tls) {
      auto c = std::make_unique<httplib::SSLClient>("127.0.0.1", server.port(), pki.dir + "/c.crt",
                                                    pki.dir + "/c.key");
      c->enable_server_certificate_verification(false);
      cli = std::move(c);
    } else {
      cli = std::make_unique<httplib::ClientImpl>("127.0.0.1", server.port());
    }
    cli->set_keep_alive(true);
    cli->set_tcp_nodelay(true);  // as Go's net/http client (kube-scheduler) does
    cli->set_read_timeout(10);
    const auto until = Clock::now() + std::chrono::duration<double>(seconds);
    for (int i = 0; i < requests || Clock::now() < until; ++i) {
      const auto t0 = Clock::now();
      auto r = cli->Post("/tessera/filter", body, "application/json");
      const double took = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (!r || r->status != 200) {
        ms.push_back(10000);
        continue;
      }
      ms.push_back(took);
    }
  };
  std::vector<double> base, attacked;
  phase(base);

  std::atomic<bool> stop{false};
  std::atomic<int64_t> cut{0};
  std::vector<std::thread> slow_threads;
  // With --tls the slow clients complete the handshake with a valid client certificate first,
  // so they hold real sessions.
  std::shared_ptr<SSL_CTX> slow_ctx;
  if (tls) {
    slow_ctx.reset(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
    SSL_CTX_use_certificate_file(slow_ctx.get(), (pki.dir + "/c.crt").c_str(), SSL_FILETYPE_PEM);
    SSL_CTX_use_PrivateKey_file(slow_ctx.get(), (pki.dir + "/c.key").c_str(), SSL_FILETYPE_PEM);
  }
  for (int i = 0; i < slow; ++i)
    slow_threads.emplace_back([&, i] {
      while (!stop) {
        const int fd = Connect(server.port());
        if (fd < 0) return;
        SSL* ssl = nullptr;
        if (slow_ctx) {
          ssl = SSL_new(slow_ctx.get());
          SSL_set_fd(ssl, fd);
          if (SSL_connect(ssl) != 1) {
            SSL_free(ssl);
            ::close(fd);
            continue;
          }
        }
        auto send = [&](const std::string& text) {
          if (ssl) return SSL_write(ssl, text.data(), static_cast<int>(text.size())) > 0;
          return Send(fd, text);
        };
        // Waits 3 s for the server; true when it answered or closed the connection. Over TLS
        // the wait goes through SSL_read, which consumes the post-handshake session tickets.
        auto answered = [&] {
          if (!ssl) {
            pollfd p{fd, POLLIN, 0};
            return ::poll(&p, 1, 3000) > 0;
          }
          timeval tv{3, 0};
          ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
          char b;
          const int r = SSL_read(ssl, &b, 1);
          if (r > 0) return true;
          const int e = SSL_get_error(ssl, r);
          return !(e == SSL_ERROR_WANT_READ ||
                   (e == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK)));
        };
        bool open = send("POST /tessera/filter HTTP/1.1\r\nHost: x\r\n");
        while (open && !stop) {
          if (answered()) {
            ++cut;
            break;
          }
          open = send("X-Slow-" + std::to_string(i) + ": 1\r\n");
        }
        if (ssl) SSL_free(ssl);
        ::close(fd);
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  phase(attacked);
  stop = true;
  for (auto& t : slow_threads) t.join();
  server.Stop();

  const double b50 = Percentile(base, 0.5), b99 = Percentile(base, 0.99);
  const double s50 = Percentile(attacked, 0.5), s99 = Percentile(attacked, 0.99);
  const double smax = attacked.empty() ? 0 : *std::max_element(attacked.begin(), attacked.end());
  std::printf("filter latency, %d nodes, %zu / %zu requests, %s\n", nodes, base.size(),
              attacked.size(), tls ? "HTTPS with client certificates" : "plain HTTP");
  std::printf("  %-24s p50 %7.2f ms  p99 %7.2f ms\n", "no slow clients", b50, b99);
  std::printf("  %-24s p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms\n",
              (std::to_string(slow) + " slow clients").c_str(), s50, s99, smax);
  std::printf("  p99 ratio (slow / none) %.2f; slow connections cut by the server: %lld\n",
              b99 > 0 ? s99 / b99 : 0, static_cast<long long>(cut.load()));
  if (!json_path.empty()) {
    const Json j = {{"nodes", nodes},
                    {"baseline_requests", base.size()},
                    {"slow_requests", attacked.size()},
                    {"tls", tls},
                    {"slow_clients", slow},
                    {"baseline_p50_ms", b50},
                    {"baseline_p99_ms", b99},
                    {"slow_p50_ms", s50},
                    {"slow_p99_ms", s99},
                    {"slow_max_ms", smax},
                    {"p99_ratio", b99 > 0 ? s99 / b99 : 0},
                    {"slow_connections_cut", cut.load()}};
    std::ofstream(json_path) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace tessera::kube

int main(int argc, char** argv) {
  CLI::App app{"Filter latency of tessera extender with and without slow clients"};
  int nodes = 100, requests = 2000, slow = 10;
  double seconds = 10;
  bool tls = false;
  std::string json;
  app.add_option("--nodes", nodes, "Nodes in the extender's view")->check(CLI::Range(1, 100000));
  app.add_option("--requests", requests, "Filter calls per phase")->check(CLI::Range(1, 1000000));
  app.add_option("--seconds", seconds, "Least duration of each phase")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--slow", slow, "Slow connections in phase 2")->check(CLI::Range(0, 10000));
  app.add_flag("--tls", tls, "HTTPS with client certificates");
  app.add_option("--json", json, "Write the figures as JSON");
  CLI11_PARSE(app, argc, argv);
  return tessera::kube::Run(nodes, requests, seconds, slow, tls, json);
}
