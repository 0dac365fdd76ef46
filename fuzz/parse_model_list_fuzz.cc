// Fuzz target for ParseModelList (src/sim/trace.h).
//
// Properties: never crashes. The result agrees with the contract: the empty text gives mask 0
// (any model); otherwise the text splits at '|' into names, and it parses iff every name
// (including empty ones between, before or after bars) is a catalog name, giving the union of
// their bits, which is never 0. Errors name the first unknown model.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cluster/gpu_catalog.h"
#include "sim/trace.h"

#include "fuzz/fuzz_util.h"

namespace {

using tessera::fuzz::Fail;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto mask = ParseModelList(input);
  const GpuCatalog& catalog = GpuCatalog::Builtin();

  bool ok = true;
  ModelMask expect = 0;
  std::string first_unknown;
  if (!input.empty()) {
    size_t start = 0;
    while (true) {
      const size_t bar = input.find('|', start);
      const std::string_view name =
          input.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start);
      const auto id = catalog.Find(name);
      if (id) {
        if (*id >= 64) Fail("catalog id does not fit a ModelMask", input);
        expect |= ModelMask{1} << *id;
      } else if (ok) {
        ok = false;
        first_unknown = name;
      }
      if (bar == std::string_view::npos) break;
      start = bar + 1;
    }
  }

  if (mask.ok() != ok) Fail(ok ? "valid list rejected" : "invalid list accepted", input);
  if (!ok) {
    if (mask.status().message().find("'" + first_unknown + "'") == std::string::npos)
      Fail("error does not name the first unknown model", input);
    return 0;
  }
  if (*mask != expect) Fail("mask differs from the union of the named models", input);
  if (!input.empty() && *mask == 0) Fail("non-empty list gave the any-model mask", input);
  return 0;
}
