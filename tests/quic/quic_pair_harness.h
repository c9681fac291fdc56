// Internal (tests): an ngtcp2 client and server connected in memory — each packet one writes
// is read by the other at once, no sockets, a fake clock — with BoringSSL contexts using a
// self-signed ECDSA P-256 certificate made at test time. Drives Petrel's crypto glue exactly
// as a worker will: SetCryptoCallbacks + TlsSession + PetrelQuicMethod.
#ifndef PETREL_TESTS_QUIC_QUIC_PAIR_HARNESS_H_
#define PETREL_TESTS_QUIC_QUIC_PAIR_HARNESS_H_

#include <netinet/in.h>
#include <ngtcp2/ngtcp2.h>
#include <openssl/ssl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "quic/crypto/retry.h"
#include "quic/crypto/tls_session.h"

namespace petrel::quic::crypto::testing {

struct TestCertificate {
  bssl::UniquePtr<EVP_PKEY> key;
  bssl::UniquePtr<X509> cert;
};

// A self-signed ECDSA P-256 certificate for "localhost", valid for a day.
TestCertificate MakeSelfSignedP256();

// Server context: `cert`, ALPN "hq-interop" only, Petrel's QUIC method; 0-RTT if asked.
bssl::UniquePtr<SSL_CTX> MakeServerCtx(const TestCertificate& cert, bool early_data = false);
// Client context verifying the server against `trusted` (none: verification fails). With
// `sessions`, keeps the latest session the server issues there (for resumption and 0-RTT).
bssl::UniquePtr<SSL_CTX> MakeClientCtx(X509* trusted,
                                       bssl::UniquePtr<SSL_SESSION>* sessions = nullptr);

struct Endpoint;

struct PairOptions {
  uint32_t client_version = NGTCP2_PROTO_VER_V1;
  std::vector<uint32_t> client_preferred_versions;  // empty: ngtcp2's default
  std::vector<uint32_t> server_preferred_versions;
  bool retry = false;  // the server answers the first Initial with a Retry
  std::string client_alpn = "hq-interop";
  // Resumption and 0-RTT: the session to offer, the server's transport parameters remembered
  // from the connection that issued it, and whether the client opens its stream before the
  // handshake (sending in 0-RTT). The server binds 0-RTT to `server_early_data_context`.
  SSL_SESSION* client_session = nullptr;
  const ngtcp2_transport_params* early_remote_params = nullptr;
  bool client_stream_in_early_data = false;
  std::vector<uint8_t> server_early_data_context;
  // Allocators handed to ngtcp2_conn_client_new / server_new (null: ngtcp2's default). They
  // must outlive the connections.
  const ngtcp2_mem* client_mem = nullptr;
  const ngtcp2_mem* server_mem = nullptr;
  // Loss: a packet that `drop` returns true for is written but not delivered. `index` counts
  // the packets `from` has written, from 0.
  std::function<bool(const Endpoint& from, uint64_t index)> drop;
};

class QuicPair;

// One side. Stream data: `to_send` goes out on `stream_id` up to `send_limit` octets, then FIN
// once all of it has been allowed and written.
struct Endpoint {
  QuicPair* pair = nullptr;
  bool is_server = false;
  std::unique_ptr<TlsSession> tls;
  ngtcp2_conn* conn = nullptr;
  sockaddr_in local{};
  sockaddr_in remote{};

  int64_t stream_id = -1;
  std::string to_send;
  size_t send_limit = SIZE_MAX;
  // How the unsent part of `to_send` is handed to ngtcp2_conn_writev_stream: at most
  // `max_vecs` vectors of at most `vec_size` octets each (default: one vector).
  size_t max_vecs = 1;
  size_t vec_size = SIZE_MAX;
  size_t sent = 0;
  bool fin_sent = false;
  std::string received;
  bool received_fin = false;
  bool received_early_data = false;  // some stream data came with NGTCP2_STREAM_DATA_FLAG_EARLY
  int early_data_rejected_calls = 0;

  bool handshake_completed = false;  // ngtcp2's handshake_completed callback ran
  // Client: handshake_confirmed ran (HANDSHAKE_DONE received). Only from here on may
  // ngtcp2_conn_initiate_key_update be called: before the client has left the handshake
  // state, ngtcp2 0.12.1 asserts (aborts) rather than returning NGTCP2_ERR_INVALID_STATE.
  bool handshake_confirmed = false;
  int update_key_calls = 0;
  // Packets sealed / opened with AEAD contexts that UpdateKey made (i.e. after a key update).
  uint64_t sealed_with_updated_keys = 0;
  uint64_t opened_with_updated_keys = 0;
  int read_error = 0;   // first ngtcp2_conn_read_pkt / handle_expiry failure
  int write_error = 0;  // first write failure
  uint64_t packets_received = 0;
  uint64_t packets_written = 0;

  ngtcp2_path path();
  bool failed() const { return read_error != 0 || write_error != 0; }
};

// The callbacks every test endpoint uses: Petrel's crypto callbacks (SetCryptoCallbacks) plus
// stream delivery into Endpoint, handshake and early-data flags, and encrypt/decrypt/update_key
// wrappers that count packets protected with post-key-update keys. user_data is the Endpoint.
ngtcp2_callbacks TestCallbacks(bool is_server);
// Generous flow control and 30 s idle timeout.
ngtcp2_transport_params TestTransportParams();
// A client SSL for "localhost" offering `alpn`.
bssl::UniquePtr<SSL> NewClientSsl(SSL_CTX* ctx, const std::string& alpn);

class QuicPair {
 public:
  QuicPair(SSL_CTX* client_ctx, SSL_CTX* server_ctx, PairOptions options);
  ~QuicPair();
  QuicPair(const QuicPair&) = delete;
  QuicPair& operator=(const QuicPair&) = delete;

  // Creates the client connection. False (with a gtest failure) if that fails.
  bool Start();

  // Exchanges packets until `step()` returns true (checked once per round; it may also act,
  // e.g. open a stream) or `max_rounds` pass. Returns whether `step()` became true.
  bool Run(absl::FunctionRef<bool()> step, int max_rounds = 20000);

  Endpoint& client() { return client_; }
  Endpoint& server() { return server_; }
  bool server_created() const { return server_.conn != nullptr; }
  ngtcp2_tstamp now() const { return now_; }
  bool retry_sent() const { return retry_sent_; }

  // After a TLS failure on `from`: writes its CONNECTION_CLOSE (TLS alert as CRYPTO_ERROR)
  // and delivers it to the other side.
  void SendConnectionClose(Endpoint& from);

 private:
  friend struct EndpointCallbacks;

  // Writes everything `from` has to send (at most 64 packets), delivering each to the peer.
  // Returns the number of packets written.
  int Flush(Endpoint& from);
  void Deliver(Endpoint& to, const uint8_t* data, size_t len);
  void AcceptOnServer(const uint8_t* data, size_t len);

  SSL_CTX* client_ctx_;
  SSL_CTX* server_ctx_;
  PairOptions options_;
  Endpoint client_;
  Endpoint server_;
  ngtcp2_tstamp now_ = 1 * NGTCP2_SECONDS;
  bool retry_sent_ = false;
  std::vector<uint8_t> retry_odcid_;
  std::unique_ptr<RetryPacketWriter> retry_writer_;
};

}  // namespace petrel::quic::crypto::testing

#endif  // PETREL_TESTS_QUIC_QUIC_PAIR_HARNESS_H_
