#include "apps/tessera/advise_prometheus.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "cluster/gpu_catalog.h"
#include "cluster/mig_geometry.h"
#include "kube/translate.h"

namespace tessera {
namespace {

using advisor::DcgmField;
using advisor::PromRange;
using advisor::PromSeries;

// Higher wins when a GPU has several compute sources.
int ComputeRank(DcgmField f) {
  switch (f) {
    case DcgmField::kSmActive:
      return 3;
    case DcgmField::kGrEngineActive:
      return 2;
    case DcgmField::kGpuUtil:
      return 1;
    case DcgmField::kFbUsedMib:
    case DcgmField::kAgentPodMemoryMib:
    case DcgmField::kPodAllocatedGpus:
    case DcgmField::kAllocatedRatio:
      break;
  }
  return 0;
}

std::string GpuId(const PromSeries& s) {
  std::string id = s.uuid.empty() ? s.hostname + "/" + s.gpu : s.uuid;
  if (!s.mig_profile.empty() || !s.mig_instance.empty()) id += "/gi" + s.mig_instance;
  return id;
}

struct Point {
  double memory = 0, compute = 0;
  bool has_memory = false, has_compute = false;
};

// A GPU or MIG instance as the node agent and DCGM both name it: UUID and MIG profile.
std::string AgentKey(const PromSeries& s) {
  return (s.uuid.empty() ? s.hostname + "/" + s.gpu : s.uuid) +
         (s.mig_profile.empty() ? "" : "/" + s.mig_profile);
}

struct Device {
  const PromSeries* memory = nullptr;
  const PromSeries* compute = nullptr;
  const PromSeries* agent_memory = nullptr;  // the node agent's per-pod memory, preferred
};

// DCGM's series of one device, whichever pod (if any) they are labelled with.
struct DeviceSeries {
  std::string model_name;
  std::set<std::string> instances;  // GPU_I_ID values seen
  const PromSeries* compute = nullptr;
};

struct Pod {
  std::string ns, name;
  std::map<std::string, Device> devices;  // by GPU id, in id order
};

std::string DescribeError(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
      return "connection refused or host unreachable";
    case httplib::Error::ConnectionTimeout:
      return "connection timed out";
    case httplib::Error::Read:
      return "reading the response failed or timed out";
    case httplib::Error::Write:
      return "sending the request failed";
    case httplib::Error::SSLConnection:
      return "TLS handshake failed";
    case httplib::Error::SSLServerVerification:
      return "the server's certificate is not trusted";
    default:
      return "request failed (" + httplib::to_string(e) + ")";
  }
}

// The label maps of an instant-query response.
Result<std::vector<std::map<std::string, std::string>>> VectorLabels(std::string_view text,
                                                                     const std::string& source) {
  using nlohmann::json;
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::exception&) {
    return InvalidArgument(source + ": the response is not JSON");
  }
  if (!doc.is_object() || !doc.contains("status") || !doc["status"].is_string())
    return InvalidArgument(source + ": status: missing or not a string");
  if (doc["status"] == "error")
    return Unavailable(source + ": Prometheus error " + doc.value("errorType", "?") + ": '" +
                       doc.value("error", "") + "'");
  const json* result = nullptr;
  if (doc.contains("data") && doc["data"].is_object() && doc["data"].contains("result"))
    result = &doc["data"]["result"];
  if (!result || !result->is_array() || doc["data"].value("resultType", "") != "vector")
    return InvalidArgument(source + ": data: expected a \"vector\" result");
  std::vector<std::map<std::string, std::string>> out;
  for (size_t i = 0; i < result->size(); ++i) {
    const json& r = (*result)[i];
    if (!r.is_object() || !r.contains("metric") || !r["metric"].is_object())
      return InvalidArgument(source + ": data.result[" + std::to_string(i) +
                             "].metric: missing or not an object");
    std::map<std::string, std::string> labels;
    for (const auto& [k, v] : r["metric"].items())
      if (v.is_string()) labels[k] = v.get<std::string>();
    for (const char* name : {"namespace", "pod"})
      if (auto e = labels.find(std::string("exported_") + name); e != labels.end())
        labels[name] = e->second;
    out.push_back(std::move(labels));
  }
  return out;
}

}  // namespace

