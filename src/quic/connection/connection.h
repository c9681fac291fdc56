// Internal: Connection, one QUIC connection of either role — the ngtcp2_conn, its TlsSession,
// its streams, its timer and its write loop (DESIGN §3, §5).
//
// Thread: every method runs on the owning loop's thread (the worker's, or the client's).
// Ownership: the host (Worker or QuicClient) owns the Connection through a unique_ptr. The
// Connection never deletes itself: when it is finished (closing/draining period over, idle
// timeout, fatal error) it marks itself closed and calls ConnectionHost::Release, and the host
// frees it after the current batch (EventLoop::RunAfterBatch).
// Teardown order: the ngtcp2_conn is deleted before the TlsSession (tls_session.h).
#ifndef PETREL_QUIC_CONNECTION_CONNECTION_H_
#define PETREL_QUIC_CONNECTION_CONNECTION_H_

#include <ngtcp2/ngtcp2.h>
#include <openssl/ssl.h>

#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/socket_address.h"
#include "petrel/common/timer.h"
#include "petrel/quic/quic_connection.h"
#include "quic/connection/connection_memory.h"
#include "quic/connection/path_order.h"
#include "quic/connection/stream_map.h"
#include "quic/connection/stream_send_queue.h"
#include "quic/crypto/tls_session.h"
#include "quic/udp/udp_socket.h"

