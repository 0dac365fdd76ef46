// MIG geometry: per GPU model, the GPU-instance profiles, their placements on the memory-slice
// axis, and the rules that decide which instances can coexist on one GPU.
//
// Facts come from NVIDIA's MIG user guide and real `nvidia-smi mig -lgip/-lgipp` output (see
// docs/SHARING.md). A layout is a set of GPU instances, each a (profile, start) placement; it is
// legal iff every instance sits at one of its profile's allowed starts, no two memory ranges
// overlap, no profile exceeds its per-GPU count, at most one media-extension (+me) instance is
// present, and the compute slices sum to at most the GPU's. The tables are immutable and shared;
// all functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/gpu_catalog.h"
#include "core/status.h"

namespace tessera {

struct MigProfile {
  std::string name;               // e.g. "3g.40gb", "1g.10gb+me"
  int id = 0;                     // nvidia-smi GI profile ID (-cgi), per model
  int compute_slices = 0;         // G: SM slices
  int memory_slices = 0;          // placement size on the memory-slice axis
  int max_count = 0;              // instances of this profile per GPU
  std::vector<int> starts;        // allowed placement starts
  int64_t memory_mib = 0;         // memory the instance reports
  bool media_extensions = false;  // "+me": owns the GPU's single JPEG/OFA set
  bool confirmed = true;          // false: inferred from the guide's fraction table, not seen
};

struct MigGeometry {
  std::string model;       // catalog name, e.g. "A100-80GB"
  int memory_slices = 8;   // 8 (A100/H100/H200/B200) or 4 (A30)
  int compute_slices = 7;  // 7 or 4
  int max_instances = 7;
  std::vector<MigProfile> profiles;

  // Index of the profile with this name, or -1.
  int Find(std::string_view name) const;
  // Smallest profile (fewest compute slices, then fewest memory slices, no +me) whose memory
  // and compute cover the request; -1 if none does. compute_slices_needed may be 0.
  int SmallestCovering(int64_t memory_mib, int compute_slices_needed) const;
};

// One GPU instance in a layout.
struct MigInstance {
  int profile = 0;  // index into MigGeometry::profiles
  int start = 0;    // first memory slice
  bool operator==(const MigInstance&) const = default;
  auto operator<=>(const MigInstance&) const = default;
};

// A set of instances, kept sorted by (start, profile).
using MigLayout = std::vector<MigInstance>;

// The geometry of a MIG-capable catalog model, or nullptr for models without MIG.
const MigGeometry* MigGeometryFor(GpuModelId model);
const MigGeometry* MigGeometryFor(std::string_view model_name);
// All MIG geometries of the built-in catalog.
const std::vector<MigGeometry>& AllMigGeometries();

// Ok, or InvalidArgument naming the first rule the layout breaks (e.g. "3g.40gb at 2: allowed
// starts are 0,4", "2g.20gb at 2 overlaps 3g.40gb at 0 on memory slices 2-3").
Status CheckMigLayout(const MigGeometry& geo, const MigLayout& layout);
// Whether `add` can join the legal layout `layout`; Ok or the reason.
Status CheckMigAdd(const MigGeometry& geo, const MigLayout& layout, MigInstance add);

// Every legal non-empty layout, each sorted, in lexicographic order. With include_me = false,
// +me profiles are left out (the planner's default; they exist for media workloads).
std::vector<MigLayout> EnumerateMigLayouts(const MigGeometry& geo, bool include_me = false);
// The legal layouts to which no further instance can be added.
std::vector<MigLayout> MaximalMigLayouts(const MigGeometry& geo, bool include_me = false);

// Compute slices used by a layout; a bitmask of the memory slices it occupies.
int MigComputeUsed(const MigGeometry& geo, const MigLayout& layout);
uint32_t MigMemoryMask(const MigGeometry& geo, const MigLayout& layout);
// "3g.40gb@0 2g.20gb@4 1g.10gb@6"; "(empty)" for no instances.
std::string MigLayoutString(const MigGeometry& geo, const MigLayout& layout);
// Parses the MigLayoutString form (instances separated by spaces or commas). Start may be
// omitted ("3g.40gb"), in which case the first free allowed start is taken, as the driver does.
Result<MigLayout> ParseMigLayout(const MigGeometry& geo, std::string_view text);

}  // namespace tessera
