#include "advisor/numbers.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/text.h"

namespace tessera::advisor {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace

Result<double> ParseStrictDecimal(std::string_view t) {
  if (t.empty()) return InvalidArgument("empty value, expected a number");
  const std::string low = Lower(t);
  const std::string_view bare =
      (low[0] == '+' || low[0] == '-') ? std::string_view(low).substr(1) : std::string_view(low);
  if (bare == "nan") return InvalidArgument("NaN is not a valid value");
  if (bare == "inf" || bare == "infinity")
    return InvalidArgument("an infinity is not a valid value");
  const std::string quoted = QuotedValue(std::string(t));
  if (!PlainDecimal(std::string(t))) return InvalidArgument(quoted + " is not a number");
  double v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec == std::errc::result_out_of_range || !std::isfinite(v))
    return InvalidArgument(quoted + " is out of range");
  if (ec != std::errc() || p != t.data() + t.size())
    return InvalidArgument(quoted + " is not a number");
  return v;
}

Result<int64_t> ParseStrictInt(std::string_view t) {
  if (t.empty()) return InvalidArgument("empty value, expected an integer");
  int64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec == std::errc::result_out_of_range)
    return InvalidArgument(QuotedValue(std::string(t)) + " is out of range");
  if (ec != std::errc() || p != t.data() + t.size())
    return InvalidArgument(QuotedValue(std::string(t)) + " is not an integer");
  return v;
}

std::string FormatDecimal(double v, int digits) {
  std::string s = Printf("%.*f", digits, v);
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

double Percentile(std::vector<double>& values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  if (q <= 0) return values.front();
  if (q >= 1) return values.back();
  const double rank = std::ceil(q * static_cast<double>(values.size()));
  const size_t idx = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(idx, values.size() - 1)];
}

double TheilSenSlope(const std::vector<double>& x, const std::vector<double>& y,
                     double* agreement) {
  if (agreement) *agreement = 0;
  std::vector<double> slopes;
  const size_t n = std::min(x.size(), y.size());
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j)
      if (x[j] != x[i]) slopes.push_back((y[j] - y[i]) / (x[j] - x[i]));
  if (slopes.empty()) return 0;
  std::sort(slopes.begin(), slopes.end());
  const size_t m = slopes.size();
  const double median = m % 2 ? slopes[m / 2] : (slopes[m / 2 - 1] + slopes[m / 2]) / 2;
  if (agreement) {
    size_t same = 0;
    for (double v : slopes) same += (median > 0 && v > 0) || (median < 0 && v < 0);
    *agreement = static_cast<double>(same) / static_cast<double>(m);
  }
  return median;
}

}  // namespace tessera::advisor
