// Internal: the HTTP/2 server engine for one TCP connection, on nghttp2. It adapts a TcpStream
// (TLS with ALPN "h2", or cleartext prior knowledge) to nghttp2's server session and each
// request stream to the protocol-independent Request / Response (DESIGN §6, §8):
//  - input: the TcpStream's input buffer goes to nghttp2_session_mem_recv as is;
//  - output: at the end of OnReadable, after every stream the input answered has queued its
//    frames, and otherwise once per loop turn (EventLoop::RunAfterBatch) for what handlers and
//    producers queue outside it, nghttp2_session_mem_send fills one contiguous batch that goes
//    to the TcpStream in one Write — one TLS record batch, one send — instead of one write per
//    frame. OnReadable runs once per readiness event, so a read that carried many requests
//    still answers them in one write; flushing there rather than queueing a turn-end task
//    saves the task's queueing and call on every request. The batch is bounded (kMaxWriteBatch);
//    pulling stops while Write() reports backpressure and resumes on OnWritable, so a response body
//    is pulled from its source only when there is room to send it;
//  - request bodies: DATA goes to RequestBody::Deliver; flow-control credit is returned only
//    when the handler consumed the bytes (no automatic WINDOW_UPDATE);
//  - limits and floods: see H2Options and FloodGuard; abuse ends in GOAWAY ENHANCE_YOUR_CALM;
//  - timeouts (one watchdog timer per connection): idle with no stream open, a request head or
//    body the peer stalls in (H2Options);
//  - Shutdown(): GOAWAY(2^31-1) + PING, then GOAWAY(last stream) on the PING ack (or a
//    timeout); in-flight streams finish, then the stream closes gracefully.
//
// Cost (DESIGN §6): streams come from a per-connection free list and keep their Request /
// Response storage; response fields go to nghttp2 as views (NO_COPY) into the Response's
// HeaderMap and the stream; buffer and file bodies are copied (pread) straight into nghttp2's
// DATA buffer. A steady stream of small requests allocates next to nothing in Petrel's frames.
//
// Re-entrancy: nghttp2 is only entered from this object's entry points (OnReadable, OnWritable,
// the turn-end flush, timers, Shutdown). Calls the handler makes into the engine (commit,
// resume, consume) only record work and request a flush, which runs when OnReadable ends or at
// the end of the current loop turn. Streams nghttp2 closed are recycled at the end of the entry
// point, never under a callback.
//
// Ownership: the owner keeps the TcpStream alive for the connection's lifetime; the connection
// installs itself as the stream's handler. on_closed runs once when the stream closed; the owner
// then destroys the connection (after the batch, never inside the callback). Destroying the
// connection cancels unfinished responses. Loop thread only.
#ifndef PETREL_HTTP_H2_H2_CONNECTION_H_
#define PETREL_HTTP_H2_H2_CONNECTION_H_

#include <nghttp2/nghttp2.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "http/h2/flood_guard.h"
#include "http/h2/h2_mem_pool.h"
#include "http/h2/h2_stream.h"
#include "http/library_nv.h"
#include "http/tcp/tcp_stream.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/timer.h"
#include "petrel/http/request.h"
#include "petrel/http/request_observer.h"
#include "petrel/http/response.h"

