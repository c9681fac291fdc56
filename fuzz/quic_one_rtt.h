// QUIC 1-RTT packets as a peer makes and reads them, for fuzz targets that talk to Petrel's
// server below its client: keys from a TLS traffic secret (RFC 9001 §5.1, and §6 for the next
// key phase), short-header packets sealed and header-protected (§5.3, §5.4), the server's
// packets opened, and a walk over the frames of a payload (RFC 9000 §19) that reports the ACKs
// and CONNECTION_CLOSE it holds.
//
// Written from the RFCs on BoringSSL's primitives, not on Petrel's own crypto code: a mistake
// there must not be mirrored here, where it would go unnoticed.
#ifndef PETREL_FUZZ_QUIC_ONE_RTT_H_
#define PETREL_FUZZ_QUIC_ONE_RTT_H_

#include <openssl/aead.h>
#include <openssl/aes.h>
#include <openssl/chacha.h>
#include <openssl/digest.h>
#include <openssl/hkdf.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace petrel::fuzz {

// TLS 1.3 cipher suites (IANA numbers).
inline constexpr uint16_t kAes128GcmSha256 = 0x1301;
inline constexpr uint16_t kAes256GcmSha384 = 0x1302;
inline constexpr uint16_t kChaCha20Poly1305Sha256 = 0x1303;

// One direction's packet protection keys for one key phase.
struct OneRttKeys {
  uint16_t suite = 0;
  std::vector<uint8_t> secret;  // the traffic secret these keys come from
  std::vector<uint8_t> key;
  uint8_t iv[12] = {};
  std::vector<uint8_t> hp;  // header protection: the same in every key phase
};

// HKDF-Expand-Label (RFC 8446 §7.1) with an empty context.
inline bool ExpandLabel(const EVP_MD* md, absl::Span<const uint8_t> secret, absl::string_view label,
                        uint8_t* out, size_t out_len) {
  const std::string full = absl::StrCat("tls13 ", label);
  std::string info;
  info.push_back(static_cast<char>(out_len >> 8));
  info.push_back(static_cast<char>(out_len & 0xff));
  info.push_back(static_cast<char>(full.size()));
  info += full;
  info.push_back('\0');
  return HKDF_expand(out, out_len, md, secret.data(), secret.size(),
                     reinterpret_cast<const uint8_t*>(info.data()), info.size()) == 1;
}

inline const EVP_MD* SuiteHash(uint16_t suite) {
  return suite == kAes256GcmSha384 ? EVP_sha384() : EVP_sha256();
}

inline const EVP_AEAD* SuiteAead(uint16_t suite) {
  switch (suite) {
    case kAes128GcmSha256:
      return EVP_aead_aes_128_gcm();
    case kAes256GcmSha384:
      return EVP_aead_aes_256_gcm();
    case kChaCha20Poly1305Sha256:
      return EVP_aead_chacha20_poly1305();
    default:
      return nullptr;
  }
}

// Keys of the first key phase from a traffic secret ("quic key", "quic iv", "quic hp").
inline std::optional<OneRttKeys> DeriveOneRttKeys(uint16_t suite,
                                                  absl::Span<const uint8_t> secret) {
  const EVP_AEAD* aead = SuiteAead(suite);
  if (aead == nullptr || secret.empty()) return std::nullopt;
  OneRttKeys k;
  k.suite = suite;
  k.secret.assign(secret.begin(), secret.end());
  k.key.resize(EVP_AEAD_key_length(aead));
  k.hp.resize(k.key.size());
  const EVP_MD* md = SuiteHash(suite);
  if (!ExpandLabel(md, secret, "quic key", k.key.data(), k.key.size()) ||
      !ExpandLabel(md, secret, "quic iv", k.iv, sizeof(k.iv)) ||
      !ExpandLabel(md, secret, "quic hp", k.hp.data(), k.hp.size())) {
    return std::nullopt;
  }
  return k;
}

// The next key phase (RFC 9001 §6.1): a new secret by "quic ku", new key and IV, the same
// header protection key.
inline std::optional<OneRttKeys> NextKeyPhase(const OneRttKeys& k) {
  std::vector<uint8_t> next(k.secret.size());
  if (!ExpandLabel(SuiteHash(k.suite), k.secret, "quic ku", next.data(), next.size())) {
    return std::nullopt;
  }
  std::optional<OneRttKeys> out = DeriveOneRttKeys(k.suite, next);
  if (out.has_value()) out->hp = k.hp;
  return out;
}

