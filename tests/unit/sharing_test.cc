// Slice ledger (cluster/gpu_slices.h), sharing-mode selector, MIG layout planner and allocator.
#include <gtest/gtest.h>

#include <bit>

#include "cluster/gpu_slices.h"
#include "core/random.h"
#include "sharing/allocator.h"
#include "sharing/mig_planner.h"
#include "sharing/selector.h"

namespace tessera {
namespace {

constexpr int64_t kGiB = 1024;

GpuModelId Model(const char* name) {
  return *GpuCatalog::Builtin().Find(name);
}

NodeSpec Node(const std::string& name, const char* model, int gpus) {
  NodeSpec s;
  s.name = name;
  s.cpu = MilliCpu(64000);
  s.memory = MiB(512 * kGiB);
  s.gpu_count = gpus;
  s.model = Model(model);
  return s;
}

SliceDemand Mem(int64_t gib, Isolation iso, int compute = 0) {
  SliceDemand d;
  d.memory_mib = gib * kGiB;
  d.isolation = iso;
  d.compute_pct = compute;
  d.cpu = MilliCpu(1000);
  d.host_memory = MiB(4 * kGiB);
  return d;
}

SliceAssignment Mps(NodeIdx n, int g, int pct, int64_t mib) {
  SliceAssignment a{SliceKind::kMps, n, GpuMask{1} << g};
  a.thread_pct = pct;
  a.memory_mib = mib;
  return a;
}

// ---- ledger ---------------------------------------------------------------------------------

TEST(SliceLedgerTest, MpsClientThreadAndMemoryLimits) {
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("a100", "A100-80GB", 1)).ok());
  SliceDemand d;
  for (WorkloadId i = 0; i < 48; ++i) ASSERT_TRUE(c.Allocate(i, d, Mps(0, 0, 1, 1024)).ok()) << i;
  Status st = c.Allocate(48, d, Mps(0, 0, 1, 1024));
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("MPS client limit 48"), std::string::npos) << st.message();
  for (WorkloadId i = 0; i < 48; ++i) ASSERT_TRUE(c.Release(i).ok());

  ASSERT_TRUE(c.Allocate(1, d, Mps(0, 0, 60, 40 * kGiB)).ok());
  st = c.Allocate(2, d, Mps(0, 0, 41, 10 * kGiB));
  EXPECT_NE(st.message().find("40% of threads free, 41% asked"), std::string::npos) << st.message();
  st = c.Allocate(2, d, Mps(0, 0, 40, 41 * kGiB));  // 80 GiB card: 40 GiB left
  EXPECT_NE(st.message().find("MiB free for MPS limits"), std::string::npos) << st.message();
  EXPECT_TRUE(c.Allocate(2, d, Mps(0, 0, 40, 40 * kGiB)).ok());
  // A time-slice replica or an exclusive claim cannot join an MPS GPU.
  SliceAssignment ts{SliceKind::kTimeSlice, 0, 1};
  EXPECT_EQ(c.Allocate(3, d, ts).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.Allocate(3, d, SliceAssignment{SliceKind::kExclusive, 0, 1}).code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(c.CheckInvariants().ok());
}

TEST(SliceLedgerTest, MpsInsideMigScalesClientLimit) {
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("a100", "A100-80GB", 1)).ok());
  const MigGeometry& g = *MigGeometryFor("A100-80GB");
  ASSERT_TRUE(c.SetMigLayout(0, 0, true, *ParseMigLayout(g, "1g.10gb@0 3g.40gb@4")).ok());
  SliceDemand d;
  auto in = [](int start, int pct, int64_t mib) {
    SliceAssignment a{SliceKind::kMigMps, 0, 1, start};
    a.thread_pct = pct;
    a.memory_mib = mib;
    return a;
  };
  // 1g: floor(48 * 1 / 7) = 6 clients; 3g: floor(48 * 3 / 7) = 20.
  for (WorkloadId i = 0; i < 6; ++i) ASSERT_TRUE(c.Allocate(i, d, in(0, 10, 1024)).ok());
  Status st = c.Allocate(6, d, in(0, 10, 1024));
  EXPECT_NE(st.message().find("MPS client limit 6"), std::string::npos) << st.message();
  for (WorkloadId i = 10; i < 30; ++i) ASSERT_TRUE(c.Allocate(i, d, in(4, 5, 1024)).ok());
  st = c.Allocate(30, d, in(4, 1, 1024));
  EXPECT_NE(st.message().find("MPS client limit 20"), std::string::npos) << st.message();
  // Memory limits inside an instance never exceed the instance's memory.
  ASSERT_TRUE(c.Release(0).ok());
  st = c.Allocate(40, d, in(0, 10, 9 * kGiB));
  EXPECT_NE(st.message().find("exceed the instance's"), std::string::npos) << st.message();
  // An instance running MPS cannot be claimed whole, and vice versa.
  EXPECT_EQ(c.Allocate(41, d, SliceAssignment{SliceKind::kMig, 0, 1, 0}).code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(c.CheckInvariants().ok());
}

