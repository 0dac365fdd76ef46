#include "kube/extender.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "cluster/cluster_state.h"
#include "core/random.h"
#include "engine/engine.h"
#include "kube/extender_view.h"

namespace tessera::kube {
namespace {

std::string Mib(int64_t mib) {
  if (mib % 1024 == 0) return std::to_string(mib / 1024) + " GiB";
  return std::to_string(mib) + " MiB";
}

// Free memory on one GPU for a new memory-limited client.
int64_t FreeMemory(const GpuSlices& g) {
  switch (g.mode) {
    case GpuMode::kIdle:
      return g.memory_mib;
    case GpuMode::kExclusive:
    case GpuMode::kShare:
      return 0;
    case GpuMode::kMps:
    case GpuMode::kTimeSlice:
      return std::max<int64_t>(0, g.memory_mib - g.memory_used);
    case GpuMode::kMig: {
      int64_t best = 0;
      for (const MigSlot& s : g.instances) {
        if (s.use == MigSlot::Use::kFree) best = std::max(best, s.memory_mib);
        if (s.use == MigSlot::Use::kMps) best = std::max(best, s.memory_mib - s.memory_used);
      }
      return best;
    }
  }
  return 0;
}

struct NodeFit {
  bool fits = false;
  bool unresolvable = false;
  std::string reason;
  SliceAssignment slice;
  bool counted = false;  // MIG by count: no specific instance
};

Assignment ToAssignment(const NodeInfo& n, const NodeModel& m, const PodRequest& p,
                        const NodeFit& fit) {
  if (fit.counted) {
    Assignment a;
    a.node = n.spec.name;
    a.kind = AssignmentKind::kMig;
    a.mig_instance = p.gpu.mig_profile;
    return a;
  }
  return AssignmentFor(n, fit.slice, m.cluster.gpu(0, std::countr_zero(fit.slice.gpus)));
}

Json FailedMap(const std::map<std::string, std::string>& m) {
  Json j = Json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

// Node objects sent with the request (nodeCacheCapable: false), or null.
const Json* NodeItems(const Json& args) {
  if (!args.is_object()) return nullptr;
  auto it = args.find("Nodes");
  if (it == args.end() || !it->is_object()) return nullptr;
  auto items = it->find("items");
  if (items == it->end() || !items->is_array()) return nullptr;
  return &*items;
}

std::vector<std::string> NodeNamesOf(const Json& args) {
  std::vector<std::string> out;
  if (const Json* items = NodeItems(args)) {
    for (const Json& n : *items) {
      const Json* meta = n.is_object() && n.contains("metadata") ? &n["metadata"] : nullptr;
      if (meta && meta->is_object() && meta->contains("name") && (*meta)["name"].is_string())
        out.push_back((*meta)["name"].get<std::string>());
    }
    return out;
  }
  if (args.is_object()) {
    auto it = args.find("NodeNames");
    if (it != args.end() && it->is_array())
      for (const Json& n : *it)
        if (n.is_string()) out.push_back(n.get<std::string>());
  }
  return out;
}

std::string PodKey(const PodRequest& p) {
  return p.uid.empty() ? p.key() : p.uid;
}

}  // namespace

struct Extender::State {
  explicit State(const ExtenderOptions& o)
      : options(o), selector(o.selector), scorer(MakeTesseraScorer(o.scoring)), rng(o.seed) {}

  ExtenderOptions options;
  SliceSelector selector;
  std::unique_ptr<Scorer> scorer;
  Rng rng;
  std::map<std::string, NodeEntry> nodes;
  std::unordered_map<std::string, PodRequest> pods;              // GPU pods by uid
  std::unordered_map<std::string, std::set<std::string>> bound;  // node -> uids bound to it
  std::set<std::string> observed;  // pods learned, until they leave (bounded by `pods`)
  ExtenderStats stats;
  // Single-node models of the nodes whose pods no request excluded, kept until the node or its
  // bound pods change.
  mutable std::unordered_map<std::string, NodeModel> models;
  // The fleet as the policy scores it: MIG-enabled GPUs blocked, and open (MIG pods).
  EngineView view{/*mig_open=*/false}, mig_view{/*mig_open=*/true};
  // Bumped by every change of a node or of the pods bound to one: what Fit(p, node, {})
  // depends on besides the pod.
  uint64_t generation = 0;
  // The verdicts of the last filter call, for the prioritize call kube-scheduler makes next
  // for the same pod: used while `generation` is unchanged and the request's Pod is the same.
  struct {
    std::string pod;  // the filter request's Pod, serialised
    uint64_t generation = 0;
    std::unordered_map<std::string, bool> fits;  // by node name
  } last_filter;

  void NodeChanged(const std::string& name, const NodeEntry* before, const NodeEntry* after) {
    const NodeInfo* b = before && before->info ? &*before->info : nullptr;
    const NodeInfo* a = after && after->info ? &*after->info : nullptr;
    view.NodeChanged(name, b, a);
    mig_view.NodeChanged(name, b, a);
    models.erase(name);
    ++generation;
  }

  // An update that translates to what is known already (a status heartbeat, a request's copy
  // of the node) changes nothing: the node's model, the views and the filter's verdicts stay.
  void SetNode(const std::string& name, NodeEntry e) {
    auto it = nodes.find(name);
    if (it != nodes.end() && it->second.info == e.info && it->second.error == e.error) return;
    std::optional<NodeEntry> before;
    if (it != nodes.end()) before = std::move(it->second);
    NodeEntry& now = nodes[name] = std::move(e);
    NodeChanged(name, before ? &*before : nullptr, &now);
  }

  void PutNode(NodeInfo info) {
    const std::string key = info.spec.name;
    SetNode(key, NodeEntry{std::move(info), ""});
  }

  void EraseNode(const std::string& name) {
    auto it = nodes.find(name);
    if (it == nodes.end()) return;
    NodeChanged(name, &it->second, nullptr);
    nodes.erase(it);
  }

  void PodsChanged(const std::string& node) {
    if (node.empty()) return;
    view.PodsChanged(node);
    mig_view.PodsChanged(node);
    models.erase(node);
    ++generation;
  }

  void Unbind(const std::string& key, const std::string& node) {
    auto b = bound.find(node);
    if (b == bound.end()) return;
    b->second.erase(key);
    if (b->second.empty()) bound.erase(b);
  }

  // Every change to `pods` goes through Put/ErasePod, which keep `bound` and the views current.
  void PutPod(const std::string& key, PodRequest p) {
    auto it = pods.find(key);
    if (it != pods.end()) {
      if (it->second.node_name != p.node_name) Unbind(key, it->second.node_name);
      PodsChanged(it->second.node_name);
    }
    if (!p.node_name.empty()) bound[p.node_name].insert(key);
    PodsChanged(p.node_name);
    pods[key] = std::move(p);
  }

  void ErasePod(const std::string& key) {
    auto it = pods.find(key);
    if (it == pods.end()) return;
    Unbind(key, it->second.node_name);
    PodsChanged(it->second.node_name);
    observed.erase(key);
    pods.erase(it);
  }

  // Learns `p` once: as an arrival, or, for a pod found bound, as the past while no arrival
  // has been learned yet (later the scorer counts it as an arrival too).
  void Observe(const PodRequest& p, bool found_bound = false) {
    if (!observed.insert(PodKey(p)).second) return;
    if (found_bound && stats.learned_arrivals == 0) {
      scorer->ObservePast(p.demand);
      ++stats.learned_past;
    } else {
      scorer->Observe(p.demand);
      ++stats.learned_arrivals;
    }
  }

  // Tracks `p`; `arriving`: it is being placed now, so it is learned as an arrival.
  void StorePod(PodRequest p, bool arriving = true) {
    if (arriving || !p.node_name.empty()) Observe(p, /*found_bound=*/!arriving);
    auto it = pods.find(PodKey(p));
    if (it != pods.end() && p.node_name.empty() && !it->second.node_name.empty()) {
      p.node_name = it->second.node_name;
      if (!p.assignment) p.assignment = it->second.assignment;
    }
    const std::string key = PodKey(p);
    PutPod(key, std::move(p));
  }

