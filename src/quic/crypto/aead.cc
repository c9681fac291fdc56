#include "quic/crypto/aead.h"

#include <openssl/err.h>

namespace petrel::quic::crypto {

AeadContextPtr NewAeadContext(const CipherSuite& suite, absl::Span<const uint8_t> key) {
  if (key.size() != suite.key_len) return nullptr;
  return AeadContextPtr(
      EVP_AEAD_CTX_new(suite.aead, key.data(), key.size(), EVP_AEAD_DEFAULT_TAG_LENGTH));
}

void MakeNonce(absl::Span<const uint8_t> iv, uint64_t packet_number, uint8_t* nonce) {
  for (size_t i = 0; i < kAeadNonceLen; ++i) nonce[i] = iv[i];
  for (size_t i = 0; i < 8; ++i) {
    nonce[kAeadNonceLen - 1 - i] ^= static_cast<uint8_t>(packet_number >> (8 * i));
  }
}

size_t AeadSeal(const EVP_AEAD_CTX* ctx, absl::Span<const uint8_t> nonce,
                absl::Span<const uint8_t> ad, absl::Span<const uint8_t> plaintext, uint8_t* out,
                size_t out_capacity) {
  size_t out_len = 0;
  if (EVP_AEAD_CTX_seal(ctx, out, &out_len, out_capacity, nonce.data(), nonce.size(),
                        plaintext.data(), plaintext.size(), ad.data(), ad.size()) != 1) {
    ERR_clear_error();
    return 0;
  }
  return out_len;
}

bool AeadOpen(const EVP_AEAD_CTX* ctx, absl::Span<const uint8_t> nonce,
              absl::Span<const uint8_t> ad, absl::Span<const uint8_t> ciphertext, uint8_t* out,
              size_t out_capacity, size_t* out_len) {
  if (EVP_AEAD_CTX_open(ctx, out, out_len, out_capacity, nonce.data(), nonce.size(),
                        ciphertext.data(), ciphertext.size(), ad.data(), ad.size()) != 1) {
    ERR_clear_error();
    return false;
  }
  return true;
}

}  // namespace petrel::quic::crypto
