// Internal: BoringSSL's SSL_QUIC_METHOD hooks for Petrel, which carry TLS's output into
// ngtcp2: traffic secrets become installed packet keys (set_read_secret / set_write_secret),
// handshake bytes become CRYPTO data (add_handshake_data), and a fatal alert becomes the TLS
// alert of the CONNECTION_CLOSE (send_alert).
//
// Thread: the hooks run inside SSL_do_handshake / SSL_process_quic_post_handshake, which
// TlsSession calls on the connection's worker thread from ngtcp2 callbacks.
#ifndef PETREL_QUIC_CRYPTO_QUIC_METHOD_H_
#define PETREL_QUIC_CRYPTO_QUIC_METHOD_H_

#include <openssl/ssl.h>

#include "absl/status/status.h"

namespace petrel::quic::crypto {

// The hooks; a static with program lifetime, as SSL_CTX_set_quic_method requires.
const SSL_QUIC_METHOD* PetrelQuicMethod();

// Prepares `ctx` for QUIC: TLS 1.3 only (RFC 9001 §4.2) and Petrel's hooks. Call once per
// SSL_CTX before creating SSL objects from it; the TLS context code adds certificates, ALPN,
// session tickets and early data on top.
absl::Status ConfigureSslCtxForQuic(SSL_CTX* ctx);

}  // namespace petrel::quic::crypto

#endif  // PETREL_QUIC_CRYPTO_QUIC_METHOD_H_
