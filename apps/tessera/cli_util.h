// Argument helpers shared by the tessera subcommands. Pure functions, thread-compatible.
//
// Numeric flags are taken as text and parsed here, so every bad value gets the same one-line
// error: InvalidArgument "FLAG: 'VALUE' ..." naming the flag, the value as given and the allowed
// range. Numbers are plain decimals (an optional '-', digits, fraction, exponent): no spaces,
// no '+', no hex, and never NaN or an infinity.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "kube/client.h"
#include "net/http_server.h"

namespace tessera {

// Upper bound of every --threads flag (0 means one thread per core).
inline constexpr int64_t kMaxThreads = 256;
// Most seeds one --seeds list may name.
inline constexpr size_t kMaxSeeds = 1000;
// Upper bound of every --time-scale flag (the lower bound is 1: arrivals are only compressed).
inline constexpr double kMaxTimeScale = 1e6;

// A finite decimal number in [min, max], or in (min, max] when min_open.
Result<double> ParseNumberFlag(const std::string& flag, const std::string& text, double min,
                               double max, bool min_open = false);
// A decimal integer in [min, max].
Result<int64_t> ParseIntFlag(const std::string& flag, const std::string& text, int64_t min,
                             int64_t max);
// A seed: a decimal integer in 0..2^64-1.
Result<uint64_t> ParseSeedFlag(const std::string& flag, const std::string& text);
// Worker threads: 0 (one per core) .. kMaxThreads.
Result<unsigned> ParseThreadsFlag(const std::string& flag, const std::string& text);

// "42-51", "1,2,3" or a mix: seeds in 0..2^64-1, ranges ascending, at most kMaxSeeds in all, no
// seed twice. InvalidArgument naming the flag and the offending item otherwise (also for an
// empty list or an empty item).
Result<std::vector<uint64_t>> ParseSeedList(const std::string& flag, const std::string& text);

// Comma-separated names, each one of `known`, in the order given. InvalidArgument naming the
// flag for an empty list, an empty item, a name given twice, or an unknown name (the message
// lists the known names).
Result<std::vector<std::string>> ParseNameList(const std::string& flag, const std::string& text,
                                               const std::vector<std::string>& known);

// Comma-separated free-form names (e.g. certificate names), in the order given. InvalidArgument
// naming the flag for an empty item or a name given twice.
Result<std::vector<std::string>> ParseNameList(const std::string& flag, const std::string& text);

// The server TLS flags --tls-cert, --tls-key, --client-ca and --allowed-client-names (a
// comma-separated name list). InvalidArgument naming the flags when the certificate and key
// are not given together, a client CA comes without them, or client names without a client CA.
Result<net::TlsOptions> ParseServerTlsFlags(const std::string& cert, const std::string& key,
                                            const std::string& client_ca,
                                            const std::string& allowed_names);

// "a, b, c": names for help texts and messages.
std::string JoinNames(const std::vector<std::string>& names);

// Prints "tessera: <message>" to stderr and returns the exit code 1.
int Fail(const Status& st);

// --kubeconfig, --context and --in-cluster of the commands that talk to the API server.
struct KubeClientFlags {
  std::string kubeconfig, context;
  bool in_cluster = false;
};
void AddKubeClientFlags(CLI::App& cmd, KubeClientFlags& flags);

// The API client configuration of the scheduler and the agent: the kubeconfig file (and
// context) when one is given and --in-cluster is not set, else the pod's service account.
Result<kube::ClientConfig> KubeClientConfig(const KubeClientFlags& flags);

}  // namespace tessera
