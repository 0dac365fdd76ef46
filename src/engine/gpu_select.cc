#include "engine/gpu_select.h"

namespace tessera {

GpuMask SelectFirstFit(const NodeFree& f, const Demand& d) {
  GpuMask m = 0;
  int need = d.num_gpu;
  for (int g = 0; g < f.gpu_count && need > 0; ++g) {
    if (f.gpu[g] >= d.gpu_milli) {
      m |= GpuMask{1} << g;
      --need;
    }
  }
  return need == 0 ? m : 0;
}

GpuMask SelectBestFit(const NodeFree& f, const Demand& d) {
  if (!d.IsShare()) return SelectFirstFit(f, d);
  int best = -1;
  for (int g = 0; g < f.gpu_count; ++g) {
    if (f.gpu[g] >= d.gpu_milli && (best < 0 || f.gpu[g] < f.gpu[best])) best = g;
  }
  return best < 0 ? 0 : GpuMask{1} << best;
}

GpuMask SelectRandom(const NodeFree& f, const Demand& d, Rng& rng) {
  if (!d.IsShare()) return SelectFirstFit(f, d);
  int fitting[kMaxGpusPerNode];
  int n = 0;
  for (int g = 0; g < f.gpu_count; ++g) {
    if (f.gpu[g] >= d.gpu_milli) fitting[n++] = g;
  }
  return n == 0 ? 0 : GpuMask{1} << fitting[rng.Uniform(n)];
}

}  // namespace tessera
