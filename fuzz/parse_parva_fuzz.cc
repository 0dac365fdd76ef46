// Fuzz target for the ParvaGPU benchmark readers (src/sim/parva.h). The first input byte picks
// the format (byte % 3: 0 profile, 1 SLO table, 2 deployment), the rest is the file text.
//
// Properties: never crashes. A rejected input gives InvalidArgument whose message starts with
// "SOURCE:LINE:" (a line number). An accepted input satisfies the readers' contract and
// round-trips: writing it with the matching writer and reading that back gives the same values.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "sim/parva.h"

#include "fuzz/fuzz_util.h"

namespace {

using tessera::fuzz::Fail;

const std::vector<std::string> kSloModels = {"a", "b", "c"};
const std::vector<std::string> kDeployModels = {"bert", "resnet50", "vgg19"};

void CheckError(const tessera::Status& st, const std::string& source, std::string_view input) {
  if (st.code() != tessera::StatusCode::kInvalidArgument)
    Fail("rejection is not InvalidArgument", input);
  const std::string& m = st.message();
  const std::string prefix = source + ":";
  if (m.rfind(prefix, 0) != 0) Fail("error does not start with the source name", input);
  size_t i = prefix.size();
  const size_t digits_from = i;
  while (i < m.size() && m[i] >= '0' && m[i] <= '9') ++i;
  if (i == digits_from || i >= m.size() || m[i] != ':')
    Fail("error does not give a line number", input);
}

bool ValidSize(int g) {
  return g == 1 || g == 2 || g == 3 || g == 4 || g == 7;
}

void Profile(std::string_view text, std::string_view input) {
  using namespace tessera;
  auto p = ParseParvaProfile(text, "fuzz_profile.csv", "m");
  if (!p.ok()) return CheckError(p.status(), "fuzz_profile.csv", input);
  if (p->rows.empty()) Fail("profile accepted without rows", input);
  for (const InferenceProfileRow& r : p->rows) {
    if (!ValidSize(r.gpcs) || r.batch < 1 || r.procs < 1 || r.procs > 64)
      Fail("profile row outside the contract", input);
    if (!std::isfinite(r.throughput) || !std::isfinite(r.latency_s) || r.throughput < 0 ||
        r.latency_s < 0)
      Fail("profile value not finite and non-negative", input);
    if (r.measured != (r.throughput > 0) || r.measured != (r.latency_s > 0))
      Fail("measured flag disagrees with the values", input);
  }
  auto back = ParseParvaProfile(ParvaProfileCsv(*p), "again.csv", "m");
  if (!back.ok()) Fail("written profile does not parse", input);
  if (back->rows.size() != p->rows.size()) Fail("profile round trip changed the rows", input);
  for (size_t i = 0; i < p->rows.size(); ++i) {
    const InferenceProfileRow& a = p->rows[i];
    const InferenceProfileRow& b = back->rows[i];
    if (a.gpcs != b.gpcs || a.batch != b.batch || a.procs != b.procs ||
        a.throughput != b.throughput || a.latency_s != b.latency_s || a.measured != b.measured)
      Fail("profile round trip changed a value", input);
  }
}

void Slo(std::string_view text, std::string_view input) {
  using namespace tessera;
  auto t = ParseParvaSlo(text, "fuzz_slo.csv", kSloModels);
  if (!t.ok()) return CheckError(t.status(), "fuzz_slo.csv", input);
  if (t->rows.empty()) Fail("SLO table accepted without rows", input);
  for (const auto& row : t->rows) {
    if (row.size() != kSloModels.size()) Fail("SLO row width differs from the models", input);
    for (const SloCell& c : row) {
      if (c.value && !(std::isfinite(*c.value) && *c.value > 0))
        Fail("SLO value not positive and finite", input);
    }
  }
  auto back = ParseParvaSlo(ParvaSloCsv(*t), "again.csv", kSloModels);
  if (!back.ok()) Fail("written SLO table does not parse", input);
  if (back->rows.size() != t->rows.size()) Fail("SLO round trip changed the rows", input);
  for (size_t r = 0; r < t->rows.size(); ++r) {
    for (size_t c = 0; c < kSloModels.size(); ++c) {
      if (t->rows[r][c].value != back->rows[r][c].value)
        Fail("SLO round trip changed a value", input);
    }
  }
}

void Deploy(std::string_view text, std::string_view input) {
  using namespace tessera;
  auto d = ParseParvaDeploy(text, "fuzz_deploy.csv", kDeployModels);
  if (!d.ok()) return CheckError(d.status(), "fuzz_deploy.csv", input);
  if (d->empty()) Fail("deployment accepted without rows", input);
  for (const ParvaDeployRow& r : *d) {
    if (r.node < 0 || r.gpu < 0 || r.gpu > 7 || r.placement < 0 || r.placement > 7 ||
        !ValidSize(r.gpcs) || r.batch < 1 || r.procs < 1 || r.procs > 64)
      Fail("deployment row outside the contract", input);
  }
  auto back = ParseParvaDeploy(ParvaDeployCsv(*d), "again.csv", kDeployModels);
  if (!back.ok()) Fail("written deployment does not parse", input);
  if (back->size() != d->size()) Fail("deployment round trip changed the rows", input);
  for (size_t i = 0; i < d->size(); ++i) {
    const ParvaDeployRow& a = (*d)[i];
    const ParvaDeployRow& b = (*back)[i];
    if (a.node != b.node || a.gpu != b.gpu || a.model != b.model || a.placement != b.placement ||
        a.gpcs != b.gpcs || a.batch != b.batch || a.procs != b.procs)
      Fail("deployment round trip changed a value", input);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (input.empty()) return 0;
  const std::string_view text = input.substr(1);
  switch (static_cast<uint8_t>(input[0]) % 3) {
    case 0:
      Profile(text, input);
      break;
    case 1:
      Slo(text, input);
      break;
    default:
      Deploy(text, input);
      break;
  }
  return 0;
}
