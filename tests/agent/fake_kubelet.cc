#include "tests/agent/fake_kubelet.h"

#include <unistd.h>

namespace tessera::agent::testing {

class FakeKubelet::Service final : public v1beta1::Registration::Service {
 public:
  explicit Service(FakeKubelet& k) : k_(k) {}
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    std::lock_guard lock(k_.mu_);
    k_.registrations_.push_back(*req);
    k_.cv_.notify_all();
    return grpc::Status::OK;
  }

 private:
  FakeKubelet& k_;
};

FakeKubelet::FakeKubelet(std::string dir) : dir_(std::move(dir)) {}

FakeKubelet::~FakeKubelet() {
  Stop();
}

Status FakeKubelet::Start() {
  const std::string path = dir_ + "/kubelet.sock";
  ::unlink(path.c_str());
  service_ = std::make_unique<Service>(*this);
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  b.RegisterService(service_.get());
  server_ = b.BuildAndStart();
  if (!server_) return Unavailable("fake kubelet cannot listen on " + path);
  return Status::Ok();
}

void FakeKubelet::Stop() {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
  server_.reset();
  service_.reset();
  ::unlink((dir_ + "/kubelet.sock").c_str());
}

std::vector<v1beta1::RegisterRequest> FakeKubelet::Registrations() {
  std::lock_guard lock(mu_);
  return registrations_;
}

bool FakeKubelet::WaitForRegistrations(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return registrations_.size() >= n; });
}

std::unique_ptr<v1beta1::DevicePlugin::Stub> FakeKubelet::Dial(const std::string& endpoint) const {
  return v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix:" + dir_ + "/" + endpoint, grpc::InsecureChannelCredentials()));
}

Result<v1beta1::ListAndWatchResponse> FakeKubelet::FirstListAndWatch(
    const std::string& endpoint, std::chrono::milliseconds timeout) {
  auto stub = Dial(endpoint);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  auto reader = stub->ListAndWatch(&ctx, v1beta1::Empty());
  v1beta1::ListAndWatchResponse resp;
  if (!reader->Read(&resp)) {
    ctx.TryCancel();
    grpc::Status st = reader->Finish();
    return Unavailable("ListAndWatch on " + endpoint + " sent nothing: " + st.error_message());
  }
  ctx.TryCancel();
  (void)reader->Finish();
  return resp;
}

DeviceWatch::DeviceWatch(const FakeKubelet& kubelet, const std::string& endpoint)
    : stub_(kubelet.Dial(endpoint)) {
  reader_ = std::thread([this] {
    auto reader = stub_->ListAndWatch(&ctx_, v1beta1::Empty());
    v1beta1::ListAndWatchResponse resp;
    while (reader->Read(&resp)) {
      std::lock_guard lock(mu_);
      responses_.push_back(resp);
      cv_.notify_all();
    }
    (void)reader->Finish();
    std::lock_guard lock(mu_);
    ended_ = true;
    cv_.notify_all();
  });
}

DeviceWatch::~DeviceWatch() {
  ctx_.TryCancel();
  reader_.join();
}

std::optional<v1beta1::ListAndWatchResponse> DeviceWatch::Next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !responses_.empty() || ended_; });
  if (responses_.empty()) return std::nullopt;
  auto r = std::move(responses_.front());
  responses_.pop_front();
  return r;
}

}  // namespace tessera::agent::testing
