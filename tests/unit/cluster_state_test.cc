#include "cluster/cluster_state.h"

#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <functional>
#include <iterator>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "cluster/target_workload.h"
#include "core/random.h"
#include "tests/unit/policy_test_util.h"

namespace tessera {
namespace {

using policy_test::Model;

NodeSpec GpuNode(std::string name, int64_t cpu, int64_t mem, int gpus, const char* model) {
  return policy_test::Node(std::move(name), cpu, gpus, model, mem);
}

NodeSpec CpuNode(std::string name, int64_t cpu, int64_t mem) {
  NodeSpec s;
  s.name = std::move(name);
  s.cpu = MilliCpu(cpu);
  s.memory = MiB(mem);
  return s;
}

Demand CpuOnly(int64_t cpu, int64_t mem) {
  return Demand{MilliCpu(cpu), MiB(mem), 0, 0, 0};
}
Demand Share(int64_t cpu, int64_t mem, int milli, ModelMask models = 0) {
  return Demand{MilliCpu(cpu), MiB(mem), 1, milli, models};
}
Demand Whole(int64_t cpu, int64_t mem, int n, ModelMask models = 0) {
  return Demand{MilliCpu(cpu), MiB(mem), n, 1000, models};
}
ModelMask Bit(const char* model) {
  return ModelMask{1} << Model(model);
}

// Everything but the stamp, which every mutation changes by contract.
void ExpectSameFree(const NodeFree& a, const NodeFree& b) {
  EXPECT_EQ(a.cpu, b.cpu);
  EXPECT_EQ(a.memory, b.memory);
  EXPECT_EQ(a.gpu_total, b.gpu_total);
  EXPECT_EQ(a.gpu_count, b.gpu_count);
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.gpu, b.gpu);
  EXPECT_EQ(a.shape_pods, b.shape_pods);
}

void ExpectIdentical(const NodeFree& a, const NodeFree& b) {
  ExpectSameFree(a, b);
  EXPECT_EQ(a.stamp, b.stamp);
}

struct AddNodeCase {
  const char* label;
  std::function<void(NodeSpec&)> mutate;
  StatusCode code;
  const char* message_part;
};

void PrintTo(const AddNodeCase& c, std::ostream* os) {
  *os << c.label;
}

class AddNodeValidationTest : public ::testing::TestWithParam<AddNodeCase> {};

TEST_P(AddNodeValidationTest, RejectsAndLeavesClusterUnchanged) {
  ClusterState state;
  ASSERT_TRUE(state.AddNode(GpuNode("existing", 32000, 65536, 2, "T4")).ok());
  const NodeFree before = state.free(0);
  NodeSpec spec = GpuNode("fresh", 32000, 65536, 4, "T4");
  GetParam().mutate(spec);
  auto r = state.AddNode(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), GetParam().code) << r.status().ToString();
  EXPECT_NE(r.status().message().find(GetParam().message_part), std::string::npos)
      << r.status().message();
  EXPECT_EQ(state.num_nodes(), 1u);
  EXPECT_EQ(state.gpu_capacity_milli(), 2000);
  ExpectIdentical(state.free(0), before);
  EXPECT_TRUE(state.CheckInvariants().ok());
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AddNodeValidationTest,
    ::testing::Values(AddNodeCase{"EmptyName", [](NodeSpec& s) { s.name.clear(); },
                                  StatusCode::kInvalidArgument, "empty"},
                      AddNodeCase{"DuplicateName", [](NodeSpec& s) { s.name = "existing"; },
                                  StatusCode::kAlreadyExists, "existing"},
                      AddNodeCase{"ZeroCpu", [](NodeSpec& s) { s.cpu = MilliCpu(0); },
                                  StatusCode::kInvalidArgument, "CPU"},
                      AddNodeCase{"NegativeCpu", [](NodeSpec& s) { s.cpu = MilliCpu(-1000); },
                                  StatusCode::kInvalidArgument, "CPU"},
                      AddNodeCase{"ZeroMemory", [](NodeSpec& s) { s.memory = MiB(0); },
                                  StatusCode::kInvalidArgument, "memory"},
                      AddNodeCase{"NegativeMemory", [](NodeSpec& s) { s.memory = MiB(-1); },
                                  StatusCode::kInvalidArgument, "memory"},
                      AddNodeCase{"TooManyGpus",
                                  [](NodeSpec& s) { s.gpu_count = kMaxGpusPerNode + 1; },
                                  StatusCode::kInvalidArgument, "GPU count 17"},
                      AddNodeCase{"NegativeGpus", [](NodeSpec& s) { s.gpu_count = -1; },
                                  StatusCode::kInvalidArgument, "GPU count -1"},
                      AddNodeCase{"GpusWithoutModel", [](NodeSpec& s) { s.model = kNoGpuModel; },
                                  StatusCode::kInvalidArgument, "model"},
                      AddNodeCase{"ModelWithoutGpus", [](NodeSpec& s) { s.gpu_count = 0; },
                                  StatusCode::kInvalidArgument, "model"}),
    [](const ::testing::TestParamInfo<AddNodeCase>& info) { return info.param.label; });

