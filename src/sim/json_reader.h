// Schema checks for the JSON scenario readers, each error naming FILE:LINE:COL and the JSON
// path of the offending value or key (positions from JsonPositions). Checks of optional keys
// return Ok and leave *out unchanged when the key is absent. Internal to src/sim; holds the
// text and the position index by reference, so both must outlive the reader. Thread-compatible.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "sim/json_positions.h"

namespace tessera {

// Parses a whole JSON text into *doc. InvalidArgument "FILE:LINE:COL: JSON syntax error: ..."
// (or "FILE: JSON error: ...") with nlohmann's message, without its prefix.
Status ParseJsonText(std::string_view text, const std::string& file, nlohmann::json* doc);

class JsonSchemaReader {
 public:
  using json = nlohmann::json;

  JsonSchemaReader(std::string_view text, std::string file, const JsonPositions& positions)
      : text_(text), file_(std::move(file)), positions_(positions) {}

  // InvalidArgument "FILE:LINE:COL: PATH: MSG" at the value (Error) or member key (KeyError).
  Status Error(const std::string& path, const std::string& msg) const;
  Status KeyError(const std::string& path, const std::string& msg) const;

  // v is an object with only `keys` and at least `required`.
  Status Object(const json& v, const std::string& path, std::initializer_list<const char*> keys,
                std::initializer_list<const char*> required) const;
  Status Bool(const json& obj, const char* key, const std::string& path, bool* out) const;
  // An integer in [lo, hi].
  Status Int(const json& v, const std::string& path, int64_t lo, int64_t hi, int64_t* out) const;
  template <typename T>
  Status IntKey(const json& obj, const char* key, const std::string& path, int64_t lo, int64_t hi,
                T* out) const {
    if (!obj.contains(key)) return Status::Ok();
    int64_t v = 0;
    TESSERA_RETURN_IF_ERROR(Int(obj.at(key), JsonChild(path, key), lo, hi, &v));
    *out = static_cast<T>(v);
    return Status::Ok();
  }
  // A finite number in [lo, hi], or (lo, hi] when lo_open.
  Status Number(const json& v, const std::string& path, double lo, double hi, bool lo_open,
                double* out) const;
  Status NumberKey(const json& obj, const char* key, const std::string& path, double lo, double hi,
                   bool lo_open, double* out) const;

 private:
  Status At(size_t offset, const std::string& path, const std::string& msg) const;

  std::string_view text_;
  std::string file_;
  const JsonPositions& positions_;
};

}  // namespace tessera
