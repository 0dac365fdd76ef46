#include "agent/device_plugin.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace tessera::agent {
namespace {

namespace pb = ::v1beta1;

grpc::Status ToGrpc(const Status& s) {
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  switch (s.code()) {
    case StatusCode::kOk:
      return grpc::Status::OK;
    case StatusCode::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case StatusCode::kInvalidArgument:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case StatusCode::kFailedPrecondition:
      code = grpc::StatusCode::FAILED_PRECONDITION;
      break;
    case StatusCode::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    default:
      break;
  }
  return grpc::Status(code, s.message());
}

// Identity of a socket file: a re-created file differs in inode or change time.
struct FileId {
  bool exists = false;
  ino_t ino = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileId&) const = default;
};

FileId Stat(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {true, st.st_ino, int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec};
}

}  // namespace

class DevicePluginManager::Impl {
 public:
  Impl(PodSource& pods, DevicePluginConfig config)
      : config_(std::move(config)), allocator_(pods, config_.allocator) {}

  class Service final : public pb::DevicePlugin::Service {
   public:
    Service(Impl& impl, PluginResource resource) : impl_(impl), resource_(std::move(resource)) {}

    grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const pb::Empty*,
                                        pb::DevicePluginOptions* out) override {
      out->set_pre_start_required(false);
      out->set_get_preferred_allocation_available(true);
      return grpc::Status::OK;
    }

    grpc::Status ListAndWatch(grpc::ServerContext* ctx, const pb::Empty*,
                              grpc::ServerWriter<pb::ListAndWatchResponse>* writer) override {
      std::vector<PluginDevice> sent;
      bool first = true;
      while (true) {
        std::vector<PluginDevice> devices;
        {
          std::unique_lock lock(impl_.mu_);
          while (true) {
            if (impl_.stopping_ || ctx->IsCancelled()) return grpc::Status::OK;
            devices = PluginDevicesFor(resource_, impl_.state_);
            if (first || devices != sent) break;
            impl_.cv_.wait_for(lock, std::chrono::milliseconds(100));
          }
        }
        pb::ListAndWatchResponse resp;
        for (const PluginDevice& d : devices) {
          pb::Device* dev = resp.add_devices();
          dev->set_id(d.id);
          dev->set_health(d.healthy ? "Healthy" : "Unhealthy");
          if (d.numa_node) dev->mutable_topology()->add_nodes()->set_id(*d.numa_node);
        }
        if (!writer->Write(resp)) return grpc::Status::OK;
        sent = std::move(devices);
        first = false;
      }
    }

    grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                        const pb::PreferredAllocationRequest* req,
                                        pb::PreferredAllocationResponse* out) override {
      for (const auto& c : req->container_requests()) {
        std::vector<std::string> avail(c.available_deviceids().begin(),
                                       c.available_deviceids().end());
        std::vector<std::string> must(c.must_include_deviceids().begin(),
                                      c.must_include_deviceids().end());
        auto* r = out->add_container_responses();
        for (std::string& id :
             impl_.allocator_.Preferred(resource_, avail, must, c.allocation_size()))
          r->add_deviceids(std::move(id));
      }
      return grpc::Status::OK;
    }

    grpc::Status Allocate(grpc::ServerContext*, const pb::AllocateRequest* req,
                          pb::AllocateResponse* out) override {
      std::vector<ContainerAllocation> done;
      for (const auto& c : req->container_requests()) {
        std::vector<std::string> ids(c.devices_ids().begin(), c.devices_ids().end());
        auto a = impl_.allocator_.Allocate(resource_, ids);
        if (!a.ok()) {
          for (const ContainerAllocation& d : done) impl_.allocator_.Undo(d);
          out->Clear();
          return ToGrpc(a.status());
        }
        done.push_back(*a);
        auto* r = out->add_container_responses();
        for (const auto& [k, v] : a->envs) (*r->mutable_envs())[k] = v;
        for (const MountEdit& m : a->mounts) {
          pb::Mount* mount = r->add_mounts();
          mount->set_host_path(m.host_path);
          mount->set_container_path(m.container_path);
          mount->set_read_only(m.read_only);
        }
        for (const std::string& name : a->cdi_devices) r->add_cdi_devices()->set_name(name);
      }
      return grpc::Status::OK;
    }

    grpc::Status PreStartContainer(grpc::ServerContext*, const pb::PreStartContainerRequest*,
                                   pb::PreStartContainerResponse*) override {
      return grpc::Status::OK;
    }

   private:
    Impl& impl_;
    PluginResource resource_;
  };

  struct Plugin {
    PluginResource resource;
    std::unique_ptr<Service> service;
    std::unique_ptr<grpc::Server> server;
    std::string path;
  };

  Status Serve(Plugin& p) {
    if (p.server) {
      p.server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
      p.server.reset();
    }
    ::unlink(p.path.c_str());
    p.service = std::make_unique<Service>(*this, p.resource);
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + p.path, grpc::InsecureServerCredentials());
    b.RegisterService(p.service.get());
    p.server = b.BuildAndStart();
    if (!p.server) return Unavailable("cannot serve " + p.resource.name + " on " + p.path);
    return Status::Ok();
  }

  Status Register(const Plugin& p) {
    auto channel = grpc::CreateChannel("unix:" + config_.plugin_dir + "/" + kKubeletSocket,
                                       grpc::InsecureChannelCredentials());
    auto stub = pb::Registration::NewStub(channel);
    pb::RegisterRequest req;
    req.set_version(kDevicePluginVersion);
    req.set_endpoint(p.resource.endpoint);
    req.set_resource_name(p.resource.name);
    req.mutable_options()->set_pre_start_required(false);
    req.mutable_options()->set_get_preferred_allocation_available(true);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(config_.register_timeout_ms));
    pb::Empty resp;
    grpc::Status st = stub->Register(&ctx, req, &resp);
    if (!st.ok())
      return Unavailable("registering " + p.resource.name +
                         " with the kubelet: " + st.error_message());
    registrations_.fetch_add(1);
    return Status::Ok();
  }

  // Serves what the kubelet removed and registers everything; true when all registered.
  bool RegisterAll() {
    std::lock_guard lock(plugins_mu_);
    bool all = true;
    for (Plugin& p : plugins_) {
      if (!Stat(p.path).exists && !Serve(p).ok()) {
        all = false;
        continue;
      }
      if (!Register(p).ok()) all = false;
    }
    return all;
  }

  void WatchKubelet() {
    const std::string sock = config_.plugin_dir + "/" + kKubeletSocket;
    FileId registered;
    {
      std::lock_guard lock(mu_);
      registered = registered_;
    }
    while (true) {
      {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(config_.kubelet_poll_ms),
                     [&] { return stopping_; });
        if (stopping_) return;
      }
      FileId now = Stat(sock);
      if (!now.exists) {
        registered = {};
        continue;
      }
      if (now == registered) continue;
      if (RegisterAll()) registered = now;
    }
  }

  void WatchXids(GpuBackend& backend) {
    while (true) {
      {
        std::lock_guard lock(mu_);
        if (stopping_) return;
      }
      auto ev = backend.NextXid(100);
      if (!ev.ok() || !ev->has_value()) continue;
      std::lock_guard lock(mu_);
      ApplyXid(state_, **ev);
      allocator_.SetState(state_);
      cv_.notify_all();
    }
  }

  DevicePluginConfig config_;
  Allocator allocator_;
  std::atomic<int> registrations_{0};

  std::mutex mu_;  // state_, stopping_, registered_
  std::condition_variable cv_;
  NodeGpuState state_;
  bool stopping_ = false;
  bool started_ = false;
  FileId registered_;

  std::mutex plugins_mu_;
  std::vector<Plugin> plugins_;
  std::thread watcher_;
  std::thread health_;
};

