// Attacks on `tessera extender`: unauthenticated and forged binds, path traversal in names,
// request bodies that try to rewrite nodes, slow clients, oversized bodies, a second instance
// on the same port, and wrong JSON types. In-process servers where the extender's behaviour is
// checked; the real binary where the process matters (memory, exit code).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/extender.h"
#include "tests/kube/fake_apiserver.h"
#include "tests/support/test_paths.h"

extern char** environ;

namespace tessera::kube {
namespace {

using Clock = std::chrono::steady_clock;
using testing::FakeApiServer;

Json GpuNode(const std::string& name, const std::string& product, int gpus) {
  Json n = {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", name}, {"labels", Json::object()}}},
            {"status",
             {{"capacity", {{"cpu", "64"}, {"memory", "512Gi"}}},
              {"allocatable", {{"cpu", "64"}, {"memory", "512Gi"}}}}}};
  if (gpus > 0) {
    n["metadata"]["labels"]["nvidia.com/gpu.product"] = product;
    n["metadata"]["labels"]["nvidia.com/gpu.count"] = std::to_string(gpus);
    n["status"]["capacity"]["nvidia.com/gpu"] = std::to_string(gpus);
    n["status"]["allocatable"]["nvidia.com/gpu"] = std::to_string(gpus);
  }
  return n;
}

Json Pod(const std::string& ns, const std::string& name, const Json& limits,
         const std::string& node = "") {
  Json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}, {"namespace", ns}}},
            {"spec",
             {{"containers",
               {{{"name", "main"},
                 {"image", "busybox"},
                 {"resources", {{"limits", limits}, {"requests", limits}}}}}}}},
            {"status", {{"phase", "Pending"}}}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return p;
}

std::string UidOf(const Json& obj) {
  return obj["metadata"]["uid"].get<std::string>();
}

// A temporary directory, removed with its contents.
struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/tessera-security-XXXXXX";
    const char* p = ::mkdtemp(t);
    path = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// A CA with a server certificate for 127.0.0.1 and client certificates: "scheduler" and
// "intruder" signed by the CA, "rogue" (CN kube-scheduler) signed by another CA.
struct Pki {
  TempDir dir;
  std::string File(const std::string& name) const { return dir.path + "/" + name; }

  bool Make() {
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    std::ostringstream sh;
    sh << "set -e; cd '" << dir.path << "'\n"
       << "openssl req -x509" << key << " -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca\n"
       << "openssl req -x509" << key
       << " -keyout other-ca.key -out other-ca.crt -days 2 -subj /CN=other-ca\n"
       << "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext\n"
       << "sign() { openssl req" << key << " -keyout $1.key -out $1.csr -subj /CN=$2\n"
       << "  openssl x509 -req -in $1.csr -CA $3.crt -CAkey $3.key -CAcreateserial -out $1.crt "
       << "-days 2 $4; }\n"
       << "sign server tessera-extender ca '-extfile server.ext'\n"
       << "sign scheduler kube-scheduler ca ''\n"
       << "sign intruder intruder ca ''\n"
       << "sign rogue kube-scheduler other-ca ''\n";
    std::ofstream(File("make.sh")) << sh.str();
    return std::system(("sh '" + File("make.sh") + "' >/dev/null 2>&1").c_str()) == 0 &&
           std::filesystem::exists(File("rogue.crt"));
  }
};