  std::vector<const PodRequest*> BoundTo(const std::string& node,
                                         const std::set<std::string>& exclude) const {
    std::vector<const PodRequest*> out;
    auto b = bound.find(node);
    if (b == bound.end()) return out;
    for (const std::string& uid : b->second)
      if (!exclude.count(uid)) out.push_back(&pods.at(uid));
    std::sort(out.begin(), out.end(), [](const PodRequest* a, const PodRequest* b) {
      if (a->assignment.has_value() != b->assignment.has_value()) return a->assignment.has_value();
      return PodKey(*a) < PodKey(*b);
    });
    return out;
  }

  // The model of `n` without the pods in `exclude`: the cached one when none of them is bound
  // to `n`, else built into `scratch`.
  Result<const NodeModel*> ModelOf(const NodeInfo& n, const std::set<std::string>& exclude,
                                   std::optional<NodeModel>& scratch) const {
    bool touched = false;
    for (const std::string& uid : exclude)
      if (auto it = pods.find(uid); it != pods.end() && it->second.node_name == n.spec.name)
        touched = true;
    if (!touched)
      if (auto it = models.find(n.spec.name); it != models.end()) return &it->second;
    auto m = BuildNodeModel(n, BoundTo(n.spec.name, touched ? exclude : std::set<std::string>{}),
                            selector);
    if (!m.ok()) return m.status();
    if (touched) {
      scratch = std::move(*m);
      return &*scratch;
    }
    return &(models[n.spec.name] = std::move(*m));
  }

  NodeFit Fit(const PodRequest& p, const std::string& node_name,
              const std::set<std::string>& exclude, NodeModel* model_out = nullptr) const {
    NodeFit f;
    auto it = nodes.find(node_name);
    if (it == nodes.end()) {
      f.unresolvable = true;
      f.reason = "node not known to the Tessera extender";
      return f;
    }
    if (!it->second.info) {
      f.unresolvable = true;
      f.reason = it->second.error;
      return f;
    }
    const NodeInfo& n = *it->second.info;
    const auto& cat = GpuCatalog::Builtin();
    if (n.model == kNoGpuModel) {
      f.unresolvable = true;
      f.reason = "node has no GPUs";
      return f;
    }
    const std::string model_name = cat.Get(n.model).name;
    if (!p.demand.AllowsModel(n.model)) {
      f.unresolvable = true;
      f.reason = p.gpu.mig_profile.empty()
                     ? "GPU model " + model_name + " is not among the pod's allowed models"
                     : "GPU model " + model_name + " has no MIG profile " + p.gpu.mig_profile;
      return f;
    }
    std::optional<NodeModel> scratch;  // built only when `exclude` touches the node
    auto model = ModelOf(n, exclude, scratch);
    if (!model.ok()) {
      f.unresolvable = true;
      f.reason = "node model: " + model.status().message();
      return f;
    }
    if (CountedMig(p, n)) {
      auto a = n.mig_allocatable.find(p.gpu.mig_profile);
      const int64_t have = a == n.mig_allocatable.end() ? 0 : a->second;
      if (have == 0) {
        f.unresolvable = true;
        f.reason = "node offers no " + p.gpu.mig_profile + " MIG instances";
        return f;
      }
      auto used = (*model)->mig_counted.find(p.gpu.mig_profile);
      if (used != (*model)->mig_counted.end() && used->second >= have) {
        f.reason = "no free " + p.gpu.mig_profile + " slice";
        return f;
      }
      f.fits = true;
      f.counted = true;
      f.slice.kind = SliceKind::kMig;
      if (model_out) *model_out = **model;
      return f;
    }
    const SliceDemand d = GpuOnly(SliceDemandOn(p, n.model));
    const int usable = n.spec.gpu_count - std::popcount(n.unhealthy);
    if (p.gpu.whole_gpus > usable) {
      f.unresolvable = true;
      f.reason = "node has " + std::to_string(usable) + " usable GPUs, the pod needs " +
                 std::to_string(p.gpu.whole_gpus);
      return f;
    }
    SliceChoice c = selector.Select((*model)->cluster, d);
    if (c.placed) {
      f.fits = true;
      f.slice = c.assignment;
      if (model_out) *model_out = **model;
      return f;
    }
    const ClusterState& sc = (*model)->cluster;
    if (p.gpu.whole_gpus > 0) {
      // Idle MIG-partitioned GPUs are not free for whole GPUs: they are named apart.
      int idle = 0, idle_mig = 0;
      for (int g = 0; g < sc.gpu_count(0); ++g) {
        if (!sc.gpu(0, g).Idle() || sc.gpu(0, g).blocked) continue;  // blocked: unhealthy
        ++(sc.gpu(0, g).mig_enabled() ? idle_mig : idle);
      }
      f.reason = "insufficient free GPUs: " + std::to_string(p.gpu.whole_gpus) + " requested, " +
                 std::to_string(idle) + " idle";
      if (idle_mig > 0) f.reason += " (and " + std::to_string(idle_mig) + " MIG-partitioned)";
      return f;
    }
    if (!p.gpu.mig_profile.empty()) {
      f.reason = "no free " + p.gpu.mig_profile + " slice";
      return f;
    }
    const int64_t need = EffectiveMemoryMib(d, n.model);
    const int64_t card = cat.Get(n.model).memory_mib;
    if (card > 0 && need > card) {
      f.unresolvable = true;
      f.reason = "insufficient GPU memory: " + Mib(need) + " requested, a " + model_name + " has " +
                 Mib(card);
      return f;
    }
    int64_t best = 0;
    for (int g = 0; g < sc.gpu_count(0); ++g)
      if (!((n.unhealthy >> g) & 1)) best = std::max(best, FreeMemory(sc.gpu(0, g)));
    if (best < need) {
      f.reason = "insufficient GPU memory: " + Mib(need) + " requested, at most " + Mib(best) +
                 " free on one GPU";
      return f;
    }
    f.reason =
        std::string("no GPU slice for ") + IsolationName(p.isolation) + " isolation: " + c.reason;
    return f;
  }

