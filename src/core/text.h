// Text helpers shared by the command line and the simulators' flag parsers. Pure functions.
#pragma once

#include <cstdio>
#include <string>

namespace tessera {

// snprintf into a std::string.
template <typename... Args>
std::string Printf(const char* fmt, Args... args) {
  const int n = std::snprintf(nullptr, 0, fmt, args...);
  if (n <= 0) return "";
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), fmt, args...);
  out.resize(static_cast<size_t>(n));
  return out;
}

// A value as given, quoted, on one line: control bytes as \xNN, values over 64 bytes cut
// ("...'").
std::string QuotedValue(const std::string& text);

// Decimal number syntax of flag values and data files: an optional '-' (or '+' with
// allow_plus), digits with an optional fraction and exponent; no spaces, hex, nan or inf (what
// from_chars accepts minus those spellings).
bool PlainDecimal(const std::string& text, bool allow_plus = false);

}  // namespace tessera
