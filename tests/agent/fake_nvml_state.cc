#include "tests/agent/fake_nvml_state.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "cluster/gpu_catalog.h"

namespace fake_nvml {

std::recursive_mutex g_mu;
State g_state;

const std::map<std::string, nvmlReturn_t>& Codes() {
  static const auto* codes = new std::map<std::string, nvmlReturn_t>{
      {"NVML_SUCCESS", NVML_SUCCESS},
      {"NVML_ERROR_UNINITIALIZED", NVML_ERROR_UNINITIALIZED},
      {"NVML_ERROR_INVALID_ARGUMENT", NVML_ERROR_INVALID_ARGUMENT},
      {"NVML_ERROR_NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED},
      {"NVML_ERROR_NO_PERMISSION", NVML_ERROR_NO_PERMISSION},
      {"NVML_ERROR_NOT_FOUND", NVML_ERROR_NOT_FOUND},
      {"NVML_ERROR_INSUFFICIENT_SIZE", NVML_ERROR_INSUFFICIENT_SIZE},
      {"NVML_ERROR_DRIVER_NOT_LOADED", NVML_ERROR_DRIVER_NOT_LOADED},
      {"NVML_ERROR_TIMEOUT", NVML_ERROR_TIMEOUT},
      {"NVML_ERROR_GPU_IS_LOST", NVML_ERROR_GPU_IS_LOST},
      {"NVML_ERROR_RESET_REQUIRED", NVML_ERROR_RESET_REQUIRED},
      {"NVML_ERROR_IN_USE", NVML_ERROR_IN_USE},
      {"NVML_ERROR_INSUFFICIENT_RESOURCES", NVML_ERROR_INSUFFICIENT_RESOURCES},
      {"NVML_ERROR_UNKNOWN", NVML_ERROR_UNKNOWN},
  };
  return *codes;
}

std::map<std::string, nvmlReturn_t> ParseFail(const Json& j) {
  std::map<std::string, nvmlReturn_t> out;
  if (!j.is_object()) return out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    auto c = Codes().find(it.value().get<std::string>());
    if (c == Codes().end()) throw std::runtime_error("unknown NVML code " + it.value().dump());
    out[it.key()] = c->second;
  }
  return out;
}

std::string DefaultName(const std::string& model) {
  if (model == "A100-40GB") return "NVIDIA A100-SXM4-40GB";
  if (model == "A100-80GB") return "NVIDIA A100-SXM4-80GB";
  if (model == "H100-80GB") return "NVIDIA H100 80GB HBM3";
  return "NVIDIA " + model;
}

std::vector<int> DefaultComputeCapability(const std::string& model) {
  auto is = [&](const char* prefix) { return model.rfind(prefix, 0) == 0; };
  if (is("H100") || is("H200") || is("GH200")) return {9, 0};
  if (is("T4")) return {7, 5};
  if (is("V100")) return {7, 0};
  if (is("L4") || is("L40")) return {8, 9};
  return {8, 0};
}

// A deterministic UUID-shaped string from a seed text.
std::string UuidFrom(const std::string& prefix, const std::string& seed) {
  uint64_t h1 = 1469598103934665603ull, h2 = 0x9e3779b97f4a7c15ull;
  for (unsigned char c : seed) {
    h1 = (h1 ^ c) * 1099511628211ull;
    h2 = (h2 ^ c) * 0x100000001b3ull + 7;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s-%08x-%04x-%04x-%04x-%012llx", prefix.c_str(),
                static_cast<unsigned>(h1 >> 32), static_cast<unsigned>((h1 >> 16) & 0xffff),
                static_cast<unsigned>(h1 & 0xffff), static_cast<unsigned>(h2 >> 48),
                static_cast<unsigned long long>(h2 & 0xffffffffffffull));
  return buf;
}

std::string MigUuid(const Gpu& g, unsigned gi, unsigned ci) {
  return UuidFrom("MIG", g.uuid + "/" + std::to_string(gi) + "/" + std::to_string(ci));
}

unsigned GiProfileIndex(const tessera::MigProfile& p) {
  if (p.media_extensions)
    return p.compute_slices == 1 ? NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1
                                 : NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1;
  switch (p.compute_slices) {
    case 1:
      return p.memory_slices == 2 ? NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2
                                  : NVML_GPU_INSTANCE_PROFILE_1_SLICE;
    case 2:
      return NVML_GPU_INSTANCE_PROFILE_2_SLICE;
    case 3:
      return NVML_GPU_INSTANCE_PROFILE_3_SLICE;
    case 4:
      return NVML_GPU_INSTANCE_PROFILE_4_SLICE;
    default:
      return NVML_GPU_INSTANCE_PROFILE_7_SLICE;
  }
}

unsigned CiProfileIndex(int slices) {
  switch (slices) {
    case 1:
      return NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE;
    case 2:
      return NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE;
    case 3:
      return NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE;
    case 4:
      return NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE;
    default:
      return NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE;
  }
}

int CiSlices(unsigned profile) {
  static const int kSlices[] = {1, 2, 3, 4, 7, 8, 6};
  return profile < 7 ? kSlices[profile] : 0;
}

tessera::MigLayout LayoutOf(const Gpu& g) {
  tessera::MigLayout l;
  for (const Gi& gi : g.gis) l.push_back({gi.profile, gi.start});
  std::sort(l.begin(), l.end(), [](const tessera::MigInstance& a, const tessera::MigInstance& b) {
    return std::pair(a.start, a.profile) < std::pair(b.start, b.profile);
  });
  return l;
}

std::string Placement(const Gpu& g, const Gi& gi) {
  return g.geo->profiles[static_cast<size_t>(gi.profile)].name + "@" + std::to_string(gi.start);
}

unsigned FreeGiId(const Gpu& g) {
  for (unsigned id = 1;; ++id) {
    bool used = false;
    for (const Gi& gi : g.gis) used = used || gi.id == id;
    if (!used) return id;
  }
}

void SetLayout(Gpu& g, const std::string& text) {
  if (text.empty()) return;
  auto layout = tessera::ParseMigLayout(*g.geo, text);
  if (!layout.ok()) throw std::runtime_error(g.model + ": " + layout.status().message());
  for (const tessera::MigInstance& in : *layout) {
    Gi gi;
    gi.id = FreeGiId(g);
    gi.profile = in.profile;
    gi.start = in.start;
    const int slices = g.geo->profiles[static_cast<size_t>(in.profile)].compute_slices;
    gi.cis.push_back({0, slices, CiProfileIndex(slices)});
    g.gis.push_back(gi);
  }
}

void SaveState() {
  if (g_state.state_file.empty()) return;
  Json j = Json::array();
  for (const Gpu& g : g_state.gpus) {
    Json gis = Json::array();
    for (const Gi& gi : g.gis) {
      Json cis = Json::array();
      for (const Ci& ci : gi.cis) cis.push_back({{"id", ci.id}, {"slices", ci.slices}});
      gis.push_back({{"id", gi.id},
                     {"profile", g.geo->profiles[static_cast<size_t>(gi.profile)].name},
                     {"start", gi.start},
                     {"cis", cis}});
    }
    j.push_back(
        {{"uuid", g.uuid}, {"mig", g.mig}, {"mig_pending", g.mig_pending}, {"gpu_instances", gis}});
  }
  const std::string tmp = g_state.state_file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(1) << "\n";
  }
  std::rename(tmp.c_str(), g_state.state_file.c_str());
}

