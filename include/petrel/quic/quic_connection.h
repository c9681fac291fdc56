// Public: QuicConnection, the handle through which an application drives one QUIC connection
// (streams, flow control, close) from inside QuicServer / QuicClient callbacks.
#ifndef PETREL_QUIC_QUIC_CONNECTION_H_
#define PETREL_QUIC_QUIC_CONNECTION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/socket_address.h"

namespace petrel {

namespace quic {
class Connection;
}  // namespace quic

// QUIC versions Petrel speaks. v2 on the wire is the provisional code point of
// draft-ietf-quic-v2-01, the one ngtcp2 0.12.1 implements; RFC 9369's 0x6b3343cf needs a newer
// ngtcp2.
inline constexpr uint32_t kQuicVersion1 = 0x00000001;
inline constexpr uint32_t kQuicVersion2Draft = 0x709a50c4;

// Congestion controllers ngtcp2 offers.
enum class CongestionControl : uint8_t { kCubic, kReno, kBbr, kBbr2 };

// How a client moves to a new path. kProbeFirst validates the path before using it (RFC 9000
// §9.1, and §9.6.1 for a preferred address); kImmediate sends from a new local port at once and
// validates the path meanwhile (§9.2): the server then sees the move in the first packet and
// challenges the path itself, which is what the QUIC interop runner checks. An immediate move
// does not fall back if the new path fails validation.
enum class QuicMigration { kProbeFirst, kImmediate };

// Transport limits a Petrel endpoint announces (RFC 9000 §18.2).
struct QuicTransportLimits {
  uint64_t max_streams_bidi = 100;
  uint64_t max_streams_uni = 100;
  uint64_t max_data = 16 << 20;        // connection window
  uint64_t max_stream_data = 4 << 20;  // per-stream window
  uint64_t idle_timeout_ms = 30000;
  // A handshake not done by then closes the connection (an unresponsive or lossy path, or a
  // peer that never finishes). 0: no limit but the idle timeout.
  uint64_t handshake_timeout_ms = 10000;
  // Send a PING after this long without a packet from the peer (0: never). Keeps NAT bindings
  // alive, and lets a client that only waits for data show a NAT rebinding to the server,
  // whose packets to the old binding are lost.
  uint64_t keep_alive_ms = 0;
  // Bytes a stream may queue for sending (sent but not yet acknowledged included) before
  // Write() refuses more.
  size_t stream_send_buffer = 1 << 20;
  // Bytes all of a connection's streams together may queue (urgent streams' writes are never
  // refused for it). Without it a peer that opens many streams and then stops acknowledging
  // (or keeps their windows shut) holds stream_send_buffer of the server's memory per stream:
  // 100 MiB per connection. Four times the stream's, so that a few streams whose reader paused
  // (a window kept shut) leave room for the others.
  size_t connection_send_buffer = 4 << 20;
};

// Stream data an application keeps until it is acknowledged (as HTTP/3's nghttp3 does), pulled
// by the connection as it writes packets instead of queued with Write: no second queue of the
// same bytes, and a stream's bytes are taken only when a packet has room for them (ngtcp2's
// examples drive nghttp3 the same way). Set with QuicConnection::SetStreamSource; every call
// comes from the connection's thread.
struct QuicStreamVec {
  uint8_t* base;  // the layout of ngtcp2_vec and nghttp3_vec
  size_t len;
};

class QuicStreamSource {
 public:
  struct Pulled {
    int64_t stream = -1;  // -1: nothing to send now
    size_t count = 0;     // vectors filled
    bool fin = false;     // they end the stream
  };
  virtual ~QuicStreamSource() = default;
  // Up to `max` vectors of one stream's next unsent bytes. Called from the connection's write
  // pass (more data asked for there waits for WantWrite's next pass).
  virtual Pulled PullStreamData(QuicStreamVec* vecs, size_t max) = 0;
  // The next `bytes` of what the last pull offered for `stream` went into a packet (a pull's bytes
  // may fill several packets before the next pull); `all`: the rest of it; `fin`: and the FIN
  // the pull offered. They stay valid until acknowledged.
  virtual void OnStreamDataSent(int64_t stream, size_t bytes, bool all, bool fin) = 0;
  // The peer acknowledged the next `bytes` of `stream` (in stream order, never 0).
  virtual void OnStreamDataAcked(int64_t stream, uint64_t bytes) = 0;
  // Stop offering `stream`: its flow-control window is shut (OnStreamUnblocked follows when the
  // peer opens it), or it can no longer be written (reset; its close follows).
  virtual void OnStreamBlocked(int64_t stream) = 0;
  virtual void OnStreamUnblocked(int64_t stream) = 0;
};

// A non-owning handle to a connection. Valid only on the connection's thread (the worker that
// runs the callback it was passed to) and only until the connection closes: do not keep it past
// the callback unless you also watch on_connection_closed / the stream callbacks.
class QuicConnection {
 public:
  QuicConnection(const QuicConnection&) = delete;
  QuicConnection& operator=(const QuicConnection&) = delete;

