// Subcommands of the tessera binary, one registration function per file. Each adds its
// subcommand to `parent` and, when it runs, stores the process exit code in `rc`.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "apps/tessera/advise_prometheus.h"
#include "core/status.h"
#include "sim/mix_knobs.h"

namespace tessera {

void AddSimReplayCommand(CLI::App& sim, int& rc);   // cmd_replay.cc: `tessera sim replay`
void AddSimQueuesCommand(CLI::App& sim, int& rc);   // cmd_queues.cc: `tessera sim queues`
void AddSimPolluxCommand(CLI::App& sim, int& rc);   // cmd_pollux.cc: `tessera sim pollux`
void AddSimSharingCommand(CLI::App& sim, int& rc);  // cmd_sharing.cc: `tessera sim sharing`
void AddDemoCommand(CLI::App& app, int& rc);        // cmd_demo.cc: `tessera demo`
void AddExtenderCommand(CLI::App& app, int& rc);    // cmd_extender.cc: `tessera extender`
void AddWebhookCommand(CLI::App& app, int& rc);     // cmd_webhook.cc: `tessera webhook`
void AddPlanCommand(CLI::App& app, int& rc);        // cmd_plan.cc: `tessera plan ...`
void AddAgentCommand(CLI::App& app, int& rc);       // cmd_agent.cc: `tessera agent`

void AddSchedulerCommand(CLI::App& app, int& rc);  // cmd_scheduler.cc: `tessera scheduler`
void AddSimFamilyCommand(CLI::App& sim, int& rc);  // cmd_family.cc: `tessera sim family`
void AddSimDriftCommand(CLI::App& sim, int& rc);   // cmd_drift.cc: `tessera sim drift`
void AddAdviseCommand(CLI::App& app, int& rc);     // cmd_advise.cc: `tessera advise`
void AddReportCommand(CLI::App& app, int& rc);     // cmd_report.cc: `tessera report`

// Shared by `tessera advise` and `tessera report` (cmd_advise.cc).
// "7d", "36h", "90m", "3600s" or plain seconds, at most 366 days.
Result<int64_t> ParseDuration(const std::string& flag, const std::string& text);
// IoError when the directory `path` would be written in does not exist; Ok for an empty path.
Status CheckOutputDir(const std::string& flag, const std::string& path);
// The Prometheus range of --prometheus, --start, --end (default now), --step, --timeout and
// --window (window_s, default 7 days when 0; excludes --start). At most 11000 points per series.
struct PrometheusRangeArgs {
  std::string url, start, end, step, timeout;
};
Result<PrometheusQuery> PrometheusRangeFlags(const PrometheusRangeArgs& a, int64_t window_s);

// Adds the workload-mix flags of sim/mix_knobs.h to `cmd`, storing their text in `m`
// (cmd_demo.cc).
void AddMixFlagOptions(CLI::App& cmd, MixFlags& m);

}  // namespace tessera
