// Internal: the per-connection link between an ngtcp2_conn and its BoringSSL SSL, and the TLS
// side of the QUIC handshake: feeding CRYPTO data to TLS, driving SSL_do_handshake, exchanging
// transport parameters and reporting completion to ngtcp2.
//
// Lookup both ways without touching the connection's user_data (which belongs to the
// connection object): the SSL's ex_data and ngtcp2's TLS native handle both point at the
// TlsSession.
//
// Thread: all methods run on the connection's worker thread, most of them from inside ngtcp2
// callbacks (ngtcp2_callbacks.h) or SSL_QUIC_METHOD hooks (quic_method.h).
//
// Ownership and teardown: the connection object owns the TlsSession (unique_ptr), and the
// TlsSession owns the SSL. Delete the ngtcp2_conn first (its delete_crypto_* callbacks do not
// use the session), then the TlsSession.
#ifndef PETREL_QUIC_CRYPTO_TLS_SESSION_H_
#define PETREL_QUIC_CRYPTO_TLS_SESSION_H_

#include <ngtcp2/ngtcp2.h>
#include <openssl/ssl.h>

#include <cstdint>
#include <memory>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "quic/crypto/key_install.h"

namespace petrel::quic::crypto {

class TlsSession {
 public:
  // Takes `ssl`, created from an SSL_CTX prepared with ConfigureSslCtxForQuic (quic_method.h),
  // with ALPN, SNI and verification already configured by the caller. Sets the connect or
  // accept state.
  static absl::StatusOr<std::unique_ptr<TlsSession>> Create(bssl::UniquePtr<SSL> ssl,
                                                            bool is_server);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // Binds `conn` (just created by ngtcp2_conn_{client,server}_new, not yet read or written):
  // sets its TLS native handle to this session and, for a client, installs the AEAD with which
  // ngtcp2 verifies Retry packets. `conn` must outlive every later call into this session.
  absl::Status Attach(ngtcp2_conn* conn);

  // Server, before the handshake: binds 0-RTT acceptance to `context` (transport parameters
  // and application settings such as the HTTP/3 SETTINGS). BoringSSL accepts early data only
  // if the context equals the one of the connection that issued the ticket; without a context
  // it never accepts 0-RTT.
  absl::Status SetEarlyDataContext(absl::Span<const uint8_t> context);

  // Client: runs after the server declined 0-RTT and ngtcp2 forgot the streams opened in it
  // (ngtcp2_conn_early_data_rejected), inside the handshake step that learnt it.
  void set_on_early_data_rejected(absl::AnyInvocable<void()> f) {
    on_early_data_rejected_ = std::move(f);
  }

  static TlsSession* FromSsl(const SSL* ssl);
  static TlsSession* FromConn(ngtcp2_conn* conn);

  SSL* ssl() const { return ssl_.get(); }
  ngtcp2_conn* conn() const { return conn_; }
  bool is_server() const { return is_server_; }
  // True once TLS declared the handshake complete (ngtcp2_conn_handshake_completed was called).
  bool tls_handshake_completed() const { return tls_handshake_completed_; }

  // --- Entry points for the ngtcp2 callbacks and TLS hooks; each returns 0 or NGTCP2_ERR_*.

  // Client, from client_initial: Initial keys, local transport parameters, ClientHello.
  int StartClientHandshake();
  // Server, from recv_client_initial.
  int StartServerHandshake(const ngtcp2_cid& client_dcid);
  // From recv_crypto_data: hands `data` to TLS at `level` and advances the handshake, or
  // processes post-handshake messages (NewSessionTicket) once it is complete.
  int ReceiveCryptoData(ngtcp2_crypto_level level, absl::Span<const uint8_t> data);
  // From set_read_secret / set_write_secret. Returns false to make TLS abort; the ngtcp2 error
  // is then left in ngtcp2_conn_set_tls_error.
  bool OnSecret(ssl_encryption_level_t level, KeyDirection direction, const SSL_CIPHER* cipher,
                absl::Span<const uint8_t> secret);

 private:
  TlsSession(bssl::UniquePtr<SSL> ssl, bool is_server);

  int ContinueHandshake();
  int SetLocalTransportParams();
  int DecodeRemoteTransportParams();
  // The error to return after TLS failed: the one a hook recorded, else NGTCP2_ERR_CRYPTO.
  int TlsFailure() const;

  bssl::UniquePtr<SSL> ssl_;
  ngtcp2_conn* conn_ = nullptr;
  const bool is_server_;
  bool remote_params_decoded_ = false;
  bool tls_handshake_completed_ = false;
  absl::AnyInvocable<void()> on_early_data_rejected_;
};

// ngtcp2's crypto levels and BoringSSL's encryption levels name the same four things in a
// different order.
ngtcp2_crypto_level ToNgtcp2Level(ssl_encryption_level_t level);
ssl_encryption_level_t ToSslLevel(ngtcp2_crypto_level level);

}  // namespace petrel::quic::crypto

#endif  // PETREL_QUIC_CRYPTO_TLS_SESSION_H_
