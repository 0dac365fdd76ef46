// GPU choice inside a node, shared by the policies. All functions expect a node on which the
// demand fits (at least num_gpu GPUs with gpu_milli free); they return 0 otherwise.
#pragma once

#include "cluster/cluster_state.h"
#include "core/random.h"

namespace tessera {

// The lowest-index GPUs with at least demand.gpu_milli free (whole GPUs: fully free GPUs).
GpuMask SelectFirstFit(const NodeFree& f, const Demand& d);
// Share demand: the fitting GPU with the least free share (lowest index on ties).
// Whole-GPU demand: as SelectFirstFit.
GpuMask SelectBestFit(const NodeFree& f, const Demand& d);
// Share demand: a fitting GPU chosen uniformly. Whole-GPU demand: as SelectFirstFit.
GpuMask SelectRandom(const NodeFree& f, const Demand& d, Rng& rng);

}  // namespace tessera