TEST(SliceLedgerTest, TimeSliceIsMemoryGuarded) {
  ClusterState c(SliceLimits{48, 3});
  ASSERT_TRUE(c.AddNode(Node("t4", "T4", 1)).ok());  // 15 GiB
  SliceDemand d;
  auto ts = [](int64_t mib) {
    SliceAssignment a{SliceKind::kTimeSlice, 0, 1};
    a.memory_mib = mib;
    return a;
  };
  ASSERT_TRUE(c.Allocate(1, d, ts(8 * kGiB)).ok());
  Status st = c.Allocate(2, d, ts(8 * kGiB));
  EXPECT_NE(st.message().find("declared memory would exceed"), std::string::npos);
  ASSERT_TRUE(c.Allocate(2, d, ts(7 * kGiB)).ok());
  ASSERT_TRUE(c.Allocate(3, d, ts(0)).ok());
  st = c.Allocate(4, d, ts(0));
  EXPECT_NE(st.message().find("all 3 time-slice replicas taken"), std::string::npos);
  EXPECT_EQ(c.gpu(0, 0).mode, GpuMode::kTimeSlice);
  for (WorkloadId i = 1; i <= 3; ++i) ASSERT_TRUE(c.Release(i).ok());
  EXPECT_EQ(c.gpu(0, 0).mode, GpuMode::kIdle);
}

TEST(SliceLedgerTest, MigLayoutChangesNeverDisturbRunningWork) {
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("h100", "H100-80GB", 2)).ok());
  const MigGeometry& g = *MigGeometryFor("H100-80GB");
  auto layout = [&](const char* t) { return *ParseMigLayout(g, t); };
  ASSERT_TRUE(c.SetMigLayout(0, 0, true, layout("3g.40gb@0 2g.20gb@4 1g.10gb@6")).ok());
  EXPECT_EQ(c.reconfigurations(), 1);
  SliceDemand d;
  ASSERT_TRUE(c.Allocate(1, d, SliceAssignment{SliceKind::kMig, 0, 1, 0}).ok());
  // Destroying the busy 3g is refused; replacing the free 2g and 1g is allowed.
  auto bad = c.SetMigLayout(0, 0, true, layout("4g.40gb@0 3g.40gb@4"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("3g.40gb@0 is in use by 1 workload"), std::string::npos)
      << bad.status().message();
  auto ok = c.SetMigLayout(0, 0, true, layout("3g.40gb@0 3g.40gb@4"));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->destroy.size(), 2u);
  EXPECT_EQ(ok->create, layout("3g.40gb@4"));
  EXPECT_EQ(c.reconfigurations(), 2);
  // Disabling MIG needs the GPU idle; an exclusive GPU cannot enable MIG.
  EXPECT_EQ(c.SetMigLayout(0, 0, false, {}).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(c.Allocate(2, d, SliceAssignment{SliceKind::kExclusive, 0, 2}).ok());
  EXPECT_EQ(c.SetMigLayout(0, 1, true, layout("7g.80gb")).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.Allocate(3, d, SliceAssignment{SliceKind::kExclusive, 0, 1}).code(),
            StatusCode::kFailedPrecondition);  // MIG mode
  // T4 has no MIG.
  ASSERT_TRUE(c.AddNode(Node("t4", "T4", 1)).ok());
  EXPECT_FALSE(c.SetMigLayout(1, 0, true, {}).ok());
  EXPECT_TRUE(c.CheckInvariants().ok());
}

