#include "apps/tessera/cli_util.h"

#include "core/text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

namespace tessera {
namespace {

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

bool ParseU64(const std::string& text, uint64_t* v) {
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, *v);
  return !text.empty() && ec == std::errc() && p == end;
}

constexpr const char* kSeedListHint = " (use e.g. 42-51 or 1,2,3)";

}  // namespace

Result<double> ParseNumberFlag(const std::string& flag, const std::string& text, double min,
                               double max, bool min_open) {
  const std::string range =
      std::string(min_open ? "(" : "[") + Number(min) + ", " + Number(max) + "]";
  if (!PlainDecimal(text))
    return InvalidArgument(flag + ": " + QuotedValue(text) + " is not a number; allowed range " +
                           range);
  double v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && !std::isfinite(v)))
    return InvalidArgument(flag + ": " + QuotedValue(text) + " is outside the allowed range " +
                           range);
  if (ec != std::errc() || p != end)
    return InvalidArgument(flag + ": " + QuotedValue(text) + " is not a number; allowed range " +
                           range);
  if (v < min || (min_open && v == min) || v > max)
    return InvalidArgument(flag + ": " + QuotedValue(text) + " is outside the allowed range " +
                           range);
  return v + 0.0;  // -0 -> 0
}

Result<int64_t> ParseIntFlag(const std::string& flag, const std::string& text, int64_t min,
                             int64_t max) {
  const std::string range = std::to_string(min) + ".." + std::to_string(max);
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range && p == end)
    return InvalidArgument(flag + ": " + QuotedValue(text) + " is outside the allowed range " +
                           range);
  if (text.empty() || ec != std::errc() || p != end)
    return InvalidArgument(flag + ": " + QuotedValue(text) + " is not an integer; allowed range " +
                           range);
  if (v < min || v > max)
    return InvalidArgument(flag + ": " + QuotedValue(text) + " is outside the allowed range " +
                           range);
  return v;
}

Result<uint64_t> ParseSeedFlag(const std::string& flag, const std::string& text) {
  uint64_t v = 0;
  if (!ParseU64(text, &v))
    return InvalidArgument(flag + ": " + QuotedValue(text) + " is not a seed; allowed range 0.." +
                           std::to_string(std::numeric_limits<uint64_t>::max()));
  return v;
}

Result<unsigned> ParseThreadsFlag(const std::string& flag, const std::string& text) {
  auto v = ParseIntFlag(flag, text, 0, kMaxThreads);
  if (!v.ok()) return v.status();
  return static_cast<unsigned>(*v);
}

Result<std::vector<uint64_t>> ParseSeedList(const std::string& flag, const std::string& text) {
  if (text.empty()) return InvalidArgument(flag + ": empty seed list" + kSeedListHint);
  std::vector<uint64_t> out;
  std::set<uint64_t> seen;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string part = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (part.empty())
      return InvalidArgument(flag + ": empty item in " + QuotedValue(text) + kSeedListHint);
    const size_t dash = part.find('-');
    const std::string first = part.substr(0, dash);
    const std::string last = dash == std::string::npos ? first : part.substr(dash + 1);
    uint64_t a = 0, b = 0;
    if (!ParseU64(first, &a) || !ParseU64(last, &b))
      return InvalidArgument(flag + ": " + QuotedValue(part) +
                             " is not a seed or a range of seeds" + kSeedListHint);
    if (b < a) return InvalidArgument(flag + ": range " + QuotedValue(part) + " is descending");
    if (b - a >= kMaxSeeds || out.size() + (b - a) + 1 > kMaxSeeds)
      return InvalidArgument(flag + ": " + QuotedValue(text) + " names more than " +
                             std::to_string(kMaxSeeds) + " seeds");
    for (uint64_t s = a;; ++s) {
      if (!seen.insert(s).second)
        return InvalidArgument(flag + ": seed " + std::to_string(s) + " given twice");
      out.push_back(s);
      if (s == b) break;
    }
  }
  return out;
}

namespace {

// `known` empty: any name.
Result<std::vector<std::string>> SplitNames(const std::string& flag, const std::string& text,
                                            const std::vector<std::string>* known) {
  const std::string valid = known ? "; valid names: " + JoinNames(*known) : "";
  if (text.empty()) return InvalidArgument(flag + ": empty list" + valid);
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    std::string name = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (name.empty()) return InvalidArgument(flag + ": empty name in " + QuotedValue(text) + valid);
    if (known && std::find(known->begin(), known->end(), name) == known->end())
      return InvalidArgument(flag + ": unknown name " + QuotedValue(name) + valid);
    if (std::find(out.begin(), out.end(), name) != out.end())
      return InvalidArgument(flag + ": " + QuotedValue(name) + " given twice");
    out.push_back(std::move(name));
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> ParseNameList(const std::string& flag, const std::string& text,
                                               const std::vector<std::string>& known) {
  return SplitNames(flag, text, &known);
}

Result<std::vector<std::string>> ParseNameList(const std::string& flag, const std::string& text) {
  return SplitNames(flag, text, nullptr);
}

Result<net::TlsOptions> ParseServerTlsFlags(const std::string& cert, const std::string& key,
                                            const std::string& client_ca,
                                            const std::string& allowed_names) {
  net::TlsOptions tls;
  tls.cert_file = cert;
  tls.key_file = key;
  tls.client_ca_file = client_ca;
  if (!allowed_names.empty()) {
    auto names = ParseNameList("--allowed-client-names", allowed_names);
    if (!names.ok()) return names.status();
    tls.allowed_client_names = std::move(*names);
  }
  if (tls.cert_file.empty() != tls.key_file.empty())
    return InvalidArgument("--tls-cert and --tls-key must be given together");
  if (!tls.client_ca_file.empty() && tls.cert_file.empty())
    return InvalidArgument("--client-ca needs --tls-cert and --tls-key");
  if (!tls.allowed_client_names.empty() && tls.client_ca_file.empty())
    return InvalidArgument("--allowed-client-names needs --client-ca");
  return tls;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

int Fail(const Status& st) {
  std::fprintf(stderr, "tessera: %s\n", st.message().c_str());
  return 1;
}

void AddKubeClientFlags(CLI::App& cmd, KubeClientFlags& flags) {
  cmd.add_option("--kubeconfig", flags.kubeconfig, "kubeconfig file (default: in-cluster config)");
  cmd.add_option("--context", flags.context, "kubeconfig context (default: current-context)");
  cmd.add_flag("--in-cluster", flags.in_cluster, "Use the pod's service account");
}

Result<kube::ClientConfig> KubeClientConfig(const KubeClientFlags& flags) {
  if (flags.in_cluster || flags.kubeconfig.empty()) return kube::InClusterConfig();
  return kube::LoadKubeconfig(flags.kubeconfig, flags.context);
}

}  // namespace tessera
