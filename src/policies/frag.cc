#include "policies/frag.h"

#include <algorithm>

namespace tessera {
namespace {

bool Accessible(const TaskShape& s, GpuModelId model) {
  return s.num_gpu > 0 && (s.models == 0 || (model != kNoGpuModel && ((s.models >> model) & 1)));
}

}  // namespace

FragModel::FragModel(TargetWorkload target) : target_(std::move(target)) {
  const size_t m = target_.shapes.size();
  usable_.resize(m);
  less_.resize(m);
  access_.resize(m);
  share_of_shape_.resize(m);
  for (size_t i = 0; i < m; ++i) {
    const int d = target_.shapes[i].gpu_milli;
    auto it = std::find(shares_.begin(), shares_.end(), d);
    share_of_shape_[i] = static_cast<int>(it - shares_.begin());
    if (it == shares_.end()) shares_.push_back(d);
  }
  share_usable_.resize(shares_.size());
  share_less_.resize(shares_.size());
}

static double ShapeFrag(const TaskShape& s, int64_t cpu, int64_t idle, int usable, int64_t less) {
  const bool fits = usable >= s.num_gpu && cpu >= s.cpu;
  return static_cast<double>(fits ? less : idle);
}

double FragModel::Frag(const NodeFree& f) const {
  const int64_t idle = f.gpu_total;
  double frag = 0;
  for (size_t i = 0; i < target_.shapes.size(); ++i) {
    const TaskShape& s = target_.shapes[i];
    if (!Accessible(s, f.model)) {
      frag += s.popularity * static_cast<double>(idle);
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
    frag += s.popularity * ShapeFrag(s, f.cpu, idle, usable, less);
  }
  return frag;
}

void FragModel::Load(const NodeFree& f) {
  cpu_ = f.cpu;
  idle_ = f.gpu_total;
  for (size_t j = 0; j < shares_.size(); ++j) {
    int usable = 0;
    int64_t less = 0;
    for (int g = 0; g < f.gpu_count; ++g) {
      if (f.gpu[g] >= shares_[j]) {
        ++usable;
      } else {
        less += f.gpu[g];
      }
    }
    share_usable_[j] = usable;
    share_less_[j] = less;
  }
  double frag = 0;
  for (size_t i = 0; i < target_.shapes.size(); ++i) {
    const TaskShape& s = target_.shapes[i];
    access_[i] = Accessible(s, f.model);
    const int usable = access_[i] ? share_usable_[share_of_shape_[i]] : 0;
    const int64_t less = access_[i] ? share_less_[share_of_shape_[i]] : 0;
    usable_[i] = usable;
    less_[i] = less;
    frag += s.popularity *
            (access_[i] ? ShapeFrag(s, cpu_, idle_, usable, less) : static_cast<double>(idle_));
  }
  loaded_frag_ = frag;
}

void FragModel::Load(const NodeFree& f, NodeIdx n) {
  const size_t k = shares_.size();
  const auto i = static_cast<size_t>(n);
  if (f.stamp != 0 && i < cached_stamp_.size() && cached_stamp_[i] == f.stamp) {
    cpu_ = f.cpu;
    idle_ = f.gpu_total;
    for (size_t s = 0; s < target_.shapes.size(); ++s) {
      access_[s] = Accessible(target_.shapes[s], f.model);
      const size_t j = i * k + static_cast<size_t>(share_of_shape_[s]);
      usable_[s] = access_[s] ? cached_usable_[j] : 0;
      less_[s] = access_[s] ? cached_less_[j] : 0;
    }
    loaded_frag_ = cached_frag_[i];
    return;
  }
  Load(f);
  if (f.stamp == 0) return;
  if (i >= cached_stamp_.size()) {
    cached_stamp_.resize(i + 1, 0);
    cached_frag_.resize(i + 1, 0.0);
    cached_usable_.resize((i + 1) * k, 0);
    cached_less_.resize((i + 1) * k, 0);
  }
  cached_stamp_[i] = f.stamp;
  cached_frag_[i] = loaded_frag_;
  for (size_t j = 0; j < k; ++j) {
    cached_usable_[i * k + j] = static_cast<uint8_t>(share_usable_[j]);
    cached_less_[i * k + j] = static_cast<int32_t>(share_less_[j]);
  }
}

double FragModel::After(int64_t cpu, int old_r, int new_r, int count) const {
  const int64_t c = cpu_ - cpu;
  const int64_t idle = idle_ - static_cast<int64_t>(old_r - new_r) * count;
  double frag = 0;
  for (size_t i = 0; i < target_.shapes.size(); ++i) {
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
    frag += s.popularity * ShapeFrag(s, c, idle, usable, less);
  }
  return frag;
}

}  // namespace tessera
