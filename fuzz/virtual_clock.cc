#include "virtual_clock.h"

#include <dlfcn.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

std::atomic<int64_t> offset_ns{0};

using ClockGettime = int (*)(clockid_t, timespec*);

ClockGettime RealClockGettime() {
  static const ClockGettime real = [] {
    auto* fn = reinterpret_cast<ClockGettime>(dlsym(RTLD_NEXT, "clock_gettime"));
    if (fn == nullptr) {
      std::fprintf(stderr, "virtual_clock: no clock_gettime after this binary's\n");
      std::abort();
    }
    return fn;
  }();
  return real;
}

}  // namespace

namespace petrel::fuzz {

void AdvanceMonotonicClock(std::chrono::nanoseconds d) {
  if (d.count() > 0) offset_ns.fetch_add(d.count(), std::memory_order_relaxed);
}

}  // namespace petrel::fuzz

// Interposes the C library's clock_gettime (libstdc++'s steady_clock calls it).
extern "C" int clock_gettime(clockid_t id, timespec* ts) {
  const int rv = RealClockGettime()(id, ts);
  if (rv != 0 || id != CLOCK_MONOTONIC) return rv;
  const int64_t ns = static_cast<int64_t>(ts->tv_nsec) + offset_ns.load(std::memory_order_relaxed);
  ts->tv_sec += static_cast<time_t>(ns / 1'000'000'000);
  ts->tv_nsec = static_cast<long>(ns % 1'000'000'000);
  return 0;
}
