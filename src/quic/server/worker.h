// Internal: a QUIC server worker (DESIGN §3): the PacketSink the master routes datagrams to. It
// owns its connections, finds them by connection ID, accepts new ones (Retry and address tokens),
// issues and retires CIDs of its own worker id, and answers unknown CIDs of our layout with a
// stateless reset.
//
// Thread: everything runs on the worker's loop thread, except construction and Attach, which
// run before the loop starts (or while the loop is not running: the caller then has it alone).
// Ownership: the worker owns each Connection (unique_ptr in entries_); the CID map only points.
#ifndef PETREL_QUIC_SERVER_WORKER_H_
#define PETREL_QUIC_SERVER_WORKER_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/timer.h"
#include "quic/cid/server_cid.h"
#include "quic/cid/stateless_reset.h"
#include "quic/connection/connection.h"
#include "quic/crypto/retry.h"
#include "quic/dispatch/master.h"
#include "quic/dispatch/packet_sink.h"
#include "quic/stateless/stateless_responder.h"
#include "quic/tls/tls_context.h"
#include "quic/token/address_token.h"

namespace petrel::quic {

enum class RetryPolicy : uint8_t { kNever, kAlways, kAuto };

struct WorkerConfig {
  uint8_t worker_id = 0;
  ConnectionSettings connection;  // its limits change with SetConnectionLimits
  RetryPolicy retry = RetryPolicy::kNever;
  size_t retry_threshold = 64;  // kAuto: unfinished handshakes on this worker before Retry
  StatelessResetKey reset_key{};
  double resets_per_second = 200;
  size_t reset_burst = 50;
  std::chrono::milliseconds retry_token_lifetime{10'000};
  std::chrono::milliseconds new_token_lifetime{24 * 3600 * 1000};
  // Shared, immutable, thread-safe; owned by the server.
  const TlsServerContext* tls = nullptr;
  const AddressTokenCodec* tokens = nullptr;
  const crypto::RetryPacketWriter* retry_writer = nullptr;
  std::vector<uint8_t> early_data_context;  // empty: no 0-RTT
  UdpSenderOptions sender_options;          // test loss hook
  // The master's socket of the preferred address (QuicServerConfig::preferred_address).
  std::optional<size_t> preferred_socket;
  // Called on the worker's thread when the worker has released a socket it was told to
  // retire (RetireSocket): no connection accepted on it is left and the worker's sender for
  // it is closed. Null: nobody needs to know.
  std::function<void(size_t socket_index)> on_socket_released;
  uint64_t shutdown_error_code = 0;  // app error of the closes Shutdown() makes
  // QuicServerConfig::memory_trim_delay; zero: never trim.
  std::chrono::milliseconds memory_trim_delay{1000};
  MetricsRegistry* metrics = nullptr;  // series labelled worker=<id>; not owned; null: none
};

class Worker final : public PacketSink, public ConnectionHost {
 public:
  // `loop` and `app` are not owned and must outlive the worker.
  Worker(EventLoop* loop, WorkerConfig config, ConnectionObserver* app);
  ~Worker() override;

  // Takes the master's sockets (one UdpSender each) and CID layout. Before packets flow.
  void Attach(const Master& master);

  // Listen sockets that come and go while the server runs (QuicServer::SetListenAddresses).
  // Loop thread.
  //
  // A sender for the master's socket `index` (the next index; the master reads the socket only
  // after every worker has one). `socket` must stay open until the worker has released it.
  void AddSocket(size_t index, const UdpSocket& socket);
  // Accepts no connection on socket `index` any more; the connections accepted on it go on.
  // Once none is left, the sender is closed and WorkerConfig::on_socket_released runs. A
  // connection counts against the socket its first Initial came on, also after it moved to
  // another address (the preferred one, say).
  void RetireSocket(size_t index);
  // Closes the sender of a socket the master never took (the addition was refused), without
  // telling anyone.
  void ForgetSocket(size_t index);
  // Connections accepted from now on use `limits` and accept 0-RTT only for tickets issued
  // under `early_data_context` (empty: no 0-RTT); open ones keep theirs.
  void SetConnectionLimits(const QuicTransportLimits& limits,
                           std::vector<uint8_t> early_data_context);

  void OnPackets(absl::Span<const ReceivedPacket> packets) override;

  // Graceful shutdown: stop accepting, close each connection once it has no open stream and
  // the peer has acknowledged everything sent (or at `deadline`), then call `done` once every
  // connection is gone. Loop thread. Event-driven: a connection is asked whether it is done
  // when the stop begins, after each of its streams closes and after each packet it reads;
  // one timer, at the deadline, closes the rest.
  void Shutdown(TimePoint deadline, std::function<void()> done);

  size_t connection_count() const { return entries_.size(); }
  uint64_t unknown_connection_drops() const { return unknown_drops_; }
  uint64_t retries_sent() const { return retries_sent_; }
  uint64_t accepted() const { return accepted_; }
  uint64_t stateless_resets_sent() const { return resets_sent_; }
  uint64_t misrouted_datagrams() const { return misrouted_; }
  uint64_t paths_validated() const { return paths_validated_; }
  uint64_t memory_trims() const { return memory_trims_; }
  uint64_t transport_errors() const { return transport_errors_; }
  uint64_t sends_blocked() const;  // summed over this worker's senders
  uint64_t sendmsg_calls() const;
  uint64_t sendmmsg_calls() const;  // of the batches staged in loop turns
  uint64_t send_wakeups() const;

