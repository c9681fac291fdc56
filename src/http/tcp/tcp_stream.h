// Internal: one accepted TCP connection as a byte stream for an HTTP engine (h1 or h2), in the
// clear or under TLS (BoringSSL over the socket). It owns the socket, an input buffer the engine
// parses in place, and a bounded output buffer; it keeps the fd's epoll interest to exactly what
// its state waits for (DESIGN §5): readable unless the engine paused reading, writable only while
// output is pending or TLS needs it.
//
// Backpressure: Write() sends at once when nothing waits before it (straight from the caller's
// bytes, buffering only what the socket did not take); it returns false once more than
// `high_water` bytes wait, and OnWritable() tells the engine when everything went out. Each
// readiness event moves at most `max_bytes_per_event` each way (fair share), then the loop moves
// on.
//
// Syscalls: a read that returns fewer bytes than asked has drained the socket, so the stream
// does not read again until the next readable event (epoll is level-triggered: bytes or an EOF
// that arrive meanwhile are reported) — a small request costs one read, not a read plus an
// EAGAIN. Under TLS the socket BIO reads whole chunks and serves BoringSSL's record-sized reads
// from them, with the same rule.
//
// Closing: ShutdownAfterFlush() is the graceful close — finish sending, then shutdown(SHUT_WR)
// (after close_notify under TLS), then read and discard until the peer's EOF or `linger` passes,
// then close — so an RST never destroys a response the peer has not read yet. Close() is
// immediate. Either way the handler's OnClosed() runs once; the owner releases the stream after
// the current batch (EventLoop::RunAfterBatch), never inside the callback.
//
// Bytes: the stream counts what the kernel took and handed over (under TLS, the record bytes,
// handshake included) and, once given Counters (metrics), keeps them current at the end of each
// entry point — one counter update per readiness event or Write, not per syscall; without them
// it only adds to two plain integers.
//
// Loop thread only.
#ifndef PETREL_HTTP_TCP_TCP_STREAM_H_
#define PETREL_HTTP_TCP_TCP_STREAM_H_

#include <openssl/ssl.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "http/tcp/socket_bio.h"
#include "petrel/common/byte_buffer.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/metrics.h"
#include "petrel/common/socket_address.h"
#include "petrel/common/timer.h"

namespace petrel::http {

class StreamHandler {
 public:
  virtual ~StreamHandler() = default;
  // TLS only: the handshake finished; ALPN and SNI are known.
  virtual void OnHandshakeDone() {}
  // New bytes were appended to `input`; the engine consumes what it parsed.
  virtual void OnReadable(ByteBuffer& input) = 0;
  // The peer finished sending (EOF). The stream can still write.
  virtual void OnPeerFinished() {}
  // All pending output went out after Write() had returned false (or a file finished sending).
  virtual void OnWritable() {}
  // The stream is closed: `reason` is OK for a graceful close.
  virtual void OnClosed(const absl::Status& reason) = 0;
};

// What an engine's connection is doing, for connections-by-state metrics: kIdle waits for the
// next request, kActive has one in progress (h1) or a stream open (h2), kClosing takes nothing
// new and finishes (graceful shutdown, GOAWAY, Connection: close, an error answered, lingering
// close).
enum class ConnectionActivity : uint8_t { kIdle, kActive, kClosing };

struct TcpStreamOptions {
  size_t high_water = 256 * 1024;
  size_t max_bytes_per_event = 256 * 1024;
  Duration linger = std::chrono::seconds(2);
};

class TcpStream final : public IoHandler {
 public:
  // Takes `fd` (non-blocking). With `ssl` the stream runs a TLS server handshake first.
  static absl::StatusOr<std::unique_ptr<TcpStream>> Create(EventLoop* loop, int fd,
                                                           const SocketAddress& peer,
                                                           const SocketAddress& local,
                                                           bssl::UniquePtr<SSL> ssl,
                                                           const TcpStreamOptions& options = {});
  ~TcpStream() override;
  TcpStream(const TcpStream&) = delete;
  TcpStream& operator=(const TcpStream&) = delete;

