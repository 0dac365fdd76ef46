#include "policies/capacity_prices.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/policy_test_util.h"

namespace tessera {
namespace {

using policy_test::Bit;
using policy_test::Model;

// max 3x + 5y s.t. x <= 4, 2y <= 12, 3x + 2y <= 18: optimum (2, 6), value 36, duals (0, 3/2, 1).
TEST(SolveLpDualsTest, TextbookDuals) {
  const std::vector<double> a = {1, 0, 0, 2, 3, 2};
  const std::vector<double> b = {4, 12, 18};
  const std::vector<double> c = {3, 5};
  const std::vector<double> y = SolveLpDuals(a, b, c);
  ASSERT_EQ(y.size(), 3u);
  EXPECT_NEAR(y[0], 0.0, 1e-9);
  EXPECT_NEAR(y[1], 1.5, 1e-9);
  EXPECT_NEAR(y[2], 1.0, 1e-9);
}

// max x1 + x2 s.t. x1 <= 4, x2 <= 3, x1 + x2 <= 5: only the joint row prices anything.
TEST(SolveLpDualsTest, OnlyTheBindingRowIsPriced) {
  const std::vector<double> a = {1, 0, 0, 1, 1, 1};
  const std::vector<double> b = {4, 3, 5};
  const std::vector<double> c = {1, 1};
  const std::vector<double> y = SolveLpDuals(a, b, c);
  EXPECT_NEAR(y[0], 0.0, 1e-9);
  EXPECT_NEAR(y[1], 0.0, 1e-9);
  EXPECT_NEAR(y[2], 1.0, 1e-9);
}

TEST(SolveLpDualsTest, ZeroRightHandSidesTerminate) {
  // Every pivot is degenerate: the anti-cycling rule must still end with a dual.
  const std::vector<double> a = {1, 1, 1, -1, 1, 2};
  const std::vector<double> b = {0, 0, 0};
  const std::vector<double> c = {1, 1};
  const std::vector<double> y = SolveLpDuals(a, b, c);
  ASSERT_EQ(y.size(), 3u);
  // Dual feasibility: A^T y >= c.
  EXPECT_GE(y[0] * 1 + y[1] * 1 + y[2] * 1, 1 - 1e-9);
  EXPECT_GE(y[0] * 1 - y[1] + y[2] * 2, 1 - 1e-9);
}

// Group A: CPU-rich (2 GPUs, 100 cores free); group B: GPU-rich (8 GPUs, 16 cores free). The
// mix to come: 3 GPUs of CPU-heavy work (40 cores per GPU) and 7 of CPU-light work (2 cores per
// GPU). The optimum puts the heavy work on A (80 cores) and the light work on B (14 cores), and
// 2 cores of B take 0.05 GPU more of the heavy work: 9.05 GPUs. A's GPU, B's CPU and the light
// demand bind, so a GPU of A is worth 1 GPU of placed work and a core of B 1/40 of a GPU.
class CapacityPricesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    groups_ = {{Model("T4"), 2, 2000, 100000}, {Model("A100-80GB"), 8, 8000, 16000}};
    classes_ = {{1, 0, 3000, 40}, {1, 0, 7000, 2}};
  }
  std::vector<CapacityGroup> groups_;
  std::vector<CapacityClass> classes_;
};

TEST_F(CapacityPricesTest, PricesTheBindingResources) {
  const CapacityPrices p = CapacityPrices::Solve(groups_, classes_);
  ASSERT_FALSE(p.empty());
  EXPECT_NEAR(p.gpu_price(0), 1.0, 1e-9);
  EXPECT_NEAR(p.cpu_price(0), 0.0, 1e-9);
  EXPECT_NEAR(p.gpu_price(1), 0.0, 1e-9);
  EXPECT_NEAR(p.cpu_price(1), 1.0 / 40, 1e-9);
}