namespace petrel::quic {

class Connection;

// Transport plumbing the connection needs from its owner.
class ConnectionHost {
 public:
  virtual ~ConnectionHost() = default;
  // A fresh CID (cid.size() octets) and its stateless reset token; the host registers it.
  virtual bool IssueConnectionId(Connection& conn, absl::Span<uint8_t> cid, uint8_t* token) = 0;
  // The peer retired `cid`; the host unregisters it.
  virtual void RetireConnectionId(Connection& conn, absl::Span<const uint8_t> cid) = 0;
  virtual void OnHandshakeCompleted(Connection& /*conn*/) {}
  // The connection left the open state: its closing or draining period begins (Release
  // follows when it ends; a connection finished straight from the open state skips this).
  virtual void OnClosing(Connection& /*conn*/) {}
  // A new path (peer migration, NAT rebinding, the preferred address) passed validation or not.
  virtual void OnPathValidated(Connection& /*conn*/, bool /*success*/) {}
  // The connection is closing with a transport error of its own making: ngtcp2 found the peer
  // broke QUIC (a frame, a limit, flow control, a stream's state) or failed itself.
  virtual void OnTransportError(Connection& /*conn*/, int /*liberr*/) {}
  // A stream closed, after the application heard of it (inside packet or timer processing), or,
  // once the host asked for it (WatchForIdle), a packet was read or a write pass ran: a
  // stopping server asks whether the connection has become idle.
  virtual void OnMaybeIdle(Connection& /*conn*/) {}
  // Client with ConnectionSettings::preferred_address_by_host: the handshake is confirmed and
  // the server offered `address` (of the connection's family). Runs inside packet processing.
  virtual void OnPreferredAddress(Connection& /*conn*/, const SocketAddress& /*address*/) {}
  // The sender for packets from `local` when it is not the connection's current local address
  // (server with several sockets, e.g. a preferred address); null: use the current one.
  virtual UdpSender* SenderFor(const SocketAddress& /*local*/) { return nullptr; }
  // Called once, when the connection is finished; the host frees it after the batch.
  virtual void Release(Connection& conn) = 0;
};

// Application events. Runs on the connection's thread; the QuicConnection& is valid only there.
class ConnectionObserver {
 public:
  virtual ~ConnectionObserver() = default;
  virtual void OnHandshakeCompleted(QuicConnection& /*conn*/) {}
  virtual void OnStreamData(QuicConnection& conn, int64_t stream, absl::string_view data,
                            bool fin) = 0;
  virtual void OnStreamReset(QuicConnection& /*conn*/, int64_t /*stream*/, uint64_t /*err*/) {}
  virtual void OnStreamStopSending(QuicConnection& /*conn*/, int64_t /*stream*/, uint64_t /*err*/) {
  }
  virtual void OnStreamWritable(QuicConnection& /*conn*/, int64_t /*stream*/) {}
  // The peer acknowledged the next `bytes` of what was written on `stream` (in stream order,
  // never 0): bytes written by reference are now free.
  virtual void OnStreamDataAcked(QuicConnection& /*conn*/, int64_t /*stream*/, uint64_t /*bytes*/) {
  }
  virtual void OnStreamClosed(QuicConnection& /*conn*/, int64_t /*stream*/) {}
  // The peer raised its limit of streams we may open (MAX_STREAMS).
  virtual void OnStreamsAvailable(QuicConnection& /*conn*/) {}
  // Client: the server declined 0-RTT; every stream opened before the handshake is gone (ids
  // are reused). Runs before OnHandshakeCompleted.
  virtual void OnEarlyDataRejected(QuicConnection& /*conn*/) {}
  virtual void OnNewToken(QuicConnection& /*conn*/, absl::Span<const uint8_t> /*token*/) {}
  // Server graceful shutdown: once when it begins; then IsIdle decides when to close.
  virtual void OnShutdown(QuicConnection& /*conn*/) {}
  virtual bool IsIdle(QuicConnection& conn) { return conn.open_streams() == 0; }
  // The last event: the connection is gone after this returns.
  virtual void OnConnectionClosed(QuicConnection& /*conn*/) {}
};

struct ConnectionSettings {
  QuicTransportLimits limits;
  CongestionControl cc = CongestionControl::kCubic;
  std::string qlog_dir;  // empty: no qlog
  // Server: versions by preference (compatible version negotiation). Client: the versions it
  // offers besides the first Initial's. Empty: ngtcp2's defaults (v1 only).
  std::vector<uint32_t> versions;
  bool use_preferred_address = true;  // client: move to a server's preferred_address
  // Client: leave the move to the host (OnPreferredAddress), which makes it an immediate
  // migration from a new socket, instead of ngtcp2's validation from the current one.
  bool preferred_address_by_host = false;
};

// What a server connection is created from (the accepted Initial and the worker's decisions).
struct ServerConnectionArgs {
  ngtcp2_pkt_hd hd;         // from ngtcp2_accept
  ngtcp2_cid scid;          // our first CID (issued by the worker)
  uint8_t reset_token[16];  // for scid
  ngtcp2_cid original_dcid;
  bool retried = false;  // hd.dcid is our Retry SCID; original_dcid came from the token
  bool address_validated = false;
  bssl::UniquePtr<SSL> ssl;
  std::vector<uint8_t> early_data_context;  // empty: no 0-RTT
  // The preferred_address transport parameter: where, under which CID (issued by the worker,
  // sequence number 1) and its reset token. Empty address: none.
  SocketAddress preferred_address;
  ngtcp2_cid preferred_cid{};
  uint8_t preferred_reset_token[16] = {};
};

struct ClientConnectionArgs {
  bssl::UniquePtr<SSL> ssl;  // ALPN, SNI, verification and session already set
  uint32_t version = NGTCP2_PROTO_VER_V1;
  std::string early_transport_params;  // encoded remembered server params; empty: no 0-RTT
};

class Connection : private UdpSender::Waiter, private UdpSender::StagedOwner {
 public:
  // `sender`, `host` and `observer` are not owned and must outlive the connection. `local` and
  // `peer` give the path.
  static absl::StatusOr<std::unique_ptr<Connection>> CreateServer(
      EventLoop* loop, UdpSender* sender, ConnectionHost* host, ConnectionObserver* observer,
      const ConnectionSettings& settings, const SocketAddress& local, const SocketAddress& peer,
      ServerConnectionArgs args);
  static absl::StatusOr<std::unique_ptr<Connection>> CreateClient(
      EventLoop* loop, UdpSender* sender, ConnectionHost* host, ConnectionObserver* observer,
      const ConnectionSettings& settings, const SocketAddress& local, const SocketAddress& peer,
      ClientConnectionArgs args);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Feeds one datagram. Schedules a write (through the timer, later in this loop turn).
  void OnDatagram(const uint8_t* data, size_t len, const SocketAddress& local,
                  const SocketAddress& peer, uint8_t ecn, TimePoint received);
  // Client: starts the handshake (first flight) now.
  void Start() { WritePackets(); }

