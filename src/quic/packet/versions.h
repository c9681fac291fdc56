// Internal: the QUIC versions Petrel speaks and their long-header packet type codes.
#ifndef PETREL_QUIC_PACKET_VERSIONS_H_
#define PETREL_QUIC_PACKET_VERSIONS_H_

#include <cstdint>

#include "absl/types/span.h"

namespace petrel::quic {

inline constexpr uint32_t kVersion1 = 0x00000001;
// RFC 9369's final QUIC v2 code point; needs an ngtcp2 newer than 0.12.1.
inline constexpr uint32_t kVersion2 = 0x6b3343cf;
// The provisional v2 code point ngtcp2 0.12.1 implements (NGTCP2_PROTO_VER_V2_DRAFT).
inline constexpr uint32_t kVersion2Draft = 0x709a50c4;

enum class LongPacketType : uint8_t { kInitial, kZeroRtt, kHandshake, kRetry };

// True for versions Petrel accepts: v1 and v2, each only if the linked ngtcp2 implements it.
bool IsSupportedVersion(uint32_t version);

// The versions Petrel accepts, preferred first, for Version Negotiation and transport parameters.
absl::Span<const uint32_t> SupportedVersions();

// True for v2 code points (final or provisional). Both use RFC 9369's long-header packet types;
// their keys differ (the provisional one follows draft-ietf-quic-v2-01:
// quic/crypto/version_params).
inline bool IsVersion2(uint32_t version) {
  return version == kVersion2 || version == kVersion2Draft;
}

// Maps the two type bits of a long header's first octet to the packet type, per version:
// v1 numbers Initial 0, 0-RTT 1, Handshake 2, Retry 3; v2 rotates them (Retry 0, Initial 1, ...).
inline LongPacketType LongTypeFromBits(uint32_t version, uint8_t bits) {
  bits &= 0x3;
  if (IsVersion2(version)) bits = (bits + 3) & 0x3;
  return static_cast<LongPacketType>(bits);
}

}  // namespace petrel::quic

#endif  // PETREL_QUIC_PACKET_VERSIONS_H_