// Random operations never break the invariants, and a release restores the exact state.
TEST(SliceLedgerTest, RandomizedOperationsKeepInvariants) {
  ClusterState c(SliceLimits{48, 4});
  ASSERT_TRUE(c.AddNode(Node("h100", "H100-80GB", 2)).ok());
  ASSERT_TRUE(c.AddNode(Node("t4", "T4", 2)).ok());
  ASSERT_TRUE(c.AddNode(Node("a30", "A30", 1)).ok());
  Rng rng(7);
  std::vector<WorkloadId> live;
  WorkloadId next = 1;
  int allocated = 0;
  for (int step = 0; step < 4000; ++step) {
    const int op = static_cast<int>(rng.Uniform(10));
    const NodeIdx n = static_cast<NodeIdx>(rng.Uniform(c.num_nodes()));
    const int g = static_cast<int>(rng.Uniform(c.gpu_count(n)));
    if (op < 5) {
      SliceDemand d;
      d.cpu = MilliCpu(static_cast<int64_t>(rng.Uniform(8000)));
      d.host_memory = MiB(static_cast<int64_t>(rng.Uniform(64 * kGiB)));
      SliceAssignment a;
      a.node = n;
      a.kind = static_cast<SliceKind>(rng.Uniform(5));
      a.gpus = a.kind == SliceKind::kExclusive ? static_cast<GpuMask>(1 + rng.Uniform(3)) & 3
                                               : GpuMask{1} << g;
      if (c.gpu_count(n) == 1) a.gpus &= 1;
      if (a.gpus == 0) a.gpus = 1;
      a.thread_pct = static_cast<int>(rng.Uniform(60));
      a.memory_mib = static_cast<int64_t>(rng.Uniform(20 * kGiB));
      const GpuSlices& gpu = c.gpu(n, g);
      if (!gpu.instances.empty())
        a.mig_start = gpu.instances[rng.Uniform(gpu.instances.size())].instance.start;
      const auto before = c.gpu(n, g);
      const int64_t cpu_before = c.free_cpu(n);
      if (c.Allocate(next, d, a).ok()) {
        live.push_back(next);
        ++allocated;
        if (rng.Uniform(4) == 0) {  // immediate release restores the exact state
          ASSERT_TRUE(c.Release(next).ok());
          live.pop_back();
          const auto& after = c.gpu(n, g);
          ASSERT_EQ(after.mode, before.mode);
          ASSERT_EQ(after.clients, before.clients);
          ASSERT_EQ(after.memory_used, before.memory_used);
          ASSERT_EQ(after.thread_pct_used, before.thread_pct_used);
          ASSERT_EQ(after.Layout(), before.Layout());
          ASSERT_EQ(c.free_cpu(n), cpu_before);
        }
      }
      ++next;
    } else if (op < 8 && !live.empty()) {
      const size_t i = rng.Uniform(live.size());
      ASSERT_TRUE(c.Release(live[i]).ok());
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      const MigGeometry* geo = MigGeometryFor(c.spec(n).model);
      if (!geo) continue;
      const auto layouts = EnumerateMigLayouts(*geo);
      const bool enable = rng.Uniform(5) != 0;
      const MigLayout l = enable ? layouts[rng.Uniform(layouts.size())] : MigLayout{};
      const auto busy_before = c.OnGpu(n, g);
      auto r = c.SetMigLayout(n, g, enable, l);
      if (r.ok()) {
        ASSERT_EQ(c.OnGpu(n, g), busy_before);
        for (WorkloadId id : busy_before) {
          const SliceAssignment* a = c.Find(id);
          ASSERT_NE(a, nullptr);
          if (a->kind == SliceKind::kMig || a->kind == SliceKind::kMigMps) {
            ASSERT_NE(c.gpu(n, g).Instance(a->mig_start), nullptr);
          }
        }
      }
    }
    Status inv = c.CheckInvariants();
    ASSERT_TRUE(inv.ok()) << "step " << step << ": " << inv.message();
  }
  EXPECT_GT(allocated, 300);
  EXPECT_GT(c.reconfigurations(), 50);
}

// ---- selector ----------------------------------------------------------------------------------