namespace petrel::http {

// Opaque data of the PING that follows the shutdown notice; its ACK triggers the final GOAWAY.
inline constexpr uint8_t kShutdownPingOpaque[8] = {'p', 'e', 't', 'r', 'e', 'l', 'g', 'o'};

// A name/value pair for nghttp2 that points at the given bytes. With NGHTTP2_NV_FLAG_NONE
// nghttp2 copies them on submit; with the NO_COPY flags the bytes must stay put until the frame
// is sent or dropped.
inline nghttp2_nv MakeNv(absl::string_view name, absl::string_view value,
                         uint8_t flags = NGHTTP2_NV_FLAG_NONE) {
  return http_internal::MakeLibraryNv<nghttp2_nv>(name, value, flags);
}

struct H2Options {
  // SETTINGS we announce (DESIGN §8, defaults after hyper).
  uint32_t max_concurrent_streams = 200;
  int32_t initial_window_size = 1 << 20;     // per stream
  int32_t connection_window_size = 1 << 20;  // connection-level receive window
  uint32_t max_frame_size = 16 * 1024;
  // Field section size (RFC 9113 §6.5.2: names + values + 32 per field). Bigger requests get
  // 431; a header block far beyond it trips the CONTINUATION guard.
  uint32_t max_header_list_size = 64 * 1024;
  // Request body limit: a larger Content-Length gets 413, more DATA than this resets the stream.
  uint64_t max_request_body = 10 << 20;
  H2FloodLimits floods;
  // nghttp2's own bound on queued PING/SETTINGS ACKs when the peer does not read.
  size_t max_outbound_ack = 1000;
  // Graceful shutdown: how long to wait for the PING ack before the final GOAWAY.
  Duration shutdown_ping_timeout = std::chrono::seconds(1);
  // With no stream open for this long (PINGs and SETTINGS do not count), the connection ends:
  // GOAWAY(NO_ERROR), then close. Zero: never (not recommended: an idle peer holds a socket).
  Duration idle_timeout = std::chrono::seconds(60);
  // A request head (HEADERS and its CONTINUATIONs) not complete this long after it began ends
  // the connection: GOAWAY(NO_ERROR), then close (a header block cannot be abandoned alone: the
  // HPACK state depends on it). Zero: never.
  Duration header_timeout = std::chrono::seconds(10);
  // A request body the peer stops sending for this long, while it has flow-control credit to
  // send it (or once the response is done), fails (the handler's read ends with
  // DeadlineExceeded) and the stream is reset: CANCEL, or NO_ERROR after a complete response
  // (RFC 9113 §8.1). Zero: never.
  Duration body_timeout = std::chrono::seconds(60);
  // Output that stays blocked this long (the TcpStream's queue does not drain: the peer does
  // not read) closes the connection; a response the peer's flow-control window holds back
  // this long (no WINDOW_UPDATE) has its stream reset (CANCEL). Zero: never.
  Duration send_timeout = std::chrono::seconds(60);
  // Told about every finished request (metrics, access log); not owned; null: none.
  RequestObserver* observer = nullptr;
};

class H2Connection final : public StreamHandler {
 public:
  // Runs each request (e.g. a Router's Handle). Called on the loop thread inside the engine's
  // entry point; it may commit the Response now or later.
  using Dispatcher = absl::AnyInvocable<void(Request& request, Response& response)>;

  // `loop` and `stream` are not owned and must outlive the connection.
  H2Connection(EventLoop* loop, TcpStream* stream, Dispatcher dispatcher,
               const H2Options& options = {});
  ~H2Connection() override;
  H2Connection(const H2Connection&) = delete;
  H2Connection& operator=(const H2Connection&) = delete;

  // Creates the session, queues our SETTINGS and processes bytes already in the stream's input
  // buffer (the cleartext preface the server peeked at, or data read with the TLS handshake).
  absl::Status Start();

  // Graceful shutdown (see the file comment). Idempotent.
  void Shutdown();

  // Runs once, after the TcpStream closed; `reason` is OK for a graceful close.
  void set_on_closed(absl::AnyInvocable<void(const absl::Status&)> on_closed) {
    on_closed_ = std::move(on_closed);
  }
  // Runs when the connection's activity changes (metrics): kActive while a stream is open,
  // kClosing once a GOAWAY went either way or the TcpStream is closing. It starts kIdle, is
  // checked at the end of each outermost entry point (so a stream opened and closed within one
  // goes unreported), and is not called after the TcpStream closed. Set before Start().
  void set_on_activity(absl::AnyInvocable<void(ConnectionActivity)> on_activity) {
    on_activity_ = std::move(on_activity);
  }

