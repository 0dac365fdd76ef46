// Annotation codecs (tessera.io/gpu-inventory, tessera.io/assignment) and the mapping of GPU
// Feature Discovery product names to catalog models; declared in kube/translate.h.
#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

#include "cluster/gpu_catalog.h"
#include "cluster/mig_geometry.h"
#include "kube/json_fields.h"
#include "kube/translate.h"

namespace tessera::kube {
namespace {

using namespace json_fields;

// ---- GFD product mapping ----

std::vector<std::string> SplitUpper(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep || c == ' ' || c == '_') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

const char* MapProduct(const std::vector<std::string>& tok) {
  if (tok.empty()) return nullptr;
  auto has = [&](const char* s) { return std::find(tok.begin(), tok.end(), s) != tok.end(); };
  int mem = 0;
  for (const auto& t : tok) {
    const size_t digits = t.find_first_not_of("0123456789");
    if (digits == 0 || digits == std::string::npos || digits > 6) continue;
    if (t.substr(digits) == "GB" || t.substr(digits) == "G") mem = std::stoi(t.substr(0, digits));
  }
  const std::string& f = tok[0];
  if (f == "H100") {
    if (mem == 94 || has("NVL")) return "H100-94GB";
    if (mem == 96) return "H100-96GB";
    return "H100-80GB";
  }
  if (f == "H200") return "H200";
  if (f == "H20") return "H100-96GB";
  if (f == "GH200") return mem == 144 ? "GH200-144GB" : "H100-96GB";
  if (f == "A100" || f == "A100X") return mem == 80 ? "A100-80GB" : "A100-40GB";
  if (f == "A30" || f == "A30X") return "A30";
  if (f == "A10G") return "A10G";
  if (f == "A10") return "A10";
  if (f == "L4") return "L4";
  if (f == "T4") return "T4";
  if (f == "V100" || f == "V100S") return mem == 32 ? "V100M32" : "V100M16";
  if (f == "P100") return "P100";
  if (f == "B200") return "B200";
  if (f == "GB200") return "GB200";
  if (f == "B300") return "B300";
  if (f == "GB300") return "GB300";
  if (f == "RTX" && has("PRO") && has("6000")) return "RTX-PRO-6000";
  return nullptr;
}

}  // namespace

// ---- Public: annotations ----

double AssignmentGpus(const Assignment& a, GpuModelId model) {
  const int64_t memory_mib = GpuCatalog::Builtin().Get(model).memory_mib;
  auto mig_share = [&]() -> double {
    const MigGeometry* geo = MigGeometryFor(model);
    const std::string profile = a.mig_instance.substr(0, a.mig_instance.find('@'));
    const int idx = geo ? geo->Find(profile) : -1;
    if (idx < 0 || geo->compute_slices <= 0) return 0;
    return static_cast<double>(geo->profiles[idx].compute_slices) / geo->compute_slices;
  };
  switch (a.kind) {
    case AssignmentKind::kExclusive:
      return static_cast<double>(a.gpus.size());
    case AssignmentKind::kShare:
      return a.gpu_milli / 1000.0;
    case AssignmentKind::kMps:
      return a.mps_thread_pct / 100.0;
    case AssignmentKind::kTimeSlice:
      return memory_mib > 0 ? std::min(1.0, static_cast<double>(a.memory_limit_mib) / memory_mib)
                            : 0;
    case AssignmentKind::kMig:
      return mig_share();
    case AssignmentKind::kMigMps:
      return mig_share() * a.mps_thread_pct / 100.0;
  }
  return 0;
}

const char* AssignmentKindName(AssignmentKind k) {
  switch (k) {
    case AssignmentKind::kExclusive:
      return "exclusive";
    case AssignmentKind::kShare:
      return "share";
    case AssignmentKind::kMig:
      return "mig";
    case AssignmentKind::kMps:
      return "mps";
    case AssignmentKind::kTimeSlice:
      return "timeslice";
    case AssignmentKind::kMigMps:
      return "mig-mps";
  }
  return "?";
}

std::string EncodeAssignment(const Assignment& a) {
  Json j = {{"node", a.node}, {"kind", AssignmentKindName(a.kind)}, {"gpus", a.gpus}};
  if (!a.uuids.empty()) j["uuids"] = a.uuids;
  if (!a.mig_instance.empty()) j["mig_instance"] = a.mig_instance;
  if (a.gpu_milli) j["gpu_milli"] = a.gpu_milli;
  if (a.mps_thread_pct) j["mps_thread_pct"] = a.mps_thread_pct;
  if (a.memory_limit_mib) j["memory_limit_mib"] = a.memory_limit_mib;
  return j.dump();
}

Result<Assignment> DecodeAssignment(std::string_view text) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("not a JSON object");
  Assignment a;
  auto node = StrField(j, "node", "assignment");
  if (!node.ok()) return node.status();
  a.node = *node;
  if (a.node.empty()) return InvalidArgument("assignment.node is required");
  auto kind = StrField(j, "kind", "assignment");
  if (!kind.ok()) return kind.status();
  bool found = false;
  for (auto k : {AssignmentKind::kExclusive, AssignmentKind::kShare, AssignmentKind::kMig,
                 AssignmentKind::kMps, AssignmentKind::kTimeSlice, AssignmentKind::kMigMps}) {
    if (*kind == AssignmentKindName(k)) a.kind = k, found = true;
  }
  if (!found)
    return InvalidArgument("assignment.kind \"" + *kind +
                           "\" unknown (exclusive, share, mig, mps, timeslice, mig-mps)");
  const Json* gpus = Field(j, "gpus");
  if (!gpus || !gpus->is_array())
    return InvalidArgument("assignment.gpus must be a list of GPU indices");
  for (const Json& g : *gpus) {
    if (!g.is_number_integer() || g.get<int64_t>() < 0 || g.get<int64_t>() >= kMaxGpusPerNode)
      return InvalidArgument("assignment.gpus: indices must be integers 0.." +
                             std::to_string(kMaxGpusPerNode - 1));
    a.gpus.push_back(g.get<int>());
  }
  if (a.gpus.empty() && a.kind != AssignmentKind::kMig)
    return InvalidArgument("assignment.gpus must not be empty");
  if (a.kind != AssignmentKind::kExclusive && a.gpus.size() > 1)
    return InvalidArgument(std::string("assignment.gpus: kind ") + AssignmentKindName(a.kind) +
                           " uses exactly one GPU");
  if (const Json* u = Field(j, "uuids")) {
    if (!u->is_array()) return InvalidArgument("assignment.uuids must be a list");
    for (const Json& s : *u) {
      if (!s.is_string()) return InvalidArgument("assignment.uuids must be strings");
      a.uuids.push_back(s.get<std::string>());
    }
    if (!a.uuids.empty() && a.uuids.size() != a.gpus.size())
      return InvalidArgument("assignment.uuids must match assignment.gpus");
  }
  auto mig = StrField(j, "mig_instance", "assignment");
  if (!mig.ok()) return mig.status();
  a.mig_instance = *mig;
  const bool is_mig = a.kind == AssignmentKind::kMig || a.kind == AssignmentKind::kMigMps;
  if (is_mig) {
    const size_t at = a.mig_instance.find('@');
    const std::string start = at == std::string::npos ? "" : a.mig_instance.substr(at + 1);
    const std::string profile = a.mig_instance.substr(0, at);
    const bool bad_start =
        at != std::string::npos && (start.empty() || start.size() > 2 ||
                                    start.find_first_not_of("0123456789") != std::string::npos);
    if (profile.empty() || bad_start || (at == std::string::npos && !a.gpus.empty()))
      return InvalidArgument("assignment.mig_instance must be \"<profile>@<start>\", got \"" +
                             a.mig_instance + "\"");
  } else if (!a.mig_instance.empty()) {
    return InvalidArgument("assignment.mig_instance is only for kinds mig and mig-mps");
  }
  auto milli = IntField(j, "gpu_milli", 0, "assignment");
  auto pct = IntField(j, "mps_thread_pct", 0, "assignment");
  auto mem = IntField(j, "memory_limit_mib", 0, "assignment");
  for (const auto* r : {&milli, &pct, &mem})
    if (!r->ok()) return r->status();
  if (*milli < 0 || *milli > 1000)
    return InvalidArgument("assignment.gpu_milli must be within 0..1000");
  if (*pct < 0 || *pct > 100)
    return InvalidArgument("assignment.mps_thread_pct must be within 0..100");
  if (*mem < 0) return InvalidArgument("assignment.memory_limit_mib must not be negative");
  a.gpu_milli = static_cast<int>(*milli);
  a.mps_thread_pct = static_cast<int>(*pct);
  a.memory_limit_mib = *mem;
  return a;
}

