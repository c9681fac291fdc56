// Petrel's crypto glue driving two real ngtcp2 0.12.1 connections in memory: handshake,
// 100 KB each way on one bidirectional stream, a client-initiated key update, every cipher
// suite BoringSSL will negotiate here, QUIC v2 (provisional) directly and by compatible
// version negotiation, Retry, and TLS failures surfacing as CRYPTO_ERROR alerts.
#include <openssl/aead.h>
#include <openssl/ssl.h>

#include <string>

#include "gtest/gtest.h"
#include "quic/crypto/cipher_suite.h"
#include "quic/crypto/tls_session.h"
#include "quic/packet/versions.h"
#include "quic/quic_pair_harness.h"

namespace petrel::quic::crypto {
namespace {

using testing::Endpoint;
using testing::MakeClientCtx;
using testing::MakeSelfSignedP256;
using testing::MakeServerCtx;
using testing::PairOptions;
using testing::QuicPair;
using testing::TestCertificate;

constexpr size_t kTransferSize = 100 * 1024;

std::string Pattern(size_t size, uint8_t seed) {
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<char>((i * 31 + seed) % 251);
  return out;
}

// What a BoringSSL client (API 17) and server negotiate on this machine: the client lists
// AES-128-GCM, AES-256-GCM, ChaCha20 with AES hardware, ChaCha20 first without it, and the
// server follows the client's order. Neither side can restrict TLS 1.3 suites (no
// SSL_CTX_set_tls13_cipher_suites, no AES-hardware override in this version); the no-AES-NI
// run (OPENSSL_ia32cap, see CMakeLists.txt) covers ChaCha20.
uint16_t ExpectedCipherSuite() {
  return EVP_has_aes_hardware() ? kTlsAes128GcmSha256 : kTlsChaCha20Poly1305Sha256;
}

std::string Alpn(const SSL* ssl) {
  const uint8_t* data = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(ssl, &data, &len);
  return std::string(reinterpret_cast<const char*>(data), len);
}

class CryptoGlueTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cert_ = new TestCertificate(MakeSelfSignedP256());
    server_ctx_ = MakeServerCtx(*cert_).release();
    client_ctx_ = MakeClientCtx(cert_->cert.get()).release();
  }
  static void TearDownTestSuite() {
    SSL_CTX_free(client_ctx_);
    SSL_CTX_free(server_ctx_);
    delete cert_;
  }

  static bool HandshakeDone(QuicPair& pair) {
    return pair.client().handshake_completed && pair.server_created() &&
           pair.server().handshake_completed;
  }

  // Handshake, checks of what was negotiated, then 100 KB each way with a key update
  // initiated by the client half-way through the client's data.
  void RunFullExchange(PairOptions options, uint32_t expected_version) {
    QuicPair pair(client_ctx_, server_ctx_, options);
    ASSERT_TRUE(pair.Start());
    Endpoint& client = pair.client();
    ASSERT_TRUE(pair.Run([&] { return HandshakeDone(pair) || client.failed(); })) << "no handshake";
    ASSERT_FALSE(client.failed()) << ngtcp2_strerror(client.read_error);
    Endpoint& server = pair.server();
    ASSERT_FALSE(server.failed()) << ngtcp2_strerror(server.read_error);
    EXPECT_TRUE(client.tls->tls_handshake_completed());
    EXPECT_TRUE(server.tls->tls_handshake_completed());
    EXPECT_EQ(options.retry, pair.retry_sent());
    EXPECT_EQ(options.retry, ngtcp2_conn_after_retry(client.conn) != 0);

    for (Endpoint* e : {&client, &server}) {
      SCOPED_TRACE(e->is_server ? "server" : "client");
      EXPECT_EQ(ngtcp2_conn_get_negotiated_version(e->conn), expected_version);
      const SSL_CIPHER* cipher = SSL_get_current_cipher(e->tls->ssl());
      ASSERT_NE(cipher, nullptr);
      EXPECT_EQ(SSL_CIPHER_get_protocol_id(cipher), ExpectedCipherSuite())
          << SSL_CIPHER_get_name(cipher);
      EXPECT_EQ(Alpn(e->tls->ssl()), "hq-interop");
    }
    EXPECT_EQ(SSL_get_verify_result(client.tls->ssl()), X509_V_OK);

    // One bidirectional stream: the client's 100 KB, half of it before the key update; the
    // server answers on the same stream once the client's data starts arriving.
    ASSERT_EQ(ngtcp2_conn_open_bidi_stream(client.conn, &client.stream_id, nullptr), 0);
    client.to_send = Pattern(kTransferSize, 7);
    client.send_limit = kTransferSize / 2;
    server.to_send = Pattern(kTransferSize, 101);
    bool key_update_initiated = false;
    const bool finished = pair.Run([&] {
      if (client.failed() || server.failed()) return true;
      if (!key_update_initiated && client.handshake_confirmed && client.sent >= kTransferSize / 2 &&
          server.received.size() >= kTransferSize / 4 &&
          ngtcp2_conn_initiate_key_update(client.conn, pair.now()) == 0) {
        key_update_initiated = true;
        // Until now every packet used the handshake's 1-RTT keys.
        EXPECT_EQ(client.sealed_with_updated_keys + server.opened_with_updated_keys, 0u);
        client.send_limit = SIZE_MAX;
      }
      return client.received_fin && server.received_fin;
    });
    ASSERT_TRUE(finished) << "transfer did not finish: client got " << client.received.size()
                          << ", server got " << server.received.size();
    ASSERT_FALSE(client.failed()) << ngtcp2_strerror(client.read_error);
    ASSERT_FALSE(server.failed()) << ngtcp2_strerror(server.read_error);
    EXPECT_TRUE(server.received == client.to_send) << "client to server data differs";
    EXPECT_TRUE(client.received == server.to_send) << "server to client data differs";

    // The key update happened in both directions: the client sealed with keys from UpdateKey
    // and the server opened them with its own; the server answered with updated keys too
    // (RFC 9001 §6.2).
    ASSERT_TRUE(key_update_initiated) << "ngtcp2_conn_initiate_key_update never succeeded";
    EXPECT_GE(client.update_key_calls, 1);
    EXPECT_GE(server.update_key_calls, 1);
    EXPECT_GT(client.sealed_with_updated_keys, 0u);
    EXPECT_GT(server.opened_with_updated_keys, 0u);
    EXPECT_GT(server.sealed_with_updated_keys, 0u);
    EXPECT_GT(client.opened_with_updated_keys, 0u);
  }

