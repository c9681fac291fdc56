#include "quic/quic_pair_harness.h"

#include <arpa/inet.h>
#include <openssl/ec_key.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "gtest/gtest.h"
#include "quic/crypto/ngtcp2_callbacks.h"
#include "quic/crypto/quic_method.h"

namespace petrel::quic::crypto::testing {
namespace {

constexpr char kAlpn[] = "hq-interop";
constexpr char kHost[] = "localhost";
constexpr uint16_t kClientPort = 50000;
constexpr uint16_t kServerPort = 4433;
// Test-only Retry token: a prefix and the original DCID. Real tokens are authenticated.
constexpr char kRetryTokenPrefix[] = "petrel-test-retry:";

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

ngtcp2_cid RandomCid(size_t len) {
  ngtcp2_cid cid;
  cid.datalen = len;
  RAND_bytes(cid.data, len);
  return cid;
}

std::vector<uint8_t> AlpnWire(const std::string& protocol) {
  std::vector<uint8_t> wire(1 + protocol.size());
  wire[0] = static_cast<uint8_t>(protocol.size());
  std::memcpy(wire.data() + 1, protocol.data(), protocol.size());
  return wire;
}

// The AEAD contexts UpdateKey created, so that the tracking encrypt/decrypt callbacks can tell
// a packet protected with post-key-update keys. encrypt/decrypt get no user_data, hence a
// registry keyed by context (one test thread; entries leave when ngtcp2 frees the context).
struct UpdatedContext {
  Endpoint* owner;
  bool rx;
};
std::unordered_map<const void*, UpdatedContext>& UpdatedContexts() {
  static auto* contexts = new std::unordered_map<const void*, UpdatedContext>();
  return *contexts;
}

int SelectAlpn(SSL* /*ssl*/, const uint8_t** out, uint8_t* out_len, const uint8_t* in,
               unsigned in_len, void* /*arg*/) {
  static const std::vector<uint8_t> server_list = AlpnWire(kAlpn);
  uint8_t* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_len, server_list.data(), server_list.size(), in,
                            in_len) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;  // no_application_protocol
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

// Trampolines from ngtcp2 into the Endpoint named by user_data.
struct EndpointCallbacks {
  static Endpoint* Of(void* user_data) { return static_cast<Endpoint*>(user_data); }

