#include "cluster/mig_geometry.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace tessera {
namespace {

// One row of an 8-memory-slice family (A100, H100, H200, B200, ...). GiB as `-lgip` reports;
// 0 = not seen, derived from the guide's memory fraction of the card.
struct EightSliceNames {
  const char* model;
  const char* g1;         // 1g, 1 memory slice
  const char* g1_double;  // 1g, 2 memory slices
  const char* g2;
  const char* g3;
  const char* g4;
  const char* g7;
  double gib[6];         // 1g, 1g double, 2g, 3g, 4g, 7g
  bool has_me;           // a 1g+me profile exists
  bool placements_seen;  // placement table seen on real hardware
};

int64_t GibToMib(double gib) {
  return static_cast<int64_t>(std::floor(gib * 1024.0));
}

MigProfile Profile(std::string name, int id, int c, int m, int max, std::vector<int> starts,
                   int64_t mib, bool me, bool confirmed) {
  MigProfile p;
  p.name = std::move(name);
  p.id = id;
  p.compute_slices = c;
  p.memory_slices = m;
  p.max_count = max;
  p.starts = std::move(starts);
  p.memory_mib = mib;
  p.media_extensions = me;
  p.confirmed = confirmed;
  return p;
}

MigGeometry EightSlice(const EightSliceNames& n, int64_t card_mib) {
  MigGeometry g;
  g.model = n.model;
  g.memory_slices = 8;
  g.compute_slices = 7;
  g.max_instances = 7;
  // Unseen memory: the fraction of the card, less the ~3 % that real instances report below it.
  auto mem = [&](int i, int slices) {
    if (n.gib[i] > 0) return GibToMib(n.gib[i]);
    return static_cast<int64_t>(static_cast<double>(card_mib) * slices / 8.0 * 0.97);
  };
  const bool ok = n.placements_seen;
  g.profiles.push_back(
      Profile(n.g1, 19, 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}, mem(0, 1), false, ok && n.gib[0] > 0));
  if (n.has_me)
    g.profiles.push_back(Profile(std::string(n.g1) + "+me", 20, 1, 1, 1, {0, 1, 2, 3, 4, 5, 6},
                                 mem(0, 1), true, ok && n.gib[0] > 0));
  g.profiles.push_back(
      Profile(n.g1_double, 15, 1, 2, 4, {0, 2, 4, 6}, mem(1, 2), false, ok && n.gib[1] > 0));
  g.profiles.push_back(Profile(n.g2, 14, 2, 2, 3, {0, 2, 4}, mem(2, 2), false, ok && n.gib[2] > 0));
  g.profiles.push_back(Profile(n.g3, 9, 3, 4, 2, {0, 4}, mem(3, 4), false, ok && n.gib[3] > 0));
  g.profiles.push_back(Profile(n.g4, 5, 4, 4, 1, {0}, mem(4, 4), false, ok && n.gib[4] > 0));
  g.profiles.push_back(Profile(n.g7, 0, 7, 8, 1, {0}, mem(5, 8), false, ok && n.gib[5] > 0));
  return g;
}

