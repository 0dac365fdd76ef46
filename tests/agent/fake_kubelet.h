// A fake kubelet for the device plugin tests and benchmark: the kubelet's Registration service
// on <dir>/kubelet.sock (real gRPC over a unix socket) recording every Register call, and a
// client that dials a plugin's endpoint the way the kubelet does.
//
// Contract:
// * Start() serves Registration on <dir>/kubelet.sock (replacing a stale file); Stop() shuts
//   the server down and removes the socket, as a stopping kubelet does. Start after Stop is a
//   restarted kubelet (a new socket file). Register always answers OK.
// * WaitForRegistrations waits (condition variable, no polling) until at least n Register calls
//   arrived or the timeout passed, and returns whether they did.
// * Dial returns a DevicePlugin stub for <dir>/<endpoint>. FirstListAndWatch reads the first
//   ListAndWatch response (with a deadline); WatchDevices keeps the stream open and returns
//   each response as it arrives. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "core/status.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace tessera::agent::testing {

class FakeKubelet {
 public:
  explicit FakeKubelet(std::string dir);
  ~FakeKubelet();

  Status Start();
  void Stop();

  std::vector<v1beta1::RegisterRequest> Registrations();
  bool WaitForRegistrations(size_t n, std::chrono::milliseconds timeout);

  std::unique_ptr<v1beta1::DevicePlugin::Stub> Dial(const std::string& endpoint) const;
  Result<v1beta1::ListAndWatchResponse> FirstListAndWatch(
      const std::string& endpoint, std::chrono::milliseconds timeout = std::chrono::seconds(5));

  const std::string& dir() const { return dir_; }

 private:
  class Service;
  std::string dir_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<v1beta1::RegisterRequest> registrations_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

// An open ListAndWatch stream of one plugin.
class DeviceWatch {
 public:
  DeviceWatch(const FakeKubelet& kubelet, const std::string& endpoint);
  ~DeviceWatch();
  // The next response, or empty when the stream ended or the timeout passed.
  std::optional<v1beta1::ListAndWatchResponse> Next(std::chrono::milliseconds timeout);

 private:
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
  grpc::ClientContext ctx_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1beta1::ListAndWatchResponse> responses_;
  bool ended_ = false;
  std::thread reader_;
};

}  // namespace tessera::agent::testing
