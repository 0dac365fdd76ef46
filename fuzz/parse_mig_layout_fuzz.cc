// Fuzz target for ParseMigLayout (src/cluster/mig_geometry.h).
//
// The first input byte picks a MIG geometry; the rest is the layout text. Properties: never
// crashes; an accepted layout is legal (CheckMigLayout), sorted by start, and its canonical text
// (MigLayoutString) parses back to the same layout; a rejected one carries a message.
#include <cstdint>
#include <string>
#include <string_view>

#include "cluster/mig_geometry.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  using tessera::fuzz::Fail;
  if (size == 0) return 0;
  const auto& geos = AllMigGeometries();
  const MigGeometry& geo = geos[data[0] % geos.size()];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto layout = ParseMigLayout(geo, text);
  if (!layout.ok()) {
    if (layout.status().message().empty()) Fail("rejection without a message", text);
    return 0;
  }
  if (!CheckMigLayout(geo, *layout).ok()) Fail("accepted an illegal layout", text);
  for (size_t i = 1; i < layout->size(); ++i)
    if ((*layout)[i - 1].start >= (*layout)[i].start) Fail("layout not sorted by start", text);
  if (layout->empty()) return 0;
  auto again = ParseMigLayout(geo, MigLayoutString(geo, *layout));
  if (!again.ok() || *again != *layout) Fail("canonical text does not round-trip", text);
  return 0;
}
