// Node translation (TranslateNode) and the scheduling constraints between pods and nodes:
// node affinity, tolerations and taints, schedulability.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "kube/json_fields.h"
#include "kube/translate.h"
#include "kube/translate_internal.h"

namespace tessera::kube {
namespace detail {

using namespace json_fields;

// ---- Constraints ----

Result<NodeSelectorRequirement> ParseRequirement(const Json& j, const std::string& where,
                                                 bool field) {
  if (!j.is_object()) return InvalidArgument(where + " must be an object");
  NodeSelectorRequirement r;
  r.key = Str(j, "key");
  r.op = Str(j, "operator");
  if (r.key.empty()) return InvalidArgument(where + ".key is required");
  if (const Json* vs = Field(j, "values")) {
    if (!vs->is_array()) return InvalidArgument(where + ".values must be a list");
    for (const Json& v : *vs) {
      if (!v.is_string()) return InvalidArgument(where + ".values must be strings");
      r.values.push_back(v.get<std::string>());
    }
  }
  static const std::set<std::string> kOps = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"};
  if (!kOps.count(r.op))
    return InvalidArgument(where + ": unknown operator \"" + r.op +
                           "\" (known: In, NotIn, Exists, DoesNotExist, Gt, Lt)");
  if (field && r.op != "In" && r.op != "NotIn")
    return InvalidArgument(where + ": matchFields supports only In and NotIn");
  if (field && r.key != "metadata.name")
    return InvalidArgument(where + ": matchFields supports only metadata.name");
  if ((r.op == "In" || r.op == "NotIn") && r.values.empty())
    return InvalidArgument(where + ": operator " + r.op + " needs values");
  if ((r.op == "Exists" || r.op == "DoesNotExist") && !r.values.empty())
    return InvalidArgument(where + ": operator " + r.op + " takes no values");
  if (r.op == "Gt" || r.op == "Lt") {
    if (r.values.size() != 1)
      return InvalidArgument(where + ": operator " + r.op + " needs one value");
    auto v = ParseQuantityInt(Json(r.values[0]));
    if (!v.ok() || r.values[0].find_first_not_of("+-0123456789") != std::string::npos)
      return InvalidArgument(where + ": operator " + r.op + " needs an integer value");
  }
  return r;
}

Result<std::vector<NodeSelectorTerm>> ParseAffinity(const Json& spec) {
  std::vector<NodeSelectorTerm> terms;
  const Json* req =
      Path(spec, {"affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                  "nodeSelectorTerms"});
  if (!req) return terms;
  if (!req->is_array())
    return InvalidArgument("required node affinity: nodeSelectorTerms must be a list");
  for (size_t i = 0; i < req->size(); ++i) {
    const Json& t = (*req)[i];
    const std::string where = "nodeSelectorTerms[" + std::to_string(i) + "]";
    if (!t.is_object()) return InvalidArgument(where + " must be an object");
    NodeSelectorTerm term;
    for (const char* key : {"matchExpressions", "matchFields"}) {
      const Json* list = Field(t, key);
      if (!list) continue;
      if (!list->is_array()) return InvalidArgument(where + "." + key + " must be a list");
      for (size_t k = 0; k < list->size(); ++k) {
        const bool field = key[5] == 'F';
        auto r =
            ParseRequirement((*list)[k], where + "." + key + "[" + std::to_string(k) + "]", field);
        if (!r.ok()) return r.status();
        (field ? term.match_fields : term.match_expressions).push_back(std::move(*r));
      }
    }
    terms.push_back(std::move(term));
  }
  return terms;
}

Result<std::vector<Toleration>> ParseTolerations(const Json& spec) {
  std::vector<Toleration> out;
  const Json* ts = Field(spec, "tolerations");
  if (!ts) return out;
  if (!ts->is_array()) return InvalidArgument("spec.tolerations must be a list");
  for (size_t i = 0; i < ts->size(); ++i) {
    const Json& t = (*ts)[i];
    const std::string where = "spec.tolerations[" + std::to_string(i) + "]";
    if (!t.is_object()) return InvalidArgument(where + " must be an object");
    Toleration tol;
    tol.key = Str(t, "key");
    tol.op = Str(t, "operator", "Equal");
    if (tol.op.empty()) tol.op = "Equal";
    tol.value = Str(t, "value");
    tol.effect = Str(t, "effect");
    if (tol.op != "Equal" && tol.op != "Exists")
      return InvalidArgument(where + ": unknown operator \"" + tol.op + "\" (Equal or Exists)");
    if (tol.key.empty() && tol.op != "Exists")
      return InvalidArgument(where + ": an empty key needs operator Exists");
    out.push_back(std::move(tol));
  }
  return out;
}

Result<std::vector<Taint>> ParseTaints(const Json& spec) {
  std::vector<Taint> out;
  const Json* ts = Field(spec, "taints");
  if (!ts) return out;
  if (!ts->is_array()) return InvalidArgument("spec.taints must be a list");
  for (const Json& t : *ts) {
    if (!t.is_object()) return InvalidArgument("spec.taints entries must be objects");
    out.push_back({Str(t, "key"), Str(t, "value"), Str(t, "effect")});
  }
  return out;
}

}  // namespace detail

namespace {

using namespace json_fields;
using namespace detail;

Result<NodeInfo> TranslateNodeImpl(const Json& node) {
  if (!node.is_object()) return InvalidArgument("node must be a JSON object");
  NodeInfo info;
  const Json empty = Json::object();
  const Json* meta = Field(node, "metadata");
  if (!meta || !meta->is_object()) return InvalidArgument("node has no metadata");
  info.spec.name = Str(*meta, "name");
  if (info.spec.name.empty()) return InvalidArgument("node has no metadata.name");
  const std::string where = "node " + info.spec.name;
  auto labels = StringMap(Field(*meta, "labels"), "metadata.labels");
  if (!labels.ok()) return InvalidArgument(where + ": " + labels.status().message());
  info.spec.labels = std::move(*labels);
  auto annotations = StringMap(Field(*meta, "annotations"), "metadata.annotations");
  if (!annotations.ok()) return InvalidArgument(where + ": " + annotations.status().message());

  const Json* spec_p = Field(node, "spec");
  const Json& spec = spec_p && spec_p->is_object() ? *spec_p : empty;
  if (const Json* u = Field(spec, "unschedulable"); u && u->is_boolean()) info.unschedulable = *u;
  auto taints = ParseTaints(spec);
  if (!taints.ok()) return InvalidArgument(where + ": " + taints.status().message());
  info.taints = std::move(*taints);

  const Json* status_p = Field(node, "status");
  const Json& status = status_p && status_p->is_object() ? *status_p : empty;
  if (const Json* conds = Field(status, "conditions"); conds && conds->is_array())
    for (const Json& c : *conds)
      if (Str(c, "type") == "Ready") info.ready = Str(c, "status") == "True";

  const Json* alloc = Field(status, "allocatable");
  if (!alloc || !alloc->is_object()) alloc = Field(status, "capacity");
  if (!alloc || !alloc->is_object()) return InvalidArgument(where + ": no status.allocatable");
  const Json* cpu = Field(*alloc, "cpu");
  const Json* mem = Field(*alloc, "memory");
  if (!cpu || !mem) return InvalidArgument(where + ": allocatable cpu or memory missing");
  auto c = ParseQuantityMilli(*cpu);
  if (!c.ok()) return InvalidArgument(where + ": allocatable cpu: " + c.status().message());
  auto m = ParseQuantityMiB(*mem, false);
  if (!m.ok()) return InvalidArgument(where + ": allocatable memory: " + m.status().message());
  info.spec.cpu = MilliCpu(std::max<int64_t>(0, *c));
  info.spec.memory = MiB(std::max<int64_t>(0, *m));

  int64_t alloc_gpus = 0;
  for (auto it = alloc->begin(); it != alloc->end(); ++it) {
    const std::string& name = it.key();
    if (name != kResourceGpu && name.rfind(kResourceMigPrefix, 0) != 0) continue;
    auto n = ParseQuantityInt(it.value());
    if (!n.ok())
      return InvalidArgument(where + ": allocatable " + name + " " + n.status().message());
    if (name == kResourceGpu)
      alloc_gpus = std::max<int64_t>(0, *n);
    else if (*n > 0)
      info.mig_allocatable[MigProfileFromResource(name)] = *n;
  }

  const auto& lab = info.spec.labels;
  auto label = [&](const char* k) {
    auto it = lab.find(k);
    return it == lab.end() ? std::string() : it->second;
  };
  info.sharing_strategy = label("nvidia.com/gpu.sharing-strategy");

  auto inv_it = annotations->find(kAnnotationInventory);
  if (inv_it != annotations->end()) {
    auto inv = DecodeInventory(inv_it->second);
    if (!inv.ok())
      return InvalidArgument(where + ": annotation " + kAnnotationInventory + ": " +
                             inv.status().message());
    info.inventory = std::move(*inv);
  }

  if (!info.inventory.empty()) {
    const std::string& model = info.inventory[0].model;
    for (const auto& e : info.inventory) {
      if (e.model != model)
        return InvalidArgument(where + ": mixed GPU models (" + model + ", " + e.model +
                               ") on one node are not supported");
      if (!e.healthy) info.unhealthy |= GpuMask{1} << e.index;
      if (e.memory_mib > 0 &&
          (info.spec.gpu_memory_mib == 0 || e.memory_mib < info.spec.gpu_memory_mib))
        info.spec.gpu_memory_mib = e.memory_mib;
    }
    info.model = *GpuCatalog::Builtin().Find(model);
    info.spec.gpu_count = static_cast<int>(info.inventory.size());
  } else {
    int64_t replicas = 1;
    const std::string r = label("nvidia.com/gpu.replicas");
    if (!r.empty()) {
      auto n = ParseQuantityInt(Json(r));
      if (n.ok() && *n > 1) replicas = *n;
    }
    const int64_t gpus = alloc_gpus / replicas;
    if (gpus > kMaxGpusPerNode)
      return InvalidArgument(where + ": " + std::to_string(gpus) + " GPUs; at most " +
                             std::to_string(kMaxGpusPerNode) + " per node are supported");
    info.spec.gpu_count = static_cast<int>(gpus);
    if (gpus > 0 || !info.mig_allocatable.empty()) {
      const std::string product = label("nvidia.com/gpu.product");
      if (product.empty())
        return InvalidArgument(where +
                               ": has GPUs but neither a nvidia.com/gpu.product label nor a "
                               "tessera.io/gpu-inventory annotation");
      auto id = ModelFromProduct(product);
      if (!id.ok()) return InvalidArgument(where + ": " + id.status().message());
      info.model = *id;
      // GFD's nvidia.com/gpu.memory: GPU 0's memory in MiB.
      auto mem = ParseQuantityInt(Json(label("nvidia.com/gpu.memory")));
      if (mem.ok() && *mem > 0) info.spec.gpu_memory_mib = *mem;
    }
  }
  info.spec.model = info.spec.gpu_count > 0 ? info.model : kNoGpuModel;
  return info;
}

}  // namespace

// ---- Public: nodes ----

Result<NodeInfo> TranslateNode(const Json& node) {
  try {
    return TranslateNodeImpl(node);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("malformed node: ") + e.what());
  }
}

bool Tolerates(const std::vector<Toleration>& tolerations, const Taint& taint) {
  for (const Toleration& t : tolerations) {
    if (!t.effect.empty() && t.effect != taint.effect) continue;
    if (t.key.empty()) {
      if (t.op == "Exists") return true;
      continue;
    }
    if (t.key != taint.key) continue;
    if (t.op == "Exists" || t.value == taint.value) return true;
  }
  return false;
}

bool Tolerates(const PodRequest& pod, const NodeInfo& node) {
  for (const Taint& t : node.taints) {
    if (t.effect != "NoSchedule" && t.effect != "NoExecute") continue;
    if (!Tolerates(pod.tolerations, t)) return false;
  }
  return true;
}

bool MatchesTerm(const NodeSelectorTerm& term, const NodeInfo& node) {
  if (term.match_expressions.empty() && term.match_fields.empty()) return false;
  const auto& labels = node.spec.labels;
  for (const auto& r : term.match_expressions) {
    auto it = labels.find(r.key);
    const bool present = it != labels.end();
    const bool in =
        present && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end();
    if (r.op == "In" && !in) return false;
    if (r.op == "NotIn" && in) return false;
    if (r.op == "Exists" && !present) return false;
    if (r.op == "DoesNotExist" && present) return false;
    if (r.op == "Gt" || r.op == "Lt") {
      if (!present || r.values.size() != 1) return false;
      auto have = ParseQuantityInt(Json(it->second));
      auto want = ParseQuantityInt(Json(r.values[0]));
      if (!have.ok() || !want.ok() ||
          it->second.find_first_not_of("+-0123456789") != std::string::npos)
        return false;
      if (r.op == "Gt" ? !(*have > *want) : !(*have < *want)) return false;
    }
  }
  for (const auto& r : term.match_fields) {
    const bool in = std::find(r.values.begin(), r.values.end(), node.spec.name) != r.values.end();
    if (r.op == "In" && !in) return false;
    if (r.op == "NotIn" && in) return false;
  }
  return true;
}

bool MatchesNode(const PodRequest& pod, const NodeInfo& node) {
  for (const auto& [k, v] : pod.node_selector) {
    auto it = node.spec.labels.find(k);
    if (it == node.spec.labels.end() || it->second != v) return false;
  }
  if (pod.required_affinity.empty()) return true;
  for (const auto& term : pod.required_affinity)
    if (MatchesTerm(term, node)) return true;
  return false;
}

bool Schedulable(const NodeInfo& node) {
  return node.ready && !node.unschedulable;
}

}  // namespace tessera::kube
