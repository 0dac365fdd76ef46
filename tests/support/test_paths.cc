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

}  // namespace tessera::test
