// Kubernetes client, informer and fake API server: kubeconfig parsing, TLS, CRUD and watch
// semantics against the fake, rate limiting, backoff, and convergence under injected faults.
#include "kube/client.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "kube/informer.h"
#include "kube/leader.h"
#include "tests/kube/fake_apiserver.h"

namespace tessera::kube {
namespace {

using testing::FakeApiServer;
using testing::FakeApiServerOptions;
using Seconds = std::chrono::duration<double>;

// ---------------------------------------------------------------------------------------------
// Helpers

template <typename Pred>
bool WaitUntil(Pred pred, double timeout_s = 10) {
  const auto deadline = std::chrono::steady_clock::now() + Seconds(timeout_s);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

double Since(std::chrono::steady_clock::time_point t) {
  return Seconds(std::chrono::steady_clock::now() - t).count();
}

std::string Base64(const std::string& in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint8_t(in[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-kube-XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& rel, const std::string& content) const {
    const auto p = std::filesystem::path(path_) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }

 private:
  std::string path_;
};

Json Pod(const std::string& ns, const std::string& name, Json labels = Json::object(),
         const std::string& scheduler = "tessera") {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", std::move(labels)}}},
          {"spec",
           {{"schedulerName", scheduler},
            {"containers", {{{"name", "main"}, {"image", "trainer:1"}}}}}}};
}

Json Node(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"gpu", "a100"}}}}},
          {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}}}}}};
}

std::string Rv(const Json& obj) {
  return obj["metadata"].value("resourceVersion", "");
}

std::unique_ptr<Client> NewClient(const ClientConfig& cfg) {
  auto c = Client::Create(cfg);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

class FakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fake_.Start().ok());
    client_ = NewClient(fake_.client_config());
    ASSERT_TRUE(client_);
  }
  FakeApiServer fake_;
  std::unique_ptr<Client> client_;
};

// ---------------------------------------------------------------------------------------------
// Kubeconfig and in-cluster configuration

TEST(KubeconfigTest, CurrentContextWithInlineData) {
  const std::string yaml = R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: prod
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: )" +
                           Base64("CA-PEM") +
                           R"(
contexts:
- name: dev
  context: {cluster: prod, user: admin, namespace: ml}
- name: other
  context: {cluster: prod, user: robot}
users:
- name: admin
  user:
    client-certificate-data: )" +
                           Base64("CERT-PEM") +
                           R"(
    client-key-data: )" + Base64("KEY-PEM") +
                           R"(
- name: robot
  user:
    token: abc.def
)";
  auto cfg = ParseKubeconfig(yaml, "/nowhere");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->server, "https://10.0.0.1:6443");
  EXPECT_EQ(cfg->ca_pem, "CA-PEM");
  EXPECT_EQ(cfg->client_cert_pem, "CERT-PEM");
  EXPECT_EQ(cfg->client_key_pem, "KEY-PEM");
  EXPECT_EQ(cfg->default_namespace, "ml");
  EXPECT_TRUE(cfg->bearer_token.empty());

  auto other = ParseKubeconfig(yaml, "/nowhere", "other");
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ(other->bearer_token, "abc.def");
  EXPECT_TRUE(other->client_cert_pem.empty());
}

TEST(KubeconfigTest, FileReferencesResolveAgainstTheKubeconfigDirectory) {
  TempDir dir;
  dir.Write("certs/ca.pem", "CA FROM FILE");
  dir.Write("certs/client.pem", "CERT FROM FILE");
  const std::string key = dir.Write("abs/key.pem", "KEY FROM FILE");
  dir.Write("token.txt", "  file-token\n");
  const std::string path = dir.Write("config", R"(
current-context: a
clusters:
- name: c
  cluster:
    server: https://kube.example:443
    certificate-authority: certs/ca.pem
- name: insecure
  cluster: {server: "http://127.0.0.1:8080", insecure-skip-tls-verify: true}
contexts:
- {name: a, context: {cluster: c, user: files}}
- {name: b, context: {cluster: insecure, user: tokenfile}}
users:
- name: files
  user: {client-certificate: certs/client.pem, client-key: )" +
                                                   key + R"(}
- name: tokenfile
  user: {tokenFile: token.txt}
)");
  auto a = LoadKubeconfig(path);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->ca_pem, "CA FROM FILE");
  EXPECT_EQ(a->client_cert_pem, "CERT FROM FILE");
  EXPECT_EQ(a->client_key_pem, "KEY FROM FILE");
  auto b = LoadKubeconfig(path, "b");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->bearer_token, "file-token");
  EXPECT_TRUE(b->insecure_skip_verify);
  EXPECT_EQ(b->server, "http://127.0.0.1:8080");

  // A supplied reader replaces the file system.
  auto c = ParseKubeconfig("current-context: b\n" + std::string(R"(
clusters: [{name: insecure, cluster: {server: "https://h"}}]
contexts: [{name: b, context: {cluster: insecure, user: t}}]
users: [{name: t, user: {tokenFile: tok}}]
)"),
                           "/base", "", [](const std::string& p) -> Result<std::string> {
                             if (p == "/base/tok") return std::string("from-reader");
                             return NotFound(p);
                           });
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->bearer_token, "from-reader");
}

TEST(KubeconfigTest, ErrorsNameTheProblem) {
  const auto err = [](const std::string& yaml, const std::string& ctx = "") {
    auto r = ParseKubeconfig(yaml, "/nonexistent-dir", ctx);
    EXPECT_FALSE(r.ok()) << yaml;
    return r.ok() ? std::string("(ok)") : r.status().ToString();
  };
  const std::string base = R"(
clusters: [{name: c, cluster: {server: "https://h:6443"}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
)";
  EXPECT_NE(err(base + "users: [{name: u, user: {}}]").find("current-context"), std::string::npos);
  EXPECT_NE(err(base + "users: [{name: u, user: {}}]", "nope").find("'nope'"), std::string::npos);
  EXPECT_NE(err("current-context: x\n" + base).find("users"), std::string::npos);
  EXPECT_NE(err(R"(current-context: x
clusters: [{name: c, cluster: {}}]
contexts: [{name: x, context: {cluster: c}}]
)")
                .find("server is missing"),
            std::string::npos);
  EXPECT_NE(err("current-context: x\n" + base +
                "users: [{name: u, user: {client-certificate-data: '@@@'}}]")
                .find("client-certificate-data: invalid base64"),
            std::string::npos);
  EXPECT_NE(err("current-context: x\n" + base +
                "users: [{name: u, user: {client-certificate-data: " + Base64("x") + "}}]")
                .find("together"),
            std::string::npos);
  const std::string missing =
      err("current-context: x\n" + base + "users: [{name: u, user: {tokenFile: missing}}]");
  EXPECT_NE(missing.find("IO_ERROR"), std::string::npos) << missing;
  EXPECT_NE(missing.find("tokenFile"), std::string::npos) << missing;
  EXPECT_NE(err("current-context: x\n" + base + "users: [{name: u, user: {exec: {command: x}}}]")
                .find("exec is not supported"),
            std::string::npos);
  EXPECT_NE(err("{{{ not yaml").find("INVALID_ARGUMENT"), std::string::npos);
  EXPECT_NE(err("- just\n- a list\n").find("must be a YAML map"), std::string::npos);
  EXPECT_EQ(LoadKubeconfig("/nonexistent-dir/config").status().code(), StatusCode::kIoError);
}

TEST(InClusterConfigTest, ReadsServiceAccountAndEnvironment) {
  TempDir dir;
  dir.Write("token", "sa-token\n");
  dir.Write("ca.crt", "SA CA");
  dir.Write("namespace", "tessera-system");
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto cfg = InClusterConfig(dir.path());
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->server, "https://10.96.0.1:443");
  EXPECT_EQ(cfg->bearer_token, "sa-token");
  EXPECT_EQ(cfg->ca_pem, "SA CA");
  EXPECT_EQ(cfg->default_namespace, "tessera-system");
  setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  EXPECT_EQ(InClusterConfig(dir.path())->server, "https://[fd00::1]:443");
  unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_EQ(InClusterConfig(dir.path()).status().code(), StatusCode::kFailedPrecondition);
  unsetenv("KUBERNETES_SERVICE_PORT");
}

// ---------------------------------------------------------------------------------------------
// TLS with a throwaway CA

struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertDeleter {
  void operator()(X509* x) const { X509_free(x); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;
using CertPtr = std::unique_ptr<X509, CertDeleter>;

KeyPtr NewKey() {
  return KeyPtr(EVP_EC_gen("P-256"));
}

void AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  ASSERT_NE(ext, nullptr);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// A certificate for `key` named `cn`, signed by issuer (self-signed CA when issuer is null).
CertPtr NewCert(EVP_PKEY* key, const char* cn, X509* issuer, EVP_PKEY* issuer_key,
                const char* san = "IP:127.0.0.1,DNS:localhost") {
  static long serial = 1;
  CertPtr x(X509_new());
  X509_set_version(x.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x.get()), serial++);
  X509_gmtime_adj(X509_getm_notBefore(x.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), 86400);
  X509_set_pubkey(x.get(), key);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(x.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
  X509_set_issuer_name(x.get(), X509_get_subject_name(issuer ? issuer : x.get()));
  X509* signer = issuer ? issuer : x.get();
  if (issuer == nullptr) {
    AddExt(x.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
    AddExt(x.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    AddExt(x.get(), signer, NID_basic_constraints, "CA:FALSE");
    AddExt(x.get(), signer, NID_subject_alt_name, san);
    AddExt(x.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth");
  }
  X509_sign(x.get(), issuer_key ? issuer_key : key, EVP_sha256());
  return x;
}

std::string Pem(X509* x) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, x);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string s(data, static_cast<size_t>(n));
  BIO_free(bio);
  return s;
}

std::string Pem(EVP_PKEY* k) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, k, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string s(data, static_cast<size_t>(n));
  BIO_free(bio);
  return s;
}

struct Pki {
  KeyPtr ca_key = NewKey(), other_ca_key = NewKey(), server_key = NewKey(), client_key = NewKey();
  CertPtr ca = NewCert(ca_key.get(), "test-ca", nullptr, nullptr);
  CertPtr other_ca = NewCert(other_ca_key.get(), "other-ca", nullptr, nullptr);
  CertPtr server = NewCert(server_key.get(), "apiserver", ca.get(), ca_key.get());
  CertPtr client = NewCert(client_key.get(), "tessera-client", ca.get(), ca_key.get());
  CertPtr elsewhere =
      NewCert(server_key.get(), "127.0.0.1", ca.get(), ca_key.get(), "DNS:other.example");
};

// An HTTPS server answering GET /whoami with the client certificate's CN and the bearer token.
class TlsServer {
 public:
  TlsServer(const Pki& pki, bool require_client_cert, X509* cert = nullptr) {
    X509_STORE* client_cas = nullptr;
    if (require_client_cert) {
      client_cas = X509_STORE_new();
      X509_STORE_add_cert(client_cas, pki.ca.get());
    }
    server_ = std::make_unique<httplib::SSLServer>(cert ? cert : pki.server.get(),
                                                   pki.server_key.get(), client_cas);
    server_->Get("/whoami", [](const httplib::Request& req, httplib::Response& res) {
      std::string cn;
      if (req.ssl != nullptr) {
        if (X509* peer = SSL_get1_peer_certificate(req.ssl)) {
          char buf[256] = {0};
          X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, buf, sizeof buf);
          cn = buf;
          X509_free(peer);
        }
      }
      res.set_content(
          Json{{"cn", cn}, {"authorization", req.get_header_value("Authorization")}}.dump(),
          "application/json");
    });
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~TlsServer() {
    server_->stop();
    thread_.join();
  }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }

 private:
  std::unique_ptr<httplib::SSLServer> server_;
  std::thread thread_;
  int port_ = 0;
};

TEST(TlsTest, VerifiesTheServerAgainstTheConfiguredCa) {
  Pki pki;
  TlsServer server(pki, false);
  ClientConfig cfg;
  cfg.server = server.url();
  cfg.timeout_s = 5;
  cfg.bearer_token = "secret-token";

  cfg.ca_pem = Pem(pki.ca.get());
  auto good = NewClient(cfg);
  auto who = good->Get("/whoami");
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ((*who)["authorization"], "Bearer secret-token");
  EXPECT_EQ((*who)["cn"], "");

  cfg.ca_pem = Pem(pki.other_ca.get());
  auto wrong = NewClient(cfg);
  auto refused = wrong->Get("/whoami");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(HttpStatusOf(refused.status()), 0);

  cfg.insecure_skip_verify = true;
  auto insecure = NewClient(cfg);
  EXPECT_TRUE(insecure->Get("/whoami").ok());

  // Signed by the right CA but for another host name.
  TlsServer elsewhere(pki, false, pki.elsewhere.get());
  cfg.server = elsewhere.url();
  cfg.insecure_skip_verify = false;
  cfg.ca_pem = Pem(pki.ca.get());
  auto mismatch = NewClient(cfg);
  EXPECT_EQ(mismatch->Get("/whoami").status().code(), StatusCode::kUnavailable);

  cfg.insecure_skip_verify = false;
  cfg.ca_pem = "not a certificate";
  EXPECT_EQ(Client::Create(cfg).status().code(), StatusCode::kInvalidArgument);
}

TEST(TlsTest, PresentsTheClientCertificate) {
  Pki pki;
  TlsServer server(pki, true);
  ClientConfig cfg;
  cfg.server = server.url();
  cfg.timeout_s = 5;
  cfg.ca_pem = Pem(pki.ca.get());
  auto anonymous = NewClient(cfg);
  EXPECT_FALSE(anonymous->Get("/whoami").ok());

  cfg.client_cert_pem = Pem(pki.client.get());
  cfg.client_key_pem = Pem(pki.client_key.get());
  auto mtls = NewClient(cfg);
  auto who = mtls->Get("/whoami");
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ((*who)["cn"], "tessera-client");

  cfg.client_key_pem = Pem(pki.server_key.get());
  EXPECT_EQ(Client::Create(cfg).status().code(), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Requests against the fake API server

TEST_F(FakeTest, StrategicMergePatchMergesConditionsByType) {
  const std::string pods = "/api/v1/namespaces/ml/pods";
  ASSERT_TRUE(client_->Post(pods, Pod("ml", "p")).ok());
  const Json foreign = {{"type", "example.com/Audited"}, {"status", "True"}};
  ASSERT_TRUE(
      client_->MergePatch(pods + "/p/status", {{"status", {{"conditions", {foreign}}}}}).ok());
  auto scheduled = [](const std::string& status) {
    return Json{{"status",
                 {{"conditions", Json::array({{{"type", "PodScheduled"}, {"status", status}}})}}}};
  };
  // Strategic merge keeps the other condition and updates the one of the same type.
  ASSERT_TRUE(client_->StrategicMergePatch(pods + "/p/status", scheduled("False")).ok());
  auto two = client_->StrategicMergePatch(pods + "/p/status", scheduled("Unknown"));
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  const Json& merged = (*two)["status"]["conditions"];
  ASSERT_EQ(merged.size(), 2u) << (*two)["status"].dump();
  const bool first = merged[0] == foreign;  // the order of merged items is not specified
  EXPECT_EQ(merged[first ? 0 : 1], foreign);
  EXPECT_EQ(merged[first ? 1 : 0]["status"], "Unknown");
  // A JSON merge patch replaces the list, as on the real API server.
  auto one = client_->MergePatch(pods + "/p/status", scheduled("False"));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*one)["status"]["conditions"].size(), 1u);
  // Custom resources take no strategic merge patches.
  const std::string queues = "/apis/tessera.io/v1alpha1/queues";
  ASSERT_TRUE(client_
                  ->Post(queues, {{"apiVersion", "tessera.io/v1alpha1"},
                                  {"kind", "Queue"},
                                  {"metadata", {{"name", "q"}}}})
                  .ok());
  auto cr = client_->StrategicMergePatch(queues + "/q", {{"spec", {{"weight", 2}}}});
  EXPECT_EQ(HttpStatusOf(cr.status()), 415);
}

TEST_F(FakeTest, CrudConflictsAndMergePatch) {
  const std::string pods = "/api/v1/namespaces/ml/pods";
  auto created = client_->Post(pods, Pod("ml", "train-0", {{"app", "train"}}));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_FALSE((*created)["metadata"].value("uid", "").empty());
  EXPECT_EQ((*created)["status"]["phase"], "Pending");

  auto again = client_->Post(pods, Pod("ml", "train-0"));
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(HttpStatusOf(again.status()), 409);

  auto got = client_->Get(pods + "/train-0");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(Rv(*got), Rv(*created));

  Json update = *got;
  update["metadata"]["labels"]["tier"] = "gold";
  auto updated = client_->Put(pods + "/train-0", update);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_NE(Rv(*updated), Rv(*got));

  update["metadata"]["labels"]["tier"] = "silver";  // still carries the old version
  auto stale = client_->Put(pods + "/train-0", update);
  EXPECT_EQ(stale.status().code(), StatusCode::kConflict);
  EXPECT_EQ(HttpStatusOf(stale.status()), 409);
  EXPECT_NE(stale.status().message().find("the object has been modified"), std::string::npos);

  auto patched = client_->MergePatch(
      pods + "/train-0",
      {{"metadata",
        {{"annotations", {{"gpu.tessera.io/mig", "3g.40gb"}}}, {"labels", {{"app", nullptr}}}}}});
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ((*patched)["metadata"]["annotations"]["gpu.tessera.io/mig"], "3g.40gb");
  EXPECT_FALSE((*patched)["metadata"]["labels"].contains("app"));
  EXPECT_EQ((*patched)["metadata"]["labels"]["tier"], "gold");

  auto stale_patch = client_->MergePatch(
      pods + "/train-0", {{"metadata", {{"resourceVersion", Rv(*got)}, {"labels", {{"x", "y"}}}}}});
  EXPECT_EQ(HttpStatusOf(stale_patch.status()), 409);

  // The status subresource changes only .status; the main resource ignores .status.
  auto phase = client_->MergePatch(pods + "/train-0/status", {{"status", {{"phase", "Running"}}}});
  ASSERT_TRUE(phase.ok());
  EXPECT_EQ((*phase)["status"]["phase"], "Running");
  auto ignored = client_->MergePatch(pods + "/train-0", {{"status", {{"phase", "Failed"}}}});
  ASSERT_TRUE(ignored.ok());
  EXPECT_EQ((*ignored)["status"]["phase"], "Running");

  // A no-op update keeps the version.
  auto same =
      client_->MergePatch(pods + "/train-0", {{"metadata", {{"labels", {{"tier", "gold"}}}}}});
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(Rv(*same), Rv(*ignored));

  EXPECT_TRUE(client_->Delete(pods + "/train-0").ok());
  auto gone = client_->Get(pods + "/train-0");
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(HttpStatusOf(gone.status()), 404);
  EXPECT_NE(gone.status().message().find("pods \"train-0\" not found"), std::string::npos);
  EXPECT_EQ(client_->Delete(pods + "/train-0").status().code(), StatusCode::kNotFound);

  // Cluster-scoped objects and custom resources work the same way.
  ASSERT_TRUE(client_->Post("/api/v1/nodes", Node("gpu-a")).ok());
  EXPECT_TRUE(client_->Get("/api/v1/nodes/gpu-a").ok());
  const std::string claims = "/apis/tessera.io/v1alpha1/namespaces/ml/gpuclaims";
  auto claim = client_->Post(claims, {{"apiVersion", "tessera.io/v1alpha1"},
                                      {"kind", "GpuClaim"},
                                      {"metadata", {{"name", "c1"}}},
                                      {"spec", {{"profile", "1g.10gb"}}}});
  ASSERT_TRUE(claim.ok()) << claim.status().ToString();
  EXPECT_EQ((*claim)["metadata"]["namespace"], "ml");
  auto claim_list = client_->List(claims);
  ASSERT_TRUE(claim_list.ok());
  EXPECT_EQ((*claim_list)["kind"], "GpuClaimList");
  ASSERT_EQ((*claim_list)["items"].size(), 1u);

  EXPECT_EQ(HttpStatusOf(client_->Get("/not/an/api/path").status()), 404);
  // Patch types the fake does not implement are refused, not misapplied.
  httplib::Client raw("127.0.0.1", fake_.port());
  auto json_patch = raw.Patch("/api/v1/nodes/gpu-a", "[]", "application/json-patch+json");
  ASSERT_TRUE(json_patch);
  EXPECT_EQ(json_patch->status, 415);
}

TEST_F(FakeTest, PagedListIsAConsistentSnapshot) {
  for (int i = 0; i < 1203; ++i)
    ASSERT_TRUE(
        fake_.Create("/api/v1/namespaces/ml/pods", Pod("ml", "p" + std::to_string(i))).ok());
  ASSERT_TRUE(fake_.Create("/api/v1/namespaces/other/pods", Pod("other", "q")).ok());

  const int64_t pages_before = fake_.counters().list_pages;
  auto all = client_->List("/api/v1/pods", {}, 500);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ((*all)["items"].size(), 1204u);
  EXPECT_EQ((*all)["metadata"]["resourceVersion"], fake_.resource_version());
  EXPECT_EQ(fake_.counters().list_pages - pages_before, 3);
  auto ns_only = client_->List("/api/v1/namespaces/other/pods");
  ASSERT_TRUE(ns_only.ok());
  ASSERT_EQ((*ns_only)["items"].size(), 1u);

  // Pages after the first come from the snapshot taken at the first page.
  auto first = client_->Get("/api/v1/namespaces/ml/pods", {{"limit", "1000"}});
  ASSERT_TRUE(first.ok());
  const std::string cont = (*first)["metadata"]["continue"];
  EXPECT_EQ((*first)["metadata"]["remainingItemCount"], 203);
  ASSERT_TRUE(fake_.Delete("/api/v1/namespaces/ml/pods/p999").ok());  // sorts in page 2
  auto second = client_->Get("/api/v1/namespaces/ml/pods", {{"limit", "1000"}, {"continue", cont}});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)["items"].size(), 203u);
  EXPECT_EQ((*second)["metadata"]["resourceVersion"], (*first)["metadata"]["resourceVersion"]);
  EXPECT_FALSE((*second)["metadata"].contains("continue"));

  // Once the history no longer reaches the snapshot, the token has expired.
  auto third = client_->Get("/api/v1/namespaces/ml/pods", {{"limit", "1000"}});
  ASSERT_TRUE(third.ok());
  fake_.SetHistoryLimit(0);
  ASSERT_TRUE(fake_.Create("/api/v1/nodes", Node("n")).ok());
  auto expired = client_->Get("/api/v1/namespaces/ml/pods",
                              {{"limit", "1000"}, {"continue", (*third)["metadata"]["continue"]}});
  EXPECT_EQ(HttpStatusOf(expired.status()), 410);
}