  // ConnectionHost.
  bool IssueConnectionId(Connection& conn, absl::Span<uint8_t> cid, uint8_t* token) override;
  void RetireConnectionId(Connection& conn, absl::Span<const uint8_t> cid) override;
  void OnHandshakeCompleted(Connection& conn) override;
  void OnClosing(Connection& conn) override;
  void OnPathValidated(Connection& conn, bool success) override;
  void OnTransportError(Connection& conn, int liberr) override;
  UdpSender* SenderFor(const SocketAddress& local) override;
  void Release(Connection& conn) override;
  void OnMaybeIdle(Connection& conn) override;

 private:
  struct CidKey {
    uint8_t len = 0;
    std::array<uint8_t, 20> data{};
    static CidKey Of(absl::Span<const uint8_t> cid);
    friend bool operator==(const CidKey& a, const CidKey& b) {
      return a.len == b.len && std::equal(a.data.begin(), a.data.begin() + a.len, b.data.begin());
    }
    template <typename H>
    friend H AbslHashValue(H h, const CidKey& k) {
      return H::combine_contiguous(std::move(h), k.data.data(), k.len);
    }
  };
  // Where a connection is, for the retry threshold and the petrel_connections gauges.
  enum class Phase : uint8_t { kHandshake, kEstablished, kClosing, kCount };
  struct Entry {
    std::unique_ptr<Connection> conn;
    std::vector<CidKey> cids;
    Phase phase = Phase::kHandshake;  // kHandshake: counted in unfinished_handshakes_
    uint32_t socket_index = 0;        // where its first Initial came in
  };
  // One per master socket index, for the worker's whole life: connections keep pointers to the
  // sender, so a released socket's sender is closed, not destroyed, and the slot not reused.
  struct SocketSlot {
    std::unique_ptr<UdpSender> sender;
    SocketAddress address;   // empty once released: SenderFor no longer offers it
    size_t connections = 0;  // open connections accepted on it
    bool retiring = false;   // accepts none; released when `connections` reaches 0
  };
  void ReleaseSocketIfDone(size_t index);
  void MoveTo(Entry& e, Phase phase);

  void HandleDatagram(const uint8_t* data, size_t len, const ReceivedPacket& p);
  void Accept(const uint8_t* data, size_t len, const ReceivedPacket& p);
  void SendRetry(const ngtcp2_pkt_hd& hd, const ReceivedPacket& p);
  void SendStatelessReset(absl::Span<const uint8_t> dcid, size_t len, const ReceivedPacket& p);
  void Register(Connection* conn, absl::Span<const uint8_t> cid);
  // Closes `conn` if the stop is past its deadline or the application says it is idle.
  void CloseIfDone(Connection& conn, bool late);
  void CloseIdleConnections();
  void OnShutdownDeadline();
  void FinishShutdownIfEmpty();

  EventLoop* const loop_;
  const WorkerConfig config_;
  ConnectionObserver* const app_;
  std::optional<ServerCidCodec> codec_;
  ConnectionSettings connection_;  // config_.connection with the current limits
  std::vector<uint8_t> early_data_context_;
  std::vector<SocketSlot> sockets_;  // by the master's socket index
  SocketAddress preferred_address_;  // empty: none
  StatelessResetTokens reset_tokens_;
  StatelessResponder responder_;
  absl::flat_hash_map<CidKey, Connection*, absl::Hash<CidKey>> by_cid_;
  absl::flat_hash_map<Connection*, Entry> entries_;
  size_t unfinished_handshakes_ = 0;

  bool stopping_ = false;
  std::function<void()> shutdown_done_;
  Timer shutdown_timer_;  // at the deadline
  // Memory given back after closes (WorkerConfig::memory_trim_delay): the most connections open
  // since the last trim, and the timer that trims once they have fallen to half of it.
  void MaybeScheduleTrim();
  void OnTrimTimer();
  static constexpr size_t kMinPeakToTrim = 32;
  size_t peak_since_trim_ = 0;
  Timer trim_timer_;
  uint64_t memory_trims_ = 0;
  uint64_t transport_errors_ = 0;
  // Connections with a stream closed in this batch, asked after it whether they are idle.
  std::vector<Connection*> idle_candidates_;

  uint64_t unknown_drops_ = 0;
  uint64_t retries_sent_ = 0;
  uint64_t accepted_ = 0;
  uint64_t resets_sent_ = 0;
  uint64_t misrouted_ = 0;
  uint64_t paths_validated_ = 0;

  // Registered in the constructor when WorkerConfig::metrics is set; null otherwise.
  struct Metrics {
    Counter* datagrams_in = nullptr;
    Counter* bytes_in = nullptr;
    Counter* datagrams_out = nullptr;
    Counter* bytes_out = nullptr;
    Counter* send_blocked = nullptr;
    Counter* unknown_drops = nullptr;
    Counter* accepted = nullptr;
    Counter* retries = nullptr;
    Counter* handshakes = nullptr;
    Gauge* open = nullptr;
    Counter* memory_trims = nullptr;
    Counter* transport_errors = nullptr;
    // petrel_connections{transport="quic",state}, shared by every worker, by Phase.
    std::array<Gauge*, static_cast<size_t>(Phase::kCount)> phases{};
  };
  Metrics metrics_;
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_SERVER_WORKER_H_