// The `tessera` binary as a child process, its stderr captured in a file.
class Child {
 public:
  explicit Child(const std::vector<std::string>& args) {
    std::vector<std::string> argv_s = {test::TesseraBinary()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    err_path_ = dir_.path + "/stderr";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Child() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  pid_t pid() const { return pid_; }
  std::string Stderr() const {
    std::ifstream in(err_path_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // The port from "serving ... on ADDR:PORT", waiting up to `timeout_s`; -1 if none.
  int WaitForPort(double timeout_s) {
    const auto end = Clock::now() + std::chrono::duration<double>(timeout_s);
    while (Clock::now() < end) {
      const std::string err = Stderr();
      const size_t at = err.find(" on 127.0.0.1:");
      if (at != std::string::npos) return std::atoi(err.c_str() + at + 14);
      if (WaitForExit(0.01) >= 0) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }
  // The exit code, waiting up to `timeout_s`; -1 if still running.
  int WaitForExit(double timeout_s) {
    const auto end = Clock::now() + std::chrono::duration<double>(timeout_s);
    while (Clock::now() < end) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }
  // Resident memory in MiB (from /proc).
  double RssMib() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
    return -1;
  }

 private:
  TempDir dir_;
  std::string err_path_;
  pid_t pid_ = -1;
  bool exited_ = false;
};

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

bool SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Whatever arrives within `timeout_ms` (until the peer closes or a pause of that length).
std::string ReadFor(int fd, int timeout_ms) {
  std::string out;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

ExtenderServerOptions Insecure() {
  ExtenderServerOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  o.insecure = true;
  return o;
}

BindFn NoBind(std::atomic<int>& calls) {
  return [&calls](const std::string&, const std::string&, const std::string&, const std::string&,
                  const std::map<std::string, std::string>&) {
    ++calls;
    return Status::Ok();
  };
}

// ---- 1. Authentication ----

TEST(ExtenderSecurity, RefusesToServeWithoutAuthenticationOffLoopback) {
  Extender ext;
  std::atomic<int> calls{0};
  ExtenderServerOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  ExtenderServer plain(ext, NoBind(calls), o);
  EXPECT_EQ(plain.Start().code(), StatusCode::kInvalidArgument);
  o.insecure = true;
  o.address = "0.0.0.0";
  ExtenderServer open(ext, NoBind(calls), o);
  const Status st = open.Start();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("loopback"), std::string::npos) << st.message();
}

TEST(ExtenderSecurity, MutualTlsRejectsUnauthenticatedBinds) {
  Pki pki;
  ASSERT_TRUE(pki.Make()) << "openssl could not make the test certificates";
  Extender ext;
  ASSERT_TRUE(ext.UpsertNode(GpuNode("gpu-a", "NVIDIA-H100-80GB-HBM3", 2)).ok());
  Json pod = Pod("ml", "train-0", {{"nvidia.com/gpu", "1"}});
  pod["metadata"]["uid"] = "u-1";
  ASSERT_TRUE(ext.UpsertPod(pod).ok());
  std::atomic<int> calls{0};
  ExtenderServerOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  o.tls.cert_file = pki.File("server.crt");
  o.tls.key_file = pki.File("server.key");
  o.tls.client_ca_file = pki.File("ca.crt");
  o.tls.allowed_client_names = {"kube-scheduler"};
  ExtenderServer server(ext, NoBind(calls), o);
  ASSERT_TRUE(server.Start().ok());
  const std::string bind =
      R"({"PodName": "train-0", "PodNamespace": "ml", "PodUID": "u-1", "Node": "gpu-a"})";

  // Plain HTTP to the TLS port: no answer.
  httplib::Client plain("127.0.0.1", server.port());
  plain.set_read_timeout(3);
  EXPECT_FALSE(plain.Post("/tessera/bind", bind, "application/json"));

  auto client = [&](const std::string& who) {
    auto c = who.empty()
                 ? std::make_unique<httplib::SSLClient>("127.0.0.1", server.port())
                 : std::make_unique<httplib::SSLClient>(
                       "127.0.0.1", server.port(), pki.File(who + ".crt"), pki.File(who + ".key"));
    c->set_ca_cert_path(pki.File("ca.crt").c_str());
    c->enable_server_certificate_verification(true);
    c->set_read_timeout(3);
    return c;
  };
  // No client certificate, or one from another CA: the handshake fails.
  EXPECT_FALSE(client("")->Post("/tessera/bind", bind, "application/json"));
  EXPECT_FALSE(client("rogue")->Post("/tessera/bind", bind, "application/json"));
  // A certificate from the CA whose name is not allowed: 403.
  auto denied = client("intruder")->Post("/tessera/bind", bind, "application/json");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 403);
  EXPECT_EQ(calls.load(), 0);

  // The scheduler's certificate: served.
  auto ok = client("scheduler")->Post("/tessera/bind", bind, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(Json::parse(ok->body)["Error"], "");
  EXPECT_EQ(calls.load(), 1);
  auto metrics = client("scheduler")->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("tessera_http_clients_denied_total 1"), std::string::npos);
  EXPECT_EQ(metrics->body.find("tessera_http_tls_failures_total 0\n"), std::string::npos);
}

// ---- 2. Bind only what it should ----

class BindGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start().ok());
    auto c = Client::Create(api_.client_config());
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
    Client* cl = client_.get();
    ExtenderOptions eo;
    eo.trust_request_nodes = false;
    eo.lookup_pod = [cl](const std::string& ns, const std::string& name) -> Result<Json> {
      auto path = BuildApiPath({"api", "v1", "namespaces", ns, "pods", name});
      if (!path.ok()) return path.status();
      return cl->Get(*path);
    };
    ext_ = std::make_unique<Extender>(eo);
    // What the informers would feed.
    for (const Json& n :
         {GpuNode("control-plane-1", "", 0), GpuNode("h100-a", "NVIDIA-H100-80GB-HBM3", 8)}) {
      auto made = api_.Create("/api/v1/nodes", n);
      ASSERT_TRUE(made.ok());
      ASSERT_TRUE(ext_->UpsertNode(*made).ok());
    }
    auto add = [&](const Json& p) {
      const std::string ns = p["metadata"]["namespace"].get<std::string>();
      auto made = api_.Create("/api/v1/namespaces/" + ns + "/pods", p);
      EXPECT_TRUE(made.ok());
      (void)ext_->UpsertPod(*made);
      return *made;
    };
    coredns_ = add(Pod("kube-system", "coredns-x", {{"cpu", "100m"}}));
    train_ = add(Pod("ml", "train-0", {{"nvidia.com/gpu", "1"}}));
    bound_ = add(Pod("ml", "done", {{"nvidia.com/gpu", "1"}}, "h100-a"));
    server_ = std::make_unique<ExtenderServer>(
        *ext_,
        [cl](const std::string& ns, const std::string& name, const std::string& uid,
             const std::string& node, const std::map<std::string, std::string>& ann) {
          return cl->Bind(ns, name, uid, node, ann);
        },
        Insecure());
    ASSERT_TRUE(server_->Start().ok());
    http_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    http_->set_read_timeout(5);
  }
  void TearDown() override {
    server_.reset();
    http_.reset();
    client_.reset();
  }

