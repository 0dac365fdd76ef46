// MIG geometry against the reference tables (NVIDIA MIG user guide, real -lgip/-lgipp output).
#include "cluster/mig_geometry.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace tessera {
namespace {

struct ProfileRow {
  const char* name;
  int id, c, m, max;
  std::vector<int> starts;
  double gib;  // reported memory, lower bound of the driver range
};

struct ModelTable {
  const char* model;
  int memory_slices, compute_slices;
  std::vector<ProfileRow> rows;
};

const std::vector<ModelTable>& Tables() {
  static const std::vector<ModelTable> t = {
      {"A30",
       4,
       4,
       {{"1g.6gb", 14, 1, 1, 4, {0, 1, 2, 3}, 5.81},
        {"1g.6gb+me", 21, 1, 1, 1, {0, 1, 2, 3}, 5.81},
        {"2g.12gb", 5, 2, 2, 2, {0, 2}, 11.69},
        {"2g.12gb+me", 6, 2, 2, 1, {0, 2}, 11.69},
        {"4g.24gb", 0, 4, 4, 1, {0}, 23.44}}},
      {"A100-40GB",
       8,
       7,
       {{"1g.5gb", 19, 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}, 4.75},
        {"1g.5gb+me", 20, 1, 1, 1, {0, 1, 2, 3, 4, 5, 6}, 4.75},
        {"1g.10gb", 15, 1, 2, 4, {0, 2, 4, 6}, 9.62},
        {"2g.10gb", 14, 2, 2, 3, {0, 2, 4}, 9.62},
        {"3g.20gb", 9, 3, 4, 2, {0, 4}, 19.50},
        {"4g.20gb", 5, 4, 4, 1, {0}, 19.50},
        {"7g.40gb", 0, 7, 8, 1, {0}, 39.25}}},
      {"A100-80GB",
       8,
       7,
       {{"1g.10gb", 19, 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}, 9.50},
        {"1g.10gb+me", 20, 1, 1, 1, {0, 1, 2, 3, 4, 5, 6}, 9.50},
        {"1g.20gb", 15, 1, 2, 4, {0, 2, 4, 6}, 19.50},
        {"2g.20gb", 14, 2, 2, 3, {0, 2, 4}, 19.50},
        {"3g.40gb", 9, 3, 4, 2, {0, 4}, 39.25},
        {"4g.40gb", 5, 4, 4, 1, {0}, 39.25},
        {"7g.80gb", 0, 7, 8, 1, {0}, 78.75}}},
      {"H100-80GB",
       8,
       7,
       {{"1g.10gb", 19, 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}, 9.75},
        {"1g.10gb+me", 20, 1, 1, 1, {0, 1, 2, 3, 4, 5, 6}, 9.75},
        {"1g.20gb", 15, 1, 2, 4, {0, 2, 4, 6}, 19.62},
        {"2g.20gb", 14, 2, 2, 3, {0, 2, 4}, 19.62},
        {"3g.40gb", 9, 3, 4, 2, {0, 4}, 39.50},
        {"4g.40gb", 5, 4, 4, 1, {0}, 39.50},
        {"7g.80gb", 0, 7, 8, 1, {0}, 79.25}}},
      {"H100-94GB",
       8,
       7,
       {{"1g.12gb", 19, 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}, 10.75},
        {"1g.12gb+me", 20, 1, 1, 1, {0, 1, 2, 3, 4, 5, 6}, 10.75},
        {"1g.24gb", 15, 1, 2, 4, {0, 2, 4, 6}, 21.62},
        {"2g.24gb", 14, 2, 2, 3, {0, 2, 4}, 21.62},
        {"3g.47gb", 9, 3, 4, 2, {0, 4}, 46.38},
        {"4g.47gb", 5, 4, 4, 1, {0}, 46.38},
        {"7g.94gb", 0, 7, 8, 1, {0}, 93.12}}},
  };
  return t;
}

TEST(MigGeometryTest, ProfilesMatchReferenceTables) {
  for (const auto& t : Tables()) {
    SCOPED_TRACE(t.model);
    const MigGeometry* g = MigGeometryFor(t.model);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->memory_slices, t.memory_slices);
    EXPECT_EQ(g->compute_slices, t.compute_slices);
    ASSERT_EQ(g->profiles.size(), t.rows.size());
    for (const auto& r : t.rows) {
      SCOPED_TRACE(r.name);
      const int p = g->Find(r.name);
      ASSERT_GE(p, 0);
      const MigProfile& prof = g->profiles[p];
      EXPECT_EQ(prof.id, r.id);
      EXPECT_EQ(prof.compute_slices, r.c);
      EXPECT_EQ(prof.memory_slices, r.m);
      EXPECT_EQ(prof.max_count, r.max);
      EXPECT_EQ(prof.starts, r.starts);
      EXPECT_NEAR(static_cast<double>(prof.memory_mib) / 1024.0, r.gib, 0.01);
      EXPECT_TRUE(prof.confirmed);
    }
  }
}

