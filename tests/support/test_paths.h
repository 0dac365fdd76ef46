// Where the tests find their files: the source tree and the reference material beside it
// (../shared). Only test_paths.cc has the paths compiled in, so no other test object depends on
// where the tree is checked out, and a compiler cache serves them to any checkout.
#pragma once

#include <string>

namespace tessera::test {

// The repository's root, e.g. for bench/scenarios/ and deploy/.
const std::string& SourceDir();
// The reference material beside the repository (traces/, benchmarks/, reference/).
const std::string& SharedDir();

}  // namespace tessera::test