  static int RecvStreamData(ngtcp2_conn* conn, uint32_t flags, int64_t stream_id, uint64_t offset,
                            const uint8_t* data, size_t datalen, void* user_data,
                            void* /*stream_user_data*/) {
    Endpoint* e = Of(user_data);
    if (e->is_server && e->stream_id < 0) e->stream_id = stream_id;  // answer on the same stream
    // Only the test's own stream is recorded (an HTTP/3 peer also opens unidirectional
    // control and QPACK streams; their bytes are consumed and dropped).
    if (stream_id == e->stream_id) {
      EXPECT_EQ(offset, e->received.size());  // ngtcp2 delivers in order, without overlap
      e->received.append(reinterpret_cast<const char*>(data), datalen);
      if ((flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0) e->received_fin = true;
      if ((flags & NGTCP2_STREAM_DATA_FLAG_EARLY) != 0) e->received_early_data = true;
    }
    ngtcp2_conn_extend_max_stream_offset(conn, stream_id, datalen);
    ngtcp2_conn_extend_max_offset(conn, datalen);
    return 0;
  }

  // ngtcp2 has dropped the streams opened in 0-RTT; the test opens a new one if it wants.
  static int EarlyDataRejected(ngtcp2_conn* /*conn*/, void* user_data) {
    Endpoint* e = Of(user_data);
    ++e->early_data_rejected_calls;
    e->stream_id = -1;
    e->sent = 0;
    e->fin_sent = false;
    return 0;
  }

  static int HandshakeCompleted(ngtcp2_conn* /*conn*/, void* user_data) {
    Of(user_data)->handshake_completed = true;
    return 0;
  }

  static int HandshakeConfirmed(ngtcp2_conn* /*conn*/, void* user_data) {
    Of(user_data)->handshake_confirmed = true;
    return 0;
  }

  static int CountingUpdateKey(ngtcp2_conn* conn, uint8_t* rx_secret, uint8_t* tx_secret,
                               ngtcp2_crypto_aead_ctx* rx_aead_ctx, uint8_t* rx_iv,
                               ngtcp2_crypto_aead_ctx* tx_aead_ctx, uint8_t* tx_iv,
                               const uint8_t* current_rx_secret, const uint8_t* current_tx_secret,
                               size_t secretlen, void* user_data) {
    Endpoint* e = Of(user_data);
    ++e->update_key_calls;
    const int rv = UpdateKey(conn, rx_secret, tx_secret, rx_aead_ctx, rx_iv, tx_aead_ctx, tx_iv,
                             current_rx_secret, current_tx_secret, secretlen, user_data);
    if (rv == 0) {
      UpdatedContexts()[rx_aead_ctx->native_handle] = {e, true};
      UpdatedContexts()[tx_aead_ctx->native_handle] = {e, false};
    }
    return rv;
  }

  static int TrackingEncrypt(uint8_t* dest, const ngtcp2_crypto_aead* aead,
                             const ngtcp2_crypto_aead_ctx* aead_ctx, const uint8_t* plaintext,
                             size_t plaintextlen, const uint8_t* nonce, size_t noncelen,
                             const uint8_t* aad, size_t aadlen) {
    const int rv =
        Encrypt(dest, aead, aead_ctx, plaintext, plaintextlen, nonce, noncelen, aad, aadlen);
    auto it = UpdatedContexts().find(aead_ctx->native_handle);
    if (rv == 0 && it != UpdatedContexts().end() && !it->second.rx) {
      ++it->second.owner->sealed_with_updated_keys;
    }
    return rv;
  }

  static int TrackingDecrypt(uint8_t* dest, const ngtcp2_crypto_aead* aead,
                             const ngtcp2_crypto_aead_ctx* aead_ctx, const uint8_t* ciphertext,
                             size_t ciphertextlen, const uint8_t* nonce, size_t noncelen,
                             const uint8_t* aad, size_t aadlen) {
    const int rv =
        Decrypt(dest, aead, aead_ctx, ciphertext, ciphertextlen, nonce, noncelen, aad, aadlen);
    auto it = UpdatedContexts().find(aead_ctx->native_handle);
    if (rv == 0 && it != UpdatedContexts().end() && it->second.rx) {
      ++it->second.owner->opened_with_updated_keys;
    }
    return rv;
  }

  static void TrackingDeleteAeadCtx(ngtcp2_conn* conn, ngtcp2_crypto_aead_ctx* aead_ctx,
                                    void* user_data) {
    UpdatedContexts().erase(aead_ctx->native_handle);
    DeleteCryptoAeadCtx(conn, aead_ctx, user_data);
  }

  static int NewConnectionId(ngtcp2_conn* /*conn*/, ngtcp2_cid* cid, uint8_t* token, size_t cidlen,
                             void* /*user_data*/) {
    return GenerateConnectionId(cid, token, cidlen, RandomConnectionId);
  }
};

TestCertificate MakeSelfSignedP256() {
  TestCertificate out;
  bssl::UniquePtr<EC_KEY> ec(EC_KEY_new_by_curve_name(NID_X9_62_prime256v1));
  EXPECT_TRUE(ec != nullptr && EC_KEY_generate_key(ec.get()) == 1);
  out.key.reset(EVP_PKEY_new());
  EXPECT_EQ(EVP_PKEY_assign_EC_KEY(out.key.get(), ec.release()), 1);

  out.cert.reset(X509_new());
  X509* x = out.cert.get();
  EXPECT_EQ(X509_set_version(x, X509_VERSION_3), 1);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const uint8_t*>(kHost), -1,
                             -1, 0);
  X509_set_issuer_name(x, name);
  X509_set_pubkey(x, out.key.get());
  X509_EXTENSION* san =
      X509V3_EXT_nconf_nid(nullptr, nullptr, NID_subject_alt_name, "DNS:localhost");
  EXPECT_NE(san, nullptr);
  X509_add_ext(x, san, -1);
  X509_EXTENSION_free(san);
  EXPECT_GT(X509_sign(x, out.key.get(), EVP_sha256()), 0);
  return out;
}

int KeepSession(SSL* ssl, SSL_SESSION* session) {
  auto* slot =
      static_cast<bssl::UniquePtr<SSL_SESSION>*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
  slot->reset(session);
  return 1;  // we own the reference now
}

bssl::UniquePtr<SSL_CTX> MakeServerCtx(const TestCertificate& cert, bool early_data) {
  bssl::UniquePtr<SSL_CTX> ctx(SSL_CTX_new(TLS_method()));
  EXPECT_TRUE(ConfigureSslCtxForQuic(ctx.get()).ok());
  EXPECT_EQ(SSL_CTX_use_certificate(ctx.get(), cert.cert.get()), 1);
  EXPECT_EQ(SSL_CTX_use_PrivateKey(ctx.get(), cert.key.get()), 1);
  SSL_CTX_set_alpn_select_cb(ctx.get(), SelectAlpn, nullptr);
  SSL_CTX_set_early_data_enabled(ctx.get(), early_data ? 1 : 0);
  return ctx;
}

bssl::UniquePtr<SSL_CTX> MakeClientCtx(X509* trusted, bssl::UniquePtr<SSL_SESSION>* sessions) {
  bssl::UniquePtr<SSL_CTX> ctx(SSL_CTX_new(TLS_method()));
  EXPECT_TRUE(ConfigureSslCtxForQuic(ctx.get()).ok());
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (trusted != nullptr) {
    EXPECT_EQ(X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), trusted), 1);
  }
  if (sessions != nullptr) {
    SSL_CTX_set_app_data(ctx.get(), sessions);
    SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL);
    SSL_CTX_sess_set_new_cb(ctx.get(), KeepSession);
    SSL_CTX_set_early_data_enabled(ctx.get(), 1);
  }
  return ctx;
}

