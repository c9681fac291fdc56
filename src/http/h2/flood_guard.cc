#include "http/h2/flood_guard.h"

namespace petrel::http {

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
              PeerLimit::kContinuationFlood, "CONTINUATION flood");
}

bool FloodGuard::Trip(bool over, PeerLimit limit, const char* reason) {
  if (over && reason_ == nullptr) {
    reason_ = reason;
    limit_ = limit;
  }
  return over;
}

}  // namespace petrel::http
