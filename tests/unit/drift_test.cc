#include "sim/drift.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessera {
namespace {

Workload Pod(const std::string& name, SimTime creation, SimTime deletion) {
  Workload w;
  w.name = name;
  w.demand = Demand{MilliCpu{1000}, MiB{0}, 1, 500, 0};
  w.creation = creation;
  w.deletion = deletion;
  return w;
}

TEST(DriftTest, TheSecondMixArrivesAfterTheFirstMixsLastArrival) {
  const std::vector<Workload> a = {Pod("p", 0, 50), Pod("q", 30, -1)};
  const std::vector<Workload> b = {Pod("p", 100, 160), Pod("r", 110, -1)};
  const std::vector<Workload> c = ChainWorkloads(a, b);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].name, "a-p");
  EXPECT_EQ(c[1].name, "a-q");
  EXPECT_EQ(c[1].creation, 30);
  EXPECT_EQ(c[2].name, "b-p");
  EXPECT_EQ(c[2].creation, 31);  // one second after the first mix's last arrival
  EXPECT_EQ(c[2].deletion, 91);  // the lifetime is kept
  EXPECT_EQ(c[3].creation, 41);
  EXPECT_EQ(c[3].deletion, -1);  // never departs
  EXPECT_EQ(ChainWorkloads(a, {}).size(), 2u);
}

DriftOptions Small() {
  DriftOptions o;
  o.generated_nodes = 40;
  o.seeds = {42};
  o.threads = 2;
  return o;
}

const DriftVariantResult& Variant(const DriftResult& r, const std::string& name) {
  for (const DriftVariantResult& v : r.variants) {
    if (v.name == name) return v;
  }
  ADD_FAILURE() << "no variant " << name;
  return r.variants.front();
}

TEST(DriftTest, TesseraFollowsAChangeOfMixAndTheVariantThatNeverForgetsDoesNot) {
  auto r = RunDrift({"share-only", "whole-only"}, DefaultDriftVariants(), Small());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GT(r->pods_from, 0);
  EXPECT_GT(r->pods_to, 0);
  EXPECT_GT(r->switch_s, 0);
  ASSERT_EQ(r->variants.size(), 3u);
  EXPECT_GE(Variant(*r, "tessera").mix_changes.mean, 1);
  EXPECT_EQ(Variant(*r, "tessera-window-0").mix_changes.mean, 0);
  EXPECT_EQ(Variant(*r, "fgd").mix_changes.mean, 0);
  for (const DriftVariantResult& v : r->variants) {
    ASSERT_EQ(v.alloc_after_pct.size(), 1u);
    EXPECT_GT(v.alloc_after_pct[0], 0) << v.name;
    EXPECT_LE(v.alloc_after_pct[0], 100) << v.name;
  }
  const std::string table = DriftTable({*r});
  EXPECT_NE(table.find("| share-only -> whole-only | tessera |"), std::string::npos) << table;
  EXPECT_NE(DriftJson({*r}, Small()).find("\"gpu_alloc_after_switch_pct\""), std::string::npos);
}

TEST(DriftTest, AMixFollowedByItselfChangesNothing) {
  auto r = RunDrift({"base", "base"}, DefaultDriftVariants(), Small());
  ASSERT_TRUE(r.ok()) << r.status().message();
  const DriftVariantResult& t = Variant(*r, "tessera");
  const DriftVariantResult& never = Variant(*r, "tessera-window-0");
  EXPECT_EQ(t.mix_changes.mean, 0);
  // No change found: every decision is the one of the learner that never forgets.
  EXPECT_EQ(t.alloc_after_pct, never.alloc_after_pct);
  EXPECT_EQ(t.wait_p95_after_s, never.wait_p95_after_s);
  EXPECT_EQ(t.replay.runs[0].placed, never.replay.runs[0].placed);
}

TEST(DriftTest, BadInputIsRefused) {
  EXPECT_EQ(RunDrift({"base", "no-such-mix"}, DefaultDriftVariants(), Small()).status().code(),
            StatusCode::kInvalidArgument);
  std::vector<DriftVariant> bad = DefaultDriftVariants();
  bad[1].tessera.mix_window = 8;
  EXPECT_EQ(RunDrift({"base", "base"}, bad, Small()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RunDrift({"base", "base"}, {}, Small()).status().code(), StatusCode::kInvalidArgument);
  DriftOptions none = Small();
  none.seeds.clear();
  EXPECT_EQ(RunDrift({"base", "base"}, DefaultDriftVariants(), none).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera
