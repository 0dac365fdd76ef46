// Readers and writers for the ParvaGPU benchmark files (Lee et al., SC'24): per-model A100 MIG
// + MPS profiles, the two SLO tables (request rate and latency per scenario) and deployment CSVs.
//
// Readers are strict: the whole input must parse, or the result is InvalidArgument with
// "SOURCE:LINE:COL: reason" (and "column 'x': " when one field is at fault); no row is skipped.
// Profile rows with throughput 0 and latency 0 are kept and marked not measured; any other zero,
// a negative or non-numeric value, a wrong header, a wrong field count or a repeated
// configuration is an error. SLO cells are a positive number or N/A (service absent). Deployment
// models must be known names. The Parse* functions take the text and a source name (pure, for
// fuzzing); Read* add file I/O (IoError when a file cannot be read). Writers produce text the
// parsers read back to the same values. All functions are thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sharing/inference_planner.h"

namespace tessera {

inline constexpr char kParvaProfileHeader[] =
    "Mig instance,Batch size,Workload Number,Throughput,Latency";
inline constexpr char kParvaDeployHeader[] =
    "Num instance,Num GPU,Model,Placement,Instance size,Batch size,Num proc";
inline constexpr int kParvaGpusPerNode = 8;

// One `<model>.csv`: sizes 1, 2, 3, 4 or 7 GPCs, batch >= 1, 1..64 processes, throughput in
// inferences/s per process, latency in seconds.
Result<InferenceProfile> ParseParvaProfile(std::string_view content, const std::string& source,
                                           const std::string& model);
// Every `*.csv` in `dir`, model name = file stem, sorted by name. At least one file.
Result<std::vector<InferenceProfile>> ReadParvaProfileDir(const std::string& dir);
std::string ParvaProfileCsv(const InferenceProfile& profile);

struct SloCell {
  std::optional<double> value;  // nullopt = N/A
  int line = 0;
  int column = 0;
};

struct SloTable {
  std::string source;
  std::vector<std::string> models;         // column names, in order
  std::vector<std::vector<SloCell>> rows;  // rows[k - 1] = scenario k, one cell per model
};

// No header; one row per scenario with one field per model (columns in `models` order).
Result<SloTable> ParseParvaSlo(std::string_view content, const std::string& source,
                               const std::vector<std::string>& models);
Result<SloTable> ReadParvaSlo(const std::string& path, const std::vector<std::string>& models);
std::string ParvaSloCsv(const SloTable& table);

// The models of `profiles` in order (the SLO column order of the benchmark).
std::vector<std::string> ParvaModelNames(const std::vector<InferenceProfile>& profiles);

// Services of scenario `scenario` (1-based) in column order: every model whose rate and latency
// are both given. A rate without a latency (or the reverse) is an error naming both cells.
Result<std::vector<InferenceService>> ParvaScenario(const std::vector<InferenceProfile>& profiles,
                                                    const SloTable& rates,
                                                    const SloTable& latencies, int scenario);

struct ParvaDeployRow {
  int node = 0;       // Num instance: node of kParvaGpusPerNode GPUs
  int gpu = 0;        // Num GPU: 0..7 inside the node
  std::string model;  // Model
  int placement = 0;  // Placement: start slot of the instance
  int gpcs = 0;       // Instance size
  int batch = 0;      // Batch size
  int procs = 0;      // Num proc
  int line = 0;       // source line, 0 when not read from a file
};

// At least one row; Num GPU 0..7, Placement 0..7, size 1/2/3/4/7, batch >= 1, 1..64 processes.
Result<std::vector<ParvaDeployRow>> ParseParvaDeploy(std::string_view content,
                                                     const std::string& source,
                                                     const std::vector<std::string>& models);
Result<std::vector<ParvaDeployRow>> ReadParvaDeploy(const std::string& path,
                                                    const std::vector<std::string>& models);
std::string ParvaDeployCsv(const std::vector<ParvaDeployRow>& rows);
// The plan's segments in ParvaGPU's format, by (gpu, start): node = gpu / 8, Num GPU = gpu % 8,
// Placement = the instance's first memory slice (on an A100 the same numbering as ParvaGPU's
// GPC slots), Instance size = GPCs.
std::vector<ParvaDeployRow> ParvaDeployFromPlan(const InferencePlan& plan);

}  // namespace tessera