void LoadState() {
  std::ifstream in(g_state.state_file);
  if (!in) return;
  Json j = Json::parse(in);
  if (!j.is_array() || j.size() != g_state.gpus.size())
    throw std::runtime_error("state file " + g_state.state_file + " does not match the GPUs");
  for (size_t i = 0; i < j.size(); ++i) {
    Gpu& g = g_state.gpus[i];
    g.mig = j[i].at("mig").get<bool>();
    g.mig_pending = j[i].value("mig_pending", g.mig);
    g.gis.clear();
    for (const Json& e : j[i].at("gpu_instances")) {
      Gi gi;
      gi.id = e.at("id").get<unsigned>();
      gi.profile = g.geo->Find(e.at("profile").get<std::string>());
      if (gi.profile < 0) throw std::runtime_error("state file: unknown profile");
      gi.start = e.at("start").get<int>();
      for (const Json& c : e.at("cis")) {
        const int slices = c.at("slices").get<int>();
        gi.cis.push_back({c.at("id").get<unsigned>(), slices, CiProfileIndex(slices)});
      }
      g.gis.push_back(gi);
    }
  }
}

void Load() {
  const char* path = std::getenv("TESSERA_FAKE_NVML_CONFIG");
  if (!path || !*path) throw std::runtime_error("TESSERA_FAKE_NVML_CONFIG is not set");
  std::ifstream in(path);
  if (!in) throw std::runtime_error(std::string("cannot read ") + path);
  const Json cfg = Json::parse(in);
  State s;
  s.fail = ParseFail(cfg.value("fail", Json::object()));
  if (cfg.contains("nvlink_groups"))
    s.nvlink_groups = cfg.at("nvlink_groups").get<std::vector<std::vector<int>>>();
  s.state_file = cfg.value("state_file", std::string());
  if (const char* st = std::getenv("TESSERA_FAKE_NVML_STATE"); st && *st) s.state_file = st;
  const auto& cat = tessera::GpuCatalog::Builtin();
  int index = 0;
  for (const Json& e : cfg.value("gpus", Json::array())) {
    Gpu g;
    g.model = e.at("model").get<std::string>();
    auto id = cat.Find(g.model);
    g.name = e.value("name", DefaultName(g.model));
    g.uuid = e.value("uuid", UuidFrom("GPU", g.name + "#" + std::to_string(index)));
    g.memory_mib =
        e.value("memory_mib", id ? static_cast<unsigned long long>(cat.Get(*id).memory_mib) : 0ull);
    g.used_mib = e.value("used_mib", 0ull);
    auto cc = e.value("compute_capability", DefaultComputeCapability(g.model));
    if (cc.size() == 2) g.cc_major = cc[0], g.cc_minor = cc[1];
    g.geo = tessera::MigGeometryFor(g.model);
    g.mig = e.value("mig", false);
    if (g.mig && !g.geo) throw std::runtime_error(g.model + " has no MIG mode");
    if (g.mig) SetLayout(g, e.value("mig_layout", std::string()));
    g.mig_pending = e.value("mig_pending", g.mig);
    const std::string change = e.value("mig_mode_change", std::string("immediate"));
    if (change != "immediate" && change != "pending_reset")
      throw std::runtime_error("mig_mode_change must be immediate or pending_reset");
    g.mig_change_pending = change == "pending_reset";
    if (e.contains("mig_activation")) {
      auto c = Codes().find(e["mig_activation"].get<std::string>());
      if (c == Codes().end()) throw std::runtime_error("unknown NVML code in mig_activation");
      g.mig_activation = c->second;
    }
    if (e.contains("utilization")) {
      g.util_gpu = e["utilization"].value("gpu", 0u);
      g.util_mem = e["utilization"].value("memory", 0u);
    }
    for (const Json& u : e.value("process_utilization", Json::array())) {
      nvmlProcessUtilizationSample_t x{};
      x.pid = u.at("pid").get<unsigned>();
      x.timeStamp = u.at("timestamp").get<unsigned long long>();
      x.smUtil = u.value("sm", 0u);
      x.memUtil = u.value("mem", 0u);
      g.proc_samples.push_back(x);
    }
    g.numa = e.value("numa", 0);
    g.pcie_switch = e.value("pcie_switch", index);
    char bus[32];
    std::snprintf(bus, sizeof(bus), "00000000:%02X:00.0", 0x10 + index);
    g.pci_bus_id = e.value("pci_bus_id", std::string(bus));
    g.xids = e.value("xids", std::vector<unsigned long long>());
    g.fail = ParseFail(e.value("fail", Json::object()));
    for (const Json& p : e.value("processes", Json::array()))
      g.procs.push_back(
          {p.at("pid").get<unsigned>(), p.value("used_mib", 0ull), p.value("mig", std::string())});
    s.gpus.push_back(std::move(g));
    ++index;
  }
  s.refs = 1;
  g_state = std::move(s);
  if (!g_state.state_file.empty()) LoadState();
}

}  // namespace fake_nvml
