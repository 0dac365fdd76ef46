// The mix definitions of sim/family.h: DefaultMixFamily and PaperTraceNames. Each generated mix
// is a few knobs of `tessera generate` over the default generator config; the table in
// docs/POLICIES.md ("Workload-mix family") lists them with the reason each is there.
#include "sim/family.h"

namespace tessera {
namespace {

FamilyMix Mix(std::string name, std::string description, MixFlags flags) {
  return FamilyMix{std::move(name), std::move(description), std::move(flags)};
}

std::vector<FamilyMix> BuildFamily() {
  std::vector<FamilyMix> f;
  auto add = [&](const char* name, const char* description, auto set) {
    MixFlags m;
    set(m);
    f.push_back(Mix(name, description, std::move(m)));
  };
  add("base", "the default generated mix (trace-like)", [](MixFlags&) {});
  // Share-heavy, inference-like.
  add("share-heavy", "60% GPU-share pods", [](MixFlags& m) { m.share_fraction = "0.6"; });
  add("inference", "85% GPU-share pods of 0.05-0.3 GPU with 0.3x the CPU, 5% CPU-only",
      [](MixFlags& m) {
        m.share_fraction = "0.85";
        m.cpu_only_fraction = "0.05";
        m.share_sizes = "small";
        m.cpu_per_gpu_scale = "0.3";
      });
  add("share-only", "95% GPU-share pods, trace sizes, 5% CPU-only", [](MixFlags& m) {
    m.share_fraction = "0.95";
    m.cpu_only_fraction = "0.05";
  });
  // Share sizes.
  add("small-shares", "default classes, shares of 0.05-0.3 GPU",
      [](MixFlags& m) { m.share_sizes = "small"; });
  add("large-shares", "default classes, shares of 0.5-0.95 GPU",
      [](MixFlags& m) { m.share_sizes = "large"; });
  add("uniform-shares", "60% GPU-share pods, sizes uniform over 0.01-0.99 GPU", [](MixFlags& m) {
    m.share_fraction = "0.6";
    m.share_sizes = "uniform:10-990";
  });
  add("half-shares", "60% GPU-share pods, all of 0.5 GPU", [](MixFlags& m) {
    m.share_fraction = "0.6";
    m.share_sizes = "500:1";
  });
  add("quarter-shares", "60% GPU-share pods of 0.25, 0.5 or 0.75 GPU", [](MixFlags& m) {
    m.share_fraction = "0.6";
    m.share_sizes = "250:1,500:1,750:1";
  });
  add("odd-shares", "60% GPU-share pods of 0.3, 0.4 or 0.7 GPU (no two fill a GPU exactly)",
      [](MixFlags& m) {
        m.share_fraction = "0.6";
        m.share_sizes = "300:1,400:1,700:1";
      });
  // Whole GPUs.
  add("whole-heavy", "80% one-whole-GPU pods", [](MixFlags& m) { m.whole_fraction = "0.8"; });
  add("whole-only", "95% one-whole-GPU pods, 5% CPU-only", [](MixFlags& m) {
    m.whole_fraction = "0.95";
    m.cpu_only_fraction = "0.05";
  });
  // Training, multi-GPU.
  add("multi-10", "10% multi-GPU pods (trace counts)",
      [](MixFlags& m) { m.multi_gpu_fraction = "0.1"; });
  add("training", "25% multi-GPU pods, 2/4/8 GPUs weighted 1:1:2", [](MixFlags& m) {
    m.multi_gpu_fraction = "0.25";
    m.multi_gpu_counts = "2:1,4:1,8:2";
  });
  add("training-8", "15% multi-GPU pods, all of 8 GPUs", [](MixFlags& m) {
    m.multi_gpu_fraction = "0.15";
    m.multi_gpu_counts = "8:1";
  });
  add("training-small", "20% multi-GPU pods of 2 or 4 GPUs (3:1)", [](MixFlags& m) {
    m.multi_gpu_fraction = "0.2";
    m.multi_gpu_counts = "2:3,4:1";
  });
  // CPU-only pods.
  add("cpu-heavy", "40% CPU-only pods", [](MixFlags& m) { m.cpu_only_fraction = "0.4"; });
  add("cpu-very-heavy", "60% CPU-only pods", [](MixFlags& m) { m.cpu_only_fraction = "0.6"; });
  // Model pins.
  add("unpinned", "no GPU pod is pinned to a model", [](MixFlags& m) { m.pinned_fraction = "0"; });
  add("pinned-half", "50% of GPU pods pinned to a model set",
      [](MixFlags& m) { m.pinned_fraction = "0.5"; });
  add("pinned-tight", "80% of GPU pods pinned to a model set",
      [](MixFlags& m) { m.pinned_fraction = "0.8"; });
  // CPU and memory per GPU.
  add("cpu-lean", "GPU pods ask for half the CPU",
      [](MixFlags& m) { m.cpu_per_gpu_scale = "0.5"; });
  add("cpu-rich", "GPU pods ask for 1.5x the CPU",
      [](MixFlags& m) { m.cpu_per_gpu_scale = "1.5"; });
  add("cpu-very-rich", "GPU pods ask for 2x the CPU",
      [](MixFlags& m) { m.cpu_per_gpu_scale = "2"; });
  add("memory-rich", "GPU pods ask for 1.5x the memory",
      [](MixFlags& m) { m.memory_per_gpu_scale = "1.5"; });
  // Combinations.
  add("inference-cpu-rich", "80% small GPU shares, 1.5x CPU per GPU", [](MixFlags& m) {
    m.share_fraction = "0.8";
    m.share_sizes = "small";
    m.cpu_per_gpu_scale = "1.5";
  });
  add("large-shares-pinned", "60% shares of 0.5-0.95 GPU, 60% of GPU pods pinned", [](MixFlags& m) {
    m.share_fraction = "0.6";
    m.share_sizes = "large";
    m.pinned_fraction = "0.6";
  });
  add("training-pinned", "20% multi-GPU pods, 60% of GPU pods pinned", [](MixFlags& m) {
    m.multi_gpu_fraction = "0.2";
    m.pinned_fraction = "0.6";
  });
  add("whole-cpu-rich", "80% whole-GPU pods, 1.5x CPU per GPU", [](MixFlags& m) {
    m.whole_fraction = "0.8";
    m.cpu_per_gpu_scale = "1.5";
  });
  add("small-shares-cpu-heavy", "40% CPU-only pods, shares of 0.05-0.3 GPU", [](MixFlags& m) {
    m.cpu_only_fraction = "0.4";
    m.share_sizes = "small";
  });
  add("balanced", "45% shares, 45% whole GPUs, 5% multi-GPU, 5% CPU-only", [](MixFlags& m) {
    m.share_fraction = "0.45";
    m.whole_fraction = "0.45";
    m.multi_gpu_fraction = "0.05";
    m.cpu_only_fraction = "0.05";
  });
  add("inference-heavy",
      "75% shares of 0.1-0.5 GPU, 17% one GPU, 3% 2-4 GPUs, 10% of GPU pods pinned",
      [](MixFlags& m) {
        m.cpu_only_fraction = "0.05";
        m.share_fraction = "0.75";
        m.multi_gpu_fraction = "0.03";
        m.multi_gpu_counts = "2:1,4:1";
        m.share_sizes = "uniform:100-500";
        m.pinned_fraction = "0.1";
      });
  add("training-heavy",
      "45% one GPU, 30% 2/4/8 GPUs, 22% shares of 0.25-0.75 GPU, 25% of GPU pods pinned",
      [](MixFlags& m) {
        m.cpu_only_fraction = "0.03";
        m.share_fraction = "0.22";
        m.whole_fraction = "0.45";
        m.multi_gpu_fraction = "0.30";
        m.multi_gpu_counts = "2:1,4:1,8:1";
        m.share_sizes = "uniform:250-750";
        m.pinned_fraction = "0.25";
      });
  add("training-cpu-lean", "25% multi-GPU pods, half the CPU per GPU", [](MixFlags& m) {
    m.multi_gpu_fraction = "0.25";
    m.cpu_per_gpu_scale = "0.5";
  });
  return f;
}

}  // namespace

const std::vector<FamilyMix>& DefaultMixFamily() {
  static const std::vector<FamilyMix> family = BuildFamily();
  return family;
}

const std::vector<std::string>& PaperTraceNames() {
  static const std::vector<std::string> names = {
      "default",    "cpu050",     "cpu100",      "cpu200",     "cpu250",    "gpushare40",
      "gpushare60", "gpushare80", "gpushare100", "gpuspec10",  "gpuspec20", "gpuspec25",
      "gpuspec33",  "multigpu20", "multigpu30",  "multigpu40", "multigpu50"};
  return names;
}

}  // namespace tessera