TEST(ClusterStateTest, AddNodeStartsFullyFree) {
  ClusterState state;
  auto a = state.AddNode(GpuNode("a", 64000, 262144, 8, "G2"));
  auto b = state.AddNode(CpuNode("b", 32000, 131072));
  auto c = state.AddNode(GpuNode("c", 96000, 786432, kMaxGpusPerNode, "A100-80GB"));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, 0u);
  EXPECT_EQ(*b, 1u);
  EXPECT_EQ(*c, 2u);
  EXPECT_EQ(state.num_nodes(), 3u);
  EXPECT_EQ(state.gpu_capacity_milli(), (8 + 16) * 1000);
  EXPECT_EQ(state.total_gpus(), 24);
  EXPECT_EQ(state.gpu_allocated_milli(), 0);

  const NodeFree& fa = state.free(0);
  EXPECT_EQ(fa.cpu, 64000);
  EXPECT_EQ(fa.memory, 262144);
  EXPECT_EQ(fa.gpu_count, 8);
  EXPECT_EQ(fa.gpu_total, 8000);
  EXPECT_EQ(fa.model, Model("G2"));
  for (int g = 0; g < kMaxGpusPerNode; ++g) EXPECT_EQ(fa.gpu[g], g < 8 ? 1000 : 0) << g;
  EXPECT_EQ(fa.FullyFreeGpus(), 8);

  const NodeFree& fb = state.free(1);
  EXPECT_EQ(fb.gpu_count, 0);
  EXPECT_EQ(fb.gpu_total, 0);
  EXPECT_EQ(fb.model, kNoGpuModel);
  EXPECT_EQ(state.free(2).gpu_total, 16000);
  EXPECT_EQ(state.spec(1).name, "b");
  EXPECT_TRUE(state.CheckInvariants().ok());
}

// The ledger's totals follow every allocation and release: free GPU per model, free CPU.
TEST(ClusterStateTest, TotalsFollowTheLedger) {
  ClusterState state;
  auto a = state.AddNode(GpuNode("a", 64000, 262144, 8, "A100-80GB"));
  auto t = state.AddNode(GpuNode("t", 32000, 131072, 4, "T4"));
  auto c = state.AddNode(CpuNode("c", 16000, 65536));
  ASSERT_TRUE(a.ok() && t.ok() && c.ok());
  EXPECT_EQ(state.free_gpu_milli(Model("A100-80GB")), 8000);
  EXPECT_EQ(state.free_gpu_milli(Model("T4")), 4000);
  EXPECT_EQ(state.free_gpu_milli(Model("H100-80GB")), 0);
  EXPECT_EQ(state.free_gpu_milli(kNoGpuModel), 0);
  EXPECT_EQ(state.cpu_capacity_milli(), 112000);
  EXPECT_EQ(state.free_cpu_milli(), 112000);
  ASSERT_TRUE(state.Allocate(1, Whole(6000, 0, 2), {*a, 0b11}).ok());
  ASSERT_TRUE(state.Allocate(2, Share(1000, 0, 300), {*t, 0b1}).ok());
  ASSERT_TRUE(state.Allocate(3, CpuOnly(4000, 0), {*c, 0}).ok());
  EXPECT_EQ(state.free_gpu_milli(Model("A100-80GB")), 6000);
  EXPECT_EQ(state.free_gpu_milli(Model("T4")), 3700);
  EXPECT_EQ(state.free_cpu_milli(), 101000);
  EXPECT_TRUE(state.CheckInvariants().ok());
  ASSERT_TRUE(state.Release(1).ok());
  ASSERT_TRUE(state.Release(2).ok());
  EXPECT_EQ(state.free_gpu_milli(Model("A100-80GB")), 8000);
  EXPECT_EQ(state.free_gpu_milli(Model("T4")), 4000);
  EXPECT_EQ(state.free_cpu_milli(), 108000);
  EXPECT_EQ(state.cpu_capacity_milli(), 112000);
  EXPECT_TRUE(state.CheckInvariants().ok());
}

