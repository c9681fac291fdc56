// Internal (tests): hex helpers and a reference QUIC packet protector built from Petrel's
// primitives, for checking them against the RFC 9001 / RFC 9369 Appendix A samples.
#ifndef PETREL_TESTS_QUIC_CRYPTO_TEST_UTIL_H_
#define PETREL_TESTS_QUIC_CRYPTO_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "quic/crypto/aead.h"
#include "quic/crypto/header_protection.h"
#include "quic/crypto/packet_keys.h"

namespace petrel::quic::crypto::testing {

// Hex digits to bytes; whitespace is ignored so RFC layouts can be pasted as they are.
inline std::vector<uint8_t> Hex(std::string_view text) {
  std::vector<uint8_t> out;
  int high = -1;
  for (char c : text) {
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else {
      continue;
    }
    if (high < 0) {
      high = v;
    } else {
      out.push_back(static_cast<uint8_t>(high << 4 | v));
      high = -1;
    }
  }
  return out;
}

inline std::string ToHex(absl::Span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

// One direction's keys as contexts, as ngtcp2 would hold them.
struct ProtectionContexts {
  AeadContextPtr aead;
  std::unique_ptr<HeaderProtectionContext> hp;
  std::vector<uint8_t> iv;
  size_t tag_len = 16;
};

inline ProtectionContexts MakeContexts(const CipherSuite& suite, const PacketProtectionKeys& k) {
  ProtectionContexts c;
  c.aead = NewAeadContext(suite, k.key());
  c.hp = HeaderProtectionContext::Create(*suite.hp, k.hp());
  c.iv.assign(k.iv().begin(), k.iv().end());
  c.tag_len = suite.tag_len;
  return c;
}

// Protects a packet: `header` is the unprotected header ending with the packet number field
// (pn_len octets at its end), `payload` the plaintext frames. RFC 9001 §5.3-5.4.
inline std::vector<uint8_t> ProtectPacket(ProtectionContexts& c, std::vector<uint8_t> header,
                                          size_t pn_len, uint64_t pn,
                                          absl::Span<const uint8_t> payload) {
  const size_t pn_offset = header.size() - pn_len;
  uint8_t nonce[kAeadNonceLen];
  MakeNonce(c.iv, pn, nonce);
  std::vector<uint8_t> packet = header;
  packet.resize(header.size() + payload.size() + c.tag_len);
  const size_t n = AeadSeal(c.aead.get(), nonce, header, payload, packet.data() + header.size(),
                            payload.size() + c.tag_len);
  if (n != payload.size() + c.tag_len) return {};
  uint8_t mask[kHpMaskOutputLen];
  if (!c.hp->Mask(packet.data() + pn_offset + 4, mask)) return {};
  const bool long_header = (packet[0] & 0x80) != 0;
  packet[0] ^= mask[0] & (long_header ? 0x0f : 0x1f);
  for (size_t i = 0; i < pn_len; ++i) packet[pn_offset + i] ^= mask[1 + i];
  return packet;
}

struct Unprotected {
  std::vector<uint8_t> header;
  uint64_t truncated_pn = 0;
  std::vector<uint8_t> payload;
};

// Removes header protection and opens the payload; the packet number field starts at
// `pn_offset`. The full packet number takes its high bits from `pn_base` (RFC 9000 §A.3's
// decoding reduced to what these samples need).
inline bool UnprotectPacket(ProtectionContexts& c, std::vector<uint8_t> packet, size_t pn_offset,
                            Unprotected* out, uint64_t pn_base = 0) {
  if (packet.size() < pn_offset + 4 + kHpSampleLen) return false;
  uint8_t mask[kHpMaskOutputLen];
  if (!c.hp->Mask(packet.data() + pn_offset + 4, mask)) return false;
  const bool long_header = (packet[0] & 0x80) != 0;
  packet[0] ^= mask[0] & (long_header ? 0x0f : 0x1f);
  const size_t pn_len = (packet[0] & 0x03) + 1;
  uint64_t pn = 0;
  for (size_t i = 0; i < pn_len; ++i) {
    packet[pn_offset + i] ^= mask[1 + i];
    pn = pn << 8 | packet[pn_offset + i];
  }
  const size_t header_len = pn_offset + pn_len;
  const uint64_t window = uint64_t{1} << (8 * pn_len);
  const uint64_t full_pn = (pn_base & ~(window - 1)) | pn;
  uint8_t nonce[kAeadNonceLen];
  MakeNonce(c.iv, full_pn, nonce);
  out->header.assign(packet.begin(), packet.begin() + header_len);
  out->truncated_pn = pn;
  out->payload.resize(packet.size() - header_len - c.tag_len);
  size_t written = 0;
  return AeadOpen(c.aead.get(), nonce, out->header, absl::MakeConstSpan(packet).subspan(header_len),
                  out->payload.data(), out->payload.size(), &written) &&
         written == out->payload.size();
}

}  // namespace petrel::quic::crypto::testing

#endif  // PETREL_TESTS_QUIC_CRYPTO_TEST_UTIL_H_