  // --- The stream API (QuicConnection forwards here).
  // `copy` false: WriteRef's contract (quic_connection.h) — the queue points at `data`.
  bool Write(int64_t stream, absl::string_view data, bool fin, bool copy = true);
  void Consume(int64_t stream, size_t n);
  int64_t OpenStream(bool bidi);
  void SetUrgent(int64_t stream);
  void ResetStream(int64_t stream, uint64_t app_error);
  void StopSending(int64_t stream, uint64_t app_error);
  void Close(uint64_t app_error);
  void SetStreamSource(QuicStreamSource* source) {
    source_ = source;
    source_has_data_ = source != nullptr;
  }
  void WantWrite() {
    source_has_data_ = source_ != nullptr;
    ScheduleWrite();
  }
  // Sends CONNECTION_CLOSE now (if still open) and ends at once, without the closing period:
  // for an endpoint that is going away. Not from inside an ngtcp2 callback.
  void CloseNow(uint64_t app_error);
  // After the handshake is confirmed (either role): false otherwise.
  bool InitiateKeyUpdate();
  // Client: moves to the path local -> remote (`sender` sends from `local`, which must be new).
  // Probe first: validates the path before using it; immediate: uses it at once and validates
  // it meanwhile.
  bool MigrateTo(const SocketAddress& local, const SocketAddress& remote, UdpSender* sender,
                 bool immediate);

  QuicConnection& handle() { return handle_; }
  EventLoop* loop() const { return loop_; }
  bool StreamEarlyData(int64_t id) const;
  // Client: the server declined 0-RTT (called from the TLS session).
  void OnEarlyDataRejected();
  ConnectionObserver* observer() const { return observer_; }
  ngtcp2_conn* conn() const { return conn_; }
  SSL* ssl() const { return tls_->ssl(); }
  bool is_server() const { return is_server_; }
  bool handshake_completed() const { return handshake_completed_; }
  bool handshake_confirmed() const { return handshake_confirmed_; }
  bool closed() const { return state_ == State::kClosed; }
  bool closing() const { return state_ != State::kOpen; }
  size_t open_streams() const { return streams_.size(); }
  size_t send_buffered() const { return send_buffered_; }
  // Everything written has been sent and acknowledged: no stream holds unacknowledged bytes
  // and no packet is in flight. A stopping server closes an idle connection only then, so its
  // last frames (HTTP/3's GOAWAY) reach the peer before the CONNECTION_CLOSE. Walks the
  // streams: not for the data path.
  bool AllDelivered() const;
  // From now on every packet read and every write pass asks the host OnMaybeIdle (a stopping
  // server), starting with a write pass this turn.
  void WatchForIdle() {
    watch_for_idle_ = true;
    ScheduleWrite();
  }
  // The current path's peer (it changes on migration and NAT rebinding).
  const SocketAddress& peer() const { return peer_; }
  const SocketAddress& local() const { return local_; }
  // Encoded transport params of the server (client, after the handshake), for 0-RTT later.
  std::string EncodedRemoteTransportParams() const;
  uint64_t datagrams_sent() const { return datagrams_sent_; }
  // The first close error seen (liberr or peer's), 0 if none.
  int last_error() const { return last_error_; }
  // The error code of the peer's CONNECTION_CLOSE (transport or application), 0 if none came.
  uint64_t peer_close_code() const {
    ngtcp2_connection_close_error e;
    ngtcp2_conn_get_connection_close_error(conn_, &e);
    return e.error_code;
  }

 private:
  friend struct ConnectionCallbacks;
  enum class State : uint8_t { kOpen, kClosing, kDraining, kClosed };

  struct Stream {
    explicit Stream(int64_t stream_id, size_t capacity) : id(stream_id), send(capacity) {}
    // Makes a closed stream's object the state of a new stream `stream_id`.
    void Reuse(int64_t stream_id) {
      id = stream_id;
      send.Reset();
      in_sendable = blocked = want_writable = want_room = early = urgent = false;
      pulled_unacked = 0;
    }
    int64_t id;
    StreamSendQueue send;
    bool in_sendable = false;  // queued in SendableQueue(this)
    bool urgent = false;       // SetUrgent: written before the others
    bool blocked = false;      // flow-control blocked until extend_max_stream_data
    bool want_writable = false;
    bool want_room = false;       // refused for the connection's send buffer: in waiting_for_room_
    bool early = false;           // some received data came in 0-RTT
    uint64_t pulled_unacked = 0;  // bytes the source sent on it and the peer has not acknowledged
  };

