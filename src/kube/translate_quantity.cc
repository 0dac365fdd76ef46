// Kubernetes resource quantities (translate.h: ParseQuantityMilli, ParseQuantityMiB,
// ParseQuantityInt): exact decimal and binary suffix arithmetic in 128 bits.
#include <cctype>
#include <charconv>

#include "kube/translate.h"

namespace tessera::kube {
namespace {

using i128 = __int128;

// ---- Quantities ----

struct ParsedQuantity {
  bool negative = false;
  i128 mantissa = 0;
  int dec_exp = 0;
  int bin_exp = 0;
};

Status BadQuantity(const std::string& text, const std::string& why) {
  return InvalidArgument("malformed quantity \"" + text + "\": " + why);
}

Result<std::string> QuantityText(const Json& q) {
  if (q.is_string()) return q.get<std::string>();
  if (q.is_number_integer() || q.is_number_unsigned()) return q.dump();
  if (q.is_number_float()) return q.dump();
  return InvalidArgument("quantity must be a string or a number, got " + q.dump());
}

Result<ParsedQuantity> ParseQuantityText(const std::string& s) {
  ParsedQuantity p;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) p.negative = s[i++] == '-';
  std::string int_digits, frac_digits;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) int_digits += s[i++];
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) frac_digits += s[i++];
  }
  if (int_digits.empty() && frac_digits.empty()) return BadQuantity(s, "no digits");
  while (!frac_digits.empty() && frac_digits.back() == '0') frac_digits.pop_back();
  for (char c : int_digits + frac_digits) {
    if (__builtin_mul_overflow(p.mantissa, static_cast<i128>(10), &p.mantissa) ||
        __builtin_add_overflow(p.mantissa, static_cast<i128>(c - '0'), &p.mantissa))
      return BadQuantity(s, "out of range");
  }
  p.dec_exp = -static_cast<int>(frac_digits.size());
  const std::string suffix = s.substr(i);
  static const std::map<std::string, std::pair<int, int>> kSuffixes = {
      {"", {0, 0}},    {"n", {-9, 0}},  {"u", {-6, 0}},  {"m", {-3, 0}},
      {"k", {3, 0}},   {"M", {6, 0}},   {"G", {9, 0}},   {"T", {12, 0}},
      {"P", {15, 0}},  {"E", {18, 0}},  {"Ki", {0, 10}}, {"Mi", {0, 20}},
      {"Gi", {0, 30}}, {"Ti", {0, 40}}, {"Pi", {0, 50}}, {"Ei", {0, 60}}};
  if (auto it = kSuffixes.find(suffix); it != kSuffixes.end()) {
    p.dec_exp += it->second.first;
    p.bin_exp = it->second.second;
    return p;
  }
  if (suffix[0] == 'e' || suffix[0] == 'E') {
    size_t j = 1;
    bool neg = false;
    if (j < suffix.size() && (suffix[j] == '+' || suffix[j] == '-')) neg = suffix[j++] == '-';
    if (j == suffix.size()) return BadQuantity(s, "exponent without digits");
    int e = 0;
    for (; j < suffix.size(); ++j) {
      if (!std::isdigit(static_cast<unsigned char>(suffix[j])))
        return BadQuantity(s, "unknown suffix \"" + suffix + "\"");
      e = e * 10 + (suffix[j] - '0');
      if (e > 100) return BadQuantity(s, "out of range");
    }
    p.dec_exp += neg ? -e : e;
    return p;
  }
  return BadQuantity(s, "unknown suffix \"" + suffix + "\"");
}

// value × num / den, rounded up (or down), as an int64.
Result<int64_t> ScaleQuantity(const std::string& text, const ParsedQuantity& p, i128 num, i128 den,
                              bool round_up) {
  if (p.mantissa == 0) return int64_t{0};
  i128 n = p.mantissa, d = den;
  auto mul = [](i128& x, i128 k) { return !__builtin_mul_overflow(x, k, &x); };
  bool ok = mul(n, num);
  for (int e = 0; ok && e < p.dec_exp; ++e) ok = mul(n, 10);
  for (int e = 0; ok && e < p.bin_exp; ++e) ok = mul(n, 2);
  for (int e = 0; ok && e < -p.dec_exp; ++e) ok = mul(d, 10);
  if (!ok) return BadQuantity(text, "out of range");
  i128 q = n / d;
  const bool exact = n % d == 0;
  if (p.negative) {
    q = -q;
    if (!exact && !round_up) q -= 1;
  } else if (!exact && round_up) {
    q += 1;
  }
  if (q > INT64_MAX || q < INT64_MIN) return BadQuantity(text, "out of range");
  return static_cast<int64_t>(q);
}

Result<int64_t> ParseScaled(const Json& q, i128 num, i128 den, bool round_up, bool exact) {
  auto text = QuantityText(q);
  if (!text.ok()) return text.status();
  auto p = ParseQuantityText(*text);
  if (!p.ok()) return p.status();
  if (exact) {
    auto up = ScaleQuantity(*text, *p, num, den, true);
    auto down = ScaleQuantity(*text, *p, num, den, false);
    if (!up.ok()) return up.status();
    if (!down.ok() || *up != *down)
      return InvalidArgument("must be an integer, got \"" + *text + "\"");
    return up;
  }
  return ScaleQuantity(*text, *p, num, den, round_up);
}

}  // namespace

// ---- Public: quantities ----

Result<int64_t> ParseQuantityMilli(const Json& q) {
  return ParseScaled(q, 1000, 1, true, false);
}

Result<int64_t> ParseQuantityMiB(const Json& q, bool round_up) {
  return ParseScaled(q, 1, i128{1} << 20, round_up, false);
}

Result<int64_t> ParseQuantityInt(const Json& q) {
  return ParseScaled(q, 1, 1, true, true);
}

}  // namespace tessera::kube
