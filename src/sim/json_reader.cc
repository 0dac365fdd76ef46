#include "sim/json_reader.h"

#include <algorithm>
#include <cmath>

namespace tessera {
namespace {

std::string SyntaxMessage(const std::string& what) {
  // nlohmann: "[json.exception.parse_error.101] parse error at line L, column C: MESSAGE"
  const size_t col = what.find("column ");
  if (col != std::string::npos) {
    const size_t colon = what.find(": ", col);
    if (colon != std::string::npos) return what.substr(colon + 2);
  }
  const size_t bracket = what.find("] ");
  return bracket == std::string::npos ? what : what.substr(bracket + 2);
}

}  // namespace

Status ParseJsonText(std::string_view text, const std::string& file, nlohmann::json* doc) {
  try {
    *doc = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    const size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    return InvalidArgument(file + ":" + LineCol(text, offset) +
                           ": JSON syntax error: " + SyntaxMessage(e.what()));
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(file + ": JSON error: " + SyntaxMessage(e.what()));
  }
  return Status::Ok();
}

Status JsonSchemaReader::Error(const std::string& path, const std::string& msg) const {
  return At(positions_.Value(path), path, msg);
}

Status JsonSchemaReader::KeyError(const std::string& path, const std::string& msg) const {
  return At(positions_.Key(path), path, msg);
}

Status JsonSchemaReader::Object(const json& v, const std::string& path,
                                std::initializer_list<const char*> keys,
                                std::initializer_list<const char*> required) const {
  if (!v.is_object()) return Error(path, "must be an object");
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    if (std::none_of(keys.begin(), keys.end(), [&](const char* a) { return k == a; })) {
      std::string known;
      for (const char* a : keys) known += std::string(known.empty() ? "" : ", ") + a;
      return KeyError(JsonChild(path, k), "unknown key '" + k + "' (known: " + known + ")");
    }
  }
  for (const char* r : required) {
    if (!v.contains(r)) return Error(path, std::string("missing required key '") + r + "'");
  }
  return Status::Ok();
}

Status JsonSchemaReader::Bool(const json& obj, const char* key, const std::string& path,
                              bool* out) const {
  if (!obj.contains(key)) return Status::Ok();
  const json& v = obj.at(key);
  if (!v.is_boolean()) return Error(JsonChild(path, key), "must be true or false");
  *out = v.get<bool>();
  return Status::Ok();
}

Status JsonSchemaReader::Int(const json& v, const std::string& path, int64_t lo, int64_t hi,
                             int64_t* out) const {
  const std::string range = " in " + std::to_string(lo) + ".." + std::to_string(hi);
  if (!v.is_number_integer()) return Error(path, "must be an integer" + range);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    return Error(path, "must be" + range);
  const int64_t i =
      v.is_number_unsigned() ? static_cast<int64_t>(v.get<uint64_t>()) : v.get<int64_t>();
  if (i < lo || i > hi) return Error(path, "must be" + range);
  *out = i;
  return Status::Ok();
}

Status JsonSchemaReader::Number(const json& v, const std::string& path, double lo, double hi,
                                bool lo_open, double* out) const {
  const std::string range =
      std::string(lo_open ? " in (" : " in [") + FormatNumber(lo) + ", " + FormatNumber(hi) + "]";
  if (!v.is_number()) return Error(path, "must be a number" + range);
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || (lo_open && d == lo) || d > hi)
    return Error(path, "must be" + range);
  *out = d;
  return Status::Ok();
}

Status JsonSchemaReader::NumberKey(const json& obj, const char* key, const std::string& path,
                                   double lo, double hi, bool lo_open, double* out) const {
  if (!obj.contains(key)) return Status::Ok();
  return Number(obj.at(key), JsonChild(path, key), lo, hi, lo_open, out);
}

Status JsonSchemaReader::At(size_t offset, const std::string& path, const std::string& msg) const {
  std::string where = file_;
  if (offset != std::string::npos) where += ":" + LineCol(text_, offset);
  return InvalidArgument(where + ": " + (path.empty() ? "" : path + ": ") + msg);
}

}  // namespace tessera
