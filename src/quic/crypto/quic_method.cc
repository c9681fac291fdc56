#include "quic/crypto/quic_method.h"

#include <ngtcp2/ngtcp2.h>
#include <openssl/err.h>

#include "quic/crypto/tls_session.h"

namespace petrel::quic::crypto {
namespace {

int SetSecret(SSL* ssl, ssl_encryption_level_t level, KeyDirection direction,
              const SSL_CIPHER* cipher, const uint8_t* secret, size_t secret_len) {
  TlsSession* session = TlsSession::FromSsl(ssl);
  if (session == nullptr || session->conn() == nullptr) return 0;
  return session->OnSecret(level, direction, cipher, absl::MakeConstSpan(secret, secret_len)) ? 1
                                                                                              : 0;
}

int SetReadSecret(SSL* ssl, ssl_encryption_level_t level, const SSL_CIPHER* cipher,
                  const uint8_t* secret, size_t secret_len) {
  return SetSecret(ssl, level, KeyDirection::kRead, cipher, secret, secret_len);
}

int SetWriteSecret(SSL* ssl, ssl_encryption_level_t level, const SSL_CIPHER* cipher,
                   const uint8_t* secret, size_t secret_len) {
  return SetSecret(ssl, level, KeyDirection::kWrite, cipher, secret, secret_len);
}

int AddHandshakeData(SSL* ssl, ssl_encryption_level_t level, const uint8_t* data, size_t len) {
  TlsSession* session = TlsSession::FromSsl(ssl);
  if (session == nullptr || session->conn() == nullptr) return 0;
  // ngtcp2 copies the bytes and retransmits them at this level as needed.
  const int rv = ngtcp2_conn_submit_crypto_data(session->conn(), ToNgtcp2Level(level), data, len);
  if (rv != 0) {
    ngtcp2_conn_set_tls_error(session->conn(), rv);
    return 0;
  }
  return 1;
}

// ngtcp2 packs CRYPTO data into packets when the connection next writes; nothing to flush.
int FlushFlight(SSL* /*ssl*/) { return 1; }

int SendAlert(SSL* ssl, ssl_encryption_level_t /*level*/, uint8_t alert) {
  TlsSession* session = TlsSession::FromSsl(ssl);
  if (session == nullptr || session->conn() == nullptr) return 0;
  // QUIC sends no TLS alert records: ngtcp2 closes with CRYPTO_ERROR (0x100 + alert).
  ngtcp2_conn_set_tls_alert(session->conn(), alert);
  return 1;
}

constexpr SSL_QUIC_METHOD kQuicMethod = {
    SetReadSecret, SetWriteSecret, AddHandshakeData, FlushFlight, SendAlert,
};

}  // namespace

const SSL_QUIC_METHOD* PetrelQuicMethod() { return &kQuicMethod; }

absl::Status ConfigureSslCtxForQuic(SSL_CTX* ctx) {
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1 ||
      SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1 ||
      SSL_CTX_set_quic_method(ctx, PetrelQuicMethod()) != 1) {
    ERR_clear_error();
    return absl::InternalError("cannot configure the SSL_CTX for QUIC");
  }
  return absl::OkStatus();
}

}  // namespace petrel::quic::crypto
