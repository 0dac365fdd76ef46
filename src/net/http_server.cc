#include "net/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace tessera::net {
namespace {

using Clock = std::chrono::steady_clock;

// Set on the accepting thread while a connection over the limit is turned away.
thread_local bool t_refuse = false;

struct Counters {
  std::atomic<int64_t> connections{0}, connections_refused{0}, requests{0}, too_large{0},
      length_required{0}, timeouts{0}, tls_failures{0}, clients_denied{0}, idle_closed_for_load{0};
};

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

// ---- TLS credentials, reloaded when their files change ----

class TlsContext {
 public:
  explicit TlsContext(TlsOptions o) : opts_(std::move(o)) {}

  Status Load() {
    auto ctx = Build();
    if (!ctx.ok()) return ctx.status();
    std::lock_guard<std::mutex> l(mu_);
    ctx_ = std::move(*ctx);
    stamp_ = Stamp();
    last_check_ = Clock::now();
    return Status::Ok();
  }

  std::shared_ptr<SSL_CTX> Current() {
    std::lock_guard<std::mutex> l(mu_);
    const auto now = Clock::now();
    if (now - last_check_ >= std::chrono::duration<double>(opts_.reload_interval_s)) {
      last_check_ = now;
      const std::string stamp = Stamp();
      if (stamp != stamp_) {
        auto ctx = Build();
        if (ctx.ok()) {
          ctx_ = std::move(*ctx);
          stamp_ = stamp;
        }
      }
    }
    return ctx_;
  }

 private:
  std::string Stamp() const {
    std::string s;
    for (const std::string* f : {&opts_.cert_file, &opts_.key_file, &opts_.client_ca_file}) {
      struct stat st {};
      if (f->empty() || ::stat(f->c_str(), &st) != 0) {
        s += "-;";
        continue;
      }
      s += std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ":" +
           std::to_string(st.st_size) + ":" + std::to_string(st.st_ino) + ";";
    }
    return s;
  }

  Result<std::shared_ptr<SSL_CTX>> Build() const {
    ERR_clear_error();
    std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
    if (!ctx) return Internal("TLS: " + OpenSslError());
    SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
    SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (SSL_CTX_use_certificate_chain_file(ctx.get(), opts_.cert_file.c_str()) != 1)
      return IoError("cannot load TLS certificate " + opts_.cert_file + ": " + OpenSslError());
    if (SSL_CTX_use_PrivateKey_file(ctx.get(), opts_.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
      return IoError("cannot load TLS key " + opts_.key_file + ": " + OpenSslError());
    if (SSL_CTX_check_private_key(ctx.get()) != 1)
      return InvalidArgument("TLS key " + opts_.key_file + " does not match certificate " +
                             opts_.cert_file);
    if (!opts_.client_ca_file.empty()) {
      if (SSL_CTX_load_verify_locations(ctx.get(), opts_.client_ca_file.c_str(), nullptr) != 1)
        return IoError("cannot load client CA " + opts_.client_ca_file + ": " + OpenSslError());
      STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(opts_.client_ca_file.c_str());
      if (names == nullptr)
        return IoError("client CA " + opts_.client_ca_file + " holds no certificate");
      SSL_CTX_set_client_CA_list(ctx.get(), names);
      SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    }
    return ctx;
  }

  TlsOptions opts_;
  std::mutex mu_;
  std::shared_ptr<SSL_CTX> ctx_;
  std::string stamp_;
  Clock::time_point last_check_;
};

// Subject CN and DNS SANs of the verified peer certificate.
std::vector<std::string> PeerNames(SSL* ssl) {
  std::vector<std::string> out;
  X509* peer = SSL_get1_peer_certificate(ssl);
  if (peer == nullptr) return out;
  if (X509_NAME* subject = X509_get_subject_name(peer)) {
    int i = -1;
    while ((i = X509_NAME_get_index_by_NID(subject, NID_commonName, i)) >= 0) {
      const ASN1_STRING* s = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
      out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                       static_cast<size_t>(ASN1_STRING_length(s)));
    }
  }
  auto* sans =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(peer, NID_subject_alt_name, nullptr, nullptr));
  if (sans != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
      const GENERAL_NAME* n = sk_GENERAL_NAME_value(sans, i);
      if (n->type != GEN_DNS) continue;
      const ASN1_STRING* s = n->d.dNSName;
      out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                       static_cast<size_t>(ASN1_STRING_length(s)));
    }
    GENERAL_NAMES_free(sans);
  }
  X509_free(peer);
  return out;
}

