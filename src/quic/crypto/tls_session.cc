#include "quic/crypto/tls_session.h"

#include <openssl/err.h>

#include "quic/crypto/cipher_suite.h"
#include "quic/crypto/retry.h"

namespace petrel::quic::crypto {
namespace {

int SessionExDataIndex() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// Local transport parameters stay well below this (a preferred address and the
// version_information list included).
constexpr size_t kMaxTransportParamsLen = 512;

}  // namespace

ngtcp2_crypto_level ToNgtcp2Level(ssl_encryption_level_t level) {
  switch (level) {
    case ssl_encryption_initial:
      return NGTCP2_CRYPTO_LEVEL_INITIAL;
    case ssl_encryption_early_data:
      return NGTCP2_CRYPTO_LEVEL_EARLY;
    case ssl_encryption_handshake:
      return NGTCP2_CRYPTO_LEVEL_HANDSHAKE;
    case ssl_encryption_application:
      break;
  }
  return NGTCP2_CRYPTO_LEVEL_APPLICATION;
}

ssl_encryption_level_t ToSslLevel(ngtcp2_crypto_level level) {
  switch (level) {
    case NGTCP2_CRYPTO_LEVEL_INITIAL:
      return ssl_encryption_initial;
    case NGTCP2_CRYPTO_LEVEL_EARLY:
      return ssl_encryption_early_data;
    case NGTCP2_CRYPTO_LEVEL_HANDSHAKE:
      return ssl_encryption_handshake;
    case NGTCP2_CRYPTO_LEVEL_APPLICATION:
      break;
  }
  return ssl_encryption_application;
}

TlsSession::TlsSession(bssl::UniquePtr<SSL> ssl, bool is_server)
    : ssl_(std::move(ssl)), is_server_(is_server) {}

absl::StatusOr<std::unique_ptr<TlsSession>> TlsSession::Create(bssl::UniquePtr<SSL> ssl,
                                                               bool is_server) {
  if (ssl == nullptr) return absl::InvalidArgumentError("no SSL");
  if (SessionExDataIndex() < 0) return absl::InternalError("SSL_get_ex_new_index failed");
  std::unique_ptr<TlsSession> session(new TlsSession(std::move(ssl), is_server));
  if (SSL_set_ex_data(session->ssl(), SessionExDataIndex(), session.get()) != 1) {
    return absl::InternalError("SSL_set_ex_data failed");
  }
  if (is_server) {
    SSL_set_accept_state(session->ssl());
  } else {
    SSL_set_connect_state(session->ssl());
  }
  return session;
}

TlsSession::~TlsSession() { SSL_set_ex_data(ssl_.get(), SessionExDataIndex(), nullptr); }

absl::Status TlsSession::Attach(ngtcp2_conn* conn) {
  if (conn_ != nullptr) return absl::FailedPreconditionError("TlsSession already attached");
  if ((ngtcp2_conn_is_server(conn) != 0) != is_server_) {
    return absl::InvalidArgumentError("client/server mismatch between ngtcp2_conn and SSL");
  }
  conn_ = conn;
  ngtcp2_conn_set_tls_native_handle(conn, this);
  if (!is_server_ && InstallRetryAead(conn, ngtcp2_conn_get_client_chosen_version(conn)) != 0) {
    return absl::InternalError("cannot install the Retry AEAD");
  }
  return absl::OkStatus();
}

absl::Status TlsSession::SetEarlyDataContext(absl::Span<const uint8_t> context) {
  if (!is_server_) return absl::FailedPreconditionError("the early data context is server-side");
  if (SSL_set_quic_early_data_context(ssl(), context.data(), context.size()) != 1) {
    ERR_clear_error();
    return absl::InternalError("SSL_set_quic_early_data_context failed");
  }
  return absl::OkStatus();
}

TlsSession* TlsSession::FromSsl(const SSL* ssl) {
  return static_cast<TlsSession*>(SSL_get_ex_data(ssl, SessionExDataIndex()));
}

TlsSession* TlsSession::FromConn(ngtcp2_conn* conn) {
  return static_cast<TlsSession*>(ngtcp2_conn_get_tls_native_handle(conn));
}

int TlsSession::StartClientHandshake() {
  const ngtcp2_cid* dcid = ngtcp2_conn_get_dcid(conn_);
  int rv = InstallInitialKeys(conn_, ngtcp2_conn_get_client_chosen_version(conn_), *dcid);
  if (rv == 0) rv = SetLocalTransportParams();
  if (rv == 0) rv = ContinueHandshake();
  return rv;
}

int TlsSession::StartServerHandshake(const ngtcp2_cid& client_dcid) {
  // The server's transport parameters are encoded later, once the client's have settled the
  // negotiated version: see OnSecret. BoringSSL first needs them for EncryptedExtensions.
  return InstallInitialKeys(conn_, ngtcp2_conn_get_client_chosen_version(conn_), client_dcid);
}

int TlsSession::ReceiveCryptoData(ngtcp2_crypto_level level, absl::Span<const uint8_t> data) {
  // A stale entry (from another connection on this thread) would turn SSL_get_error's
  // WANT_READ into SSL_ERROR_SSL.
  ERR_clear_error();
  if (SSL_provide_quic_data(ssl(), ToSslLevel(level), data.data(), data.size()) != 1) {
    ERR_clear_error();
    return TlsFailure();
  }
  if (!tls_handshake_completed_) return ContinueHandshake();
  if (SSL_process_quic_post_handshake(ssl()) != 1) {
    ERR_clear_error();
    return TlsFailure();
  }
  return 0;
}

int TlsSession::ContinueHandshake() {
  for (;;) {
    ERR_clear_error();
    const int rv = SSL_do_handshake(ssl());
    if (rv <= 0) {
      const int err = SSL_get_error(ssl(), rv);
      ERR_clear_error();
      switch (err) {
        case SSL_ERROR_WANT_READ:
        case SSL_ERROR_WANT_WRITE:
          return 0;
        case SSL_ERROR_EARLY_DATA_REJECTED:
          // Client: the server declined 0-RTT. BoringSSL drops its early keys; ngtcp2 must
          // forget the streams opened in 0-RTT. Then the handshake goes on as 1-RTT.
          SSL_reset_early_data_reject(ssl());
          if (ngtcp2_conn_early_data_rejected(conn_) != 0) return NGTCP2_ERR_CALLBACK_FAILURE;
          if (on_early_data_rejected_) on_early_data_rejected_();
          continue;
        default:
          return TlsFailure();
      }
    }
    // 1 while SSL_in_early_data: a client may now send 0-RTT, or a server that accepted it
    // may send half-RTT data; the handshake itself is not finished.
    if (SSL_in_early_data(ssl())) return 0;
    if (!remote_params_decoded_) {
      const int decoded = DecodeRemoteTransportParams();
      if (decoded != 0) return decoded;
    }
    tls_handshake_completed_ = true;
    ngtcp2_conn_handshake_completed(conn_);
    return 0;
  }
}

bool TlsSession::OnSecret(ssl_encryption_level_t level, KeyDirection direction,
                          const SSL_CIPHER* cipher, absl::Span<const uint8_t> secret) {
  const CipherSuite* suite = FindCipherSuite(SSL_CIPHER_get_protocol_id(cipher));
  const ngtcp2_crypto_level ngtcp2_level = ToNgtcp2Level(level);
  int rv = suite == nullptr ? NGTCP2_ERR_CRYPTO : 0;
  // The peer's transport parameters are decoded before the keys that depend on them. Server:
  // the client's (from the ClientHello) settle the negotiated version, whose labels the
  // Handshake keys use. Client: the server's arrive in EncryptedExtensions, after the
  // Handshake keys but before the 1-RTT keys.
  const bool decode_now =
      !remote_params_decoded_ && (is_server_ ? ngtcp2_level == NGTCP2_CRYPTO_LEVEL_HANDSHAKE
                                             : ngtcp2_level == NGTCP2_CRYPTO_LEVEL_APPLICATION);
  if (rv == 0 && decode_now) rv = DecodeRemoteTransportParams();
  if (rv == 0) {
    // 0-RTT always uses the client's original version (RFC 9369 §4.1).
    const uint32_t version = ngtcp2_level == NGTCP2_CRYPTO_LEVEL_EARLY
                                 ? ngtcp2_conn_get_client_chosen_version(conn_)
                                 : PacketProtectionVersion(conn_);
    rv = InstallTrafficKey(conn_, ngtcp2_level, direction, *suite, version, secret);
  }
  // BoringSSL writes EncryptedExtensions right after the server's Handshake write key: the
  // transport parameters in it must now carry the negotiated version.
  if (rv == 0 && is_server_ && ngtcp2_level == NGTCP2_CRYPTO_LEVEL_HANDSHAKE &&
      direction == KeyDirection::kWrite) {
    rv = SetLocalTransportParams();
  }
  if (rv != 0) {
    ngtcp2_conn_set_tls_error(conn_, rv);
    return false;
  }
  return true;
}

int TlsSession::SetLocalTransportParams() {
  uint8_t buf[kMaxTransportParamsLen];
  const ngtcp2_ssize n = ngtcp2_conn_encode_local_transport_params(conn_, buf, sizeof(buf));
  if (n < 0) return static_cast<int>(n);
  if (SSL_set_quic_transport_params(ssl(), buf, static_cast<size_t>(n)) != 1) {
    ERR_clear_error();
    return NGTCP2_ERR_CALLBACK_FAILURE;
  }
  return 0;
}

int TlsSession::DecodeRemoteTransportParams() {
  const uint8_t* params = nullptr;
  size_t len = 0;
  SSL_get_peer_quic_transport_params(ssl(), &params, &len);
  if (len == 0) return NGTCP2_ERR_REQUIRED_TRANSPORT_PARAM;
  const int rv = ngtcp2_conn_decode_remote_transport_params(conn_, params, len);
  if (rv != 0) return rv;
  remote_params_decoded_ = true;
  return 0;
}

int TlsSession::TlsFailure() const {
  const int recorded = ngtcp2_conn_get_tls_error(conn_);
  return recorded != 0 ? recorded : NGTCP2_ERR_CRYPTO;
}

}  // namespace petrel::quic::crypto
