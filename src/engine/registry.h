// Policy registry: scorers by name. Thread-safe for lookups after registration.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/policy.h"

namespace tessera {

class PolicyRegistry {
 public:
  using Factory = std::function<Result<std::unique_ptr<Scorer>>(const PolicyConfig&)>;

  Status Register(std::string name, std::string description, Factory factory);
  // Builds the named policy; NotFound (listing the known names) for an unknown one.
  Result<std::unique_ptr<Scorer>> Create(const PolicyConfig& config) const;
  std::vector<std::string> Names() const;
  std::string Describe(const std::string& name) const;

 private:
  struct Item {
    std::string description;
    Factory factory;
  };
  std::map<std::string, Item> items_;
};

}  // namespace tessera
