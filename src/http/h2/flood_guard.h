// Internal: per-connection counters that spot h2 abuse the protocol itself allows — rapid
// reset (CVE-2023-44487), CONTINUATION floods, PING and SETTINGS floods and empty DATA frames.
// The connection feeds it frame by frame; a true return means "answer GOAWAY
// ENHANCE_YOUR_CALM and close". Pure bookkeeping: no I/O, the caller supplies the time.
// Loop thread only (one guard per connection).
#ifndef PETREL_HTTP_H2_FLOOD_GUARD_H_
#define PETREL_HTTP_H2_FLOOD_GUARD_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "http/rate_counter.h"
#include "petrel/common/clock.h"
#include "petrel/http/request_observer.h"

namespace petrel::http {

struct H2FloodLimits {
  // Rate limits: more than `max_*` events within one `window` trips the guard. Legitimate
  // clients stay far below them (a browser sends a handful of PINGs and one SETTINGS).
  Duration window = std::chrono::seconds(1);
  uint32_t max_resets = 100;      // client RST_STREAM before the response completed
  uint32_t max_pings = 100;       // PING frames without ACK
  uint32_t max_settings = 100;    // SETTINGS frames without ACK
  uint32_t max_empty_data = 100;  // DATA frames of length 0 without END_STREAM
  // Per header block: CONTINUATION frames and payload bytes (HEADERS + CONTINUATION). A 64 KiB
  // header list at 16 KiB frames needs at most a few frames.
  uint32_t max_continuations = 16;
  size_t max_header_block_bytes = 256 * 1024;
};

class FloodGuard {
 public:
  explicit FloodGuard(const H2FloodLimits& limits);

  // Each records one frame and returns true when the peer went over a limit; `reason()` then
  // names it (for logs and tests).
  bool OnReset(TimePoint now) {
    return Trip(resets_.Add(now), PeerLimit::kRapidReset, "rapid reset");
  }
  bool OnPing(TimePoint now) { return Trip(pings_.Add(now), PeerLimit::kPingFlood, "PING flood"); }
  bool OnSettings(TimePoint now) {
    return Trip(settings_.Add(now), PeerLimit::kSettingsFlood, "SETTINGS flood");
  }
  bool OnEmptyData(TimePoint now) {
    return Trip(empty_data_.Add(now), PeerLimit::kEmptyDataFlood, "empty DATA flood");
  }
  // A HEADERS (or PUSH_PROMISE) frame header starts a new header block of `length` bytes.
  void OnHeaderBlockStart(size_t length);
  // A CONTINUATION frame header of `length` bytes continues the current block.
  bool OnContinuation(size_t length);
  // nghttp2 counted more CONTINUATION frames in one header block than it allows (frames the
  // guard cannot see: see H2Connection::OnReadable). Always trips.
  bool OnTooManyContinuations() {
    return Trip(true, PeerLimit::kContinuationFlood, "CONTINUATION flood");
  }

  bool tripped() const { return reason_ != nullptr; }
  absl::string_view reason() const { return reason_ == nullptr ? "" : reason_; }
  // Which limit tripped (meaningful once tripped()).
  PeerLimit limit() const { return limit_; }

 private:
  bool Trip(bool over, PeerLimit limit, const char* reason);

  const H2FloodLimits limits_;
  RateCounter resets_;
  RateCounter pings_;
  RateCounter settings_;
  RateCounter empty_data_;
  uint32_t continuations_ = 0;
  size_t header_block_bytes_ = 0;
  const char* reason_ = nullptr;
  PeerLimit limit_ = PeerLimit::kRapidReset;
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_H2_FLOOD_GUARD_H_
