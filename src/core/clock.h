// Injected time. The engine never reads the wall clock; adapters and the simulator pass a
// Clock. ManualClock is advanced explicitly (simulation, tests). Not thread-safe.
#pragma once

#include <cstdint>

namespace tessera {

// Seconds since an adapter-defined epoch.
using SimTime = int64_t;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SimTime Now() const = 0;
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(SimTime start = 0) : now_(start) {}
  SimTime Now() const override { return now_; }
  void Set(SimTime t) { now_ = t; }
  void Advance(SimTime dt) { now_ += dt; }

 private:
  SimTime now_;
};

}  // namespace tessera
