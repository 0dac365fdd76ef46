#include "agent/mig_apply.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <set>

#include "agent/discovery.h"
#include "cluster/gpu_catalog.h"
#include "cluster/mig_geometry.h"
#include "kube/translate.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;

// One GPU instance as NVML reports it, mapped onto the catalog's geometry.
struct LiveGi {
  int gi_id = 0;
  MigInstance instance;
  std::vector<int> ci_ids;
};

struct LiveGpu {
  std::string uuid;
  std::string model;
  const MigGeometry* geo = nullptr;
  bool mig_enabled = false;
  bool mig_pending = false;  // the mode the next GPU reset activates
  std::vector<LiveGi> gis;   // sorted by (start, profile)
};

bool Contains(const MigLayout& layout, MigInstance in) {
  return std::find(layout.begin(), layout.end(), in) != layout.end();
}

const char* OnOff(bool on) {
  return on ? "on" : "off";
}

std::string GpuName(int index) {
  return "GPU " + std::to_string(index);
}

std::string Placement(const MigGeometry& geo, MigInstance in) {
  return geo.profiles[static_cast<size_t>(in.profile)].name + "@" + std::to_string(in.start);
}

std::string LayoutText(const MigGeometry* geo, const MigLayout& layout) {
  return geo && !layout.empty() ? MigLayoutString(*geo, layout) : "";
}

MigLayout LayoutOf(const LiveGpu& g) {
  MigLayout l;
  for (const LiveGi& gi : g.gis) l.push_back(gi.instance);
  return l;
}

Result<LiveGpu> ReadLive(GpuBackend& backend, int index) {
  LiveGpu g;
  auto uuid = backend.Uuid(index);
  if (!uuid.ok()) return uuid.status();
  g.uuid = *uuid;
  auto name = backend.Name(index);
  if (!name.ok()) return name.status();
  if (auto id = kube::ModelFromProduct(GfdProduct(*name)); id.ok()) {
    g.model = GpuCatalog::Builtin().Get(*id).name;
    g.geo = MigGeometryFor(*id);
  } else {
    g.model = *name;
  }
  auto mig = backend.MigMode(index);
  if (!mig.ok()) return mig.status();
  g.mig_enabled = mig->has_value() && (*mig)->current;
  g.mig_pending = mig->has_value() ? (*mig)->pending : g.mig_enabled;
  if (!g.mig_enabled || !g.geo) return g;
  auto gis = backend.GpuInstances(index);
  if (!gis.ok()) return gis.status();
  auto devs = backend.MigDevices(index);
  if (!devs.ok()) return devs.status();
  for (const GiInfo& info : *gis) {
    LiveGi gi;
    gi.gi_id = info.id;
    gi.instance.profile = -1;
    for (size_t i = 0; i < g.geo->profiles.size(); ++i)
      if (g.geo->profiles[i].id == info.profile_id) gi.instance.profile = static_cast<int>(i);
    if (gi.instance.profile < 0)
      return InvalidArgument(GpuName(index) + " (" + g.model + "): GPU instance " +
                             std::to_string(info.id) + " has GI profile id " +
                             std::to_string(info.profile_id) + ", unknown to the catalog");
    gi.instance.start = info.start;
    for (const MigDeviceInfo& d : *devs)
      if (d.gi_id == info.id) gi.ci_ids.push_back(d.ci_id);
    g.gis.push_back(std::move(gi));
  }
  std::sort(g.gis.begin(), g.gis.end(), [](const LiveGi& a, const LiveGi& b) {
    return std::pair(a.instance.start, a.instance.profile) <
           std::pair(b.instance.start, b.instance.profile);
  });
  return g;
}