std::vector<MigGeometry> BuildGeometries() {
  const GpuCatalog& cat = GpuCatalog::Builtin();
  auto card = [&](const char* name) {
    auto id = cat.Find(name);
    return id ? cat.Get(*id).memory_mib : 0;
  };
  std::vector<MigGeometry> out;

  // A30-24GB: 4 memory slices, 4 compute slices.
  {
    MigGeometry g;
    g.model = "A30";
    g.memory_slices = 4;
    g.compute_slices = 4;
    g.max_instances = 4;
    g.profiles = {
        Profile("1g.6gb", 14, 1, 1, 4, {0, 1, 2, 3}, GibToMib(5.81), false, true),
        Profile("1g.6gb+me", 21, 1, 1, 1, {0, 1, 2, 3}, GibToMib(5.81), true, true),
        Profile("2g.12gb", 5, 2, 2, 2, {0, 2}, GibToMib(11.69), false, true),
        Profile("2g.12gb+me", 6, 2, 2, 1, {0, 2}, GibToMib(11.69), true, true),
        Profile("4g.24gb", 0, 4, 4, 1, {0}, GibToMib(23.44), false, true),
    };
    out.push_back(std::move(g));
  }
  const EightSliceNames eight[] = {
      {"A100-40GB",
       "1g.5gb",
       "1g.10gb",
       "2g.10gb",
       "3g.20gb",
       "4g.20gb",
       "7g.40gb",
       {4.75, 9.62, 9.62, 19.50, 19.50, 39.25},
       true,
       true},
      {"A100-80GB",
       "1g.10gb",
       "1g.20gb",
       "2g.20gb",
       "3g.40gb",
       "4g.40gb",
       "7g.80gb",
       {9.50, 19.50, 19.50, 39.25, 39.25, 78.75},
       true,
       true},
      {"H100-80GB",
       "1g.10gb",
       "1g.20gb",
       "2g.20gb",
       "3g.40gb",
       "4g.40gb",
       "7g.80gb",
       {9.75, 19.62, 19.62, 39.50, 39.50, 79.25},
       true,
       true},
      {"H100-94GB",
       "1g.12gb",
       "1g.24gb",
       "2g.24gb",
       "3g.47gb",
       "4g.47gb",
       "7g.94gb",
       {10.75, 21.62, 21.62, 46.38, 46.38, 93.12},
       true,
       true},
      {"H100-96GB",
       "1g.12gb",
       "1g.24gb",
       "2g.24gb",
       "3g.48gb",
       "4g.48gb",
       "7g.96gb",
       {0, 0, 0, 0, 0, 0},
       false,
       false},
      {"H200",
       "1g.18gb",
       "1g.35gb",
       "2g.35gb",
       "3g.71gb",
       "4g.71gb",
       "7g.141gb",
       {16.00, 0, 32.50, 0, 0, 140.00},
       true,
       false},
      {"GH200-144GB",
       "1g.18gb",
       "1g.36gb",
       "2g.36gb",
       "3g.72gb",
       "4g.72gb",
       "7g.144gb",
       {0, 0, 0, 0, 0, 0},
       true,
       false},
      {"B200",
       "1g.23gb",
       "1g.45gb",
       "2g.45gb",
       "3g.90gb",
       "4g.90gb",
       "7g.180gb",
       {0, 0, 0, 0, 0, 0},
       true,
       false},
      {"GB200",
       "1g.23gb",
       "1g.47gb",
       "2g.47gb",
       "3g.93gb",
       "4g.93gb",
       "7g.186gb",
       {0, 0, 0, 0, 0, 0},
       false,
       false},
      {"B300",
       "1g.34gb",
       "1g.67gb",
       "2g.67gb",
       "3g.135gb",
       "4g.135gb",
       "7g.269gb",
       {0, 0, 0, 0, 0, 0},
       false,
       false},
      {"GB300",
       "1g.35gb",
       "1g.70gb",
       "2g.70gb",
       "3g.139gb",
       "4g.139gb",
       "7g.278gb",
       {0, 0, 0, 0, 0, 0},
       false,
       false},
  };
  for (const auto& n : eight) out.push_back(EightSlice(n, card(n.model)));

  // RTX PRO 6000 Blackwell 96GB: 4 slices. Graphics (+gfx) and media-split (-me, +me.all)
  // variants are left out: their coexistence rules are not documented.
  {
    MigGeometry g;
    g.model = "RTX-PRO-6000";
    g.memory_slices = 4;
    g.compute_slices = 4;
    g.max_instances = 4;
    const int64_t q = card("RTX-PRO-6000") / 4 * 97 / 100;
    g.profiles = {
        Profile("1g.24gb", 14, 1, 1, 4, {0, 1, 2, 3}, q, false, true),
        Profile("1g.24gb+me", 21, 1, 1, 1, {0, 1, 2, 3}, q, true, true),
        Profile("2g.48gb", 5, 2, 2, 2, {0, 2}, 2 * q, false, false),
        Profile("4g.96gb", 0, 4, 4, 1, {0}, 4 * q, false, false),
    };
    out.push_back(std::move(g));
  }
  return out;
}

std::string RangeText(int start, int size) {
  return size == 1 ? std::to_string(start)
                   : std::to_string(start) + "-" + std::to_string(start + size - 1);
}

std::string InstanceText(const MigGeometry& geo, MigInstance in) {
  return geo.profiles[in.profile].name + "@" + std::to_string(in.start);
}

