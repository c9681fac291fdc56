// Public: QuicServer, a QUIC server — a master thread routing datagrams by connection ID to
// worker threads that own the connections (or one loop for everything when workers = 0).
#ifndef PETREL_QUIC_QUIC_SERVER_H_
#define PETREL_QUIC_QUIC_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "petrel/common/clock.h"
#include "petrel/common/socket_address.h"
#include "petrel/quic/quic_connection.h"

namespace petrel {

class MetricsRegistry;

enum class QuicRetryPolicy : uint8_t {
  kNever,
  kAlways,  // every new connection proves its address with a Retry first
  kAuto,    // Retry once a worker has more than retry_threshold unfinished handshakes
};

// A certificate that handshakes whose server name (SNI) matches one of `names` present instead of
// the server's default one. Names are exact ("a.example") or one-label wildcards ("*.example").
struct QuicNamedCertificate {
  std::vector<std::string> names;
  std::string certificate_pem;  // chain, leaf first
  std::string key_pem;
};

struct QuicServerConfig {
  std::vector<SocketAddress> listen;  // one UDP socket each; port 0 picks one
  // Bound UDP sockets (a service manager's, LISTEN_FDS), each used instead of binding the listen
  // address it is bound to (also by SetListenAddresses). The server uses duplicates; the caller
  // keeps these open for as long as the server may need them. One bound to no listen address
  // fails Create.
  std::vector<int> listen_fds;
  // IPv6 listen addresses take IPv6 only (false: "::" takes IPv4 too, as mapped addresses).
  bool ipv6_only = true;
  size_t workers = 0;  // 0: one loop does everything, on the Run() thread
  // PEM files; both empty: the PEM text below, or if that is empty too, a self-signed
  // certificate for `self_signed_names`.
  std::string certificate_file;
  std::string key_file;
  std::string certificate_pem;  // chain, leaf first
  std::string key_pem;
  std::vector<std::string> self_signed_names = {"localhost", "127.0.0.1"};
  // Chosen by SNI; the certificate above serves every other handshake.
  std::vector<QuicNamedCertificate> named_certificates;
  std::vector<std::string> alpn = {"hq-interop"};
  QuicTransportLimits limits;
  QuicRetryPolicy retry = QuicRetryPolicy::kNever;
  size_t retry_threshold = 64;
  bool early_data = true;    // accept 0-RTT on resumed sessions
  std::string qlog_dir;      // a qlog file per connection, named by its ODCID; empty: off
  std::string key_log_file;  // SSLKEYLOGFILE format; empty: off
  CongestionControl cc = CongestionControl::kCubic;
  // QUIC versions in order of preference. A client whose first Initial uses one version and
  // offers another the server prefers is moved to it by compatible version negotiation
  // (RFC 9368). Empty: v1, then v2.
  std::vector<uint32_t> versions;
  // Optional preferred_address (RFC 9000 §9.6): the server also listens here and offers the
  // address, with a fresh CID, to every client, which may move to it once the handshake is
  // confirmed. Port 0 picks one. Empty: none.
  SocketAddress preferred_address;
  // Send many packets of a connection per sendmsg (UDP_SEGMENT) where the kernel allows; false
  // sends one datagram per call (for comparison, or for paths that cannot segment).
  bool gso = true;
  // SO_SNDBUF of the UDP sockets (Linux doubles it and caps it at net.core.wmem_max). When it is
  // full a connection keeps the packets the socket refused and sends them, in order, once the
  // socket drains (EPOLLOUT); nothing is dropped.
  int socket_send_buffer_bytes = 4 << 20;
  // 32 octets shared by every server process behind one address, so that any of them can
  // reset another's connections; empty: random per process.
  std::string stateless_reset_secret;
  // The application error code of the CONNECTION_CLOSE the server sends when it closes a
  // connection on Stop() (HTTP/3: H3_NO_ERROR, 0x100).
  uint64_t shutdown_error_code = 0;
  // Once a worker's open connections fall to half of their peak (or to none), it waits this
  // long and gives the memory the closed ones freed back to the system (malloc_trim): glibc
  // keeps freed memory otherwise, and a server that once held many connections would keep
  // their RSS for good. The trim takes the allocator's locks for a few milliseconds on a large
  // heap, hence the wait and a peak of at least 32 connections. Zero: never.
  std::chrono::milliseconds memory_trim_delay{1000};
  // Testing only: drop this fraction of the datagrams received and of those sent.
  double test_loss = 0;
  // Per-worker and master counters (datagrams in/out, drops by reason, ring depth,
  // connections, handshakes) go here; not owned, must outlive the server; null: none.
  MetricsRegistry* metrics = nullptr;
};

// Callbacks run on the connection's worker thread; the QuicConnection& is valid only there and
// only during the callback (see quic_connection.h). Unset callbacks are skipped.
struct QuicServerCallbacks {
  std::function<void(QuicConnection&)> on_connection;  // handshake completed
  // Data in order; `fin` marks the end of the peer's side. Return credit with Consume().
  std::function<void(QuicConnection&, int64_t stream, absl::string_view data, bool fin)>
      on_stream_data;
  std::function<void(QuicConnection&, int64_t stream, uint64_t app_error)> on_stream_reset;
  // The peer asked us to stop sending on `stream` (STOP_SENDING); the transport answers with
  // RESET_STREAM by itself.
  std::function<void(QuicConnection&, int64_t stream, uint64_t app_error)> on_stream_stop_sending;
  // A Write() was refused because the stream's buffer was full, and now there is room.
  std::function<void(QuicConnection&, int64_t stream)> on_stream_writable;
  // The peer acknowledged the next `bytes` written on `stream` (Write or WriteRef), in stream
  // order: the first `bytes` of what WriteRef handed over and was not yet counted off are free.
  std::function<void(QuicConnection&, int64_t stream, uint64_t bytes)> on_stream_data_acked;
  std::function<void(QuicConnection&, int64_t stream)> on_stream_closed;
  std::function<void(QuicConnection&)> on_connection_closed;
  // Graceful Stop(): on_shutdown runs once for each connection when the stop begins (an HTTP/3
  // engine sends GOAWAY here); the connection is then closed as soon as is_idle says so (unset:
  // when it has no open stream), or at the deadline. is_idle is asked right after on_shutdown
  // and after each stream of the connection closes, not on a timer: a connection whose
  // idleness does not follow its streams is closed at the deadline.
  std::function<void(QuicConnection&)> on_shutdown;
  std::function<bool(QuicConnection&)> is_idle;
};

// Counters, summed over workers; read them after Run() returned.
struct QuicServerStats {
  uint64_t connections_accepted = 0;
  uint64_t unknown_connection_drops = 0;  // by workers: no connection for a routed CID
  uint64_t retries_sent = 0;
  uint64_t stateless_resets_sent = 0;  // by workers and the master
  uint64_t master_drops = 0;           // every DropReason of the master
  // Of those: datagrams that would have started a connection on an address the server no
  // longer listens on (SetListenAddresses), while it still served that address's connections.
  uint64_t not_listening_drops = 0;
  // Of those: first flights of new connections dropped while the workers held three quarters
  // of the datagram buffers (they were behind); their clients send them again. Load shed so
  // that the connections already served do not lose packets.
  uint64_t overload_drops = 0;
  // Per worker, in worker order (one entry with workers = 0).
  std::vector<uint64_t> connections_per_worker;
  // Datagrams for a known connection whose CID names another worker than the one that got them
  // (the master's routing is wrong if this is not 0).
  uint64_t misrouted_datagrams = 0;
  // Paths (new client addresses after migration or NAT rebinding, the preferred address)
  // validated successfully.
  uint64_t paths_validated = 0;
  // Workers' sends the socket refused for a full buffer (each kept and sent later), and all
  // their sendmsg calls (refused ones included). A connection's packets are staged and leave
  // with the other connections' of the same loop turn in one sendmmsg call; sendmsg is for the
  // rest (doubled handshake probes, CONNECTION_CLOSE, packets kept for a full socket).
  uint64_t sends_blocked = 0;
  uint64_t sendmsg_calls = 0;
  uint64_t sendmmsg_calls = 0;
  uint64_t send_wakeups = 0;  // times a full socket was seen writable again
  uint64_t memory_trims = 0;  // malloc_trim calls after connections closed (memory_trim_delay)
  // Connections closed with a transport error of the server's (petrel_quic_transport_errors_total).
  uint64_t transport_errors = 0;
};

class QuicServer {
 public:
  // Binds the sockets and prepares TLS; nothing runs until Run(). Call from the thread that
  // will call Run().
  static absl::StatusOr<std::unique_ptr<QuicServer>> Create(QuicServerConfig config,
                                                            QuicServerCallbacks callbacks);
  ~QuicServer();
  QuicServer(const QuicServer&) = delete;
  QuicServer& operator=(const QuicServer&) = delete;