TEST_F(CapacityPricesTest, LossIsTheCostAboveTheCheapestGroup) {
  CapacityPrices p = CapacityPrices::Solve(groups_, classes_);
  const GpuModelId t4 = Model("T4"), a100 = Model("A100-80GB");
  const Demand light{MilliCpu(2000), MiB(0), 1, 1000, 0};
  const Demand middle{MilliCpu(10000), MiB(0), 1, 1000, 0};
  const Demand heavy{MilliCpu(40000), MiB(0), 1, 1000, 0};
  // Light work on A takes a GPU worth 1000 milli-GPU; on B its 2 cores cost 50 (10 cores: 250).
  EXPECT_NEAR(p.Loss(t4, 2, light), 950, 1e-6);
  EXPECT_NEAR(p.Loss(a100, 8, light), 0, 1e-6);
  EXPECT_NEAR(p.Loss(t4, 2, middle), 750, 1e-6);
  EXPECT_NEAR(p.Loss(a100, 8, middle), 0, 1e-6);
  // The optimum uses both groups for heavy work: it loses nothing on either.
  EXPECT_NEAR(p.Loss(t4, 2, heavy), 0, 1e-6);
  EXPECT_NEAR(p.Loss(a100, 8, heavy), 0, 1e-6);
  // A group outside the LP, and CPU-only work, lose nothing.
  EXPECT_EQ(p.Loss(t4, 4, light), 0);
  EXPECT_EQ(p.Loss(t4, 2, Demand{MilliCpu(2000), MiB(0), 0, 0, 0}), 0);
}

TEST_F(CapacityPricesTest, TheCheapestGroupMustHostTheDemandNow) {
  // B has 1 core free: light work (2 cores) fits only on A, so it loses nothing there.
  groups_[1].free_cpu = 1000;
  CapacityPrices p = CapacityPrices::Solve(groups_, classes_);
  const Demand light{MilliCpu(2000), MiB(0), 1, 1000, 0};
  EXPECT_NEAR(p.Loss(Model("T4"), 2, light), 0, 1e-6);
}

TEST_F(CapacityPricesTest, ClassesUseOnlyTheirModelsAndNodeSizes) {
  // Pinned to A100 alone, the heavy work cannot use A; 4-GPU work cannot use 2-GPU nodes. No
  // variable is left for the pinned 4-GPU class, so it leaves A's GPU unpriced.
  classes_ = {{4, Bit("A100-80GB"), 3000, 40}, {1, Bit("T4"), 1000, 2}};
  const CapacityPrices p = CapacityPrices::Solve(groups_, classes_);
  // B: 16 cores feed 0.4 GPU of the heavy class; A: the light class takes 1 GPU of 2.
  EXPECT_NEAR(p.gpu_price(0), 0.0, 1e-9);
  EXPECT_NEAR(p.cpu_price(0), 0.0, 1e-9);
  EXPECT_NEAR(p.cpu_price(1), 1.0 / 40, 1e-9);
  classes_ = {{4, Bit("T4"), 3000, 40}};
  EXPECT_TRUE(CapacityPrices::Solve(groups_, classes_).empty());
}

TEST(CapacityPricesEmptyTest, TooLargeAnLpIsNotSolved) {
  std::vector<CapacityGroup> groups;
  for (int g = 1; g <= 16; ++g) groups.push_back({Model("A100-80GB"), g, 8000.0 * g, 1e6});
  std::vector<CapacityClass> classes(CapacityPrices::kMaxPairs / 16, {1, 0, 1000, 4});
  EXPECT_FALSE(CapacityPrices::Solve(groups, classes).empty());
  classes.push_back({1, 0, 1000, 4});
  EXPECT_TRUE(CapacityPrices::Solve(groups, classes).empty());
}

TEST(CapacityPricesEmptyTest, NothingToPlaceMeansNoPrices) {
  const std::vector<CapacityGroup> groups = {{Model("T4"), 2, 2000, 100000}};
  EXPECT_TRUE(CapacityPrices::Solve(groups, {}).empty());
  const std::vector<CapacityClass> none = {{1, 0, 0, 4}};
  EXPECT_TRUE(CapacityPrices::Solve(groups, none).empty());
}

}  // namespace
}  // namespace tessera
