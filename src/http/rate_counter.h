// Internal: RateCounter, the fixed-window event counter behind the engines' flood limits (h2's
// FloodGuard, h3's reset limit). Pure bookkeeping: the caller supplies the time. Not
// thread-safe (one per connection, on its loop thread).
#ifndef PETREL_HTTP_RATE_COUNTER_H_
#define PETREL_HTTP_RATE_COUNTER_H_

#include <cstdint>

#include "petrel/common/clock.h"

namespace petrel::http {

// Counts events in fixed windows: cheap, and a flood at any sustained rate above the limit
// trips it within one window.
class RateCounter {
 public:
  RateCounter(uint32_t limit, Duration window) : limit_(limit), window_(window) {}
  // Records one event at `now`; true if the window now holds more than `limit` events.
  bool Add(TimePoint now) {
    if (count_ == 0 || now - window_start_ >= window_) {
      window_start_ = now;
      count_ = 0;
    }
    ++count_;
    return count_ > limit_;
  }

 private:
  const uint32_t limit_;
  const Duration window_;
  TimePoint window_start_{};
  uint32_t count_ = 0;
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_RATE_COUNTER_H_
