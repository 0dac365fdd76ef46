#include "apps/tessera/cli_util.h"

#include <algorithm>
#include <cstdio>

namespace tessera {
namespace {

Result<uint64_t> ParseSeed(const std::string& text, const std::string& list) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    return InvalidArgument("bad seed list '" + list + "' (use e.g. 42-51 or 1,2,3)");
  return std::stoull(text);
}

}  // namespace

Result<std::vector<uint64_t>> ParseSeedList(const std::string& text) {
  std::vector<uint64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string part = text.substr(pos, comma - pos);
    pos = comma + 1;
    const size_t dash = part.find('-');
    auto a = ParseSeed(part.substr(0, dash), text);
    if (!a.ok()) return a.status();
    if (dash == std::string::npos) {
      out.push_back(*a);
      continue;
    }
    auto b = ParseSeed(part.substr(dash + 1), text);
    if (!b.ok()) return b.status();
    if (*b < *a || *b - *a > 10000) return InvalidArgument("bad seed range '" + part + "'");
    for (uint64_t s = *a; s <= *b; ++s) out.push_back(s);
  }
  return out;
}

std::vector<std::string> SplitComma(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    if (comma > pos) out.push_back(text.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return out;
}

int Fail(const Status& st) {
  std::fprintf(stderr, "tessera: %s\n", st.message().c_str());
  return 1;
}

}  // namespace tessera