std::string EncodeInventory(const std::vector<GpuInventoryEntry>& gpus) {
  Json arr = Json::array();
  for (const auto& g : gpus) {
    arr.push_back({{"index", g.index},
                   {"uuid", g.uuid},
                   {"model", g.model},
                   {"memory_mib", g.memory_mib},
                   {"mig_enabled", g.mig_enabled},
                   {"mig_layout", g.mig_layout},
                   {"health", g.healthy ? "healthy" : "unhealthy"}});
    Json& e = arr.back();
    e["version"] = kInventoryVersion;
    if (g.mig_enabled) {
      Json devs = Json::array();
      for (const InventoryMigDevice& d : g.mig_devices)
        devs.push_back({{"instance", d.instance}, {"uuid", d.uuid}});
      e["mig_devices"] = std::move(devs);
    }
    if (g.numa_node) e["numa_node"] = *g.numa_node;
    if (!g.pci_bus_id.empty()) e["pci_bus_id"] = g.pci_bus_id;
    if (!g.nvlink_peers.empty()) e["nvlink_peers"] = g.nvlink_peers;
  }
  return arr.dump();
}

namespace {

// The version 2 fields of one entry (its layout already checked); `gpus` is the node's count.
Status DecodeInventoryV2(const Json& e, const std::string& where, const MigLayout& layout,
                         const MigGeometry* geo, size_t gpus, GpuInventoryEntry& g) {
  if (const Json* devs = Field(e, "mig_devices")) {
    if (!devs->is_array()) return InvalidArgument(where + ".mig_devices must be a list");
    if (!g.mig_enabled && !devs->empty())
      return InvalidArgument(where + ": mig_devices given but mig_enabled is false");
    std::set<std::string> instances, uuids;
    for (const MigInstance& m : layout)
      instances.insert(geo->profiles[static_cast<size_t>(m.profile)].name + "@" +
                       std::to_string(m.start));
    for (const Json& d : *devs) {
      if (!d.is_object()) return InvalidArgument(where + ".mig_devices: entries must be objects");
      auto inst = StrField(d, "instance", where + ".mig_devices");
      auto uuid = StrField(d, "uuid", where + ".mig_devices");
      for (const auto* r : {&inst, &uuid})
        if (!r->ok()) return r->status();
      if (!instances.count(*inst))
        return InvalidArgument(where + ".mig_devices: instance \"" + *inst +
                               "\" is not in mig_layout \"" + g.mig_layout + "\"");
      if (uuid->empty()) return InvalidArgument(where + ".mig_devices: " + *inst + " has no uuid");
      if (!uuids.insert(*uuid).second)
        return InvalidArgument(where + ".mig_devices: uuid " + *uuid + " appears twice");
      g.mig_devices.push_back({*inst, *uuid});
    }
  }
  if (Field(e, "numa_node")) {
    auto numa = IntField(e, "numa_node", 0, where);
    if (!numa.ok()) return numa.status();
    if (*numa < 0 || *numa > INT32_MAX)
      return InvalidArgument(where + ": numa_node must be within 0.." + std::to_string(INT32_MAX));
    g.numa_node = static_cast<int>(*numa);
  }
  auto pci = StrField(e, "pci_bus_id", where);
  if (!pci.ok()) return pci.status();
  g.pci_bus_id = *pci;
  if (const Json* peers = Field(e, "nvlink_peers")) {
    if (!peers->is_array()) return InvalidArgument(where + ".nvlink_peers must be a list");
    for (const Json& p : *peers) {
      if (!p.is_number_integer() || p.get<int64_t>() < 0 ||
          p.get<int64_t>() >= static_cast<int64_t>(gpus) || p.get<int64_t>() == g.index)
        return InvalidArgument(where +
                               ".nvlink_peers: peers must be indices of the node's other "
                               "GPUs (0.." +
                               std::to_string(gpus - 1) + ")");
      g.nvlink_peers.push_back(p.get<int>());
    }
    std::sort(g.nvlink_peers.begin(), g.nvlink_peers.end());
    if (std::adjacent_find(g.nvlink_peers.begin(), g.nvlink_peers.end()) != g.nvlink_peers.end())
      return InvalidArgument(where + ".nvlink_peers: a peer appears twice");
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<GpuInventoryEntry>> DecodeInventory(std::string_view text) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_array()) return InvalidArgument("not a JSON list");
  if (j.size() > static_cast<size_t>(kMaxGpusPerNode))
    return InvalidArgument(std::to_string(j.size()) + " GPUs; at most " +
                           std::to_string(kMaxGpusPerNode) + " per node are supported");
  std::vector<GpuInventoryEntry> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const Json& e = j[i];
    const std::string where = "entry " + std::to_string(i);
    if (!e.is_object()) return InvalidArgument(where + " is not an object");
    GpuInventoryEntry g;
    auto index = IntField(e, "index", static_cast<int64_t>(i), where);
    if (!index.ok()) return index.status();
    if (*index < 0 || *index >= static_cast<int64_t>(j.size()))
      return InvalidArgument(where + ": index " + std::to_string(*index) + " out of range");
    g.index = static_cast<int>(*index);
    auto uuid = StrField(e, "uuid", where);
    auto model = StrField(e, "model", where);
    auto layout = StrField(e, "mig_layout", where);
    auto health = StrField(e, "health", where);
    for (const auto* r : {&uuid, &model, &layout, &health})
      if (!r->ok()) return r->status();
    g.uuid = *uuid;
    if (g.uuid.empty()) return InvalidArgument(where + ": uuid is required");
    auto id = ModelFromProduct(*model);
    if (!id.ok()) return InvalidArgument(where + ": " + id.status().message());
    g.model = GpuCatalog::Builtin().Get(*id).name;
    auto mem = IntField(e, "memory_mib", GpuCatalog::Builtin().Get(*id).memory_mib, where);
    if (!mem.ok()) return mem.status();
    if (*mem < 0) return InvalidArgument(where + ": memory_mib must not be negative");
    g.memory_mib = *mem;
    if (const Json* f = Field(e, "mig_enabled")) {
      if (!f->is_boolean()) return InvalidArgument(where + ".mig_enabled must be a boolean");
      g.mig_enabled = f->get<bool>();
    }
    g.mig_layout = *layout;
    if (health->empty() || *health == "healthy")
      g.healthy = true;
    else if (*health == "unhealthy")
      g.healthy = false;
    else
      return InvalidArgument(where + ": health must be \"healthy\" or \"unhealthy\", got \"" +
                             *health + "\"");
    MigLayout instances;
    const MigGeometry* geo = nullptr;
    if (g.mig_enabled) {
      geo = MigGeometryFor(*id);
      if (!geo) return InvalidArgument(where + ": " + g.model + " has no MIG mode");
      auto parsed = ParseMigLayout(*geo, g.mig_layout);
      if (!parsed.ok())
        return InvalidArgument(where + ": mig_layout: " + parsed.status().message());
      Status legal = CheckMigLayout(*geo, *parsed);
      if (!legal.ok()) return InvalidArgument(where + ": mig_layout: " + legal.message());
      instances = std::move(*parsed);
    } else if (!g.mig_layout.empty()) {
      return InvalidArgument(where + ": mig_layout given but mig_enabled is false");
    }
    auto version = IntField(e, "version", 1, where);
    if (!version.ok()) return version.status();
    if (*version < 1 || *version > INT32_MAX)
      return InvalidArgument(where + ": version must be a positive integer");
    g.version = static_cast<int>(*version);
    Status v2 = DecodeInventoryV2(e, where, instances, geo, j.size(), g);
    if (!v2.ok()) return v2;
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(), [](const GpuInventoryEntry& a, const GpuInventoryEntry& b) {
    return a.index < b.index;
  });
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].index != static_cast<int>(i))
      return InvalidArgument("GPU indices must be 0.." + std::to_string(out.size() - 1) +
                             ", each once");
  return out;
}

Result<GpuModelId> ModelFromProduct(std::string_view product) {
  const auto& cat = GpuCatalog::Builtin();
  if (auto id = cat.Find(product)) return *id;
  std::string p(product);
  for (const char* suffix : {"-SHARED", "-shared"})
    if (p.size() > 7 && p.compare(p.size() - 7, 7, suffix) == 0) p.resize(p.size() - 7);
  if (size_t mig = p.find("-MIG-"); mig != std::string::npos) p.resize(mig);
  std::vector<std::string> tok = SplitUpper(p, '-');
  while (!tok.empty() && (tok[0] == "NVIDIA" || tok[0] == "TESLA")) tok.erase(tok.begin());
  if (const char* name = MapProduct(tok))
    if (auto id = cat.Find(name)) return *id;
  return InvalidArgument("unknown GPU product \"" + std::string(product) +
                         "\" (known models: " + cat.KnownNames() + ")");
}

}  // namespace tessera::kube