DevicePluginManager::DevicePluginManager(PodSource& pods, DevicePluginConfig config)
    : impl_(std::make_unique<Impl>(pods, std::move(config))) {}

DevicePluginManager::~DevicePluginManager() {
  Stop();
}

Status DevicePluginManager::Start(const NodeGpuState& state) {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.mu_);
    if (m.started_) return FailedPrecondition("device plugin already started");
    m.started_ = true;
    m.state_ = state;
  }
  m.allocator_.SetState(state);
  const FileId kubelet = Stat(m.config_.plugin_dir + "/" + kKubeletSocket);
  {
    std::lock_guard lock(m.plugins_mu_);
    for (PluginResource& r : PluginResourcesFor(state)) {
      Impl::Plugin p;
      p.path = m.config_.plugin_dir + "/" + r.endpoint;
      p.resource = std::move(r);
      m.plugins_.push_back(std::move(p));
    }
    for (Impl::Plugin& p : m.plugins_) {
      Status st = m.Serve(p);
      if (!st.ok()) {
        for (Impl::Plugin& q : m.plugins_)
          if (q.server) q.server->Shutdown();
        m.plugins_.clear();
        return st;
      }
    }
  }
  if (kubelet.exists && m.RegisterAll()) {
    std::lock_guard lock(m.mu_);
    m.registered_ = kubelet;
  }
  m.watcher_ = std::thread([&m] { m.WatchKubelet(); });
  return Status::Ok();
}

void DevicePluginManager::UpdateState(const NodeGpuState& state) {
  std::lock_guard lock(impl_->mu_);
  impl_->state_ = state;
  impl_->allocator_.SetState(state);
  impl_->cv_.notify_all();
}

Status DevicePluginManager::WatchHealth(GpuBackend& backend) {
  Impl& m = *impl_;
  if (m.health_.joinable()) return FailedPrecondition("health is already watched");
  TESSERA_RETURN_IF_ERROR(backend.WatchXids());
  m.health_ = std::thread([&m, &backend] { m.WatchXids(backend); });
  return Status::Ok();
}

void DevicePluginManager::Stop() {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.mu_);
    m.stopping_ = true;
    m.cv_.notify_all();
  }
  if (m.watcher_.joinable()) m.watcher_.join();
  if (m.health_.joinable()) m.health_.join();
  std::lock_guard lock(m.plugins_mu_);
  for (Impl::Plugin& p : m.plugins_) {
    if (p.server) {
      p.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
      p.server->Wait();
      p.server.reset();
      ::unlink(p.path.c_str());
    }
  }
}

std::vector<PluginResource> DevicePluginManager::Resources() const {
  std::lock_guard lock(impl_->plugins_mu_);
  std::vector<PluginResource> out;
  for (const Impl::Plugin& p : impl_->plugins_) out.push_back(p.resource);
  return out;
}

int DevicePluginManager::Registrations() const {
  return impl_->registrations_.load();
}

Allocator& DevicePluginManager::allocator() {
  return impl_->allocator_;
}

}  // namespace tessera::agent
