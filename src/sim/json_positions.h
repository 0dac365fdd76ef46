// Source positions for JSON readers: byte offsets of every value and member key of a JSON text,
// by JSON path ("nodes[1].gpu_model"), so that semantic errors can name FILE:LINE:COL.
//
// JsonPositions::Build scans text that nlohmann has already accepted (iteratively, so any
// nesting depth is fine) and reports the first duplicate member key. Plain values; not
// thread-safe for concurrent Build, safe for concurrent reads afterwards.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

namespace tessera {

class JsonPositions {
 public:
  // Indexes `text` (kept by reference only during the call). Returns "" when no member key is
  // repeated, else the path of the first duplicate, with its offset in *at.
  std::string Build(std::string_view text, size_t* at);
  // Offset of the value at `path`, or std::string::npos.
  size_t Value(const std::string& path) const;
  // Offset of the member key at `path` (its value's offset for array elements / the root).
  size_t Key(const std::string& path) const;

 private:
  std::map<std::string, size_t> values_, keys_;
};

// "parent.key" ("key" at the root) and "parent[i]".
std::string JsonChild(const std::string& parent, const std::string& key);
std::string JsonIndex(const std::string& parent, size_t i);
// "LINE:COL" (1-based) of a byte offset in text; offsets past the end count as the end.
std::string LineCol(std::string_view text, size_t offset);
// Shortest decimal form of v, as an ostream prints it ("0.5", "1e+06").
std::string FormatNumber(double v);

}  // namespace tessera
