#include "http/h2/flood_guard.h"

namespace petrel::http {

bool RateCounter::Add(TimePoint now) {
  if (count_ == 0 || now - window_start_ >= window_) {
    window_start_ = now;
    count_ = 0;
  }
  ++count_;
  return count_ > limit_;
}

FloodGuard::FloodGuard(const H2FloodLimits& limits)
    : limits_(limits),
      resets_(limits.max_resets, limits.window),
      pings_(limits.max_pings, limits.window),
      settings_(limits.max_settings, limits.window),
      empty_data_(limits.max_empty_data, limits.window) {}

void FloodGuard::OnHeaderBlockStart(size_t length) {
  continuations_ = 0;
  header_block_bytes_ = length;
}

bool FloodGuard::OnContinuation(size_t length) {
  ++continuations_;
  header_block_bytes_ += length;
  return Trip(continuations_ > limits_.max_continuations ||
                  header_block_bytes_ > limits_.max_header_block_bytes,
              "CONTINUATION flood");
}

bool FloodGuard::Trip(bool over, const char* reason) {
  if (over && reason_ == nullptr) reason_ = reason;
  return over;
}

}  // namespace petrel::http
