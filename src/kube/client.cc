#include "kube/client.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <thread>
#include <vector>

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

namespace tessera::kube {
namespace {

constexpr std::string_view kHttpPrefix = "HTTP ";
constexpr std::string_view kRetryAfterTag = " (Retry-After: ";

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

bool IsUnreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~';
}

std::string PercentEncode(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (IsUnreserved(c)) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

// The value as it appears in an error message: printable ASCII kept, other bytes and the
// backslash as \xNN, long values shortened.
std::string QuoteForMessage(std::string_view v) {
  static const char* kHex = "0123456789abcdef";
  constexpr size_t kShown = 64;
  std::string out = "'";
  for (size_t i = 0; i < v.size() && i < kShown; ++i) {
    const unsigned char c = static_cast<unsigned char>(v[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  out += "'";
  if (v.size() > kShown) out += "... (" + std::to_string(v.size()) + " bytes)";
  return out;
}

bool IsLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// A non-empty run of [a-z0-9-] starting and ending alphanumeric.
bool IsDnsPart(std::string_view p) {
  if (p.empty() || !IsLowerAlnum(p.front()) || !IsLowerAlnum(p.back())) return false;
  return std::all_of(p.begin(), p.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

std::string EncodeQuery(const std::map<std::string, std::string>& query) {
  std::string out;
  for (const auto& [k, v] : query) {
    out += out.empty() ? '?' : '&';
    out += PercentEncode(k);
    out += '=';
    out += PercentEncode(v);
  }
  return out;
}

double ParseRetryAfter(const httplib::Headers& headers) {
  const auto it = headers.find("Retry-After");
  if (it == headers.end() || it->second.empty()) return -1;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || !std::isfinite(v) || v < 0) return -1;
  return v;
}

// The API server's Status message and reason from an error body (raw text if not a Status).
Status ErrorFromReply(int http_status, const std::string& body, double retry_after) {
  std::string message, reason;
  Json j = Json::parse(body, nullptr, false);
  if (j.is_object()) {
    if (j.contains("message") && j["message"].is_string()) message = j["message"];
    if (j.contains("reason") && j["reason"].is_string()) reason = j["reason"];
  }
  if (message.empty()) message = body.size() > 512 ? body.substr(0, 512) + "..." : body;
  if (message.empty()) message = "HTTP status " + std::to_string(http_status);
  return HttpError(http_status, message, retry_after, reason);
}

std::string OpenSslError() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

struct ServerUrl {
  bool https = false;
  std::string host;
  int port = 0;
  std::string prefix;
};

Result<ServerUrl> ParseServer(const std::string& server) {
  ServerUrl u;
  std::string_view rest(server);
  if (rest.rfind("https://", 0) == 0) {
    u.https = true;
    rest.remove_prefix(8);
  } else if (rest.rfind("http://", 0) == 0) {
    rest.remove_prefix(7);
  } else {
    return InvalidArgument("server '" + server + "' must start with https:// or http://");
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    u.prefix = std::string(rest.substr(slash));
    while (!u.prefix.empty() && u.prefix.back() == '/') u.prefix.pop_back();
  }
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return InvalidArgument("bad server '" + server + "'");
    u.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return InvalidArgument("bad server '" + server + "'");
      port = authority.substr(close + 2);
    }
  } else {
    const size_t colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (u.host.empty()) return InvalidArgument("server '" + server + "' has no host");
  u.port = u.https ? 443 : 80;
  if (!port.empty()) {
    int p = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || p > 65535) return InvalidArgument("bad port in '" + server + "'");
      p = p * 10 + (c - '0');
    }
    if (p <= 0 || p > 65535) return InvalidArgument("bad port in '" + server + "'");
    u.port = p;
  }
  return u;
}

bool IsIpAddress(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// API paths and names

std::string EscapePathSegment(std::string_view segment) {
  return PercentEncode(segment);
}

Result<std::string> BuildApiPath(std::initializer_list<std::string_view> segments) {
  if (segments.size() == 0) return InvalidArgument("API path without segments");
  std::string out;
  for (std::string_view seg : segments) {
    if (seg.empty() || seg == "." || seg == "..")
      return InvalidArgument("API path segment " + QuoteForMessage(seg) +
                             " is empty or a relative step");
    out += '/';
    out += PercentEncode(seg);
  }
  return out;
}

Status ValidateDns1123Label(std::string_view field, std::string_view value) {
  constexpr size_t kMax = 63;
  if (value.size() <= kMax && IsDnsPart(value)) return Status::Ok();
  return InvalidArgument(std::string(field) + " " + QuoteForMessage(value) +
                         " is not a valid DNS-1123 label (1-63 characters of a-z, 0-9 and '-', "
                         "starting and ending with a letter or digit)");
}

Status ValidateDns1123Subdomain(std::string_view field, std::string_view value) {
  constexpr size_t kMax = 253;
  bool ok = !value.empty() && value.size() <= kMax;
  for (size_t start = 0; ok;) {
    const size_t dot = value.find('.', start);
    ok = IsDnsPart(value.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (ok) return Status::Ok();
  return InvalidArgument(std::string(field) + " " + QuoteForMessage(value) +
                         " is not a valid DNS-1123 subdomain (at most 253 characters of a-z, 0-9, "
                         "'-' and '.', each '.'-separated part starting and ending with a letter "
                         "or digit)");
}

// ---------------------------------------------------------------------------------------------
// Errors

Status HttpError(int http_status, const std::string& message, double retry_after_s,
                 const std::string& reason) {
  StatusCode code = StatusCode::kInternal;
  switch (http_status) {
    case 400:
    case 415:
    case 422:
      code = StatusCode::kInvalidArgument;
      break;
    case 401:
    case 403:
      code = StatusCode::kPermissionDenied;
      break;
    case 404:
      code = StatusCode::kNotFound;
      break;
    case 409:
      code = reason == "AlreadyExists" ? StatusCode::kAlreadyExists : StatusCode::kConflict;
      break;
    case 410:
      code = StatusCode::kFailedPrecondition;
      break;
    case 429:
      code = StatusCode::kResourceExhausted;
      break;
    default:
      if (http_status >= 500) code = StatusCode::kUnavailable;
  }
  std::string m = std::string(kHttpPrefix) + std::to_string(http_status) + ": " + message;
  if (retry_after_s >= 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%gs)", retry_after_s);
    m += kRetryAfterTag;
    m += buf;
  }
  return Status(code, std::move(m));
}

int HttpStatusOf(const Status& s) {
  const std::string& m = s.message();
  if (s.ok() || m.size() < kHttpPrefix.size() + 4 || m.compare(0, kHttpPrefix.size(), kHttpPrefix))
    return 0;
  int code = 0;
  for (size_t i = kHttpPrefix.size(); i < kHttpPrefix.size() + 3; ++i) {
    if (m[i] < '0' || m[i] > '9') return 0;
    code = code * 10 + (m[i] - '0');
  }
  return m[kHttpPrefix.size() + 3] == ':' ? code : 0;
}

double RetryAfterOf(const Status& s) {
  if (HttpStatusOf(s) == 0) return -1;
  const size_t at = s.message().rfind(kRetryAfterTag);
  if (at == std::string::npos) return -1;
  const char* p = s.message().c_str() + at + kRetryAfterTag.size();
  char* end = nullptr;
  const double v = std::strtod(p, &end);
  return end != p && *end == 's' ? v : -1;
}

// ---------------------------------------------------------------------------------------------
// CancelToken, TokenBucket, Backoff

void CancelToken::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_.store(true);
  for (auto& [id, fn] : on_cancel_) fn();
}

TokenBucket::TokenBucket(double qps, int burst)
    : qps_(qps), burst_(std::max(1, burst)), tokens_(std::max(1, burst)) {}

double TokenBucket::Take(std::chrono::steady_clock::time_point now) {
  if (qps_ <= 0) return 0;
  if (!started_) {
    started_ = true;
    last_ = now;
  } else if (now > last_) {
    tokens_ = std::min(burst_, tokens_ + std::chrono::duration<double>(now - last_).count() * qps_);
    last_ = now;
  }
  tokens_ -= 1;
  return tokens_ >= 0 ? 0 : -tokens_ / qps_;
}

Backoff::Backoff(double initial_s, double max_s, uint64_t seed)
    : initial_(std::max(initial_s, 1e-6)),
      max_(std::max(max_s, std::max(initial_s, 1e-6))),
      cur_(initial_),
      state_(seed) {}

double Backoff::Next() {
  const double u = static_cast<double>(SplitMix64(state_) >> 11) * 0x1.0p-53;
  const double d = u * cur_;
  cur_ = std::min(max_, cur_ * 2);
  return d;
}

void Backoff::Reset() {
  cur_ = initial_;
}

// ---------------------------------------------------------------------------------------------
// Client

struct Client::Impl {
  struct Conn {
    std::unique_ptr<httplib::ClientImpl> http;
    int64_t uses = 0;
  };

  explicit Impl(const ClientConfig& c) : cfg(c), limiter(c.qps, c.burst) {}

  std::mutex token_mu;
  std::string token;
  std::chrono::steady_clock::time_point token_read{};
  ~Impl() {
    for (X509* x : ca_certs) X509_free(x);
    for (X509* x : chain) X509_free(x);
    if (cert) X509_free(cert);
    if (key) EVP_PKEY_free(key);
  }

  Status LoadPem() {
    if (!url.https) return Status::Ok();
    if (!cfg.ca_pem.empty()) {
      BIO* bio = BIO_new_mem_buf(cfg.ca_pem.data(), static_cast<int>(cfg.ca_pem.size()));
      while (X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) ca_certs.push_back(x);
      BIO_free(bio);
      ERR_clear_error();
      if (ca_certs.empty()) return InvalidArgument("ca_pem contains no PEM certificate");
    }
    if (cfg.client_cert_pem.empty() != cfg.client_key_pem.empty())
      return InvalidArgument("client certificate and key must be given together");
    if (!cfg.client_cert_pem.empty()) {
      BIO* bio =
          BIO_new_mem_buf(cfg.client_cert_pem.data(), static_cast<int>(cfg.client_cert_pem.size()));
      cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
      while (X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) chain.push_back(x);
      BIO_free(bio);
      ERR_clear_error();
      if (!cert) return InvalidArgument("client_cert_pem contains no PEM certificate");
      bio = BIO_new_mem_buf(cfg.client_key_pem.data(), static_cast<int>(cfg.client_key_pem.size()));
      key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
      BIO_free(bio);
      if (!key) {
        ERR_clear_error();
        return InvalidArgument("client_key_pem contains no PEM private key");
      }
      if (X509_check_private_key(cert, key) != 1) {
        ERR_clear_error();
        return InvalidArgument("client key does not match the client certificate");
      }
    }
    return Status::Ok();
  }

  // A new connection object (the socket opens on first use). Server verification is done by
  // OpenSSL during the handshake: chain against our store only (system roots when no CA is
  // configured) and the host name or IP address against the certificate.
  Result<std::unique_ptr<httplib::ClientImpl>> NewConnection(double read_timeout_s) {
    std::unique_ptr<httplib::ClientImpl> c;
    if (url.https) {
      auto ssl = cert ? std::make_unique<httplib::SSLClient>(url.host, url.port, cert, key)
                      : std::make_unique<httplib::SSLClient>(url.host, url.port);
      SSL_CTX* ctx = ssl->ssl_context();
      if (ctx == nullptr || !ssl->is_valid())
        return Internal("cannot create TLS context: " + OpenSslError());
      for (X509* x : chain) SSL_CTX_add1_chain_cert(ctx, x);
      ssl->enable_server_certificate_verification(false);
      if (cfg.insecure_skip_verify) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
      } else {
        X509_STORE* store = X509_STORE_new();
        if (ca_certs.empty()) {
          X509_STORE_set_default_paths(store);
        } else {
          for (X509* x : ca_certs) X509_STORE_add_cert(store, x);
        }
        SSL_CTX_set_cert_store(ctx, store);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
        X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
        if (IsIpAddress(url.host)) {
          X509_VERIFY_PARAM_set1_ip_asc(param, url.host.c_str());
        } else {
          X509_VERIFY_PARAM_set1_host(param, url.host.c_str(), 0);
        }
      }
      ERR_clear_error();
      c = std::move(ssl);
    } else {
      c = std::make_unique<httplib::ClientImpl>(url.host, url.port);
    }
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);
    c->set_url_encode(false);
    c->set_decompress(false);
    c->set_socket_options([this](int) { connections.fetch_add(1); });
    const auto secs = [](double s) { return std::chrono::microseconds(int64_t(s * 1e6)); };
    c->set_connection_timeout(secs(std::min(cfg.timeout_s, 30.0)));
    c->set_read_timeout(secs(read_timeout_s));
    c->set_write_timeout(secs(std::max(cfg.timeout_s, 5.0)));
    if (const std::string token = Token(false); !token.empty()) c->set_bearer_token_auth(token);
    c->set_default_headers({{"User-Agent", cfg.user_agent}, {"Accept", "application/json"}});
    return c;
  }

  // The bearer token: cfg.bearer_token, or the file's content when bearer_token_file is set
  // (re-read when token_reload_s has passed, or when `force`).
  std::string Token(bool force) {
    std::lock_guard<std::mutex> lock(token_mu);
    if (token.empty()) token = cfg.bearer_token;
    if (cfg.bearer_token_file.empty()) return token;
    const auto now = std::chrono::steady_clock::now();
    if (!force && token_read != std::chrono::steady_clock::time_point{} &&
        now - token_read < std::chrono::duration<double>(cfg.token_reload_s))
      return token;
    token_read = now;
    std::ifstream in(cfg.bearer_token_file, std::ios::binary);
    std::string text;
    char buf[4096];
    while (in && text.size() < (1u << 20)) {
      in.read(buf, sizeof buf);
      text.append(buf, static_cast<size_t>(in.gcount()));
    }
    const size_t b = text.find_first_not_of(" \t\r\n");
    const size_t e = text.find_last_not_of(" \t\r\n");
    if (b != std::string::npos && text.size() < (1u << 20)) token = text.substr(b, e - b + 1);
    return token;
  }

  Result<Conn> Acquire() {
    {
      std::lock_guard<std::mutex> lock(pool_mu);
      if (!idle.empty()) {
        Conn c = std::move(idle.back());
        idle.pop_back();
        return c;
      }
    }
    auto http = NewConnection(cfg.timeout_s);
    if (!http.ok()) return http.status();
    return Conn{std::move(*http), 0};
  }

  void Release(Conn c) {
    std::lock_guard<std::mutex> lock(pool_mu);
    if (static_cast<int>(idle.size()) < std::max(0, cfg.max_idle_connections))
      idle.push_back(std::move(c));
  }

  void WaitRateLimit() {
    double wait;
    {
      std::lock_guard<std::mutex> lock(limiter_mu);
      wait = limiter.Take(std::chrono::steady_clock::now());
    }
    if (wait > 0) {
      wait_us.fetch_add(static_cast<int64_t>(wait * 1e6));
      std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    }
  }

  std::string Describe(httplib::Error e) const {
    std::string m = "request to " + cfg.server + " failed: " + httplib::to_string(e);
    const std::string ssl = OpenSslError();
    if (!ssl.empty()) m += " (" + ssl + ")";
    return m;
  }

  Result<Json> Do(const std::string& method, const std::string& path,
                  const std::map<std::string, std::string>& query, const std::string* body,
                  const char* content_type) {
    const std::string target = url.prefix + path + EncodeQuery(query);
    std::unique_ptr<Backoff> retry_backoff;
    for (int attempt = 0;; ++attempt) {
      WaitRateLimit();
      auto conn = Acquire();
      if (!conn.ok()) return conn.status();
      httplib::Request req;
      req.method = method;
      req.path = target;
      if (body != nullptr) {
        req.body = *body;
        req.set_header("Content-Type", content_type);
      }
      httplib::Response res;
      httplib::Error err = httplib::Error::Success;
      const std::string token = Token(false);
      if (!token.empty()) conn->http->set_bearer_token_auth(token);
      requests.fetch_add(1);
      const bool sent = conn->http->send(req, res, err);
      const bool reused = conn->uses++ > 0;
      if (!sent) {
        // A kept-alive connection the server closed while idle: GET is safe to resend once.
        if (reused && method == "GET" && attempt == 0) continue;
        return Unavailable(Describe(err));
      }
      Release(std::move(*conn));
      // A rejected token may have been rotated on disk: re-read it and try once more.
      if (res.status == 401 && attempt == 0 && !cfg.bearer_token_file.empty() &&
          Token(true) != token)
        continue;
      if (res.status >= 200 && res.status < 300) {
        if (res.body.empty()) return Json::object();
        Json j = Json::parse(res.body, nullptr, false);
        if (j.is_discarded()) return Internal(method + " " + path + ": invalid JSON in reply");
        return j;
      }
      const double retry_after = ParseRetryAfter(res.headers);
      const bool retriable = res.status == 429 || (res.status == 503 && retry_after >= 0);
      if (retriable && attempt < cfg.max_retries) {
        if (!retry_backoff) {
          std::lock_guard<std::mutex> lock(limiter_mu);
          retry_backoff = std::make_unique<Backoff>(0.05, cfg.max_retry_wait_s, ++retry_seed);
        }
        const double wait = std::max(std::min(std::max(retry_after, 0.0), cfg.max_retry_wait_s),
                                     retry_backoff->Next());
        retries.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::duration<double>(wait));
        continue;
      }
      return ErrorFromReply(res.status, res.body, retry_after);
    }
  }

  void StopWatch(uint64_t id) {
    std::lock_guard<std::mutex> lock(watch_mu);
    const auto it = active_watches.find(id);
    if (it != active_watches.end()) it->second->stop();
  }

  ClientConfig cfg;
  ServerUrl url;
  std::vector<X509*> ca_certs, chain;
  X509* cert = nullptr;
  EVP_PKEY* key = nullptr;

  std::mutex pool_mu;
  std::vector<Conn> idle;

  std::mutex limiter_mu;
  TokenBucket limiter;
  uint64_t retry_seed = 0;

  std::atomic<bool> stopped{false};
  std::mutex watch_mu;
  std::map<uint64_t, httplib::ClientImpl*> active_watches;
  uint64_t next_watch = 0;

  std::atomic<int64_t> requests{0}, connections{0}, retries{0}, wait_us{0};
};

Client::Client(ClientConfig config) : config_(std::move(config)) {}

Client::~Client() {
  Stop();
}

Result<std::unique_ptr<Client>> Client::Create(ClientConfig config) {
  auto url = ParseServer(config.server);
  if (!url.ok()) return url.status();
  if (config.timeout_s <= 0) return InvalidArgument("timeout_s must be positive");
  std::unique_ptr<Client> client(new Client(std::move(config)));
  client->impl_ = std::make_unique<Impl>(client->config_);
  client->impl_->url = *url;
  TESSERA_RETURN_IF_ERROR(client->impl_->LoadPem());
  auto probe = client->impl_->NewConnection(client->config_.timeout_s);
  if (!probe.ok()) return probe.status();
  client->impl_->Release(Impl::Conn{std::move(*probe), 0});
  return client;
}

Result<Json> Client::Get(const std::string& path, const std::map<std::string, std::string>& query) {
  return impl_->Do("GET", path, query, nullptr, nullptr);
}

Result<Json> Client::Post(const std::string& path, const Json& body) {
  const std::string text = body.dump();
  return impl_->Do("POST", path, {}, &text, "application/json");
}

Result<Json> Client::Put(const std::string& path, const Json& body) {
  const std::string text = body.dump();
  return impl_->Do("PUT", path, {}, &text, "application/json");
}

Result<Json> Client::Delete(const std::string& path, const Json& body) {
  if (body.is_null()) return impl_->Do("DELETE", path, {}, nullptr, nullptr);
  const std::string text = body.dump();
  return impl_->Do("DELETE", path, {}, &text, "application/json");
}

Result<Json> Client::MergePatch(const std::string& path, const Json& patch) {
  const std::string text = patch.dump();
  return impl_->Do("PATCH", path, {}, &text, "application/merge-patch+json");
}

Result<Json> Client::StrategicMergePatch(const std::string& path, const Json& patch) {
  const std::string text = patch.dump();
  return impl_->Do("PATCH", path, {}, &text, "application/strategic-merge-patch+json");
}

Result<Json> Client::List(const std::string& path, const std::map<std::string, std::string>& query,
                          int page_size) {
  constexpr int kAttempts = 3;
  Status last;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    Json items = Json::array();
    std::string rv, kind, api_version, cont;
    bool restart = false;
    do {
      auto q = query;
      if (page_size > 0) q["limit"] = std::to_string(page_size);
      if (!cont.empty()) q["continue"] = cont;
      auto page = Get(path, q);
      if (!page.ok()) {
        if (HttpStatusOf(page.status()) == 410 && !cont.empty()) {
          last = page.status();
          restart = true;
          break;
        }
        return page.status();
      }
      Json& p = *page;
      if (!p.is_object()) return Internal("list " + path + ": reply is not an object");
      cont.clear();
      if (auto m = p.find("metadata"); m != p.end() && m->is_object()) {
        if (rv.empty() && m->contains("resourceVersion") && (*m)["resourceVersion"].is_string())
          rv = (*m)["resourceVersion"];
        if (m->contains("continue") && (*m)["continue"].is_string()) cont = (*m)["continue"];
      }
      if (kind.empty() && p.contains("kind") && p["kind"].is_string()) kind = p["kind"];
      if (api_version.empty() && p.contains("apiVersion") && p["apiVersion"].is_string())
        api_version = p["apiVersion"];
      if (auto it = p.find("items"); it != p.end() && it->is_array()) {
        if (items.empty()) {
          items = std::move(*it);
        } else {
          for (Json& item : *it) items.push_back(std::move(item));
        }
      }
    } while (!cont.empty());
    if (restart) continue;
    Json out = Json::object();
    if (!kind.empty()) out["kind"] = kind;
    if (!api_version.empty()) out["apiVersion"] = api_version;
    out["metadata"] = {{"resourceVersion", rv}};
    out["items"] = std::move(items);
    return out;
  }
  return last;
}