struct SelectCase {
  const char* name;
  std::function<void(ClusterState&)> setup;
  SliceDemand demand;
  bool placed;
  SliceKind kind;
  const char* text;  // fragment of the explanation (placed) or the reason (not placed)
};

ClusterState MixedCluster() {
  ClusterState c;
  EXPECT_TRUE(c.AddNode(Node("h100-0", "H100-80GB", 2)).ok());
  EXPECT_TRUE(c.AddNode(Node("t4-0", "T4", 2)).ok());
  return c;
}

void H100Mig(ClusterState& c, const char* layout) {
  ASSERT_TRUE(
      c.SetMigLayout(0, 0, true, *ParseMigLayout(*MigGeometryFor("H100-80GB"), layout)).ok());
}

TEST(SliceSelectorTest, DecisionTable) {
  SliceDemand whole2;
  whole2.whole_gpus = 2;
  whole2.isolation = Isolation::kStrict;
  SliceDemand profile = Mem(0, Isolation::kStandard);
  profile.mig_profile = "3g.40gb";
  SliceDemand nothing;
  SliceDemand t4_only = Mem(6, Isolation::kStandard);
  t4_only.models = ModelMask{1} << Model("T4");
  SliceDemand t4_big = Mem(20, Isolation::kBestEffort);
  t4_big.models = t4_only.models;
  SliceDemand strict_t4 = Mem(4, Isolation::kStrict);
  strict_t4.models = t4_only.models;

  const SelectCase cases[] = {
      {"strict takes a free MIG instance of the right size",
       [](ClusterState& c) { H100Mig(c, "3g.40gb@0 1g.20gb@4 1g.10gb@6"); },
       Mem(14, Isolation::kStrict), true, SliceKind::kMig,
       "MIG 1g.20gb on GPU 0 of h100-0: strict isolation, 14 GiB peak"},
      {"strict never shares through MPS",
       [](ClusterState& c) {
         ASSERT_TRUE(c.Allocate(90, {}, Mps(1, 0, 10, kGiB)).ok());
         ASSERT_TRUE(c.Allocate(91, {}, Mps(1, 1, 10, kGiB)).ok());
       },
       strict_t4, false, SliceKind::kExclusive, "a free MIG instance or idle GPU"},
      {"strict on a non-MIG model gets the whole GPU", [](ClusterState&) {}, strict_t4, true,
       SliceKind::kExclusive, "exclusive 1 GPU on GPU 0 of t4-0: strict isolation"},
      {"standard joins an MPS GPU with room",
       [](ClusterState& c) { ASSERT_TRUE(c.Allocate(90, {}, Mps(1, 1, 30, 5 * kGiB)).ok()); },
       t4_only, true, SliceKind::kMps, "on GPU 1 of t4-0: standard isolation, 6 GiB peak"},
      {"best-effort packs onto a time-sliced GPU",
       [](ClusterState& c) {
         SliceAssignment a{SliceKind::kTimeSlice, 1, 2};
         a.memory_mib = 4 * kGiB;
         ASSERT_TRUE(c.Allocate(90, {}, a).ok());
       },
       [] {
         SliceDemand d = Mem(4, Isolation::kBestEffort);
         d.models = ModelMask{1} << Model("T4");
         return d;
       }(),
       true, SliceKind::kTimeSlice, "time-slice replica (4 GiB declared) on GPU 1 of t4-0"},
      {"explicit MIG profile", [](ClusterState& c) { H100Mig(c, "3g.40gb@0 3g.40gb@4"); }, profile,
       true, SliceKind::kMig, "MIG 3g.40gb"},
      {"whole GPUs are exclusive, on GPUs that cannot be partitioned first", [](ClusterState&) {},
       whole2, true, SliceKind::kExclusive, "exclusive 2 GPUs on GPUs 0,1 of t4-0"},
      {"nothing asked means one exclusive GPU", [](ClusterState&) {}, nothing, true,
       SliceKind::kExclusive, "whole GPUs requested"},
      {"a share both models serve goes to the GPU with less memory", [](ClusterState&) {},
       Mem(4, Isolation::kStandard, 10), true, SliceKind::kMps, "MPS 10% / 4 GiB on GPU 0 of t4-0"},
      {"a share only the large GPU holds goes there", [](ClusterState&) {},
       Mem(20, Isolation::kStandard, 10), true, SliceKind::kMps, "of h100-0"},
      {"memory above the card is refused with sizes", [](ClusterState&) {}, t4_big, false,
       SliceKind::kExclusive, "T4 has 15 GiB, 20 GiB needed"},
  };
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.name);
    ClusterState c = MixedCluster();
    tc.setup(c);
    SliceSelector sel;
    SliceChoice ch = sel.Select(c, tc.demand);
    ASSERT_EQ(ch.placed, tc.placed) << ch.explanation << ch.reason;
    if (tc.placed) {
      EXPECT_EQ(ch.assignment.kind, tc.kind) << ch.explanation;
      EXPECT_NE(ch.explanation.find(tc.text), std::string::npos) << ch.explanation;
      EXPECT_TRUE(c.CheckFit(tc.demand, ch.assignment).ok());
    } else {
      EXPECT_NE(ch.reason.find(tc.text), std::string::npos) << ch.reason;
    }
  }
}