ngtcp2_path Endpoint::path() {
  ngtcp2_path p{};
  p.local.addr = reinterpret_cast<ngtcp2_sockaddr*>(&local);
  p.local.addrlen = sizeof(local);
  p.remote.addr = reinterpret_cast<ngtcp2_sockaddr*>(&remote);
  p.remote.addrlen = sizeof(remote);
  return p;
}

bssl::UniquePtr<SSL> NewClientSsl(SSL_CTX* ctx, const std::string& alpn) {
  bssl::UniquePtr<SSL> ssl(SSL_new(ctx));
  const std::vector<uint8_t> wire = AlpnWire(alpn);
  EXPECT_EQ(SSL_set_alpn_protos(ssl.get(), wire.data(), wire.size()), 0);  // 0 is success
  EXPECT_EQ(SSL_set_tlsext_host_name(ssl.get(), kHost), 1);
  EXPECT_EQ(SSL_set1_host(ssl.get(), kHost), 1);
  return ssl;
}

QuicPair::QuicPair(SSL_CTX* client_ctx, SSL_CTX* server_ctx, PairOptions options)
    : client_ctx_(client_ctx), server_ctx_(server_ctx), options_(std::move(options)) {
  client_.pair = this;
  server_.pair = this;
  server_.is_server = true;
  client_.local = Loopback(kClientPort);
  client_.remote = Loopback(kServerPort);
  server_.local = Loopback(kServerPort);
  server_.remote = Loopback(kClientPort);
}

QuicPair::~QuicPair() {
  // Connections first: TlsSession must outlive every ngtcp2 call (tls_session.h).
  ngtcp2_conn_del(client_.conn);
  ngtcp2_conn_del(server_.conn);
}

