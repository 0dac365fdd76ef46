// Typed resource quantities. Each is an int64 count of a fixed unit; mixing units does not
// compile. Values are plain and thread-compatible.
#pragma once

#include <compare>
#include <cstdint>

namespace tessera {

template <typename Tag>
struct Quantity {
  int64_t v = 0;

  constexpr Quantity() = default;
  constexpr explicit Quantity(int64_t value) : v(value) {}
  constexpr int64_t value() const { return v; }

  constexpr auto operator<=>(const Quantity&) const = default;
  constexpr Quantity operator+(Quantity o) const { return Quantity(v + o.v); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(v - o.v); }
  constexpr Quantity& operator+=(Quantity o) { return v += o.v, *this; }
  constexpr Quantity& operator-=(Quantity o) { return v -= o.v, *this; }
  constexpr Quantity operator*(int64_t k) const { return Quantity(v * k); }
};

struct MilliCpuTag {};
struct MebibyteTag {};
struct MilliGpuTag {};

using MilliCpu = Quantity<MilliCpuTag>;  // 1000 = one CPU core
using MiB = Quantity<MebibyteTag>;       // memory in MiB
using MilliGpu = Quantity<MilliGpuTag>;  // 1000 = one whole GPU

inline constexpr int64_t kMilliPerGpu = 1000;

}  // namespace tessera