  // The bound addresses (with the real ports): the listen addresses in the order last given
  // (QuicServerConfig::listen or SetListenAddresses), then the preferred address if one is
  // configured. Addresses dropped from the list are not in it, also while their connections
  // are still served. Safe from any thread.
  std::vector<SocketAddress> local_addresses() const;

  // Reconfiguration while the server runs (petrel-server's SIGHUP reload); also before Run().
  // Both wait for the server's threads to take the change, so call them from any thread but
  // the server's own — not from its callbacks: there they fail (FailedPrecondition) instead of
  // waiting for themselves. One at a time; after Stop() began (or Run() returned) they fail
  // with FailedPrecondition and change nothing.
  //
  // Listens on exactly `listen` (the preferred address is not part of it and stays as it is):
  //   - an address already listened on (same address and port; a port-0 request matches
  //     nothing) keeps its socket and its connections;
  //   - a new one gets a socket set up like the others, ready on every worker before the first
  //     datagram is read from it;
  //   - a dropped one takes no new connection from now on (counted in not_listening_drops and
  //     petrel_quic_master_drops_total{reason="not_listening"}) but serves its connections
  //     until they end; then its socket is closed and the port is free. A connection counts
  //     against the address its handshake began on, also after it moved to another (the
  //     preferred address, say). A dropped address can be listed again once its socket is
  //     closed; until then binding it fails.
  // All or nothing: if an address cannot be bound, an error and no change.
  absl::Status SetListenAddresses(std::vector<SocketAddress> listen);
  // Connections accepted from now on use `limits`; open ones keep theirs. 0-RTT is accepted
  // only from sessions made under the same limits, so tickets issued before a change of
  // streams or windows resume without it.
  absl::Status SetTransportLimits(const QuicTransportLimits& limits);

  // Serves until Stop() has finished: blocks the calling thread, which runs the master (and,
  // with workers = 0, the connections). At most once.
  absl::Status Run();
  // Graceful stop, safe from any thread (also before Run, or from a callback): accepts no new
  // connections, closes each connection once its open streams are done or at `deadline` from
  // now, then Run() joins the workers and returns.
  void Stop(Duration deadline = std::chrono::seconds(5));

  QuicServerStats stats() const;

  // The default certificate chain and key (PEM) and the named certificates that handshakes from
  // now on present; connections already up keep theirs, session tickets stay valid. All checked
  // first: on any error nothing changes. Safe from any thread.
  absl::Status ReplaceCertificates(const std::string& certificate_pem, const std::string& key_pem,
                                   const std::vector<QuicNamedCertificate>& named = {});

  class Impl;

 private:
  explicit QuicServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace petrel

#endif  // PETREL_QUIC_QUIC_SERVER_H_
