#include "agent/miglayout_sync.h"

#include "kube/translate.h"

namespace tessera::agent {

using Json = nlohmann::json;

Result<MigSyncResult> SyncMigLayout(kube::Client& client, GpuBackend& backend,
                                    const MigSyncOptions& options) {
  if (options.node_name.empty()) return InvalidArgument("MigLayout sync: no node name");
  const std::string path = std::string(kube::kMigLayoutsPath) + "/" + options.node_name;
  MigSyncResult result;
  auto obj = client.Get(path);
  if (!obj.ok()) {
    if (kube::HttpStatusOf(obj.status()) == 404) return result;
    return Status(obj.status().code(),
                  "reading MigLayout " + options.node_name + ": " + obj.status().message());
  }
  result.found = true;
  const Json* spec_gpus = nullptr;
  if (auto s = obj->find("spec"); s != obj->end() && s->is_object())
    if (auto g = s->find("gpus"); g != s->end() && g->is_object()) spec_gpus = &*g;
  if (!spec_gpus) return result;

  Json applying = Json::object();
  for (auto it = spec_gpus->begin(); it != spec_gpus->end(); ++it) {
    if (!NeedsApply(*obj, it.key(), options.apply)) continue;
    auto spec = ParseGpuLayoutSpec(it.key(), it.value());
    if (!spec.ok()) continue;  // reported Failed below, with the reason
    GpuLayoutStatus st;
    st.observed_revision = spec->revision;
    st.state = LayoutState::kApplying;
    st.message =
        "applying " + (spec->layout.empty() ? std::string("(no instances)") : spec->layout);
    if (auto j = ReadMigJournal(options.apply.state_dir, spec->index);
        j.ok() && j->revision == spec->revision)
      st.message +=
          " (resuming a run interrupted " +
          (j->step.empty() ? std::string("before its first change") : "after: " + j->step) + ")";
    if (auto cur = obj->find("status"); cur != obj->end() && cur->is_object())
      if (auto g = cur->find("gpus"); g != cur->end() && g->is_object() && g->contains(it.key()))
        if (auto l = (*g)[it.key()].find("layout"); l != (*g)[it.key()].end() && l->is_string())
          st.layout = l->get<std::string>();
    applying[it.key()] = GpuLayoutStatusJson(st);
  }
  const std::string status_path = path + "/status";
  if (!applying.empty()) {
    auto patched = client.MergePatch(status_path, {{"status", {{"gpus", applying}}}});
    if (!patched.ok())
      return Status(patched.status().code(), "writing MigLayout " + options.node_name +
                                                 " status: " + patched.status().message());
  }

  const Json status = ApplyMigLayoutObject(backend, *obj, options.apply, &result.gpus);
  if (result.gpus.empty()) return result;
  Json changed = Json::object();
  for (const std::string& key : result.gpus) changed[key] = status["gpus"][key];
  auto patched = client.MergePatch(status_path, {{"status", {{"gpus", changed}}}});
  if (!patched.ok())
    return Status(patched.status().code(), "writing MigLayout " + options.node_name +
                                               " status: " + patched.status().message());
  result.status = status;
  return result;
}

}  // namespace tessera::agent
