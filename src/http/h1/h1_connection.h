// Internal: the HTTP/1.1 server engine for one TCP connection (cleartext or TLS). It adapts a
// TcpStream to the protocol-independent Request / Response (DESIGN §5–§7), mirroring
// H2Connection:
//  - input: RequestParser on the stream's input buffer in place; a Content-Length or chunked
//    body goes to RequestBody::Deliver, at most kBodyWindow bytes ahead of what the handler has
//    consumed; beyond that the engine stops reading the socket (backpressure to the peer);
//  - pipelining: one exchange at a time, responses in order; later requests wait in the input
//    buffer, and reading pauses while a request is complete but its response is not, so the
//    buffer stays bounded;
//  - output: the head (framing chosen by the engine, Date from a DateCache), then the body,
//    in one write when it is small: a buffer body is copied after the head, a file is pread
//    after it (sendfile on cleartext from H1Options::sendfile_min bytes on), a producer is
//    pulled one chunk at a time — each only while TcpStream::Write does not report
//    backpressure; at most write_share_per_event bytes per turn, then the engine yields;
//  - `Expect: 100-continue`: 100 is sent when the handler first reads the body, never after the
//    response head;
//  - errors: every parse error is answered with its status and `Connection: close`, then the
//    stream closes gracefully (TcpStream::ShutdownAfterFlush: lingering close); nothing after
//    the bad request is processed;
//  - the unread-body rule: after a response whose request body was not read to its end, the
//    engine discards the rest if it is at most kMaxDiscard bytes (and the client is not waiting
//    for a 100), and otherwise closes (the head then says `Connection: close` when it can know);
//    a body that arrived whole with the request (chunked, or sent without waiting for the 100)
//    is dropped before the head is written, so the connection stays usable;
//  - timeouts: header read (first byte to end of head → 408 and close), keep-alive idle (close
//    silently), optional body-read (→ 408 if no response yet, else close) and send (close).
//
// Re-entrancy: calls the handler makes into the engine (commit, body reads, consume, producer
// resume) only record work and request a pump, which runs at the end of the current entry
// point (OnReadable, OnWritable, OnPeerFinished, timers, Start, Shutdown) or, outside one, from
// a task posted to the loop. Finished exchanges are reset at the end of the entry point and
// reused for later requests (one spare per connection): a steady keep-alive stream allocates
// nothing in the engine.
//
// Ownership: the owner keeps the TcpStream alive for the connection's lifetime; the connection
// installs itself as the stream's handler in Start(). on_closed runs once after the stream
// closed; the owner then destroys the connection (after the batch, not inside the callback).
// Destroying the connection cancels an unfinished response. Loop thread only.
#ifndef PETREL_HTTP_H1_H1_CONNECTION_H_
#define PETREL_HTTP_H1_H1_CONNECTION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "http/date_cache.h"
#include "http/h1/h1_exchange.h"
#include "http/h1/request_parser.h"
#include "http/h1/response_writer.h"
#include "http/tcp/tcp_stream.h"
#include "petrel/common/byte_buffer.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/timer.h"
#include "petrel/http/request.h"
#include "petrel/http/request_observer.h"
#include "petrel/http/response.h"

namespace petrel::http {

inline constexpr size_t kDefaultSendfileMin = 64 * 1024;

struct H1Options {
  // Head limits (DESIGN §7). limits.max_content_length is replaced by max_request_body.
  h1::RequestLimits limits;
  // Larger request bodies → 413 and close (Content-Length up front, chunked when crossed).
  uint64_t max_request_body = uint64_t{10} << 20;
  // From the first byte of a request head to its end; then 408 and close.
  Duration header_timeout = std::chrono::seconds(10);
  // Between requests with nothing received; then a silent close.
  Duration idle_timeout = std::chrono::seconds(60);
  // Longest wait for more request-body bytes while the engine wants them.
  std::optional<Duration> body_read_timeout;
  // Longest time output may stay blocked (the peer does not read; or a sendfile in flight);
  // then the connection closes.
  std::optional<Duration> send_timeout;
  // Bytes pulled from a response body (producer, file under TLS) per read. The engine pulls
  // again only while the TcpStream accepts output without backpressure, so at most the stream's
  // high_water plus this many bytes (plus a head) are ever queued per connection.
  size_t max_output_chunk = 64 * 1024;
  // Response bytes the engine produces per loop turn before it yields (fair share).
  size_t write_share_per_event = 256 * 1024;
  // sendfile(2) for FileBody responses; only takes effect on cleartext streams, and only for
  // files of at least sendfile_min bytes: smaller ones are read into the write that carries the
  // head, so a small response costs one send (sendfile would add a second call).
  bool use_sendfile = true;
  size_t sendfile_min = kDefaultSendfileMin;
  // Shared per-loop Date cache (not owned); null: the connection keeps its own.
  http_internal::DateCache* date_cache = nullptr;
  // Told about every finished request (metrics, access log); not owned; null: none.
  RequestObserver* observer = nullptr;
};

class H1Connection final : public StreamHandler {
 public:
  // Request bytes delivered to a handler and not yet consumed, beyond which the socket is not
  // read. Also the largest unread remainder the unread-body rule discards instead of closing.
  static constexpr size_t kBodyWindow = 64 * 1024;
  static constexpr uint64_t kMaxDiscard = 64 * 1024;