  // POST bind; the status and the reply's Error.
  std::pair<int, std::string> Bind(const Json& body) {
    auto r = http_->Post("/tessera/bind", body.dump(), "application/json");
    if (!r) return {0, "no reply"};
    const Json j = Json::parse(r->body, nullptr, false);
    return {r->status,
            j.is_object() && j["Error"].is_string() ? j["Error"].get<std::string>() : r->body};
  }

  FakeApiServer api_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<Extender> ext_;
  std::unique_ptr<ExtenderServer> server_;
  std::unique_ptr<httplib::Client> http_;
  Json coredns_, train_, bound_;
};

TEST_F(BindGuardTest, RefusesPodsItShouldNotBind) {
  struct Case {
    const char* what;
    Json body;
    const char* error;
  };
  const std::vector<Case> cases = {
      {"a pod that is not Tessera's (no GPU request)",
       {{"PodName", "coredns-x"},
        {"PodNamespace", "kube-system"},
        {"PodUID", UidOf(coredns_)},
        {"Node", "control-plane-1"}},
       "requests no GPU resource managed by Tessera"},
      {"an empty UID",
       {{"PodName", "coredns-x"},
        {"PodNamespace", "kube-system"},
        {"PodUID", ""},
        {"Node", "control-plane-1"}},
       "PodUID is required"},
      {"a UID that does not match",
       {{"PodName", "train-0"}, {"PodNamespace", "ml"}, {"PodUID", "forged"}, {"Node", "h100-a"}},
       "does not have uid forged"},
      {"a pod already bound",
       {{"PodName", "done"}, {"PodNamespace", "ml"}, {"PodUID", UidOf(bound_)}, {"Node", "h100-a"}},
       "is already bound to h100-a"},
      {"a pod that does not exist",
       {{"PodName", "ghost"}, {"PodNamespace", "ml"}, {"PodUID", "u"}, {"Node", "h100-a"}},
       "cannot read pod ml/ghost"},
  };
  for (const Case& c : cases) {
    const auto [status, error] = Bind(c.body);
    EXPECT_EQ(status, 200) << c.what;
    EXPECT_NE(error.find(c.error), std::string::npos) << c.what << ": " << error;
  }
  EXPECT_EQ(api_.BindingAttemptsOf("kube-system", "coredns-x"), 0);
  EXPECT_EQ(api_.BindingAttemptsOf("ml", "train-0"), 0);
  EXPECT_EQ(api_.BindingAttemptsOf("ml", "done"), 0);

  // The real one binds, with its assignment.
  const auto [status, error] = Bind({{"PodName", "train-0"},
                                     {"PodNamespace", "ml"},
                                     {"PodUID", UidOf(train_)},
                                     {"Node", "h100-a"}});
  EXPECT_EQ(status, 200);
  EXPECT_EQ(error, "");
  EXPECT_EQ(api_.BindingsOf("ml", "train-0"), 1);
  const auto pod = api_.Get("/api/v1/namespaces/ml/pods/train-0");
  ASSERT_TRUE(pod.has_value());
  EXPECT_EQ((*pod)["spec"]["nodeName"], "h100-a");
  EXPECT_TRUE((*pod)["metadata"]["annotations"].contains(kAnnotationAssignment));
}