  // Observability / tests.
  size_t open_streams() const { return streams_.size(); }
  uint64_t requests() const { return requests_; }
  // TcpStream::Write calls made, and flush passes that ran (at the end of OnReadable or of the
  // turn): frames of all streams answered by one read leave in one write (more only past
  // kMaxWriteBatch bytes).
  uint64_t writes() const { return writes_; }
  uint64_t flushes() const { return flushes_; }
  // Streams waiting in the free list for reuse.
  size_t free_streams() const { return free_streams_.size(); }
  const H2MemPool& mem_pool() const { return mem_pool_; }
  // Why the connection sent GOAWAY ENHANCE_YOUR_CALM, "" if it did not.
  absl::string_view calm_reason() const { return guard_.reason(); }
  bool shutting_down() const { return shutdown_started_; }

  // StreamHandler.
  void OnReadable(ByteBuffer& input) override;
  void OnWritable() override;
  void OnPeerFinished() override;
  void OnClosed(const absl::Status& reason) override;

 private:
  friend class H2Stream;
  friend struct H2SessionCallbacks;
  // Marks an entry point: on exit the outermost one schedules the turn-end flush (or, in that
  // flush, runs it) and recycles closed streams.
  class Entry {
   public:
    explicit Entry(H2Connection* c) : c_(c) { ++c_->depth_; }
    ~Entry() {
      if (c_->depth_ == 1) {
        c_->AfterEntry();
        if (c_->on_activity_) c_->ReportActivity();
      }
      --c_->depth_;
    }
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;

   private:
    H2Connection* const c_;
  };

  // ---- nghttp2 callbacks (h2_session_callbacks.cc); return nghttp2 error codes ----
  int OnBeginFrame(const nghttp2_frame_hd& hd);
  int OnBeginHeaders(const nghttp2_frame& frame);
  int OnHeader(const nghttp2_frame& frame, absl::string_view name, absl::string_view value);
  int OnFrameRecv(const nghttp2_frame& frame);
  int OnDataChunk(uint8_t flags, int32_t stream_id, absl::string_view data);
  int OnStreamClose(int32_t stream_id, uint32_t error_code);
  int OnFrameSend(const nghttp2_frame& frame);
  ssize_t ReadResponseData(H2Stream& stream, uint8_t* buf, size_t length, uint32_t* data_flags);

  // ---- Streams and requests (h2_connection.cc) ----
  // A stream for `id` from the free list (or a new one), registered with nghttp2.
  H2Stream& OpenStream(int32_t id);
  // Frees the closed streams in graveyard_, keeping a few in the free list.
  void RecycleClosedStreams();
  void Dispatch(H2Stream& stream);
  // Sink / source calls from H2Stream.
  void ConsumeBody(H2Stream& stream, size_t bytes);
  void AbandonBody(H2Stream& stream);
  // Queues GOAWAY ENHANCE_YOUR_CALM (once); returns what the callback should return.
  int Calm();

  // ---- Output (h2_output.cc) ----
  // Submits the response HEADERS (and the DATA source) of a committed Response.
  void StartResponse(H2Stream& stream);
  // Queues the trailers after the last DATA frame, if there are any; called only when the
  // response has trailers or a producer (which may hand some over at its end).
  void SubmitTrailers(H2Stream& stream, uint32_t* data_flags);
  // Asks for a flush at the end of the loop turn.
  void RequestFlush();
  void ScheduleFlush();
  // The RunAfterBatch task: the turn's nghttp2_session_mem_send pass for output queued
  // outside OnReadable.
  void FlushAtTurnEnd();
  // Moves what nghttp2 has ready into the TcpStream, one batch per Write.
  void Flush();
  // Runs at the end of each outermost entry point.
  void AfterEntry();
  void MaybeFinish();
  // Whether some open stream still has a response to send and flow-control window left to
  // send it in. Once the peer has finished sending, no WINDOW_UPDATE can come (streams without
  // window never finish) and no unfinished request head can be completed (those streams never
  // get a handler).
  bool AnyStreamCanSend() const;
  // Notes when the connection last became idle (no stream open); the watchdog reads it.
  void UpdateIdleSince();
  // The watchdog (every WatchdogPeriod while the connection lives, a timer started once, so a
  // request costs no timer operations): the idle timeout, and streams whose peer stalled
  // inside a request head or body (H2Options::header_timeout, body_timeout).
  void OnWatchdog();
  Duration WatchdogPeriod() const;
  // True when `s` has a response to send and the peer's flow-control window has stayed shut on
  // it, with no DATA leaving, for H2Options::send_timeout (the watchdog then resets it).
  bool WindowStalled(H2Stream& s, TimePoint now);
  // Calls on_activity_ if the activity changed; after AfterEntry (h2_connection.cc).
  void ReportActivity();
  void SendFinalGoaway();  // h2_shutdown.cc
  H2Stream* FindStream(int32_t id) const {
    // The fields of a header block arrive one callback each, and the frames of a small
    // response are sent one after the other, all for the same stream.
    if (last_found_ != nullptr && last_found_->id() == id) return last_found_;
    return FindStreamSlow(id);
  }
  H2Stream* FindStreamSlow(int32_t id) const;
  // Removes an open stream from streams_ and hands it over.
  std::unique_ptr<H2Stream> TakeStream(H2Stream& stream);
  // Tells the observer (if any) that a dispatched stream ended; once per stream.
  void ReportDone(H2Stream& stream);
  void ReportPeerLimit(PeerLimit limit);

