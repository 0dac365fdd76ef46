#include "tests/support/test_paths.h"

namespace tessera::test {

std::string SourceDir() {
  return TESSERA_SOURCE_DIR;
}
std::string SharedDir() {
  return TESSERA_SHARED_DIR;
}
std::string TesseraBinary() {
  return TESSERA_BINARY;
}
std::string FakeNvmlDir() {
  return TESSERA_FAKE_NVML_DIR;
}
std::string OldNvmlDir() {
  return TESSERA_OLD_NVML_DIR;
}

}  // namespace tessera::test
