#include "core/stats.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace tessera {
namespace {

struct QuantileCase {
  std::vector<double> values;
  double q;
  double want;
};

TEST(QuantileTest, InterpolatesBetweenOrderStatistics) {
  const QuantileCase cases[] = {
      {{}, 0.5, 0.0},           {{7}, 0.95, 7.0},
      {{3, 1, 2}, 0.0, 1.0},    {{3, 1, 2}, 1.0, 3.0},
      {{3, 1, 2}, 0.5, 2.0},    {{10, 0}, 0.25, 2.5},
      {{4, 1, 3, 2}, 0.5, 2.5}, {{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100}, 0.95, 95.0},
  };
  for (const QuantileCase& c : cases) {
    EXPECT_DOUBLE_EQ(Quantile(c.values, c.q), c.want) << "q=" << c.q << " n=" << c.values.size();
    std::vector<double> sorted = c.values;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_DOUBLE_EQ(SortedQuantile(sorted, c.q), c.want);
  }
}

}  // namespace
}  // namespace tessera
