#include "tests/support/test_paths.h"

namespace tessera::test {

const std::string& SourceDir() {
  static const std::string dir = TESSERA_SOURCE_DIR;
  return dir;
}

const std::string& SharedDir() {
  static const std::string dir = TESSERA_SHARED_DIR;
  return dir;
}

const std::string& TesseraBinary() {
  static const std::string path = TESSERA_BINARY;
  return path;
}

const std::string& FakeNvmlDir() {
  static const std::string dir = TESSERA_FAKE_NVML_DIR;
  return dir;
}

const std::string& OldNvmlDir() {
  static const std::string dir = TESSERA_OLD_NVML_DIR;
  return dir;
}

}  // namespace tessera::test