// "<profile>@<start>" tokens with explicit starts, checked against the geometry.
Result<MigLayout> ParseDesired(const MigGeometry& geo, std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t j = std::min(text.find_first_of(" ,\t", i), text.size());
    const std::string tok(text.substr(i, j - i));
    i = j + 1;
    if (tok.empty()) continue;
    const size_t at = tok.find('@');
    if (at == std::string::npos || at == 0 || at + 1 == tok.size() || tok.size() - at > 3 ||
        tok.find_first_not_of("0123456789", at + 1) != std::string::npos)
      return InvalidArgument("malformed layout token '" + tok + "': expected <profile>@<start>");
    if (geo.Find(std::string_view(tok).substr(0, at)) < 0) {
      std::string known;
      for (const MigProfile& p : geo.profiles) known += (known.empty() ? "" : ", ") + p.name;
      return InvalidArgument("unknown MIG profile '" + tok.substr(0, at) + "' for " + geo.model +
                             " (known: " + known + ")");
    }
  }
  auto layout = ParseMigLayout(geo, text);
  if (!layout.ok()) return InvalidArgument("illegal layout: " + layout.status().message());
  if (Status st = CheckMigLayout(geo, *layout); !st.ok())
    return InvalidArgument("illegal layout: " + st.message());
  return layout;
}

std::string JournalPath(const std::string& dir, int gpu) {
  return dir + "/miglayout-gpu" + std::to_string(gpu) + ".json";
}

