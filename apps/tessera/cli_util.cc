#include "apps/tessera/cli_util.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

namespace tessera {
namespace {

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The value as given, quoted, on one line: control bytes as \xNN, long values cut at 64 bytes.
std::string Quoted(const std::string& text) {
  std::string out = "'";
  for (size_t i = 0; i < text.size() && i < 64; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + (text.size() > 64 ? "...'" : "'");
}

bool ParseU64(const std::string& text, uint64_t* v) {
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, *v);
  return !text.empty() && ec == std::errc() && p == end;
}

// Decimal number syntax of the flags: what from_chars accepts minus nan/inf spellings.
bool PlainDecimal(const std::string& t) {
  size_t i = t.size() > 0 && t[0] == '-' ? 1 : 0;
  size_t digits = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++digits;
  if (i < t.size() && t[i] == '.') {
    ++i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == t.size();
}

constexpr const char* kSeedListHint = " (use e.g. 42-51 or 1,2,3)";

}  // namespace

Result<double> ParseNumberFlag(const std::string& flag, const std::string& text, double min,
                               double max, bool min_open) {
  const std::string range =
      std::string(min_open ? "(" : "[") + Number(min) + ", " + Number(max) + "]";
  if (!PlainDecimal(text))
    return InvalidArgument(flag + ": " + Quoted(text) + " is not a number; allowed range " + range);
  double v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && !std::isfinite(v)))
    return InvalidArgument(flag + ": " + Quoted(text) + " is outside the allowed range " + range);
  if (ec != std::errc() || p != end)
    return InvalidArgument(flag + ": " + Quoted(text) + " is not a number; allowed range " + range);
  if (v < min || (min_open && v == min) || v > max)
    return InvalidArgument(flag + ": " + Quoted(text) + " is outside the allowed range " + range);
  return v + 0.0;  // -0 -> 0
}

Result<int64_t> ParseIntFlag(const std::string& flag, const std::string& text, int64_t min,
                             int64_t max) {
  const std::string range = std::to_string(min) + ".." + std::to_string(max);
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range && p == end)
    return InvalidArgument(flag + ": " + Quoted(text) + " is outside the allowed range " + range);
  if (text.empty() || ec != std::errc() || p != end)
    return InvalidArgument(flag + ": " + Quoted(text) + " is not an integer; allowed range " +
                           range);
  if (v < min || v > max)
    return InvalidArgument(flag + ": " + Quoted(text) + " is outside the allowed range " + range);
  return v;
}

Result<uint64_t> ParseSeedFlag(const std::string& flag, const std::string& text) {
  uint64_t v = 0;
  if (!ParseU64(text, &v))
    return InvalidArgument(flag + ": " + Quoted(text) + " is not a seed; allowed range 0.." +
                           std::to_string(std::numeric_limits<uint64_t>::max()));
  return v;
}

Result<unsigned> ParseThreadsFlag(const std::string& flag, const std::string& text) {
  auto v = ParseIntFlag(flag, text, 0, kMaxThreads);
  if (!v.ok()) return v.status();
  return static_cast<unsigned>(*v);
}

Result<std::vector<uint64_t>> ParseSeedList(const std::string& flag, const std::string& text) {
  if (text.empty()) return InvalidArgument(flag + ": empty seed list" + kSeedListHint);
  std::vector<uint64_t> out;
  std::set<uint64_t> seen;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string part = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (part.empty())
      return InvalidArgument(flag + ": empty item in " + Quoted(text) + kSeedListHint);
    const size_t dash = part.find('-');
    const std::string first = part.substr(0, dash);
    const std::string last = dash == std::string::npos ? first : part.substr(dash + 1);
    uint64_t a = 0, b = 0;
    if (!ParseU64(first, &a) || !ParseU64(last, &b))
      return InvalidArgument(flag + ": " + Quoted(part) + " is not a seed or a range of seeds" +
                             kSeedListHint);
    if (b < a) return InvalidArgument(flag + ": range " + Quoted(part) + " is descending");
    if (b - a >= kMaxSeeds || out.size() + (b - a) + 1 > kMaxSeeds)
      return InvalidArgument(flag + ": " + Quoted(text) + " names more than " +
                             std::to_string(kMaxSeeds) + " seeds");
    for (uint64_t s = a;; ++s) {
      if (!seen.insert(s).second)
        return InvalidArgument(flag + ": seed " + std::to_string(s) + " given twice");
      out.push_back(s);
      if (s == b) break;
    }
  }
  return out;
}

Result<std::vector<std::string>> ParseNameList(const std::string& flag, const std::string& text,
                                               const std::vector<std::string>& known) {
  const std::string valid = "; valid names: " + JoinNames(known);
  if (text.empty()) return InvalidArgument(flag + ": empty list" + valid);
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    std::string name = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (name.empty()) return InvalidArgument(flag + ": empty name in " + Quoted(text) + valid);
    if (std::find(known.begin(), known.end(), name) == known.end())
      return InvalidArgument(flag + ": unknown name " + Quoted(name) + valid);
    if (std::find(out.begin(), out.end(), name) != out.end())
      return InvalidArgument(flag + ": " + Quoted(name) + " given twice");
    out.push_back(std::move(name));
  }
  return out;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

int Fail(const Status& st) {
  std::fprintf(stderr, "tessera: %s\n", st.message().c_str());
  return 1;
}

}  // namespace tessera
