// Fuzz target for DecodeInventory (the tessera.io/gpu-inventory annotation, src/kube/translate.h).
//
// Properties: never crashes or throws. Decoding is deterministic. A rejection is InvalidArgument
// with a message. An accepted inventory has indices 0..n-1 in order and NVLink peers that are
// other GPUs of the node; it re-encodes to text that decodes to the same entries except the
// version, which becomes kInventoryVersion (EncodeInventory and DecodeInventory round-trip).
#include <cstdint>
#include <string_view>

#include "kube/translate.h"

#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tessera::fuzz::Fail;
  using tessera::kube::DecodeInventory;
  using tessera::kube::EncodeInventory;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto a = DecodeInventory(input);
  const auto b = DecodeInventory(input);
  if (a.ok() != b.ok()) Fail("decoding is not deterministic", input);
  if (!a.ok()) {
    if (a.status().code() != tessera::StatusCode::kInvalidArgument)
      Fail("rejection is not InvalidArgument", input);
    if (a.status().message().empty()) Fail("rejection without a message", input);
    if (a.status().ToString() != b.status().ToString()) Fail("errors differ", input);
    return 0;
  }
  if (!(*a == *b)) Fail("decoding is not deterministic", input);
  auto want = *a;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i].index != static_cast<int>(i)) Fail("indices are not 0..n-1 in order", input);
    for (int p : want[i].nvlink_peers)
      if (p < 0 || p >= static_cast<int>(want.size()) || p == want[i].index)
        Fail("NVLink peer outside the node accepted", input);
    want[i].version = tessera::kube::kInventoryVersion;
  }
  const auto again = DecodeInventory(EncodeInventory(*a));
  if (!again.ok()) Fail("re-encoded inventory does not decode", input);
  if (!(*again == want)) Fail("inventory does not round-trip", input);
  return 0;
}