// Work allocated beyond the node's host resources, and a capacity that shrinks, take the node's
// balance below 0: its free host amounts read 0 and nothing asking CPU fits until the balance
// is positive again. Release and resizing keep the ledger exact.
TEST(ClusterStateTest, AnOverCommittedNodeHasANegativeBalanceAndNoFreeHost) {
  ClusterState state;
  auto a = state.AddNode(GpuNode("a", 8000, 16384, 4, "A100-80GB"));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(state.Allocate(1, Whole(6000, 8192, 1), {*a, 0b1}).ok());
  EXPECT_FALSE(state.Allocate(2, Whole(6000, 8192, 1), {*a, 0b10}).ok());
  ASSERT_TRUE(state.AllocateBeyondHost(2, Whole(6000, 8192, 1), {*a, 0b10}).ok());
  EXPECT_EQ(state.cpu_balance(*a), -4000);
  EXPECT_EQ(state.memory_balance(*a), 0);
  EXPECT_EQ(state.free(*a).cpu, 0);
  EXPECT_EQ(state.free_cpu_milli(), 0);
  EXPECT_EQ(state.free(*a).gpu[1], 0);  // the GPU is held
  // The GPU checks still apply beyond the host: GPU 1 is taken.
  EXPECT_FALSE(state.AllocateBeyondHost(3, Whole(0, 0, 1), {*a, 0b10}).ok());
  EXPECT_FALSE(state.Allocate(3, Whole(1, 0, 1), {*a, 0b100}).ok());
  EXPECT_TRUE(state.CheckInvariants().ok());
  // Releasing one frees only what brings the balance above 0.
  ASSERT_TRUE(state.Release(1).ok());
  EXPECT_EQ(state.free(*a).cpu, 2000);
  EXPECT_EQ(state.free_cpu_milli(), 2000);
  // Capacity that shrinks and grows moves the balance by the difference.
  ASSERT_TRUE(state.ResizeHost(*a, MilliCpu(4000), MiB(4096)).ok());
  EXPECT_EQ(state.cpu_balance(*a), -2000);
  EXPECT_EQ(state.memory_balance(*a), -4096);
  EXPECT_EQ(state.free(*a).memory, 0);
  EXPECT_EQ(state.cpu_capacity_milli(), 4000);
  EXPECT_TRUE(state.CheckInvariants().ok());
  ASSERT_TRUE(state.ResizeHost(*a, MilliCpu(10000), MiB(16384)).ok());
  EXPECT_EQ(state.free(*a).cpu, 4000);
  EXPECT_EQ(state.free(*a).memory, 8192);
  EXPECT_EQ(state.free_cpu_milli(), 4000);
  EXPECT_EQ(state.spec(*a).cpu.v, 10000);
  EXPECT_FALSE(state.ResizeHost(*a, MilliCpu(0), MiB(1)).ok());
  ASSERT_TRUE(state.Release(2).ok());
  EXPECT_EQ(state.free(*a).cpu, 10000);
  EXPECT_EQ(state.free(*a).gpu_total, 4000);
  EXPECT_TRUE(state.CheckInvariants().ok());
}

