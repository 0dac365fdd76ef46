#include "engine/registry.h"

namespace tessera {

Status PolicyRegistry::Register(std::string name, std::string description, Factory factory) {
  if (items_.count(name)) return AlreadyExists("policy '" + name + "' already registered");
  items_.emplace(std::move(name), Item{std::move(description), std::move(factory)});
  return Status::Ok();
}

Result<std::unique_ptr<Scorer>> PolicyRegistry::Create(const PolicyConfig& config) const {
  auto it = items_.find(config.name);
  if (it == items_.end()) {
    std::string known;
    for (const auto& [n, _] : items_) known += (known.empty() ? "" : ", ") + n;
    return NotFound("unknown policy '" + config.name + "' (known: " + known + ")");
  }
  return it->second.factory(config);
}

std::vector<std::string> PolicyRegistry::Names() const {
  std::vector<std::string> out;
  for (const auto& [n, _] : items_) out.push_back(n);
  return out;
}

std::string PolicyRegistry::Describe(const std::string& name) const {
  auto it = items_.find(name);
  return it == items_.end() ? "" : it->second.description;
}

}  // namespace tessera
