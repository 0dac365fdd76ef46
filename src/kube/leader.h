// Lease-based leader election (coordination.k8s.io/v1), as kube-scheduler does it.
//
// Contract: Acquire/renew a Lease object; a replica leads while its renewals succeed. Another
// holder's lease is taken over only after it has not changed for leaseDurationSeconds measured
// on the local clock since this replica last saw it change (never by comparing clocks across
// machines). Every update carries the resourceVersion it read, so a 409 Conflict means another
// replica won. A leader that cannot renew within renew_deadline_s stops leading (callbacks tell
// the caller to stop scheduling before another replica may take over, since
// renew_deadline_s < lease_duration_s). Release() clears the holder on graceful shutdown.
// The lease namespace must be a DNS-1123 label and its name a DNS-1123 subdomain (Validate); an
// elector built with other names sends no request: TryAcquireOrRenew and Release return
// InvalidArgument, and Run never leads.
// Thread-safe: Run() on one thread; is_leader() from any.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>

#include "kube/client.h"

namespace tessera::kube {

struct LeaderConfig {
  std::string ns = "kube-system";
  std::string name = "tessera-scheduler";
  std::string identity;  // unique per replica, e.g. "<hostname>_<random>"
  double lease_duration_s = 15;
  double renew_deadline_s = 10;
  double retry_period_s = 2;
  Status Validate() const;
};

// The lease's current state as read from the API server.
struct LeaseState {
  std::string holder;
  std::string resource_version;
  int64_t transitions = 0;
  bool exists = false;
};

class LeaderElector {
 public:
  LeaderElector(Client& client, LeaderConfig config);

  // One attempt to acquire or renew at local monotonic time `now_s`. Returns whether this
  // replica holds the lease after the attempt. Errors other than 409 are returned.
  Result<bool> TryAcquireOrRenew(double now_s);

  // Loops until `stop`: acquires, then renews every retry period; calls on_start when leading
  // begins and on_stop when it ends (renewal failed for renew_deadline_s, or stop).
  void Run(std::atomic<bool>& stop, const std::function<void()>& on_start,
           const std::function<void()>& on_stop);
  // Clears holderIdentity if this replica holds the lease.
  Status Release();

  bool is_leader() const { return leader_.load(); }
  const LeaderConfig& config() const { return config_; }
  // Why leadership last ended while Run was renewing (another holder, or the renewal errors
  // that outlasted renew_deadline_s); empty if it never ended that way.
  std::string lost_reason() const;

 private:
  Client& client_;
  LeaderConfig config_;
  // From the constructor: the names' validation and the lease's collection and object paths.
  Status names_;
  std::string collection_path_, object_path_;
  std::atomic<bool> leader_{false};
  // Observation of another holder's lease: its resourceVersion and when we first saw it.
  std::string observed_rv_;
  double observed_at_ = -1;
  double last_renew_ = -1;
  mutable std::mutex reason_mu_;
  std::string lost_reason_;
};

// RFC 3339 with microseconds, UTC ("2026-01-02T03:04:05.123456Z"), from the system clock.
std::string MicroTimeNow();

}  // namespace tessera::kube
