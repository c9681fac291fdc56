// Internal: derivation of QUIC packet protection keys from secrets (RFC 9001 §5.1, §5.2, §6.1
// and RFC 9369 §3.3): Initial secrets from the client's first DCID, key/IV/header-protection
// key from a traffic secret, and the next-generation secret of a key update. Labels and salt
// come from the version's VersionParams.
//
// Pure functions, no allocation, safe from any thread. Key material lives in fixed-size
// value types that wipe themselves on destruction.
#ifndef PETREL_QUIC_CRYPTO_PACKET_KEYS_H_
#define PETREL_QUIC_CRYPTO_PACKET_KEYS_H_

#include <openssl/base.h>

#include <array>
#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "quic/crypto/cipher_suite.h"
#include "quic/crypto/version_params.h"

namespace petrel::quic::crypto {

inline constexpr size_t kMaxSecretLen = 48;  // SHA-384
inline constexpr size_t kMaxKeyLen = 32;
inline constexpr size_t kIvLen = 12;
inline constexpr size_t kInitialSecretLen = 32;  // SHA-256

struct PacketProtectionKeys {
  PacketProtectionKeys() = default;
  ~PacketProtectionKeys();
  PacketProtectionKeys(const PacketProtectionKeys&) = delete;
  PacketProtectionKeys& operator=(const PacketProtectionKeys&) = delete;

  absl::Span<const uint8_t> key() const { return {key_bytes.data(), key_len}; }
  absl::Span<const uint8_t> iv() const { return {iv_bytes.data(), kIvLen}; }
  absl::Span<const uint8_t> hp() const { return {hp_bytes.data(), hp_len}; }

  std::array<uint8_t, kMaxKeyLen> key_bytes{};
  size_t key_len = 0;
  std::array<uint8_t, kIvLen> iv_bytes{};
  std::array<uint8_t, kMaxKeyLen> hp_bytes{};
  size_t hp_len = 0;  // 0 when derived without the header-protection key
};

// key, iv (and hp unless `with_hp` is false: key updates keep the old hp key) from `secret`
// with the suite's hash and the version's labels.
bool DerivePacketProtectionKeys(const CipherSuite& suite, const VersionParams& version,
                                absl::Span<const uint8_t> secret, PacketProtectionKeys* keys,
                                bool with_hp = true);

struct InitialSecrets {
  InitialSecrets() = default;
  ~InitialSecrets();
  InitialSecrets(const InitialSecrets&) = delete;
  InitialSecrets& operator=(const InitialSecrets&) = delete;

  std::array<uint8_t, kInitialSecretLen> client{};
  std::array<uint8_t, kInitialSecretLen> server{};
};

// client/server_initial_secret from the Destination Connection ID of the client's first
// Initial packet (or the Retry's SCID, or the DCID again after compatible version negotiation).
bool DeriveInitialSecrets(const VersionParams& version, absl::Span<const uint8_t> client_dcid,
                          InitialSecrets* secrets);

// next = HKDF-Expand-Label(secret, ku_label, "", secret.size()) with `md` (the suite's hash).
// `next` must be secret.size() octets.
bool DeriveNextTrafficSecret(const EVP_MD* md, const VersionParams& version,
                             absl::Span<const uint8_t> secret, absl::Span<uint8_t> next);

}  // namespace petrel::quic::crypto

#endif  // PETREL_QUIC_CRYPTO_PACKET_KEYS_H_
