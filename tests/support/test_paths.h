// Where the tests find their files: the source tree, the reference material beside it
// (../shared) and built programs. Only test_paths.cc has the paths compiled in, so no other test
// object depends on where the tree is checked out, and a compiler cache serves them to any
// checkout.
#pragma once

#include <string>

namespace tessera::test {

// The repository's root, e.g. for bench/scenarios/ and deploy/.
std::string SourceDir();
// The reference material beside the repository (traces/, benchmarks/, reference/).
std::string SharedDir();
// The `tessera` CLI of this build.
std::string TesseraBinary();
// The folder of the fake libnvidia-ml.so.1 (tests/agent), built when TESSERA_HAVE_FAKE_NVML.
std::string FakeNvmlDir();
// The folder of the fake without nvmlDeviceGetProcessUtilization (an older driver).
std::string OldNvmlDir();

}  // namespace tessera::test
