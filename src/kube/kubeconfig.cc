// Kubeconfig (YAML) and in-cluster service-account configuration.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "kube/client.h"

namespace tessera::kube {
namespace {

constexpr size_t kMaxReferencedFile = 1 << 20;

Result<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot open " + path);
  std::string data;
  char buf[8192];
  while (in) {
    in.read(buf, sizeof buf);
    data.append(buf, static_cast<size_t>(in.gcount()));
    if (data.size() > kMaxReferencedFile) return IoError(path + " is larger than 1 MiB");
  }
  if (in.bad()) return IoError("cannot read " + path);
  return data;
}

int Base64Value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with optional padding; whitespace is ignored.
Result<std::string> DecodeBase64(std::string_view in, const std::string& field) {
  std::string out;
  out.reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0, pad = 0;
  size_t symbols = 0;
  for (unsigned char c : in) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      ++pad;
      ++symbols;
      continue;
    }
    const int v = Base64Value(c);
    if (v < 0 || pad > 0) return InvalidArgument(field + ": invalid base64");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    ++symbols;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (pad > 2 || (pad > 0 && symbols % 4 != 0) || symbols % 4 == 1)
    return InvalidArgument(field + ": invalid base64");
  return out;
}

bool IsScalar(const YAML::Node& n) {
  return n && n.IsScalar();
}

// Optional string field: absent or null leaves `out` empty; a non-scalar is an error.
Status GetString(const YAML::Node& map, const char* key, const std::string& where,
                 std::string* out) {
  const YAML::Node n = map[key];
  if (!n || n.IsNull()) return Status::Ok();
  if (!n.IsScalar()) return InvalidArgument(where + "." + key + " must be a string");
  *out = n.Scalar();
  return Status::Ok();
}

Status GetBool(const YAML::Node& map, const char* key, const std::string& where, bool* out) {
  const YAML::Node n = map[key];
  if (!n || n.IsNull()) return Status::Ok();
  bool v = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v))
    return InvalidArgument(where + "." + key + " must be true or false");
  *out = v;
  return Status::Ok();
}

// Finds the entry {name: <name>, <field>: {...}} in the list `list_key`.
Result<YAML::Node> FindNamed(const YAML::Node& root, const char* list_key, const char* field,
                             const std::string& name) {
  const YAML::Node list = root[list_key];
  if (!list || list.IsNull()) return InvalidArgument(std::string("kubeconfig has no ") + list_key);
  if (!list.IsSequence()) return InvalidArgument(std::string(list_key) + " must be a list");
  for (const YAML::Node& entry : list) {
    if (!entry.IsMap()) return InvalidArgument(std::string(list_key) + " entries must be maps");
    const YAML::Node n = entry["name"];
    if (!IsScalar(n) || n.Scalar() != name) continue;
    const YAML::Node body = entry[field];
    if (!body || body.IsNull()) return YAML::Node(YAML::NodeType::Map);
    if (!body.IsMap())
      return InvalidArgument(std::string(list_key) + "[" + name + "]." + field + " must be a map");
    return body;
  }
  return InvalidArgument(std::string(list_key) + " has no entry named '" + name + "'");
}

// `<key>-data` (base64) takes precedence over `<key>` (a file path).
Status DataOrFile(const YAML::Node& map, const std::string& key, const std::string& where,
                  const std::string& base_dir, const KubeconfigFileReader& read, std::string* out) {
  std::string data, file;
  TESSERA_RETURN_IF_ERROR(GetString(map, (key + "-data").c_str(), where, &data));
  TESSERA_RETURN_IF_ERROR(GetString(map, key.c_str(), where, &file));
  if (!data.empty()) {
    auto decoded = DecodeBase64(data, where + "." + key + "-data");
    if (!decoded.ok()) return decoded.status();
    *out = std::move(*decoded);
    return Status::Ok();
  }
  if (file.empty()) return Status::Ok();
  std::filesystem::path p(file);
  if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
  auto content = read(p.string());
  if (!content.ok())
    return Status(content.status().code(), where + "." + key + ": " + content.status().message());
  *out = std::move(*content);
  return Status::Ok();
}