// A blocked GPU takes no new slice of any kind and offers no free capacity; running work is
// still adopted there, and unblocking gives the GPU back.
TEST(ClusterStateTest, ABlockedGpuTakesNoNewSlice) {
  ClusterState state;
  auto a = state.AddNode(GpuNode("a", 64000, 262144, 2, "A100-80GB"));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(state.SetGpuBlocked(*a, 0, true).ok());
  EXPECT_FALSE(state.SetGpuBlocked(*a, 2, true).ok());
  EXPECT_EQ(state.free(*a).gpu[0], 0);
  EXPECT_EQ(state.free(*a).gpu_total, 1000);
  EXPECT_EQ(state.free_gpu_milli(Model("A100-80GB")), 1000);
  const Status whole = state.Allocate(1, Whole(0, 0, 1), {*a, 0b1});
  EXPECT_EQ(whole.code(), StatusCode::kFailedPrecondition) << whole.ToString();
  EXPECT_FALSE(state.Allocate(1, Share(0, 0, 300), {*a, 0b1}).ok());
  SliceDemand sd;
  sd.memory_mib = 1024;
  EXPECT_FALSE(state.Allocate(1, sd, SliceAssignment{SliceKind::kMps, *a, 0b1, -1, 20, 1024}).ok());
  EXPECT_TRUE(state.Allocate(1, Whole(0, 0, 1), {*a, 0b10}).ok());  // GPU 1 is not blocked
  EXPECT_TRUE(state.CheckInvariants().ok());
  // Running work is adopted on it, and the GPU stays blocked.
  ASSERT_TRUE(state.AllocateBeyondHost(2, Whole(1000, 0, 1), {*a, 0b1}).ok());
  EXPECT_TRUE(state.gpu(*a, 0).blocked);
  EXPECT_TRUE(state.CheckInvariants().ok());
  ASSERT_TRUE(state.Release(2).ok());
  EXPECT_EQ(state.free(*a).gpu[0], 0);
  ASSERT_TRUE(state.SetGpuBlocked(*a, 0, false).ok());
  EXPECT_EQ(state.free(*a).gpu[0], 1000);
  EXPECT_TRUE(state.Allocate(3, Share(0, 0, 300), {*a, 0b1}).ok());
  EXPECT_TRUE(state.CheckInvariants().ok());
}

TEST(ClusterStateTest, StampsAreUniqueAndChangeOnEveryMutation) {
  ClusterState state;
  ASSERT_TRUE(state.AddNode(GpuNode("a", 8000, 8192, 2, "T4")).ok());
  ASSERT_TRUE(state.AddNode(GpuNode("b", 8000, 8192, 2, "T4")).ok());
  std::vector<uint64_t> seen = {state.free(0).stamp, state.free(1).stamp};
  EXPECT_NE(seen[0], seen[1]);
  auto record = [&](NodeIdx n) {
    const uint64_t s = state.free(n).stamp;
    for (uint64_t old : seen) EXPECT_NE(s, old);
    seen.push_back(s);
  };
  const uint64_t untouched = state.free(1).stamp;
  ASSERT_TRUE(state.Allocate(1, Share(1000, 1024, 300), {0, 0b01}).ok());
  record(0);
  ASSERT_TRUE(state.Release(1).ok());
  record(0);
  ASSERT_TRUE(state.Allocate(1, Share(1000, 1024, 300), {0, 0b01}).ok());
  record(0);
  EXPECT_EQ(state.free(1).stamp, untouched);
  // A refused allocation changes nothing, the stamp included.
  const uint64_t before_refusal = state.free(0).stamp;
  EXPECT_FALSE(state.Allocate(2, Share(1000, 1024, 800), {0, 0b01}).ok());
  EXPECT_EQ(state.free(0).stamp, before_refusal);
}

// Node 0: 8 cores, 16 GiB, 4 T4 GPUs; GPU 2 has 400 milli free (a 600 share runs there),
// leaving 6 cores and 14 GiB.
class CheckFitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(state_.AddNode(GpuNode("n", 8000, 16384, 4, "T4")).ok());
    ASSERT_TRUE(state_.Allocate(100, Share(2000, 2048, 600), {0, 0b0100}).ok());
  }
  ClusterState state_;
};

struct FitCase {
  const char* label;
  Demand demand;
  GpuMask gpus;
  StatusCode code;
};

void PrintTo(const FitCase& c, std::ostream* os) {
  *os << c.label;
}

class CheckFitCaseTest : public CheckFitTest, public ::testing::WithParamInterface<FitCase> {};