TEST_F(FakeTest, FieldAndLabelSelectors) {
  const std::string pods = "/api/v1/namespaces/ml/pods";
  ASSERT_TRUE(fake_.Create(pods, Pod("ml", "pending", {{"app", "a"}})).ok());
  ASSERT_TRUE(fake_.Create(pods, Pod("ml", "other-sched", {{"app", "a"}}, "default")).ok());
  Json bound = Pod("ml", "bound", {{"app", "b"}});
  bound["spec"]["nodeName"] = "gpu-a";
  bound["status"]["phase"] = "Succeeded";
  ASSERT_TRUE(fake_.Create(pods, bound).ok());
  const auto names = [&](std::map<std::string, std::string> q) {
    auto r = client_->List("/api/v1/pods", q);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::set<std::string> out;
    if (r.ok())
      for (const Json& p : (*r)["items"]) out.insert(p["metadata"]["name"].get<std::string>());
    return out;
  };
  using Names = std::set<std::string>;
  EXPECT_EQ(names({{"fieldSelector", "spec.schedulerName=tessera,spec.nodeName="}}),
            Names{"pending"});
  EXPECT_EQ(names({{"fieldSelector", "spec.nodeName=gpu-a"}}), Names{"bound"});
  EXPECT_EQ(names({{"fieldSelector", "status.phase!=Succeeded,status.phase!=Failed"}}),
            (Names{"pending", "other-sched"}));
  EXPECT_EQ(names({{"fieldSelector", "metadata.name==bound"}}), Names{"bound"});
  EXPECT_EQ(names({{"labelSelector", "app=a"}}), (Names{"pending", "other-sched"}));
  EXPECT_EQ(names({{"labelSelector", "app!=a"}}), Names{"bound"});
  EXPECT_EQ(names({{"labelSelector", "!app"}}), Names{});
  EXPECT_EQ(names({{"labelSelector", "app,app=b"}}), Names{"bound"});
  auto bad = client_->List("/api/v1/pods", {{"fieldSelector", "spec.priority=1"}});
  EXPECT_EQ(HttpStatusOf(bad.status()), 400);
}

