// Client's typed pod operations: binding, Events (events.k8s.io/v1) and eviction (policy/v1).
#include <chrono>
#include <cstdio>
#include <ctime>

#include "kube/client.h"

namespace tessera::kube {
namespace {

std::string MicroTimeNow() {
  const auto now = std::chrono::system_clock::now();
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(us % 1000000));
  return buf;
}

// Truncates to at most `max` bytes without splitting a UTF-8 sequence.
std::string TruncateUtf8(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

}  // namespace

Status Client::Bind(const std::string& ns, const std::string& pod, const std::string& uid,
                    const std::string& node,
                    const std::map<std::string, std::string>& annotations) {
  TESSERA_RETURN_IF_ERROR(ValidateDns1123Label("namespace", ns));
  TESSERA_RETURN_IF_ERROR(ValidateDns1123Subdomain("pod name", pod));
  TESSERA_RETURN_IF_ERROR(ValidateDns1123Subdomain("node name", node));
  auto path = BuildApiPath({"api", "v1", "namespaces", ns, "pods", pod, "binding"});
  if (!path.ok()) return path.status();
  Json meta = {{"name", pod}, {"namespace", ns}};
  if (!uid.empty()) meta["uid"] = uid;
  if (!annotations.empty()) meta["annotations"] = annotations;
  const Json body = {{"apiVersion", "v1"},
                     {"kind", "Binding"},
                     {"metadata", std::move(meta)},
                     {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  auto r = Post(*path, body);
  return r.ok() ? Status::Ok() : r.status();
}

// "<pod>.<hex nanoseconds>", as kube-scheduler names its Events (a generateName of "<pod>."
// is refused by the API server: a name may not end in '.'), within the 253-character limit.
static std::string EventName(const std::string& pod) {
  char suffix[24];
  std::snprintf(
      suffix, sizeof suffix, ".%llx",
      static_cast<unsigned long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count()));
  std::string base = pod.substr(0, 253 - std::strlen(suffix));
  while (!base.empty() && (base.back() == '.' || base.back() == '-')) base.pop_back();
  return base + suffix;
}

// "<pod>.<16 hex digits>" from the pod's uid, the reason and the note: the same Event has the
// same name whichever process sends it.
static std::string OnceEventName(const std::string& pod, const std::string& uid,
                                 const std::string& reason, const std::string& note) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (const std::string* part : {&uid, &reason, &note}) {
    for (unsigned char c : *part) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // separator
  }
  char suffix[24];
  std::snprintf(suffix, sizeof suffix, ".%016llx", static_cast<unsigned long long>(h));
  std::string base = pod.substr(0, 253 - std::strlen(suffix));
  while (!base.empty() && (base.back() == '.' || base.back() == '-')) base.pop_back();
  return base + suffix;
}

Status Client::PodEvent(const std::string& ns, const std::string& pod, const std::string& uid,
                        const std::string& type, const std::string& reason, const std::string& note,
                        bool once) {
  TESSERA_RETURN_IF_ERROR(ValidateDns1123Label("namespace", ns));
  TESSERA_RETURN_IF_ERROR(ValidateDns1123Subdomain("pod name", pod));
  auto path = BuildApiPath({"apis", "events.k8s.io", "v1", "namespaces", ns, "events"});
  if (!path.ok()) return path.status();
  std::string instance = config_.reporting_instance;
  if (instance.empty()) {
    char host[256] = {0};
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    instance = config_.user_agent + (host[0] ? std::string("-") + host : "");
  }
  Json regarding = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"namespace", ns}, {"name", pod}};
  if (!uid.empty()) regarding["uid"] = uid;
  const Json body = {{"apiVersion", "events.k8s.io/v1"},
                     {"kind", "Event"},
                     {"metadata",
                      {{"name", once ? OnceEventName(pod, uid, reason, note) : EventName(pod)},
                       {"namespace", ns}}},
                     {"eventTime", MicroTimeNow()},
                     {"reportingController", config_.reporting_controller},
                     {"reportingInstance", TruncateUtf8(instance, 128)},
                     {"action", reason == "Scheduled" ? "Binding" : "Scheduling"},
                     {"reason", TruncateUtf8(reason, 128)},
                     {"regarding", std::move(regarding)},
                     {"note", TruncateUtf8(note, 1024)},
                     {"type", type}};
  auto r = Post(*path, body);
  if (!r.ok() && once && HttpStatusOf(r.status()) == 409) return Status::Ok();  // sent before
  return r.ok() ? Status::Ok() : r.status();
}

Status Client::Evict(const std::string& ns, const std::string& pod, int64_t grace_period_s) {
  TESSERA_RETURN_IF_ERROR(ValidateDns1123Label("namespace", ns));
  TESSERA_RETURN_IF_ERROR(ValidateDns1123Subdomain("pod name", pod));
  auto path = BuildApiPath({"api", "v1", "namespaces", ns, "pods", pod, "eviction"});
  if (!path.ok()) return path.status();
  Json body = {{"apiVersion", "policy/v1"},
               {"kind", "Eviction"},
               {"metadata", {{"name", pod}, {"namespace", ns}}}};
  if (grace_period_s >= 0) body["deleteOptions"] = {{"gracePeriodSeconds", grace_period_s}};
  auto r = Post(*path, body);
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace tessera::kube