  static TestCertificate* cert_;
  static SSL_CTX* server_ctx_;
  static SSL_CTX* client_ctx_;
};

TestCertificate* CryptoGlueTest::cert_ = nullptr;
SSL_CTX* CryptoGlueTest::server_ctx_ = nullptr;
SSL_CTX* CryptoGlueTest::client_ctx_ = nullptr;

TEST_F(CryptoGlueTest, Version1) { RunFullExchange(PairOptions{}, NGTCP2_PROTO_VER_V1); }

TEST_F(CryptoGlueTest, Version2ProvisionalChosenByClient) {
  PairOptions options;
  options.client_version = NGTCP2_PROTO_VER_V2_DRAFT;
  options.client_preferred_versions = {NGTCP2_PROTO_VER_V2_DRAFT, NGTCP2_PROTO_VER_V1};
  options.server_preferred_versions = {NGTCP2_PROTO_VER_V2_DRAFT, NGTCP2_PROTO_VER_V1};
  RunFullExchange(options, NGTCP2_PROTO_VER_V2_DRAFT);
}

TEST_F(CryptoGlueTest, Version1UpgradedToVersion2ByCompatibleNegotiation) {
  PairOptions options;
  options.client_version = NGTCP2_PROTO_VER_V1;
  options.client_preferred_versions = {NGTCP2_PROTO_VER_V2_DRAFT, NGTCP2_PROTO_VER_V1};
  options.server_preferred_versions = {NGTCP2_PROTO_VER_V2_DRAFT, NGTCP2_PROTO_VER_V1};
  RunFullExchange(options, NGTCP2_PROTO_VER_V2_DRAFT);
}

TEST_F(CryptoGlueTest, RetryVersion1) {
  PairOptions options;
  options.retry = true;
  RunFullExchange(options, NGTCP2_PROTO_VER_V1);
}

TEST_F(CryptoGlueTest, RetryVersion2Provisional) {
  PairOptions options;
  options.retry = true;
  options.client_version = NGTCP2_PROTO_VER_V2_DRAFT;
  options.client_preferred_versions = {NGTCP2_PROTO_VER_V2_DRAFT, NGTCP2_PROTO_VER_V1};
  options.server_preferred_versions = {NGTCP2_PROTO_VER_V2_DRAFT, NGTCP2_PROTO_VER_V1};
  RunFullExchange(options, NGTCP2_PROTO_VER_V2_DRAFT);
}

// Retry in the original version, then the switch to v2 (RFC 9369 §4.1).
TEST_F(CryptoGlueTest, RetryThenCompatibleNegotiation) {
  PairOptions options;
  options.retry = true;
  options.client_preferred_versions = {NGTCP2_PROTO_VER_V2_DRAFT, NGTCP2_PROTO_VER_V1};
  options.server_preferred_versions = {NGTCP2_PROTO_VER_V2_DRAFT, NGTCP2_PROTO_VER_V1};
  RunFullExchange(options, NGTCP2_PROTO_VER_V2_DRAFT);
}