TEST(SliceSelectorTest, SizingRules) {
  const GpuModelId h100 = Model("H100-80GB");
  auto s = SizeSlice(Mem(14, Isolation::kStrict), h100, SliceKind::kMig);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(MigGeometryFor(h100)->profiles[s->mig_profile].name, "1g.20gb");
  // Compute share rounds up to compute slices: 40% of 7 slices = 2.8 -> 3g.
  s = SizeSlice(Mem(8, Isolation::kStrict, 40), h100, SliceKind::kMig);
  EXPECT_EQ(MigGeometryFor(h100)->profiles[s->mig_profile].name, "3g.40gb");
  EXPECT_FALSE(SizeSlice(Mem(8, Isolation::kStrict), h100, SliceKind::kMps).ok());
  EXPECT_FALSE(SizeSlice(Mem(8, Isolation::kStandard), h100, SliceKind::kTimeSlice).ok());
  // MPS without a compute share gets threads in proportion to memory (8 of 80 GiB -> 10 %).
  s = SizeSlice(Mem(8, Isolation::kStandard), h100, SliceKind::kMps);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->thread_pct, 10);
  EXPECT_EQ(s->memory_mib, 8 * kGiB);
  // Compute without memory: memory in proportion (25 % of a 15 GiB T4).
  SliceDemand c;
  c.compute_pct = 25;
  EXPECT_EQ(EffectiveMemoryMib(c, Model("T4")), 15360 / 4);
}

