// The one ledger: whole GPUs, milli-GPU shares, MPS, time-slice and MIG slices in one
// ClusterState, with the compact NodeFree view derived from the slice state.
#include <gtest/gtest.h>

#include <bit>
#include <string>
#include <vector>

#include "cluster/cluster_state.h"
#include "core/random.h"

namespace tessera {
namespace {

GpuModelId Model(const char* name) {
  auto id = GpuCatalog::Builtin().Find(name);
  if (!id) ADD_FAILURE() << "model " << name << " missing from the catalog";
  return id.value_or(0);
}

// Uniform integer in [lo, hi].
int64_t Pick(Rng& rng, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(rng.Uniform(static_cast<uint64_t>(hi - lo + 1)));
}

ClusterState OneNode(int gpus = 4, const char* model = "A100-80GB") {
  ClusterState c;
  NodeSpec s;
  s.name = "n0";
  s.cpu = MilliCpu(64000);
  s.memory = MiB(512 * 1024);
  s.gpu_count = gpus;
  s.model = Model(model);
  EXPECT_TRUE(c.AddNode(s).ok());
  return c;
}

Demand Whole(int n) {
  return Demand{MilliCpu(1000), MiB(1024), n, 1000, 0};
}
Demand Share(int milli) {
  return Demand{MilliCpu(500), MiB(512), 1, milli, 0};
}
SliceAssignment Mps(int g, int pct, int64_t mib) {
  return SliceAssignment{SliceKind::kMps, 0, GpuMask{1} << g, -1, pct, mib};
}
SliceAssignment TimeSlice(int g, int64_t mib) {
  return SliceAssignment{SliceKind::kTimeSlice, 0, GpuMask{1} << g, -1, 0, mib};
}
SliceAssignment MigAt(int g, int start) {
  return SliceAssignment{SliceKind::kMig, 0, GpuMask{1} << g, start, 0, 0};
}
SliceDemand Host() {
  SliceDemand d;
  d.cpu = MilliCpu(1000);
  d.host_memory = MiB(2048);
  return d;
}
int ProfileOf(const char* name) {
  const MigGeometry* geo = MigGeometryFor(Model("A100-80GB"));
  for (size_t i = 0; i < geo->profiles.size(); ++i)
    if (geo->profiles[i].name == name) return static_cast<int>(i);
  ADD_FAILURE() << "no profile " << name;
  return 0;
}

TEST(UnifiedLedgerTest, SharesAndWholeGpusAreSlicesOfTheirOwnMode) {
  ClusterState c = OneNode();
  ASSERT_TRUE(c.Allocate(1, Share(300), Placement{0, 0b0001}).ok());
  EXPECT_EQ(c.gpu(0, 0).mode, GpuMode::kShare);
  EXPECT_EQ(c.gpu(0, 0).milli_used, 300);
  EXPECT_EQ(c.free(0).gpu[0], 700);
  ASSERT_NE(c.Find(1), nullptr);
  EXPECT_EQ(c.Find(1)->kind, SliceKind::kShare);
  EXPECT_EQ(c.Find(1)->gpu_milli, 300);

  ASSERT_TRUE(c.Allocate(2, Whole(2), Placement{0, 0b0110}).ok());
  EXPECT_EQ(c.gpu(0, 1).mode, GpuMode::kExclusive);
  EXPECT_EQ(c.Find(2)->kind, SliceKind::kExclusive);
  EXPECT_EQ(c.free(0).gpu_total, 700 + 1000);
  EXPECT_EQ(c.gpu_allocated_milli(), 2300);
  EXPECT_EQ(c.free(0).shape_pods[0], 1);
  EXPECT_EQ(c.free(0).shape_pods[2], 1);
  EXPECT_TRUE(c.CheckInvariants().ok()) << c.CheckInvariants().message();

  // An MPS client cannot join a GPU in share mode, nor a share an MPS GPU.
  EXPECT_EQ(c.CheckFit(Host(), Mps(0, 20, 8000)).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(c.Allocate(3, Host(), Mps(3, 40, 20000)).ok());
  EXPECT_EQ(c.free(0).gpu[3], 0);
  EXPECT_EQ(c.gpu_allocated_milli(), 2300 + 400);
  EXPECT_FALSE(c.CheckFit(0, Share(100), 0b1000).ok());
  EXPECT_TRUE(c.CheckInvariants().ok()) << c.CheckInvariants().message();

  // Releasing the last client returns the GPU to idle and to the whole/share capacity.
  ASSERT_TRUE(c.Release(3).ok());
  EXPECT_EQ(c.gpu(0, 3).mode, GpuMode::kIdle);
  EXPECT_EQ(c.free(0).gpu[3], 1000);
  ASSERT_TRUE(c.Release(1).ok());
  ASSERT_TRUE(c.Release(2).ok());
  EXPECT_EQ(c.free(0).gpu_total, 4000);
  EXPECT_EQ(c.gpu_allocated_milli(), 0);
  EXPECT_TRUE(c.CheckInvariants().ok());
}

TEST(UnifiedLedgerTest, MigGpusOfferNoWholeOrShareCapacityAndCountUsedInstances) {
  ClusterState c = OneNode(2);
  const MigLayout layout = {
      {ProfileOf("3g.40gb"), 0}, {ProfileOf("2g.20gb"), 4}, {ProfileOf("1g.10gb"), 6}};
  ASSERT_TRUE(c.SetMigLayout(0, 0, true, layout).ok());
  EXPECT_EQ(c.free(0).gpu[0], 0);
  EXPECT_EQ(c.free(0).gpu_total, 1000);
  EXPECT_EQ(c.gpu_allocated_milli(), 0);  // free instances are not allocated
  EXPECT_FALSE(c.CheckFit(0, Whole(1), 0b01).ok());
  EXPECT_FALSE(c.CheckFit(0, Share(100), 0b01).ok());

  ASSERT_TRUE(c.Allocate(7, Host(), MigAt(0, 0)).ok());
  EXPECT_EQ(c.gpu_allocated_milli(), 1000 * 3 / 7);
  EXPECT_EQ(c.free(0).shape_pods[0], 1);
  // A busy instance blocks a layout that destroys it; switching MIG off needs the GPU idle.
  EXPECT_EQ(c.SetMigLayout(0, 0, true, {}).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.SetMigLayout(0, 0, false, {}).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(c.Release(7).ok());
  ASSERT_TRUE(c.SetMigLayout(0, 0, false, {}).ok());
  EXPECT_EQ(c.free(0).gpu[0], 1000);
  EXPECT_EQ(c.free(0).gpu_total, 2000);
  EXPECT_TRUE(c.CheckInvariants().ok()) << c.CheckInvariants().message();
}

// ConformGpu: a GPU is made to hold an instance a workload holds although the layout does not
// show it, keeping busy instances and the free ones that still fit; never through busy work.
TEST(UnifiedLedgerTest, ConformGpuAddsTheInstanceAndDropsOnlyFreeOnesInItsWay) {
  ClusterState c = OneNode(2);
  const MigInstance one_at_0{ProfileOf("1g.10gb"), 0};
  // MIG off and idle: MIG on with the one instance.
  auto r = c.ConformGpu(0, 0, one_at_0);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(*r);
  EXPECT_EQ(c.gpu(0, 0).Layout(), MigLayout{one_at_0});
  EXPECT_FALSE(*c.ConformGpu(0, 0, one_at_0));  // already there
  // A free 3g.40gb@4 stays beside a new 1g.10gb@1; a free 4g.40gb@0 would overlap and goes.
  ASSERT_TRUE(
      c.SetMigLayout(0, 1, true, {{ProfileOf("4g.40gb"), 0}, {ProfileOf("3g.40gb"), 4}}).ok());
  ASSERT_TRUE(*c.ConformGpu(0, 1, MigInstance{ProfileOf("1g.10gb"), 1}));
  EXPECT_EQ(c.gpu(0, 1).Layout(),
            (MigLayout{{ProfileOf("1g.10gb"), 1}, {ProfileOf("3g.40gb"), 4}}));
  // Busy work in the way: refused, nothing changes.
  ASSERT_TRUE(c.Allocate(7, Host(), MigAt(1, 4)).ok());
  EXPECT_FALSE(c.ConformGpu(0, 1, MigInstance{ProfileOf("2g.20gb"), 4}).ok());
  EXPECT_FALSE(c.ConformGpu(0, 1, std::nullopt).ok());
  EXPECT_EQ(c.gpu(0, 1).Layout(),
            (MigLayout{{ProfileOf("1g.10gb"), 1}, {ProfileOf("3g.40gb"), 4}}));
  // Free instances in the way go; the busy one stays.
  ASSERT_TRUE(*c.ConformGpu(0, 1, MigInstance{ProfileOf("4g.40gb"), 0}));
  EXPECT_EQ(c.gpu(0, 1).Layout(),
            (MigLayout{{ProfileOf("4g.40gb"), 0}, {ProfileOf("3g.40gb"), 4}}));
  // No instance: MIG off, if nothing is in use.
  EXPECT_TRUE(*c.ConformGpu(0, 0, std::nullopt));
  EXPECT_FALSE(c.gpu(0, 0).mig_enabled());
  EXPECT_FALSE(*c.ConformGpu(0, 0, std::nullopt));
  EXPECT_TRUE(c.CheckInvariants().ok()) << c.CheckInvariants().message();
}

struct KindCase {
  const char* name;
  SliceAssignment a;
  StatusCode want;
};

class SliceFitOnShareGpuTest : public testing::TestWithParam<KindCase> {};

// GPU 0 holds a 400 milli share: only more shares (up to 1000) fit there.
TEST_P(SliceFitOnShareGpuTest, OnlySharesJoinASharedGpu) {
  ClusterState c = OneNode(2);
  ASSERT_TRUE(c.Allocate(1, Share(400), Placement{0, 0b01}).ok());
  const KindCase& k = GetParam();
  EXPECT_EQ(c.CheckFit(Host(), k.a).code(), k.want) << c.CheckFit(Host(), k.a).message();
}

SliceAssignment ShareSlice(int milli) {
  SliceAssignment a{SliceKind::kShare, 0, 0b01, -1, 0, 0};
  a.gpu_milli = milli;
  return a;
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, SliceFitOnShareGpuTest,
    testing::Values(KindCase{"share600", ShareSlice(600), StatusCode::kOk},
                    KindCase{"share601", ShareSlice(601), StatusCode::kResourceExhausted},
                    KindCase{"share0", ShareSlice(0), StatusCode::kInvalidArgument},
                    KindCase{"exclusive",
                             {SliceKind::kExclusive, 0, 0b01, -1, 0, 0},
                             StatusCode::kResourceExhausted},
                    KindCase{"mps", Mps(0, 10, 1000), StatusCode::kFailedPrecondition},
                    KindCase{"timeslice", TimeSlice(0, 1000), StatusCode::kFailedPrecondition},
                    KindCase{"mig", MigAt(0, 0), StatusCode::kFailedPrecondition}),
    [](const auto& info) { return std::string(info.param.name); });

// Random mixes of every kind, with layout changes: invariants hold after every step and
// releasing everything restores the node exactly.
TEST(UnifiedLedgerRandomizedTest, InvariantsHoldAcrossEveryKind) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    ClusterState c = OneNode(4);
    const NodeFree initial = c.free(0);
    std::vector<WorkloadId> live;
    WorkloadId next = 1;
    const MigLayout layouts[] = {
        {{ProfileOf("1g.10gb"), 0}, {ProfileOf("1g.10gb"), 1}, {ProfileOf("3g.40gb"), 4}},
        {{ProfileOf("7g.80gb"), 0}},
        {}};
    for (int step = 0; step < 300; ++step) {
      const int g = static_cast<int>(Pick(rng, 0, 3));
      const int op = static_cast<int>(Pick(rng, 0, 7));
      Status st;
      const WorkloadId id = next++;
      switch (op) {
        case 0:
          st = c.Allocate(id, Whole(1), Placement{0, GpuMask{1} << g});
          break;
        case 1:
          st = c.Allocate(id, Share(static_cast<int>(Pick(rng, 1, 999))),
                          Placement{0, GpuMask{1} << g});
          break;
        case 2:
          st = c.Allocate(id, Host(),
                          Mps(g, static_cast<int>(Pick(rng, 1, 60)), Pick(rng, 1, 40000)));
          break;
        case 3:
          st = c.Allocate(id, Host(), TimeSlice(g, Pick(rng, 0, 40000)));
          break;
        case 4: {
          const auto& l = layouts[Pick(rng, 0, 2)];
          (void)c.SetMigLayout(0, g, !l.empty(), l);
          st = InvalidArgument("not an allocation");
          break;
        }
        case 5: {
          const GpuSlices& gpu = c.gpu(0, g);
          const int start =
              gpu.instances.empty()
                  ? 0
                  : gpu.instances[Pick(rng, 0, gpu.instances.size() - 1)].instance.start;
          st = c.Allocate(id, Host(), MigAt(g, start));
          break;
        }
        default:
          if (!live.empty()) {
            const size_t i = Pick(rng, 0, live.size() - 1);
            ASSERT_TRUE(c.Release(live[i]).ok());
            live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
          }
          st = InvalidArgument("not an allocation");
      }
      if (st.ok()) live.push_back(id);
      const Status inv = c.CheckInvariants();
      ASSERT_TRUE(inv.ok()) << "seed " << seed << " step " << step << ": " << inv.message();
    }
    for (WorkloadId id : live) ASSERT_TRUE(c.Release(id).ok());
    for (int g = 0; g < 4; ++g) {
      const GpuSlices& gpu = c.gpu(0, g);
      if (gpu.mig_enabled()) {
        ASSERT_TRUE(c.SetMigLayout(0, g, false, {}).ok());
      }
    }
    EXPECT_EQ(c.free(0).gpu, initial.gpu);
    EXPECT_EQ(c.free(0).cpu, initial.cpu);
    EXPECT_EQ(c.free(0).shape_pods, initial.shape_pods);
    EXPECT_EQ(c.gpu_allocated_milli(), 0);
    EXPECT_EQ(c.num_allocations(), 0u);
  }
}

}  // namespace
}  // namespace tessera