uint32_t RangeMask(int start, int size) {
  return ((1u << size) - 1u) << start;
}

}  // namespace

const std::vector<MigGeometry>& AllMigGeometries() {
  static const std::vector<MigGeometry>* all = new std::vector<MigGeometry>(BuildGeometries());
  return *all;
}

const MigGeometry* MigGeometryFor(std::string_view model_name) {
  for (const auto& g : AllMigGeometries())
    if (g.model == model_name) return &g;
  return nullptr;
}

const MigGeometry* MigGeometryFor(GpuModelId model) {
  const GpuCatalog& cat = GpuCatalog::Builtin();
  if (model == kNoGpuModel || model >= cat.size()) return nullptr;
  return MigGeometryFor(cat.Get(model).name);
}

int MigGeometry::Find(std::string_view name) const {
  for (size_t i = 0; i < profiles.size(); ++i)
    if (profiles[i].name == name) return static_cast<int>(i);
  return -1;
}

int MigGeometry::SmallestCovering(int64_t memory_mib, int compute_slices_needed) const {
  int best = -1;
  for (size_t i = 0; i < profiles.size(); ++i) {
    const MigProfile& p = profiles[i];
    if (p.media_extensions || p.memory_mib < memory_mib || p.compute_slices < compute_slices_needed)
      continue;
    if (best < 0 || p.compute_slices < profiles[best].compute_slices ||
        (p.compute_slices == profiles[best].compute_slices &&
         p.memory_slices < profiles[best].memory_slices))
      best = static_cast<int>(i);
  }
  return best;
}

Status CheckMigAdd(const MigGeometry& geo, const MigLayout& layout, MigInstance add) {
  if (add.profile < 0 || add.profile >= static_cast<int>(geo.profiles.size()))
    return InvalidArgument("profile index " + std::to_string(add.profile) + " is not a " +
                           geo.model + " profile");
  const MigProfile& p = geo.profiles[add.profile];
  if (std::find(p.starts.begin(), p.starts.end(), add.start) == p.starts.end()) {
    std::string starts;
    for (int s : p.starts) starts += (starts.empty() ? "" : ",") + std::to_string(s);
    return InvalidArgument(InstanceText(geo, add) + ": allowed starts on " + geo.model + " are " +
                           starts);
  }
  int same = 0, me = 0, compute = p.compute_slices;
  for (const MigInstance& in : layout) {
    const MigProfile& q = geo.profiles[in.profile];
    const int lo = std::max(in.start, add.start);
    const int hi = std::min(in.start + q.memory_slices, add.start + p.memory_slices);
    if (lo < hi)
      return InvalidArgument(InstanceText(geo, add) + " overlaps " + InstanceText(geo, in) +
                             " on memory slice" + (hi - lo > 1 ? "s " : " ") +
                             RangeText(lo, hi - lo));
    same += in.profile == add.profile;
    me += q.media_extensions;
    compute += q.compute_slices;
  }
  if (same >= p.max_count)
    return InvalidArgument(InstanceText(geo, add) + ": at most " + std::to_string(p.max_count) +
                           " " + p.name + " per GPU");
  if (p.media_extensions && me > 0)
    return InvalidArgument(InstanceText(geo, add) +
                           ": only one media-extension (+me) instance per GPU");
  if (compute > geo.compute_slices)
    return InvalidArgument(InstanceText(geo, add) + ": needs " + std::to_string(compute) +
                           " compute slices, the GPU has " + std::to_string(geo.compute_slices));
  if (static_cast<int>(layout.size()) >= geo.max_instances)
    return InvalidArgument(InstanceText(geo, add) + ": at most " +
                           std::to_string(geo.max_instances) + " instances per GPU");
  return Status::Ok();
}

Status CheckMigLayout(const MigGeometry& geo, const MigLayout& layout) {
  MigLayout built;
  for (const MigInstance& in : layout) {
    TESSERA_RETURN_IF_ERROR(CheckMigAdd(geo, built, in));
    built.push_back(in);
  }
  return Status::Ok();
}