TEST(MigGeometryTest, NamedProfilesOfOtherModels) {
  const std::map<std::string, std::vector<std::string>> names = {
      {"H100-96GB", {"1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"}},
      {"H200", {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}},
      {"GH200-144GB",
       {"1g.18gb", "1g.18gb+me", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb"}},
      {"B200", {"1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"}},
      {"GB200", {"1g.23gb", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"}},
      {"B300", {"1g.34gb", "1g.67gb", "2g.67gb", "3g.135gb", "4g.135gb", "7g.269gb"}},
      {"GB300", {"1g.35gb", "1g.70gb", "2g.70gb", "3g.139gb", "4g.139gb", "7g.278gb"}},
      {"RTX-PRO-6000", {"1g.24gb", "1g.24gb+me", "2g.48gb", "4g.96gb"}},
  };
  for (const auto& [model, profs] : names) {
    SCOPED_TRACE(model);
    const MigGeometry* g = MigGeometryFor(model);
    ASSERT_NE(g, nullptr);
    ASSERT_EQ(g->profiles.size(), profs.size());
    for (const auto& p : profs) EXPECT_GE(g->Find(p), 0) << p;
  }
  // H200's 1g and 7g were seen on real hardware.
  const MigGeometry* h200 = MigGeometryFor("H200");
  EXPECT_EQ(h200->profiles[h200->Find("1g.18gb")].memory_mib, 16 * 1024);
  EXPECT_EQ(h200->profiles[h200->Find("7g.141gb")].memory_mib, 140 * 1024);
  EXPECT_FALSE(h200->profiles[h200->Find("3g.71gb")].confirmed);
}

TEST(MigGeometryTest, ModelsWithoutMig) {
  for (const char* m : {"T4", "L4", "A10", "V100M32", "G1"}) EXPECT_EQ(MigGeometryFor(m), nullptr);
  for (const auto& g : AllMigGeometries()) {
    auto id = GpuCatalog::Builtin().Find(g.model);
    ASSERT_TRUE(id) << g.model;
    EXPECT_TRUE(GpuCatalog::Builtin().Get(*id).mig_capable) << g.model;
  }
}

// The reference counts 38 maximal layouts (as profile multisets, without +me) on 8-slice GPUs.
TEST(MigGeometryTest, MaximalLayoutsOfEightSliceFamily) {
  for (const auto& g : AllMigGeometries()) {
    if (g.memory_slices != 8) continue;
    SCOPED_TRACE(g.model);
    std::set<std::multiset<int>> multisets;
    for (const auto& l : MaximalMigLayouts(g)) {
      std::multiset<int> m;
      for (const auto& in : l) m.insert(in.profile);
      multisets.insert(m);
      EXPECT_TRUE(CheckMigLayout(g, l).ok());
      EXPECT_LE(MigComputeUsed(g, l), 7);
    }
    EXPECT_EQ(multisets.size(), 38u);
  }
}

TEST(MigGeometryTest, EveryEnumeratedLayoutIsLegalAndEveryLegalOneIsEnumerated) {
  const MigGeometry& g = *MigGeometryFor("A100-80GB");
  const auto layouts = EnumerateMigLayouts(g);
  std::set<MigLayout> seen(layouts.begin(), layouts.end());
  EXPECT_EQ(seen.size(), layouts.size());
  for (const auto& l : layouts) ASSERT_TRUE(CheckMigLayout(g, l).ok()) << MigLayoutString(g, l);
  // Brute force over subsets of all placements (no +me): 18 placements, 2^18 subsets.
  std::vector<MigInstance> all;
  for (int p = 0; p < static_cast<int>(g.profiles.size()); ++p)
    if (!g.profiles[p].media_extensions)
      for (int s : g.profiles[p].starts) all.push_back({p, s});
  ASSERT_EQ(all.size(), 18u);
  size_t legal = 0;
  for (uint32_t mask = 1; mask < (1u << all.size()); ++mask) {
    MigLayout l;
    for (size_t i = 0; i < all.size(); ++i)
      if ((mask >> i) & 1) l.push_back(all[i]);
    std::sort(l.begin(), l.end(), [](MigInstance a, MigInstance b) {
      return a.start != b.start ? a.start < b.start : a.profile < b.profile;
    });
    if (!CheckMigLayout(g, l).ok()) continue;
    ++legal;
    EXPECT_TRUE(seen.count(l)) << MigLayoutString(g, l);
  }
  EXPECT_EQ(legal, layouts.size());
}

struct Illegal {
  const char* model;
  const char* layout;
  const char* reason;
};

TEST(MigGeometryTest, IllegalPlacementsRejectedWithReason) {
  const Illegal cases[] = {
      {"A100-80GB", "3g.40gb@2", "allowed starts on A100-80GB are 0,4"},
      {"A100-80GB", "4g.40gb@0 4g.40gb@0", "overlaps 4g.40gb@0"},
      {"A100-80GB", "3g.40gb@0 2g.20gb@2", "overlaps 3g.40gb@0 on memory slices 2-3"},
      {"A100-80GB", "1g.10gb+me@0 1g.10gb+me@1", "at most 1 1g.10gb+me per GPU"},
      {"A100-80GB", "7g.80gb@0 1g.10gb@0", "overlaps"},
      {"A100-80GB", "1g.20gb@1", "allowed starts on A100-80GB are 0,2,4,6"},
      {"A100-80GB", "1g.20gb@0 1g.20gb@2 1g.20gb@4 1g.20gb@6 1g.20gb@6", "overlaps"},
      {"A30", "2g.12gb+me@0 1g.6gb+me@2", "only one media-extension (+me) instance per GPU"},
      {"A30", "2g.12gb@1", "allowed starts on A30 are 0,2"},
      {"H100-80GB", "4g.40gb@4", "allowed starts on H100-80GB are 0"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.layout);
    const MigGeometry& g = *MigGeometryFor(c.model);
    auto l = ParseMigLayout(g, c.layout);
    ASSERT_FALSE(l.ok());
    EXPECT_NE(l.status().message().find(c.reason), std::string::npos) << l.status().message();
  }
}

TEST(MigGeometryTest, LegalLayoutsIncludingTwoThreeG) {
  const MigGeometry& g = *MigGeometryFor("A100-80GB");
  for (const char* text : {"3g.40gb@0 3g.40gb@4", "4g.40gb@0 3g.40gb@4", "7g.80gb@0",
                           "2g.20gb@0 2g.20gb@2 3g.40gb@4", "3g.40gb@0 2g.20gb@4 1g.10gb@6"}) {
    auto l = ParseMigLayout(g, text);
    ASSERT_TRUE(l.ok()) << text << ": " << l.status().message();
    EXPECT_EQ(MigLayoutString(g, *l), text);
  }
  // Without starts the first free allowed start is taken, in the order given.
  auto l = ParseMigLayout(g, "3g.40gb, 2g.20gb, 1g.10gb");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(MigLayoutString(g, *l), "3g.40gb@0 2g.20gb@4 1g.10gb@6");
  // With the 3g low, memory slice 7 is usable by no 1g (rule 4): 3-2-1-1 needs the 3g at 4.
  EXPECT_FALSE(ParseMigLayout(g, "3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb").ok());
  EXPECT_TRUE(ParseMigLayout(g, "3g.40gb@4, 2g.20gb, 1g.10gb, 1g.10gb").ok());
  EXPECT_FALSE(ParseMigLayout(g, "5g.50gb").ok());
  EXPECT_EQ(MigMemoryMask(g, *ParseMigLayout(g, "3g.40gb@4 1g.10gb@0")), 0xF1u);
}

TEST(MigGeometryTest, SmallestCoveringProfile) {
  const MigGeometry& g = *MigGeometryFor("A100-80GB");
  auto name = [&](int64_t mib, int slices) {
    const int p = g.SmallestCovering(mib, slices);
    return p < 0 ? std::string("none") : g.profiles[p].name;
  };
  EXPECT_EQ(name(4096, 0), "1g.10gb");
  EXPECT_EQ(name(12 * 1024, 0), "1g.20gb");
  EXPECT_EQ(name(12 * 1024, 2), "2g.20gb");
  EXPECT_EQ(name(30 * 1024, 0), "3g.40gb");
  EXPECT_EQ(name(4096, 4), "4g.40gb");
  EXPECT_EQ(name(60 * 1024, 0), "7g.80gb");
  EXPECT_EQ(name(90 * 1024, 0), "none");
}

}  // namespace
}  // namespace tessera