Status WriteJournal(const std::string& dir, const MigJournal& j) {
  if (dir.empty()) return Status::Ok();
  ::mkdir(dir.c_str(), 0755);
  const std::string path = JournalPath(dir, j.gpu);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << Json{{"gpu", j.gpu},
                {"uuid", j.uuid},
                {"revision", j.revision},
                {"layout", j.layout},
                {"step", j.step}}
               .dump()
        << "\n";
    if (!out.flush()) return IoError("cannot write the MIG journal " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return IoError("cannot write the MIG journal " + path);
  return Status::Ok();
}

void RemoveJournal(const std::string& dir, int gpu) {
  if (!dir.empty()) std::remove(JournalPath(dir, gpu).c_str());
}

std::string NowRfc3339() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

GpuLayoutStatus Outcome(const GpuLayoutSpec& spec, LayoutState state, std::string message,
                        std::string layout) {
  return {spec.revision, state, std::move(message), std::move(layout)};
}

// Carries out the plan of one GPU, journalling each NVML change.
class Run {
 public:
  Run(GpuBackend& backend, const GpuLayoutSpec& spec, const MigApplyOptions& options,
      const LiveGpu& live)
      : backend_(backend), spec_(spec), options_(options), live_(live) {
    journal_ = {spec.index, live.uuid, spec.revision, spec.layout, ""};
  }

  // Ok, or the first failure; `stopped` is set when the hook ended the run.
  Status Converge(const MigLayout& desired, std::vector<std::string>& done, bool& stopped) {
    const MigGeometry& geo = *live_.geo;
    for (const LiveGi& gi : live_.gis) {
      if (Contains(desired, gi.instance)) continue;
      const std::string where =
          Placement(geo, gi.instance) + " (GI " + std::to_string(gi.gi_id) + ")";
      for (int ci : gi.ci_ids) {
        Status st = backend_.DestroyComputeInstance(spec_.index, gi.gi_id, ci);
        if (!st.ok()) return Context(st, "destroying the compute instance of " + where);
        TESSERA_RETURN_IF_ERROR(Step(
            "destroy compute instance " + std::to_string(ci) + " of " + Placement(geo, gi.instance),
            stopped));
      }
      Status st = backend_.DestroyGpuInstance(spec_.index, gi.gi_id);
      if (!st.ok()) return Context(st, "destroying " + where);
      done.push_back("destroyed " + Placement(geo, gi.instance));
      TESSERA_RETURN_IF_ERROR(Step("destroy GPU instance " + Placement(geo, gi.instance), stopped));
    }
    for (const MigInstance& in : desired) {
      const MigProfile& p = geo.profiles[static_cast<size_t>(in.profile)];
      auto it = std::find_if(live_.gis.begin(), live_.gis.end(),
                             [&](const LiveGi& gi) { return gi.instance == in; });
      int gi_id = 0;
      if (it != live_.gis.end()) {
        if (!it->ci_ids.empty()) continue;
        gi_id = it->gi_id;
      } else {
        auto created = backend_.CreateGpuInstance(spec_.index, p.id, in.start, p.memory_slices);
        if (!created.ok()) return Context(created.status(), "creating " + Placement(geo, in));
        gi_id = *created;
        TESSERA_RETURN_IF_ERROR(Step("create GPU instance " + Placement(geo, in), stopped));
      }
      auto ci = backend_.CreateComputeInstance(spec_.index, gi_id);
      if (!ci.ok())
        return Context(ci.status(), "creating the compute instance of " + Placement(geo, in));
      done.push_back((it != live_.gis.end() ? "completed " : "created ") + Placement(geo, in));
      TESSERA_RETURN_IF_ERROR(Step("create compute instance of " + Placement(geo, in), stopped));
    }
    return Status::Ok();
  }

  // nvmlDeviceSetMigMode, journalled as "set MIG mode on|off".
  Result<MigModeChange> SetMode(bool on, bool& stopped) {
    auto change = backend_.SetMigMode(spec_.index, on);
    if (!change.ok()) return Context(change.status(), std::string("setting MIG mode ") + OnOff(on));
    TESSERA_RETURN_IF_ERROR(Step(std::string("set MIG mode ") + OnOff(on), stopped));
    return change;
  }

  Status BeginJournal() { return WriteJournal(options_.state_dir, journal_); }

 private:
  static Status Context(const Status& st, const std::string& what) {
    return Status(st.code(), what + ": " + st.message());
  }

  Status Step(const std::string& step, bool& stopped) {
    journal_.step = step;
    TESSERA_RETURN_IF_ERROR(WriteJournal(options_.state_dir, journal_));
    if (!options_.after_step) return Status::Ok();
    Status st = options_.after_step(step);
    if (!st.ok()) stopped = true;
    return st;
  }

  GpuBackend& backend_;
  const GpuLayoutSpec& spec_;
  const MigApplyOptions& options_;
  const LiveGpu& live_;
  MigJournal journal_;
};

std::string Joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

std::string Pids(std::vector<uint32_t> pids) {
  std::sort(pids.begin(), pids.end());
  std::string out = "pid";
  for (size_t i = 0; i < pids.size(); ++i) out += (i ? ", " : " ") + std::to_string(pids[i]);
  return out;
}

// Switches the MIG mode of `live` (its current mode is not `spec.mig_enabled`). The GPU must
// run no process; turning MIG off first destroys every instance. Applied when the new mode is
// in effect (`done`, when given, receives "MIG mode on"), Failed when refused or pending a
// reset, Applying when the hook stopped the run. The message is not prefixed with the resume.
GpuLayoutStatus SwitchMigMode(GpuBackend& backend, const GpuLayoutSpec& spec,
                              const MigApplyOptions& options, const LiveGpu& live,
                              const std::string& where, const std::string& before,
                              std::vector<std::string>* done) {
  const bool on = spec.mig_enabled;
  const std::string reset = "nvidia-smi -r -i " + std::to_string(spec.index);
  auto failed = [&](const std::string& msg, std::string layout) {
    return Outcome(spec, LayoutState::kFailed, where + ": " + msg, std::move(layout));
  };
  auto pending = [&](const std::string& activation, std::string layout) {
    return failed(std::string("PendingReset: MIG mode ") + OnOff(on) +
                      " is set but takes effect only after a GPU reset" +
                      (activation.empty() ? "" : " (NVML: " + activation + ")") +
                      "; with the GPU idle run `" + reset + "` (or reboot the node)",
                  std::move(layout));
  };
  if (live.mig_pending == on) return pending("", before);
  auto procs = backend.Processes(spec.index);
  if (!procs.ok()) return failed(procs.status().message(), before);
  if (!procs->empty()) {
    std::vector<uint32_t> pids;
    for (const ProcessInfo& p : *procs) pids.push_back(p.pid);
    return failed(std::string("not changed, turning MIG ") + OnOff(on) +
                      " needs the GPU idle; in use by " + Pids(std::move(pids)),
                  before);
  }
  Run run(backend, spec, options, live);
  if (Status st = run.BeginJournal(); !st.ok()) return failed(st.message(), before);
  bool stopped = false;
  std::vector<std::string> destroyed;
  auto layout_now = [&] {
    auto now = ReadLive(backend, spec.index);
    return now.ok() ? LayoutText(now->geo, LayoutOf(*now)) : "";
  };
  if (!on && live.geo) {
    Status st = run.Converge({}, destroyed, stopped);
    if (stopped)
      return Outcome(spec, LayoutState::kApplying, "interrupted: " + st.message(), layout_now());
    if (!st.ok()) return failed(st.message(), layout_now());
  }
  auto change = run.SetMode(on, stopped);
  if (stopped)
    return Outcome(spec, LayoutState::kApplying, "interrupted: " + change.status().message(),
                   layout_now());
  if (!change.ok()) return failed(change.status().message(), layout_now());
  if (!change->active) return pending(change->activation, layout_now());
  destroyed.push_back(std::string("MIG mode ") + OnOff(on));
  if (done) *done = destroyed;
  return Outcome(spec, LayoutState::kApplied, Joined(destroyed), "");
}

Result<int64_t> ReadInt(const Json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t{INT64_MAX})
    return static_cast<int64_t>(v.get<uint64_t>());
  return InvalidArgument("not an integer");
}

}  // namespace

