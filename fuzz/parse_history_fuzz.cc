// Fuzz target for the advisor's offline inputs: the history CSV (src/advisor/usage.h) and the
// price table (src/advisor/config.h). The first input byte picks the reader (even: history,
// odd: price table), the rest is the file text.
//
// Properties: never crashes. A rejected input gives InvalidArgument "SOURCE:LINE:COL: ...". An
// accepted history satisfies the reader's contract (finite samples in range, strictly increasing
// timestamps per series, a request on every workload) and round-trips: HistoryCsv of it reads
// back to the same text. Advise on an accepted history either succeeds with recommendations that
// never exceed the request, or fails only for a missing price.
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "advisor/config.h"
#include "advisor/recommend.h"
#include "advisor/usage.h"

#include "fuzz/fuzz_util.h"

namespace {

using tessera::fuzz::Fail;

void CheckError(const tessera::Status& st, const std::string& source, std::string_view input) {
  if (st.code() != tessera::StatusCode::kInvalidArgument)
    Fail("rejection is not InvalidArgument", input);
  const std::string& m = st.message();
  const std::string prefix = source + ":";
  if (m.rfind(prefix, 0) != 0) Fail("error does not start with the source name", input);
  size_t i = prefix.size();
  for (int part = 0; part < 2; ++part) {
    const size_t from = i;
    while (i < m.size() && m[i] >= '0' && m[i] <= '9') ++i;
    if (i == from || i >= m.size() || m[i] != ':') Fail("error does not give LINE:COL", input);
    ++i;
  }
}

void History(std::string_view text, std::string_view input) {
  using namespace tessera::advisor;
  auto h = ParseHistoryCsv(text, "fuzz.csv");
  if (!h.ok()) return CheckError(h.status(), "fuzz.csv", input);
  if (h->workloads.empty()) Fail("history accepted without workloads", input);
  for (const WorkloadUsage& w : h->workloads) {
    if (w.request.whole_gpus == 0 && w.request.memory_mib == 0 && w.request.mig_profile.empty())
      Fail("workload without a request", input);
    for (const PodSeries& p : w.pods) {
      for (size_t i = 0; i < p.samples.size(); ++i) {
        const UsageSample& s = p.samples[i];
        if (!std::isfinite(s.memory_mib) || s.memory_mib < 0 || !std::isfinite(s.sm_active) ||
            s.sm_active < 0 || s.sm_active > 1)
          Fail("sample outside the contract", input);
        if (i > 0 && s.t_s <= p.samples[i - 1].t_s) Fail("timestamps not increasing", input);
      }
    }
  }
  const std::string written = HistoryCsv(*h);
  auto back = ParseHistoryCsv(written, "again.csv");
  if (!back.ok()) Fail("written history does not parse", input);
  if (HistoryCsv(*back) != written) Fail("history round trip changed the text", input);
  auto rep = Advise(*h, AdvisorConfig{}, DefaultPriceTable());
  if (!rep.ok()) {
    if (rep.status().code() != tessera::StatusCode::kNotFound) Fail("advise failed", input);
    return;
  }
  for (const Recommendation& r : rep->items) {
    if (r.cost_recommended_per_hour > r.cost_requested_per_hour + 1e-9)
      Fail("recommendation costs more than the request", input);
    if (r.recommended.type != SliceType::kRelease &&
        r.recommended.memory_mib > r.requested.memory_mib)
      Fail("recommendation holds more memory than the request", input);
  }
}

void Prices(std::string_view text, std::string_view input) {
  using namespace tessera::advisor;
  auto t = ParsePriceTable(text, "fuzz_prices.csv");
  if (!t.ok()) return CheckError(t.status(), "fuzz_prices.csv", input);
  if (t->usd_per_gpu_hour.empty()) Fail("price table accepted without prices", input);
  for (const auto& [model, price] : t->usd_per_gpu_hour)
    if (!(price > 0 && price <= 1000)) Fail("price outside (0, 1000]", input);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (input.empty()) return 0;
  const std::string_view text = input.substr(1);
  if (static_cast<uint8_t>(input[0]) % 2 == 0) {
    History(text, input);
  } else {
    Prices(text, input);
  }
  return 0;
}