  // Scores the candidates in the engine view of the whole fleet (EngineView): 0..10 for the
  // nodes the pod fits in that view, 5 (neutral) where it fits but the view has no per-GPU
  // state (MIG counted by allocatable), 0 elsewhere.
  // `known`: verdicts of Fit(p, node, {}) by node name, taken as they are (may be null).
  std::vector<int64_t> Scores(const PodRequest& p, const std::vector<std::string>& names,
                              const std::unordered_map<std::string, bool>* known) {
    std::vector<int64_t> out(names.size(), 0);
    EngineView& v = p.gpu.mig_profile.empty() ? view : mig_view;
    v.Refresh(nodes, [this](const std::string& node) { return BoundTo(node, {}); });
    const ClusterState& state = v.state();
    std::vector<int> idx_of(names.size(), -1);
    for (size_t i = 0; i < names.size(); ++i) {
      std::optional<bool> fits;
      if (known)
        if (auto k = known->find(names[i]); k != known->end()) fits = k->second;
      if (fits)
        ++stats.fits_reused;
      else
        fits = Fit(p, names[i], {}).fits;
      if (!*fits) continue;
      const NodeInfo& n = *nodes.at(names[i]).info;
      if (n.spec.gpu_count == 0 || CountedMig(p, n)) {
        out[i] = -1;  // fits, but the engine has no per-GPU view: neutral
        continue;
      }
      if (auto idx = v.Find(names[i])) idx_of[i] = static_cast<int>(*idx);
    }
    // Score per distinct demand (one per GPU model), so the scorer's pre-pass matches.
    std::map<std::pair<int, int>, std::vector<NodeIdx>> groups;
    std::vector<double> raw(names.size(), 0);
    std::vector<bool> scored(names.size(), false);
    for (size_t i = 0; i < names.size(); ++i) {
      if (idx_of[i] < 0) continue;
      const NodeIdx n = static_cast<NodeIdx>(idx_of[i]);
      const Demand d = DemandOn(p, state.spec(n).model);
      if (FilterNode(state.free(n), d) != FilterVerdict::kFits) continue;
      groups[{d.num_gpu, d.gpu_milli}].push_back(n);
    }
    std::unordered_map<NodeIdx, double> by_node;
    for (const auto& [shape, feasible] : groups) {
      const Demand d = DemandOn(p, state.spec(feasible[0]).model);
      scorer->PreScore(state, d, feasible, rng);
      for (NodeIdx n : feasible)
        by_node[n] = scorer->Score(state, n, DemandOn(p, state.spec(n).model)).score;
    }
    double lo = 0, hi = 0;
    bool any = false;
    for (size_t i = 0; i < names.size(); ++i) {
      if (idx_of[i] < 0) continue;
      auto it = by_node.find(static_cast<NodeIdx>(idx_of[i]));
      if (it == by_node.end()) continue;
      raw[i] = it->second;
      scored[i] = true;
      lo = any ? std::min(lo, raw[i]) : raw[i];
      hi = any ? std::max(hi, raw[i]) : raw[i];
      any = true;
    }
    for (size_t i = 0; i < names.size(); ++i) {
      if (out[i] == -1) {
        out[i] = 5;
      } else if (scored[i]) {
        out[i] = hi > lo ? std::llround(10.0 * (raw[i] - lo) / (hi - lo)) : 10;
      }
    }
    return out;
  }
};

Extender::Extender(ExtenderOptions options) : state_(std::make_unique<State>(options)) {}
Extender::~Extender() = default;

Status Extender::UpsertNode(const Json& node) {
  auto info = TranslateNode(node);
  std::string name;
  if (node.is_object() && node.contains("metadata") && node["metadata"].is_object() &&
      node["metadata"].contains("name") && node["metadata"]["name"].is_string())
    name = node["metadata"]["name"].get<std::string>();
  std::lock_guard<std::mutex> lock(mu_);
  if (!info.ok()) {
    if (!name.empty()) state_->SetNode(name, NodeEntry{std::nullopt, info.status().message()});
    return info.status();
  }
  state_->PutNode(std::move(*info));
  return Status::Ok();
}

void Extender::RemoveNode(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  state_->EraseNode(name);
}

Status Extender::UpsertPod(const Json& pod) {
  Status bad_annotation;
  auto p = TranslateHeldPod(pod, &bad_annotation);
  std::lock_guard<std::mutex> lock(mu_);
  if (!bad_annotation.ok()) ++state_->stats.invalid_pods;
  if (!p.ok()) {
    std::string uid;
    if (pod.is_object() && pod.contains("metadata") && pod["metadata"].is_object() &&
        pod["metadata"].contains("uid") && pod["metadata"]["uid"].is_string())
      uid = pod["metadata"]["uid"].get<std::string>();
    if (!uid.empty()) state_->ErasePod(uid);
    return p.status();
  }
  if (p->terminal() || !p->wants_gpu()) {
    state_->ErasePod(PodKey(*p));
    return Status::Ok();
  }
  state_->StorePod(std::move(*p), /*arriving=*/false);
  return bad_annotation;
}

void Extender::RemovePod(const std::string& uid) {
  std::lock_guard<std::mutex> lock(mu_);
  state_->ErasePod(uid);
}

ExtenderStats Extender::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ExtenderStats s = state_->stats;
  s.nodes = state_->nodes.size();
  s.gpu_pods = state_->pods.size();
  s.learned_tracked = state_->observed.size();
  s.mix_changes = state_->scorer->mix_changes();
  s.view_rebuilds = state_->view.rebuilds() + state_->mig_view.rebuilds();
  return s;
}

std::optional<Assignment> Extender::AssignmentOf(const std::string& uid) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = state_->pods.find(uid);
  if (it == state_->pods.end()) return std::nullopt;
  return it->second.assignment;
}

