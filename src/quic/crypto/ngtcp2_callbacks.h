// Internal: the crypto members of ngtcp2 0.12.1's ngtcp2_callbacks, implemented with BoringSSL
// — what libngtcp2_crypto_* would provide, under Petrel's own names (Petrel never links
// libngtcp2_crypto_gnutls: it defines the same ngtcp2_crypto_* symbols).
//
// Each function has the exact ngtcp2 0.12.1 callback signature. The connection-level ones find
// their TlsSession through ngtcp2_conn_get_tls_native_handle, so the connection's user_data
// stays free for the connection object. All run on the connection's worker thread.
//
// Ownership of crypto objects: every ngtcp2_crypto_aead_ctx::native_handle is an EVP_AEAD_CTX
// and every ngtcp2_crypto_cipher_ctx::native_handle a HeaderProtectionContext, created by
// Petrel at key install / key update and owned by ngtcp2 from then on; ngtcp2 frees them with
// DeleteCryptoAeadCtx / DeleteCryptoCipherCtx. Encrypt, Decrypt and HpMask allocate nothing.
#ifndef PETREL_QUIC_CRYPTO_NGTCP2_CALLBACKS_H_
#define PETREL_QUIC_CRYPTO_NGTCP2_CALLBACKS_H_

#include <ngtcp2/ngtcp2.h>

#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"

namespace petrel::quic::crypto {

// Client: Initial keys for the current DCID, local transport parameters, ClientHello.
int ClientInitial(ngtcp2_conn* conn, void* user_data);
// Server: Initial keys from the client's DCID.
int RecvClientInitial(ngtcp2_conn* conn, const ngtcp2_cid* dcid, void* user_data);
// CRYPTO data to TLS at its level; drives the handshake and post-handshake messages.
int RecvCryptoData(ngtcp2_conn* conn, ngtcp2_crypto_level crypto_level, uint64_t offset,
                   const uint8_t* data, size_t datalen, void* user_data);

int Encrypt(uint8_t* dest, const ngtcp2_crypto_aead* aead, const ngtcp2_crypto_aead_ctx* aead_ctx,
            const uint8_t* plaintext, size_t plaintextlen, const uint8_t* nonce, size_t noncelen,
            const uint8_t* aad, size_t aadlen);
int Decrypt(uint8_t* dest, const ngtcp2_crypto_aead* aead, const ngtcp2_crypto_aead_ctx* aead_ctx,
            const uint8_t* ciphertext, size_t ciphertextlen, const uint8_t* nonce, size_t noncelen,
            const uint8_t* aad, size_t aadlen);
int HpMask(uint8_t* dest, const ngtcp2_crypto_cipher* hp, const ngtcp2_crypto_cipher_ctx* hp_ctx,
           const uint8_t* sample);

// Client: Initial keys again, derived from the Retry's SCID.
int RecvRetry(ngtcp2_conn* conn, const ngtcp2_pkt_hd* hd, void* user_data);

// Next-generation 1-RTT secrets ("quic ku", or the version's label) and AEAD contexts.
int UpdateKey(ngtcp2_conn* conn, uint8_t* rx_secret, uint8_t* tx_secret,
              ngtcp2_crypto_aead_ctx* rx_aead_ctx, uint8_t* rx_iv,
              ngtcp2_crypto_aead_ctx* tx_aead_ctx, uint8_t* tx_iv, const uint8_t* current_rx_secret,
              const uint8_t* current_tx_secret, size_t secretlen, void* user_data);

void DeleteCryptoAeadCtx(ngtcp2_conn* conn, ngtcp2_crypto_aead_ctx* aead_ctx, void* user_data);
void DeleteCryptoCipherCtx(ngtcp2_conn* conn, ngtcp2_crypto_cipher_ctx* cipher_ctx,
                           void* user_data);

int GetPathChallengeData(ngtcp2_conn* conn, uint8_t* data, void* user_data);

// Compatible version negotiation: Initial keys of `version` alongside the original ones.
int VersionNegotiation(ngtcp2_conn* conn, uint32_t version, const ngtcp2_cid* client_dcid,
                       void* user_data);

// RAND_bytes. ngtcp2 uses these bytes only where unpredictability is not security-critical,
// but BoringSSL's generator is fast enough to use everywhere.
void Rand(uint8_t* dest, size_t destlen, const ngtcp2_rand_ctx* rand_ctx);

// Sets the members above (client_initial or recv_client_initial by side; recv_retry for
// clients) and leaves every other member untouched. get_new_connection_id is the caller's: it
// knows the CID layout; GenerateConnectionId below does the ngtcp2 side of it.
void SetCryptoCallbacks(ngtcp2_callbacks* callbacks, bool is_server);

// The caller's CID source. Contract: write a fresh, unused connection ID of exactly cid.size()
// octets into `cid` and its stateless reset token (NGTCP2_STATELESS_RESET_TOKENLEN octets) into
// `token`; return false on failure.
using CidGenerator = absl::FunctionRef<bool(absl::Span<uint8_t> cid, uint8_t* token)>;

// The body of a get_new_connection_id callback: fills `cid` (cidlen octets) and `token` via
// `generate`. Returns 0 or NGTCP2_ERR_CALLBACK_FAILURE.
int GenerateConnectionId(ngtcp2_cid* cid, uint8_t* token, size_t cidlen, CidGenerator generate);

// A CidGenerator for clients and tests: random CID and random token from RAND_bytes.
bool RandomConnectionId(absl::Span<uint8_t> cid, uint8_t* token);

}  // namespace petrel::quic::crypto

#endif  // PETREL_QUIC_CRYPTO_NGTCP2_CALLBACKS_H_
