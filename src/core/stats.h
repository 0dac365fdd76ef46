// Sample statistics shared by the simulators' reports. Pure functions.
#pragma once

#include <vector>

namespace tessera {

// The q-quantile (0 <= q <= 1) of an ascending sample, interpolated linearly between order
// statistics; 0 for an empty sample.
double SortedQuantile(const std::vector<double>& sorted, double q);

// The same for a sample in any order.
double Quantile(std::vector<double> values, double q);

}  // namespace tessera