ngtcp2_callbacks TestCallbacks(bool is_server) {
  ngtcp2_callbacks cb{};
  SetCryptoCallbacks(&cb, is_server);
  cb.recv_stream_data = EndpointCallbacks::RecvStreamData;
  cb.handshake_completed = EndpointCallbacks::HandshakeCompleted;
  cb.handshake_confirmed = EndpointCallbacks::HandshakeConfirmed;
  cb.update_key = EndpointCallbacks::CountingUpdateKey;
  cb.encrypt = EndpointCallbacks::TrackingEncrypt;
  cb.decrypt = EndpointCallbacks::TrackingDecrypt;
  cb.delete_crypto_aead_ctx = EndpointCallbacks::TrackingDeleteAeadCtx;
  cb.get_new_connection_id = EndpointCallbacks::NewConnectionId;
  if (!is_server) cb.early_data_rejected = EndpointCallbacks::EarlyDataRejected;
  return cb;
}

ngtcp2_transport_params TestTransportParams() {
  ngtcp2_transport_params params;
  ngtcp2_transport_params_default(&params);
  params.initial_max_data = 4 << 20;
  params.initial_max_stream_data_bidi_local = 1 << 20;
  params.initial_max_stream_data_bidi_remote = 1 << 20;
  params.initial_max_stream_data_uni = 1 << 20;
  params.initial_max_streams_bidi = 8;
  params.initial_max_streams_uni = 8;
  params.max_idle_timeout = 30 * NGTCP2_SECONDS;
  return params;
}

bool QuicPair::Start() {
  ngtcp2_settings settings;
  ngtcp2_settings_default(&settings);
  settings.initial_ts = now_;
  if (!options_.client_preferred_versions.empty()) {
    settings.preferred_versions = options_.client_preferred_versions.data();
    settings.preferred_versionslen = options_.client_preferred_versions.size();
    settings.other_versions = options_.client_preferred_versions.data();
    settings.other_versionslen = options_.client_preferred_versions.size();
  }
  const ngtcp2_transport_params params = TestTransportParams();

  bssl::UniquePtr<SSL> ssl = NewClientSsl(client_ctx_, options_.client_alpn);
  if (options_.client_session != nullptr) {
    EXPECT_EQ(SSL_set_session(ssl.get(), options_.client_session), 1);
  }
  absl::StatusOr<std::unique_ptr<TlsSession>> tls = TlsSession::Create(std::move(ssl), false);
  if (!tls.ok()) {
    ADD_FAILURE() << tls.status();
    return false;
  }
  client_.tls = std::move(*tls);

  const ngtcp2_cid dcid = RandomCid(18);
  const ngtcp2_cid scid = RandomCid(16);
  const ngtcp2_callbacks cb = TestCallbacks(false);
  const ngtcp2_path path = client_.path();
  const int rv = ngtcp2_conn_client_new(&client_.conn, &dcid, &scid, &path, options_.client_version,
                                        &cb, &settings, &params, options_.client_mem, &client_);
  if (rv != 0) {
    ADD_FAILURE() << "ngtcp2_conn_client_new: " << ngtcp2_strerror(rv);
    return false;
  }
  const absl::Status attached = client_.tls->Attach(client_.conn);
  EXPECT_TRUE(attached.ok()) << attached;
  if (options_.early_remote_params != nullptr) {
    ngtcp2_conn_set_early_remote_transport_params(client_.conn, options_.early_remote_params);
  }
  if (options_.client_stream_in_early_data) {
    const int opened = ngtcp2_conn_open_bidi_stream(client_.conn, &client_.stream_id, nullptr);
    EXPECT_EQ(opened, 0) << ngtcp2_strerror(opened);
  }
  return attached.ok();
}