  // Runs each request (e.g. a Router's Handle) on the loop thread, inside an engine entry
  // point; it may commit the Response now or later.
  using Dispatcher = absl::AnyInvocable<void(Request& request, Response& response)>;

  // `loop` and `stream` are not owned and must outlive the connection.
  H1Connection(EventLoop* loop, TcpStream* stream, Dispatcher dispatcher,
               const H1Options& options = {});
  ~H1Connection() override;
  H1Connection(const H1Connection&) = delete;
  H1Connection& operator=(const H1Connection&) = delete;

  // Installs the connection as the stream's handler and processes bytes already in the stream's
  // input buffer (peeked by cleartext protocol detection, or read with the TLS handshake).
  absl::Status Start();

  // Graceful shutdown: an idle connection closes now; a busy one finishes the current response
  // (with `Connection: close` if its head is not written yet), processes no further pipelined
  // request, then closes. Idempotent.
  void Shutdown();

  // Runs once, after the TcpStream closed; `reason` is OK for a graceful close.
  void set_on_closed(absl::AnyInvocable<void(const absl::Status&)> on_closed) {
    on_closed_ = std::move(on_closed);
  }
  // Runs when the connection's activity changes (metrics): kActive from a request's first byte
  // until its response is out, kClosing once it takes no further request. It starts kIdle, is
  // checked at the end of each entry point's pump (so a request answered within one goes
  // unreported), and is not called after the stream closed. Set before Start().
  void set_on_activity(absl::AnyInvocable<void(ConnectionActivity)> on_activity) {
    on_activity_ = std::move(on_activity);
  }

  // Observability / tests.
  uint64_t requests() const { return requests_; }
  uint64_t continues_sent() const { return continues_sent_; }
  // Error responses the engine generated (parse errors, 408, 413 ...).
  uint64_t error_responses() const { return error_responses_; }
  // The largest TcpStream::pending_output() seen right after the engine queued body bytes
  // (sendfile excluded): the observable bound on buffered output.
  size_t max_pending_output() const { return max_pending_output_; }
  // Responses whose body went out with sendfile(2).
  uint64_t sendfile_responses() const { return sendfile_responses_; }
  bool shutting_down() const { return shutdown_requested_; }
  bool busy() const { return current_ != nullptr; }

  // StreamHandler.
  void OnReadable(ByteBuffer& input) override;
  void OnWritable() override;
  void OnPeerFinished() override;
  void OnClosed(const absl::Status& reason) override;

 private:
  friend class H1Exchange;
  // Marks an entry point: the outermost one pumps on exit.
  class Entry {
   public:
    explicit Entry(H1Connection* c) : c_(c) { ++c_->depth_; }
    ~Entry() {
      if (c_->depth_ == 1) c_->Pump();
      --c_->depth_;
    }
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;

   private:
    H1Connection* const c_;
  };

  // ---- Exchange callbacks (from handler code: record and request a pump) ----
  void OnExchangeResponseStart(H1Exchange& ex);
  void OnExchangeFirstRead(H1Exchange& ex);
  void OnExchangeConsumed(H1Exchange& ex, size_t bytes);
  void OnExchangeAbandoned(H1Exchange& ex);

  // ---- The pump (h1_connection.cc) ----
  void RequestPump();
  void PostPump();
  void Pump();
  void UpdateReading();
  void UpdateTimers();
  void OnIdleTimer();
  void ReportActivity();
  // Graceful close (lingering); no more requests are processed.
  void Finish();