const char* LayoutStateName(LayoutState s) {
  switch (s) {
    case LayoutState::kApplying:
      return "Applying";
    case LayoutState::kApplied:
      return "Applied";
    case LayoutState::kFailed:
      break;
  }
  return "Failed";
}

Result<GpuLayoutSpec> ParseGpuLayoutSpec(const std::string& key, const Json& entry) {
  GpuLayoutSpec s;
  const char* end = key.data() + key.size();
  if (key.empty() || key.size() > 3 || std::from_chars(key.data(), end, s.index).ptr != end ||
      s.index < 0)
    return InvalidArgument("spec.gpus key '" + key + "' is not a GPU index");
  const std::string where = "spec.gpus." + key;
  if (!entry.is_object()) return InvalidArgument(where + " is not an object");
  auto rev = entry.find("revision");
  if (rev == entry.end()) return InvalidArgument(where + ".revision is missing");
  auto r = ReadInt(*rev);
  if (!r.ok() || *r < 1) return InvalidArgument(where + ".revision must be an integer >= 1");
  s.revision = *r;
  auto mig = entry.find("migEnabled");
  if (mig == entry.end() || !mig->is_boolean())
    return InvalidArgument(where + ".migEnabled must be true or false");
  s.mig_enabled = mig->get<bool>();
  if (auto l = entry.find("layout"); l != entry.end()) {
    if (!l->is_string()) return InvalidArgument(where + ".layout must be a string");
    s.layout = l->get<std::string>();
  }
  if (auto why = entry.find("reason"); why != entry.end() && why->is_string())
    s.reason = why->get<std::string>();
  return s;
}

Result<MigJournal> ReadMigJournal(const std::string& state_dir, int gpu) {
  if (state_dir.empty()) return NotFound("no state directory");
  std::ifstream in(JournalPath(state_dir, gpu));
  if (!in) return NotFound("no MIG journal for GPU " + std::to_string(gpu));
  Json j = Json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("revision") || !j["revision"].is_number_integer())
    return InvalidArgument("unreadable MIG journal " + JournalPath(state_dir, gpu));
  MigJournal out;
  out.gpu = gpu;
  out.uuid = j.value("uuid", std::string());
  out.revision = j["revision"].get<int64_t>();
  out.layout = j.value("layout", std::string());
  out.step = j.value("step", std::string());
  return out;
}

