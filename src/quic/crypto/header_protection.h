// Internal: QUIC header protection masks (RFC 9001 §5.4): AES-ECB of the 16-octet sample for
// the AES suites, ChaCha20 keyed by the sample for ChaCha20-Poly1305.
//
// Ownership: one HeaderProtectionContext per header-protection key, created at key install.
// Handed to ngtcp2 as ngtcp2_crypto_cipher_ctx::native_handle, it is owned by ngtcp2 and freed
// through the delete_crypto_cipher_ctx callback. Mask() allocates nothing. Not thread-safe
// (the AES context carries EVP state); each belongs to one connection on one worker.
#ifndef PETREL_QUIC_CRYPTO_HEADER_PROTECTION_H_
#define PETREL_QUIC_CRYPTO_HEADER_PROTECTION_H_

#include <openssl/cipher.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/types/span.h"
#include "quic/crypto/cipher_suite.h"

namespace petrel::quic::crypto {

inline constexpr size_t kHpSampleLen = 16;
// Mask() writes this many octets; QUIC uses the first 5 (NGTCP2_HP_MASKLEN).
inline constexpr size_t kHpMaskOutputLen = 16;

class HeaderProtectionContext {
 public:
  // A context for `cipher` keyed with `key` (cipher.key_len octets), or null on failure.
  static std::unique_ptr<HeaderProtectionContext> Create(const HpCipher& cipher,
                                                         absl::Span<const uint8_t> key);
  ~HeaderProtectionContext();
  HeaderProtectionContext(const HeaderProtectionContext&) = delete;
  HeaderProtectionContext& operator=(const HeaderProtectionContext&) = delete;

  // Writes kHpMaskOutputLen octets of mask for `sample` (kHpSampleLen octets) into `mask`.
  bool Mask(const uint8_t* sample, uint8_t* mask);

 private:
  explicit HeaderProtectionContext(HpAlgorithm algorithm) : algorithm_(algorithm) {}

  HpAlgorithm algorithm_;
  bssl::UniquePtr<EVP_CIPHER_CTX> aes_;  // AES-ECB, no padding; null for ChaCha20
  std::array<uint8_t, 32> chacha_key_{};
};

}  // namespace petrel::quic::crypto

#endif  // PETREL_QUIC_CRYPTO_HEADER_PROTECTION_H_