Result<PodOwners> ParsePodOwners(std::string_view pod_owner_json,
                                 std::string_view replicaset_owner_json,
                                 const std::string& source) {
  auto pods = VectorLabels(pod_owner_json, source + " (kube_pod_owner)");
  if (!pods.ok()) return pods.status();
  auto sets = VectorLabels(replicaset_owner_json, source + " (kube_replicaset_owner)");
  if (!sets.ok()) return sets.status();
  std::map<std::pair<std::string, std::string>, std::string> deployment_of;
  for (auto& l : *sets)
    if (l["owner_kind"] == "Deployment" && !l["owner_name"].empty())
      deployment_of[{l["namespace"], l["replicaset"]}] = l["owner_name"];
  PodOwners out;
  for (auto& l : *pods) {
    const std::string& kind = l["owner_kind"];
    const std::string& name = l["owner_name"];
    if (l["pod"].empty() || name.empty()) continue;
    const auto key = std::make_pair(l["namespace"], l["pod"]);
    if (kind == "ReplicaSet") {
      auto d = deployment_of.find({l["namespace"], name});
      if (d != deployment_of.end()) out[key] = {"Deployment", d->second};
    } else if (kind == "StatefulSet" || kind == "Job") {
      out[key] = {kind, name};
    }
  }
  return out;
}