GpuLayoutStatus ApplyGpuLayout(GpuBackend& backend, const GpuLayoutSpec& spec,
                               const MigApplyOptions& options) {
  const std::string gpu = GpuName(spec.index);
  std::string resumed;
  if (auto j = ReadMigJournal(options.state_dir, spec.index); j.ok())
    resumed = "resumed revision " + std::to_string(j->revision) + " interrupted " +
              (j->step.empty() ? "before its first change" : "after: " + j->step) + "; ";

  auto fail = [&](const std::string& msg, std::string layout) {
    RemoveJournal(options.state_dir, spec.index);
    return Outcome(spec, LayoutState::kFailed, resumed + msg, std::move(layout));
  };

  auto count = backend.DeviceCount();
  if (!count.ok()) return fail(gpu + ": " + count.status().message(), "");
  if (spec.index >= *count)
    return fail(gpu + " does not exist on this node (" + std::to_string(*count) +
                    " GPU(s), indexes 0-" + std::to_string(*count - 1) + ")",
                "");
  auto live = ReadLive(backend, spec.index);
  if (!live.ok()) return fail(live.status().message(), "");
  const std::string where = gpu + " (" + live->model + ")";
  const std::string before = LayoutText(live->geo, LayoutOf(*live));

  auto finish = [&](GpuLayoutStatus out) {
    out.message = resumed + out.message;
    if (out.state != LayoutState::kApplying) RemoveJournal(options.state_dir, spec.index);
    return out;
  };

  if (!spec.mig_enabled) {
    if (!spec.layout.empty())
      return fail(where + ": a layout is given with migEnabled false", before);
    if (!live->mig_enabled && !live->mig_pending) {
      RemoveJournal(options.state_dir, spec.index);
      return Outcome(spec, LayoutState::kApplied, resumed + "MIG is off", "");
    }
    if (!live->mig_enabled) {
      // Off as asked, with an enable waiting for a reset: cancel it.
      auto change = backend.SetMigMode(spec.index, false);
      if (!change.ok())
        return fail(where + ": cancelling the pending MIG enable: " + change.status().message(),
                    "");
      return finish(
          Outcome(spec, LayoutState::kApplied, "MIG is off; cancelled the pending enable", ""));
    }
    return finish(SwitchMigMode(backend, spec, options, *live, where, before, nullptr));
  }
  if (!live->geo) return fail(where + " has no MIG mode in the catalog", "");
  auto desired = ParseDesired(*live->geo, spec.layout);
  if (!desired.ok()) return fail(where + ": " + desired.status().message(), before);
  std::vector<std::string> done;
  const bool switched = !live->mig_enabled;  // the journal is open from the mode change
  if (switched) {
    GpuLayoutStatus out = SwitchMigMode(backend, spec, options, *live, where, before, &done);
    if (out.state != LayoutState::kApplied) return finish(std::move(out));
    auto now_live = ReadLive(backend, spec.index);
    if (!now_live.ok()) return fail(now_live.status().message(), "");
    *live = std::move(*now_live);
  } else if (!live->mig_pending) {
    // On as asked, with a disable waiting for a reset: cancel it.
    auto change = backend.SetMigMode(spec.index, true);
    if (!change.ok())
      return fail(where + ": cancelling the pending MIG disable: " + change.status().message(),
                  before);
    done.push_back("cancelled the pending MIG disable");
  }

  // The instances to destroy must be idle, checked on the node right before acting.
  std::map<int, std::string> doomed;
  bool work = false;
  for (const LiveGi& gi : live->gis) {
    const bool wanted = Contains(*desired, gi.instance);
    if (!wanted) doomed[gi.gi_id] = Placement(*live->geo, gi.instance);
    work = work || !wanted || gi.ci_ids.empty();
  }
  work = work || desired->size() != live->gis.size();
  if (!work) {
    RemoveJournal(options.state_dir, spec.index);
    return Outcome(spec, LayoutState::kApplied,
                   resumed + (done.empty() ? "already in place" : Joined(done)), before);
  }
  if (!doomed.empty()) {
    auto procs = backend.Processes(spec.index);
    if (!procs.ok()) return fail(procs.status().message(), before);
    std::map<int, std::vector<uint32_t>> busy;
    for (const ProcessInfo& p : *procs)
      if (doomed.count(p.gi_id)) busy[p.gi_id].push_back(p.pid);
    if (!busy.empty()) {
      std::string msg = where + ": not changed, instances to destroy are in use:";
      for (auto& [gi, pids] : busy) {
        msg += " " + doomed[gi] + " (GI " + std::to_string(gi) + ") by " + Pids(pids) + ";";
      }
      msg.pop_back();
      return fail(msg, before);
    }
  }

  Run run(backend, spec, options, *live);
  if (!switched)
    if (Status st = run.BeginJournal(); !st.ok()) return fail(where + ": " + st.message(), before);
  bool stopped = false;
  Status st = run.Converge(*desired, done, stopped);
  auto after = ReadLive(backend, spec.index);
  const std::string now_layout = after.ok() ? LayoutText(after->geo, LayoutOf(*after)) : "";
  if (stopped)
    return Outcome(spec, LayoutState::kApplying, resumed + "interrupted: " + st.message(),
                   now_layout);
  if (!st.ok()) return fail(where + ": " + st.message(), now_layout);
  if (!after.ok()) return fail(after.status().message(), "");
  bool complete = LayoutOf(*after) == *desired;
  for (const LiveGi& gi : after->gis) complete = complete && !gi.ci_ids.empty();
  if (!complete)
    return fail(where + ": NVML reports '" + now_layout + "' after the changes, not '" +
                    LayoutText(live->geo, *desired) + "'",
                now_layout);
  RemoveJournal(options.state_dir, spec.index);
  return Outcome(spec, LayoutState::kApplied, resumed + Joined(done), now_layout);
}