// Whatever the cluster state, a choice satisfies the isolation class and guarantees memory.
TEST(SliceSelectorTest, NeverViolatesIsolationOrMemory) {
  ClusterState c(SliceLimits{48, 4});
  ASSERT_TRUE(c.AddNode(Node("h100", "H100-80GB", 4)).ok());
  ASSERT_TRUE(c.AddNode(Node("a100", "A100-40GB", 2)).ok());
  ASSERT_TRUE(c.AddNode(Node("t4", "T4", 4)).ok());
  SharingAllocator alloc;
  Rng rng(11);
  int placed = 0;
  std::vector<WorkloadId> live;
  for (WorkloadId id = 1; id < 600; ++id) {
    SliceDemand d;
    const int shape = static_cast<int>(rng.Uniform(10));
    d.isolation = static_cast<Isolation>(rng.Uniform(3));
    if (shape == 0)
      d.whole_gpus = 1 + static_cast<int>(rng.Uniform(2));
    else
      d.memory_mib = static_cast<int64_t>(1 + rng.Uniform(30)) * kGiB;
    if (shape == 1) d.compute_pct = static_cast<int>(5 + rng.Uniform(60));
    d.cpu = MilliCpu(500);
    alloc.Observe(d);
    PlaceOutcome o = alloc.Place(c, id, d);
    if (o.placed) {
      ++placed;
      ASSERT_TRUE(SliceKindSatisfies(o.assignment.kind, d.isolation)) << o.explanation;
      const GpuSlices& gpu = c.gpu(o.assignment.node, std::countr_zero(o.assignment.gpus));
      int64_t guaranteed = 0;
      switch (o.assignment.kind) {
        case SliceKind::kExclusive:
          guaranteed = gpu.memory_mib;
          break;
        case SliceKind::kMig:
          guaranteed = gpu.Instance(o.assignment.mig_start)->memory_mib;
          break;
        default:
          guaranteed = o.assignment.memory_mib;
      }
      ASSERT_GE(guaranteed, d.memory_mib) << o.explanation;
    } else {
      ASSERT_FALSE(o.reason.empty());
      alloc.Forget(id);  // never retried: a reservation it made ends
    }
    if (o.placed) live.push_back(id);
    if (rng.Uniform(2) == 0 && !live.empty()) {
      const size_t i = rng.Uniform(live.size());
      ASSERT_TRUE(c.Release(live[i]).ok());
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    ASSERT_TRUE(c.CheckInvariants().ok());
  }
  EXPECT_GT(placed, 300);
}

// A multi-GPU demand that does not fit reserves the node that drains first: other work goes
// elsewhere until the demand is placed or forgotten.
TEST(SharingAllocatorTest, MultiGpuDemandsReserveANodeUntilPlacedOrForgotten) {
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("busy", "L4", 2)).ok());
  ASSERT_TRUE(c.AddNode(Node("quiet", "L4", 2)).ok());
  SharingAllocator alloc;
  SliceDemand small = Mem(4, Isolation::kStandard);
  small.cpu = MilliCpu(500);
  // busy: one small client on each GPU; quiet: one small client.
  ASSERT_TRUE(c.Allocate(1, small, {SliceKind::kMps, 0, 0b01, -1, 10, 4 * kGiB}).ok());
  ASSERT_TRUE(c.Allocate(2, small, {SliceKind::kMps, 0, 0b10, -1, 10, 4 * kGiB}).ok());
  ASSERT_TRUE(c.Allocate(3, small, {SliceKind::kMps, 1, 0b01, -1, 10, 4 * kGiB}).ok());
  SliceDemand pair;
  pair.whole_gpus = 2;
  pair.isolation = Isolation::kStrict;
  EXPECT_FALSE(alloc.Place(c, 10, pair).placed);
  EXPECT_EQ(alloc.reserved_nodes(), 1u);
  // A small demand would prefer quiet's shared GPU 0; quiet is reserved, so it goes to busy.
  PlaceOutcome o = alloc.Place(c, 11, small);
  ASSERT_TRUE(o.placed) << o.reason;
  EXPECT_EQ(o.assignment.node, 0u) << o.explanation;
  // quiet drains: the pair is placed there and the reservation ends.
  ASSERT_TRUE(c.Release(3).ok());
  o = alloc.Place(c, 10, pair);
  ASSERT_TRUE(o.placed) << o.reason;
  EXPECT_EQ(o.assignment.node, 1u);
  EXPECT_EQ(alloc.reserved_nodes(), 0u);
  // A demand that gives up releases its reservation.
  SliceDemand four;
  four.whole_gpus = 2;
  four.isolation = Isolation::kStrict;
  EXPECT_FALSE(alloc.Place(c, 20, four).placed);
  EXPECT_EQ(alloc.reserved_nodes(), 1u);
  alloc.Forget(20);
  EXPECT_EQ(alloc.reserved_nodes(), 0u);
  EXPECT_TRUE(c.CheckInvariants().ok());
}

// ---- planner -----------------------------------------------------------------------------------

TEST(MigPlannerTest, ReplansOnlyFreeInstances) {
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("h100", "H100-80GB", 1)).ok());
  H100Mig(c, "3g.40gb@0 2g.20gb@4 1g.10gb@6");
  ASSERT_TRUE(c.Allocate(1, {}, SliceAssignment{SliceKind::kMig, 0, 1, 0}).ok());
  ASSERT_TRUE(c.Allocate(2, {}, SliceAssignment{SliceKind::kMig, 0, 1, 6}).ok());
  MigPlanner planner;
  // A 1g.20gb (14 GiB) can replace the free 2g.20gb@4 without touching the busy instances.
  auto r = planner.PlanFor(c, Mem(14, Isolation::kStrict));
  ASSERT_TRUE(r.ok()) << r.status().message();
  const MigGeometry& g = *MigGeometryFor("H100-80GB");
  const MigLayout busy_instances = *ParseMigLayout(g, "3g.40gb@0 1g.10gb@6");
  for (const auto& busy : busy_instances)
    EXPECT_NE(std::find(r->after.begin(), r->after.end(), busy), r->after.end());
  EXPECT_EQ(MigLayoutString(g, r->diff.destroy), "2g.20gb@4");
  EXPECT_NE(r->reason.find("create 1g.20gb"), std::string::npos) << r->reason;
  // A second 3g would need slices 4-7, where a busy 1g sits: no plan.
  auto none = planner.PlanFor(c, Mem(30, Isolation::kStrict));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("hold running instances in the way"), std::string::npos);
}

