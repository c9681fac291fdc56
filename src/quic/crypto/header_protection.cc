#include "quic/crypto/header_protection.h"

#include <openssl/chacha.h>
#include <openssl/err.h>
#include <openssl/mem.h>

#include <cstring>

namespace petrel::quic::crypto {

std::unique_ptr<HeaderProtectionContext> HeaderProtectionContext::Create(
    const HpCipher& cipher, absl::Span<const uint8_t> key) {
  if (key.size() != cipher.key_len) return nullptr;
  std::unique_ptr<HeaderProtectionContext> ctx(new HeaderProtectionContext(cipher.algorithm));
  switch (cipher.algorithm) {
    case HpAlgorithm::kAes128:
    case HpAlgorithm::kAes256: {
      ctx->aes_.reset(EVP_CIPHER_CTX_new());
      const EVP_CIPHER* evp =
          cipher.algorithm == HpAlgorithm::kAes128 ? EVP_aes_128_ecb() : EVP_aes_256_ecb();
      if (ctx->aes_ == nullptr ||
          EVP_EncryptInit_ex(ctx->aes_.get(), evp, nullptr, key.data(), nullptr) != 1 ||
          EVP_CIPHER_CTX_set_padding(ctx->aes_.get(), 0) != 1) {
        ERR_clear_error();
        return nullptr;
      }
      break;
    }
    case HpAlgorithm::kChaCha20:
      std::memcpy(ctx->chacha_key_.data(), key.data(), key.size());
      break;
  }
  return ctx;
}

HeaderProtectionContext::~HeaderProtectionContext() {
  OPENSSL_cleanse(chacha_key_.data(), chacha_key_.size());
}

bool HeaderProtectionContext::Mask(const uint8_t* sample, uint8_t* mask) {
  if (algorithm_ == HpAlgorithm::kChaCha20) {
    // RFC 9001 §5.4.4: counter = sample[0..3] little-endian, nonce = sample[4..15],
    // mask = ChaCha20(hp_key, counter, nonce, zeros).
    static constexpr uint8_t kZeros[kHpMaskOutputLen] = {};
    const uint32_t counter =
        static_cast<uint32_t>(sample[0]) | static_cast<uint32_t>(sample[1]) << 8 |
        static_cast<uint32_t>(sample[2]) << 16 | static_cast<uint32_t>(sample[3]) << 24;
    CRYPTO_chacha_20(mask, kZeros, sizeof(kZeros), chacha_key_.data(), sample + 4, counter);
    return true;
  }
  // RFC 9001 §5.4.3: mask = AES-ECB(hp_key, sample). One block in, one block out: the
  // context holds no partial block between calls.
  int out_len = 0;
  if (EVP_EncryptUpdate(aes_.get(), mask, &out_len, sample, kHpSampleLen) != 1 ||
      out_len != static_cast<int>(kHpMaskOutputLen)) {
    ERR_clear_error();
    return false;
  }
  return true;
}

}  // namespace petrel::quic::crypto
