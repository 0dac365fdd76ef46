#include "sim/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/stats.h"
namespace tessera {
namespace {

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::vector<double> Bucket(const FillSummary& s, int b) {
  std::vector<double> v;
  for (const auto& r : s.runs) v.push_back(r.unalloc_pct[b]);
  return v;
}

nlohmann::json StatsJson(const Stats& st) {
  return nlohmann::json{{"mean", st.mean},
                        {"median", st.median},
                        {"std", st.stddev},
                        {"min", st.min},
                        {"max", st.max}};
}

}  // namespace

std::string FillTable(const std::vector<FillSummary>& results,
                      const std::vector<FillBoundRun>* bounds) {
  std::string out;
  char line[256];
  const double tune = results.empty() ? 1.3 : results.front().tune_ratio;
  const std::string at_end = "unalloc%@" + Fmt("%.6g", tune * 100.0) + " (sd)";
  std::snprintf(line, sizeof line, "%-11s %6s %18s %18s %14s %9s\n", "policy", "seeds",
                "unalloc%@100 (sd)", at_end.c_str(), "frag%@90 arr", "wall s");
  out += line;
  out += std::string(81, '-') + "\n";
  for (const auto& s : results) {
    std::snprintf(line, sizeof line, "%-11s %6zu %11.2f (%4.2f) %11.2f (%4.2f) %14.1f %9.2f\n",
                  s.policy.c_str(), s.runs.size(), s.unalloc_at_100.mean, s.unalloc_at_100.stddev,
                  s.unalloc_at_130.mean, s.unalloc_at_130.stddev, s.frag_ratio_at_90.mean,
                  s.wall_seconds);
    out += line;
  }
  if (bounds != nullptr && !bounds->empty()) {
    const FillBoundStats b = SummarizeFillBounds(*bounds);
    std::snprintf(line, sizeof line, "%-11s %6zu %11.2f (%4.2f) %11.2f (%4.2f) %14s %9s\n", "bound",
                  bounds->size(), b.at_100.mean, b.at_100.stddev, b.at_130.mean, b.at_130.stddev,
                  "-", "-");
    out += line;
    if (b.share_packing_at_100) {
      std::snprintf(line, sizeof line,
                    "share packing floor at 100%% (not a bound): %.2f (%.2f); docs/BENCHMARK.md\n",
                    b.share_packing_at_100->mean, b.share_packing_at_100->stddev);
      out += line;
    }
  }
  return out;
}

std::string FillJson(const std::vector<FillSummary>& results, const std::string& nodes_source,
                     const std::string& pods_source, const std::vector<FillBoundRun>* bounds) {
  nlohmann::json j;
  j["nodes"] = nodes_source;
  j["pods"] = pods_source;
  // "unalloc_pct_at_130" keeps its name for any tune ratio: it is measured at the end of the run.
  if (!results.empty()) j["tune_ratio"] = results.front().tune_ratio;
  nlohmann::json pol = nlohmann::json::object();
  for (const auto& s : results) {
    nlohmann::json p;
    auto stats = StatsJson;
    p["unalloc_pct_at_100"] = s.unalloc_at_100.mean;
    p["unalloc_pct_at_130"] = s.unalloc_at_130.mean;
    p["frag_ratio_at_90"] = s.frag_ratio_at_90.mean;
    p["unalloc_pct_at_100_stats"] = stats(s.unalloc_at_100);
    p["unalloc_pct_at_130_stats"] = stats(s.unalloc_at_130);
    p["frag_ratio_at_90_stats"] = stats(s.frag_ratio_at_90);
    nlohmann::json seeds = nlohmann::json::array();
    nlohmann::json per_seed = nlohmann::json::array();
    for (const auto& r : s.runs) {
      seeds.push_back(r.seed);
      per_seed.push_back({{"seed", r.seed},
                          {"pods", r.pods},
                          {"placed", r.placed},
                          {"unalloc_pct_at_100", r.unalloc_pct_at_100},
                          {"unalloc_pct_at_130", r.unalloc_pct_at_130},
                          {"frag_ratio_at_90", r.frag_ratio_at_90},
                          {"final_arrival_pct", r.final_arrival_pct},
                          {"wall_seconds", r.wall_seconds}});
    }
    p["seeds"] = seeds;
    p["runs"] = per_seed;
    p["wall_seconds"] = s.wall_seconds;
    pol[s.policy] = p;
  }
  j["policies"] = pol;
  if (bounds != nullptr) {
    nlohmann::json runs = nlohmann::json::array();
    for (const FillBoundRun& r : *bounds)
      runs.push_back({{"seed", r.seed},
                      {"unalloc_pct_at_100", r.unalloc_pct_at_100},
                      {"unalloc_pct_at_130", r.unalloc_pct_at_130},
                      {"share_packing_pct_at_100", r.share_packing_pct_at_100
                                                       ? nlohmann::json(*r.share_packing_pct_at_100)
                                                       : nlohmann::json(nullptr)}});
    const FillBoundStats b = SummarizeFillBounds(*bounds);
    j["bound"] = {
        {"unalloc_pct_at_100", b.at_100.mean},
        {"unalloc_pct_at_130", b.at_130.mean},
        {"unalloc_pct_at_100_stats", StatsJson(b.at_100)},
        {"unalloc_pct_at_130_stats", StatsJson(b.at_130)},
        {"share_packing_pct_at_100_stats",
         b.share_packing_at_100 ? StatsJson(*b.share_packing_at_100) : nlohmann::json(nullptr)},
        {"runs", runs}};
  }
  return j.dump(2) + "\n";
}

std::string FillCurveCsv(const std::vector<FillSummary>& results) {
  std::string out = "policy,seed,arrival_pct,unalloc_pct,frag_ratio_pct,frag_pct\n";
  for (const auto& s : results) {
    for (const auto& r : s.runs) {
      for (int b = 0; b < kArrivalBuckets; ++b) {
        out += s.policy + "," + std::to_string(r.seed) + "," + std::to_string(b) + "," +
               Fmt("%.4f", r.unalloc_pct[b]) + "," + Fmt("%.4f", r.frag_ratio_pct[b]) + "," +
               Fmt("%.4f", r.frag_pct[b]) + "\n";
      }
    }
  }
  return out;
}

std::string FillPlotSvg(const std::vector<FillSummary>& results, const std::string& title) {
  const int W = 760, H = 480, L = 70, R = 150, T = 40, B = 55;
  const int x0 = 75, x1 = 130;
  double ymax = 1;
  for (const auto& s : results) {
    for (int b = x0; b <= x1; ++b) ymax = std::max(ymax, Quantile(Bucket(s, b), 0.75));
  }
  ymax = std::ceil(ymax / 5.0) * 5.0;
  auto X = [&](double a) { return L + (a - x0) / (x1 - x0) * (W - L - R); };
  auto Y = [&](double u) { return T + (1.0 - u / ymax) * (H - T - B); };
  static const char* colors[] = {"#7f7f7f", "#bcbd22", "#17becf", "#9467bd",
                                 "#ff7f0e", "#1f77b4", "#d62728", "#2ca02c"};
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(W) +
                    "\" height=\"" + std::to_string(H) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + std::to_string(W / 2) +
         "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">" + title + "</text>\n";
  for (int a = x0; a <= x1; a += 5) {
    svg += "<line x1=\"" + Fmt("%.1f", X(a)) + "\" y1=\"" + std::to_string(T) + "\" x2=\"" +
           Fmt("%.1f", X(a)) + "\" y2=\"" + std::to_string(H - B) + "\" stroke=\"#eee\"/>\n";
    svg += "<text x=\"" + Fmt("%.1f", X(a)) + "\" y=\"" + std::to_string(H - B + 16) +
           "\" text-anchor=\"middle\">" + std::to_string(a) + "</text>\n";
  }
  for (double u = 0; u <= ymax + 1e-9; u += ymax / 5) {
    svg += "<line x1=\"" + std::to_string(L) + "\" y1=\"" + Fmt("%.1f", Y(u)) + "\" x2=\"" +
           std::to_string(W - R) + "\" y2=\"" + Fmt("%.1f", Y(u)) + "\" stroke=\"#eee\"/>\n";
    svg += "<text x=\"" + std::to_string(L - 6) + "\" y=\"" + Fmt("%.1f", Y(u) + 4) +
           "\" text-anchor=\"end\">" + Fmt("%.0f", u) + "</text>\n";
  }
  svg += "<text x=\"" + Fmt("%.1f", (L + W - R) / 2.0) + "\" y=\"" + std::to_string(H - 15) +
         "\" text-anchor=\"middle\">Arrived workloads (% of cluster GPU capacity)</text>\n";
  svg += "<text transform=\"translate(18," + Fmt("%.1f", (T + H - B) / 2.0) +
         ") rotate(-90)\" text-anchor=\"middle\">Unallocated GPU (%)</text>\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& s = results[i];
    const char* c = colors[i % 8];
    std::string band, line;
    for (int b = x0; b <= x1; ++b)
      band += Fmt("%.1f,", X(b)) + Fmt("%.1f ", Y(Quantile(Bucket(s, b), 0.75)));
    for (int b = x1; b >= x0; --b)
      band += Fmt("%.1f,", X(b)) + Fmt("%.1f ", Y(Quantile(Bucket(s, b), 0.25)));
    for (int b = x0; b <= x1; ++b)
      line += Fmt("%.1f,", X(b)) + Fmt("%.1f ", Y(Quantile(Bucket(s, b), 0.5)));
    svg += "<polygon points=\"" + band + "\" fill=\"" + c +
           "\" fill-opacity=\"0.2\" stroke=\"none\"/>\n";
    svg += "<polyline points=\"" + line + "\" fill=\"none\" stroke=\"" + c +
           "\" stroke-width=\"2\"/>\n";
    const double ly = T + 10 + 18.0 * static_cast<double>(i);
    svg += "<line x1=\"" + std::to_string(W - R + 12) + "\" y1=\"" + Fmt("%.1f", ly) + "\" x2=\"" +
           std::to_string(W - R + 32) + "\" y2=\"" + Fmt("%.1f", ly) + "\" stroke=\"" + c +
           "\" stroke-width=\"3\"/>\n";
    svg += "<text x=\"" + std::to_string(W - R + 38) + "\" y=\"" + Fmt("%.1f", ly + 4) + "\">" +
           s.policy + Fmt(" %.2f%%", s.unalloc_at_100.mean) + "</text>\n";
  }
  svg += "<line x1=\"" + Fmt("%.1f", X(100)) + "\" y1=\"" + std::to_string(T) + "\" x2=\"" +
         Fmt("%.1f", X(100)) + "\" y2=\"" + std::to_string(H - B) +
         "\" stroke=\"#444\" stroke-dasharray=\"4 3\"/>\n";
  svg += "</svg>\n";
  return svg;
}

Status WriteFileAtomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return IoError("cannot write '" + tmp + "'");
    out << content;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return IoError("error writing '" + tmp + "'");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return IoError("cannot rename '" + tmp + "' to '" + path + "'");
  }
  return Status::Ok();
}

}  // namespace tessera
