// Fuzz target for DecodeAssignment (the tessera.io/assignment annotation, src/kube/translate.h).
//
// Properties: never crashes or throws. Decoding is deterministic. A rejection is InvalidArgument
// with a message. An accepted assignment re-encodes to text that decodes to the same assignment
// (EncodeAssignment and DecodeAssignment round-trip), with GPU indices that are not negative.
#include <cstdint>
#include <string_view>

#include "kube/translate.h"

#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tessera::fuzz::Fail;
  using tessera::kube::DecodeAssignment;
  using tessera::kube::EncodeAssignment;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto a = DecodeAssignment(input);
  const auto b = DecodeAssignment(input);
  if (a.ok() != b.ok()) Fail("decoding is not deterministic", input);
  if (!a.ok()) {
    if (a.status().code() != tessera::StatusCode::kInvalidArgument)
      Fail("rejection is not InvalidArgument", input);
    if (a.status().message().empty()) Fail("rejection without a message", input);
    if (a.status().ToString() != b.status().ToString()) Fail("errors differ", input);
    return 0;
  }
  if (!(*a == *b)) Fail("decoding is not deterministic", input);
  for (int g : a->gpus)
    if (g < 0) Fail("negative GPU index accepted", input);
  const std::string text = EncodeAssignment(*a);
  const auto again = DecodeAssignment(text);
  if (!again.ok()) Fail("re-encoded assignment does not decode", input);
  if (!(*again == *a)) Fail("assignment does not round-trip", input);
  return 0;
}