Result<DcgmHistory> DcgmToHistory(const std::vector<PromRange>& ranges, const std::string& source,
                                  const PodOwners& owners) {
  DcgmHistory out;
  std::vector<std::pair<std::string, std::string>> order;  // pods by first appearance
  std::map<std::pair<std::string, std::string>, Pod> pods;
  bool any_memory = false;
  std::map<std::string, DeviceSeries> by_device;  // by AgentKey
  std::vector<const PromSeries*> agent;
  for (const PromRange& r : ranges) {
    out.skipped_non_finite += r.skipped_non_finite;
    out.warnings.insert(out.warnings.end(), r.warnings.begin(), r.warnings.end());
    for (const PromSeries& s : r.series) {
      if (s.samples.empty()) continue;
      if (s.field == DcgmField::kPodAllocatedGpus || s.field == DcgmField::kAllocatedRatio)
        continue;
      if (s.field == DcgmField::kAgentPodMemoryMib) {
        if (s.pod.empty()) continue;  // the agent's unattributed memory is not a pod's
        agent.push_back(&s);
        continue;
      }
      DeviceSeries& dev = by_device[AgentKey(s)];
      if (dev.model_name.empty()) dev.model_name = s.model_name;
      dev.instances.insert(s.mig_instance);
      if (s.field != DcgmField::kFbUsedMib &&
          (!dev.compute || ComputeRank(s.field) > ComputeRank(dev.compute->field)))
        dev.compute = &s;
      if (s.pod.empty()) {
        ++out.unattributed_series;
        continue;
      }
      const auto key = std::make_pair(s.ns, s.pod);
      auto [it, added] = pods.try_emplace(key);
      if (added) {
        order.push_back(key);
        it->second.ns = s.ns;
        it->second.name = s.pod;
      }
      Device& d = it->second.devices[GpuId(s)];
      if (s.field == DcgmField::kFbUsedMib) {
        any_memory = true;
        if (d.memory)
          return InvalidArgument(source + ": two " + advisor::DcgmFieldName(s.field) +
                                 " series for pod " + s.ns + "/" + s.pod + " on GPU " + GpuId(s));
        d.memory = &s;
      } else if (!d.compute || ComputeRank(s.field) > ComputeRank(d.compute->field)) {
        d.compute = &s;
      } else if (d.compute->field == s.field) {
        return InvalidArgument(source + ": two " + advisor::DcgmFieldName(s.field) +
                               " series for pod " + s.ns + "/" + s.pod + " on GPU " + GpuId(s));
      }
    }
  }
  // The node agent's per-pod memory replaces DCGM's reading of the same device for that pod;
  // compute stays DCGM's (per device), taken from any series of the device when DCGM did not
  // label it with the pod.
  for (const PromSeries* a : agent) {
    const auto key = std::make_pair(a->ns, a->pod);
    auto [it, added] = pods.try_emplace(key);
    if (added) {
      order.push_back(key);
      it->second.ns = a->ns;
      it->second.name = a->pod;
    }
    Device* target = nullptr;
    for (auto& [id, d] : it->second.devices) {
      const PromSeries* any = d.memory ? d.memory : d.compute;
      if (any && AgentKey(*any) == AgentKey(*a)) target = &d;
    }
    if (!target) {
      auto dev = by_device.find(AgentKey(*a));
      if (dev == by_device.end() || !dev->second.compute || dev->second.instances.size() > 1) {
        out.unmatched_samples += static_cast<int64_t>(a->samples.size());
        continue;
      }
      Device& d = it->second.devices[GpuId(*dev->second.compute)];
      d.compute = dev->second.compute;
      target = &d;
    }
    if (target->agent_memory)
      return InvalidArgument(source + ": two " + advisor::DcgmFieldName(a->field) +
                             " series for pod " + a->ns + "/" + a->pod + " on GPU " + AgentKey(*a));
    target->agent_memory = a;
    any_memory = true;
  }
  if (!any_memory)
    return NotFound(
        source + ": no " + std::string(advisor::DcgmFieldName(DcgmField::kFbUsedMib)) +
        " series held by a pod in the window (is the exporter's Kubernetes mapping on?)");
  const GpuCatalog& catalog = GpuCatalog::Builtin();
  for (const auto& key : order) {
    const Pod& p = pods.at(key);
    advisor::WorkloadUsage w;
    w.ns = p.ns.empty() ? "default" : p.ns;
    w.owner_kind = "Pod";
    w.owner = p.name;
    int whole = 0;
    for (const auto& [id, d] : p.devices) {
      const PromSeries* memory = d.agent_memory ? d.agent_memory : d.memory;
      if (!memory || !d.compute) {
        const PromSeries* only = memory ? memory : d.compute;
        out.unmatched_samples += static_cast<int64_t>(only->samples.size());
        continue;
      }
      const PromSeries& m = *memory;
      const PromSeries& labels = d.memory ? *d.memory : *d.compute;  // DCGM's, with modelName
      std::string product = labels.model_name;
      std::replace(product.begin(), product.end(), ' ', '-');
      auto model = kube::ModelFromProduct(product);
      if (!model.ok())
        return InvalidArgument(source + ": pod " + p.ns + "/" + p.name + " on GPU " + id +
                               ": modelName: " + model.status().message());
      const std::string& model_name = catalog.Get(*model).name;
      if (w.gpu_model.empty()) w.gpu_model = model_name;
      if (w.gpu_model != model_name)
        return InvalidArgument(source + ": pod " + p.ns + "/" + p.name + " runs on both " +
                               w.gpu_model + " and " + model_name);
      double compute_scale = 1;
      if (!labels.mig_profile.empty()) {
        const MigGeometry* geo = MigGeometryFor(*model);
        const int idx = geo ? geo->Find(labels.mig_profile) : -1;
        if (idx < 0)
          return InvalidArgument(source + ": pod " + p.ns + "/" + p.name + ": MIG profile '" +
                                 labels.mig_profile + "' is not one of " + model_name);
        compute_scale =
            static_cast<double>(geo->profiles[idx].compute_slices) / geo->compute_slices;
        if (w.request.mig_profile.empty()) w.request.mig_profile = labels.mig_profile;
      } else {
        ++whole;
      }
      std::map<int64_t, Point> points;
      for (const auto& s : m.samples) {
        Point& pt = points[std::llround(s.t_s)];
        pt.memory = s.value;
        pt.has_memory = true;
      }
      for (const auto& s : d.compute->samples) {
        Point& pt = points[std::llround(s.t_s)];
        pt.compute = std::clamp(s.value * compute_scale, 0.0, 1.0);
        pt.has_compute = true;
      }
      advisor::PodSeries ps;
      ps.pod = p.name;
      ps.gpu = id;
      ps.device_source = true;
      ps.memory_per_pod = d.agent_memory != nullptr;
      for (const auto& [t, pt] : points) {
        if (!pt.has_memory || !pt.has_compute) {
          ++out.unmatched_samples;
          continue;
        }
        ps.samples.push_back({t, pt.memory, pt.compute});
      }
      if (!ps.samples.empty()) w.pods.push_back(std::move(ps));
    }
    if (w.pods.empty()) continue;
    if (w.request.mig_profile.empty()) w.request.whole_gpus = std::min(whole, 8);
    // The pod joins its owner's workload when the model and the request agree; otherwise it is
    // judged alone.
    if (auto o = owners.find({p.ns, p.name}); o != owners.end()) {
      advisor::WorkloadUsage* same = nullptr;
      for (auto& x : out.history.workloads)
        if (x.ns == w.ns && x.owner_kind == o->second.kind && x.owner == o->second.name) same = &x;
      if (!same) {
        w.owner_kind = o->second.kind;
        w.owner = o->second.name;
      } else if (same->gpu_model == w.gpu_model && same->request == w.request) {
        for (auto& ps : w.pods) same->pods.push_back(std::move(ps));
        continue;
      }
    }
    out.history.workloads.push_back(std::move(w));
  }
  if (out.history.workloads.empty())
    return NotFound(source +
                    ": no pod has both memory and compute DCGM series in the window "
                    "(DCGM_FI_PROF_SM_ACTIVE, DCGM_FI_PROF_GR_ENGINE_ACTIVE or "
                    "DCGM_FI_DEV_GPU_UTIL)");
  advisor::MarkSharedDevices(out.history);
  return out;
}

