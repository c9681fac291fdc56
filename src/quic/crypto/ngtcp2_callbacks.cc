#include "quic/crypto/ngtcp2_callbacks.h"

#include <openssl/rand.h>

#include "quic/crypto/aead.h"
#include "quic/crypto/cipher_suite.h"
#include "quic/crypto/header_protection.h"
#include "quic/crypto/key_install.h"
#include "quic/crypto/packet_keys.h"
#include "quic/crypto/tls_session.h"
#include "quic/crypto/version_params.h"

namespace petrel::quic::crypto {
namespace {

// Callbacks documented to return only 0 or NGTCP2_ERR_CALLBACK_FAILURE.
int AsCallbackResult(int rv) { return rv == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE; }

}  // namespace

int ClientInitial(ngtcp2_conn* conn, void* /*user_data*/) {
  TlsSession* session = TlsSession::FromConn(conn);
  if (session == nullptr) return NGTCP2_ERR_CALLBACK_FAILURE;
  return AsCallbackResult(session->StartClientHandshake());
}

int RecvClientInitial(ngtcp2_conn* conn, const ngtcp2_cid* dcid, void* /*user_data*/) {
  TlsSession* session = TlsSession::FromConn(conn);
  if (session == nullptr) return NGTCP2_ERR_CALLBACK_FAILURE;
  return AsCallbackResult(session->StartServerHandshake(*dcid));
}

int RecvCryptoData(ngtcp2_conn* conn, ngtcp2_crypto_level crypto_level, uint64_t /*offset*/,
                   const uint8_t* data, size_t datalen, void* /*user_data*/) {
  TlsSession* session = TlsSession::FromConn(conn);
  if (session == nullptr) return NGTCP2_ERR_CALLBACK_FAILURE;
  return session->ReceiveCryptoData(crypto_level, absl::MakeConstSpan(data, datalen));
}

int Encrypt(uint8_t* dest, const ngtcp2_crypto_aead* aead, const ngtcp2_crypto_aead_ctx* aead_ctx,
            const uint8_t* plaintext, size_t plaintextlen, const uint8_t* nonce, size_t noncelen,
            const uint8_t* aad, size_t aadlen) {
  const size_t expected = plaintextlen + aead->max_overhead;
  const size_t written =
      AeadSeal(static_cast<const EVP_AEAD_CTX*>(aead_ctx->native_handle),
               absl::MakeConstSpan(nonce, noncelen), absl::MakeConstSpan(aad, aadlen),
               absl::MakeConstSpan(plaintext, plaintextlen), dest, expected);
  return written == expected ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

int Decrypt(uint8_t* dest, const ngtcp2_crypto_aead* aead, const ngtcp2_crypto_aead_ctx* aead_ctx,
            const uint8_t* ciphertext, size_t ciphertextlen, const uint8_t* nonce, size_t noncelen,
            const uint8_t* aad, size_t aadlen) {
  if (ciphertextlen < aead->max_overhead) return NGTCP2_ERR_DECRYPT;
  size_t written = 0;
  if (!AeadOpen(static_cast<const EVP_AEAD_CTX*>(aead_ctx->native_handle),
                absl::MakeConstSpan(nonce, noncelen), absl::MakeConstSpan(aad, aadlen),
                absl::MakeConstSpan(ciphertext, ciphertextlen), dest,
                ciphertextlen - aead->max_overhead, &written)) {
    return NGTCP2_ERR_DECRYPT;
  }
  return 0;
}

int HpMask(uint8_t* dest, const ngtcp2_crypto_cipher* /*hp*/,
           const ngtcp2_crypto_cipher_ctx* hp_ctx, const uint8_t* sample) {
  // ngtcp2 guarantees NGTCP2_HP_SAMPLELEN (16) octets at dest, which Mask() fills.
  static_assert(kHpMaskOutputLen <= NGTCP2_HP_SAMPLELEN);
  auto* ctx = static_cast<HeaderProtectionContext*>(hp_ctx->native_handle);
  return ctx->Mask(sample, dest) ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

int RecvRetry(ngtcp2_conn* conn, const ngtcp2_pkt_hd* hd, void* /*user_data*/) {
  return AsCallbackResult(InstallInitialKeys(conn, hd->version, hd->scid));
}

int UpdateKey(ngtcp2_conn* conn, uint8_t* rx_secret, uint8_t* tx_secret,
              ngtcp2_crypto_aead_ctx* rx_aead_ctx, uint8_t* rx_iv,
              ngtcp2_crypto_aead_ctx* tx_aead_ctx, uint8_t* tx_iv, const uint8_t* current_rx_secret,
              const uint8_t* current_tx_secret, size_t secretlen, void* /*user_data*/) {
  const ngtcp2_crypto_ctx* ctx = ngtcp2_conn_get_crypto_ctx(conn);
  const CipherSuite* suite =
      ctx == nullptr ? nullptr
                     : FindCipherSuiteByAead(static_cast<const EVP_AEAD*>(ctx->aead.native_handle));
  const VersionParams* version = FindVersionParams(PacketProtectionVersion(conn));
  if (suite == nullptr || version == nullptr || secretlen > kMaxSecretLen) {
    return NGTCP2_ERR_CALLBACK_FAILURE;
  }
  const absl::Span<uint8_t> next_rx(rx_secret, secretlen);
  const absl::Span<uint8_t> next_tx(tx_secret, secretlen);
  // The header-protection key survives key updates (RFC 9001 §6): only key and IV change.
  PacketProtectionKeys rx_keys;
  PacketProtectionKeys tx_keys;
  if (!DeriveNextTrafficSecret(suite->md, *version,
                               absl::MakeConstSpan(current_rx_secret, secretlen), next_rx) ||
      !DeriveNextTrafficSecret(suite->md, *version,
                               absl::MakeConstSpan(current_tx_secret, secretlen), next_tx) ||
      !DerivePacketProtectionKeys(*suite, *version, next_rx, &rx_keys, /*with_hp=*/false) ||
      !DerivePacketProtectionKeys(*suite, *version, next_tx, &tx_keys, /*with_hp=*/false)) {
    return NGTCP2_ERR_CALLBACK_FAILURE;
  }
  AeadContextPtr rx_aead = NewAeadContext(*suite, rx_keys.key());
  AeadContextPtr tx_aead = NewAeadContext(*suite, tx_keys.key());
  if (rx_aead == nullptr || tx_aead == nullptr) return NGTCP2_ERR_CALLBACK_FAILURE;
  for (size_t i = 0; i < kIvLen; ++i) {
    rx_iv[i] = rx_keys.iv_bytes[i];
    tx_iv[i] = tx_keys.iv_bytes[i];
  }
  rx_aead_ctx->native_handle = rx_aead.release();  // owned by ngtcp2 from here
  tx_aead_ctx->native_handle = tx_aead.release();
  return 0;
}

void DeleteCryptoAeadCtx(ngtcp2_conn* /*conn*/, ngtcp2_crypto_aead_ctx* aead_ctx,
                         void* /*user_data*/) {
  EVP_AEAD_CTX_free(static_cast<EVP_AEAD_CTX*>(aead_ctx->native_handle));
  aead_ctx->native_handle = nullptr;
}

void DeleteCryptoCipherCtx(ngtcp2_conn* /*conn*/, ngtcp2_crypto_cipher_ctx* cipher_ctx,
                           void* /*user_data*/) {
  delete static_cast<HeaderProtectionContext*>(cipher_ctx->native_handle);
  cipher_ctx->native_handle = nullptr;
}

int GetPathChallengeData(ngtcp2_conn* /*conn*/, uint8_t* data, void* /*user_data*/) {
  return RAND_bytes(data, NGTCP2_PATH_CHALLENGE_DATALEN) == 1 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

int VersionNegotiation(ngtcp2_conn* conn, uint32_t version, const ngtcp2_cid* client_dcid,
                       void* /*user_data*/) {
  return AsCallbackResult(InstallVersionNegotiationKeys(conn, version, *client_dcid));
}

void Rand(uint8_t* dest, size_t destlen, const ngtcp2_rand_ctx* /*rand_ctx*/) {
  RAND_bytes(dest, destlen);  // cannot fail in BoringSSL: it aborts instead
}

void SetCryptoCallbacks(ngtcp2_callbacks* callbacks, bool is_server) {
  if (is_server) {
    callbacks->recv_client_initial = RecvClientInitial;
  } else {
    callbacks->client_initial = ClientInitial;
    callbacks->recv_retry = RecvRetry;
  }
  callbacks->recv_crypto_data = RecvCryptoData;
  callbacks->encrypt = Encrypt;
  callbacks->decrypt = Decrypt;
  callbacks->hp_mask = HpMask;
  callbacks->update_key = UpdateKey;
  callbacks->delete_crypto_aead_ctx = DeleteCryptoAeadCtx;
  callbacks->delete_crypto_cipher_ctx = DeleteCryptoCipherCtx;
  callbacks->get_path_challenge_data = GetPathChallengeData;
  callbacks->version_negotiation = VersionNegotiation;
  callbacks->rand = Rand;
}

int GenerateConnectionId(ngtcp2_cid* cid, uint8_t* token, size_t cidlen, CidGenerator generate) {
  if (cidlen > NGTCP2_MAX_CIDLEN) return NGTCP2_ERR_CALLBACK_FAILURE;
  if (!generate(absl::MakeSpan(cid->data, cidlen), token)) return NGTCP2_ERR_CALLBACK_FAILURE;
  cid->datalen = cidlen;
  return 0;
}

bool RandomConnectionId(absl::Span<uint8_t> cid, uint8_t* token) {
  return RAND_bytes(cid.data(), cid.size()) == 1 &&
         RAND_bytes(token, NGTCP2_STATELESS_RESET_TOKENLEN) == 1;
}

}  // namespace petrel::quic::crypto