void QuicPair::AcceptOnServer(const uint8_t* data, size_t len) {
  ngtcp2_pkt_hd hd;
  const int accepted = ngtcp2_accept(&hd, data, len);
  if (accepted != 0) {
    ADD_FAILURE() << "ngtcp2_accept: " << ngtcp2_strerror(accepted);
    return;
  }
  const std::string prefix = kRetryTokenPrefix;
  if (options_.retry && hd.token.len == 0) {
    if (retry_writer_ == nullptr) {
      absl::StatusOr<RetryPacketWriter> writer = RetryPacketWriter::Create();
      ASSERT_TRUE(writer.ok()) << writer.status();
      retry_writer_ = std::make_unique<RetryPacketWriter>(std::move(*writer));
    }
    std::string token = prefix;
    token.append(reinterpret_cast<const char*>(hd.dcid.data), hd.dcid.datalen);
    const ngtcp2_cid retry_scid = RandomCid(16);
    uint8_t buf[256];
    absl::StatusOr<size_t> n = retry_writer_->Write(
        hd.version, hd.scid, retry_scid, hd.dcid,
        absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(token.data()), token.size()), buf);
    ASSERT_TRUE(n.ok()) << n.status();
    retry_sent_ = true;
    Deliver(client_, buf, *n);
    return;
  }

  ngtcp2_settings settings;
  ngtcp2_settings_default(&settings);
  settings.initial_ts = now_;
  if (!options_.server_preferred_versions.empty()) {
    settings.preferred_versions = options_.server_preferred_versions.data();
    settings.preferred_versionslen = options_.server_preferred_versions.size();
  }
  ngtcp2_transport_params params = TestTransportParams();
  params.stateless_reset_token_present = 1;
  RAND_bytes(params.stateless_reset_token, sizeof(params.stateless_reset_token));
  if (options_.retry) {
    const std::string token(reinterpret_cast<const char*>(hd.token.base), hd.token.len);
    ASSERT_EQ(token.rfind(prefix, 0), 0u) << "not our Retry token";
    ngtcp2_cid_init(&params.original_dcid,
                    reinterpret_cast<const uint8_t*>(token.data()) + prefix.size(),
                    token.size() - prefix.size());
    params.retry_scid = hd.dcid;
    params.retry_scid_present = 1;
    settings.token = hd.token;  // validated: the client's address is proven
  } else {
    params.original_dcid = hd.dcid;
  }

  absl::StatusOr<std::unique_ptr<TlsSession>> tls =
      TlsSession::Create(bssl::UniquePtr<SSL>(SSL_new(server_ctx_)), true);
  ASSERT_TRUE(tls.ok()) << tls.status();
  server_.tls = std::move(*tls);
  if (!options_.server_early_data_context.empty()) {
    ASSERT_TRUE(server_.tls->SetEarlyDataContext(options_.server_early_data_context).ok());
  }
  const ngtcp2_cid scid = RandomCid(16);
  const ngtcp2_callbacks cb = TestCallbacks(true);
  const ngtcp2_path path = server_.path();
  const int rv = ngtcp2_conn_server_new(&server_.conn, &hd.scid, &scid, &path, hd.version, &cb,
                                        &settings, &params, options_.server_mem, &server_);
  ASSERT_EQ(rv, 0) << "ngtcp2_conn_server_new: " << ngtcp2_strerror(rv);
  const absl::Status attached = server_.tls->Attach(server_.conn);
  ASSERT_TRUE(attached.ok()) << attached;
  Deliver(server_, data, len);
}

void QuicPair::Deliver(Endpoint& to, const uint8_t* data, size_t len) {
  if (&to == &server_ && server_.conn == nullptr) {
    AcceptOnServer(data, len);
    return;
  }
  if (to.conn == nullptr || to.failed()) return;
  const ngtcp2_path path = to.path();
  const ngtcp2_pkt_info pi{};
  const int rv = ngtcp2_conn_read_pkt(to.conn, &path, &pi, data, len, now_);
  if (rv != 0) {
    to.read_error = rv;
    return;
  }
  ++to.packets_received;
}

