#include "kube/extender_view.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "tests/kube/test_objects.h"

namespace tessera::kube {
namespace {

using kubetest::GpuNodeJson;
using kubetest::MigNodeJson;

NodeInfo Translated(const Json& node) {
  auto info = TranslateNode(node);
  EXPECT_TRUE(info.ok()) << info.status().message();
  return *info;
}

// A running pod bound to `node`, asking `gpus` whole GPUs; `assignment` set: the GPUs it names.
PodRequest BoundPod(const std::string& uid, const std::string& node, int gpus,
                    std::optional<Assignment> assignment) {
  Json ann = Json::object();
  if (assignment) ann[kAnnotationAssignment] = EncodeAssignment(*assignment);
  const Json pod = {
      {"metadata", {{"name", uid}, {"namespace", "ml"}, {"uid", uid}, {"annotations", ann}}},
      {"spec",
       {{"nodeName", node},
        {"containers", Json::array({{{"name", "main"},
                                     {"resources",
                                      {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}},
                                       {"requests", {{"cpu", "6"}, {"memory", "40Gi"}}}}}}})}}},
      {"status", {{"phase", "Running"}}}};
  auto p = TranslatePod(pod);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

// Every node's free CPU, memory and per-GPU milli-GPU in `v`, by name.
std::map<std::string, std::vector<int64_t>> FreeByNode(const EngineView& v,
                                                       const std::map<std::string, NodeEntry>& n) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& [name, e] : n) {
    auto idx = v.Find(name);
    if (!idx) continue;
    const NodeFree& f = v.state().free(*idx);
    std::vector<int64_t> row{f.cpu, f.memory};
    for (int g = 0; g < f.gpu_count; ++g) row.push_back(f.gpu[g]);
    out[name] = std::move(row);
  }
  return out;
}

