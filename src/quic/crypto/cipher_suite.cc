#include "quic/crypto/cipher_suite.h"

#include <openssl/aead.h>
#include <openssl/digest.h>

namespace petrel::quic::crypto {
namespace {

constexpr HpCipher kHpAes128{HpAlgorithm::kAes128, 16};
constexpr HpCipher kHpAes256{HpAlgorithm::kAes256, 32};
constexpr HpCipher kHpChaCha20{HpAlgorithm::kChaCha20, 32};

// RFC 9001 §6.6: AES-GCM may protect 2^23 packets (packets up to 2^16 octets) and tolerate
// 2^52 forgeries; ChaCha20-Poly1305's confidentiality limit exceeds the packet number space
// (2^62) and its integrity limit is 2^36.
constexpr uint64_t kAesGcmMaxEncryption = uint64_t{1} << 23;
constexpr uint64_t kAesGcmMaxDecryptionFailure = uint64_t{1} << 52;
constexpr uint64_t kChaChaMaxEncryption = uint64_t{1} << 62;
constexpr uint64_t kChaChaMaxDecryptionFailure = uint64_t{1} << 36;

struct SuiteTable {
  CipherSuite aes128;
  CipherSuite aes256;
  CipherSuite chacha;
};

// EVP_aead_* and EVP_sha* return pointers to BoringSSL statics but are functions, so the
// table is built once, on first use (thread-safe static initialisation).
const SuiteTable& Suites() {
  static const SuiteTable table = {
      {kTlsAes128GcmSha256, "TLS_AES_128_GCM_SHA256", EVP_aead_aes_128_gcm(), EVP_sha256(),
       &kHpAes128, 16, 12, 16, kAesGcmMaxEncryption, kAesGcmMaxDecryptionFailure},
      {kTlsAes256GcmSha384, "TLS_AES_256_GCM_SHA384", EVP_aead_aes_256_gcm(), EVP_sha384(),
       &kHpAes256, 32, 12, 16, kAesGcmMaxEncryption, kAesGcmMaxDecryptionFailure},
      {kTlsChaCha20Poly1305Sha256, "TLS_CHACHA20_POLY1305_SHA256", EVP_aead_chacha20_poly1305(),
       EVP_sha256(), &kHpChaCha20, 32, 12, 16, kChaChaMaxEncryption, kChaChaMaxDecryptionFailure},
  };
  return table;
}

}  // namespace

const CipherSuite* FindCipherSuite(uint16_t tls_id) {
  const SuiteTable& t = Suites();
  switch (tls_id) {
    case kTlsAes128GcmSha256:
      return &t.aes128;
    case kTlsAes256GcmSha384:
      return &t.aes256;
    case kTlsChaCha20Poly1305Sha256:
      return &t.chacha;
    default:
      return nullptr;
  }
}

const CipherSuite* FindCipherSuiteByAead(const EVP_AEAD* aead) {
  const SuiteTable& t = Suites();
  for (const CipherSuite* suite : {&t.aes128, &t.aes256, &t.chacha}) {
    if (suite->aead == aead) return suite;
  }
  return nullptr;
}

const CipherSuite& InitialCipherSuite() { return Suites().aes128; }

ngtcp2_crypto_aead MakeCryptoAead(const CipherSuite& suite) {
  ngtcp2_crypto_aead aead;
  // ngtcp2 stores handles as void*; they are only ever read back as const.
  aead.native_handle = const_cast<EVP_AEAD*>(suite.aead);
  aead.max_overhead = suite.tag_len;
  return aead;
}

void FillCryptoCtx(const CipherSuite& suite, ngtcp2_crypto_ctx* ctx) {
  ctx->aead = MakeCryptoAead(suite);
  ctx->md.native_handle = const_cast<EVP_MD*>(suite.md);
  ctx->hp.native_handle = const_cast<HpCipher*>(suite.hp);
  ctx->max_encryption = suite.max_encryption;
  ctx->max_decryption_failure = suite.max_decryption_failure;
}

}  // namespace petrel::quic::crypto
