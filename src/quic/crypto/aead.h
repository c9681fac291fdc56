// Internal: QUIC packet payload protection (RFC 9001 §5.3) with BoringSSL's EVP_AEAD.
//
// Ownership: an EVP_AEAD_CTX is created once per key (at key install or key update), never
// per packet. Once handed to ngtcp2 as ngtcp2_crypto_aead_ctx::native_handle, ngtcp2 owns it
// and gives it back through the delete_crypto_aead_ctx callback (ngtcp2_callbacks.h), which
// frees it with EVP_AEAD_CTX_free. Seal and open take a const context and allocate nothing;
// BoringSSL allows concurrent use of one context, though Petrel uses each on one worker only.
#ifndef PETREL_QUIC_CRYPTO_AEAD_H_
#define PETREL_QUIC_CRYPTO_AEAD_H_

#include <openssl/aead.h>

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "quic/crypto/cipher_suite.h"

namespace petrel::quic::crypto {

inline constexpr size_t kAeadNonceLen = 12;

using AeadContextPtr = bssl::UniquePtr<EVP_AEAD_CTX>;

// A context keyed with `key` (suite.key_len octets) and the full 16-octet tag, or null if the
// key length is wrong or BoringSSL fails.
AeadContextPtr NewAeadContext(const CipherSuite& suite, absl::Span<const uint8_t> key);

// nonce = iv XOR (packet number, left-padded to the IV length). `iv` is kAeadNonceLen octets.
void MakeNonce(absl::Span<const uint8_t> iv, uint64_t packet_number, uint8_t* nonce);

// Encrypts `plaintext` with associated data `ad` into `out` as ciphertext || tag;
// `out` may equal plaintext.data() (in place) and must hold plaintext.size() + tag octets.
// Returns the output length, or 0 on failure.
size_t AeadSeal(const EVP_AEAD_CTX* ctx, absl::Span<const uint8_t> nonce,
                absl::Span<const uint8_t> ad, absl::Span<const uint8_t> plaintext, uint8_t* out,
                size_t out_capacity);

// Authenticates and decrypts `ciphertext` (ciphertext || tag) into `out`, which may equal
// ciphertext.data() and must hold ciphertext.size() - tag octets. Returns false if the input
// is forged, corrupted or too short; BoringSSL's error queue is cleared in that case, so a
// dropped packet never leaks an error into a later SSL_get_error on the same thread.
bool AeadOpen(const EVP_AEAD_CTX* ctx, absl::Span<const uint8_t> nonce,
              absl::Span<const uint8_t> ad, absl::Span<const uint8_t> ciphertext, uint8_t* out,
              size_t out_capacity, size_t* out_len);

}  // namespace petrel::quic::crypto

#endif  // PETREL_QUIC_CRYPTO_AEAD_H_