  // Queues `data` (and FIN if `fin`) on `stream`. Returns false without queuing anything when the
  // stream's send buffer is full, or the connection's (QuicTransportLimits), or the stream cannot
  // be written (unknown, FIN already queued, reset); a full buffer is followed by
  // on_stream_writable once there is room again.
  bool Write(int64_t stream, absl::string_view data, bool fin);
  // Write without the copy: the connection queues a reference to `data`, and ngtcp2 reads and
  // resends it from there. The caller keeps the bytes valid and unchanged until they are
  // acknowledged (on_stream_data_acked, in order, counts them off), the stream is closed
  // (on_stream_closed), or the connection is closed (on_connection_closed) — whichever comes
  // first. Refusals as for Write.
  bool WriteRef(int64_t stream, absl::string_view data, bool fin);
  // Lets the connection pull stream data from `source` (null: none) as it writes packets. With a
  // source, Write and WriteRef refuse everything and acknowledgements go to the source, not to
  // on_stream_data_acked; the bytes it holds unacknowledged count against
  // QuicTransportLimits::connection_send_buffer (no pull while they fill it). The source must
  // outlive the connection or be unset first.
  void SetStreamSource(QuicStreamSource* source);
  // The source has data to offer: a write pass follows later in this loop turn. The connection
  // asks the source only after this call (or a stream's window opening), until a pull finds
  // nothing: write passes for acknowledgements alone do not.
  void WantWrite();
  // Returns flow-control credit for `n` bytes of `stream` the application has processed. Credit
  // is given back only through this call, so a slow application slows its peer down.
  void Consume(int64_t stream, size_t n);
  // Opens a locally initiated stream; returns its id or -1 when the peer's stream limit is
  // reached (or, for a client, before 0-RTT or the handshake allows it).
  int64_t OpenBidiStream();
  int64_t OpenUniStream();
  // Makes `stream` urgent: whenever it has data to send, its data goes out before any other
  // non-urgent stream's (urgent streams take turns among themselves); flow and congestion
  // control still apply. For an application's control streams, whose bytes the other streams
  // wait for (HTTP/3's control and QPACK streams). No effect on an unknown stream.
  void SetUrgent(int64_t stream);
  // Abruptly ends both directions of `stream` with `app_error` (RESET_STREAM + STOP_SENDING).
  void ResetStream(int64_t stream, uint64_t app_error);
  // Ends only the receiving direction of `stream` (STOP_SENDING with `app_error`): the peer is
  // asked to stop, data still arriving is discarded. Sending goes on.
  void StopSending(int64_t stream, uint64_t app_error);
  // Closes the connection with an application error (0: no error) after sending what was
  // already handed to ngtcp2.
  void Close(uint64_t app_error = 0);

  // Starts a key update (RFC 9001 §6). False when it is not allowed now: before the handshake is
  // confirmed, or while the previous update is not yet confirmed by the peer.
  bool InitiateKeyUpdate();

  bool handshake_completed() const;
  // True if some of the peer's data on `stream` arrived in 0-RTT (replayable: RFC 8470).
  bool stream_early_data(int64_t stream) const;
  // The loop the connection runs on (its worker's): for timers and posted work of the
  // application. Connection thread only.
  EventLoop* loop() const;
  std::string alpn() const;
  // The negotiated QUIC version (after compatible version negotiation, RFC 9368).
  uint32_t version() const;
  // The TLS cipher suite, e.g. "TLS_AES_128_GCM_SHA256"; empty before the handshake chose one.
  std::string cipher() const;
  // The current path's addresses; the reference stays valid as long as the connection (the path
  // may change, the object does not).
  const SocketAddress& peer_address() const;
  const SocketAddress& local_address() const;
  // The TLS server name (SNI) the client asked for; "" if it sent none.
  std::string server_name() const;
  // Streams with queued or unacknowledged data (for graceful shutdown decisions).
  size_t open_streams() const;
  // Bytes queued on all streams, unacknowledged ones included (what the connection holds for
  // its peer; at most QuicTransportLimits::connection_send_buffer plus one write).
  size_t send_buffered() const;

  // The application's per-connection state (an engine's session, say). The connection owns it
  // and destroys it with itself, after on_connection_closed. Connection thread only.
  class AppData {
   public:
    virtual ~AppData() = default;
  };
  void set_app_data(std::unique_ptr<AppData> data) { app_data_ = std::move(data); }
  AppData* app_data() const { return app_data_.get(); }

 private:
  friend class quic::Connection;
  explicit QuicConnection(quic::Connection* impl) : impl_(impl) {}
  quic::Connection* const impl_;
  std::unique_ptr<AppData> app_data_;
};

}  // namespace petrel

#endif  // PETREL_QUIC_QUIC_CONNECTION_H_