  Connection(EventLoop* loop, UdpSender* sender, ConnectionHost* host, ConnectionObserver* observer,
             const ConnectionSettings& settings, bool is_server, const SocketAddress& local,
             const SocketAddress& peer);
  absl::Status InitCommon(ngtcp2_settings* s, ngtcp2_transport_params* p, const ngtcp2_cid& odcid);
  void OpenQlog(const ngtcp2_cid& odcid);

  // Write loop (connection_write.cc).
  void WritePackets();
  // Sends a batch of packets of `segment` bytes (the last may be shorter). What the socket
  // refuses for a full buffer is kept and sent first once it is writable (false); a hard error
  // loses the rest (QUIC's loss recovery resends it). A batch written at the sender's
  // StagingSpace() is staged: it leaves at the end of the loop's batch with the other
  // connections' (one sendmmsg), and a refusal comes back in OnStagedBatchRefused.
  bool FlushBatch(const uint8_t* data, size_t len, size_t segment, const ngtcp2_path& path,
                  uint8_t ecn);
  // Sends the kept batches in order; false (and waiting for the socket) if some remain.
  bool SendUnsent();
  void OnSocketWritable() override;
  void OnStagedBatchRefused(UdpSender* sender, const SendBatch& batch) override;
  // Where WritePackets writes its next batch: the stage of `sender`, or SendBuffer() if it has
  // none or the batch is a handshake probe to be sent twice (duplicate_probes_: the copy
  // needs the first send's result at once).
  uint8_t* BatchSpace(UdpSender* sender);
  UdpSender* staged_on_ = nullptr;  // the sender that may hold staged batches of this one
  Stream* NextSendable();
  void MarkSendable(Stream* s);

  void OnTimer();
  void ArmTimer();
  void ScheduleWrite();
  void HandleError(int liberr);
  void EnterClosing(const ngtcp2_connection_close_error& ccerr);
  void EnterDraining();
  void Finish();
  Stream* FindStream(int64_t id);
  Stream* GetOrCreateStream(int64_t id);
  void EraseStream(int64_t id);

  // ngtcp2 events (connection_callbacks.cc calls these).
  // Stream events carry ngtcp2's stream_user_data: the Stream, set when Petrel made it (null for
  // a stream Petrel has not seen yet), so the common events need no map lookup.
  int OnRecvStreamData(uint32_t flags, int64_t id, Stream* s, const uint8_t* data, size_t len);
  int OnAckedStreamData(Stream* s, uint64_t offset, uint64_t len);
  int OnStreamClose(int64_t id, Stream* s);
  int OnStreamReset(int64_t id, uint64_t err);
  int OnStreamStopSending(int64_t id, uint64_t err);
  int OnExtendMaxStreamData(Stream* s);
  int OnHandshakeCompleted();
  int OnHandshakeConfirmed();
  int OnPathValidation(const ngtcp2_path* path, ngtcp2_path_validation_result res);
  int OnSelectPreferredAddress(ngtcp2_path* dest, const ngtcp2_preferred_addr* paddr);
  void ApplyKeepAlive();
  // Copies ngtcp2's current path into local_ / peer_ (and the server's sender for local_).
  void SyncPath();
  // PathOrder's deadline for the current path change: about one RTT from now.
  ngtcp2_tstamp PathOrderDeadline(ngtcp2_tstamp now) const;
  uint64_t BytesInFlight() const;
  // Sends the PATH_CHALLENGE PathOrder held back.
  void SendHeldPacket();
  // Before a CONNECTION_CLOSE the application asked for: one packet with what ngtcp2 owes the
  // peer (the ACK of the last data, a PATH_RESPONSE to a challenge that came with it).
  void WriteOwedFrames();
  void WriteQlog(const void* data, size_t len, bool fin);