// The view kept current by node and pod events always equals a view built afresh from the same
// nodes and pods. Pod events and node updates that keep the spec rebuild one node only; a spec
// change or a removal rebuilds the whole view.
TEST(EngineViewTest, EventsKeepItEqualToAViewBuiltAfresh) {
  std::map<std::string, NodeEntry> nodes;
  std::map<std::string, PodRequest> pods;
  const EngineView::BoundFn bound = [&](const std::string& node) {
    std::vector<const PodRequest*> out;
    for (const auto& [uid, p] : pods)
      if (p.node_name == node) out.push_back(&p);
    return out;
  };
  EngineView view(/*mig_open=*/false), mig_view(/*mig_open=*/true);
  auto set_node = [&](const NodeInfo& info) {
    const std::string name = info.spec.name;
    std::optional<NodeEntry> before;
    if (nodes.count(name)) before = nodes[name];
    nodes[name] = NodeEntry{info, ""};
    const NodeInfo* b = before && before->info ? &*before->info : nullptr;
    view.NodeChanged(name, b, &*nodes[name].info);
    mig_view.NodeChanged(name, b, &*nodes[name].info);
  };
  for (int i = 0; i < 3; ++i) set_node(Translated(GpuNodeJson("h100-" + std::to_string(i), 8)));
  set_node(Translated(GpuNodeJson("t4-0", 4, "T4")));
  set_node(Translated(MigNodeJson("a100-0", {"3g.40gb@0 3g.40gb@4", "", "", ""})));
  set_node(Translated(GpuNodeJson("cpu-0", 0)));

  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  int64_t expected_rebuilds = 1;
  bool removed = false;
  int next_uid = 0;
  for (int step = 0; step < 400; ++step) {
    std::vector<std::string> names;
    for (const auto& [name, e] : nodes) names.push_back(name);
    const std::string node = names[pick(static_cast<int>(names.size()))];
    const int action = pick(10);
    if (action < 5) {  // bind a pod, with or without the GPUs named
      const int gpus = 1 + pick(2);
      std::optional<Assignment> a;
      const int count = nodes[node].info->spec.gpu_count;
      if (count > 0 && pick(2) == 0) {
        a = Assignment{node, AssignmentKind::kExclusive, {pick(count)}, {}, "", 0, 0, 0};
        if (pick(2) == 0) {
          a->kind = AssignmentKind::kShare;
          a->gpu_milli = 250 * (1 + pick(3));
        }
      }
      const std::string uid = "p" + std::to_string(next_uid++);
      pods[uid] = BoundPod(uid, node, a && a->kind == AssignmentKind::kShare ? 1 : gpus, a);
      view.PodsChanged(node);
      mig_view.PodsChanged(node);
    } else if (action < 8 && !pods.empty()) {  // a pod ends
      auto it = std::next(pods.begin(), pick(static_cast<int>(pods.size())));
      view.PodsChanged(it->second.node_name);
      mig_view.PodsChanged(it->second.node_name);
      pods.erase(it);
    } else if (action < 9) {  // a GPU turns unhealthy or recovers: same spec
      NodeInfo info = *nodes[node].info;
      if (info.spec.gpu_count > 0) info.unhealthy ^= GpuMask{1} << pick(info.spec.gpu_count);
      set_node(info);
    } else if (!removed && step > 200) {  // a node leaves: the whole view is rebuilt
      const std::string gone = "h100-2";
      view.NodeChanged(gone, &*nodes[gone].info, nullptr);
      mig_view.NodeChanged(gone, &*nodes[gone].info, nullptr);
      nodes.erase(gone);
      for (auto it = pods.begin(); it != pods.end();)
        it = it->second.node_name == gone ? pods.erase(it) : std::next(it);
      removed = true;
      ++expected_rebuilds;
    }
    if (step == 100 || step == 300) {  // allocatable CPU changes: the whole view is rebuilt
      NodeInfo info = *nodes["h100-0"].info;
      info.spec.cpu = MilliCpu(info.spec.cpu.v + 1000);
      set_node(info);
      ++expected_rebuilds;
    }
    for (EngineView* v : {&view, &mig_view}) {
      v->Refresh(nodes, bound);
      EngineView fresh(v == &mig_view);
      fresh.Refresh(nodes, bound);
      ASSERT_EQ(FreeByNode(*v, nodes), FreeByNode(fresh, nodes)) << "step " << step;
      ASSERT_TRUE(v->state().CheckInvariants().ok());
    }
    ASSERT_EQ(view.rebuilds(), expected_rebuilds) << "step " << step;
  }
  EXPECT_TRUE(removed);
  EXPECT_EQ(expected_rebuilds, 4);
  // The node without GPUs is not in the view; MIG-enabled GPUs are blocked unless it is open.
  EXPECT_FALSE(view.Find("cpu-0").has_value());
  ASSERT_TRUE(view.Find("a100-0").has_value());
}