std::string TrimSpace(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

Result<ClientConfig> ParseKubeconfigImpl(std::string_view yaml, std::string_view base_dir,
                                         const std::string& context,
                                         const KubeconfigFileReader& read) {
  YAML::Node root = YAML::Load(std::string(yaml));
  if (!root.IsMap()) return InvalidArgument("kubeconfig must be a YAML map");

  std::string ctx_name = context;
  if (ctx_name.empty()) {
    TESSERA_RETURN_IF_ERROR(GetString(root, "current-context", "kubeconfig", &ctx_name));
    if (ctx_name.empty())
      return InvalidArgument("kubeconfig has no current-context and no context was given");
  }
  auto ctx = FindNamed(root, "contexts", "context", ctx_name);
  if (!ctx.ok()) return ctx.status();
  const std::string ctx_where = "contexts[" + ctx_name + "].context";
  std::string cluster_name, user_name;
  ClientConfig cfg;
  TESSERA_RETURN_IF_ERROR(GetString(*ctx, "cluster", ctx_where, &cluster_name));
  TESSERA_RETURN_IF_ERROR(GetString(*ctx, "user", ctx_where, &user_name));
  TESSERA_RETURN_IF_ERROR(GetString(*ctx, "namespace", ctx_where, &cfg.default_namespace));
  if (cluster_name.empty()) return InvalidArgument(ctx_where + ".cluster is missing");

  auto cluster = FindNamed(root, "clusters", "cluster", cluster_name);
  if (!cluster.ok()) return cluster.status();
  const std::string cl_where = "clusters[" + cluster_name + "].cluster";
  const std::string dir(base_dir);
  TESSERA_RETURN_IF_ERROR(GetString(*cluster, "server", cl_where, &cfg.server));
  if (cfg.server.empty()) return InvalidArgument(cl_where + ".server is missing");
  if (cfg.server.rfind("https://", 0) != 0 && cfg.server.rfind("http://", 0) != 0)
    return InvalidArgument(cl_where + ".server must start with https:// or http://");
  TESSERA_RETURN_IF_ERROR(
      GetBool(*cluster, "insecure-skip-tls-verify", cl_where, &cfg.insecure_skip_verify));
  TESSERA_RETURN_IF_ERROR(
      DataOrFile(*cluster, "certificate-authority", cl_where, dir, read, &cfg.ca_pem));

  if (!user_name.empty()) {
    auto user = FindNamed(root, "users", "user", user_name);
    if (!user.ok()) return user.status();
    const std::string u_where = "users[" + user_name + "].user";
    TESSERA_RETURN_IF_ERROR(
        DataOrFile(*user, "client-certificate", u_where, dir, read, &cfg.client_cert_pem));
    TESSERA_RETURN_IF_ERROR(
        DataOrFile(*user, "client-key", u_where, dir, read, &cfg.client_key_pem));
    if (cfg.client_cert_pem.empty() != cfg.client_key_pem.empty())
      return InvalidArgument(u_where +
                             ": client-certificate and client-key must be given together");
    TESSERA_RETURN_IF_ERROR(GetString(*user, "token", u_where, &cfg.bearer_token));
    std::string token_file;
    TESSERA_RETURN_IF_ERROR(GetString(*user, "tokenFile", u_where, &token_file));
    if (cfg.bearer_token.empty() && !token_file.empty()) {
      std::filesystem::path p(token_file);
      if (p.is_relative() && !dir.empty()) p = std::filesystem::path(dir) / p;
      auto token = read(p.string());
      if (!token.ok())
        return Status(token.status().code(), u_where + ".tokenFile: " + token.status().message());
      cfg.bearer_token = TrimSpace(std::move(*token));
      if (cfg.bearer_token.empty()) return InvalidArgument(u_where + ".tokenFile is empty");
      cfg.bearer_token_file = p.string();
    }
    const bool has_credentials = !cfg.client_cert_pem.empty() || !cfg.bearer_token.empty();
    if (!has_credentials) {
      for (const char* unsupported : {"exec", "auth-provider", "username"}) {
        const YAML::Node n = (*user)[unsupported];
        if (n && !n.IsNull())
          return InvalidArgument(u_where + "." + unsupported + " is not supported");
      }
    }
  }
  return cfg;
}

}  // namespace

Result<ClientConfig> ParseKubeconfig(std::string_view yaml, std::string_view base_dir,
                                     const std::string& context,
                                     const KubeconfigFileReader& read_file) {
  const KubeconfigFileReader read = read_file ? read_file : KubeconfigFileReader(ReadSmallFile);
  try {
    return ParseKubeconfigImpl(yaml, base_dir, context, read);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("kubeconfig: ") + e.what());
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("kubeconfig: ") + e.what());
  }
}

Result<ClientConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  auto text = ReadSmallFile(path);
  if (!text.ok()) return IoError("kubeconfig: " + text.status().message());
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return ParseKubeconfig(*text, dir, context);
}

Result<ClientConfig> InClusterConfig(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0' || *port == '\0')
    return FailedPrecondition(
        "not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  ClientConfig cfg;
  const std::string h(host);
  const bool ipv6 = h.find(':') != std::string::npos;
  cfg.server = "https://" + (ipv6 ? "[" + h + "]" : h) + ":" + port;
  auto token = ReadSmallFile(sa_dir + "/token");
  if (!token.ok()) return IoError("service account token: " + token.status().message());
  cfg.bearer_token = TrimSpace(std::move(*token));
  if (cfg.bearer_token.empty()) return InvalidArgument("service account token is empty");
  cfg.bearer_token_file = sa_dir + "/token";  // the kubelet rotates it
  auto ca = ReadSmallFile(sa_dir + "/ca.crt");
  if (!ca.ok()) return IoError("service account CA: " + ca.status().message());
  cfg.ca_pem = std::move(*ca);
  auto ns = ReadSmallFile(sa_dir + "/namespace");
  if (ns.ok()) cfg.default_namespace = TrimSpace(std::move(*ns));
  return cfg;
}

}  // namespace tessera::kube
