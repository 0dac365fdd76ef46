// Shared by the fuzz targets: reports a violated property with the offending input and aborts,
// so libFuzzer and the standalone driver both record the input as a crash.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace tessera::fuzz {

[[noreturn]] inline void Fail(const char* what, std::string_view input) {
  std::fprintf(stderr, "property violated: %s\ninput (%zu bytes):\n", what, input.size());
  std::fwrite(input.data(), 1, input.size(), stderr);
  std::fputc('\n', stderr);
  std::abort();
}

}  // namespace tessera::fuzz
