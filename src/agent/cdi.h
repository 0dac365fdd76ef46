// CDI (Container Device Interface) specs for the containers the device plugin allocates.
//
// Contract:
// * A CdiDevice is one CDI device: a name and its container edits (environment variables and
//   bind mounts). CdiSpecJson renders a spec file of CDI format version kCdiVersion, kind
//   kCdiKind, holding the given devices; the fully qualified device name is
//   "<kind>=<name>" (CdiQualifiedName).
// * Device names may contain only letters, digits, '-', '_', '.' and ':' (the CDI grammar);
//   CdiDeviceName maps any other character to '-'.
// * WriteCdiSpec writes the spec to <dir>/<file_stem>.json atomically: the content goes to a
//   temporary file in the same directory, is flushed to disk, then renamed over the target, so
//   a runtime reading the directory sees the old file or the new one, never a partial one. The
//   directory is created if missing. Failures are IoError naming the path; on failure no
//   temporary file is left behind.
// * Pure apart from WriteCdiSpec's file system effects; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::agent {

inline constexpr const char* kCdiVersion = "0.6.0";
inline constexpr const char* kCdiKind = "tessera.io/gpu";
inline constexpr const char* kDefaultCdiDir = "/var/run/cdi";

struct CdiMount {
  std::string host_path;
  std::string container_path;
  bool read_only = false;
  bool operator==(const CdiMount&) const = default;
};

struct CdiDevice {
  std::string name;              // unqualified, e.g. "3f2a-...-train"
  std::vector<std::string> env;  // "KEY=value"
  std::vector<CdiMount> mounts;
  bool operator==(const CdiDevice&) const = default;
};

std::string CdiDeviceName(const std::string& raw);
std::string CdiQualifiedName(const std::string& device_name);  // "tessera.io/gpu=<name>"
std::string CdiSpecJson(const std::vector<CdiDevice>& devices);
// Returns the path written.
Result<std::string> WriteCdiSpec(const std::string& dir, const std::string& file_stem,
                                 const std::vector<CdiDevice>& devices);

}  // namespace tessera::agent