  // Not owned; must outlive the stream or be replaced. Set it before the loop runs the stream.
  void set_handler(StreamHandler* handler) { handler_ = handler; }

  // Queues bytes and sends what the socket takes now. False when more than high_water bytes
  // wait: stop producing until OnWritable().
  bool Write(absl::string_view bytes);
  // Cleartext only: sends `length` bytes of `file_fd` from `offset` with sendfile(2) after the
  // queued output. The fd must stay open until OnWritable(). False under TLS.
  bool SendFile(int file_fd, off_t offset, size_t length);
  size_t pending_output() const;

  // Stops and restarts reading (e.g. h1 pipelining while a response is in progress).
  void PauseReading();
  void ResumeReading();

  void ShutdownAfterFlush();
  void Close(const absl::Status& reason);
  bool closed() const { return state_ == State::kClosed; }

  ByteBuffer& input() { return input_; }
  const SocketAddress& peer() const { return peer_; }
  const SocketAddress& local() const { return local_; }
  bool tls() const { return ssl_ != nullptr; }
  SSL* ssl() const { return ssl_.get(); }
  bool handshake_done() const { return handshake_done_; }
  // Socket syscalls so far (tests: a small keep-alive request costs one read and one write).
  const TcpIoCounters& io_counters() const { return io_; }
  // Bytes the socket received and sent so far; under TLS the record bytes, handshake included.
  uint64_t bytes_received() const;
  uint64_t bytes_sent() const;
  // Metrics: adds the bytes so far to `received` and `sent` (not owned, both set), then keeps
  // them current as bytes move. Call once.
  void set_byte_counters(Counter* received, Counter* sent);

  void OnIoEvent(uint32_t events) override;

 private:
  enum class State { kOpen, kFlushThenShutdown, kLingering, kClosed };

  TcpStream(EventLoop* loop, int fd, const SocketAddress& peer, const SocketAddress& local,
            bssl::UniquePtr<SSL> ssl, const TcpStreamOptions& options);
  void DoHandshake();
  void ReadSome();
  void FlushSome();
  bool FlushFile(size_t* budget);
  void StartLinger();
  void UpdateInterest();
  // TLS: maps an SSL_* result; true if the operation may continue later.
  bool HandleTlsResult(int ret, bool reading);
  // TLS: received bytes wait inside the session or the socket BIO; no socket event announces
  // them.
  bool TlsBuffered() const;
  // Cleartext: one send() straight from `bytes`; returns how many went out, or nullopt if the
  // stream closed.
  std::optional<size_t> SendDirect(absl::string_view bytes);
  // Adds the bytes moved since the last call to the byte counters, if there are any. Runs at the
  // end of every entry point that may have read or written.
  void ReportBytes();

  EventLoop* const loop_;
  int fd_;
  const SocketAddress peer_;
  const SocketAddress local_;
  bssl::UniquePtr<SSL> ssl_;
  const TcpStreamOptions options_;
  StreamHandler* handler_ = nullptr;
  Timer linger_timer_;
  // TLS plaintext BoringSSL has already decrypted produces no socket event: when a read stops
  // (budget spent, or paused) with some pending, this timer resumes it on the next turn.
  Timer tls_pending_timer_;

  TcpIoCounters io_;  // the socket BIO counts TLS I/O here too
  // Cleartext bytes (under TLS the socket BIO's own totals say it), and what ReportBytes has
  // added to the counters.
  uint64_t clear_received_ = 0;
  uint64_t clear_sent_ = 0;
  Counter* received_counter_ = nullptr;
  Counter* sent_counter_ = nullptr;
  uint64_t reported_received_ = 0;
  uint64_t reported_sent_ = 0;
  ByteBuffer input_;
  ByteBuffer output_;
  int file_fd_ = -1;
  off_t file_offset_ = 0;
  size_t file_remaining_ = 0;

  State state_ = State::kOpen;
  bool handshake_done_ = false;
  bool reading_paused_ = false;
  bool peer_finished_ = false;
  bool blocked_ = false;          // Write() returned false; OnWritable() is owed
  bool tls_wants_write_ = false;  // an SSL call returned WANT_WRITE
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_TCP_TCP_STREAM_H_
