// Internal: PathOrder, which packet goes first on a connection's new current path.
//
// A peer learns that a path changed from the first packet it sees on it (RFC 9000 §9.2–9.3), and
// the QUIC interop runner checks exactly that: a server's first packet to a client's new address
// carries PATH_CHALLENGE, and a client that migrates signals the move with a non-probing packet.
// ngtcp2 0.12.1 orders them otherwise in two cases, and the write loop corrects both:
//  - a server whose pacer is holding answers the first packet from a rebound client with an
//    ACK-only packet, and writes its PATH_CHALLENGE a pacing interval later. ACK-only packets
//    are not tracked by ngtcp2 (the next ACK carries the same ranges), so they are dropped until
//    the PATH_CHALLENGE has gone out (kChallengeFirst);
//  - a client after an immediate migration writes its PATH_CHALLENGE alone first, so the server
//    sees a probe, answers it and starts its own validation only later. The challenge is held
//    and sent right after the first non-probing packet on the new path (kNonProbingFirst).
// Both end at the deadline the connection gives (server: one PTO, by which the challenge goes
// out even with a full congestion window; client: about one RTT): ACKs are never withheld and a
// challenge never waits longer than that.
//
// Pure bookkeeping: the Connection tells it about each packet written to the current path and
// does what the answer says. Thread: the connection's.
#ifndef PETREL_QUIC_CONNECTION_PATH_ORDER_H_
#define PETREL_QUIC_CONNECTION_PATH_ORDER_H_

#include <cstdint>

namespace petrel::quic {

class PathOrder {
 public:
  enum class Action { kSend, kDrop, kHold };

  // Server: a non-probing packet moved the connection to a new peer address.
  void ExpectChallengeFirst(uint64_t deadline);
  // Client: an immediate migration began.
  void ExpectNonProbingFirst(uint64_t deadline);

  bool active() const { return mode_ != Mode::kOff; }
  bool holding() const { return holding_; }
  uint64_t deadline() const { return deadline_; }

  // A packet just written to the current path: `challenge` if it carries this endpoint's
  // PATH_CHALLENGE, `ack_eliciting` if ngtcp2 counts it in flight.
  Action OnPacket(bool challenge, bool ack_eliciting, uint64_t now);
  // True once after the held packet became due: the caller sends it now, after everything
  // it has sent so far. Due after the first non-probing packet, or at the deadline.
  bool TakeRelease(uint64_t now);

 private:
  enum class Mode { kOff, kChallengeFirst, kNonProbingFirst };
  void End();

  Mode mode_ = Mode::kOff;
  uint64_t deadline_ = 0;
  bool holding_ = false;
  bool release_ = false;
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_CONNECTION_PATH_ORDER_H_
