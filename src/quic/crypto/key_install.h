// Internal: turns secrets into ngtcp2 key objects and installs them into an ngtcp2_conn —
// Initial keys (from the client's DCID), keys for compatible version negotiation, and the
// Handshake / 0-RTT / 1-RTT keys that TLS hands over through SSL_QUIC_METHOD.
//
// Thread: the connection's worker thread (these run inside ngtcp2 callbacks and TLS hooks).
// Ownership: the AEAD and header-protection contexts created here pass to ngtcp2 only when
// the ngtcp2_conn_install_* call succeeds; on failure they are freed here. ngtcp2 later frees
// them through delete_crypto_aead_ctx / delete_crypto_cipher_ctx.
//
// Functions return 0 or an ngtcp2 error code (NGTCP2_ERR_*), ready to be returned from a
// callback (callers that may only return NGTCP2_ERR_CALLBACK_FAILURE map it).
#ifndef PETREL_QUIC_CRYPTO_KEY_INSTALL_H_
#define PETREL_QUIC_CRYPTO_KEY_INSTALL_H_

#include <ngtcp2/ngtcp2.h>

#include <cstdint>

#include "absl/types/span.h"
#include "quic/crypto/cipher_suite.h"

namespace petrel::quic::crypto {

enum class KeyDirection : uint8_t { kRead, kWrite };

// Derives the Initial keys of `version` from `client_dcid` for both directions (the side comes
// from ngtcp2_conn_is_server), sets the Initial crypto context and installs the keys.
int InstallInitialKeys(ngtcp2_conn* conn, uint32_t version, const ngtcp2_cid& client_dcid);

// The same for the Initial keys of a version chosen by compatible version negotiation
// (ngtcp2_conn_install_vneg_initial_key); the original version's keys stay installed.
int InstallVersionNegotiationKeys(ngtcp2_conn* conn, uint32_t version,
                                  const ngtcp2_cid& client_dcid);

// Installs the key derived from a TLS traffic secret at `level` (HANDSHAKE, EARLY or
// APPLICATION) for `direction`, with the labels of `version`, and sets the crypto context of
// that level (Handshake and 1-RTT share one; 0-RTT has its own). For EARLY, `direction` must
// be kWrite on a client and kRead on a server.
int InstallTrafficKey(ngtcp2_conn* conn, ngtcp2_crypto_level level, KeyDirection direction,
                      const CipherSuite& suite, uint32_t version, absl::Span<const uint8_t> secret);

// The version whose labels protect Handshake and 1-RTT packets: the negotiated version once
// ngtcp2 knows it, else the client's chosen version.
uint32_t PacketProtectionVersion(ngtcp2_conn* conn);

}  // namespace petrel::quic::crypto

#endif  // PETREL_QUIC_CRYPTO_KEY_INSTALL_H_