TEST_F(FakeTest, WatchDeliversEventsInOrderWithBookmarks) {
  fake_.SetBookmarkInterval(0.05);
  const std::string pods = "/api/v1/namespaces/ml/pods";
  const std::string from = fake_.resource_version();
  ASSERT_TRUE(client_->Post(pods, Pod("ml", "w")).ok());
  ASSERT_TRUE(client_->MergePatch(pods + "/w", {{"metadata", {{"labels", {{"x", "1"}}}}}}).ok());
  ASSERT_TRUE(client_->Delete(pods + "/w").ok());
  const std::string last = fake_.resource_version();

  std::vector<std::string> types;
  std::string bookmark_rv;
  const Status st = client_->Watch(pods, {}, from, [&](const WatchEvent& ev) {
    if (ev.type == "BOOKMARK") {
      bookmark_rv = Rv(ev.object);
      EXPECT_EQ(ev.object["kind"], "Pod");
      return false;
    }
    types.push_back(ev.type);
    EXPECT_EQ(ev.object["metadata"]["name"], "w");
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(types, (std::vector<std::string>{"ADDED", "MODIFIED", "DELETED"}));
  EXPECT_EQ(bookmark_rv, last);

  // resourceVersion "" starts with synthetic ADDED events for what exists now.
  ASSERT_TRUE(fake_.Create(pods, Pod("ml", "existing")).ok());
  std::vector<std::string> initial;
  EXPECT_TRUE(client_
                  ->Watch(pods, {}, "",
                          [&](const WatchEvent& ev) {
                            if (ev.type == "BOOKMARK") return false;
                            initial.push_back(ev.type + " " +
                                              ev.object["metadata"].value("name", ""));
                            return true;
                          })
                  .ok());
  EXPECT_EQ(initial, std::vector<std::string>{"ADDED existing"});
}

TEST_F(FakeTest, WatchAppliesSelectorsToOldAndNewState) {
  fake_.SetBookmarkInterval(0.05);
  const std::string from = fake_.resource_version();
  ASSERT_TRUE(fake_.Create("/api/v1/namespaces/ml/pods", Pod("ml", "p")).ok());
  ASSERT_TRUE(fake_.Create("/api/v1/namespaces/ml/pods", Pod("ml", "q", {}, "default")).ok());
  ASSERT_TRUE(client_->Bind("ml", "p", "", "gpu-a", {}).ok());
  std::vector<std::string> seen;
  EXPECT_TRUE(client_
                  ->Watch("/api/v1/pods",
                          {{"fieldSelector", "spec.schedulerName=tessera,spec.nodeName="}}, from,
                          [&](const WatchEvent& ev) {
                            if (ev.type == "BOOKMARK") return false;
                            seen.push_back(ev.type + " " + ev.object["metadata"].value("name", ""));
                            return true;
                          })
                  .ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED p", "DELETED p"}));
}

TEST_F(FakeTest, TooOldVersionIsGoneAsErrorEventOrHttp) {
  const std::string from = fake_.resource_version();
  fake_.SetHistoryLimit(2);
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(fake_.Create("/api/v1/nodes", Node("n" + std::to_string(i))).ok());
  std::vector<std::string> types;
  const auto record = [&](const WatchEvent& ev) {
    types.push_back(ev.type);
    if (ev.type == "ERROR") {
      EXPECT_EQ(ev.object["code"], 410);
    }
    return true;
  };
  Status st = client_->Watch("/api/v1/nodes", {}, from, record);
  EXPECT_EQ(HttpStatusOf(st), 410) << st.ToString();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(types, std::vector<std::string>{"ERROR"});

  fake_.SetGoneAsHttp(true);
  types.clear();
  st = client_->Watch("/api/v1/nodes", {}, from, record);
  EXPECT_EQ(HttpStatusOf(st), 410) << st.ToString();
  EXPECT_TRUE(types.empty());
  EXPECT_GE(fake_.counters().gone, 2);

  auto bad = client_->Watch("/api/v1/nodes", {}, "not-a-version", record);
  EXPECT_EQ(HttpStatusOf(bad), 400);
}

TEST_F(FakeTest, WatchEndsNormallyAtTimeoutSeconds) {
  fake_.SetBookmarkInterval(60);
  const auto start = std::chrono::steady_clock::now();
  const Status st = client_->Watch(
      "/api/v1/nodes", {}, fake_.resource_version(), [](const WatchEvent&) { return true; }, 1);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_GE(Since(start), 0.9);
}

TEST_F(FakeTest, StopAndCancelInterruptASilentWatchPromptly) {
  fake_.SetBookmarkInterval(60);
  CancelToken token;
  std::thread watcher([&] {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE(client_
                    ->Watch(
                        "/api/v1/nodes", {}, fake_.resource_version(),
                        [](const WatchEvent&) { return true; }, 120, &token)
                    .ok());
    EXPECT_LT(Since(start), 10);
  });
  ASSERT_TRUE(WaitUntil([&] { return fake_.counters().active_watches == 1; }));
  token.Cancel();
  watcher.join();
  EXPECT_TRUE(client_->Get("/api/v1/nodes").ok());  // the client itself keeps working
  EXPECT_TRUE(client_
                  ->Watch(
                      "/api/v1/nodes", {}, "1", [](const WatchEvent&) { return true; }, 1,
                      &token)
                  .ok());  // a cancelled token returns at once

  std::thread stopped([&] {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE(client_
                    ->Watch(
                        "/api/v1/nodes", {}, fake_.resource_version(),
                        [](const WatchEvent&) { return true; }, 120)
                    .ok());
    EXPECT_LT(Since(start), 10);
  });
  ASSERT_TRUE(WaitUntil([&] { return fake_.counters().active_watches >= 1; }));
  client_->Stop();
  stopped.join();
}

TEST_F(FakeTest, BindingSemantics) {
  auto pod = fake_.Create("/api/v1/namespaces/ml/pods", Pod("ml", "train-0"));
  ASSERT_TRUE(pod.ok());
  const std::string uid = (*pod)["metadata"]["uid"];
  EXPECT_EQ(HttpStatusOf(client_->Bind("ml", "train-0", "wrong-uid", "gpu-a", {})), 409);
  ASSERT_TRUE(
      client_->Bind("ml", "train-0", uid, "gpu-a", {{"gpu.tessera.io/assigned", "GPU-1"}}).ok());
  const Json bound = *fake_.Get("/api/v1/namespaces/ml/pods/train-0");
  EXPECT_EQ(bound["spec"]["nodeName"], "gpu-a");
  EXPECT_EQ(bound["metadata"]["annotations"]["gpu.tessera.io/assigned"], "GPU-1");
  bool scheduled = false;
  for (const Json& c : bound["status"]["conditions"])
    scheduled |= c["type"] == "PodScheduled" && c["status"] == "True";
  EXPECT_TRUE(scheduled);

  const Status again = client_->Bind("ml", "train-0", uid, "gpu-b", {});
  EXPECT_EQ(again.code(), StatusCode::kConflict);
  EXPECT_NE(again.message().find("pod train-0 is already assigned to node \"gpu-a\""),
            std::string::npos)
      << again.ToString();
  EXPECT_EQ(HttpStatusOf(client_->Bind("ml", "missing", "", "gpu-a", {})), 404);
  Json gated = Pod("ml", "gated");
  gated["spec"]["schedulingGates"] = {{{"name", "wait"}}};
  ASSERT_TRUE(fake_.Create("/api/v1/namespaces/ml/pods", gated).ok());
  EXPECT_EQ(HttpStatusOf(client_->Bind("ml", "gated", "", "gpu-a", {})), 409);
  EXPECT_EQ(fake_.BindingsOf("ml", "train-0"), 1);
  EXPECT_EQ(fake_.BindingAttemptsOf("ml", "train-0"), 3);
  EXPECT_EQ(fake_.counters().bindings, 1);
}

TEST_F(FakeTest, EvictionHonoursDisruptionBudgets) {
  for (const char* name : {"a", "b", "c"})
    ASSERT_TRUE(fake_.Create("/api/v1/namespaces/ml/pods", Pod("ml", name, {{"app", "web"}})).ok());
  ASSERT_TRUE(fake_.Create("/api/v1/namespaces/ml/pods", Pod("ml", "lone")).ok());
  fake_.AddDisruptionBudget("web-pdb", "ml", {{"app", "web"}}, 2);
  EXPECT_TRUE(client_->Evict("ml", "a", 0).ok());
  EXPECT_FALSE(fake_.Get("/api/v1/namespaces/ml/pods/a").has_value());
  const Status blocked = client_->Evict("ml", "b");
  EXPECT_EQ(HttpStatusOf(blocked), 429);
  EXPECT_EQ(blocked.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(blocked.message().find("disruption budget"), std::string::npos);
  EXPECT_TRUE(fake_.Get("/api/v1/namespaces/ml/pods/b").has_value());
  EXPECT_TRUE(client_->Evict("ml", "lone").ok());
  EXPECT_EQ(HttpStatusOf(client_->Evict("ml", "missing")), 404);
  EXPECT_EQ(fake_.counters().evictions, 2);
  EXPECT_EQ(fake_.counters().evictions_blocked, 1);
}

TEST(ClientTokenTest, RotatedTokenFileTakesEffectWithoutARestart) {
  testing::FakeApiServer server;
  ASSERT_TRUE(server.Start().ok());
  char dir[] = "/tmp/tessera-token-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/token";
  std::ofstream(file) << "first-token\n";
  ClientConfig cfg = server.client_config();
  cfg.bearer_token = "first-token";
  cfg.bearer_token_file = file;
  cfg.token_reload_s = 0;  // every request reads the file
  {
    auto c = Client::Create(cfg);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->Get("/api/v1/nodes").ok());
    std::ofstream(file) << "second-token\n";
    ASSERT_TRUE((*c)->Get("/api/v1/nodes").ok());  // the same kept-alive connection
    std::filesystem::remove(file);                 // a failed read keeps the last token
    ASSERT_TRUE((*c)->Get("/api/v1/nodes").ok());
  }
  const auto reqs = server.Requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].authorization, "Bearer first-token");
  EXPECT_EQ(reqs[1].authorization, "Bearer second-token");
  EXPECT_EQ(reqs[2].authorization, "Bearer second-token");
  std::filesystem::remove_all(dir);
}

TEST_F(FakeTest, EventsAndLeases) {
  ASSERT_TRUE(client_
                  ->PodEvent("ml", "train-0", "uid-1", "Normal", "Scheduled",
                             "Successfully assigned ml/train-0 to gpu-a")
                  .ok());
  const auto events = fake_.List("/apis/events.k8s.io/v1/namespaces/ml/events");
  ASSERT_EQ(events.size(), 1u);
  const Json& e = events[0];
  EXPECT_EQ(e["metadata"]["name"].get<std::string>().rfind("train-0.", 0), 0u);
  EXPECT_EQ(e["reason"], "Scheduled");
  EXPECT_EQ(e["action"], "Binding");
  EXPECT_EQ(e["regarding"]["uid"], "uid-1");
  EXPECT_EQ(e["reportingController"], "tessera.io/scheduler");
  EXPECT_FALSE(e.value("reportingInstance", "").empty());
  EXPECT_EQ(e["eventTime"].get<std::string>().size(),
            std::string("2026-01-02T03:04:05.123456Z").size());
  auto invalid = client_->Post("/apis/events.k8s.io/v1/namespaces/ml/events",
                               {{"metadata", {{"generateName", "x."}}}, {"reason", "R"}});
  EXPECT_EQ(HttpStatusOf(invalid.status()), 422);
  // Event names are valid names even for the longest pod names (the API server refuses a
  // generateName ending in '.', which is what PodEvent once sent).
  for (const std::string& pod :
       {std::string(253, 'p'), std::string(250, 'a') + ".b", std::string("w")}) {
    const Status st = client_->PodEvent("ml", pod, "", "Warning", "FailedScheduling", "x");
    EXPECT_TRUE(st.ok()) << pod.size() << ": " << st.ToString();
  }

  const std::string leases = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
  auto lease =
      client_->Post(leases, {{"apiVersion", "coordination.k8s.io/v1"},
                             {"kind", "Lease"},
                             {"metadata", {{"name", "tessera"}}},
                             {"spec", {{"holderIdentity", "a"}, {"leaseDurationSeconds", 15}}}});
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  Json mine = *lease, theirs = *lease;
  mine["spec"]["holderIdentity"] = "b";
  theirs["spec"]["holderIdentity"] = "c";
  EXPECT_TRUE(client_->Put(leases + "/tessera", mine).ok());
  EXPECT_EQ(client_->Put(leases + "/tessera", theirs).status().code(), StatusCode::kConflict);
  EXPECT_EQ((*fake_.Get(leases + "/tessera"))["spec"]["holderIdentity"], "b");
}

// ---------------------------------------------------------------------------------------------
// API paths and names

TEST(ApiPathTest, EveryByteOutsideTheUnreservedSetIsEscaped) {
  EXPECT_EQ(EscapePathSegment("AZaz09-._~"), "AZaz09-._~");
  EXPECT_EQ(EscapePathSegment("a/../b?c=1#d%2F e"), "a%2F..%2Fb%3Fc%3D1%23d%252F%20e");
  EXPECT_EQ(EscapePathSegment("\xc3\xa9\x01+:@"), "%C3%A9%01%2B%3A%40");
  auto path = BuildApiPath({"api", "v1", "namespaces", "ml", "pods", "a/../../x?y=1#", "binding"});
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  EXPECT_EQ(*path, "/api/v1/namespaces/ml/pods/a%2F..%2F..%2Fx%3Fy%3D1%23/binding");
  auto dots = BuildApiPath({"api", "v1", "nodes", "..."});
  ASSERT_TRUE(dots.ok());
  EXPECT_EQ(*dots, "/api/v1/nodes/...");
  for (const char* bad : {"", ".", ".."}) {
    auto r = BuildApiPath({"api", "v1", "namespaces", bad, "pods"});
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
  }
  EXPECT_EQ(BuildApiPath({}).status().code(), StatusCode::kInvalidArgument);
}

TEST(NameValidationTest, Dns1123LabelsAndSubdomains) {
  const std::string label63(63, 'a'), sub253 = std::string(126, 'a') + "." + std::string(126, 'b');
  for (const std::string& good : {std::string("ml"), std::string("a"), std::string("0"),
                                  std::string("team-a"), std::string("9-x-9"), label63}) {
    EXPECT_TRUE(ValidateDns1123Label("namespace", good).ok()) << good;
    EXPECT_TRUE(ValidateDns1123Subdomain("pod name", good).ok()) << good;
  }
  for (const std::string& good : {std::string("train-0.shard-1"), std::string("gpu-a.rack-1.dc"),
                                  std::string(200, 'p'), sub253}) {
    EXPECT_TRUE(ValidateDns1123Subdomain("pod name", good).ok()) << good;
    EXPECT_FALSE(ValidateDns1123Label("namespace", good).ok()) << good;
  }
  EXPECT_FALSE(ValidateDns1123Label("namespace", label63 + "a").ok());
  EXPECT_FALSE(ValidateDns1123Subdomain("pod name", sub253 + "b").ok());
  for (const std::string& bad : {std::string(""),
                                 std::string("ML"),
                                 std::string("Train-0"),
                                 std::string("-a"),
                                 std::string("a-"),
                                 std::string("a_b"),
                                 std::string("a b"),
                                 std::string("."),
                                 std::string(".."),
                                 std::string(".a"),
                                 std::string("a."),
                                 std::string("a..b"),
                                 std::string("a.-b"),
                                 std::string("a/b"),
                                 std::string("a?b"),
                                 std::string("a#"),
                                 std::string("a%2Fb"),
                                 std::string("a\nb"),
                                 std::string("a/../../../../apis/x?y=1#"),
                                 std::string("\xc3\xa9")}) {
    const Status label = ValidateDns1123Label("namespace", bad);
    const Status sub = ValidateDns1123Subdomain("pod name", bad);
    EXPECT_EQ(label.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(sub.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(sub.message().rfind("pod name '", 0), 0u) << sub.message();
  }
  // The value is quoted with control bytes escaped and long values shortened.
  EXPECT_EQ(ValidateDns1123Label("namespace", "A\n").message().rfind("namespace 'A\\x0a' is", 0),
            0u);
  const std::string long_message =
      ValidateDns1123Subdomain("node name", std::string(300, 'x')).message();
  EXPECT_NE(long_message.find("... (300 bytes)"), std::string::npos) << long_message;
  EXPECT_LT(long_message.size(), 300u);
}

// Names an attacker could choose for a pod, namespace or node, none of them valid.
const std::vector<std::string>& BadNames() {
  static const std::vector<std::string> kBad = {
      "a/../../../../apis/x?y=1#", "..",      ".",   "x?watch=true",   "x#frag", "a%2Fb", "a/b", "",
      std::string(254, 'a'),       "Train-0", "a b", "a\r\nHost: evil"};
  return kBad;
}

TEST_F(FakeTest, InvalidNamesAreRefusedBeforeAnyRequestIsSent) {
  for (const std::string& bad : BadNames()) {
    SCOPED_TRACE("name '" + bad + "'");
    const Status calls[] = {
        client_->Bind(bad, "p", "", "gpu-a", {}),
        client_->Bind("ml", bad, "", "gpu-a", {}),
        client_->Bind("ml", "p", "", bad, {}),
        client_->PodEvent(bad, "p", "", "Warning", "FailedScheduling", "no GPU"),
        client_->PodEvent("ml", bad, "", "Warning", "FailedScheduling", "no GPU"),
        client_->Evict(bad, "p"),
        client_->Evict("ml", bad),
    };
    const char* fields[] = {"namespace", "pod name",  "node name", "namespace",
                            "pod name",  "namespace", "pod name"};
    for (size_t i = 0; i < std::size(calls); ++i) {
      EXPECT_EQ(calls[i].code(), StatusCode::kInvalidArgument) << i << ": " << calls[i].ToString();
      EXPECT_EQ(calls[i].message().rfind(std::string(fields[i]) + " '", 0), 0u)
          << i << ": " << calls[i].message();
    }
  }
  // A 64-character namespace is a valid subdomain but not a valid label.
  EXPECT_EQ(client_->Evict(std::string(64, 'n'), "p").code(), StatusCode::kInvalidArgument);
  for (const auto& r : fake_.Requests())
    ADD_FAILURE() << "request sent: " << r.method << " " << r.target;
  EXPECT_EQ(fake_.counters().requests, 0);
  EXPECT_EQ(client_->stats().requests, 0);
}

TEST_F(FakeTest, ValidNamesReachTheirExactPaths) {
  const std::string ns = "team-a", pod = "train-0.shard-1", node = "gpu-a.rack-1";
  ASSERT_TRUE(fake_.Create("/api/v1/namespaces/" + ns + "/pods", Pod(ns, pod)).ok());
  ASSERT_TRUE(fake_.Create("/api/v1/namespaces/" + ns + "/pods", Pod(ns, "victim")).ok());
  ASSERT_TRUE(client_->Bind(ns, pod, "", node, {{"tessera.io/assignment", "x"}}).ok());
  ASSERT_TRUE(client_->PodEvent(ns, pod, "", "Normal", "Scheduled", "bound").ok());
  ASSERT_TRUE(client_->Evict(ns, "victim").ok());
  const auto requests = fake_.Requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].target, "/api/v1/namespaces/team-a/pods/train-0.shard-1/binding");
  EXPECT_EQ(requests[1].target, "/apis/events.k8s.io/v1/namespaces/team-a/events");
  EXPECT_EQ(requests[2].target, "/api/v1/namespaces/team-a/pods/victim/eviction");
  EXPECT_EQ((*fake_.Get("/api/v1/namespaces/team-a/pods/train-0.shard-1"))["spec"]["nodeName"],
            node);
}

TEST_F(FakeTest, AnEscapedSegmentStaysOneSegmentOnTheWire) {
  auto path = BuildApiPath({"api", "v1", "namespaces", "ml", "pods", "a/../../x?y=1#"});
  ASSERT_TRUE(path.ok());
  auto r = client_->Get(*path);
  EXPECT_FALSE(r.ok());
  const auto requests = fake_.Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].target, "/api/v1/namespaces/ml/pods/a%2F..%2F..%2Fx%3Fy%3D1%23");
  EXPECT_TRUE(requests[0].query.empty());
}

