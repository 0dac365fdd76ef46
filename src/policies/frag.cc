#include "policies/frag.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera {
namespace {

bool Accessible(const TaskShape& s, GpuModelId model) {
  return s.num_gpu > 0 && (s.models == 0 || (model != kNoGpuModel && ((s.models >> model) & 1)));
}

}  // namespace

FragModel::FragModel(TargetWorkload target)
    : target_(std::move(target)), access_row_(size_t{1} << (8 * sizeof(GpuModelId)), -1) {
  const size_t m = target_.shapes.size();
  for (const TaskShape& t : target_.shapes) shares_.push_back(t.gpu_milli);
  std::sort(shares_.begin(), shares_.end());
  shares_.erase(std::unique(shares_.begin(), shares_.end()), shares_.end());
  share_of_shape_.resize(m);
  for (size_t i = 0; i < m; ++i) {
    const auto it = std::lower_bound(shares_.begin(), shares_.end(), target_.shapes[i].gpu_milli);
    share_of_shape_[i] = static_cast<int>(it - shares_.begin());
  }
  scratch_usable_.resize(shares_.size());
  scratch_less_.resize(shares_.size());
}

const uint8_t* FragModel::AccessRow(GpuModelId model) {
  const size_t m = target_.shapes.size();
  if (access_row_[model] < 0) {
    access_row_[model] = static_cast<int16_t>(access_rows_.size() / std::max<size_t>(m, 1));
    for (const TaskShape& s : target_.shapes) access_rows_.push_back(Accessible(s, model) ? 1 : 0);
  }
  return access_rows_.data() + static_cast<size_t>(access_row_[model]) * m;
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

void FragModel::Count(const NodeFree& f, uint8_t* usable, int32_t* less) const {
  for (size_t j = 0; j < shares_.size(); ++j) {
    int u = 0;
    int32_t l = 0;
    for (int g = 0; g < f.gpu_count; ++g) {
      if (f.gpu[g] >= shares_[j]) {
        ++u;
      } else {
        l += f.gpu[g];
      }
    }
    usable[j] = static_cast<uint8_t>(u);
    less[j] = l;
  }
}

double FragModel::LoadedFrag() const {
  double frag = 0;
  for (size_t i = 0; i < target_.shapes.size(); ++i) {
    const TaskShape& s = target_.shapes[i];
    const int j = share_of_shape_[i];
    frag += s.popularity * (access_[i] ? ShapeFrag(s, cpu_, idle_, usable_[j], less_[j])
                                       : static_cast<double>(idle_));
  }
  return frag;
}

void FragModel::Load(const NodeFree& f) {
  cpu_ = f.cpu;
  idle_ = f.gpu_total;
  access_ = AccessRow(f.model);
  Count(f, scratch_usable_.data(), scratch_less_.data());
  usable_ = scratch_usable_.data();
  less_ = scratch_less_.data();
  loaded_frag_ = LoadedFrag();
}

void FragModel::Load(const NodeFree& f, NodeIdx n) {
  if (f.stamp == 0) {
    Load(f);
    return;
  }
  const size_t k = shares_.size();
  const auto i = static_cast<size_t>(n);
  if (i >= cached_stamp_.size()) {
    cached_stamp_.resize(i + 1, 0);
    cached_frag_.resize(i + 1, 0.0);
    cached_usable_.resize((i + 1) * k, 0);
    cached_less_.resize((i + 1) * k, 0);
  }
  cpu_ = f.cpu;
  idle_ = f.gpu_total;
  access_ = AccessRow(f.model);
  usable_ = cached_usable_.data() + i * k;
  less_ = cached_less_.data() + i * k;
  if (cached_stamp_[i] != f.stamp) {
    Count(f, cached_usable_.data() + i * k, cached_less_.data() + i * k);
    cached_stamp_[i] = f.stamp;
    cached_frag_[i] = std::numeric_limits<double>::quiet_NaN();
  }
  if (std::isnan(cached_frag_[i])) cached_frag_[i] = LoadedFrag();
  loaded_frag_ = cached_frag_[i];
}

void FragModel::KeepCounts(FragModel& older) {
  if (older.shares_ != shares_) return;
  cached_stamp_ = std::move(older.cached_stamp_);
  cached_usable_ = std::move(older.cached_usable_);
  cached_less_ = std::move(older.cached_less_);
  cached_frag_.assign(cached_stamp_.size(), std::numeric_limits<double>::quiet_NaN());
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
    int usable = usable_[share_of_shape_[i]];
    int64_t less = less_[share_of_shape_[i]];
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