TEST_P(CheckFitCaseTest, MatchesExpectation) {
  const FitCase& c = GetParam();
  const Status st = state_.CheckFit(0, c.demand, c.gpus);
  EXPECT_EQ(st.code(), c.code) << st.ToString();
  if (c.code != StatusCode::kOk) {
    EXPECT_FALSE(st.message().empty());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CheckFitCaseTest,
    ::testing::Values(
        FitCase{"CpuOnlyFits", CpuOnly(6000, 14336), 0, StatusCode::kOk},
        FitCase{"CpuOnlyWithGpuMask", CpuOnly(1000, 1024), 0b0001, StatusCode::kInvalidArgument},
        FitCase{"CpuOneMilliTooMuch", CpuOnly(6001, 1024), 0, StatusCode::kResourceExhausted},
        FitCase{"MemoryOneMiBTooMuch", CpuOnly(1000, 14337), 0, StatusCode::kResourceExhausted},
        FitCase{"ShareExactlyFillsGpu", Share(1000, 1024, 400), 0b0100, StatusCode::kOk},
        FitCase{"ShareOverPartialGpu", Share(1000, 1024, 401), 0b0100,
                StatusCode::kResourceExhausted},
        FitCase{"ShareOnFreeGpu", Share(1000, 1024, 999), 0b1000, StatusCode::kOk},
        FitCase{"ShareWithoutGpu", Share(1000, 1024, 500), 0, StatusCode::kInvalidArgument},
        FitCase{"ShareOnTwoGpus", Share(1000, 1024, 500), 0b0011, StatusCode::kInvalidArgument},
        FitCase{"WholeOnPartialGpu", Whole(1000, 1024, 1), 0b0100, StatusCode::kResourceExhausted},
        FitCase{"WholeTwoFree", Whole(1000, 1024, 2), 0b1001, StatusCode::kOk},
        FitCase{"WholeThreeFree", Whole(1000, 1024, 3), 0b1011, StatusCode::kOk},
        FitCase{"WholeFourNeedsPartial", Whole(1000, 1024, 4), 0b1111,
                StatusCode::kResourceExhausted},
        FitCase{"MaskBeyondGpuCount", Share(1000, 1024, 100), 0b10000,
                StatusCode::kInvalidArgument},
        FitCase{"MultiGpuShare", Demand{MilliCpu(0), MiB(0), 2, 500, 0}, 0b0011,
                StatusCode::kInvalidArgument},
        FitCase{"GpuCountWithoutShare", Demand{MilliCpu(0), MiB(0), 1, 0, 0}, 0b0001,
                StatusCode::kInvalidArgument},
        FitCase{"ShareWithoutGpuCount", Demand{MilliCpu(0), MiB(0), 0, 500, 0}, 0,
                StatusCode::kInvalidArgument},
        FitCase{"ShareAboveOneGpu", Demand{MilliCpu(0), MiB(0), 1, 1001, 0}, 0b0001,
                StatusCode::kInvalidArgument},
        FitCase{"NegativeCpu", CpuOnly(-1, 0), 0, StatusCode::kInvalidArgument},
        FitCase{"NegativeMemory", CpuOnly(0, -1), 0, StatusCode::kInvalidArgument},
        FitCase{"ModelNotAllowed", Share(1000, 1024, 100, Bit("A100-40GB")), 0b0001,
                StatusCode::kFailedPrecondition},
        FitCase{"ModelInAllowedList", Share(1000, 1024, 100, Bit("A100-40GB") | Bit("T4")), 0b0001,
                StatusCode::kOk},
        FitCase{"WholeModelNotAllowed", Whole(1000, 1024, 1, Bit("V100M16")), 0b0001,
                StatusCode::kFailedPrecondition}),
    [](const ::testing::TestParamInfo<FitCase>& info) { return info.param.label; });

TEST_F(CheckFitTest, UnknownNodeIndexIsNotFound) {
  EXPECT_EQ(state_.CheckFit(1, CpuOnly(1, 1), 0).code(), StatusCode::kNotFound);
  EXPECT_EQ(state_.Allocate(7, CpuOnly(1, 1), {5, 0}).code(), StatusCode::kNotFound);
  EXPECT_FALSE(state_.IsAllocated(7));
}

TEST_F(CheckFitTest, AllocateAppliesExactlyTheDemand) {
  ASSERT_TRUE(state_.Allocate(1, Whole(1000, 512, 2), {0, 0b1001}).ok());
  const NodeFree& f = state_.free(0);
  EXPECT_EQ(f.cpu, 8000 - 2000 - 1000);
  EXPECT_EQ(f.memory, 16384 - 2048 - 512);
  EXPECT_EQ(f.gpu[0], 0);
  EXPECT_EQ(f.gpu[1], 1000);
  EXPECT_EQ(f.gpu[2], 400);
  EXPECT_EQ(f.gpu[3], 0);
  EXPECT_EQ(f.gpu_total, 1400);
  EXPECT_EQ(f.shape_pods[0], 1);
  EXPECT_EQ(f.shape_pods[2], 1);
  EXPECT_EQ(f.shape_pods[1], 0);
  EXPECT_EQ(state_.gpu_allocated_milli(), 600 + 2000);
  EXPECT_EQ(state_.num_allocations(), 2u);
  EXPECT_TRUE(state_.IsAllocated(1));

  ASSERT_TRUE(state_.Allocate(2, CpuOnly(500, 100), {0, 0}).ok());
  EXPECT_EQ(state_.free(0).shape_pods, f.shape_pods);
  EXPECT_EQ(state_.free(0).cpu, 4500);
  EXPECT_EQ(state_.gpu_allocated_milli(), 2600);
  EXPECT_TRUE(state_.CheckInvariants().ok());
}

TEST_F(CheckFitTest, RefusedAllocationChangesNothing) {
  const std::vector<std::pair<Demand, GpuMask>> refused = {
      {CpuOnly(6001, 0), 0},
      {CpuOnly(0, 14337), 0},
      {Share(0, 0, 401), 0b0100},
      {Whole(0, 0, 4), 0b1111},
      {Share(0, 0, 100, Bit("H100-80GB")), 0b0001},
      {Share(0, 0, 100), 0b10000},
      {Share(0, 0, 100), 0},
  };
  const NodeFree before = state_.free(0);
  for (const auto& [demand, gpus] : refused) {
    EXPECT_FALSE(state_.Allocate(55, demand, {0, gpus}).ok());
    ExpectIdentical(state_.free(0), before);
    EXPECT_FALSE(state_.IsAllocated(55));
    EXPECT_EQ(state_.num_allocations(), 1u);
    EXPECT_EQ(state_.gpu_allocated_milli(), 600);
  }
  EXPECT_TRUE(state_.CheckInvariants().ok());
}

TEST_F(CheckFitTest, DuplicateIdIsAlreadyExistsAndChangesNothing) {
  const NodeFree before = state_.free(0);
  const Status st = state_.Allocate(100, CpuOnly(1, 1), {0, 0});
  EXPECT_EQ(st.code(), StatusCode::kAlreadyExists);
  ExpectIdentical(state_.free(0), before);
  EXPECT_EQ(state_.num_allocations(), 1u);
}

TEST_F(CheckFitTest, ReleaseRestoresThePreviousFreeState) {
  const std::vector<std::pair<Demand, GpuMask>> demands = {
      {Share(1500, 4096, 400), 0b0100},
      {Share(500, 100, 250), 0b0001},
      {Whole(3000, 8192, 3), 0b1011},
      {CpuOnly(6000, 14336), 0},
  };
  WorkloadId id = 1;
  for (const auto& [demand, gpus] : demands) {
    const NodeFree before = state_.free(0);
    const int64_t allocated = state_.gpu_allocated_milli();
    ASSERT_TRUE(state_.Allocate(id, demand, {0, gpus}).ok());
    ASSERT_TRUE(state_.Release(id).ok());
    ExpectSameFree(state_.free(0), before);
    EXPECT_GT(state_.free(0).stamp, before.stamp);
    EXPECT_EQ(state_.gpu_allocated_milli(), allocated);
    EXPECT_FALSE(state_.IsAllocated(id));
    ++id;
  }
  EXPECT_TRUE(state_.CheckInvariants().ok());
}

TEST_F(CheckFitTest, ReleaseUnknownIdIsNotFound) {
  const NodeFree before = state_.free(0);
  EXPECT_EQ(state_.Release(12345).code(), StatusCode::kNotFound);
  ASSERT_TRUE(state_.Release(100).ok());
  EXPECT_EQ(state_.Release(100).code(), StatusCode::kNotFound);
  EXPECT_EQ(state_.num_allocations(), 0u);
  EXPECT_EQ(state_.free(0).gpu_total, 4000);
  EXPECT_EQ(state_.free(0).cpu, 8000);
  EXPECT_NE(state_.free(0).gpu_total, before.gpu_total);
}

TEST(ClusterStateTest, ModelRestrictionPerNode) {
  ClusterState state;
  ASSERT_TRUE(state.AddNode(GpuNode("t4", 8000, 8192, 2, "T4")).ok());
  ASSERT_TRUE(state.AddNode(GpuNode("a100", 8000, 8192, 2, "A100-40GB")).ok());
  ASSERT_TRUE(state.AddNode(CpuNode("cpu", 8000, 8192)).ok());
  const Demand d = Share(1000, 1024, 500, Bit("A100-40GB") | Bit("A100-80GB"));
  EXPECT_EQ(state.Allocate(1, d, {0, 0b01}).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(state.Allocate(1, d, {1, 0b01}).ok());
  EXPECT_NE(state.Allocate(2, d, {2, 0b01}).code(), StatusCode::kOk);
  // The model list only constrains GPU placements.
  EXPECT_TRUE(state.Allocate(3, CpuOnly(1000, 1024), {0, 0}).ok());
  EXPECT_TRUE(state.CheckInvariants().ok());
}

// Reference model for the randomized test: per-GPU free shares and pod shape counts kept
// independently of ClusterState.
struct ShadowNode {
  int64_t cpu = 0, memory = 0;
  int gpu_count = 0;
  GpuModelId model = kNoGpuModel;
  std::array<int, kMaxGpusPerNode> gpu{};
  std::array<int, kMaxGpusPerNode + 1> shapes{};
};

bool ShadowFits(const ShadowNode& n, const Demand& d, GpuMask mask) {
  if (d.cpu.v > n.cpu || d.memory.v > n.memory) return false;
  if (std::popcount(mask) != d.num_gpu) return false;
  if (d.num_gpu == 0) return true;
  if (d.models != 0 && (n.model == kNoGpuModel || !((d.models >> n.model) & 1))) return false;
  for (int g = 0; g < 32; ++g) {
    if (!((mask >> g) & 1)) continue;
    if (g >= n.gpu_count || n.gpu[g] < d.gpu_milli) return false;
  }
  return true;
}

void ApplyShadow(ShadowNode& n, const Demand& d, GpuMask mask, int sign) {
  n.cpu -= sign * d.cpu.v;
  n.memory -= sign * d.memory.v;
  for (int g = 0; g < n.gpu_count; ++g) {
    if ((mask >> g) & 1) n.gpu[g] -= sign * d.gpu_milli;
  }
  if (d.num_gpu > 0) n.shapes[d.IsShare() ? 0 : d.num_gpu] += sign;
}

void ExpectMatchesShadow(const NodeFree& f, const ShadowNode& n) {
  ASSERT_EQ(f.cpu, n.cpu);
  ASSERT_EQ(f.memory, n.memory);
  int total = 0;
  for (int g = 0; g < kMaxGpusPerNode; ++g) {
    ASSERT_EQ(f.gpu[g], n.gpu[g]) << "GPU " << g;
    total += n.gpu[g];
  }
  ASSERT_EQ(f.gpu_total, total);
  for (int k = 0; k <= kMaxGpusPerNode; ++k) ASSERT_EQ(f.shape_pods[k], n.shapes[k]) << k;
}

TEST(ClusterStateRandomizedTest, InvariantsHoldAndFullReleaseRestoresEveryNode) {
  ClusterState state;
  const std::vector<NodeSpec> specs = {
      GpuNode("g2-a", 96000, 786432, 8, "G2"),      GpuNode("g2-b", 96000, 786432, 8, "G2"),
      GpuNode("t4-a", 64000, 262144, 2, "T4"),      GpuNode("t4-b", 32000, 131072, 4, "T4"),
      GpuNode("v100", 64000, 393216, 4, "V100M32"), CpuNode("cpu", 32000, 131072),
  };
  std::vector<ShadowNode> shadow;
  for (const NodeSpec& s : specs) {
    ASSERT_TRUE(state.AddNode(s).ok());
    ShadowNode n;
    n.cpu = s.cpu.v;
    n.memory = s.memory.v;
    n.gpu_count = s.gpu_count;
    n.model = s.model;
    for (int g = 0; g < s.gpu_count; ++g) n.gpu[g] = 1000;
    shadow.push_back(n);
  }
  std::vector<NodeFree> initial(state.all_free().begin(), state.all_free().end());
  const std::vector<ModelMask> model_choices = {
      0, 0, 0, Bit("G2"), Bit("T4") | Bit("V100M32"), Bit("A10")};
  const int whole_counts[] = {1, 1, 2, 4, 8};

  Rng rng(20240611);
  std::map<WorkloadId, std::pair<Demand, Placement>> live;
  WorkloadId next_id = 1;
  int allocated_ok = 0, refused = 0, released = 0;
  for (int step = 0; step < 6000; ++step) {
    const uint64_t op = rng.Uniform(100);
    if (op < 55 || live.empty()) {
      Demand d;
      const uint64_t kind = rng.Uniform(3);
      d.cpu = MilliCpu(static_cast<int64_t>(rng.Uniform(17)) * 1000);
      d.memory = MiB(static_cast<int64_t>(rng.Uniform(65)) * 1024);
      if (kind == 1) {
        d.num_gpu = 1;
        d.gpu_milli = 1 + static_cast<int>(rng.Uniform(999));
      } else if (kind == 2) {
        d.num_gpu = whole_counts[rng.Uniform(5)];
        d.gpu_milli = 1000;
      }
      if (d.num_gpu > 0) d.models = model_choices[rng.Uniform(model_choices.size())];
      const NodeIdx n = static_cast<NodeIdx>(rng.Uniform(specs.size()));
      const ShadowNode& sn = shadow[n];
      GpuMask mask = 0;
      if (rng.Uniform(2) == 0 && d.num_gpu > 0) {
        // A random subset of the GPUs with enough share, so most of these should fit.
        std::vector<int> fitting;
        for (int g = 0; g < sn.gpu_count; ++g) {
          if (sn.gpu[g] >= d.gpu_milli) fitting.push_back(g);
        }
        rng.Shuffle(fitting);
        for (int i = 0; i < d.num_gpu && i < static_cast<int>(fitting.size()); ++i)
          mask |= GpuMask{1} << fitting[i];
      } else if (d.num_gpu > 0) {
        mask = static_cast<GpuMask>(rng.Uniform(GpuMask{1} << (sn.gpu_count + 1)));
      }
      const bool expect_fit = ShadowFits(sn, d, mask);
      const NodeFree before = state.free(n);
      const WorkloadId id = next_id++;
      const Status st = state.Allocate(id, d, {n, mask});
      ASSERT_EQ(st.ok(), expect_fit) << "step " << step << ": " << st.ToString();
      if (st.ok()) {
        ApplyShadow(shadow[n], d, mask, +1);
        live[id] = {d, {n, mask}};
        ++allocated_ok;
      } else {
        ExpectIdentical(state.free(n), before);
        ++refused;
      }
      ASSERT_NO_FATAL_FAILURE(ExpectMatchesShadow(state.free(n), shadow[n]));
    } else if (op < 97) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng.Uniform(live.size())));
      const auto [d, p] = it->second;
      ASSERT_TRUE(state.Release(it->first).ok()) << "step " << step;
      ApplyShadow(shadow[p.node], d, p.gpus, -1);
      live.erase(it);
      ++released;
      ASSERT_NO_FATAL_FAILURE(ExpectMatchesShadow(state.free(p.node), shadow[p.node]));
    } else {
      ASSERT_EQ(state.Release(next_id + 1000).code(), StatusCode::kNotFound);
    }
    const Status inv = state.CheckInvariants();
    ASSERT_TRUE(inv.ok()) << "step " << step << ": " << inv.ToString();
    ASSERT_EQ(state.num_allocations(), live.size());
    int64_t milli = 0;
    for (const auto& [id, e] : live) milli += e.first.TotalMilliGpu();
    ASSERT_EQ(state.gpu_allocated_milli(), milli);
  }
  // Both paths must have been exercised substantially for the test to mean anything.
  EXPECT_GT(allocated_ok, 1000);
  EXPECT_GT(refused, 500);
  EXPECT_GT(released, 1000);

  while (!live.empty()) {
    ASSERT_TRUE(state.Release(live.begin()->first).ok());
    live.erase(live.begin());
  }
  EXPECT_TRUE(state.CheckInvariants().ok());
  EXPECT_EQ(state.num_allocations(), 0u);
  EXPECT_EQ(state.gpu_allocated_milli(), 0);
  for (NodeIdx n = 0; n < state.num_nodes(); ++n) {
    SCOPED_TRACE(state.spec(n).name);
    ExpectSameFree(state.free(n), initial[n]);
  }
}

TEST(ShapeTallyTest, CountsTasksAndTasksWithGpus) {
  ShapeTally tally;
  tally.Add(Demand{MilliCpu(1000), MiB(0), 0, 0, 0});
  tally.Add(Demand{MilliCpu(0), MiB(0), 1, 500, 0});
  tally.Add(Demand{MilliCpu(0), MiB(0), 2, 1000, 0});
  tally.Add(Demand{MilliCpu(0), MiB(0), 2, 1000, 0});
  EXPECT_EQ(tally.tasks(), 4);
  EXPECT_EQ(tally.gpu_tasks(), 3);
  EXPECT_EQ(tally.distinct(), 3u);
}

}  // namespace
}  // namespace tessera