Json Extender::Filter(const Json& args) {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    return FilterLocked(args);
  } catch (const std::exception& e) {
    return Json{{"Nodes", nullptr},
                {"NodeNames", nullptr},
                {"FailedNodes", Json::object()},
                {"FailedAndUnresolvableNodes", Json::object()},
                {"Error", std::string("filter: malformed request: ") + e.what()}};
  }
}

Json Extender::Prioritize(const Json& args) {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    return PrioritizeLocked(args);
  } catch (const std::exception&) {
    return Json::array();
  }
}

struct Extender::BindRequest {
  std::string ns, name, uid, node;
  std::optional<PodRequest> looked_up;  // from lookup_pod
};

Json Extender::Bind(const Json& args, const BindFn& bind_fn) {
  auto refuse = [this](const std::string& msg) {
    std::lock_guard<std::mutex> lock(mu_);
    ++state_->stats.bind;
    ++state_->stats.bind_errors;
    return Json{{"Error", msg}};
  };
  if (Status v = ValidateExtenderRequest("bind", args); !v.ok()) return refuse(v.message());
  BindRequest req;
  req.ns = args["PodNamespace"].get<std::string>();
  req.name = args["PodName"].get<std::string>();
  req.node = args["Node"].get<std::string>();
  if (auto it = args.find("PodUID"); it != args.end() && it->is_string())
    req.uid = it->get<std::string>();
  const std::string who = req.ns + "/" + req.name;
  if (req.uid.empty()) return refuse("bind: PodUID is required to bind " + who);
  if (state_->options.lookup_pod) {
    auto obj = state_->options.lookup_pod(req.ns, req.name);
    if (!obj.ok()) return refuse("bind: cannot read pod " + who + ": " + obj.status().message());
    auto pod = TranslatePod(*obj);
    if (!pod.ok())
      return refuse("bind: pod " + who + " has an invalid GPU request: " + pod.status().message());
    req.looked_up = std::move(*pod);
  }
  std::unique_lock<std::mutex> lock(mu_);
  try {
    return BindLocked(req, bind_fn, lock);
  } catch (const std::exception& e) {
    if (!lock.owns_lock()) lock.lock();
    ++state_->stats.bind_errors;
    return Json{{"Error", std::string("bind: ") + e.what()}};
  }
}