TEST_F(BindGuardTest, NamesNeverReachTheApiPathUnescaped) {
  api_.ClearRequests();
  for (const char* name : {"a/../../../../apis/x?y=1#", "..", "a%2Fb", "A", "x y", ""}) {
    const auto [status, error] = Bind({{"PodName", name},
                                       {"PodNamespace", "kube-system"},
                                       {"PodUID", "u"},
                                       {"Node", "control-plane-1"}});
    EXPECT_EQ(status, 400) << name << ": " << error;
    EXPECT_NE(error.find("PodName"), std::string::npos) << error;
  }
  const auto [status, error] = Bind({{"PodName", "coredns-x"},
                                     {"PodNamespace", "kube-system/../../apis"},
                                     {"PodUID", "u"},
                                     {"Node", "n"}});
  EXPECT_EQ(status, 400) << error;
  // The Extender itself refuses them too (for callers other than the HTTP server).
  std::atomic<int> calls{0};
  const Json direct = ext_->Bind({{"PodName", "a/../../../../apis/x?y=1#"},
                                  {"PodNamespace", "kube-system"},
                                  {"PodUID", "u"},
                                  {"Node", "h100-a"}},
                                 NoBind(calls));
  EXPECT_NE(direct["Error"].get<std::string>().find("PodName"), std::string::npos);
  EXPECT_EQ(calls.load(), 0);
  EXPECT_TRUE(api_.Requests().empty()) << api_.Requests().front().target;
}

// ---- 3. Request bodies never change the node view ----

TEST(ExtenderSecurity, RequestBodiesNeverOverrideNodes) {
  ExtenderOptions eo;
  eo.trust_request_nodes = false;
  Extender ext(eo);
  ASSERT_TRUE(ext.UpsertNode(GpuNode("h100-b", "NVIDIA-H100-80GB-HBM3", 8)).ok());
  const Json pod = Pod("ml", "two", {{"nvidia.com/gpu", "2"}});
  // nodeCacheCapable: false, with h100-b described as a 1-GPU T4, plus an unknown node.
  const Json forged = {
      {"Pod", pod},
      {"Nodes", {{"items", {GpuNode("h100-b", "Tesla-T4", 1), GpuNode("ghost", "Tesla-T4", 4)}}}}};
  Json res = ext.Filter(forged);
  ASSERT_EQ(res["Nodes"]["items"].size(), 1u) << res.dump();
  EXPECT_EQ(res["Nodes"]["items"][0]["metadata"]["name"], "h100-b");
  EXPECT_EQ(res["FailedAndUnresolvableNodes"]["ghost"], "node not known to the Tessera extender");
  (void)ext.Prioritize(forged);
  // Later requests still see the informer's node.
  res = ext.Filter({{"Pod", pod}, {"NodeNames", {"h100-b"}}});
  EXPECT_EQ(res["NodeNames"], Json({"h100-b"})) << res.dump();
  EXPECT_EQ(ext.stats().nodes, 1u);
}

// ---- 4. Slow clients ----