namespace {

struct PromClient {
  std::unique_ptr<httplib::Client> cli;
  std::string prefix;
};

Result<PromClient> Connect(const PrometheusQuery& q) {
  const std::string& url = q.url;
  const bool https = url.rfind("https://", 0) == 0;
  if (!https && url.rfind("http://", 0) != 0)
    return InvalidArgument("--prometheus: '" + url + "' is not an http:// or https:// URL");
  const size_t host_start = url.find("://") + 3;
  const size_t path_start = url.find('/', host_start);
  const std::string base = url.substr(0, path_start);
  PromClient c;
  c.prefix = path_start == std::string::npos ? "" : url.substr(path_start);
  while (!c.prefix.empty() && c.prefix.back() == '/') c.prefix.pop_back();
  if (base.size() <= host_start)
    return InvalidArgument("--prometheus: '" + url + "' names no host");
  c.cli = std::make_unique<httplib::Client>(base);
  if (!c.cli->is_valid()) return InvalidArgument("--prometheus: '" + url + "' is not a valid URL");
  const auto secs = static_cast<time_t>(q.timeout_s);
  c.cli->set_connection_timeout(std::max<time_t>(secs, 1));
  c.cli->set_read_timeout(std::max<time_t>(secs, 1));
  return c;
}

}  // namespace