TEST(MigPlannerTest, EnablesMigOnlyOnIdleGpusAndShapesForTheMix) {
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("h100", "H100-80GB", 2)).ok());
  ASSERT_TRUE(c.Allocate(1, {}, Mps(0, 0, 10, kGiB)).ok());
  MigPlanner planner;
  for (int i = 0; i < 10; ++i) planner.Observe(Mem(30, Isolation::kStrict));  // 3g mix
  auto r = planner.PlanFor(c, Mem(30, Isolation::kStrict));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->gpu, 1);  // GPU 0 runs MPS
  EXPECT_FALSE(r->mig_before);
  EXPECT_EQ(MigLayoutString(*MigGeometryFor("H100-80GB"), r->after), "3g.40gb@0 3g.40gb@4");
  // The mig-parted config and diff after applying it.
  ASSERT_TRUE(c.SetMigLayout(r->node, r->gpu, true, r->after).ok());
  EXPECT_EQ(MigPartedConfig(c, 0, "tessera"),
            "version: v1\nmig-configs:\n  tessera:\n    - devices: [0]\n      mig-enabled: false\n"
            "    - devices: [1]\n      mig-enabled: true\n      mig-devices:\n"
            "        \"3g.40gb\": 2\n");
  EXPECT_EQ(MigDiffText(c, *r),
            "h100 GPU 1: enable MIG mode\nh100 GPU 1: create 3g.40gb@0\nh100 GPU 1: create "
            "3g.40gb@4\n");
}

TEST(MigPlannerTest, WholeGpuDemandDisablesEmptyMigGpus) {
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("h100", "H100-80GB", 2)).ok());
  H100Mig(c, "7g.80gb");
  ASSERT_TRUE(
      c.SetMigLayout(0, 1, true, *ParseMigLayout(*MigGeometryFor("H100-80GB"), "7g.80gb")).ok());
  ASSERT_TRUE(c.Allocate(1, {}, SliceAssignment{SliceKind::kMig, 0, 2, 0}).ok());
  SliceDemand d;
  d.whole_gpus = 1;
  SharingAllocator alloc;
  PlaceOutcome o = alloc.Place(c, 2, d);
  ASSERT_TRUE(o.placed) << o.reason;
  ASSERT_EQ(o.reconfigs.size(), 1u);
  EXPECT_EQ(o.reconfigs[0].gpu, 0);  // GPU 1 is busy
  EXPECT_FALSE(o.reconfigs[0].mig_after);
  EXPECT_EQ(o.assignment.kind, SliceKind::kExclusive);
  d.whole_gpus = 2;
  EXPECT_FALSE(alloc.Place(c, 3, d).placed);
}

TEST(SharingAllocatorTest, CarvesMigForStrictSlicesInsteadOfWholeGpus) {
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("h100", "H100-80GB", 1)).ok());
  SharingAllocator alloc;
  int placed = 0;
  for (WorkloadId id = 1; id <= 7; ++id) {
    SliceDemand d = Mem(8, Isolation::kStrict);
    alloc.Observe(d);
    PlaceOutcome o = alloc.Place(c, id, d);
    placed += o.placed;
    if (o.placed) {
      EXPECT_EQ(o.assignment.kind, SliceKind::kMig) << o.explanation;
    }
  }
  EXPECT_EQ(placed, 7);  // seven 1g.10gb on one H100, where exclusive places one
  EXPECT_EQ(c.reconfigurations(), 1);
  PlaceOutcome o = alloc.Place(c, 8, Mem(8, Isolation::kStrict));
  EXPECT_FALSE(o.placed);
  EXPECT_EQ(c.reconfigurations(), 1);  // a failed placement changes nothing
}

}  // namespace
}  // namespace tessera
