// Deterministic pseudo-random numbers (xoshiro256**, seeded through splitmix64).
//
// The same seed gives the same sequence on every platform and compiler: bounded draws use
// Lemire's method on the raw 64-bit output, never <random> distributions (whose results are
// implementation-defined). Not thread-safe; use one Rng per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tessera {

class Rng {
 public:
  explicit Rng(uint64_t seed);

  uint64_t Next();
  // Uniform integer in [0, n). n must be > 0.
  uint64_t Uniform(uint64_t n);
  // Uniform double in [0, 1).
  double UniformDouble();
  // Standard normal draw (Box-Muller on two UniformDouble draws, the first taken as 1 - u so
  // that its logarithm is finite).
  double Normal();

  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) {
      size_t j = Uniform(i);
      std::swap(v[i - 1], v[j]);
    }
  }

 private:
  uint64_t s_[4];
};

}  // namespace tessera
