// Internal: parses what the master may read of a QUIC datagram without keys — the invariant
// header of RFC 8999 plus, for Initial packets of a supported version, the token.
#ifndef PETREL_QUIC_PACKET_INVARIANT_HEADER_H_
#define PETREL_QUIC_PACKET_INVARIANT_HEADER_H_

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "quic/packet/versions.h"

namespace petrel::quic {

enum class HeaderParse : uint8_t {
  kOk,
  // Long header of a version Petrel does not speak: answer with Version Negotiation (the
  // connection IDs are filled in, they may be up to 255 octets long).
  kUnsupportedVersion,
  // Version Negotiation packet (version 0): a server never processes one.
  kVersionNegotiation,
  // Anything that cannot be a QUIC packet we would route: drop it.
  kMalformed,
};

struct InvariantHeader {
  bool long_form = false;
  uint32_t version = 0;  // 0 for short headers
  // Valid only for long headers of a supported version.
  LongPacketType type = LongPacketType::kInitial;
  absl::Span<const uint8_t> dcid;
  absl::Span<const uint8_t> scid;   // empty for short headers
  absl::Span<const uint8_t> token;  // Initial packets only
  // RFC 9287: a peer that saw our grease_quic_bit clears it at random, in Initials too once it
  // has our transport parameters; only a connection's first Initial must have it set.
  bool fixed_bit = true;
};

// Parses the first packet of a datagram. Never decrypts and never reads past `datagram`.
// `short_dcid_len` is the length of the CIDs this endpoint issues (short headers carry no length).
// The spans in `out` point into `datagram`. No allocation.
HeaderParse ParseInvariantHeader(absl::Span<const uint8_t> datagram, size_t short_dcid_len,
                                 InvariantHeader* out);

// Reads a QUIC variable-length integer (RFC 9000 §16) at `*pos`; false if truncated.
bool ReadVarint(absl::Span<const uint8_t> data, size_t* pos, uint64_t* value);

}  // namespace petrel::quic

#endif  // PETREL_QUIC_PACKET_INVARIANT_HEADER_H_
