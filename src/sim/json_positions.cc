#include "sim/json_positions.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

}  // namespace

std::string JsonChild(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string JsonIndex(const std::string& parent, size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

std::string LineCol(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return std::to_string(line) + ":" + std::to_string(offset - line_start + 1);
}

std::string FormatNumber(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

size_t JsonPositions::Value(const std::string& path) const {
  auto it = values_.find(path);
  return it == values_.end() ? std::string::npos : it->second;
}

size_t JsonPositions::Key(const std::string& path) const {
  auto it = keys_.find(path);
  return it == keys_.end() ? Value(path) : it->second;
}

std::string JsonPositions::Build(std::string_view text, size_t* at) {
  struct Frame {
    bool object = false;
    std::string path;
    size_t index = 0;
    std::set<std::string> keys;
  };
  std::vector<Frame> stack;
  size_t pos = 0;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") pos = 3;
  auto skip_ws = [&] {
    while (pos < text.size() && IsSpace(text[pos])) ++pos;
  };
  auto skip_string = [&] {
    ++pos;
    while (pos < text.size() && text[pos] != '"') pos += text[pos] == '\\' ? 2 : 1;
    pos = std::min(pos + 1, text.size());
  };
  enum class Want { kValue, kKey, kAfter } want = Want::kValue;
  std::string path;
  while (true) {
    skip_ws();
    if (pos >= text.size()) return "";
    if (want == Want::kValue) {
      values_[path] = pos;
      const char c = text[pos];
      if (c == '{' || c == '[') {
        ++pos;
        stack.push_back(Frame{c == '{', path, 0, {}});
        skip_ws();
        if (pos < text.size() && (text[pos] == '}' || text[pos] == ']')) {
          ++pos;
          stack.pop_back();
          want = Want::kAfter;
        } else if (c == '{') {
          want = Want::kKey;
        } else {
          path = JsonIndex(stack.back().path, 0);
        }
        continue;
      }
      if (c == '"') {
        skip_string();
      } else {
        while (pos < text.size() && !IsSpace(text[pos]) && text[pos] != ',' && text[pos] != ']' &&
               text[pos] != '}')
          ++pos;
      }
      want = Want::kAfter;
    } else if (want == Want::kKey) {
      if (text[pos] != '"' || stack.empty()) return "";
      const size_t start = pos;
      skip_string();
      const nlohmann::json key =
          nlohmann::json::parse(text.substr(start, pos - start), nullptr, false);
      if (!key.is_string()) return "";
      Frame& top = stack.back();
      path = JsonChild(top.path, key.get<std::string>());
      if (!top.keys.insert(key.get<std::string>()).second) {
        *at = start;
        return path;
      }
      keys_[path] = start;
      skip_ws();
      if (pos >= text.size() || text[pos] != ':') return "";
      ++pos;
      want = Want::kValue;
    } else {
      if (stack.empty()) return "";
      const char c = text[pos++];
      if (c == ',') {
        if (stack.back().object) {
          want = Want::kKey;
        } else {
          path = JsonIndex(stack.back().path, ++stack.back().index);
          want = Want::kValue;
        }
      } else if (c == '}' || c == ']') {
        stack.pop_back();
      } else {
        return "";
      }
    }
  }
}

}  // namespace tessera
