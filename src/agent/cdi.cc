#include "agent/cdi.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

namespace tessera::agent {
namespace {

bool CdiNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == ':';
}

Status WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return IoError(std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

std::string CdiDeviceName(const std::string& raw) {
  std::string out = raw;
  for (char& c : out)
    if (!CdiNameChar(c)) c = '-';
  return out;
}

std::string CdiQualifiedName(const std::string& device_name) {
  return std::string(kCdiKind) + "=" + device_name;
}

std::string CdiSpecJson(const std::vector<CdiDevice>& devices) {
  nlohmann::json spec;
  spec["cdiVersion"] = kCdiVersion;
  spec["kind"] = kCdiKind;
  spec["devices"] = nlohmann::json::array();
  for (const CdiDevice& d : devices) {
    nlohmann::json edits = nlohmann::json::object();
    if (!d.env.empty()) edits["env"] = d.env;
    if (!d.mounts.empty()) {
      nlohmann::json mounts = nlohmann::json::array();
      for (const CdiMount& m : d.mounts)
        mounts.push_back({{"hostPath", m.host_path},
                          {"containerPath", m.container_path},
                          {"options", {"rbind", m.read_only ? "ro" : "rw"}}});
      edits["mounts"] = std::move(mounts);
    }
    spec["devices"].push_back({{"name", d.name}, {"containerEdits", std::move(edits)}});
  }
  return spec.dump(2) + "\n";
}

Result<std::string> WriteCdiSpec(const std::string& dir, const std::string& file_stem,
                                 const std::vector<CdiDevice>& devices) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("cannot create CDI directory '" + dir + "': " + ec.message());
  const std::string path = dir + "/" + file_stem + ".json";
  std::string tmp = dir + "/." + file_stem + ".XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0)
    return IoError("cannot create a temporary file in '" + dir + "': " + std::strerror(errno));
  Status st = WriteAll(fd, CdiSpecJson(devices));
  if (st.ok() && ::fchmod(fd, 0644) != 0) st = IoError(std::strerror(errno));
  if (st.ok() && ::fsync(fd) != 0) st = IoError(std::strerror(errno));
  if (::close(fd) != 0 && st.ok()) st = IoError(std::strerror(errno));
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) st = IoError(std::strerror(errno));
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return IoError("cannot write CDI spec '" + path + "': " + st.message());
  }
  return path;
}

}  // namespace tessera::agent