Result<std::vector<PromRange>> FetchRanges(const PrometheusQuery& q,
                                           const std::vector<DcgmField>& fields) {
  auto c = Connect(q);
  if (!c.ok()) return c.status();
  httplib::Client& cli = *c->cli;
  const std::string& prefix = c->prefix;
  const std::string& url = q.url;
  std::vector<PromRange> ranges;
  for (DcgmField f : fields) {
    const std::string name = advisor::DcgmFieldName(f);
    const httplib::Params params{{"query", name},
                                 {"start", std::to_string(q.start_s)},
                                 {"end", std::to_string(q.end_s)},
                                 {"step", std::to_string(q.step_s)}};
    std::string body;
    bool too_large = false;
    auto res = cli.Get(prefix + "/api/v1/query_range", params, httplib::Headers{},
                       [&](const char* data, size_t n) {
                         if (body.size() + n > advisor::kMaxPromResponseBytes) {
                           too_large = true;
                           return false;
                         }
                         body.append(data, n);
                         return true;
                       });
    const std::string source = "Prometheus at " + url + " (" + name + ")";
    if (too_large)
      return ResourceExhausted(source + ": response larger than " +
                               std::to_string(advisor::kMaxPromResponseBytes >> 20) + " MiB");
    if (!res)
      return Unavailable("cannot reach Prometheus at " + url + ": " + DescribeError(res.error()));
    if (res->status != 200) {
      auto parsed = advisor::ParsePrometheusRange(body, source, name);
      if (!parsed.ok() && parsed.status().code() == StatusCode::kUnavailable)
        return Unavailable(parsed.status().message() + " (HTTP " + std::to_string(res->status) +
                           ")");
      std::string first = body.substr(0, body.find('\n'));
      if (first.size() > 200) first = first.substr(0, 200) + "...";
      return Unavailable(source + ": HTTP " + std::to_string(res->status) +
                         (first.empty() ? "" : ": " + first));
    }
    auto parsed = advisor::ParsePrometheusRange(body, source, name);
    if (!parsed.ok()) return parsed.status();
    ranges.push_back(std::move(*parsed));
  }
  return ranges;
}

Result<DcgmHistory> FetchDcgmHistory(const PrometheusQuery& q) {
  auto fetched =
      FetchRanges(q, {DcgmField::kFbUsedMib, DcgmField::kSmActive, DcgmField::kGrEngineActive,
                      DcgmField::kGpuUtil, DcgmField::kAgentPodMemoryMib});
  if (!fetched.ok()) return fetched.status();
  std::vector<PromRange> ranges = std::move(*fetched);
  auto c = Connect(q);
  if (!c.ok()) return c.status();
  httplib::Client& cli = *c->cli;
  const std::string& prefix = c->prefix;
  const std::string& url = q.url;
  std::string owner_bodies[2];
  const std::string range = std::to_string(q.end_s - q.start_s) + "s";
  const std::string queries[2] = {
      "max by (namespace, pod, exported_namespace, exported_pod, owner_kind, owner_name) "
      "(last_over_time(kube_pod_owner{owner_is_controller=\"true\"}[" +
          range + "]))",
      "max by (namespace, replicaset, owner_kind, owner_name) "
      "(last_over_time(kube_replicaset_owner{owner_is_controller=\"true\"}[" +
          range + "]))"};
  for (int i = 0; i < 2; ++i) {
    auto res = cli.Get(prefix + "/api/v1/query",
                       httplib::Params{{"query", queries[i]}, {"time", std::to_string(q.end_s)}},
                       httplib::Headers{});
    if (!res)
      return Unavailable("cannot reach Prometheus at " + url + ": " + DescribeError(res.error()));
    if (res->status != 200)
      return Unavailable("Prometheus at " + url + " (pod owners): HTTP " +
                         std::to_string(res->status) + ": " +
                         res->body.substr(0, std::min<size_t>(res->body.find('\n'), 200)));
    owner_bodies[i] = std::move(res->body);
  }
  auto owners = ParsePodOwners(owner_bodies[0], owner_bodies[1], "Prometheus at " + url);
  if (!owners.ok()) return owners.status();
  auto h = DcgmToHistory(ranges, "Prometheus at " + url, *owners);
  if (!h.ok() && h.status().code() == StatusCode::kNotFound)
    return NotFound(h.status().message() + " [" + std::to_string(q.start_s) + ", " +
                    std::to_string(q.end_s) + "]");
  return h;
}

}  // namespace tessera
