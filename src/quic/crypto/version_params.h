// Internal: the per-version cryptographic constants of QUIC packet protection — Initial salt,
// HKDF labels and Retry integrity key/nonce — in one table that every key derivation uses.
//
// Versions covered:
//   0x00000001  QUIC v1 (RFC 9001).
//   0x6b3343cf  QUIC v2 (RFC 9369), the final code point. ngtcp2 0.12.1 cannot speak it; the
//               entry exists so the RFC 9369 Appendix A vectors are checked and a newer ngtcp2
//               finds its keys ready.
//   0x709a50c4  The provisional v2 code point (NGTCP2_PROTO_VER_V2_DRAFT), with the constants
//               ngtcp2 0.12.1 itself uses for it — NOT RFC 9369's. See version_params.cc.
#ifndef PETREL_QUIC_CRYPTO_VERSION_PARAMS_H_
#define PETREL_QUIC_CRYPTO_VERSION_PARAMS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/types/span.h"

namespace petrel::quic::crypto {

inline constexpr size_t kInitialSaltLen = 20;
inline constexpr size_t kRetryKeyLen = 16;  // AEAD_AES_128_GCM
inline constexpr size_t kRetryNonceLen = 12;

// Immutable, statically allocated; safe to read from any thread.
struct VersionParams {
  uint32_t version;
  std::array<uint8_t, kInitialSaltLen> initial_salt;
  // HKDF-Expand-Label labels, without the "tls13 " prefix that HkdfExpandLabel adds.
  std::string_view key_label;
  std::string_view iv_label;
  std::string_view hp_label;
  std::string_view ku_label;
  std::array<uint8_t, kRetryKeyLen> retry_key;
  std::array<uint8_t, kRetryNonceLen> retry_nonce;
};

// The constants for `version`, or nullptr for a version Petrel has no keys for.
const VersionParams* FindVersionParams(uint32_t version);

// Every version of the table, for tests and diagnostics.
absl::Span<const VersionParams> AllVersionParams();

}  // namespace petrel::quic::crypto

#endif  // PETREL_QUIC_CRYPTO_VERSION_PARAMS_H_