// Meaningful only when BoringSSL sees no AES hardware — the ctest entry
// crypto_glue_test_no_aesni runs this binary with OPENSSL_ia32cap masking AES-NI.
TEST_F(CryptoGlueTest, ChaCha20Poly1305WithoutAesHardware) {
  if (EVP_has_aes_hardware()) GTEST_SKIP() << "AES hardware present; see crypto_glue_test_no_aesni";
  ASSERT_EQ(ExpectedCipherSuite(), kTlsChaCha20Poly1305Sha256);
  RunFullExchange(PairOptions{}, NGTCP2_PROTO_VER_V1);
}

// The client does not trust the server's certificate: BoringSSL's alert reaches ngtcp2
// (ngtcp2_conn_set_tls_alert) and the server sees CRYPTO_ERROR 0x100 + alert.
TEST_F(CryptoGlueTest, UntrustedCertificateClosesWithTlsAlert) {
  bssl::UniquePtr<SSL_CTX> distrustful = MakeClientCtx(nullptr);
  QuicPair pair(distrustful.get(), server_ctx_, PairOptions{});
  ASSERT_TRUE(pair.Start());
  ASSERT_TRUE(pair.Run([&] { return pair.client().failed(); }));
  EXPECT_EQ(pair.client().read_error, NGTCP2_ERR_CRYPTO);
  EXPECT_FALSE(pair.client().handshake_completed);
  const uint8_t alert = ngtcp2_conn_get_tls_alert(pair.client().conn);
  EXPECT_EQ(alert, SSL_AD_UNKNOWN_CA);
  pair.SendConnectionClose(pair.client());
  ASSERT_TRUE(pair.server_created());
  EXPECT_EQ(pair.server().read_error, NGTCP2_ERR_DRAINING);
  ngtcp2_connection_close_error ccerr;
  ngtcp2_conn_get_connection_close_error(pair.server().conn, &ccerr);
  EXPECT_EQ(ccerr.type, NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT);
  EXPECT_EQ(ccerr.error_code, NGTCP2_CRYPTO_ERROR + SSL_AD_UNKNOWN_CA);
}

// No common ALPN: the server's TLS fails with no_application_protocol (RFC 9001 §8.1).
TEST_F(CryptoGlueTest, AlpnMismatchClosesWithNoApplicationProtocol) {
  PairOptions options;
  options.client_alpn = "h3";
  QuicPair pair(client_ctx_, server_ctx_, options);
  ASSERT_TRUE(pair.Start());
  ASSERT_TRUE(pair.Run([&] { return pair.server_created() && pair.server().failed(); }));
  EXPECT_EQ(pair.server().read_error, NGTCP2_ERR_CRYPTO);
  EXPECT_EQ(ngtcp2_conn_get_tls_alert(pair.server().conn), SSL_AD_NO_APPLICATION_PROTOCOL);
  pair.SendConnectionClose(pair.server());
  ngtcp2_connection_close_error ccerr;
  ngtcp2_conn_get_connection_close_error(pair.client().conn, &ccerr);
  EXPECT_EQ(ccerr.error_code, NGTCP2_CRYPTO_ERROR + SSL_AD_NO_APPLICATION_PROTOCOL);
}

TEST_F(CryptoGlueTest, SessionLinksAndEarlyDataContext) {
  QuicPair pair(client_ctx_, server_ctx_, PairOptions{});
  ASSERT_TRUE(pair.Start());
  TlsSession* session = pair.client().tls.get();
  EXPECT_EQ(TlsSession::FromSsl(session->ssl()), session);
  EXPECT_EQ(TlsSession::FromConn(pair.client().conn), session);
  EXPECT_FALSE(session->is_server());
  EXPECT_FALSE(session->SetEarlyDataContext({}).ok());     // server-side only
  EXPECT_FALSE(session->Attach(pair.client().conn).ok());  // already attached
  ASSERT_TRUE(pair.Run([&] { return pair.server_created(); }));
  const uint8_t context[] = {1, 2, 3};
  EXPECT_TRUE(pair.server().tls->SetEarlyDataContext(context).ok());
}

}  // namespace
}  // namespace petrel::quic::crypto

namespace petrel::quic::crypto {
namespace {

// Resumption with 0-RTT: a first connection leaves a session ticket and the server's
// transport parameters; the second sends its stream data in 0-RTT packets, protected with the
// early keys installed from set_write_secret / set_read_secret(ssl_encryption_early_data).
class EarlyDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cert_ = MakeSelfSignedP256();
    server_ctx_ = MakeServerCtx(cert_, /*early_data=*/true);
    client_ctx_ = MakeClientCtx(cert_.cert.get(), &session_);
  }

