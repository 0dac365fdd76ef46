#include "policies/share_prices.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace tessera {
namespace {

constexpr int kCap = 1000;
constexpr double kEps = 1e-9;

// Unbounded knapsack over capacity kCap: best[c] = max value of sizes summing to <= c.
// Returns best[] and, in `pattern`, the counts of the best pattern for the full capacity.
// Every sum of sizes is a multiple of their gcd g, so best[c] = best[g * floor(c / g)]: the
// table is filled at multiples of g only, in the same order, which gives the same values and
// pattern as filling every capacity.
std::array<double, kCap + 1> Knapsack(const std::vector<int>& sizes, const std::vector<double>& y,
                                      std::vector<double>* pattern) {
  int g = 0;
  for (int s : sizes) g = std::gcd(g, s);
  if (g <= 0) g = 1;
  const int steps = kCap / g;
  std::array<double, kCap + 1> grid{};  // grid[k] = best[k * g]
  std::array<int, kCap + 1> pick{};     // -1: capacity (k - 1) * g is as good
  pick[0] = -1;
  for (int k = 1; k <= steps; ++k) {
    grid[k] = grid[k - 1];
    pick[k] = -1;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int units = sizes[i] / g;
      if (units > k || y[i] <= 0) continue;
      const double v = grid[k - units] + y[i];
      if (v > grid[k] + kEps) {
        grid[k] = v;
        pick[k] = static_cast<int>(i);
      }
    }
  }
  if (pattern != nullptr) {
    pattern->assign(sizes.size(), 0.0);
    for (int k = steps; k > 0;) {
      if (pick[k] < 0) {
        --k;
      } else {
        (*pattern)[pick[k]] += 1;
        k -= sizes[pick[k]] / g;
      }
    }
  }
  std::array<double, kCap + 1> best{};
  for (int c = 0; c <= kCap; ++c) best[c] = grid[c / g];
  return best;
}

}  // namespace

SharePrices SharePrices::Solve(std::span<const ShareCount> items) {
  std::map<int, double> merged;
  for (const ShareCount& it : items) {
    if (it.milli > 0 && it.milli < kCap && it.count > 0) merged[it.milli] += it.count;
  }
  std::vector<std::pair<double, int>> by_count;
  for (const auto& [milli, count] : merged) by_count.emplace_back(count, milli);
  std::stable_sort(by_count.begin(), by_count.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  if (by_count.size() > kMaxSizes) by_count.resize(kMaxSizes);
  std::sort(by_count.begin(), by_count.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });

  SharePrices out;
  const size_t m = by_count.size();
  if (m == 0) return out;
  double total = 0;
  for (const auto& bc : by_count) total += bc.first;
  std::vector<double> b(m);
  for (size_t i = 0; i < m; ++i) {
    out.sizes_.push_back(by_count[i].second);
    b[i] = by_count[i].first / total;
  }

  // Revised simplex with column generation on the primal. Basis starts with the one-size
  // patterns (floor(1000 / s) tasks of size s), which is feasible.
  std::vector<std::vector<double>> binv(m, std::vector<double>(m, 0.0));
  std::vector<double> cost(m, 1.0);  // 1 for a pattern column, 0 for a surplus column
  std::vector<double> x(m);
  for (size_t i = 0; i < m; ++i) {
    const double a = std::floor(static_cast<double>(kCap) / out.sizes_[i]);
    binv[i][i] = 1.0 / a;
    x[i] = b[i] / a;
  }
  std::vector<double> y(m), col(m), d(m);
  for (int iter = 0; iter < 4000; ++iter) {
    for (size_t j = 0; j < m; ++j) {
      double s = 0;
      for (size_t i = 0; i < m; ++i) s += cost[i] * binv[i][j];
      y[j] = s;
    }
    double col_cost = 1.0;
    size_t surplus = m;
    for (size_t j = 0; j < m && surplus == m; ++j) {
      if (y[j] < -kEps) surplus = j;
    }
    if (surplus < m) {
      std::fill(col.begin(), col.end(), 0.0);
      col[surplus] = -1.0;
      col_cost = 0.0;
    } else {
      const auto best = Knapsack(out.sizes_, y, &col);
      if (best[kCap] <= 1.0 + 1e-7) break;
    }
    for (size_t i = 0; i < m; ++i) {
      double s = 0;
      for (size_t j = 0; j < m; ++j) s += binv[i][j] * col[j];
      d[i] = s;
    }
    size_t leave = m;
    double ratio = 0;
    for (size_t i = 0; i < m; ++i) {
      if (d[i] <= kEps) continue;
      const double r = x[i] / d[i];
      if (leave == m || r < ratio - 1e-12) {
        leave = i;
        ratio = r;
      }
    }
    if (leave == m) break;  // unbounded: cannot happen for a covering LP
    const double piv = d[leave];
    for (size_t j = 0; j < m; ++j) binv[leave][j] /= piv;
    x[leave] /= piv;
    for (size_t i = 0; i < m; ++i) {
      if (i == leave || d[i] == 0) continue;
      for (size_t j = 0; j < m; ++j) binv[i][j] -= d[i] * binv[leave][j];
      x[i] -= d[i] * x[leave];
    }
    cost[leave] = col_cost;
  }
  out.price_.resize(m);
  for (size_t j = 0; j < m; ++j) {
    double s = 0;
    for (size_t i = 0; i < m; ++i) s += cost[i] * binv[i][j];
    out.price_[j] = std::max(0.0, s);
  }
  for (size_t i = 0; i < m; ++i) out.objective_ += cost[i] * x[i];
  out.fill_ = Knapsack(out.sizes_, out.price_, nullptr);
  return out;
}

double SharePrices::Price(int milli) const {
  const auto it = std::lower_bound(sizes_.begin(), sizes_.end(), milli);
  if (it != sizes_.end() && *it == milli) return price_[it - sizes_.begin()];
  return BestFill(milli);
}

double SharePrices::BestFill(int gap) const {
  return fill_[std::clamp(gap, 0, kCap)];
}

double SharePrices::Loss(int free, int d) const {
  if (empty() || d <= 0 || d > free || free > kCap) return 0.0;
  return std::max(0.0, BestFill(free) - Price(d) - BestFill(free - d));
}

}  // namespace tessera
