// JSON field readers shared by the Kubernetes object translators (translate.cc,
// annotations.cc). They never throw on wrong types: a missing or null field is absent, a field of
// the wrong type is InvalidArgument naming `what.key`. Internal to src/kube.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>

#include "core/status.h"
#include "kube/translate.h"

namespace tessera::kube::json_fields {

inline const Json* Field(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

inline const Json* Path(const Json& obj, std::initializer_list<const char*> keys) {
  const Json* cur = &obj;
  for (const char* k : keys) {
    cur = Field(*cur, k);
    if (!cur) return nullptr;
  }
  return cur;
}

inline std::string Str(const Json& obj, const char* key, std::string def = "") {
  const Json* f = Field(obj, key);
  return f && f->is_string() ? f->get<std::string>() : def;
}

inline Result<std::map<std::string, std::string>> StringMap(const Json* j,
                                                            const std::string& what) {
  std::map<std::string, std::string> out;
  if (!j) return out;
  if (!j->is_object()) return InvalidArgument(what + " must be an object");
  for (auto it = j->begin(); it != j->end(); ++it) {
    if (!it.value().is_string())
      return InvalidArgument(what + "[\"" + it.key() + "\"] must be a string");
    out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

inline Result<int64_t> IntField(const Json& obj, const char* key, int64_t def,
                                const std::string& what) {
  const Json* f = Field(obj, key);
  if (!f) return def;
  if (!f->is_number_integer() && !f->is_number_unsigned())
    return InvalidArgument(what + "." + key + " must be an integer");
  if (f->is_number_unsigned() && f->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    return InvalidArgument(what + "." + key + " is out of range");
  return f->get<int64_t>();
}

inline Result<std::string> StrField(const Json& obj, const char* key, const std::string& what) {
  const Json* f = Field(obj, key);
  if (!f) return std::string();
  if (!f->is_string()) return InvalidArgument(what + "." + key + " must be a string");
  return f->get<std::string>();
}

}  // namespace tessera::kube::json_fields