  EventLoop* const loop_;
  UdpSender* sender_;
  ConnectionHost* const host_;
  ConnectionObserver* const observer_;
  const ConnectionSettings settings_;
  const bool is_server_;
  SocketAddress local_;
  SocketAddress peer_;
  QuicConnection handle_{this};
  std::unique_ptr<crypto::TlsSession> tls_;
  ConnectionMemory memory_;  // conn_'s allocator; frees what ngtcp2 loses once conn_ is deleted
  ngtcp2_conn* conn_ = nullptr;
  Timer timer_;
  State state_ = State::kOpen;
  bool handshake_completed_ = false;
  bool handshake_confirmed_ = false;
  bool in_write_ = false;
  bool write_due_ = false;  // timer_ was started for now() by ScheduleWrite and has not fired
  bool early_stream_data_ = false;  // some stream received 0-RTT data (StreamEarlyData)
  bool watch_for_idle_ = false;     // WatchForIdle: OnMaybeIdle after each read and write pass
  // Until the handshake completes, what a PTO makes ngtcp2 send (its loss probe: one datagram
  // per packet number space) leaves twice, as RFC 9002 §6.2.4 allows. On a path that loses or
  // corrupts a large share of datagrams a lone probe fails about as often as the datagram it
  // replaces, and each failure doubles the wait for the next one: a handshake that loses five
  // rounds in a row outlives the idle timeout. A server's copies stay within the
  // anti-amplification limit (RFC 9000 §8.1), counted over the bytes below.
  bool duplicate_probes_ = false;
  uint64_t handshake_bytes_in_ = 0;   // datagram bytes received before handshake completion
  uint64_t handshake_bytes_out_ = 0;  // and sent, copies included
  int last_error_ = 0;
  std::optional<ngtcp2_connection_close_error> pending_close_;  // Close() from a callback
  std::vector<uint8_t> close_packet_;  // resent on packets received while closing
  std::FILE* qlog_ = nullptr;
  StreamMap<Stream> streams_;
  // Objects of closed streams, reused by new ones (a stream per request would otherwise cost
  // three allocations); at most as many as the peer may open at once.
  std::vector<std::unique_ptr<Stream>> free_streams_;
  // Where stream data comes from besides the queues (QuicConnection::SetStreamSource).
  QuicStreamSource* source_ = nullptr;
  // The source may have data: set by WantWrite and by a stream's window opening, cleared by a
  // pull that finds nothing. Write passes for acknowledgements alone do not ask it.
  bool source_has_data_ = false;
  // Streams with data to send, in turn: the urgent ones first, then the others.
  std::deque<Stream*> urgent_sendable_;
  std::deque<Stream*> sendable_;
  // Bytes in all streams' send queues (StreamSendQueue::buffered), against
  // limits.connection_send_buffer; streams refused for it, woken in turn as it drains.
  size_t send_buffered_ = 0;
  std::vector<int64_t> waiting_for_room_;
  bool waking_for_room_ = false;  // WakeStreamsWaitingForRoom is on the stack
  void WakeStreamsWaitingForRoom();
  std::deque<Stream*>& SendableQueue(const Stream* s) {
    return s->urgent ? urgent_sendable_ : sendable_;
  }
  // One GSO batch (UdpSocket::kMaxGsoBytes), shared by the connections of a thread: packets are
  // written into it and sent, or copied out, before the writing function returns, and no
  // connection writes from inside another's write. 64 KiB per connection would be most of an
  // idle connection's memory. For what is not staged (BatchSpace).
  static uint8_t* SendBuffer();
  uint64_t datagrams_sent_ = 0;
  SocketAddress preferred_address_;  // client: offered, for the host to move to
  PathOrder path_order_;
  bool challenge_written_ = false;  // set by ngtcp2's get_path_challenge_data during a write
  std::vector<uint8_t> held_packet_;
  ngtcp2_path_storage held_path_;
  uint8_t held_ecn_ = 0;
  // Packets written by ngtcp2 that the socket refused (EAGAIN), oldest first: they go out,
  // in order, before any new packet of this connection. Allocated only when a send blocks.
  struct UnsentBatch {
    std::vector<uint8_t> bytes;
    size_t segment;
    SocketAddress peer;
    SocketAddress local;
    uint8_t ecn;
    UdpSender* sender;
  };
  std::vector<UnsentBatch> unsent_;
  UdpSender* waiting_on_ = nullptr;  // the sender whose writability we wait for
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_CONNECTION_CONNECTION_H_