TEST(ExtenderSecurity, SlowClientsDoNotStallFilter) {
  Extender ext;
  for (int i = 0; i < 100; ++i)
    ASSERT_TRUE(
        ext.UpsertNode(GpuNode("gpu-" + std::to_string(i), "NVIDIA-H100-80GB-HBM3", 8)).ok());
  std::atomic<int> calls{0};
  ExtenderServer server(ext, NoBind(calls), Insecure());
  ASSERT_TRUE(server.Start().ok());
  const int port = server.port();
  std::atomic<bool> stop{false};
  std::vector<double> cut_after(10, -1);
  std::vector<std::thread> slow;
  for (int i = 0; i < 10; ++i)
    slow.emplace_back([&, i] {
      const int fd = Connect(port);
      if (fd < 0) return;
      const auto start = Clock::now();
      bool open = SendAll(fd, "POST /tessera/filter HTTP/1.1\r\nHost: x\r\n");
      while (open && !stop) {
        // One header line every 3 s; the server's answer (or close) ends it.
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 3000) > 0) break;
        open = SendAll(fd, "X-Slow-" + std::to_string(i) + ": 1\r\n");
      }
      cut_after[i] = std::chrono::duration<double>(Clock::now() - start).count();
      ::close(fd);
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<std::string> names;
  for (int i = 0; i < 100; ++i) names.push_back("gpu-" + std::to_string(i));
  const std::string body =
      Json({{"Pod", Pod("ml", "p", {{"nvidia.com/gpu", "1"}})}, {"NodeNames", names}}).dump();
  double worst = 0;
  int answered = 0;
  const auto end = Clock::now() + std::chrono::seconds(7);
  while (Clock::now() < end) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(5);
    const auto t0 = Clock::now();
    auto r = c.Post("/tessera/filter", body, "application/json");
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    ASSERT_TRUE(r) << "filter got no answer while slow clients were connected";
    EXPECT_EQ(r->status, 200);
    worst = std::max(worst, took);
    ++answered;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  stop = true;
  for (auto& t : slow) t.join();
  EXPECT_LT(worst, 2.0) << "slowest filter answer in seconds";
  EXPECT_GT(answered, 5);
  // The server cut every slow client off at its whole-request deadline (2 s), not at the
  // client's pace.
  for (double s : cut_after) {
    EXPECT_GE(s, 0);
    EXPECT_LT(s, 6.5);
  }
}

// ---- 5. Oversized bodies (the real binary, for its memory) ----

TEST(ExtenderSecurity, OversizedBodiesAreRefusedWithoutBeingRead) {
  Child ext({"extender", "--insecure", "--no-cluster", "--listen", "127.0.0.1:0"});
  const int port = ext.WaitForPort(30);
  ASSERT_GT(port, 0) << ext.Stderr();
  const double rss_before = ext.RssMib();

  const int fd = Connect(port);
  ASSERT_GE(fd, 0);
  const int64_t total = int64_t{400} << 20;
  ASSERT_TRUE(SendAll(fd,
                      "POST /tessera/filter HTTP/1.1\r\nHost: x\r\nContent-Type: "
                      "application/json\r\nContent-Length: " +
                          std::to_string(total) + "\r\n\r\n{\"Pod\": {\"metadata\": "));
  const std::string reply = ReadFor(fd, 3000);
  EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply;
  // Keep streaming the body as an attacker would; the server has stopped reading.
  const std::string chunk(1 << 20, ' ');
  int64_t sent = 0;
  while (sent < total && SendAll(fd, chunk)) sent += static_cast<int64_t>(chunk.size());
  ::close(fd);
  const double rss_after = ext.RssMib();
  EXPECT_LT(rss_after, 200) << "MiB resident after a 400 MB body (before: " << rss_before << ")";

  // No Content-Length (chunked): 411.
  const int fd2 = Connect(port);
  ASSERT_GE(fd2, 0);
  ASSERT_TRUE(SendAll(fd2,
                      "POST /tessera/filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
                      "chunked\r\n\r\n10\r\n{\"Pod\": {}}     \r\n"));
  EXPECT_EQ(ReadFor(fd2, 3000).rfind("HTTP/1.1 411", 0), 0u);
  ::close(fd2);

  // Headers past their budget (64 KiB), in lines httplib accepts one by one: 431, counted with
  // the 413 above.
  const int fd3 = Connect(port);
  ASSERT_GE(fd3, 0);
  std::string headers = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 20; ++i)
    headers += "X-Padding-" + std::to_string(i) + ": " + std::string(4000, 'x') + "\r\n";
  ASSERT_TRUE(SendAll(fd3, headers + "\r\n"));
  EXPECT_EQ(ReadFor(fd3, 3000).rfind("HTTP/1.1 431", 0), 0u);
  ::close(fd3);

  // A body within the limit is still served.
  httplib::Client c("127.0.0.1", port);
  auto r = c.Post("/tessera/filter",
                  Json({{"Pod", Pod("ml", "p", {{"cpu", "1"}})}, {"NodeNames", {"a"}}}).dump(),
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("tessera_http_requests_too_large_total 2\n"), std::string::npos)
      << metrics->body;
}

