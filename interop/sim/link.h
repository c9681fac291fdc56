// Internal (petrel-netsim): one direction of the simulated link. A datagram that arrives is
// judged in this order: drop list, blackhole window, random loss, the rate limiter's queue
// (tail drop), then maybe corrupted (one of its first kCorruptSpan bytes, where the QUIC header
// is; never a Version Negotiation packet, whose corruption would only trigger a spurious version
// downgrade check); an admitted one waits in a delay line until its delivery
// time = end of its serialization at the configured rate + the one-way delay.
//
// Pure logic on a caller-supplied clock (nanoseconds), no sockets: the simulator feeds it and
// sends what PopDue() returns. Single-threaded.
#ifndef PETREL_INTEROP_SIM_LINK_H_
#define PETREL_INTEROP_SIM_LINK_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "options.h"

namespace petrel::netsim {

using Nanos = int64_t;

struct Datagram {
  std::vector<uint8_t> data;  // capacity kept when the datagram is recycled
  uint8_t ecn = 0;            // the two low bits of TOS / traffic class, as received
  uint32_t route = 0;         // the NAT entry this datagram belongs to
  Nanos deliver_at = 0;
};

// Counters of one direction. Every received datagram ends in exactly one of: forwarded,
// send_errors, dropped_loss, dropped_queue, dropped_blackhole, or is still in flight at exit.
// dropped_list (the --drop-*-packets hits) is counted inside dropped_loss as well.
struct DirectionStats {
  uint64_t received = 0;
  uint64_t forwarded = 0;  // sent out by the simulator
  uint64_t dropped_loss = 0;
  uint64_t dropped_list = 0;
  uint64_t dropped_queue = 0;
  uint64_t dropped_blackhole = 0;
  uint64_t corrupted = 0;
  uint64_t bytes = 0;  // UDP payload bytes forwarded
  uint64_t send_errors = 0;
};

struct LinkConfig {
  Nanos delay = 0;
  double bandwidth_mbps = 0;  // 0 = unlimited
  size_t queue = 25;
  DirectionOptions impair;
  Nanos blackhole_on = 0;  // both > 0 to be active
  Nanos blackhole_off = 0;
  // Bytes added to the UDP payload when computing the serialization time (IP + UDP headers),
  // so that --bandwidth-mbps is the rate on the wire as in a link simulator.
  uint32_t header_bytes = 28;
};

// Corruption hits one of the first kCorruptSpan bytes of the UDP payload, so that QUIC headers
// (type, version, connection IDs, packet number) are hit often, not only the AEAD-protected
// payload.
inline constexpr size_t kCorruptSpan = 51;

// True for a long-header packet with version 0.
bool IsVersionNegotiation(const std::vector<uint8_t>& data);

enum class Verdict { kForward, kDropList, kDropBlackhole, kDropLoss, kDropQueue };
const char* VerdictName(Verdict v);

class Direction {
 public:
  Direction(std::string name, const LinkConfig& config, uint64_t seed);
  Direction(const Direction&) = delete;
  Direction& operator=(const Direction&) = delete;

  // Judges `*d`, which arrived at `now`; `since_epoch` is the time since the schedules began
  // (the blackhole window is computed from it). On kForward takes the datagram (d becomes null),
  // maybe corrupts it and sets its delivery time; otherwise leaves *d to the caller to recycle.
  // `corrupted` (optional) tells whether a byte was flipped.
  Verdict Admit(std::unique_ptr<Datagram>& d, Nanos now, Nanos since_epoch,
                bool* corrupted = nullptr);

  // The delivery time of the next datagram, or INT64_MAX when none waits.
  Nanos NextDeliveryAt() const;
  // The next datagram due at `now`, or null. Delivery order is arrival order.
  std::unique_ptr<Datagram> PopDue(Nanos now);
  size_t in_flight() const { return line_.size(); }

  const std::string& name() const { return name_; }
  const DirectionStats& stats() const { return stats_; }
  DirectionStats& mutable_stats() { return stats_; }

 private:
  bool InBlackhole(Nanos since_epoch) const;

  const std::string name_;
  const LinkConfig config_;
  const absl::flat_hash_set<uint64_t> drop_list_;
  std::mt19937_64 rng_;
  int64_t loss_run_ = 0;     // random drops in a row (for impair.max_burst)
  int64_t corrupt_run_ = 0;  // corruptions in a row
  // Serialization: the link is busy until link_free_at_; waiting_starts_ holds the start times
  // of admitted datagrams whose serialization has not begun yet (the queue's occupancy).
  Nanos link_free_at_ = 0;
  std::deque<Nanos> waiting_starts_;
  // Admitted datagrams in delivery order (delivery times never decrease: serialization ends
  // are monotonic and the delay is constant).
  std::deque<std::unique_ptr<Datagram>> line_;
  DirectionStats stats_;
};

}  // namespace petrel::netsim

#endif  // PETREL_INTEROP_SIM_LINK_H_
