// Readers for cluster and workload traces in the Alibaba GPU trace CSV schema.
//
// Nodes: columns sn, cpu_milli, memory_mib, gpu, model (any order, extra columns ignored).
// Pods: name, cpu_milli, memory_mib, num_gpu, gpu_milli required; gpu_spec, creation_time,
// deletion_time optional (other columns ignored). Every row must parse: a malformed or
// impossible row fails the whole read with FILE:LINE:COL and the reason (no row is skipped).
// Pure parsing functions take the text and a source name, so they can be fuzzed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cluster/types.h"
#include "core/status.h"

namespace tessera {

struct CsvField;  // sim/csv.h

Result<std::vector<NodeSpec>> ParseNodesCsv(std::string_view content, const std::string& source);
Result<std::vector<Workload>> ParsePodsCsv(std::string_view content, const std::string& source);

Result<std::vector<NodeSpec>> ReadNodesCsv(const std::string& path);
Result<std::vector<Workload>> ReadPodsCsv(const std::string& path);

// The pod demand of one row from its cpu_milli, memory_mib, num_gpu and gpu_milli fields:
// num_gpu and gpu_milli both zero or both positive, whole GPUs when num_gpu > 1. Errors name
// the field (FILE:LINE:COL).
Result<Demand> ParsePodDemand(const std::string& source, const CsvField& cpu_milli,
                              const CsvField& memory_mib, const CsvField& num_gpu,
                              const CsvField& gpu_milli);

// Parses "A|B|C" into a mask of catalog models; empty = any. Error names the unknown model.
Result<ModelMask> ParseModelList(std::string_view text);

}  // namespace tessera
