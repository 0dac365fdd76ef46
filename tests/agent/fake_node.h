// Test fixtures shared by the node-agent tests: a fake NVML configuration written to a temporary
// file (TESSERA_FAKE_NVML_CONFIG points at it while the object lives) and the fake's MIG state
// file, read back as JSON.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tessera::agent::testing_support {

using Json = nlohmann::json;

inline std::string TempPath(const std::string& stem) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "_" + info->name();
  for (char& c : name)
    if (c == '/') c = '_';
  return ::testing::TempDir() + "tessera_" + name + "_" + std::to_string(getpid()) + "_" + stem;
}

class FakeNode {
 public:
  explicit FakeNode(Json cfg) : path_(TempPath("nvml.json")), state_(TempPath("nvml-state.json")) {
    std::remove(state_.c_str());
    cfg["state_file"] = state_;
    Write(cfg);
  }
  ~FakeNode() {
    std::remove(path_.c_str());
    std::remove(state_.c_str());
    unsetenv("TESSERA_FAKE_NVML_CONFIG");
  }
  // Replaces the configuration (e.g. to add or clear a "fail" entry); the MIG state stays in
  // the state file.
  void Write(const Json& cfg) {
    Json c = cfg;
    c["state_file"] = state_;
    std::ofstream(path_) << c.dump(1);
    setenv("TESSERA_FAKE_NVML_CONFIG", path_.c_str(), 1);
  }
  // The fake's MIG state file: [{"uuid", "mig", "gpu_instances": [{"id", "profile", "start",
  // "cis": [...]}]}], or null before the first change.
  Json State() const {
    std::ifstream in(state_);
    if (!in) return Json();
    return Json::parse(in);
  }
  // "profile@start" of every GPU instance of one GPU in the state file, with "!" appended to
  // those without a compute instance.
  std::string Instances(int gpu) const {
    const Json s = State();
    std::string out;
    if (!s.is_array()) return out;
    std::vector<std::pair<int, std::string>> gis;
    for (const Json& gi : s.at(static_cast<size_t>(gpu)).at("gpu_instances"))
      gis.emplace_back(gi.at("start").get<int>(), gi.at("profile").get<std::string>() + "@" +
                                                      std::to_string(gi.at("start").get<int>()) +
                                                      (gi.at("cis").empty() ? "!" : ""));
    std::sort(gis.begin(), gis.end());
    for (const auto& [start, text] : gis) out += (out.empty() ? "" : " ") + text;
    return out;
  }
  const std::string& state_path() const { return state_; }

 private:
  std::string path_, state_;
};

}  // namespace tessera::agent::testing_support
