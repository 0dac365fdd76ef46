// Fuzz target for ParseKubeconfig (src/kube/client.h). Referenced files come from a fixed
// in-memory set under /fuzz (the file system is never read).
//
// Properties: never crashes or throws. Parsing is deterministic (twice the same input gives the
// same configuration or the same error). A rejection is InvalidArgument, or the reader's NotFound
// naming a file field, with a non-empty message. An accepted configuration has an http(s)
// server, a client certificate exactly when it has a client key, and only contents the reader
// can supply for file-based fields. A context name that does not occur in the input is never
// accepted.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "kube/client.h"

#include "fuzz/fuzz_util.h"

namespace {

using tessera::Result;
using tessera::StatusCode;
using tessera::fuzz::Fail;
using tessera::kube::ClientConfig;

const std::map<std::string, std::string>& Files() {
  static const std::map<std::string, std::string> kFiles = {{"/fuzz/ca.pem", "CA-FILE"},
                                                            {"/fuzz/client.pem", "CERT-FILE"},
                                                            {"/fuzz/client.key", "KEY-FILE"},
                                                            {"/fuzz/token", " token-from-file \n"},
                                                            {"/fuzz/empty", ""}};
  return kFiles;
}

Result<std::string> ReadFile(const std::string& path) {
  const auto it = Files().find(path);
  if (it == Files().end()) return tessera::NotFound("no such file: " + path);
  return it->second;
}

bool Same(const ClientConfig& a, const ClientConfig& b) {
  return a.server == b.server && a.ca_pem == b.ca_pem && a.client_cert_pem == b.client_cert_pem &&
         a.client_key_pem == b.client_key_pem && a.bearer_token == b.bearer_token &&
         a.insecure_skip_verify == b.insecure_skip_verify &&
         a.default_namespace == b.default_namespace;
}

bool SameResult(const Result<ClientConfig>& a, const Result<ClientConfig>& b) {
  if (a.ok() != b.ok()) return false;
  if (!a.ok()) return a.status().ToString() == b.status().ToString();
  return Same(*a, *b);
}

constexpr std::string_view kAbsentContext = "fuzz-absent-context-7f3a9c";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tessera::kube::ParseKubeconfig;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto a = ParseKubeconfig(input, "/fuzz", "", ReadFile);
  const auto b = ParseKubeconfig(input, "/fuzz", "", ReadFile);
  if (!SameResult(a, b)) Fail("parsing is not deterministic", input);

  if (!a.ok()) {
    const auto code = a.status().code();
    if (code != StatusCode::kInvalidArgument && code != StatusCode::kNotFound)
      Fail("rejection is neither InvalidArgument nor the reader's NotFound", input);
    if (a.status().message().empty()) Fail("rejection without a message", input);
    if (code == StatusCode::kNotFound &&
        a.status().message().find(": no such file") == std::string::npos)
      Fail("missing file error does not carry the reader's message", input);
  } else {
    const ClientConfig& c = *a;
    if (c.server.rfind("https://", 0) != 0 && c.server.rfind("http://", 0) != 0)
      Fail("accepted server is not http(s)", input);
    if (c.client_cert_pem.empty() != c.client_key_pem.empty())
      Fail("client certificate without key or key without certificate", input);
    if (c.bearer_token == " token-from-file \n") Fail("token file not trimmed", input);
  }

  if (input.find(kAbsentContext) == std::string_view::npos &&
      ParseKubeconfig(input, "/fuzz", std::string(kAbsentContext), ReadFile).ok())
    Fail("a context absent from the input was accepted", input);
  return 0;
}
