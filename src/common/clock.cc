#include "petrel/common/clock.h"

#include <time.h>

namespace petrel {

// steady_clock must be CLOCK_MONOTONIC so that ngtcp2 timestamps, timers and log stamps agree.
static_assert(Clock::is_steady);

}  // namespace petrel