// Waits until `fd` is ready for `events` or `deadline` passes.
bool WaitFd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, INT_MAX)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

void AddressOf(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  const int r = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                     : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (r != 0) return;
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    port = ntohs(a->sin6_port);
  }
  ip = buf;
}

// One connection's byte stream (plain or TLS over a non-blocking socket), with the request's
// read deadline and byte budget and the response's write deadline.
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(int fd, SSL* ssl, const HttpLimits& limits) : fd_(fd), ssl_(ssl), limits_(limits) {}

  void BeginRequest() {
    const auto now = Clock::now();
    read_deadline_ = now + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(limits_.read_timeout_s));
    write_deadline_ = Clock::time_point{};
    consumed_ = 0;
    budget_ = limits_.max_header_bytes;
    body_allowed_ = false;
    over_budget_ = false;
    timed_out_ = false;
    close_after_ = false;
  }
  // Raises the budget after the headers by the declared body length.
  void AllowBody(size_t body) {
    budget_ = consumed_ + body;
    body_allowed_ = true;
  }
  size_t consumed() const { return consumed_; }
  bool buffered() const { return pos_ < len_ || (ssl_ && SSL_pending(ssl_) > 0); }
  bool timed_out() const { return timed_out_; }
  bool close_after() const { return close_after_; }
  void CloseAfter() { close_after_ = true; }
  bool over_budget() const { return over_budget_; }
  // The request's headers ran past max_header_bytes (its body budget was never set).
  bool headers_over_budget() const { return over_budget_ && !body_allowed_; }
  // Set: every request on this connection gets 403 with this text.
  void Deny(std::string why) { denied_ = std::move(why); }
  const std::string& denied() const { return denied_; }

  bool is_readable() const override { return buffered() || Wait(POLLIN, read_deadline_); }
  bool is_writable() const override { return Wait(POLLOUT, WriteDeadline()); }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ == len_ && !Fill()) return -1;
    size_t n = std::min(size, len_ - pos_);
    if (consumed_ + n > budget_) {
      over_budget_ = true;
      if (consumed_ >= budget_) return -1;
      n = budget_ - consumed_;
    }
    std::memcpy(ptr, buf_ + pos_, n);
    pos_ += n;
    consumed_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (write_deadline_ == Clock::time_point{})
      write_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(limits_.write_timeout_s));
    size_t off = 0;
    while (off < size) {
      if (ssl_) {
        const int chunk = static_cast<int>(std::min<size_t>(size - off, INT_MAX));
        const int n = SSL_write(ssl_, ptr + off, chunk);
        if (n > 0) {
          off += static_cast<size_t>(n);
          continue;
        }
        const int e = SSL_get_error(ssl_, n);
        if (e == SSL_ERROR_WANT_WRITE && Wait(POLLOUT, write_deadline_)) continue;
        if (e == SSL_ERROR_WANT_READ && Wait(POLLIN, write_deadline_)) continue;
        return -1;
      }
      const ssize_t n = ::send(fd_, ptr + off, size - off, MSG_NOSIGNAL);
      if (n > 0) {
        off += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) &&
          Wait(POLLOUT, write_deadline_))
        continue;
      return -1;
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(fd_, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(fd_, false, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  Clock::time_point WriteDeadline() const {
    if (write_deadline_ != Clock::time_point{}) return write_deadline_;
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(limits_.write_timeout_s));
  }

  bool Wait(short events, Clock::time_point deadline) const {
    if (WaitFd(fd_, events, deadline)) return true;
    timed_out_ = true;
    return false;
  }

  bool Fill() {
    if (consumed_ >= budget_) {
      over_budget_ = true;
      return false;
    }
    for (;;) {
      if (ssl_) {
        const int n = SSL_read(ssl_, buf_, sizeof buf_);
        if (n > 0) {
          pos_ = 0;
          len_ = static_cast<size_t>(n);
          return true;
        }
        const int e = SSL_get_error(ssl_, n);
        if (e == SSL_ERROR_WANT_READ && Wait(POLLIN, read_deadline_)) continue;
        if (e == SSL_ERROR_WANT_WRITE && Wait(POLLOUT, read_deadline_)) continue;
        return false;
      }
      const ssize_t n = ::recv(fd_, buf_, sizeof buf_, 0);
      if (n > 0) {
        pos_ = 0;
        len_ = static_cast<size_t>(n);
        return true;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) &&
          Wait(POLLIN, read_deadline_))
        continue;
      return false;
    }
  }

  int fd_;
  SSL* ssl_;
  const HttpLimits& limits_;
  char buf_[16384];
  size_t pos_ = 0, len_ = 0;
  size_t consumed_ = 0, budget_ = 0;
  Clock::time_point read_deadline_{}, write_deadline_{};
  mutable bool timed_out_ = false;
  bool close_after_ = false;
  bool over_budget_ = false;
  bool body_allowed_ = false;
  std::string denied_;
};

