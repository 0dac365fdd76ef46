#include "policies/frag.h"

namespace tessera {

FragModel::FragModel(TargetWorkload target) : target_(std::move(target)) {
  const size_t m = target_.shapes.size();
  usable_.resize(m);
  less_.resize(m);
  access_.resize(m);
}

double FragModel::Frag(const NodeFree& f) const {
  const double idle = f.gpu_total;
  double frag = 0;
  for (const TaskShape& s : target_.shapes) {
    if (s.num_gpu == 0 || !(s.models == 0 || (f.model != kNoGpuModel && ((s.models >> f.model) & 1)))) {
      frag += s.popularity * idle;
      continue;
    }
    int usable = 0;
    int64_t less = 0;
    for (int g = 0; g < f.gpu_count; ++g) {
      if (f.gpu[g] >= s.gpu_milli) {
        ++usable;
      } else {
        less += f.gpu[g];
      }
    }
    const bool fits = usable >= s.num_gpu && f.cpu >= s.cpu;
    frag += s.popularity * (fits ? static_cast<double>(less) : idle);
  }
  return frag;
}

void FragModel::Load(const NodeFree& f) {
  cpu_ = f.cpu;
  idle_ = f.gpu_total;
  const size_t m = target_.shapes.size();
  double frag = 0;
  for (size_t i = 0; i < m; ++i) {
    const TaskShape& s = target_.shapes[i];
    access_[i] = s.num_gpu > 0 &&
                 (s.models == 0 || (f.model != kNoGpuModel && ((s.models >> f.model) & 1)));
    int usable = 0;
    int64_t less = 0;
    if (access_[i]) {
      for (int g = 0; g < f.gpu_count; ++g) {
        if (f.gpu[g] >= s.gpu_milli) {
          ++usable;
        } else {
          less += f.gpu[g];
        }
      }
    }
    usable_[i] = usable;
    less_[i] = less;
    const bool fits = access_[i] && usable >= s.num_gpu && f.cpu >= s.cpu;
    frag += s.popularity * (fits ? static_cast<double>(less) : static_cast<double>(idle_));
  }
  loaded_frag_ = frag;
}

double FragModel::After(int64_t cpu, int old_r, int new_r, int count) const {
  const int64_t c = cpu_ - cpu;
  const int64_t idle = idle_ - static_cast<int64_t>(old_r - new_r) * count;
  const size_t m = target_.shapes.size();
  double frag = 0;
  for (size_t i = 0; i < m; ++i) {
    const TaskShape& s = target_.shapes[i];
    if (!access_[i]) {
      frag += s.popularity * static_cast<double>(idle);
      continue;
    }
    int usable = usable_[i];
    int64_t less = less_[i];
    if (old_r >= s.gpu_milli) {
      usable -= count;
    } else {
      less -= static_cast<int64_t>(old_r) * count;
    }
    if (new_r >= s.gpu_milli) {
      usable += count;
    } else {
      less += static_cast<int64_t>(new_r) * count;
    }
    const bool fits = usable >= s.num_gpu && c >= s.cpu;
    frag += s.popularity * (fits ? static_cast<double>(less) : static_cast<double>(idle));
  }
  return frag;
}

}  // namespace tessera
