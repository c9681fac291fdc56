#include "quic/packet/invariant_header.h"

namespace petrel::quic {
namespace {

constexpr uint8_t kLongFormBit = 0x80;
constexpr uint8_t kFixedBit = 0x40;
// RFC 8999 allows connection IDs of up to 255 octets in long headers of unknown versions;
// versions 1 and 2 limit them to 20.
constexpr size_t kMaxCidLenV1 = 20;

uint32_t ReadU32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

bool ReadVarint(absl::Span<const uint8_t> data, size_t* pos, uint64_t* value) {
  if (*pos >= data.size()) return false;
  const size_t len = size_t{1} << (data[*pos] >> 6);
  if (data.size() - *pos < len) return false;
  uint64_t v = data[*pos] & 0x3f;
  for (size_t i = 1; i < len; ++i) v = (v << 8) | data[*pos + i];
  *pos += len;
  *value = v;
  return true;
}

HeaderParse ParseInvariantHeader(absl::Span<const uint8_t> datagram, size_t short_dcid_len,
                                 InvariantHeader* out) {
  *out = InvariantHeader{};
  if (datagram.empty()) return HeaderParse::kMalformed;
  const uint8_t first = datagram[0];

  if ((first & kLongFormBit) == 0) {
    // Short header: first octet, then the DCID of the length we issue.
    // The fixed bit may be 0: ngtcp2 0.12 always sends grease_quic_bit (RFC 9287), so peers
    // clear it at random.
    if (datagram.size() < 1 + short_dcid_len) {
      return HeaderParse::kMalformed;
    }
    out->dcid = datagram.subspan(1, short_dcid_len);
    return HeaderParse::kOk;
  }

  // Long header: first octet, version (4), DCID length (1) + DCID, SCID length (1) + SCID.
  out->long_form = true;
  size_t pos = 1;
  if (datagram.size() < pos + 4 + 1) return HeaderParse::kMalformed;
  out->version = ReadU32(&datagram[pos]);
  pos += 4;
  const size_t dcid_len = datagram[pos++];
  if (datagram.size() < pos + dcid_len + 1) return HeaderParse::kMalformed;
  out->dcid = datagram.subspan(pos, dcid_len);
  pos += dcid_len;
  const size_t scid_len = datagram[pos++];
  if (datagram.size() < pos + scid_len) return HeaderParse::kMalformed;
  out->scid = datagram.subspan(pos, scid_len);
  pos += scid_len;

  if (out->version == 0) return HeaderParse::kVersionNegotiation;
  if (!IsSupportedVersion(out->version)) return HeaderParse::kUnsupportedVersion;

  // Versions 1 and 2 from here on.
  if (dcid_len > kMaxCidLenV1 || scid_len > kMaxCidLenV1) return HeaderParse::kMalformed;
  out->type = LongTypeFromBits(out->version, static_cast<uint8_t>(first >> 4));
  out->fixed_bit = (first & kFixedBit) != 0;
  if (out->type == LongPacketType::kRetry) return HeaderParse::kOk;  // no Length field

  if (out->type == LongPacketType::kInitial) {
    uint64_t token_len = 0;
    if (!ReadVarint(datagram, &pos, &token_len) || datagram.size() - pos < token_len) {
      return HeaderParse::kMalformed;
    }
    out->token = datagram.subspan(pos, static_cast<size_t>(token_len));
    pos += static_cast<size_t>(token_len);
  }
  // Length covers the packet number and the payload; the packet must fit in the datagram.
  uint64_t length = 0;
  if (!ReadVarint(datagram, &pos, &length) || datagram.size() - pos < length || length < 1) {
    return HeaderParse::kMalformed;
  }
  return HeaderParse::kOk;
}

}  // namespace petrel::quic
