// Fuzz target for the Prometheus range-query reader (src/advisor/prometheus.h).
//
// Properties: never crashes. A rejected input gives InvalidArgument whose message starts with
// "SOURCE:" (or Unavailable for a well-formed API error response). An accepted response has, in
// every series, finite samples in range (MiB >= 0; ratios in 0..1) with strictly increasing
// timestamps, a GPU identity (host or UUID), and skip counts that add up to the total.
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "advisor/prometheus.h"

#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera::advisor;
  using tessera::fuzz::Fail;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto r = ParsePrometheusRange(input, "fuzz.json");
  if (!r.ok()) {
    const auto code = r.status().code();
    if (code != tessera::StatusCode::kInvalidArgument && code != tessera::StatusCode::kUnavailable)
      Fail("rejection is neither InvalidArgument nor Unavailable", input);
    if (r.status().message().rfind("fuzz.json", 0) != 0)
      Fail("error does not start with the source name", input);
    return 0;
  }
  int64_t skipped = 0;
  for (const PromSeries& s : r->series) {
    if (s.hostname.empty() && s.uuid.empty()) Fail("series without a GPU identity", input);
    skipped += s.skipped_non_finite;
    for (size_t i = 0; i < s.samples.size(); ++i) {
      const PromSample& p = s.samples[i];
      if (!std::isfinite(p.value) || !std::isfinite(p.t_s) || p.value < 0)
        Fail("sample not finite and non-negative", input);
      if (s.field != DcgmField::kFbUsedMib && s.field != DcgmField::kAgentPodMemoryMib &&
          s.field != DcgmField::kPodAllocatedGpus && p.value > 1)
        Fail("ratio above 1", input);
      if (i > 0 && p.t_s <= s.samples[i - 1].t_s) Fail("timestamps not increasing", input);
    }
  }
  if (skipped != r->skipped_non_finite) Fail("skip counts do not add up", input);
  return 0;
}
