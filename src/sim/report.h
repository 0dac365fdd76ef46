// Output of fill experiments: a readable table, JSON, a CSV of the curves and an SVG plot of
// unallocated GPU % against arrival % (median over seeds, band = interquartile range).
// Files are written to a temporary name and renamed, so a failed run leaves no partial file.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "sim/fill.h"
#include "sim/fill_bound.h"

namespace tessera {

// The table names the end-of-run column after the runs' tune ratio ("unalloc%@130" at 1.3,
// "unalloc%@200" at 2). The JSON records "tune_ratio"; its "unalloc_pct_at_130" keys keep
// their name and hold the end-of-run value whatever the ratio.
// With `bounds` (sim/fill_bound.h, one per seed), the table ends with a "bound" row and the
// JSON has a "bound" object: the means, their stats and the per-seed runs.
std::string FillTable(const std::vector<FillSummary>& results,
                      const std::vector<FillBoundRun>* bounds = nullptr);
std::string FillJson(const std::vector<FillSummary>& results, const std::string& nodes_source,
                     const std::string& pods_source,
                     const std::vector<FillBoundRun>* bounds = nullptr);
std::string FillCurveCsv(const std::vector<FillSummary>& results);
std::string FillPlotSvg(const std::vector<FillSummary>& results, const std::string& title);

// Writes `content` to `path` atomically (temporary file + rename).
Status WriteFileAtomic(const std::string& path, const std::string& content);

}  // namespace tessera