// The 5-octet header protection mask for a 16-octet sample (RFC 9001 §5.4.3, §5.4.4).
inline void HeaderMask(const OneRttKeys& k, const uint8_t* sample, uint8_t mask[5]) {
  if (k.suite == kChaCha20Poly1305Sha256) {
    const uint32_t counter =
        static_cast<uint32_t>(sample[0]) | static_cast<uint32_t>(sample[1]) << 8 |
        static_cast<uint32_t>(sample[2]) << 16 | static_cast<uint32_t>(sample[3]) << 24;
    static constexpr uint8_t kZeros[5] = {};
    CRYPTO_chacha_20(mask, kZeros, 5, k.hp.data(), sample + 4, counter);
    return;
  }
  AES_KEY aes;
  AES_set_encrypt_key(k.hp.data(), static_cast<unsigned>(k.hp.size() * 8), &aes);
  uint8_t block[16];
  AES_encrypt(sample, block, &aes);
  std::memcpy(mask, block, 5);
}

inline void PacketNonce(const OneRttKeys& k, uint64_t pn, uint8_t nonce[12]) {
  std::memcpy(nonce, k.iv, 12);
  for (int i = 0; i < 8; ++i) nonce[11 - i] ^= static_cast<uint8_t>(pn >> (8 * i));
}

// What a short header's first octet carries besides the fixed bit and the packet number
// length: the spin bit (0x20), the reserved bits (0x18, which must be 0 once unprotected) and
// the key phase (0x04).
inline constexpr uint8_t kKeyPhaseBit = 0x04;

// A short-header packet to `dcid` with packet number `pn` written in `pn_len` octets (1..4),
// protecting `payload`. A payload too short for the header protection sample is padded with
// PADDING frames, as a sender must (RFC 9001 §5.4.2).
inline std::vector<uint8_t> SealShortPacket(const OneRttKeys& k, absl::Span<const uint8_t> dcid,
                                            uint64_t pn, size_t pn_len, uint8_t flags,
                                            absl::Span<const uint8_t> payload) {
  std::vector<uint8_t> plain(payload.begin(), payload.end());
  if (plain.size() + pn_len < 4) plain.resize(4 - pn_len, 0);
  // Sized once and filled in place (growing it byte by byte trips GCC 12's -Warray-bounds under
  // -fsanitize=thread).
  const size_t pn_offset = 1 + dcid.size();
  const size_t header_len = pn_offset + pn_len;
  std::vector<uint8_t> out(header_len);
  out[0] = static_cast<uint8_t>(0x40 | (flags & 0x3c) | (pn_len - 1));
  std::copy(dcid.begin(), dcid.end(), out.begin() + 1);
  for (size_t i = 0; i < pn_len; ++i) {
    out[pn_offset + i] = static_cast<uint8_t>(pn >> (8 * (pn_len - 1 - i)));
  }
  const EVP_AEAD* aead = SuiteAead(k.suite);
  out.resize(header_len + plain.size() + EVP_AEAD_max_overhead(aead));
  uint8_t nonce[12];
  PacketNonce(k, pn, nonce);
  EVP_AEAD_CTX ctx;
  size_t sealed = 0;
  const bool ok =
      EVP_AEAD_CTX_init(&ctx, aead, k.key.data(), k.key.size(), EVP_AEAD_DEFAULT_TAG_LENGTH,
                        nullptr) == 1 &&
      EVP_AEAD_CTX_seal(&ctx, out.data() + header_len, &sealed, out.size() - header_len, nonce,
                        sizeof(nonce), plain.data(), plain.size(), out.data(), header_len) == 1;
  EVP_AEAD_CTX_cleanup(&ctx);
  if (!ok) return {};
  out.resize(header_len + sealed);
  uint8_t mask[5];
  HeaderMask(k, out.data() + pn_offset + 4, mask);
  out[0] ^= mask[0] & 0x1f;
  for (size_t i = 0; i < pn_len; ++i) out[pn_offset + i] ^= mask[1 + i];
  return out;
}

// RFC 9000 §A.3.
inline uint64_t DecodePacketNumber(int64_t largest, uint64_t truncated, size_t pn_len) {
  const uint64_t expected = static_cast<uint64_t>(largest + 1);
  const uint64_t win = uint64_t{1} << (pn_len * 8);
  const uint64_t hwin = win / 2;
  const uint64_t candidate = (expected & ~(win - 1)) | truncated;
  if (candidate + hwin <= expected && candidate < (uint64_t{1} << 62) - win) {
    return candidate + win;
  }
  if (candidate > expected + hwin && candidate >= win) return candidate - win;
  return candidate;
}