  // ---- Input (h1_connection.cc) ----
  // Each returns true if it made progress.
  bool ReadInput();
  bool ReadBody(H1Exchange& ex);
  void StartExchange();
  // A reset exchange for the next request: the spare, a retired one, or a new one.
  std::unique_ptr<H1Exchange> TakeExchange();
  // End of an entry point: keeps one retired exchange as the spare, frees the others.
  void RecycleRetired();
  // The request body cannot complete (framing error, limit, timeout, peer gone).
  void BodyError(H1Exchange& ex, int status, absl::string_view reason);
  // The request that asked to upgrade did not switch: its body is empty after all.
  void EndUpgradeBody(H1Exchange& ex);
  // After a 101: the bytes that arrive are the new protocol's, handed over as they are.
  bool ReadTunnel(H1Exchange& ex);
  void ReportPeerLimit(PeerLimit limit);

  // ---- Output (h1_connection_output.cc) ----
  bool WriteOutput(size_t* produced);
  void WriteHead(H1Exchange& ex);
  // The 101 of a request that asked to upgrade: the head, then the tunnel.
  void WriteSwitchingHead(H1Exchange& ex);
  bool WriteBody(H1Exchange& ex, size_t* produced);
  bool WriteBufferBody(H1Exchange& ex, size_t* produced);
  bool WriteFileBody(H1Exchange& ex, size_t* produced);
  // Sends `out_` to the stream; records backpressure.
  void SendOut();
  // An engine-generated response (parse error, 408, ...) with Connection: close, then Finish.
  // Cancels the current exchange, whose head must not have been written.
  void SendErrorAndFinish(int status, absl::string_view reason);
  // The unread-body rule applies now (`at_head`: deciding Connection: close in advance).
  bool CanDiscardRest(const H1Exchange& ex, bool at_head) const;
  // Starts discarding the unread body of `ex` (the handler hears nothing more of it) and drops
  // what of it is already buffered, up to kMaxDiscard bytes.
  void DropArrivedBody(H1Exchange& ex);
  // The unread-body rule's switch: the body's reader is told it was discarded; ReadBody drops
  // what follows.
  void StartDiscarding(H1Exchange& ex);
  // Retires the current exchange once its response is written and its body is done, applying
  // the unread-body rule; true if something changed.
  bool MaybeRetire();
  void DropCurrent();
  // Tells the observer (if any) that `ex` ended; called once, as it leaves `current_`.
  void ReportDone(H1Exchange& ex) {
    if (options_.observer != nullptr || ex.response().wants_done()) ReportDoneNow(ex);
  }
  void ReportDoneNow(H1Exchange& ex);

  EventLoop* const loop_;
  TcpStream* const stream_;
  Dispatcher dispatcher_;
  const H1Options options_;
  h1::RequestParser parser_;
  http_internal::DateCache own_date_cache_;
  http_internal::DateCache* const date_cache_;
  ByteBuffer out_;          // serialization scratch, handed to TcpStream::Write
  h1::HeadMemo head_memo_;  // the last response head, for a repeat of it
  Timer header_timer_;
  Timer idle_timer_;
  Timer body_timer_;
  Timer send_timer_;
  absl::AnyInvocable<void(const absl::Status&)> on_closed_;
  absl::AnyInvocable<void(ConnectionActivity)> on_activity_;
  ConnectionActivity activity_ = ConnectionActivity::kIdle;  // as last reported

  std::unique_ptr<H1Exchange> current_;
  std::vector<std::unique_ptr<H1Exchange>> graveyard_;  // recycled at the end of the entry point
  std::unique_ptr<H1Exchange> spare_;                   // reset, ready for the next request
  std::string alpn_;
  std::string sni_;

  uint64_t requests_ = 0;
  uint64_t continues_sent_ = 0;
  uint64_t error_responses_ = 0;
  size_t max_pending_output_ = 0;
  uint64_t sendfile_responses_ = 0;

  // Waiting for a next request with nothing received, since idle_since_ (loop time).
  bool idle_ = false;
  TimePoint idle_since_{};

  int depth_ = 0;
  bool pump_wanted_ = false;  // work was recorded inside an entry point
  bool pump_posted_ = false;
  bool started_ = false;
  bool write_blocked_ = false;   // TcpStream::Write returned false; wait for OnWritable
  bool reading_paused_ = false;  // what we asked of the stream
  bool peer_finished_ = false;
  bool shutdown_requested_ = false;
  bool finishing_ = false;  // ShutdownAfterFlush called
  bool closed_ = false;
  // Posted tasks hold a copy; the destructor clears it so a late task does nothing.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_H1_H1_CONNECTION_H_