// Bound pods hold what their assignments name even where the node's inventory does not show
// it: a MIG instance on a GPU reported with MIG off, a whole GPU reported with MIG on.
TEST(BuildNodeModelTest, AssignmentsWinOverAnInventoryThatOmitsThem) {
  const NodeInfo info = Translated(MigNodeJson("a100-0", {"", "3g.40gb@0 3g.40gb@4", ""}));
  auto bound = [](const std::string& uid, const Json& limits, const std::string& assignment) {
    const Json pod = {
        {"metadata",
         {{"name", uid},
          {"namespace", "ml"},
          {"uid", uid},
          {"annotations", {{kAnnotationAssignment, assignment}}}}},
        {"spec",
         {{"nodeName", "a100-0"},
          {"containers", Json::array({{{"name", "main"},
                                       {"resources",
                                        {{"limits", limits},
                                         {"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}})}}},
        {"status", {{"phase", "Running"}}}};
    auto p = TranslatePod(pod);
    EXPECT_TRUE(p.ok()) << p.status().message();
    return *p;
  };
  const PodRequest mig =
      bound("mig", {{"nvidia.com/mig-1g.10gb", "1"}},
            R"({"node":"a100-0","kind":"mig","gpus":[0],"mig_instance":"1g.10gb@0"})");
  const PodRequest whole = bound("whole", {{"nvidia.com/gpu", "1"}},
                                 R"({"node":"a100-0","kind":"exclusive","gpus":[1]})");
  auto m = BuildNodeModel(info, {&mig, &whole}, SliceSelector());
  ASSERT_TRUE(m.ok()) << m.status().message();
  const GpuSlices& g0 = m->cluster.gpu(0, 0);
  ASSERT_TRUE(g0.mig_enabled());
  const MigSlot* slot = g0.Instance(0);
  ASSERT_NE(slot, nullptr);
  EXPECT_EQ(slot->use, MigSlot::Use::kWhole);
  const GpuSlices& g1 = m->cluster.gpu(0, 1);
  EXPECT_FALSE(g1.mig_enabled());
  EXPECT_EQ(g1.clients, 1);
  EXPECT_EQ(m->cluster.gpu(0, 2).clients, 0);  // the one GPU left for others
  EXPECT_TRUE(m->cluster.CheckInvariants().ok());
}

// A pod keeps the GPU that turned unhealthy under it; the unhealthy GPU takes nothing new, in the
// single-node model and in the fleet view alike.
TEST(BuildNodeModelTest, APodKeepsTheGpuThatTurnedUnhealthyUnderIt) {
  NodeInfo info = Translated(MigNodeJson("a100-0", {"", "", ""}));
  info.unhealthy = GpuMask{1} << 1;
  const Json pod = {
      {"metadata",
       {{"name", "p"},
        {"namespace", "ml"},
        {"uid", "p"},
        {"annotations",
         {{kAnnotationAssignment, R"({"node":"a100-0","kind":"exclusive","gpus":[1]})"}}}}},
      {"spec",
       {{"nodeName", "a100-0"},
        {"containers", Json::array({{{"name", "main"},
                                     {"resources",
                                      {{"limits", {{"nvidia.com/gpu", "1"}}},
                                       {"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}})}}},
      {"status", {{"phase", "Running"}}}};
  auto p = TranslatePod(pod);
  ASSERT_TRUE(p.ok()) << p.status().message();
  auto m = BuildNodeModel(info, {&*p}, SliceSelector());
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->cluster.gpu(0, 1).clients, 1);  // on the GPU it was given
  EXPECT_TRUE(m->cluster.gpu(0, 1).blocked);
  EXPECT_EQ(m->cluster.gpu(0, 0).clients, 0);
  EXPECT_EQ(m->cluster.gpu(0, 2).clients, 0);
  EXPECT_TRUE(m->cluster.CheckInvariants().ok());

  std::map<std::string, NodeEntry> nodes;
  nodes["a100-0"] = NodeEntry{info, ""};
  const EngineView::BoundFn bound = [&](const std::string&) {
    return std::vector<const PodRequest*>{&*p};
  };
  EngineView view(false);
  view.Refresh(nodes, bound);
  const NodeIdx n = *view.Find("a100-0");
  EXPECT_EQ(view.state().gpu(n, 1).clients, 1);
  const NodeFree& f = view.state().free(n);
  EXPECT_EQ(std::vector<int>(f.gpu.begin(), f.gpu.begin() + 3), std::vector<int>({1000, 0, 1000}));
  EXPECT_TRUE(view.state().CheckInvariants().ok());
}

// A MIG-enabled GPU is held in the view for pods that do not ask for a MIG instance, and free
// in the open view; an unhealthy GPU is held in both.
TEST(EngineViewTest, BlocksWhatThePodCannotUse) {
  std::map<std::string, NodeEntry> nodes;
  NodeInfo info = Translated(MigNodeJson("a100-0", {"3g.40gb@0 3g.40gb@4", "", ""}));
  info.unhealthy = GpuMask{1} << 2;
  nodes["a100-0"] = NodeEntry{info, ""};
  const EngineView::BoundFn none = [](const std::string&) {
    return std::vector<const PodRequest*>{};
  };
  EngineView closed(false), open(true);
  closed.Refresh(nodes, none);
  open.Refresh(nodes, none);
  const NodeFree& c = closed.state().free(*closed.Find("a100-0"));
  const NodeFree& o = open.state().free(*open.Find("a100-0"));
  EXPECT_EQ(std::vector<int>(c.gpu.begin(), c.gpu.begin() + 3), std::vector<int>({0, 1000, 0}));
  EXPECT_EQ(std::vector<int>(o.gpu.begin(), o.gpu.begin() + 3), std::vector<int>({1000, 1000, 0}));
}

}  // namespace
}  // namespace tessera::kube
