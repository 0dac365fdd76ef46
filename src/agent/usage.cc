#include "agent/usage.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <tuple>

namespace tessera::agent {
namespace {

using Json = nlohmann::json;

bool IsUid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : !std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// "cri-containerd-<id>.scope" / "crio-<id>.scope" / "docker-<id>.scope" / "<id>" -> "<id>".
std::string ContainerId(std::string_view part) {
  if (part.size() > 6 && part.substr(part.size() - 6) == ".scope") {
    part.remove_suffix(6);
    const size_t dash = part.rfind('-');
    if (dash != std::string_view::npos) part.remove_prefix(dash + 1);
  }
  if (part.empty() || part.size() > 128) return "";
  for (char c : part)
    if (!std::isalnum(static_cast<unsigned char>(c))) return "";
  return std::string(part);
}

std::optional<CgroupPod> PodFromPath(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i <= path.size()) {
    const size_t j = std::min(path.find('/', i), path.size());
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  bool in_kubepods = false;
  for (size_t k = 0; k < parts.size(); ++k) {
    std::string_view p = parts[k];
    if (p.rfind("kubepods", 0) == 0) in_kubepods = true;
    if (!in_kubepods) continue;
    std::string uid;
    if (p.rfind("pod", 0) == 0 && IsUid(p.substr(3))) {
      uid = std::string(p.substr(3));
    } else if (p.rfind("kubepods", 0) == 0 && p.size() > 6 && p.substr(p.size() - 6) == ".slice") {
      const size_t at = p.rfind("-pod");
      if (at == std::string_view::npos) continue;
      uid = std::string(p.substr(at + 4, p.size() - 6 - (at + 4)));
      std::replace(uid.begin(), uid.end(), '_', '-');
      if (!IsUid(uid)) continue;
    } else {
      continue;
    }
    CgroupPod out;
    out.pod_uid = uid;
    if (k + 1 < parts.size()) out.container_id = ContainerId(parts[k + 1]);
    return out;
  }
  return std::nullopt;
}

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

using Labels = std::vector<std::pair<std::string, std::string>>;

std::string Series(const std::string& name, const Labels& labels, const std::string& value) {
  std::string out = name + "{";
  for (size_t i = 0; i < labels.size(); ++i)
    out += (i ? "," : "") + labels[i].first + "=\"" + Escape(labels[i].second) + "\"";
  return out + "} " + value + "\n";
}

void Family(std::string& out, const std::string& name, const std::string& help,
            std::vector<std::string> series) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n";
  std::sort(series.begin(), series.end());
  for (const std::string& s : series) out += s;
}

std::string Ratio(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

}  // namespace

std::optional<CgroupPod> PodFromCgroup(std::string_view cgroup_file) {
  std::optional<CgroupPod> v1;
  size_t i = 0;
  while (i < cgroup_file.size()) {
    const size_t j = std::min(cgroup_file.find('\n', i), cgroup_file.size());
    const std::string_view line = cgroup_file.substr(i, j - i);
    i = j + 1;
    const size_t a = line.find(':');
    const size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    auto pod = PodFromPath(line.substr(b + 1));
    if (!pod) continue;
    if (line.substr(0, b + 1) == "0::") return pod;
    if (!v1) v1 = pod;
  }
  return v1;
}

PodListLookup::PodListLookup(const Json& pods) {
  const Json* items = &pods;
  if (pods.is_object() && pods.contains("items")) items = &pods["items"];
  if (!items->is_array()) return;
  for (const Json& p : *items) {
    if (!p.is_object() || !p.contains("metadata") || !p["metadata"].is_object()) continue;
    const Json& md = p["metadata"];
    const std::string uid = md.value("uid", "");
    if (uid.empty()) continue;
    Pod& pod = pods_[uid];
    pod.ns = md.value("namespace", "");
    pod.name = md.value("name", "");
    if (!p.contains("status") || !p["status"].is_object()) continue;
    for (const char* key : {"containerStatuses", "initContainerStatuses"}) {
      auto cs = p["status"].find(key);
      if (cs == p["status"].end() || !cs->is_array()) continue;
      for (const Json& c : *cs) {
        if (!c.is_object()) continue;
        std::string id = c.value("containerID", "");
        if (const size_t sep = id.find("://"); sep != std::string::npos) id = id.substr(sep + 3);
        if (!id.empty()) pod.containers[id] = c.value("name", "");
      }
    }
  }
}

std::optional<PodRef> PodListLookup::Find(const std::string& pod_uid,
                                          const std::string& container_id) const {
  auto it = pods_.find(pod_uid);
  if (it == pods_.end()) return std::nullopt;
  PodRef ref{it->second.ns, it->second.name, ""};
  if (auto c = it->second.containers.find(container_id); c != it->second.containers.end())
    ref.container = c->second;
  return ref;
}

Status SmSampler::Sample(GpuBackend& backend, NodeGpuState& state) {
  Status first = Status::Ok();
  for (GpuState& g : state.gpus) {
    auto it = last_seen_us_.find(g.uuid);
    const uint64_t last = it == last_seen_us_.end() ? 0 : it->second;
    auto samples = backend.ProcessSmUtilization(g.index, last);
    if (!samples.ok()) {
      if (first.ok()) first = samples.status();
      continue;
    }
    if (!samples->has_value()) continue;
    uint64_t newest = last;
    std::map<uint32_t, std::pair<double, int>> per_pid;  // sum of %, samples
    for (const ProcessSmSample& s : **samples) {
      if (s.timestamp_us <= last) continue;
      newest = std::max(newest, s.timestamp_us);
      auto& v = per_pid[s.pid];
      v.first += s.sm_pct;
      ++v.second;
    }
    last_seen_us_[g.uuid] = newest;
    for (GpuProcess& p : g.processes) {
      auto v = per_pid.find(p.pid);
      p.sm_util = v == per_pid.end() ? 0.0 : v->second.first / v->second.second / 100.0;
    }
  }
  return first;
}

std::vector<ProcessUsage> CollectUsage(const NodeGpuState& state, const std::string& proc_root,
                                       const PodLookup& lookup) {
  std::vector<ProcessUsage> out;
  for (const GpuState& g : state.gpus) {
    for (const GpuProcess& p : g.processes) {
      ProcessUsage u;
      u.gpu = g.index;
      u.pid = p.pid;
      u.used_mib = p.used_mib;
      u.gi_id = p.gi_id;
      u.mig_instance = p.mig_instance;
      u.sm_util = p.sm_util;
      std::ifstream in(proc_root + "/" + std::to_string(p.pid) + "/cgroup");
      if (in) {
        std::stringstream text;
        text << in.rdbuf();
        if (auto pod = PodFromCgroup(text.str())) {
          u.pod_uid = pod->pod_uid;
          if (auto ref = lookup.Find(pod->pod_uid, pod->container_id)) u.pod = *ref;
        }
      }
      out.push_back(std::move(u));
    }
  }
  return out;
}

std::string RenderUsageMetrics(const NodeGpuState& state, const std::vector<ProcessUsage>& usage,
                               const std::string& hostname) {
  struct PodKey {
    int gpu;
    std::string mig;
    int gi_id;
    std::string ns, pod, container;
    auto operator<=>(const PodKey&) const = default;
  };
  std::map<PodKey, std::pair<int64_t, int64_t>> per_pod;  // MiB, processes
  std::map<PodKey, double> sm;
  std::map<int, int64_t> unattributed;
  std::map<std::pair<int, std::string>, int64_t> mig_used;
  for (const ProcessUsage& u : usage) {
    if (!u.mig_instance.empty()) mig_used[{u.gpu, u.mig_instance}] += u.used_mib;
    if (u.pod.name.empty()) {
      unattributed[u.gpu] += u.used_mib;
      continue;
    }
    auto& v = per_pod[{u.gpu, u.mig_instance, u.gi_id, u.pod.ns, u.pod.name, u.pod.container}];
    v.first += u.used_mib;
    ++v.second;
    if (u.sm_util)
      sm[{u.gpu, u.mig_instance, u.gi_id, u.pod.ns, u.pod.name, u.pod.container}] += *u.sm_util;
  }

  std::vector<std::string> fb, bytes, procs, smu, loose;
  for (const GpuState& g : state.gpus) {
    const std::string idx = std::to_string(g.index);
    struct Device {
      std::string profile, gi, placement;
      int64_t used;
    };
    std::vector<Device> devices;
    if (g.mig_enabled) {
      for (const MigInstanceState& m : g.mig_instances) {
        auto it = mig_used.find({g.index, m.placement()});
        devices.push_back({m.profile, std::to_string(m.gi_id), m.placement(),
                           it == mig_used.end() ? 0 : it->second});
      }
    } else {
      devices.push_back({"", "", "", g.used_mib});
    }
    for (const Device& d : devices) {
      Labels base = {{"gpu", idx},
                     {"UUID", g.uuid},
                     {"device", "nvidia" + idx},
                     {"modelName", g.name},
                     {"Hostname", hostname}};
      if (!d.placement.empty()) {
        base.push_back({"GPU_I_PROFILE", d.profile});
        base.push_back({"GPU_I_ID", d.gi});
      }
      bool any = false;
      for (const auto& [k, v] : per_pod) {
        if (k.gpu != g.index || k.mig != d.placement) continue;
        any = true;
        Labels l = base;
        l.push_back({"pod", k.pod});
        l.push_back({"namespace", k.ns});
        l.push_back({"container", k.container});
        fb.push_back(Series("DCGM_FI_DEV_FB_USED", l, std::to_string(d.used)));
      }
      if (!any) {
        Labels l = base;
        l.push_back({"pod", ""});
        l.push_back({"namespace", ""});
        l.push_back({"container", ""});
        fb.push_back(Series("DCGM_FI_DEV_FB_USED", l, std::to_string(d.used)));
      }
    }
    for (const auto& [k, v] : per_pod) {
      if (k.gpu != g.index) continue;
      const Labels l = {{"node", hostname},        {"gpu", idx},        {"gpu_uuid", g.uuid},
                        {"mig_instance", k.mig},   {"namespace", k.ns}, {"pod", k.pod},
                        {"container", k.container}};
      bytes.push_back(
          Series("tessera_agent_pod_gpu_memory_used_bytes", l, std::to_string(v.first * 1048576)));
      procs.push_back(Series("tessera_agent_pod_gpu_processes", l, std::to_string(v.second)));
      if (auto s = sm.find(k); s != sm.end())
        smu.push_back(Series("tessera_agent_pod_gpu_sm_utilization_ratio", l,
                             Ratio(std::min(s->second, 1.0))));
    }
    auto un = unattributed.find(g.index);
    loose.push_back(Series("tessera_agent_gpu_unattributed_memory_used_bytes",
                           {{"node", hostname}, {"gpu", idx}, {"gpu_uuid", g.uuid}},
                           std::to_string((un == unattributed.end() ? 0 : un->second) * 1048576)));
  }
  std::string out;
  Family(out, "DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", fb);
  Family(out, "tessera_agent_pod_gpu_memory_used_bytes",
         "GPU memory used by a pod's processes on one GPU or MIG instance.", bytes);
  Family(out, "tessera_agent_pod_gpu_processes",
         "GPU processes of a pod on one GPU or MIG instance.", procs);
  Family(out, "tessera_agent_pod_gpu_sm_utilization_ratio",
         "SM utilization (0..1) of a pod's processes on one GPU over the last sampling window.",
         smu);
  Family(out, "tessera_agent_gpu_unattributed_memory_used_bytes",
         "GPU memory used by processes not attributed to a pod.", loose);
  return out;
}

}  // namespace tessera::agent
