// Public: the monotonic clock every Petrel loop and timer runs on.
#ifndef PETREL_COMMON_CLOCK_H_
#define PETREL_COMMON_CLOCK_H_

#include <chrono>
#include <cstdint>

namespace petrel {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Duration = Clock::duration;  // nanoseconds

// Reads CLOCK_MONOTONIC. Event-loop code uses EventLoop::now() instead: one read per turn.
inline TimePoint MonotonicNow() { return Clock::now(); }

// Nanoseconds since the clock's epoch, the unit ngtcp2 timestamps use.
inline uint64_t ToNanos(TimePoint t) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}
inline TimePoint FromNanos(uint64_t ns) {
  return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::nanoseconds(ns)));
}

}  // namespace petrel

#endif  // PETREL_COMMON_CLOCK_H_
