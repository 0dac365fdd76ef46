// Fuzz target for the Pollux benchmark readers and model (src/sim/pollux.h). The first input byte
// picks the format (byte % 4: 0 placements.csv, 1 scalability.csv, 2 validation-B.csv,
// 3 workload), the rest is the file text.
//
// Properties: never crashes. A rejected input gives InvalidArgument whose message starts with
// "fuzz.csv:LINE:COL:". An accepted input satisfies the reader's contract, and a model built from
// it (with fixed companion profiles) answers every query with finite times, step > 0 and
// 0 <= sync <= step, reproduces a profiled placement exactly at its own local batch, and takes
// the validation file's last `iteration` as the work at that batch.
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "sim/pollux.h"

#include "fuzz/fuzz_util.h"

namespace {

using namespace tessera;
using tessera::fuzz::Fail;

const std::string kSource = "fuzz.csv";

void CheckError(const Status& st, std::string_view input) {
  if (st.code() != StatusCode::kInvalidArgument) Fail("rejection is not InvalidArgument", input);
  const std::string& m = st.message();
  if (m.rfind(kSource + ":", 0) != 0) Fail("error does not start with the source name", input);
  size_t i = kSource.size() + 1;
  for (int part = 0; part < 2; ++part) {
    const size_t from = i;
    while (i < m.size() && m[i] >= '0' && m[i] <= '9') ++i;
    if (i == from || i >= m.size() || m[i] != ':') Fail("error does not give LINE:COL", input);
    ++i;
  }
}

bool Timing(double b, double step, double sync) {
  return std::isfinite(b) && b > 0 && std::isfinite(step) && step > 0 && std::isfinite(sync) &&
         sync >= 0 && sync <= step;
}

std::map<int64_t, std::vector<PolluxValidationRow>> FixedValidation() {
  return {{4, {{10, 10, 0, 1, 1}}}};
}

void Query(const PolluxApp& app, const std::vector<std::vector<int>>& placements,
           const std::vector<double>& batches, std::string_view input) {
  for (const auto& p : placements) {
    for (double b : batches) {
      auto t = app.Profile(p, b);
      if (!t.ok()) Fail("valid query rejected", input);
      if (!std::isfinite(t->step_time) || !(t->step_time > 0) || !std::isfinite(t->sync_time) ||
          t->sync_time < 0 || t->sync_time > t->step_time * (1 + 1e-9))
        Fail("interpolated step/sync time outside the contract", input);
      int gpus = 0;
      for (int g : p) gpus += g;
      const double batch = b * 3 * gpus;  // local batch 3b
      auto it = app.IterationTime(p, batch);
      if (batch / gpus / app.max_local_bsz() > kPolluxMaxAccumulation) {
        if (it.ok()) Fail("absurd accumulation accepted", input);
        continue;
      }
      if (!it.ok() || !std::isfinite(it->seconds) || !(it->seconds > 0) || it->accum_steps < 0 ||
          it->accum_steps > kPolluxMaxAccumulation)
        Fail("iteration time outside the contract", input);
    }
  }
}

const std::vector<std::vector<int>> kQueries = {
    {1}, {4}, {2, 2}, {1, 3}, {4, 4, 4}, {1, 2, 3, 4}, {1, 1, 1, 1, 1, 1, 1}, {4, 4, 4, 4, 4, 4}};

void Placements(std::string_view text, std::string_view input) {
  auto rows = ParsePolluxPlacements(text, kSource);
  if (!rows.ok()) return CheckError(rows.status(), input);
  std::set<std::pair<std::vector<int>, double>> keys;
  bool unique = true;
  std::vector<double> batches = {1e-3, 1e9};
  for (const auto& r : *rows) {
    if (r.placement.empty() || r.placement.size() > 64) Fail("placement size", input);
    for (int g : r.placement)
      if (g < 1 || g > 9) Fail("placement digit outside 1..9", input);
    if (!Timing(r.local_bsz, r.step_time, r.sync_time)) Fail("row outside the contract", input);
    unique &= keys.insert({CanonicalPlacement(r.placement), r.local_bsz}).second;
    batches.push_back(r.local_bsz);
  }
  auto app = PolluxApp::Create("f", *rows, {}, FixedValidation());
  if (rows->empty() || !unique) {
    if (app.ok()) Fail("empty or repeated placement profile accepted", input);
    return;
  }
  if (!app.ok()) Fail("valid placement profile rejected", input);
  std::vector<std::vector<int>> queries = kQueries;
  for (const auto& r : *rows) {
    queries.push_back(r.placement);
    auto t = app->Profile(r.placement, r.local_bsz);
    if (!t.ok() || t->step_time != r.step_time || t->sync_time != r.sync_time)
      Fail("profiled placement not reproduced at its own local batch", input);
    if (queries.size() > 40) break;
  }
  if (batches.size() > 12) batches.resize(12);
  Query(*app, queries, batches, input);
}

void Scalability(std::string_view text, std::string_view input) {
  auto rows = ParsePolluxScalability(text, kSource);
  if (!rows.ok()) return CheckError(rows.status(), input);
  std::set<std::tuple<int, int, double>> keys;
  bool unique = true;
  std::vector<double> batches = {1e-3, 1e9};
  for (const auto& r : *rows) {
    if (r.num_nodes < 1 || r.num_replicas < r.num_nodes || r.num_replicas > kPolluxMaxReplicas)
      Fail("node or GPU count outside the contract", input);
    if (!Timing(r.local_bsz, r.step_time, r.sync_time)) Fail("row outside the contract", input);
    unique &= keys.insert({r.num_nodes, r.num_replicas, r.local_bsz}).second;
    if (batches.size() < 12) batches.push_back(r.local_bsz);
  }
  auto app = PolluxApp::Create("f", {{{1}, 4, 1, 0.5}}, *rows, FixedValidation());
  if (!unique) {
    if (app.ok()) Fail("repeated scalability key accepted", input);
    return;
  }
  if (!app.ok()) Fail("valid scalability profile rejected", input);
  Query(*app, kQueries, batches, input);
}

void Validation(std::string_view text, std::string_view input) {
  auto rows = ParsePolluxValidation(text, kSource);
  if (!rows.ok()) return CheckError(rows.status(), input);
  if (rows->empty()) Fail("validation accepted without epochs", input);
  for (size_t i = 0; i < rows->size(); ++i) {
    const auto& r = (*rows)[i];
    if (!std::isfinite(r.progress) || r.progress < 0 || r.iteration < 1 ||
        !std::isfinite(r.metric) || !std::isfinite(r.grad_sqr) || r.grad_sqr < 0 ||
        !std::isfinite(r.grad_var) || r.grad_var < 0)
      Fail("validation row outside the contract", input);
    if (i > 0 && (r.iteration <= (*rows)[i - 1].iteration || r.progress < (*rows)[i - 1].progress))
      Fail("validation rows not increasing", input);
  }
  std::map<int64_t, std::vector<PolluxValidationRow>> v{{7, *rows}};
  auto app = PolluxApp::Create("f", {{{1}, 4, 1, 0.5}}, {}, v);
  if (!app.ok()) Fail("valid validation profile rejected", input);
  if (app->epochs() != static_cast<int>(rows->size()) ||
      app->IterationsToComplete(7).value() != static_cast<double>(rows->back().iteration))
    Fail("work is not the last epoch's iteration", input);
  if (app->IterationsToComplete(6).ok() || app->IterationsToComplete(8).ok())
    Fail("batch outside the profiled range accepted", input);
  PolluxModelOptions o;
  o.work = PolluxModelOptions::Work::kProgress;
  auto progress = PolluxApp::Create("f", {{{1}, 4, 1, 0.5}}, {}, v, o);
  if (progress.ok()) {
    const double w = progress->IterationsToComplete(7).value();
    if (!std::isfinite(w) || !(w > 0)) Fail("progress work not finite and positive", input);
  } else if (progress.status().message().find("makes no progress") == std::string::npos) {
    Fail("progress model rejected for another reason", input);
  }
}

void Workload(std::string_view text, std::string_view input) {
  auto jobs = ParsePolluxWorkload(text, kSource);
  if (!jobs.ok()) return CheckError(jobs.status(), input);
  std::set<std::string> names;
  int last_line = 1;
  for (const auto& j : *jobs) {
    if (j.name.empty() || !names.insert(j.name).second) Fail("job names not unique", input);
    if (j.application.empty()) Fail("empty application", input);
    for (char c : j.application)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '_' || c == '-'))
        Fail("application name outside [A-Za-z0-9_-]", input);
    if (!std::isfinite(j.time) || j.time < 0 || j.time > kPolluxMaxTime)
      Fail("time outside the contract", input);
    if (j.num_replicas < 1 || j.num_replicas > kPolluxMaxReplicas || j.batch_size < 1 ||
        j.batch_size > kPolluxMaxBatch)
      Fail("GPU count or batch outside the contract", input);
    if (j.line <= last_line) Fail("line numbers not increasing", input);
    last_line = j.line;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string_view text = input.substr(1);
  switch (data[0] % 4) {
    case 0:
      Placements(text, input);
      break;
    case 1:
      Scalability(text, input);
      break;
    case 2:
      Validation(text, input);
      break;
    default:
      Workload(text, input);
      break;
  }
  return 0;
}
