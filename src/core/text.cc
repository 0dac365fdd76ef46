#include "core/text.h"

namespace tessera {

std::string QuotedValue(const std::string& text) {
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

bool PlainDecimal(const std::string& t, bool allow_plus) {
  size_t i = !t.empty() && (t[0] == '-' || (allow_plus && t[0] == '+')) ? 1 : 0;
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

}  // namespace tessera
