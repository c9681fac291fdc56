// Public: QuicClient, one QUIC client connection on its own UDP socket and event loop, with
// session resumption, 0-RTT, key update and migration.
#ifndef PETREL_QUIC_QUIC_CLIENT_H_
#define PETREL_QUIC_QUIC_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/socket_address.h"
#include "petrel/quic/quic_connection.h"

namespace petrel {

struct QuicClientConfig {
  SocketAddress server;
  SocketAddress local;                    // empty: the wildcard of the server's family, any port
  std::string server_name = "localhost";  // SNI and the name the certificate must match
  std::vector<std::string> alpn = {"hq-interop"};
  bool verify_peer = true;  // off: accept any certificate (testing only)
  std::string ca_file;      // trust these CAs (PEM); empty: the system's store
  // Resumption: what on_session gave on an earlier connection. With both set and early_data,
  // streams opened in Connect()'s before_first_flight send their data in 0-RTT with the
  // ClientHello.
  std::string session;
  std::string transport_params;
  bool early_data = true;
  QuicTransportLimits limits;
  // The version of the first Initial, and the others offered for compatible version
  // negotiation (RFC 9368); empty: every version Petrel speaks.
  uint32_t version = kQuicVersion1;
  std::vector<uint32_t> other_versions;
  // Move to the server's preferred_address (RFC 9000 §9.6) when it offers one, once the
  // handshake is confirmed; kImmediate moves from a new local port.
  bool use_preferred_address = true;
  QuicMigration preferred_address_move = QuicMigration::kProbeFirst;
  CongestionControl cc = CongestionControl::kCubic;
  std::string qlog_dir;
  std::string key_log_file;
  // Run the client on this loop (not owned; it must outlive the client) instead of one of its
  // own: many clients can share one thread. The owner runs the loop; Run() must not be used,
  // and the end of the connection does not stop the loop.
  EventLoop* loop = nullptr;
  // Testing only: drop this fraction of the datagrams received and of those sent.
  double test_loss = 0;
};

// Callbacks run on the client's loop thread (the one calling Run()).
struct QuicClientCallbacks {
  std::function<void(QuicConnection&)> on_connected;  // handshake completed
  std::function<void(QuicConnection&, int64_t stream, absl::string_view data, bool fin)>
      on_stream_data;
  std::function<void(QuicConnection&, int64_t stream, uint64_t app_error)> on_stream_reset;
  std::function<void(QuicConnection&, int64_t stream, uint64_t app_error)> on_stream_stop_sending;
  // The server declined 0-RTT: the streams opened before the handshake are gone (their ids are
  // reused); open them again (and resend) once on_connected runs.
  std::function<void(QuicConnection&)> on_early_data_rejected;
  std::function<void(QuicConnection&, int64_t stream)> on_stream_writable;
  std::function<void(QuicConnection&, int64_t stream)> on_stream_closed;
  // The server allows more streams: a good moment to retry a refused Open*Stream().
  std::function<void(QuicConnection&)> on_streams_available;
  // A session ticket and the server's transport parameters: store both for resumption.
  std::function<void(std::string session, std::string transport_params)> on_session;
  // The connection is over (closed by either side, idle timeout, stateless reset).
  std::function<void()> on_closed;
};

class QuicClient {
 public:
  static absl::StatusOr<std::unique_ptr<QuicClient>> Create(QuicClientConfig config,
                                                            QuicClientCallbacks callbacks);
  ~QuicClient();
  QuicClient(const QuicClient&) = delete;
  QuicClient& operator=(const QuicClient&) = delete;

  // Creates the connection and sends the first flight. Loop thread (or before Run()).
  // `before_first_flight`, if set, runs once the connection exists and before anything is
  // sent: when resuming with 0-RTT, streams opened and written there travel with the
  // ClientHello.
  absl::Status Connect(absl::AnyInvocable<void(QuicConnection&)> before_first_flight = nullptr);
  // Runs the loop until the connection is over or Stop() is called (own loop only).
  void Run();
  // Closes the connection at once (one CONNECTION_CLOSE with app error 0, no closing period;
  // also cuts short a closing already under way), then on_closed runs and Run() returns. Safe
  // from any thread; with a shared loop, call it on the loop thread or before the loop runs.
  void Stop();

  // The connection, valid from Connect() until the client is destroyed. Loop thread.
  QuicConnection* connection();
  EventLoop* loop();

  // Loop thread. False until the handshake is confirmed.
  bool InitiateKeyUpdate();
  using Migration = QuicMigration;
  // Binds a new socket at `local` and migrates to it. Loop thread.
  absl::Status MigrateTo(const SocketAddress& local, Migration how = Migration::kProbeFirst);

  // Facts about the connection, loop thread (or after Run() returned).
  bool handshake_completed() const;
  bool session_reused() const;
  bool early_data_accepted() const;
  // The ngtcp2 error that ended the connection (e.g. draining after a stateless reset), 0 if
  // none was seen.
  int close_error() const;
  // The error code the server's CONNECTION_CLOSE carried (a transport error, or the application's
  // such as an HTTP/3 error code), 0 if it sent none.
  uint64_t peer_close_code() const;
  SocketAddress local_address() const;
  // The server address the connection uses now (it changes after a move to a preferred address).
  SocketAddress remote_address() const;
  bool closed() const;

  class Impl;

 private:
  explicit QuicClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace petrel

#endif  // PETREL_QUIC_QUIC_CLIENT_H_
