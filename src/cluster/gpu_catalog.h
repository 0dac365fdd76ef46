// GPU model catalog: the models Tessera knows, by name, with memory and relative compute.
//
// Model ids are small dense integers (< 64) so a set of allowed models fits in a ModelMask.
// The built-in catalog is immutable and shared; lookups are thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

using GpuModelId = uint8_t;
using ModelMask = uint64_t;  // bit i set = model id i allowed; 0 = any model
inline constexpr GpuModelId kNoGpuModel = 0xff;

struct GpuModelInfo {
  std::string name;
  int64_t memory_mib = 0;         // per-GPU memory; 0 = undisclosed
  double relative_compute = 1.0;  // FP16 dense throughput relative to a T4
  bool mig_capable = false;
  std::string note;
};

class GpuCatalog {
 public:
  // The built-in catalog: current NVIDIA data-centre models plus the opaque model codes of the
  // Alibaba GPU trace (G1, G2, G3), whose memory is undisclosed.
  static const GpuCatalog& Builtin();

  std::optional<GpuModelId> Find(std::string_view name) const;
  const GpuModelInfo& Get(GpuModelId id) const { return models_.at(id); }
  size_t size() const { return models_.size(); }
  // Comma-separated list of known names, for error messages.
  std::string KnownNames() const;

 private:
  std::vector<GpuModelInfo> models_;
};

}  // namespace tessera
