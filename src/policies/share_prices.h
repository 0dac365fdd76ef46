// Dual prices of the fractional bin-packing LP for GPU-share tasks (Gilmore-Gomory cutting
// stock: every GPU is a bin of 1000 milli).
//
// For share sizes s with counts b_s the LP is
//   min sum_p x_p  s.t.  sum_p a_{s,p} x_p >= b_s,  x >= 0,
// over packing patterns p (multisets of sizes summing to <= 1000). Its dual
//   max sum_s b_s y_s  s.t.  sum_s a_{s,p} y_s <= 1 for every pattern p,  y >= 0
// prices each size in GPUs: y_s is what one more task of size s costs an optimal packing.
// K(r) = max { sum_s a_s y_s : sum_s a_s s <= r } is the best value a gap of r milli can still
// take. Putting a task of size d into a gap r then loses
//   Loss(r, d) = K(r) - y_d - K(r - d) >= 0   (GPU; 0 = consistent with an optimal packing),
// e.g. a 320 next to a lone 470 when 470s pair with 470s and 320s complete 650s. Solved by
// cutting planes (the separation problem is an unbounded knapsack) on a dense simplex; sizes
// are capped at kMaxSizes most frequent. Pure; thread-compatible.
#pragma once

#include <array>
#include <span>
#include <vector>

namespace tessera {

struct ShareCount {
  int milli = 0;  // per-GPU share, 1..999
  double count = 0;
};

class SharePrices {
 public:
  static constexpr size_t kMaxSizes = 48;

  SharePrices() = default;
  // Solves the LP for the given sizes (duplicates are merged, others ignored).
  static SharePrices Solve(std::span<const ShareCount> items);

  bool empty() const { return sizes_.empty(); }
  // y_d; sizes outside the LP are priced at K(d).
  double Price(int milli) const;
  // K(r), r clamped to [0, 1000].
  double BestFill(int gap) const;
  // K(free) - y_d - K(free - d), in GPUs; 0 when d does not fit or nothing was learned.
  double Loss(int free, int d) const;
  // Optimal LP value (GPUs per unit of count).
  double objective() const { return objective_; }

 private:
  std::vector<int> sizes_;
  std::vector<double> price_;
  std::array<double, 1001> fill_{};
  double objective_ = 0;
};

}  // namespace tessera