TEST_F(FakeTest, LeaderElectionChecksTheLeaseNames) {
  LeaderConfig cfg;
  cfg.identity = "replica-a";
  for (const auto& [ns, name] :
       std::vector<std::pair<std::string, std::string>>{{"kube-system/../../x", "tessera"},
                                                        {"kube-system", "tessera?dryRun=All"},
                                                        {"", "tessera"},
                                                        {"kube-system", ""},
                                                        {"Kube-System", "tessera"},
                                                        {"kube-system", ".."}}) {
    cfg.ns = ns;
    cfg.name = name;
    EXPECT_EQ(cfg.Validate().code(), StatusCode::kInvalidArgument) << ns << " " << name;
    LeaderElector elector(*client_, cfg);
    EXPECT_EQ(elector.TryAcquireOrRenew(0).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(elector.Release().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(fake_.Requests().empty());

  cfg.ns = "tessera-system";
  cfg.name = "tessera-scheduler.gpu";
  ASSERT_TRUE(cfg.Validate().ok());
  LeaderElector elector(*client_, cfg);
  auto leads = elector.TryAcquireOrRenew(0);
  ASSERT_TRUE(leads.ok()) << leads.status().ToString();
  EXPECT_TRUE(*leads);
  ASSERT_TRUE(elector.TryAcquireOrRenew(1).ok());
  const std::string leases = "/apis/coordination.k8s.io/v1/namespaces/tessera-system/leases";
  std::vector<std::string> seen;
  for (const auto& r : fake_.Requests()) seen.push_back(r.method + " " + r.target);
  EXPECT_EQ(seen,
            (std::vector<std::string>{"GET " + leases + "/tessera-scheduler.gpu", "POST " + leases,
                                      "GET " + leases + "/tessera-scheduler.gpu",
                                      "PUT " + leases + "/tessera-scheduler.gpu"}));
}

TEST_F(FakeTest, LeaderElectionSaysWhyLeadershipEnded) {
  LeaderConfig cfg;
  cfg.identity = "replica-a";
  cfg.ns = "tessera-system";
  cfg.name = "tessera-scheduler";
  cfg.lease_duration_s = 15;
  cfg.renew_deadline_s = 0.2;
  cfg.retry_period_s = 0.02;
  LeaderElector elector(*client_, cfg);
  std::atomic<bool> stop{false}, started{false}, ended{false};
  std::thread t([&] {
    elector.Run(
        stop, [&] { started = true; }, [&] { ended = true; });
  });
  for (int i = 0; i < 500 && !started; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(started.load());
  EXPECT_EQ(elector.lost_reason(), "");
  // Another replica writes itself into the lease with a fresh renewal.
  const std::string lease =
      "/apis/coordination.k8s.io/v1/namespaces/tessera-system/leases/tessera-scheduler";
  Json obj = *fake_.Get(lease);
  obj["spec"]["holderIdentity"] = "replica-b";
  obj["spec"]["renewTime"] = MicroTimeNow();
  ASSERT_TRUE(fake_.Update(lease, obj).ok());
  for (int i = 0; i < 500 && !ended; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  stop = true;
  t.join();
  ASSERT_TRUE(ended.load());
  EXPECT_EQ(elector.lost_reason(), "another replica took lease tessera-system/tessera-scheduler");

  // Renewal errors that outlast the renew deadline are the reason too.
  ASSERT_TRUE(fake_.Delete(lease).ok());
  LeaderElector second(*client_, cfg);
  stop = false;
  started = false;
  ended = false;
  std::thread t2([&] {
    second.Run(
        stop, [&] { started = true; }, [&] { ended = true; });
  });
  for (int i = 0; i < 500 && !started; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(started.load());
  fake_.SetFailureRate(1.0);
  for (int i = 0; i < 500 && !ended; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  stop = true;
  t2.join();
  fake_.ClearFaults();
  ASSERT_TRUE(ended.load());
  EXPECT_NE(second.lost_reason().find("lease tessera-system/tessera-scheduler not renewed within"),
            std::string::npos)
      << second.lost_reason();
}

TEST_F(FakeTest, HttpErrorsCarryCodeAndRetryAfter) {
  fake_.SetThrottleRate(1.0, 2);
  auto throttled = client_->Get("/api/v1/nodes");
  EXPECT_EQ(HttpStatusOf(throttled.status()), 429);
  EXPECT_EQ(RetryAfterOf(throttled.status()), 2);
  EXPECT_EQ(throttled.status().code(), StatusCode::kResourceExhausted);
  fake_.SetThrottleRate(0);
  fake_.SetFailureRate(1.0);
  auto failed = client_->Get("/api/v1/nodes");
  const int code = HttpStatusOf(failed.status());
  EXPECT_TRUE(code == 500 || code == 503) << failed.status().ToString();
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(RetryAfterOf(failed.status()), -1);
  fake_.ClearFaults();

  // With retries, a throttled request succeeds once the server lets it through.
  ClientConfig cfg = fake_.client_config();
  cfg.max_retries = 5;
  cfg.max_retry_wait_s = 0.01;
  auto retrying = NewClient(cfg);
  fake_.SetThrottleRate(0.5, 1);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(retrying->Get("/api/v1/nodes").ok());
  EXPECT_GT(retrying->stats().retries, 0);

  EXPECT_EQ(HttpStatusOf(HttpError(409, "x", -1, "AlreadyExists")), 409);
  EXPECT_EQ(HttpError(409, "x", -1, "AlreadyExists").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(HttpStatusOf(Unavailable("HTTP 500 but not really")), 0);
  EXPECT_EQ(RetryAfterOf(HttpError(503, "busy", 1.5)), 1.5);
}

TEST_F(FakeTest, ConnectionsAreReused) {
  const auto before = client_->stats();
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(client_->Get("/api/v1/nodes").ok());
  const auto after = client_->stats();
  EXPECT_EQ(after.requests - before.requests, 50);
  EXPECT_LE(after.connections_opened - before.connections_opened, 1);
}

// ---------------------------------------------------------------------------------------------
// Rate limiting and backoff

TEST(RateLimitTest, TokenBucketAllowsBurstThenQps) {
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  TokenBucket bucket(10, 3);
  EXPECT_EQ(bucket.Take(t0), 0);
  EXPECT_EQ(bucket.Take(t0), 0);
  EXPECT_EQ(bucket.Take(t0), 0);
  EXPECT_NEAR(bucket.Take(t0), 0.1, 1e-9);
  EXPECT_NEAR(bucket.Take(t0), 0.2, 1e-9);  // queued behind the previous reservation
  EXPECT_EQ(bucket.Take(t0 + std::chrono::seconds(1)), 0);
  EXPECT_EQ(bucket.Take(t0 + std::chrono::seconds(1)), 0);
  TokenBucket unlimited(0, 1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(unlimited.Take(t0), 0);
}

TEST_F(FakeTest, ClientRespectsQpsAndBurst) {
  ClientConfig cfg = fake_.client_config();
  cfg.qps = 50;
  cfg.burst = 5;
  auto limited = NewClient(cfg);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(limited->Get("/api/v1/nodes").ok());
  const double elapsed = Since(start);
  EXPECT_GE(elapsed, (30 - 5) / 50.0 * 0.9);  // 25 requests beyond the burst at 50/s
  EXPECT_LT(elapsed, 20);
  EXPECT_GT(limited->stats().rate_limit_wait_s, 0.3);
}

TEST(BackoffTest, FullJitterWithinBoundsAndDeterministic) {
  Backoff a(0.1, 2.0, 42), b(0.1, 2.0, 42), c(0.1, 2.0, 43);
  std::vector<double> da, dc;
  double largest = 0;
  for (int n = 0; n < 30; ++n) {
    const double cap = std::min(2.0, 0.1 * std::pow(2.0, n));
    const double d = a.Next();
    EXPECT_GE(d, 0);
    EXPECT_LT(d, cap);
    EXPECT_EQ(d, b.Next());
    da.push_back(d);
    dc.push_back(c.Next());
    largest = std::max(largest, d);
  }
  EXPECT_NE(da, dc);
  EXPECT_GT(largest, 0.5);  // jitter spreads over the range, not just near zero
  a.Reset();
  EXPECT_LT(a.Next(), 0.1);
}

// ---------------------------------------------------------------------------------------------
// Informers

struct Recorder {
  std::mutex mu;
  std::vector<std::string> log;
  int synced = 0;
  InformerHandlers Handlers() {
    InformerHandlers h;
    h.on_add = [this](const Json& o) { Add("add " + ObjectKey(o)); };
    h.on_update = [this](const Json& old_obj, const Json& o) {
      EXPECT_EQ(ObjectKey(old_obj), ObjectKey(o));
      Add("update " + ObjectKey(o));
    };
    h.on_delete = [this](const Json& o) { Add("delete " + ObjectKey(o)); };
    h.on_synced = [this] {
      std::lock_guard<std::mutex> lock(mu);
      ++synced;
    };
    return h;
  }
  void Add(std::string s) {
    std::lock_guard<std::mutex> lock(mu);
    log.push_back(std::move(s));
  }
  bool Has(const std::string& s) {
    std::lock_guard<std::mutex> lock(mu);
    return std::find(log.begin(), log.end(), s) != log.end();
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu);
    log.clear();
  }
  int Synced() {
    std::lock_guard<std::mutex> lock(mu);
    return synced;
  }
};

// True when the informer holds exactly the server's objects, at the same versions and content.
bool SameAsServer(const Informer& inf, const FakeApiServer& fake, const std::string& collection) {
  const auto server = fake.List(collection);
  if (server.size() != inf.size()) return false;
  for (const Json& obj : server) {
    const auto cached = inf.Get(ObjectKey(obj));
    if (!cached || *cached != obj) return false;
  }
  return true;
}

TEST_F(FakeTest, InformerMirrorsTheServer) {
  for (const char* n : {"a", "b"}) ASSERT_TRUE(fake_.Create("/api/v1/nodes", Node(n)).ok());
  Recorder rec;
  Informer inf(*client_, "/api/v1/nodes", {}, rec.Handlers());
  ASSERT_TRUE(inf.Start().ok());
  EXPECT_TRUE(inf.synced());
  EXPECT_EQ(inf.size(), 2u);
  EXPECT_TRUE(rec.Has("add a") && rec.Has("add b"));
  EXPECT_EQ(inf.Start().code(), StatusCode::kFailedPrecondition);

  ASSERT_TRUE(fake_.Create("/api/v1/nodes", Node("c")).ok());
  ASSERT_TRUE(fake_.MergePatch("/api/v1/nodes/a", {{"spec", {{"unschedulable", true}}}}).ok());
  ASSERT_TRUE(fake_.Delete("/api/v1/nodes/b").ok());
  ASSERT_TRUE(WaitUntil([&] { return SameAsServer(inf, fake_, "/api/v1/nodes"); }));
  EXPECT_TRUE(rec.Has("add c") && rec.Has("update a") && rec.Has("delete b"));
  EXPECT_EQ(inf.Get("a").value()["spec"]["unschedulable"], true);
  EXPECT_FALSE(inf.Get("b").has_value());
  EXPECT_EQ(inf.resource_version(), fake_.resource_version());
  EXPECT_EQ(inf.stats().lists, 1);
  EXPECT_EQ(inf.stats().events, 3);
  inf.Stop();

  // A failing initial list is returned.
  fake_.SetFailureRate(1.0);
  Informer failing(*client_, "/api/v1/nodes", {}, {});
  EXPECT_EQ(failing.Start().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(failing.synced());
}

TEST_F(FakeTest, InformerRelistsAfterGoneAndReportsTheDifference) {
  const std::string pods = "/api/v1/namespaces/ml/pods";
  for (const char* n : {"a", "b", "c"}) ASSERT_TRUE(fake_.Create(pods, Pod("ml", n)).ok());
  Recorder rec;
  Informer inf(*client_, "/api/v1/pods", {}, rec.Handlers(), 7);
  ASSERT_TRUE(inf.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return fake_.counters().active_watches == 1; }));
  rec.Clear();

  // Changes the watch never delivers (held back, then compacted away): only a relist finds them.
  fake_.SetEventDelay(60000);
  ASSERT_TRUE(fake_.MergePatch(pods + "/b", {{"metadata", {{"labels", {{"v", "2"}}}}}}).ok());
  ASSERT_TRUE(fake_.Delete(pods + "/c").ok());
  ASSERT_TRUE(fake_.Create(pods, Pod("ml", "d")).ok());
  fake_.SetHistoryLimit(0);
  ASSERT_TRUE(WaitUntil([&] { return inf.stats().gone >= 1; }));
  fake_.ClearFaults();
  // The relist fills the cache before it calls the handlers; on_synced comes after them.
  ASSERT_TRUE(
      WaitUntil([&] { return rec.Synced() >= 2 && SameAsServer(inf, fake_, "/api/v1/pods"); }));
  EXPECT_TRUE(rec.Has("update ml/b"));
  EXPECT_TRUE(rec.Has("delete ml/c"));
  EXPECT_TRUE(rec.Has("add ml/d"));
  EXPECT_FALSE(rec.Has("update ml/a"));  // unchanged objects are not reported
  EXPECT_EQ(inf.stats().lists, 2);
  EXPECT_EQ(rec.Synced(), 2);

  // The same through an HTTP 410 on reconnect.
  rec.Clear();
  fake_.SetGoneAsHttp(true);
  fake_.SetEventDelay(60000);
  ASSERT_TRUE(fake_.Delete(pods + "/a").ok());
  fake_.SetHistoryLimit(0);
  fake_.DropAllWatches();
  ASSERT_TRUE(WaitUntil([&] { return inf.stats().gone >= 2; }));
  fake_.ClearFaults();
  ASSERT_TRUE(
      WaitUntil([&] { return rec.Synced() >= 3 && SameAsServer(inf, fake_, "/api/v1/pods"); }));
  EXPECT_TRUE(rec.Has("delete ml/a"));
  EXPECT_EQ(inf.stats().lists, 3);
  EXPECT_EQ(rec.Synced(), 3);
}

// A broken watch makes the view not current until the resumed watch delivers an event.
TEST_F(FakeTest, InformerIsNotCurrentWhileItsWatchIsBroken) {
  ASSERT_TRUE(fake_.Create("/api/v1/nodes", Node("a")).ok());
  Informer inf(*client_, "/api/v1/nodes", {}, {}, 5);
  ASSERT_TRUE(inf.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return fake_.counters().active_watches == 1; }));
  EXPECT_TRUE(inf.current(60));
  fake_.SetFailureRate(1.0);
  fake_.DropAllWatches();
  ASSERT_TRUE(WaitUntil([&] { return !inf.current(60); }));
  EXPECT_TRUE(inf.current(0));  // past a zero grace it counts as current again
  fake_.ClearFaults();
  ASSERT_TRUE(WaitUntil([&] { return fake_.counters().active_watches == 1; }));
  ASSERT_TRUE(fake_.Create("/api/v1/nodes", Node("b")).ok());
  ASSERT_TRUE(WaitUntil([&] { return inf.current(60); }));
  EXPECT_EQ(inf.size(), 2u);
}

TEST_F(FakeTest, InformerConvergesDespiteFaults) {
  const std::string pods = "/api/v1/namespaces/ml/pods";
  for (int i = 0; i < 40; ++i)
    ASSERT_TRUE(fake_.Create(pods, Pod("ml", "p" + std::to_string(i))).ok());
  Informer inf(*client_, "/api/v1/pods", {{"fieldSelector", "spec.schedulerName=tessera"}}, {}, 3);
  ASSERT_TRUE(inf.Start().ok());

  fake_.SetDropWatchesAfterEvents(7);
  fake_.SetDropWatchesAfterSeconds(0.4);
  fake_.SetEventDelay(3);
  fake_.SetFailureRate(0.15);
  fake_.SetThrottleRate(0.1, 1);
  uint64_t x = 12345;
  for (int step = 0; step < 300; ++step) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const std::string name = "p" + std::to_string((x >> 33) % 60);
    switch ((x >> 20) % 4) {
      case 0:
        (void)fake_.Create(pods, Pod("ml", name));
        break;
      case 1:
        (void)fake_.Delete(pods + "/" + name);
        break;
      case 2:
        (void)fake_.MergePatch(pods + "/" + name,
                               {{"metadata", {{"labels", {{"step", std::to_string(step)}}}}}});
        break;
      default:  // leaves the informer's selection
        (void)fake_.MergePatch(pods + "/" + name, {{"spec", {{"schedulerName", "other"}}}});
    }
    if (step == 150) fake_.SetHistoryLimit(5);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  fake_.ClearFaults();
  ASSERT_TRUE(fake_.Create(pods, Pod("ml", "final")).ok());
  const auto selected = [&] {
    std::vector<Json> out;
    for (const Json& p : fake_.List("/api/v1/pods"))
      if (p["spec"]["schedulerName"] == "tessera") out.push_back(p);
    return out;
  };
  const bool converged = WaitUntil(
      [&] {
        const auto want = selected();
        if (want.size() != inf.size()) return false;
        for (const Json& p : want) {
          const auto got = inf.Get(ObjectKey(p));
          if (!got || *got != p) return false;
        }
        return true;
      },
      25);
  EXPECT_TRUE(converged) << "cache " << inf.size() << " vs server " << selected().size();
  const auto c = fake_.counters();
  EXPECT_GT(c.watch_drops, 0);
  EXPECT_GT(c.injected_errors + c.injected_throttles, 0);
  EXPECT_GT(inf.stats().watch_restarts, 0);
}

// ---------------------------------------------------------------------------------------------
// Throughput (figures are printed; the assertions are about correctness only)

void BindAll(Client& client, const std::vector<std::string>& names, int threads) {
  std::vector<std::thread> workers;
  std::atomic<size_t> next{0};
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (size_t i = next++; i < names.size(); i = next++) {
        const Status st =
            client.Bind("ml", names[i], "", "gpu-" + std::to_string(i % 50),
                        {{"gpu.tessera.io/assigned", "GPU-" + std::to_string(i % 8)}});
        EXPECT_TRUE(st.ok()) << st.ToString();
      }
    });
  }
  for (auto& w : workers) w.join();
}

TEST_F(FakeTest, BindThroughput) {
  std::vector<std::string> one, eight;
  for (int i = 0; i < 600; ++i) {
    one.push_back("s" + std::to_string(i));
    eight.push_back("m" + std::to_string(i));
  }
  for (const auto* names : {&one, &eight})
    for (const auto& n : *names)
      ASSERT_TRUE(fake_.Create("/api/v1/namespaces/ml/pods", Pod("ml", n)).ok());
  Informer pending(*client_, "/api/v1/pods", {{"fieldSelector", "spec.nodeName="}}, {});
  ASSERT_TRUE(pending.Start().ok());
  for (const auto& [names, threads] : {std::pair{&one, 1}, std::pair{&eight, 8}}) {
    const auto start = std::chrono::steady_clock::now();
    BindAll(*client_, *names, threads);
    const double rate = static_cast<double>(names->size()) / Since(start);
    std::printf("bind throughput: %d thread(s): %.0f pods/s\n", threads, rate);
    RecordProperty("binds_per_s_" + std::to_string(threads), static_cast<int>(rate));
  }
  for (const auto* names : {&one, &eight})
    for (const auto& n : *names) {
      ASSERT_EQ(fake_.BindingsOf("ml", n), 1) << n;
      ASSERT_EQ(fake_.BindingAttemptsOf("ml", n), 1) << n;
    }
  EXPECT_TRUE(WaitUntil([&] { return pending.size() == 0; }));
}

// Manual: --gtest_also_run_disabled_tests --gtest_filter='*Restart*'
TEST_F(FakeTest, DISABLED_RestartListsFiveThousandNodesAndFiftyThousandPods) {
  auto t = std::chrono::steady_clock::now();
  for (int i = 0; i < 5000; ++i)
    ASSERT_TRUE(fake_.Create("/api/v1/nodes", Node("gpu-" + std::to_string(i))).ok());
  for (int i = 0; i < 50000; ++i) {
    Json p = Pod("ns" + std::to_string(i % 20), "pod-" + std::to_string(i));
    if (i % 2 == 0) p["spec"]["nodeName"] = "gpu-" + std::to_string(i % 5000);
    ASSERT_TRUE(fake_.Create("/api/v1/namespaces/ns" + std::to_string(i % 20) + "/pods", p).ok());
  }
  std::printf("setup (direct): %.2f s\n", Since(t));
  t = std::chrono::steady_clock::now();
  auto pods = client_->List("/api/v1/pods");
  ASSERT_TRUE(pods.ok());
  ASSERT_EQ((*pods)["items"].size(), 50000u);
  std::printf("list 50000 pods (pages of 500): %.2f s\n", Since(t));
  t = std::chrono::steady_clock::now();
  Informer nodes(*client_, "/api/v1/nodes", {}, {});
  Informer all_pods(*client_, "/api/v1/pods", {}, {});
  ASSERT_TRUE(nodes.Start().ok());
  ASSERT_TRUE(all_pods.Start().ok());
  EXPECT_EQ(nodes.size(), 5000u);
  EXPECT_EQ(all_pods.size(), 50000u);
  std::printf("informers synced on 5000 nodes + 50000 pods: %.2f s\n", Since(t));
}

}  // namespace
}  // namespace tessera::kube