// ---- 6. A port in use ----

TEST(ExtenderSecurity, SecondInstanceOnAPortInUseExits) {
  Child first({"extender", "--insecure", "--no-cluster", "--listen", "127.0.0.1:0"});
  const int port = first.WaitForPort(30);
  ASSERT_GT(port, 0) << first.Stderr();
  Child second(
      {"extender", "--insecure", "--no-cluster", "--listen", "127.0.0.1:" + std::to_string(port)});
  EXPECT_EQ(second.WaitForExit(30), 1);
  EXPECT_NE(second.Stderr().find("address in use"), std::string::npos) << second.Stderr();
  // The first one still answers every request.
  for (int i = 0; i < 12; ++i) {
    httplib::Client c("127.0.0.1", port);
    auto r = c.Get("/healthz");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
  }
}

// ---- 7. Wrong JSON types ----

TEST(ExtenderSecurity, WrongJsonTypesGet400) {
  Extender ext;
  ASSERT_TRUE(ext.UpsertNode(GpuNode("t4-1", "Tesla-T4", 1)).ok());
  std::atomic<int> calls{0};
  ExtenderServer server(ext, NoBind(calls), Insecure());
  ASSERT_TRUE(server.Start().ok());
  httplib::Client c("127.0.0.1", server.port());
  auto pod = [](const Json& limits) { return Pod("ml", "p", limits); };
  struct Case {
    const char* verb;
    Json body;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"bind",
       {{"PodName", "p"}, {"PodNamespace", "ml"}, {"PodUID", 5}, {"Node", "t4-1"}},
       "PodUID must be a string, got integer"},
      {"bind",
       {{"PodName", "p"}, {"PodNamespace", "ml"}, {"Node", true}},
       "Node must be a string, got boolean"},
      {"filter",
       {{"Pod", pod({{"nvidia.com/gpu", true}})}, {"NodeNames", {"t4-1"}}},
       "nvidia.com/gpu must be a quantity string, got boolean"},
      {"filter", {{"Pod", "p"}, {"NodeNames", {"t4-1"}}}, "Pod must be an object, got string"},
      {"filter",
       {{"Pod", pod({{"nvidia.com/gpu", "1"}})}, {"NodeNames", {1}}},
       "NodeNames[0] must be a string, got integer"},
      {"prioritize",
       {{"Pod", pod({{"nvidia.com/gpu", "1"}})}, {"Nodes", {{"items", {"t4-1"}}}}},
       "Nodes.items[0] must be an object, got string"},
      {"preempt",
       {{"Pod", pod({{"nvidia.com/gpu", "1"}})},
        {"NodeNameToMetaVictims", {{"t4-1", {{"NumPDBViolations", "1"}}}}}},
       "NumPDBViolations must be an integer, got string"},
  };
  for (const Case& k : cases) {
    auto r = c.Post(std::string("/tessera/") + k.verb, k.body.dump(), "application/json");
    ASSERT_TRUE(r) << k.verb;
    EXPECT_EQ(r->status, 400) << k.verb << " " << k.body.dump() << " -> " << r->body;
    EXPECT_NE(r->body.find(k.message), std::string::npos) << r->body;
    EXPECT_EQ(r->body.find("json.exception"), std::string::npos) << r->body;
  }
  EXPECT_EQ(calls.load(), 0);
  // A number is a valid quantity, as in the Kubernetes API: 2 GPUs do not fit a 1-GPU node.
  auto r = c.Post("/tessera/filter",
                  Json({{"Pod", pod({{"nvidia.com/gpu", 2}})}, {"NodeNames", {"t4-1"}}}).dump(),
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Json::parse(r->body)["FailedAndUnresolvableNodes"]["t4-1"],
            "node has 1 usable GPUs, the pod needs 2")
      << r->body;
}

}  // namespace
}  // namespace tessera::kube
