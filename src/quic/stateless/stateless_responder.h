// Internal: the packets the master sends without connection state — Version Negotiation for an
// unsupported version, and a Stateless Reset for a short-header packet whose CID no connection
// owns (RFC 9000 §6 and §10.3). Owned by the master thread; not thread-safe.
#ifndef PETREL_QUIC_STATELESS_STATELESS_RESPONDER_H_
#define PETREL_QUIC_STATELESS_STATELESS_RESPONDER_H_

#include <cstddef>
#include <cstdint>

#include "petrel/common/clock.h"
#include "quic/cid/stateless_reset.h"
#include "quic/packet/invariant_header.h"

namespace petrel::quic {

class StatelessResponder {
 public:
  // Replies never exceed this; a datagram that triggers a reply is at least 1200 bytes (VN) or
  // larger than the reset (Stateless Reset).
  static constexpr size_t kMaxReplyLen = 1200;
  // RFC 9000 §10.3: 5 unpredictable octets + 16-octet token is the smallest reset; shorter
  // triggers get no reset, so two endpoints can never loop on resets.
  static constexpr size_t kMinResetLen = 21;

  StatelessResponder(const StatelessResetKey& key, double resets_per_second, size_t reset_burst);

  // Writes a Version Negotiation packet answering `h` (a long header of an unsupported
  // version, from a datagram of `datagram_len` bytes) into `out`; returns its length, or 0 when
  // no reply is due (datagrams under 1200 bytes could be spoofed amplification: RFC 9000 §6.1).
  size_t WriteVersionNegotiation(const InvariantHeader& h, size_t datagram_len, uint8_t* out);

  // Writes a Stateless Reset for a short-header datagram of `datagram_len` bytes whose DCID is
  // `dcid`; returns its length (always shorter than the trigger), or 0 when the trigger is too
  // short or the rate limit is spent.
  size_t WriteStatelessReset(absl::Span<const uint8_t> dcid, size_t datagram_len, TimePoint now,
                             uint8_t* out);

  uint64_t resets_rate_limited() const { return resets_rate_limited_; }

 private:
  bool TakeResetToken(TimePoint now);

  StatelessResetTokens tokens_;
  const double resets_per_second_;
  const double burst_;
  double bucket_;
  TimePoint last_refill_{};
  uint64_t resets_rate_limited_ = 0;
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_STATELESS_STATELESS_RESPONDER_H_