// `v` as a QUIC variable-length integer (RFC 9000 §16) of the shortest length up to 4 octets
// (v < 2^30), for frames a test or a flood writes by hand.
inline std::string Varint(uint64_t v) {
  std::string out;
  if (v < 64) {
    out.push_back(static_cast<char>(v));
  } else if (v < 16384) {
    out.push_back(static_cast<char>(0x40 | (v >> 8)));
    out.push_back(static_cast<char>(v & 0xff));
  } else {
    for (int i = 3; i >= 0; --i) {
      const uint8_t b = static_cast<uint8_t>((v >> (8 * i)) & 0xff);
      out.push_back(static_cast<char>(i == 3 ? (0x80 | b) : b));
    }
  }
  return out;
}

// Reads the first octets of `in` as a QUIC variable-length integer (RFC 9000 §16).
inline bool ReadVarint(absl::Span<const uint8_t>& in, uint64_t* v) {
  if (in.empty()) return false;
  const size_t len = size_t{1} << (in[0] >> 6);
  if (in.size() < len) return false;
  uint64_t x = in[0] & 0x3f;
  for (size_t i = 1; i < len; ++i) x = x << 8 | in[i];
  in.remove_prefix(len);
  *v = x;
  return true;
}

inline bool Skip(absl::Span<const uint8_t>& in, uint64_t n) {
  if (in.size() < n) return false;
  in.remove_prefix(static_cast<size_t>(n));
  return true;
}

// The packet protected by `keys[key phase]` at the end of a datagram, after any long-header
// packets coalesced before it (skipped). Its payload goes to `payload`, its packet number to
// `pn` (decoded against `largest`). False if there is none or it does not open.
inline bool OpenShortPacket(const std::optional<OneRttKeys> keys[2], size_t dcid_len,
                            int64_t largest, absl::Span<const uint8_t> datagram,
                            std::vector<uint8_t>* payload, uint64_t* pn) {
  absl::Span<const uint8_t> in = datagram;
  while (!in.empty() && (in[0] & 0x80) != 0) {  // long header: version, CIDs, length (§17.2)
    const uint8_t type = (in[0] >> 4) & 0x03;
    if (in.size() < 6) return false;
    const uint32_t version = static_cast<uint32_t>(in[1]) << 24 | in[2] << 16 | in[3] << 8 | in[4];
    absl::Span<const uint8_t> p = in.subspan(5);
    uint64_t n = p[0];
    if (!Skip(p, 1) || !Skip(p, n) || p.empty()) return false;
    n = p[0];
    if (!Skip(p, 1) || !Skip(p, n)) return false;
    // Initial is type 0 in v1 and 1 in the v2 draft; only it carries a token.
    const bool initial = version == 0x709a50c4 ? type == 1 : type == 0;
    if (initial && (!ReadVarint(p, &n) || !Skip(p, n))) return false;
    if (!ReadVarint(p, &n) || !Skip(p, n)) return false;
    in = p;
  }
  const size_t pn_offset = 1 + dcid_len;
  if (in.size() < pn_offset + 4 + 16) return false;
  std::vector<uint8_t> packet(in.begin(), in.end());
  const std::optional<OneRttKeys>& any = keys[0].has_value() ? keys[0] : keys[1];
  if (!any.has_value()) return false;
  uint8_t mask[5];
  HeaderMask(*any, packet.data() + pn_offset + 4, mask);
  packet[0] ^= mask[0] & 0x1f;
  const size_t pn_len = (packet[0] & 0x03) + 1;
  uint64_t truncated = 0;
  for (size_t i = 0; i < pn_len; ++i) {
    packet[pn_offset + i] ^= mask[1 + i];
    truncated = truncated << 8 | packet[pn_offset + i];
  }
  const std::optional<OneRttKeys>& k = keys[(packet[0] & kKeyPhaseBit) != 0 ? 1 : 0];
  if (!k.has_value()) return false;
  *pn = DecodePacketNumber(largest, truncated, pn_len);
  const size_t header_len = pn_offset + pn_len;
  uint8_t nonce[12];
  PacketNonce(*k, *pn, nonce);
  payload->resize(packet.size() - header_len);
  EVP_AEAD_CTX ctx;
  size_t opened = 0;
  const EVP_AEAD* aead = SuiteAead(k->suite);
  const bool ok = EVP_AEAD_CTX_init(&ctx, aead, k->key.data(), k->key.size(),
                                    EVP_AEAD_DEFAULT_TAG_LENGTH, nullptr) == 1 &&
                  EVP_AEAD_CTX_open(&ctx, payload->data(), &opened, payload->size(), nonce,
                                    sizeof(nonce), packet.data() + header_len,
                                    packet.size() - header_len, packet.data(), header_len) == 1;
  EVP_AEAD_CTX_cleanup(&ctx);
  payload->resize(opened);
  return ok;
}