int QuicPair::Flush(Endpoint& from) {
  if (from.conn == nullptr || from.failed()) return 0;
  Endpoint& to = &from == &client_ ? server_ : client_;
  int packets = 0;
  bool stream_blocked = false;
  for (int i = 0; i < 64; ++i) {
    uint8_t buf[1500];
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi{};
    ngtcp2_ssize consumed = -1;
    const size_t allowed = std::min(from.send_limit, from.to_send.size());
    const bool all_allowed = allowed == from.to_send.size();
    const bool with_stream = from.stream_id >= 0 && !from.fin_sent && !stream_blocked &&
                             (from.sent < allowed || all_allowed);
    ngtcp2_ssize n;
    bool fin = false;
    if (with_stream) {
      std::vector<ngtcp2_vec> data;
      size_t end = from.sent;
      while (end < allowed && data.size() < from.max_vecs) {
        const size_t len = std::min(from.vec_size, allowed - end);
        data.push_back({reinterpret_cast<uint8_t*>(from.to_send.data()) + end, len});
        end += len;
      }
      // FIN only with the last octets: ngtcp2 ends the stream after the data it is given.
      fin = all_allowed && end == allowed;
      n = ngtcp2_conn_writev_stream(from.conn, &ps.path, &pi, buf, sizeof(buf), &consumed,
                                    fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0, from.stream_id,
                                    data.data(), data.size(), now_);
    } else {
      n = ngtcp2_conn_write_pkt(from.conn, &ps.path, &pi, buf, sizeof(buf), now_);
    }
    if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
      stream_blocked = true;
      continue;
    }
    if (n < 0) {
      from.write_error = static_cast<int>(n);
      return packets;
    }
    if (consumed >= 0) {
      from.sent += static_cast<size_t>(consumed);
      if (fin && from.sent == from.to_send.size()) from.fin_sent = true;
    }
    if (n == 0) break;
    ++packets;
    const uint64_t index = from.packets_written++;
    if (options_.drop && options_.drop(from, index)) continue;
    Deliver(to, buf, static_cast<size_t>(n));
  }
  return packets;
}

bool QuicPair::Run(absl::FunctionRef<bool()> step, int max_rounds) {
  for (int round = 0; round < max_rounds; ++round) {
    if (step()) return true;
    const int written = Flush(client_) + Flush(server_);
    if (written > 0) {
      now_ += 50 * NGTCP2_MICROSECONDS;
      continue;
    }
    // Quiet: move the clock to the next timer (ACK delay, PTO, ...), but never more than
    // 10 ms at once, so that the idle timeout cannot fire while a test waits for a condition.
    ngtcp2_tstamp next = UINT64_MAX;
    for (Endpoint* e : {&client_, &server_}) {
      if (e->conn != nullptr && !e->failed())
        next = std::min(next, ngtcp2_conn_get_expiry(e->conn));
    }
    now_ = std::min(std::max(now_ + NGTCP2_MICROSECONDS, next), now_ + 10 * NGTCP2_MILLISECONDS);
    for (Endpoint* e : {&client_, &server_}) {
      if (e->conn == nullptr || e->failed()) continue;
      const int rv = ngtcp2_conn_handle_expiry(e->conn, now_);
      if (rv != 0) e->read_error = rv;
    }
  }
  return step();
}

void QuicPair::SendConnectionClose(Endpoint& from) {
  Endpoint& to = &from == &client_ ? server_ : client_;
  ngtcp2_connection_close_error ccerr;
  ngtcp2_connection_close_error_default(&ccerr);
  const uint8_t alert = ngtcp2_conn_get_tls_alert(from.conn);
  if (alert != 0) {
    ngtcp2_connection_close_error_set_transport_error_tls_alert(&ccerr, alert, nullptr, 0);
  } else {
    ngtcp2_connection_close_error_set_transport_error_liberr(&ccerr, from.read_error, nullptr, 0);
  }
  uint8_t buf[1500];
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info pi{};
  const ngtcp2_ssize n =
      ngtcp2_conn_write_connection_close(from.conn, &ps.path, &pi, buf, sizeof(buf), &ccerr, now_);
  ASSERT_GT(n, 0) << ngtcp2_strerror(static_cast<int>(n));
  Deliver(to, buf, static_cast<size_t>(n));
}

}  // namespace petrel::quic::crypto::testing