Json GpuLayoutStatusJson(const GpuLayoutStatus& status, const std::string& transition_time) {
  Json j = {{"observedRevision", status.observed_revision},
            {"state", LayoutStateName(status.state)},
            {"layout", status.layout.substr(0, 256)}};
  if (!status.message.empty()) j["message"] = status.message.substr(0, 1024);
  if (!transition_time.empty()) j["lastTransitionTime"] = transition_time;
  return j;
}

bool NeedsApply(const Json& object, const std::string& key, const MigApplyOptions& options) {
  const Json* st = nullptr;
  if (auto s = object.find("status"); s != object.end() && s->is_object())
    if (auto g = s->find("gpus"); g != s->end() && g->is_object())
      if (auto e = g->find(key); e != g->end() && e->is_object()) st = &*e;
  const Json* spec = nullptr;
  if (auto s = object.find("spec"); s != object.end() && s->is_object())
    if (auto g = s->find("gpus"); g != s->end() && g->is_object())
      if (auto e = g->find(key); e != g->end()) spec = &*e;
  if (!spec) return false;
  int64_t want = 0;
  if (spec->is_object())
    if (auto r = spec->find("revision"); r != spec->end())
      if (auto v = ReadInt(*r); v.ok()) want = *v;
  if (!st) return true;
  int64_t seen = -1;
  if (auto r = st->find("observedRevision"); r != st->end())
    if (auto v = ReadInt(*r); v.ok()) seen = *v;
  if (want > seen) return true;
  if (want == seen && st->value("state", "") == "Applying") return true;
  int index = -1;
  const char* end = key.data() + key.size();
  if (std::from_chars(key.data(), end, index).ptr == end && index >= 0)
    if (auto j = ReadMigJournal(options.state_dir, index); j.ok() && j->revision == want)
      return true;
  return false;
}

Json ApplyMigLayoutObject(GpuBackend& backend, const Json& object, const MigApplyOptions& options,
                          std::vector<std::string>* applied_keys) {
  Json gpus = Json::object();
  if (auto s = object.find("status"); s != object.end() && s->is_object())
    if (auto g = s->find("gpus"); g != s->end() && g->is_object()) gpus = *g;
  const Json* spec = nullptr;
  if (auto s = object.find("spec"); s != object.end() && s->is_object())
    if (auto g = s->find("gpus"); g != s->end() && g->is_object()) spec = &*g;
  if (!spec) return Json{{"gpus", gpus}};
  const std::string now = options.now ? options.now() : NowRfc3339();
  for (auto it = spec->begin(); it != spec->end(); ++it) {
    if (!NeedsApply(object, it.key(), options)) continue;
    if (applied_keys) applied_keys->push_back(it.key());
    auto parsed = ParseGpuLayoutSpec(it.key(), it.value());
    GpuLayoutStatus out;
    if (!parsed.ok()) {
      out.state = LayoutState::kFailed;
      out.message = parsed.status().message();
      if (it.value().is_object() && it.value().contains("revision"))
        if (auto r = ReadInt(it.value()["revision"]); r.ok() && *r >= 0) out.observed_revision = *r;
    } else {
      out = ApplyGpuLayout(backend, *parsed, options);
    }
    gpus[it.key()] = GpuLayoutStatusJson(out, now);
  }
  return Json{{"gpus", gpus}};
}

}  // namespace tessera::agent