namespace {

std::vector<MigInstance> AllPlacements(const MigGeometry& geo, bool include_me) {
  std::vector<MigInstance> all;
  for (size_t i = 0; i < geo.profiles.size(); ++i) {
    if (geo.profiles[i].media_extensions && !include_me) continue;
    for (int s : geo.profiles[i].starts) all.push_back({static_cast<int>(i), s});
  }
  std::sort(all.begin(), all.end(), [](MigInstance a, MigInstance b) {
    return a.start != b.start ? a.start < b.start : a.profile < b.profile;
  });
  return all;
}

void Enumerate(const MigGeometry& geo, const std::vector<MigInstance>& all, size_t from,
               MigLayout& cur, std::vector<MigLayout>& out) {
  for (size_t i = from; i < all.size(); ++i) {
    if (!CheckMigAdd(geo, cur, all[i]).ok()) continue;
    cur.push_back(all[i]);
    out.push_back(cur);
    Enumerate(geo, all, i + 1, cur, out);
    cur.pop_back();
  }
}

}  // namespace

std::vector<MigLayout> EnumerateMigLayouts(const MigGeometry& geo, bool include_me) {
  const auto all = AllPlacements(geo, include_me);
  std::vector<MigLayout> out;
  MigLayout cur;
  Enumerate(geo, all, 0, cur, out);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<MigLayout> MaximalMigLayouts(const MigGeometry& geo, bool include_me) {
  const auto all = AllPlacements(geo, include_me);
  std::vector<MigLayout> out;
  for (auto& layout : EnumerateMigLayouts(geo, include_me)) {
    bool maximal = true;
    for (MigInstance in : all) {
      if (CheckMigAdd(geo, layout, in).ok()) {
        maximal = false;
        break;
      }
    }
    if (maximal) out.push_back(std::move(layout));
  }
  return out;
}

int MigComputeUsed(const MigGeometry& geo, const MigLayout& layout) {
  int c = 0;
  for (const MigInstance& in : layout) c += geo.profiles[in.profile].compute_slices;
  return c;
}

uint32_t MigMemoryMask(const MigGeometry& geo, const MigLayout& layout) {
  uint32_t m = 0;
  for (const MigInstance& in : layout)
    m |= RangeMask(in.start, geo.profiles[in.profile].memory_slices);
  return m;
}

std::string MigLayoutString(const MigGeometry& geo, const MigLayout& layout) {
  if (layout.empty()) return "(empty)";
  std::string out;
  for (const MigInstance& in : layout) {
    if (!out.empty()) out += ' ';
    out += InstanceText(geo, in);
  }
  return out;
}

Result<MigLayout> ParseMigLayout(const MigGeometry& geo, std::string_view text) {
  MigLayout layout;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',' || text[i] == '\t')) ++i;
    if (i >= text.size()) break;
    size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != ',' && text[j] != '\t') ++j;
    const std::string_view tok = text.substr(i, j - i);
    i = j;
    const size_t at = tok.find('@');
    const std::string_view name = tok.substr(0, at);
    const int p = geo.Find(name);
    if (p < 0) {
      std::string known;
      for (const auto& prof : geo.profiles) known += (known.empty() ? "" : ", ") + prof.name;
      return InvalidArgument("unknown MIG profile '" + std::string(name) + "' for " + geo.model +
                             " (known: " + known + ")");
    }
    MigInstance in{p, -1};
    if (at != std::string_view::npos) {
      const std::string_view num = tok.substr(at + 1);
      int v = 0;
      if (num.empty() || num.size() > 2)
        return InvalidArgument("bad start in '" + std::string(tok) + "'");
      for (char c : num) {
        if (c < '0' || c > '9') return InvalidArgument("bad start in '" + std::string(tok) + "'");
        v = v * 10 + (c - '0');
      }
      in.start = v;
      TESSERA_RETURN_IF_ERROR(CheckMigAdd(geo, layout, in));
    } else {
      Status last = InvalidArgument("no placement");
      for (int s : geo.profiles[p].starts) {
        last = CheckMigAdd(geo, layout, {p, s});
        if (last.ok()) {
          in.start = s;
          break;
        }
      }
      if (in.start < 0)
        return InvalidArgument(std::string(name) + " does not fit after " +
                               MigLayoutString(geo, layout) + ": " + last.message());
    }
    layout.push_back(in);
  }
  std::sort(layout.begin(), layout.end(), [](MigInstance a, MigInstance b) {
    return a.start != b.start ? a.start < b.start : a.profile < b.profile;
  });
  return layout;
}

}  // namespace tessera
