// The monotonic clock of a fuzz target that runs a QUIC exchange in real time: CLOCK_MONOTONIC
// (what steady_clock, and so every Petrel loop, timer and ngtcp2 timestamp, reads) as the
// process sees it is the kernel's plus an offset that the harness moves forward where a real
// loop would sleep — for a pacing gap, a probe or a delayed ACK. Sleeping would cost each input
// tens of milliseconds (ngtcp2 paces a server's first flight by its 333 ms initial RTT); moving
// the clock costs nothing, and every timer still fires in order. Other clocks are untouched:
// libFuzzer times its runs with the wall clock.
//
// Link virtual_clock.cc into the target: it replaces clock_gettime for the whole binary.
#ifndef PETREL_FUZZ_VIRTUAL_CLOCK_H_
#define PETREL_FUZZ_VIRTUAL_CLOCK_H_

#include <chrono>

namespace petrel::fuzz {

// Moves CLOCK_MONOTONIC forward by `d`, at once, for the whole process.
void AdvanceMonotonicClock(std::chrono::nanoseconds d);

}  // namespace petrel::fuzz

#endif  // PETREL_FUZZ_VIRTUAL_CLOCK_H_
