// Internal: the TLS 1.3 cipher suites QUIC uses (RFC 9001 §5), each with its AEAD, hash,
// header-protection cipher, key lengths and AEAD usage limits (RFC 9001 §6.6), and the
// mapping onto ngtcp2's crypto context.
//
// Descriptors are immutable statics: safe to share across threads, never freed. The
// `native_handle`s they put into ngtcp2 structs point at these statics (and at BoringSSL's
// static EVP_AEAD / EVP_MD objects), so ngtcp2 never owns or frees them.
#ifndef PETREL_QUIC_CRYPTO_CIPHER_SUITE_H_
#define PETREL_QUIC_CRYPTO_CIPHER_SUITE_H_

#include <ngtcp2/ngtcp2.h>
#include <openssl/base.h>

#include <cstddef>
#include <cstdint>

namespace petrel::quic::crypto {

enum class HpAlgorithm : uint8_t { kAes128, kAes256, kChaCha20 };

// What ngtcp2_crypto_cipher::native_handle points at.
struct HpCipher {
  HpAlgorithm algorithm;
  size_t key_len;
};

struct CipherSuite {
  uint16_t tls_id;   // IANA value: 0x1301, 0x1302, 0x1303
  const char* name;  // "TLS_AES_128_GCM_SHA256", ...
  const EVP_AEAD* aead;
  const EVP_MD* md;
  const HpCipher* hp;
  size_t key_len;
  size_t iv_len;  // 12 for all three suites; ngtcp2 wants max(8, nonce length)
  size_t tag_len;
  uint64_t max_encryption;          // confidentiality limit, packets
  uint64_t max_decryption_failure;  // integrity limit, forged packets
};

inline constexpr uint16_t kTlsAes128GcmSha256 = 0x1301;
inline constexpr uint16_t kTlsAes256GcmSha384 = 0x1302;
inline constexpr uint16_t kTlsChaCha20Poly1305Sha256 = 0x1303;

// The suite for a TLS 1.3 cipher suite id, or nullptr for one QUIC cannot use
// (e.g. TLS_AES_128_CCM_8_SHA256, which BoringSSL does not offer anyway).
const CipherSuite* FindCipherSuite(uint16_t tls_id);

// The suite whose AEAD is `aead` (each of the three suites has its own), or nullptr. Used to
// recover the suite from an ngtcp2_crypto_ctx, whose aead handle is the EVP_AEAD.
const CipherSuite* FindCipherSuiteByAead(const EVP_AEAD* aead);

// The suite that protects Initial packets in every version: AES-128-GCM with SHA-256.
const CipherSuite& InitialCipherSuite();

// Fills `ctx` for ngtcp2_conn_set_{initial_,early_,}crypto_ctx. The handles refer to statics.
void FillCryptoCtx(const CipherSuite& suite, ngtcp2_crypto_ctx* ctx);

// The ngtcp2_crypto_aead for `suite` (handle = the static EVP_AEAD).
ngtcp2_crypto_aead MakeCryptoAead(const CipherSuite& suite);

}  // namespace petrel::quic::crypto

#endif  // PETREL_QUIC_CRYPTO_CIPHER_SUITE_H_