thread_local ConnStream* t_stream = nullptr;

// Fixed worker threads and a bounded wait queue; connections beyond it are refused on the
// accepting thread (t_refuse), which only writes a 503 and closes.
class BoundedPool final : public httplib::TaskQueue {
 public:
  BoundedPool(int workers, int max_connections) : max_(max_connections) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { Run(); });
  }

  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (active_ + static_cast<int>(queue_.size()) < max_) {
        queue_.push_back(std::move(fn));
        queued_at_.push_back(Clock::now());
        waiting_ = static_cast<int>(queue_.size());
        oldest_ns_ = queued_at_.front().time_since_epoch().count();
        cv_.notify_one();
        return;
      }
    }
    t_refuse = true;
    fn();
    t_refuse = false;
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      shutdown_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

  // Whether a connection has waited for a worker longer than `grace` (every worker busy, not a
  // connection that is merely being handed over).
  bool starved(Clock::duration grace) const {
    if (waiting_.load() == 0) return false;
    const Clock::time_point oldest{Clock::duration(oldest_ns_.load())};
    return Clock::now() - oldest > grace;
  }

 private:
  void Run() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [this] { return shutdown_ || !queue_.empty(); });
        if (queue_.empty()) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
        queued_at_.pop_front();
        waiting_ = static_cast<int>(queue_.size());
        if (!queued_at_.empty()) oldest_ns_ = queued_at_.front().time_since_epoch().count();
        ++active_;
      }
      fn();
      std::lock_guard<std::mutex> l(mu_);
      --active_;
    }
  }

  const int max_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::deque<Clock::time_point> queued_at_;
  std::atomic<Clock::rep> oldest_ns_{0};
  std::vector<std::thread> threads_;
  int active_ = 0;
  std::atomic<int> waiting_{0};
  bool shutdown_ = false;
};