Status Client::Watch(const std::string& path, const std::map<std::string, std::string>& query,
                     const std::string& resource_version,
                     const std::function<bool(const WatchEvent&)>& handler, double timeout_s) {
  return Watch(path, query, resource_version, handler, timeout_s, nullptr);
}

Status Client::Watch(const std::string& path, const std::map<std::string, std::string>& query,
                     const std::string& resource_version,
                     const std::function<bool(const WatchEvent&)>& handler, double timeout_s,
                     CancelToken* cancel) {
  Impl& im = *impl_;
  const auto should_stop = [&] { return im.stopped.load() || (cancel && cancel->cancelled()); };
  if (should_stop()) return Status::Ok();
  auto q = query;
  q["watch"] = "true";
  q["allowWatchBookmarks"] = "true";
  if (!resource_version.empty()) q["resourceVersion"] = resource_version;
  if (timeout_s > 0) q["timeoutSeconds"] = std::to_string(std::max<int64_t>(1, int64_t(timeout_s)));
  im.WaitRateLimit();
  auto conn = im.NewConnection((timeout_s > 0 ? timeout_s : 300) + 30);
  if (!conn.ok()) return conn.status();
  httplib::ClientImpl* http = conn->get();

  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(im.watch_mu);
    id = im.next_watch++;
    im.active_watches[id] = http;
  }
  if (cancel) {
    std::lock_guard<std::mutex> lock(cancel->mu_);
    cancel->on_cancel_[id] = [&im, id] { im.StopWatch(id); };
  }
  const auto unregister = [&] {
    if (cancel) {
      std::lock_guard<std::mutex> lock(cancel->mu_);
      cancel->on_cancel_.erase(id);
    }
    std::lock_guard<std::mutex> lock(im.watch_mu);
    im.active_watches.erase(id);
  };
  if (should_stop()) {
    unregister();
    return Status::Ok();
  }

  int status = 0;
  double retry_after = -1;
  std::string error_body, buf;
  size_t searched = 0;
  Status stream_error;
  bool handler_stopped = false;

  // Returns false to end the stream.
  const auto process_line = [&](const char* b, const char* e) -> bool {
    while (e > b && (e[-1] == '\r' || e[-1] == ' ')) --e;
    if (e == b) return true;
    Json j = Json::parse(b, e, nullptr, false);
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
      stream_error = Unavailable("watch " + path + ": malformed event");
      return false;
    }
    WatchEvent ev;
    ev.type = j["type"].get<std::string>();
    if (auto it = j.find("object"); it != j.end()) ev.object = std::move(*it);
    if (ev.type == "ERROR") {
      int code = 500;
      std::string message = "watch error", reason;
      if (ev.object.is_object()) {
        if (ev.object.contains("code") && ev.object["code"].is_number_integer())
          code = ev.object["code"].get<int>();
        if (ev.object.contains("message") && ev.object["message"].is_string())
          message = ev.object["message"];
        if (ev.object.contains("reason") && ev.object["reason"].is_string())
          reason = ev.object["reason"];
      }
      if (code < 100 || code > 999) code = 500;
      stream_error = HttpError(code, message, -1, reason);
      handler(ev);
      return false;
    }
    if (!handler(ev)) {
      handler_stopped = true;
      return false;
    }
    return true;
  };

  httplib::Request req;
  req.method = "GET";
  req.path = im.url.prefix + path + EncodeQuery(q);
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    retry_after = ParseRetryAfter(r.headers);
    return !should_stop();
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (should_stop()) return false;
    if (status != 200) {
      if (error_body.size() < 65536) error_body.append(data, n);
      return true;
    }
    buf.append(data, n);
    size_t start = 0;
    bool keep_going = true;
    while (keep_going) {
      const size_t nl = buf.find('\n', std::max(start, searched));
      if (nl == std::string::npos) break;
      keep_going = process_line(buf.data() + start, buf.data() + nl) && !should_stop();
      start = nl + 1;
    }
    buf.erase(0, start);
    searched = buf.size();
    return keep_going;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  im.requests.fetch_add(1);
  const bool sent = http->send(req, res, err);
  unregister();
  if (should_stop() || handler_stopped) return Status::Ok();
  if (!stream_error.ok()) return stream_error;
  if (status > 0 && status != 200) return ErrorFromReply(status, error_body, retry_after);
  if (!sent) return Unavailable("watch " + path + ": " + im.Describe(err));
  return Status::Ok();
}

void Client::Stop() {
  if (!impl_) return;
  impl_->stopped.store(true);
  std::lock_guard<std::mutex> lock(impl_->watch_mu);
  for (auto& [id, http] : impl_->active_watches) http->stop();
}

ClientStats Client::stats() const {
  ClientStats s;
  s.requests = impl_->requests.load();
  s.connections_opened = impl_->connections.load();
  s.retries = impl_->retries.load();
  s.rate_limit_wait_s = static_cast<double>(impl_->wait_us.load()) / 1e6;
  return s;
}

}  // namespace tessera::kube
