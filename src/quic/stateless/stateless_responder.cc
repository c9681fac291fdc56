#include "quic/stateless/stateless_responder.h"

#include <ngtcp2/ngtcp2.h>
#include <openssl/rand.h>

#include <algorithm>

namespace petrel::quic {
namespace {

// A reset longer than this looks no more like a real short-header packet.
constexpr size_t kTypicalResetLen = 43;
constexpr size_t kMinInitialDatagram = 1200;

}  // namespace

StatelessResponder::StatelessResponder(const StatelessResetKey& key, double resets_per_second,
                                       size_t reset_burst)
    : tokens_(key),
      resets_per_second_(resets_per_second),
      burst_(static_cast<double>(reset_burst)),
      bucket_(static_cast<double>(reset_burst)) {}

size_t StatelessResponder::WriteVersionNegotiation(const InvariantHeader& h, size_t datagram_len,
                                                   uint8_t* out) {
  if (!h.long_form || datagram_len < kMinInitialDatagram) return 0;
  uint8_t unused = 0;
  RAND_bytes(&unused, 1);
  const absl::Span<const uint32_t> versions = SupportedVersions();
  // The reply swaps the connection IDs: our SCID is the client's DCID and vice versa.
  const ngtcp2_ssize n = ngtcp2_pkt_write_version_negotiation(
      out, kMaxReplyLen, unused, h.scid.data(), h.scid.size(), h.dcid.data(), h.dcid.size(),
      versions.data(), versions.size());
  return n > 0 ? static_cast<size_t>(n) : 0;
}

bool StatelessResponder::TakeResetToken(TimePoint now) {
  if (last_refill_ != TimePoint{}) {
    const double seconds = std::chrono::duration<double>(now - last_refill_).count();
    bucket_ = std::min(burst_, bucket_ + seconds * resets_per_second_);
  }
  last_refill_ = now;
  if (bucket_ < 1) return false;
  bucket_ -= 1;
  return true;
}

size_t StatelessResponder::WriteStatelessReset(absl::Span<const uint8_t> dcid, size_t datagram_len,
                                               TimePoint now, uint8_t* out) {
  if (datagram_len <= kMinResetLen) return 0;
  if (!TakeResetToken(now)) {
    ++resets_rate_limited_;
    return 0;
  }
  const size_t len = std::min(datagram_len - 1, kTypicalResetLen);
  uint8_t token[kStatelessResetTokenLen];
  tokens_.Compute(dcid, token);
  uint8_t random[kTypicalResetLen];
  const size_t random_len = len - kStatelessResetTokenLen;
  RAND_bytes(random, random_len);
  const ngtcp2_ssize n = ngtcp2_pkt_write_stateless_reset(out, len, token, random, random_len);
  return n > 0 ? static_cast<size_t>(n) : 0;
}

}  // namespace petrel::quic
