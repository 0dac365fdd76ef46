#include "policies/capacity_prices.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera {

std::vector<double> SolveLpDuals(std::span<const double> a, std::span<const double> b,
                                 std::span<const double> c) {
  const size_t m = b.size(), n = c.size();
  const size_t cols = n + m + 1;
  // Rows 0..m-1: the constraints; row m: the reduced costs. Column n + i is row i's slack and
  // the last column the right-hand side.
  std::vector<double> t((m + 1) * cols, 0.0);
  auto at = [&](size_t r, size_t col) -> double& { return t[r * cols + col]; };
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) at(i, j) = a[i * n + j];
    at(i, n + i) = 1;
    at(i, cols - 1) = b[i];
  }
  for (size_t j = 0; j < n; ++j) at(m, j) = c[j];
  std::vector<size_t> basis(m);
  for (size_t i = 0; i < m; ++i) basis[i] = n + i;
  constexpr double kEps = 1e-9;
  constexpr int kDegenerateRun = 20;  // then Bland's rule, which cannot cycle
  int degenerate = 0;
  const size_t max_pivots = 50 * (m + n) + 100;
  for (size_t pivot = 0; pivot < max_pivots; ++pivot) {
    size_t enter = cols;
    double best = kEps;
    for (size_t j = 0; j + 1 < cols; ++j) {
      if (at(m, j) <= best) continue;
      enter = j;
      if (degenerate >= kDegenerateRun) break;
      best = at(m, j);
    }
    if (enter == cols) break;  // optimal
    size_t leave = m;
    double ratio = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < m; ++i) {
      const double v = at(i, enter);
      if (v <= kEps) continue;
      const double r = at(i, cols - 1) / v;
      if (r < ratio || (r == ratio && basis[i] < basis[leave])) {
        ratio = r;
        leave = i;
      }
    }
    if (leave == m) break;  // unbounded; the LPs built here are bounded
    degenerate = ratio <= kEps ? degenerate + 1 : 0;
    const double p = at(leave, enter);
    for (size_t j = 0; j < cols; ++j) at(leave, j) /= p;
    for (size_t i = 0; i <= m; ++i) {
      if (i == leave) continue;
      const double f = at(i, enter);
      if (f == 0) continue;
      for (size_t j = 0; j < cols; ++j) at(i, j) -= f * at(leave, j);
    }
    basis[leave] = enter;
  }
  std::vector<double> y(m);
  for (size_t i = 0; i < m; ++i) y[i] = std::max(0.0, -at(m, n + i));
  return y;
}

CapacityPrices CapacityPrices::Solve(std::span<const CapacityGroup> groups,
                                     std::span<const CapacityClass> classes) {
  CapacityPrices out;
  const size_t num_groups = groups.size();
  std::vector<std::pair<size_t, size_t>> vars;  // (class, group) pairs that may be used
  for (size_t k = 0; k < classes.size(); ++k) {
    if (classes[k].demand <= 0) continue;
    for (size_t g = 0; g < num_groups; ++g) {
      if (groups[g].gpu_count < classes[k].num_gpu) continue;
      const ModelMask mask = classes[k].models;
      if (mask != 0 && (groups[g].model >= 64 || !((mask >> groups[g].model) & 1))) continue;
      vars.push_back({k, g});
    }
  }
  if (vars.empty() || vars.size() > kMaxPairs) return out;
  out.groups_.assign(groups.begin(), groups.end());
  out.group_of_.assign(64 * (kMaxGpusPerNode + 1), -1);
  for (size_t g = 0; g < num_groups; ++g)
    if (groups[g].model < 64 && groups[g].gpu_count >= 0 && groups[g].gpu_count <= kMaxGpusPerNode)
      out.group_of_[groups[g].model * (kMaxGpusPerNode + 1) + groups[g].gpu_count] =
          static_cast<int>(g);
  out.gpu_price_.assign(num_groups, 0.0);
  out.cpu_price_.assign(num_groups, 0.0);
  // Rows: each class's demand, then each group's GPU and CPU, in GPUs and cores.
  std::vector<size_t> class_row(classes.size(), SIZE_MAX);
  size_t rows = 0;
  for (const auto& [k, g] : vars)
    if (class_row[k] == SIZE_MAX) class_row[k] = rows++;
  const size_t gpu_row = rows, cpu_row = rows + num_groups;
  rows += 2 * num_groups;
  const size_t n = vars.size();
  std::vector<double> a(rows * n, 0.0), b(rows, 0.0), c(n, 1.0);
  for (size_t k = 0; k < classes.size(); ++k)
    if (class_row[k] != SIZE_MAX) b[class_row[k]] = classes[k].demand / 1000.0;
  for (size_t g = 0; g < num_groups; ++g) {
    b[gpu_row + g] = std::max(0.0, groups[g].free_gpu) / 1000.0;
    b[cpu_row + g] = std::max(0.0, groups[g].free_cpu) / 1000.0;
  }
  for (size_t v = 0; v < n; ++v) {
    const auto [k, g] = vars[v];
    a[class_row[k] * n + v] = 1;
    a[(gpu_row + g) * n + v] = 1;
    a[(cpu_row + g) * n + v] = classes[k].cpu_per_gpu;
  }
  const std::vector<double> y = SolveLpDuals(a, b, c);
  for (size_t g = 0; g < num_groups; ++g) {
    out.gpu_price_[g] = y[gpu_row + g];  // GPU per GPU
    out.cpu_price_[g] = y[cpu_row + g];  // GPU per core: milli-GPU per milli-CPU
  }
  return out;
}

double CapacityPrices::Cost(size_t group, const Demand& d) const {
  return gpu_price_[group] * static_cast<double>(d.TotalMilliGpu()) +
         cpu_price_[group] * static_cast<double>(d.cpu.v);
}

double CapacityPrices::MinCost(const Demand& d) {
  if (min_cost_.known && min_cost_.cpu == d.cpu.v && min_cost_.gpu == d.TotalMilliGpu() &&
      min_cost_.num_gpu == d.num_gpu && min_cost_.models == d.models)
    return min_cost_.cost;
  double best = std::numeric_limits<double>::infinity();
  for (size_t g = 0; g < groups_.size(); ++g) {
    const CapacityGroup& gr = groups_[g];
    if (gr.gpu_count < d.num_gpu || !d.AllowsModel(gr.model)) continue;
    if (gr.free_cpu < static_cast<double>(d.cpu.v) ||
        gr.free_gpu < static_cast<double>(d.TotalMilliGpu()))
      continue;
    best = std::min(best, Cost(g, d));
  }
  min_cost_ = {true,      d.cpu.v,  d.TotalMilliGpu(),
               d.num_gpu, d.models, std::isfinite(best) ? best : 0.0};
  return min_cost_.cost;
}

double CapacityPrices::Loss(GpuModelId model, int gpu_count, const Demand& d) {
  if (d.num_gpu == 0 || groups_.empty() || model >= 64 || gpu_count < 0 ||
      gpu_count > kMaxGpusPerNode)
    return 0;
  const int g = group_of_[model * (kMaxGpusPerNode + 1) + gpu_count];
  return g < 0 ? 0 : std::max(0.0, Cost(static_cast<size_t>(g), d) - MinCost(d));
}

}  // namespace tessera
