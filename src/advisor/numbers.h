// Number syntax and statistics shared by the advisor's readers and recommender. Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera::advisor {

// A finite decimal: optional '-', digits with optional fraction and exponent. InvalidArgument
// "empty value, expected a number", "NaN is not a valid value", "an infinity is not a valid
// value" (inf, +Inf, -Inf, infinity in any case) or "'TEXT' is not a number".
Result<double> ParseStrictDecimal(std::string_view text);
// A decimal integer (optional '-'). InvalidArgument "empty value, expected an integer", "'TEXT'
// is not an integer" or "'TEXT' is out of range".
Result<int64_t> ParseStrictInt(std::string_view text);
// Fixed notation rounded to `digits` decimals, trailing zeros (and a bare '.') removed; "-0"
// written as "0". Finite values only.
std::string FormatDecimal(double v, int digits);

// Nearest-rank percentile (q in [0, 1]) of `values`, which it sorts; 0 for an empty vector.
// q = 0 gives the minimum, q = 1 the maximum; otherwise the value of rank ceil(q * n).
double Percentile(std::vector<double>& values, double q);
// Median of pairwise slopes (Theil-Sen) of points (x[i], y[i]); 0 for fewer than two distinct x.
// agreement (optional): the fraction of pairwise slopes with the sign of the median slope.
double TheilSenSlope(const std::vector<double>& x, const std::vector<double>& y,
                     double* agreement = nullptr);

}  // namespace tessera::advisor
