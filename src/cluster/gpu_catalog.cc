#include "cluster/gpu_catalog.h"

namespace tessera {

const GpuCatalog& GpuCatalog::Builtin() {
  static const GpuCatalog* catalog = [] {
    auto* c = new GpuCatalog();
    // name, memory MiB, relative FP16 compute (T4 = 1), MIG-capable, note
    c->models_ = {
        {"T4", 15360, 1.0, false, ""},
        {"L4", 23034, 1.9, false, ""},
        {"A10", 23028, 1.9, false, ""},
        {"A10G", 23028, 1.7, false, ""},
        {"P100", 16384, 0.3, false, ""},
        {"V100M16", 16384, 1.9, false, "V100 16 GB"},
        {"V100M32", 32768, 1.9, false, "V100 32 GB"},
        {"A30", 24576, 2.3, true, ""},
        {"A100-40GB", 40960, 4.8, true, ""},
        {"A100-80GB", 81920, 4.8, true, ""},
        {"H100-80GB", 81920, 15.2, true, ""},
        {"H200", 143360, 15.2, true, ""},
        {"B200", 184320, 34.0, true, ""},
        {"G1", 0, 1.0, false, "undisclosed model code of the Alibaba trace"},
        {"G2", 0, 1.0, false, "undisclosed model code of the Alibaba trace"},
        {"G3", 0, 1.0, false, "undisclosed model code of the Alibaba trace"},
        {"H100-94GB", 95830, 15.2, true, "H100 NVL / SXM5 94 GB"},
        {"H100-96GB", 98304, 15.2, true, "H100 on GH200 96 GB, H20"},
        {"GH200-144GB", 147456, 15.2, true, "GH200 144 GB HBM3e"},
        {"GB200", 190464, 34.0, true, ""},
        {"B300", 275456, 50.0, true, ""},
        {"GB300", 284672, 50.0, true, ""},
        {"RTX-PRO-6000", 98304, 8.0, true, "RTX PRO 6000 Blackwell 96 GB"},
    };
    return c;
  }();
  return *catalog;
}

std::optional<GpuModelId> GpuCatalog::Find(std::string_view name) const {
  for (size_t i = 0; i < models_.size(); ++i) {
    if (models_[i].name == name) return static_cast<GpuModelId>(i);
  }
  return std::nullopt;
}

std::string GpuCatalog::KnownNames() const {
  std::string out;
  for (const auto& m : models_) {
    if (!out.empty()) out += ", ";
    out += m.name;
  }
  return out;
}

}  // namespace tessera