Json Extender::Preempt(const Json& args) {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    return PreemptLocked(args);
  } catch (const std::exception&) {
    return Json{{"NodeNameToMetaVictims", Json::object()}};
  }
}

Json Extender::FilterLocked(const Json& args) {
  State& s = *state_;
  ++s.stats.filter;
  Json result = {{"Nodes", nullptr},
                 {"NodeNames", nullptr},
                 {"FailedNodes", Json::object()},
                 {"FailedAndUnresolvableNodes", Json::object()},
                 {"Error", ""}};
  if (!args.is_object() || !args.contains("Pod")) {
    result["Error"] = "filter: request has no Pod";
    return result;
  }
  const Json* items = NodeItems(args);
  if (items && s.options.trust_request_nodes)
    for (const Json& n : *items) {
      auto info = TranslateNode(n);
      if (info.ok()) {
        s.PutNode(std::move(*info));
      } else if (n.is_object() && n.contains("metadata") && n["metadata"].is_object() &&
                 n["metadata"].contains("name") && n["metadata"]["name"].is_string()) {
        s.SetNode(n["metadata"]["name"].get<std::string>(),
                  NodeEntry{std::nullopt, info.status().message()});
      }
    }
  const std::vector<std::string> names = NodeNamesOf(args);
  std::map<std::string, std::string> failed, unresolvable;
  std::set<std::string> pass;
  auto pod = TranslatePod(args["Pod"]);
  if (!pod.ok()) {
    ++s.stats.invalid_pods;
    for (const auto& n : names) unresolvable[n] = "invalid GPU request: " + pod.status().message();
  } else if (!pod->wants_gpu()) {
    pass.insert(names.begin(), names.end());
  } else {
    if (!s.options.trust_request_nodes)
      s.Observe(*pod);
    else if (pod->node_name.empty())
      s.StorePod(*pod);
    s.last_filter.fits.clear();
    s.last_filter.fits.reserve(names.size());
    for (const auto& n : names) {
      NodeFit f = s.Fit(*pod, n, {});
      s.last_filter.fits[n] = f.fits;
      if (f.fits)
        pass.insert(n);
      else
        (f.unresolvable ? unresolvable : failed)[n] = f.reason;
    }
    s.last_filter.pod = args["Pod"].dump();
    s.last_filter.generation = s.generation;
  }
  if (items) {
    Json nodes = args["Nodes"];
    Json kept = Json::array();
    for (const Json& n : *items) {
      if (!n.is_object()) continue;
      const std::string name = n.value("/metadata/name"_json_pointer, std::string());
      if (pass.count(name)) kept.push_back(n);
    }
    nodes["items"] = std::move(kept);
    result["Nodes"] = std::move(nodes);
  } else {
    Json list = Json::array();
    for (const auto& n : names)
      if (pass.count(n)) list.push_back(n);
    result["NodeNames"] = std::move(list);
  }
  result["FailedNodes"] = FailedMap(failed);
  result["FailedAndUnresolvableNodes"] = FailedMap(unresolvable);
  return result;
}