// What a walk over a packet's frames found.
struct FrameWalk {
  bool complete = false;   // every frame parsed, up to the end of the payload
  bool close = false;      // a CONNECTION_CLOSE
  bool app_close = false;  // of the application kind (0x1d)
  uint64_t close_code = 0;
  std::vector<std::pair<uint64_t, uint64_t>> acked;  // [smallest, largest] packet numbers
  std::vector<std::vector<uint8_t>> new_cids;        // of NEW_CONNECTION_ID frames
};

// Walks the frames of a packet payload (RFC 9000 §19) until the end, a frame it does not know,
// or a frame that does not parse.
inline FrameWalk WalkFrames(absl::Span<const uint8_t> in) {
  FrameWalk w;
  uint64_t a = 0, b = 0, c = 0;
  while (!in.empty()) {
    uint64_t type;
    if (!ReadVarint(in, &type)) return w;
    switch (type) {
      case 0x00:  // PADDING
      case 0x01:  // PING
      case 0x1e:  // HANDSHAKE_DONE
        break;
      case 0x02:    // ACK
      case 0x03: {  // ACK with ECN counts
        uint64_t largest, delay, ranges, first;
        if (!ReadVarint(in, &largest) || !ReadVarint(in, &delay) || !ReadVarint(in, &ranges) ||
            !ReadVarint(in, &first) || first > largest) {
          return w;
        }
        uint64_t low = largest - first;
        w.acked.emplace_back(low, largest);
        for (uint64_t i = 0; i < ranges; ++i) {
          if (!ReadVarint(in, &a) || !ReadVarint(in, &b) || low < a + 2 || low - a - 2 < b) {
            return w;
          }
          const uint64_t high = low - a - 2;
          low = high - b;
          w.acked.emplace_back(low, high);
        }
        if (type == 0x03 && (!ReadVarint(in, &a) || !ReadVarint(in, &b) || !ReadVarint(in, &c))) {
          return w;
        }
        break;
      }
      case 0x04:  // RESET_STREAM: id, code, final size
        if (!ReadVarint(in, &a) || !ReadVarint(in, &b) || !ReadVarint(in, &c)) return w;
        break;
      case 0x05:  // STOP_SENDING
      case 0x11:  // MAX_STREAM_DATA
      case 0x15:  // STREAM_DATA_BLOCKED
        if (!ReadVarint(in, &a) || !ReadVarint(in, &b)) return w;
        break;
      case 0x06:  // CRYPTO: offset, length, data
        if (!ReadVarint(in, &a) || !ReadVarint(in, &b) || !Skip(in, b)) return w;
        break;
      case 0x07:  // NEW_TOKEN
        if (!ReadVarint(in, &a) || !Skip(in, a)) return w;
        break;
      case 0x10:  // MAX_DATA
      case 0x12:  // MAX_STREAMS (bidi, uni)
      case 0x13:
      case 0x14:  // DATA_BLOCKED
      case 0x16:  // STREAMS_BLOCKED (bidi, uni)
      case 0x17:
      case 0x19:  // RETIRE_CONNECTION_ID
        if (!ReadVarint(in, &a)) return w;
        break;
      case 0x18:  // NEW_CONNECTION_ID: sequence, retire prior to, CID, reset token
        if (!ReadVarint(in, &a) || !ReadVarint(in, &b) || in.empty()) return w;
        c = in[0];
        if (!Skip(in, 1) || in.size() < c + 16) return w;
        w.new_cids.emplace_back(in.begin(), in.begin() + c);
        in.remove_prefix(c + 16);
        break;
      case 0x1a:  // PATH_CHALLENGE
      case 0x1b:  // PATH_RESPONSE
        if (!Skip(in, 8)) return w;
        break;
      case 0x1c:  // CONNECTION_CLOSE: code, frame type, reason
      case 0x1d:  // CONNECTION_CLOSE (application): code, reason
        if (!ReadVarint(in, &a) || (type == 0x1c && !ReadVarint(in, &b)) || !ReadVarint(in, &c) ||
            !Skip(in, c)) {
          return w;
        }
        w.close = true;
        w.app_close = type == 0x1d;
        w.close_code = a;
        break;
      default:
        if (type >= 0x08 && type <= 0x0f) {  // STREAM: id, [offset], [length], data
          if (!ReadVarint(in, &a) || ((type & 0x04) != 0 && !ReadVarint(in, &b))) return w;
          if ((type & 0x02) == 0) {
            in = {};
          } else if (!ReadVarint(in, &c) || !Skip(in, c)) {
            return w;
          }
          break;
        }
        return w;
    }
  }
  w.complete = true;
  return w;
}

}  // namespace petrel::fuzz

#endif  // PETREL_FUZZ_QUIC_ONE_RTT_H_