std::string RawResponse(int status, const char* reason, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

std::string RegexLiteral(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (std::strchr(".^$|()[]{}*+?\\", c)) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

// ---- the server ----

class GuardedServer final : public httplib::Server {
 public:
  GuardedServer(const HttpServerOptions& o, Counters& c, TlsContext* tls)
      : opts_(o), counters_(c), tls_(tls) {}

  BoundedPool* pool() const { return pool_.load(); }
  void set_pool(BoundedPool* p) { pool_ = p; }

 private:
  bool stopping() const { return svr_sock_ == INVALID_SOCKET; }

  // Waits for the next request's first byte: the first request within the read timeout, later
  // ones within the idle timeout, giving way at once to connections waiting for a worker.
  bool WaitForRequest(ConnStream& strm, int fd, bool first) {
    if (strm.buffered()) return true;
    const double wait_s = first ? opts_.limits.read_timeout_s : opts_.limits.idle_timeout_s;
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(wait_s));
    for (;;) {
      if (stopping()) return false;
      if (!first) {
        BoundedPool* p = pool();
        if (p && p->starved(std::chrono::milliseconds(100))) {
          ++counters_.idle_closed_for_load;
          return false;
        }
      }
      const auto now = Clock::now();
      if (now >= deadline) return false;
      const auto slice = std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(50));
      if (WaitFd(fd, POLLIN, now + slice)) return true;
    }
  }

  bool Handshake(SSL* ssl, int fd) {
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(opts_.limits.read_timeout_s));
    for (;;) {
      ERR_clear_error();
      const int r = SSL_accept(ssl);
      if (r == 1) return true;
      const int e = SSL_get_error(ssl, r);
      if (e == SSL_ERROR_WANT_READ && WaitFd(fd, POLLIN, deadline)) continue;
      if (e == SSL_ERROR_WANT_WRITE && WaitFd(fd, POLLOUT, deadline)) continue;
      ERR_clear_error();
      return false;
    }
  }

  bool process_and_close_socket(socket_t sock) override {
    if (t_refuse) {
      ++counters_.connections_refused;
      const std::string busy =
          RawResponse(503, "Service Unavailable", "too many connections, retry later\n");
      (void)::send(sock, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
      return true;
    }
    ++counters_.connections;
    ::fcntl(sock, F_SETFL, ::fcntl(sock, F_GETFL, 0) | O_NONBLOCK);
    // Responses go out as header and body writes; without this, Nagle's algorithm holds the body
    // until the client's delayed ACK (tens of milliseconds per request).
    int one = 1;
    ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::shared_ptr<SSL_CTX> ctx;
    SSL* ssl = nullptr;
    bool serve = true;
    std::string denied;
    if (tls_) {
      ctx = tls_->Current();
      ssl = ctx ? SSL_new(ctx.get()) : nullptr;
      if (ssl == nullptr || SSL_set_fd(ssl, sock) != 1 || !Handshake(ssl, sock)) {
        ++counters_.tls_failures;
        serve = false;
      } else if (!opts_.tls.allowed_client_names.empty()) {
        const auto names = PeerNames(ssl);
        const bool allowed = std::any_of(names.begin(), names.end(), [&](const std::string& n) {
          const auto& ok = opts_.tls.allowed_client_names;
          return std::find(ok.begin(), ok.end(), n) != ok.end();
        });
        // The refusal is the answer to the client's first request, read in full, so that the
        // client receives it instead of a reset for unread data.
        if (!allowed)
          denied = "client certificate " +
                   (names.empty() ? std::string("without a name") : "\"" + names.front() + "\"") +
                   " is not allowed\n";
      }
    }
    if (serve) {
      ConnStream strm(sock, ssl, opts_.limits);
      strm.Deny(denied);
      t_stream = &strm;
      for (int i = 0; i < opts_.limits.max_requests_per_connection; ++i) {
        if (!WaitForRequest(strm, sock, i == 0)) break;
        strm.BeginRequest();
        bool closed = false;
        const bool last = i + 1 == opts_.limits.max_requests_per_connection || stopping();
        const bool ok = process_request(strm, last, closed, nullptr);
        if (strm.timed_out()) ++counters_.timeouts;
        if (!ok || closed || last || strm.close_after() || strm.timed_out() || strm.over_budget())
          break;
      }
      t_stream = nullptr;
    }
    if (ssl) {
      if (serve) (void)SSL_shutdown(ssl);
      SSL_free(ssl);
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return true;
  }

  const HttpServerOptions& opts_;
  Counters& counters_;
  TlsContext* tls_;
  std::atomic<BoundedPool*> pool_{nullptr};
};

struct HttpServer::Impl {
  HttpServerOptions opts;
  Counters counters;
  std::unique_ptr<TlsContext> tls;
  std::unique_ptr<GuardedServer> server;
  std::thread thread;
  int port = 0;
  bool started = false;

  explicit Impl(HttpServerOptions o) : opts(std::move(o)) {
    if (opts.tls.enabled()) tls = std::make_unique<TlsContext>(opts.tls);
    server = std::make_unique<GuardedServer>(opts, counters, tls.get());
  }

  // Refuses, before the body is read, what the limits do not allow.
  httplib::Server::HandlerResponse PreRoute(const httplib::Request& req, httplib::Response& res) {
    ConnStream* strm = t_stream;
    auto refuse = [&](int status, const std::string& msg) {
      res.status = status;
      res.set_header("Connection", "close");
      res.set_content(msg, "text/plain");
      if (strm) strm->CloseAfter();
      return httplib::Server::HandlerResponse::Handled;
    };
    if (strm && !strm->denied().empty()) {
      ++counters.clients_denied;
      return refuse(403, strm->denied());
    }
    if (req.has_header("Transfer-Encoding")) {
      ++counters.length_required;
      return refuse(411, "a request body needs a Content-Length\n");
    }
    size_t length = 0;
    if (req.has_header("Content-Length")) {
      const std::string v = req.get_header_value("Content-Length");
      if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
        return refuse(400, "bad Content-Length\n");
      length = static_cast<size_t>(std::stoull(v));
      if (length > opts.limits.max_body_bytes) {
        ++counters.too_large;
        return refuse(413, "request body of " + v + " bytes is larger than the limit of " +
                               std::to_string(opts.limits.max_body_bytes) + " bytes\n");
      }
    }
    if (strm) strm->AllowBody(length);
    ++counters.requests;
    return httplib::Server::HandlerResponse::Unhandled;
  }
};

Status HttpLimits::Validate() const {
  auto positive = [](double v, const char* name) -> Status {
    if (!std::isfinite(v) || v <= 0)
      return InvalidArgument(std::string("HTTP limit ") + name + " must be positive, got " +
                             std::to_string(v));
    return Status::Ok();
  };
  TESSERA_RETURN_IF_ERROR(positive(static_cast<double>(max_body_bytes), "max_body_bytes"));
  TESSERA_RETURN_IF_ERROR(positive(static_cast<double>(max_header_bytes), "max_header_bytes"));
  TESSERA_RETURN_IF_ERROR(positive(read_timeout_s, "read_timeout_s"));
  TESSERA_RETURN_IF_ERROR(positive(write_timeout_s, "write_timeout_s"));
  TESSERA_RETURN_IF_ERROR(positive(idle_timeout_s, "idle_timeout_s"));
  TESSERA_RETURN_IF_ERROR(positive(workers, "workers"));
  TESSERA_RETURN_IF_ERROR(positive(max_connections, "max_connections"));
  TESSERA_RETURN_IF_ERROR(positive(max_requests_per_connection, "max_requests_per_connection"));
  if (workers > max_connections)
    return InvalidArgument("HTTP limit workers (" + std::to_string(workers) +
                           ") must not exceed max_connections (" + std::to_string(max_connections) +
                           ")");
  if (workers > 4096) return InvalidArgument("HTTP limit workers must be at most 4096");
  return Status::Ok();
}

HttpServer::HttpServer(HttpServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

HttpServer::~HttpServer() {
  Stop();
}

void HttpServer::Get(const std::string& path, HttpHandler handler) {
  impl_->server->Get(RegexLiteral(path), std::move(handler));
}

void HttpServer::Post(const std::string& path, HttpHandler handler) {
  impl_->server->Post(RegexLiteral(path), std::move(handler));
}

Status HttpServer::Start() {
  Impl& im = *impl_;
  if (im.started) return FailedPrecondition("HTTP server already started");
  TESSERA_RETURN_IF_ERROR(im.opts.limits.Validate());
  if (im.opts.tls.enabled() && im.opts.tls.key_file.empty())
    return InvalidArgument("a TLS certificate needs its key");
  if (!im.opts.tls.enabled() &&
      (!im.opts.tls.key_file.empty() || !im.opts.tls.client_ca_file.empty() ||
       !im.opts.tls.allowed_client_names.empty()))
    return InvalidArgument("TLS key, client CA and allowed client names need a TLS certificate");
  if (im.opts.tls.client_ca_file.empty() && !im.opts.tls.allowed_client_names.empty())
    return InvalidArgument("allowed client names need a client CA");
  if (im.tls) TESSERA_RETURN_IF_ERROR(im.tls->Load());
  // A peer that resets while a TLS record is written must not end the process.
  std::signal(SIGPIPE, SIG_IGN);

  GuardedServer& s = *im.server;
  const HttpLimits& lim = im.opts.limits;
  s.set_payload_max_length(lim.max_body_bytes);
  s.set_keep_alive_max_count(static_cast<size_t>(lim.max_requests_per_connection));
  s.set_pre_routing_handler(
      [&im](const httplib::Request& req, httplib::Response& res) { return im.PreRoute(req, res); });
  // Headers beyond their budget end httplib's header parsing, which answers 400: they are
  // answered 431 and counted as too large.
  s.set_error_handler(
      httplib::Server::HandlerWithResponse([&im](const httplib::Request&, httplib::Response& res) {
        ConnStream* strm = t_stream;
        if (res.status != 400 || strm == nullptr || !strm->headers_over_budget())
          return httplib::Server::HandlerResponse::Unhandled;
        ++im.counters.too_large;
        res.status = 431;
        res.set_header("Connection", "close");
        res.set_content("request headers larger than " +
                            std::to_string(im.opts.limits.max_header_bytes) + " bytes\n",
                        "text/plain");
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    res.status = 500;
    res.set_content("internal error\n", "text/plain");
  });
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  s.new_task_queue = [&s, lim] {
    auto* p = new BoundedPool(lim.workers, lim.max_connections);
    s.set_pool(p);
    return p;
  };
  const std::string where = im.opts.address + ":" + std::to_string(im.opts.port);
  int port = im.opts.port;
  errno = 0;
  if (port == 0) {
    port = s.bind_to_any_port(im.opts.address);
    if (port < 0) return IoError("cannot bind " + im.opts.address);
  } else if (!s.bind_to_port(im.opts.address, port)) {
    const int err = errno;
    if (err == EADDRINUSE) return IoError(where + ": address in use");
    return IoError("cannot bind " + where + (err ? std::string(": ") + std::strerror(err) : ""));
  }
  im.port = port;
  im.started = true;
  im.thread = std::thread([&s] { s.listen_after_bind(); });
  for (int i = 0; i < 500 && !s.is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return Status::Ok();
}

int HttpServer::port() const {
  return impl_->port;
}

void HttpServer::Stop() {
  if (!impl_ || !impl_->started) return;
  impl_->server->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->started = false;
}

HttpServerStats HttpServer::stats() const {
  const Counters& c = impl_->counters;
  HttpServerStats s;
  s.connections = c.connections;
  s.connections_refused = c.connections_refused;
  s.requests = c.requests;
  s.too_large = c.too_large;
  s.length_required = c.length_required;
  s.timeouts = c.timeouts;
  s.tls_failures = c.tls_failures;
  s.clients_denied = c.clients_denied;
  s.idle_closed_for_load = c.idle_closed_for_load;
  return s;
}

const HttpServerOptions& HttpServer::options() const {
  return impl_->opts;
}

Status ParseListenAddress(const std::string& value, const std::string& flag, std::string& address,
                          int& port) {
  const size_t colon = value.rfind(':');
  if (colon == std::string::npos || colon + 1 == value.size())
    return InvalidArgument(flag + " must be ADDR:PORT, got \"" + value + "\"");
  std::string addr = value.substr(0, colon);
  if (addr.size() >= 2 && addr.front() == '[' && addr.back() == ']')
    addr = addr.substr(1, addr.size() - 2);
  else if (addr.find(':') != std::string::npos)
    return InvalidArgument(flag + ": an IPv6 address must be in brackets, got \"" + value + "\"");
  if (addr.empty()) addr = "0.0.0.0";
  const std::string p = value.substr(colon + 1);
  if (p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(p) > 65535)
    return InvalidArgument(flag + ": bad port \"" + p + "\"");
  address = addr;
  port = std::stoi(p);
  return Status::Ok();
}

bool IsLoopbackAddress(const std::string& address) {
  if (address == "localhost" || address == "::1") return true;
  in_addr a{};
  if (::inet_pton(AF_INET, address.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

std::string HttpServerMetrics(const HttpServerStats& s) {
  std::string out;
  auto counter = [&out](const char* name, const char* help, int64_t value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name +
           " " + std::to_string(value) + "\n";
  };
  counter("tessera_http_connections_refused_total",
          "Connections refused with 503 at the connection limit.", s.connections_refused);
  counter("tessera_http_requests_too_large_total", "Requests refused for their size.", s.too_large);
  counter("tessera_http_request_timeouts_total", "Requests cut off by a deadline.", s.timeouts);
  counter("tessera_http_tls_failures_total",
          "Failed TLS handshakes (including clients without a valid certificate).", s.tls_failures);
  counter("tessera_http_clients_denied_total", "Verified clients whose name is not allowed.",
          s.clients_denied);
  return out;
}

}  // namespace tessera::net