Json Extender::PrioritizeLocked(const Json& args) {
  State& s = *state_;
  ++s.stats.prioritize;
  if (const Json* items = NodeItems(args); items && s.options.trust_request_nodes)
    for (const Json& n : *items) {
      auto info = TranslateNode(n);
      if (info.ok()) s.PutNode(std::move(*info));
    }
  const std::vector<std::string> names = NodeNamesOf(args);
  std::vector<int64_t> scores(names.size(), 0);
  if (args.is_object() && args.contains("Pod")) {
    auto pod = TranslatePod(args["Pod"]);
    if (pod.ok() && pod->wants_gpu()) {
      s.Observe(*pod);
      const bool same =
          s.last_filter.generation == s.generation && s.last_filter.pod == args["Pod"].dump();
      scores = s.Scores(*pod, names, same ? &s.last_filter.fits : nullptr);
    }
  }
  Json out = Json::array();
  for (size_t i = 0; i < names.size(); ++i)
    out.push_back({{"Host", names[i]}, {"Score", scores[i]}});
  return out;
}

Json Extender::BindLocked(const BindRequest& req, const BindFn& bind_fn,
                          std::unique_lock<std::mutex>& lock) {
  State& s = *state_;
  ++s.stats.bind;
  auto fail = [&](const std::string& msg) {
    ++s.stats.bind_errors;
    return Json{{"Error", msg}};
  };
  const std::string who = req.ns + "/" + req.name;
  // The authoritative pod: the API server's when looked up, else the informer-tracked one.
  std::optional<PodRequest> pod = req.looked_up;
  if (!pod) {
    auto it = s.pods.find(req.uid);
    if (it == s.pods.end())
      return fail("bind: pod " + who + " (uid " + req.uid +
                  ") is not a pending GPU pod known "
                  "to the Tessera extender");
    pod = it->second;
  }
  if (pod->ns != req.ns || pod->name != req.name || pod->uid != req.uid)
    return fail("bind: pod " + who + " does not have uid " + req.uid);
  if (!pod->wants_gpu())
    return fail("bind: pod " + who + " requests no GPU resource managed by Tessera");
  if (!pod->node_name.empty())
    return fail("bind: pod " + who + " is already bound to " + pod->node_name);
  if (pod->deleting || pod->phase != "Pending")
    return fail("bind: pod " + who + " is not pending (phase " +
                (pod->phase.empty() ? std::string("unknown") : pod->phase) +
                (pod->deleting ? ", being deleted)" : ")"));
  if (req.looked_up) s.StorePod(*pod);
  const PodRequest& tracked = s.pods.at(req.uid);
  if (!tracked.node_name.empty() && tracked.node_name != req.node)
    return fail("bind: pod " + who + " is already bound to " + tracked.node_name);
  NodeModel model;
  NodeFit f = s.Fit(tracked, req.node, {req.uid}, &model);
  if (!f.fits) return fail("cannot bind " + who + " to " + req.node + ": " + f.reason);
  const Assignment a = ToAssignment(*s.nodes.at(req.node).info, model, tracked, f);
  std::map<std::string, std::string> annotations{{kAnnotationAssignment, EncodeAssignment(a)}};
  // The binding call runs without the lock; the pod is recorded as bound first so concurrent
  // filters see its GPUs taken, and released again if the binding fails.
  const PodRequest before = tracked;
  PodRequest bound = tracked;
  bound.node_name = req.node;
  bound.assignment = a;
  s.PutPod(req.uid, std::move(bound));
  lock.unlock();
  Status st = bind_fn(req.ns, req.name, req.uid, req.node, annotations);
  lock.lock();
  if (!st.ok()) {
    if (auto it = s.pods.find(req.uid); it != s.pods.end() && it->second.node_name == req.node)
      s.PutPod(req.uid, before);
    return fail("binding " + who + " to " + req.node + ": " + st.message());
  }
  return Json{{"Error", ""}};
}