  // Runs the first connection to completion and keeps its session and transport parameters.
  void IssueTicket() {
    PairOptions options;
    options.server_early_data_context = {'c', 't', 'x', '1'};
    QuicPair first(client_ctx_.get(), server_ctx_.get(), options);
    ASSERT_TRUE(first.Start());
    // The ticket arrives after the handshake (NewSessionTicket through
    // SSL_process_quic_post_handshake).
    ASSERT_TRUE(first.Run([&] { return session_ != nullptr || first.client().failed(); }));
    ASSERT_NE(session_, nullptr);
    ASSERT_TRUE(SSL_SESSION_early_data_capable(session_.get()));
    remembered_params_ = *ngtcp2_conn_get_remote_transport_params(first.client().conn);
    remembered_params_.version_info_present = 0;  // points into the first connection
    remembered_params_.version_info = {};
  }

  TestCertificate cert_;
  bssl::UniquePtr<SSL_CTX> server_ctx_;
  bssl::UniquePtr<SSL_CTX> client_ctx_;
  bssl::UniquePtr<SSL_SESSION> session_;
  ngtcp2_transport_params remembered_params_{};
};

TEST_F(EarlyDataTest, ZeroRttDataIsAccepted) {
  ASSERT_NO_FATAL_FAILURE(IssueTicket());
  bssl::UniquePtr<SSL_SESSION> session = std::move(session_);
  PairOptions options;
  options.client_session = session.get();
  options.early_remote_params = &remembered_params_;
  options.client_stream_in_early_data = true;
  options.server_early_data_context = {'c', 't', 'x', '1'};
  QuicPair pair(client_ctx_.get(), server_ctx_.get(), options);
  ASSERT_TRUE(pair.Start());
  Endpoint& client = pair.client();
  ASSERT_GE(client.stream_id, 0);
  client.to_send = Pattern(3000, 3);
  ASSERT_TRUE(pair.Run([&] {
    return client.failed() || (pair.server_created() && pair.server().received_fin &&
                               client.handshake_completed && pair.server().handshake_completed);
  }));
  ASSERT_FALSE(client.failed()) << ngtcp2_strerror(client.read_error);
  ASSERT_FALSE(pair.server().failed()) << ngtcp2_strerror(pair.server().read_error);
  EXPECT_TRUE(SSL_session_reused(client.tls->ssl()));
  EXPECT_TRUE(SSL_early_data_accepted(client.tls->ssl()));
  EXPECT_TRUE(pair.server().received_early_data);
  EXPECT_EQ(client.early_data_rejected_calls, 0);
  EXPECT_TRUE(pair.server().received == client.to_send);
}

// A server whose early data context changed (e.g. other transport parameters or SETTINGS)
// resumes but rejects 0-RTT; BoringSSL's SSL_ERROR_EARLY_DATA_REJECTED reaches ngtcp2 as
// ngtcp2_conn_early_data_rejected and the handshake completes in 1-RTT.
TEST_F(EarlyDataTest, ChangedContextRejectsZeroRtt) {
  ASSERT_NO_FATAL_FAILURE(IssueTicket());
  bssl::UniquePtr<SSL_SESSION> session = std::move(session_);
  PairOptions options;
  options.client_session = session.get();
  options.early_remote_params = &remembered_params_;
  options.client_stream_in_early_data = true;
  options.server_early_data_context = {'c', 't', 'x', '2'};
  QuicPair pair(client_ctx_.get(), server_ctx_.get(), options);
  ASSERT_TRUE(pair.Start());
  Endpoint& client = pair.client();
  client.to_send = Pattern(3000, 3);
  ASSERT_TRUE(pair.Run([&] {
    if (client.failed()) return true;
    // After the rejection, send the data again on a new 1-RTT stream.
    if (client.handshake_completed && client.stream_id < 0) {
      EXPECT_EQ(ngtcp2_conn_open_bidi_stream(client.conn, &client.stream_id, nullptr), 0);
    }
    return pair.server_created() && pair.server().received_fin;
  }));
  ASSERT_FALSE(client.failed()) << ngtcp2_strerror(client.read_error);
  EXPECT_TRUE(SSL_session_reused(client.tls->ssl()));
  EXPECT_FALSE(SSL_early_data_accepted(client.tls->ssl()));
  EXPECT_EQ(client.early_data_rejected_calls, 1);
  EXPECT_NE(ngtcp2_conn_get_early_data_rejected(client.conn), 0);
  EXPECT_FALSE(pair.server().received_early_data);
  EXPECT_TRUE(pair.server().received == client.to_send);
}

}  // namespace
}  // namespace petrel::quic::crypto
