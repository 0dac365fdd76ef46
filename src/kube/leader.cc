#include "kube/leader.h"

#include <cstdio>

#include <chrono>
#include <cmath>
#include <ctime>
#include <thread>

namespace tessera::kube {
namespace {

Status ValidateLeaseNames(const std::string& ns, const std::string& name) {
  TESSERA_RETURN_IF_ERROR(ValidateDns1123Label("leader election: lease namespace", ns));
  return ValidateDns1123Subdomain("leader election: lease name", name);
}

}  // namespace

Status LeaderConfig::Validate() const {
  TESSERA_RETURN_IF_ERROR(ValidateLeaseNames(ns, name));
  if (identity.empty()) return InvalidArgument("leader election: empty identity");
  if (!(retry_period_s > 0) || !(renew_deadline_s > retry_period_s) ||
      !(lease_duration_s > renew_deadline_s))
    return InvalidArgument(
        "leader election: need 0 < retry period < renew deadline < lease duration");
  return Status::Ok();
}

std::string MicroTimeNow() {
  const auto now = std::chrono::system_clock::now();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch());
  const std::time_t secs = static_cast<std::time_t>(us.count() / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>(us.count() % 1000000));
  return buf;
}

LeaderElector::LeaderElector(Client& client, LeaderConfig config)
    : client_(client), config_(std::move(config)) {
  names_ = ValidateLeaseNames(config_.ns, config_.name);
  if (!names_.ok()) return;
  auto collection =
      BuildApiPath({"apis", "coordination.k8s.io", "v1", "namespaces", config_.ns, "leases"});
  auto object = BuildApiPath(
      {"apis", "coordination.k8s.io", "v1", "namespaces", config_.ns, "leases", config_.name});
  if (!collection.ok() || !object.ok()) {
    names_ = collection.ok() ? object.status() : collection.status();
    return;
  }
  collection_path_ = std::move(*collection);
  object_path_ = std::move(*object);
}

Result<bool> LeaderElector::TryAcquireOrRenew(double now_s) {
  if (!names_.ok()) return names_;
  auto got = client_.Get(object_path_);
  const std::string now = MicroTimeNow();
  const int duration = static_cast<int>(std::ceil(config_.lease_duration_s));
  if (!got.ok()) {
    if (HttpStatusOf(got.status()) != 404) return got.status();
    Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                  {"kind", "Lease"},
                  {"metadata", {{"name", config_.name}, {"namespace", config_.ns}}},
                  {"spec",
                   {{"holderIdentity", config_.identity},
                    {"leaseDurationSeconds", duration},
                    {"acquireTime", now},
                    {"renewTime", now},
                    {"leaseTransitions", 0}}}};
    auto created = client_.Post(collection_path_, lease);
    if (!created.ok()) {
      if (HttpStatusOf(created.status()) == 409) return false;  // someone else created it
      return created.status();
    }
    last_renew_ = now_s;
    leader_ = true;
    return true;
  }
  Json lease = *got;
  const Json& spec = lease.contains("spec") ? lease["spec"] : Json::object();
  const std::string holder = spec.value("holderIdentity", "");
  const std::string rv = lease["metadata"].value("resourceVersion", "");
  const int64_t transitions = spec.value("leaseTransitions", 0);
  const double held_for = spec.value("leaseDurationSeconds", duration);
  if (holder != config_.identity && !holder.empty()) {
    // Another holder: take over only after its lease stayed unchanged for its duration, as
    // measured here.
    if (rv != observed_rv_) {
      observed_rv_ = rv;
      observed_at_ = now_s;
    }
    leader_ = false;
    if (now_s - observed_at_ < held_for) return false;
  }
  const bool takeover = holder != config_.identity;
  lease["spec"]["holderIdentity"] = config_.identity;
  lease["spec"]["leaseDurationSeconds"] = duration;
  lease["spec"]["renewTime"] = now;
  if (takeover) {
    lease["spec"]["acquireTime"] = now;
    lease["spec"]["leaseTransitions"] = transitions + 1;
  }
  auto put = client_.Put(object_path_, lease);
  if (!put.ok()) {
    if (HttpStatusOf(put.status()) == 409) {
      leader_ = false;
      return false;
    }
    return put.status();
  }
  observed_rv_.clear();
  last_renew_ = now_s;
  leader_ = true;
  return true;
}

void LeaderElector::Run(std::atomic<bool>& stop, const std::function<void()>& on_start,
                        const std::function<void()>& on_stop) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto now = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  bool leading = false;
  while (!stop.load()) {
    const double t = now();
    auto r = TryAcquireOrRenew(t);
    const bool holds = r.ok() && *r;
    if (holds && !leading) {
      leading = true;
      if (on_start) on_start();
    }
    if (leading && !holds && (!r.ok() ? t - last_renew_ >= config_.renew_deadline_s : true)) {
      {
        std::lock_guard<std::mutex> l(reason_mu_);
        char deadline[32];
        std::snprintf(deadline, sizeof deadline, "%gs", config_.renew_deadline_s);
        lost_reason_ = r.ok() ? "another replica took lease " + config_.ns + "/" + config_.name
                              : "lease " + config_.ns + "/" + config_.name +
                                    " not renewed within " + deadline + ": " + r.status().message();
      }
      leading = false;
      leader_ = false;
      if (on_stop) on_stop();
    }
    const auto until = Clock::now() + std::chrono::duration<double>(config_.retry_period_s);
    while (!stop.load() && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (leading) {
    (void)Release();
    leader_ = false;
    if (on_stop) on_stop();
  }
}

std::string LeaderElector::lost_reason() const {
  std::lock_guard<std::mutex> l(reason_mu_);
  return lost_reason_;
}

Status LeaderElector::Release() {
  if (!names_.ok()) return names_;
  auto got = client_.Get(object_path_);
  if (!got.ok()) return got.status();
  Json lease = *got;
  if (lease["spec"].value("holderIdentity", "") != config_.identity) return Status::Ok();
  lease["spec"]["holderIdentity"] = "";
  auto put = client_.Put(object_path_, lease);
  leader_ = false;
  return put.ok() ? Status::Ok() : put.status();
}

}  // namespace tessera::kube