Json Extender::PreemptLocked(const Json& args) {
  State& s = *state_;
  ++s.stats.preempt;
  Json out = {{"NodeNameToMetaVictims", Json::object()}};
  if (!args.is_object()) return out;
  // Victims per node as UIDs, from either form.
  std::map<std::string, std::pair<std::vector<std::string>, int64_t>> victims;
  for (const char* key : {"NodeNameToMetaVictims", "NodeNameToVictims"}) {
    auto it = args.find(key);
    if (it == args.end() || !it->is_object()) continue;
    for (auto n = it->begin(); n != it->end(); ++n) {
      auto& [uids, pdb] = victims[n.key()];
      if (!n->is_object()) continue;
      pdb = n->value("NumPDBViolations", int64_t{0});
      auto pods = n->find("Pods");
      if (pods == n->end() || !pods->is_array()) continue;
      for (const Json& v : *pods) {
        if (!v.is_object()) continue;
        std::string uid = v.value("UID", "");
        if (uid.empty()) uid = v.value("/metadata/uid"_json_pointer, std::string());
        if (!uid.empty()) uids.push_back(uid);
      }
    }
  }
  std::optional<PodRequest> pod;
  if (args.contains("Pod")) {
    auto p = TranslatePod(args["Pod"]);
    if (p.ok()) pod = std::move(*p);
  }
  for (auto& [node, v] : victims) {
    auto& [uids, pdb] = v;
    std::vector<std::string> chosen = uids;
    if (pod && pod->wants_gpu()) {
      std::set<std::string> exclude(uids.begin(), uids.end());
      NodeFit f = s.Fit(*pod, node, exclude);
      // Extra victims are taken only where kube-scheduler cannot see the usage (GPU shares,
      // whose resources it ignores), and never while a pod on the node is terminating: then
      // capacity is already being freed, and this view may lag kube-scheduler's (a victim it
      // saw deleted may still be listed here), so adding victims would evict twice for one pod.
      bool draining = false;
      for (const PodRequest* bp : s.BoundTo(node, {}))
        if (bp->deleting) draining = true;
      if (!f.fits && !f.unresolvable && !draining) {
        std::vector<const PodRequest*> extra;
        for (const PodRequest* bp : s.BoundTo(node, exclude))
          if (bp->priority < pod->priority && bp->gpu.is_share()) extra.push_back(bp);
        std::sort(extra.begin(), extra.end(), [](const PodRequest* a, const PodRequest* b) {
          if (a->priority != b->priority) return a->priority < b->priority;
          return a->creation_timestamp > b->creation_timestamp;
        });
        for (const PodRequest* bp : extra) {
          exclude.insert(PodKey(*bp));
          chosen.push_back(PodKey(*bp));
          f = s.Fit(*pod, node, exclude);
          if (f.fits) break;
        }
      }
      if (!f.fits) continue;
    }
    if (chosen.empty()) continue;
    Json pods = Json::array();
    for (const auto& uid : chosen) pods.push_back({{"UID", uid}});
    out["NodeNameToMetaVictims"][node] = {{"Pods", pods}, {"NumPDBViolations", pdb}};
  }
  return out;
}

}  // namespace tessera::kube