  EventLoop* const loop_;
  TcpStream* const stream_;
  Dispatcher dispatcher_;
  const H2Options options_;
  H2MemPool mem_pool_;  // nghttp2's allocator; outlives session_ (deleted in the destructor body)
  nghttp2_session* session_ = nullptr;
  FloodGuard guard_;
  Timer shutdown_timer_;
  Timer watchdog_timer_;                 // OnWatchdog
  std::optional<TimePoint> idle_since_;  // set while no stream is open
  TimePoint write_blocked_since_;        // when write_blocked_ last turned true
  absl::AnyInvocable<void(const absl::Status&)> on_closed_;
  absl::AnyInvocable<void(ConnectionActivity)> on_activity_;
  ConnectionActivity activity_ = ConnectionActivity::kIdle;  // as last reported

  // Open streams in no order; each knows its index (H2Stream::slot), so closing one is a swap
  // with the last. Lookup by id goes through nghttp2's stream user data (FindStream): nghttp2
  // keeps that map anyway, so a second one here would only cost a hash per open and close.
  std::vector<std::unique_ptr<H2Stream>> streams_;
  H2Stream* last_found_ = nullptr;  // FindStream's one-entry cache (a header block's fields)
  std::vector<std::unique_ptr<H2Stream>> graveyard_;     // closed; recycled after the entry
  std::vector<std::unique_ptr<H2Stream>> free_streams_;  // reset, ready for a new stream
  std::vector<int32_t> resumes_;                         // streams whose producer asked to resume
  std::vector<nghttp2_nv> nva_;  // StartResponse's field list, reused (nghttp2 copies the array)
  std::string alpn_;
  std::string sni_;
  uint64_t requests_ = 0;
  uint64_t writes_ = 0;
  uint64_t flushes_ = 0;

  int depth_ = 0;                 // nesting of entry points
  bool flush_wanted_ = false;     // a handler or producer asked for output
  bool flush_scheduled_ = false;  // FlushAtTurnEnd is queued on the loop
  bool flush_on_exit_ = false;    // the outermost entry point's exit runs the flush passes
  bool write_blocked_ = false;    // TcpStream::Write returned false; wait for OnWritable
  bool shutdown_started_ = false;
  bool final_goaway_sent_ = false;
  bool peer_finished_ = false;
  bool finishing_ = false;  // ShutdownAfterFlush called
  bool closed_ = false;
  bool calm_ = false;  // GOAWAY ENHANCE_YOUR_CALM queued
  // A GOAWAY was sent or received: only then can nghttp2 stop wanting to read, so MaybeFinish
  // asks it only then.
  bool goaway_seen_ = false;
  bool protocol_error_reported_ = false;  // a GOAWAY for the peer's error was counted
  // Queued tasks hold a copy; the destructor clears it so a late task does nothing. Shared
  // because the loop's task queues, not this object, decide when the last copy goes. A task
  // that captures only this fits in AnyInvocable's inline storage: queuing allocates nothing.
  std::shared_ptr<H2Connection*> self_ = std::make_shared<H2Connection*>(this);
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_H2_H2_CONNECTION_H_
