// Internal: the HTTP/3 server engine for one QUIC connection, on nghttp3. It adapts the
// connection's streams (QuicConnection) to nghttp3's server session and each request stream to
// the protocol-independent Request / Response (DESIGN §6, §8):
//  - input: stream data goes to nghttp3_conn_read_stream; the bytes nghttp3 reports consumed
//    (framing, QPACK, control streams) are credited at once, request-body bytes only when the
//    handler consumed them (RequestBody -> OnConsumed -> QuicConnection::Consume);
//  - output: this object is the connection's QuicStreamSource. The QUIC write pass pulls
//    nghttp3's bytes (frames, and the body chunks it holds by reference) straight into its
//    packets with nghttp3_conn_writev_stream, tells nghttp3 what went out
//    (nghttp3_conn_add_write_offset), and passes acknowledgements on
//    (nghttp3_conn_add_ack_offset, which frees the body chunks): no second queue of the same
//    bytes, and a body is read from its producer only when a packet has room for it. A stream
//    whose flow-control window is shut is blocked in nghttp3 until the peer opens it. A flush
//    only asks the connection for a write pass (QuicConnection::WantWrite);
//  - response bodies: nghttp3's data reader pulls from the Response body as a producer (buffer,
//    FileBody or BodyProducer); a producer with nothing yet parks the stream
//    (NGHTTP3_ERR_WOULDBLOCK) until its resume callback, then nghttp3_conn_resume_stream;
//  - trailers both ways; peer resets cancel the handler's Response; Shutdown() sends GOAWAY
//    and lets in-flight streams finish.
//
// Re-entrancy: nghttp3 is only entered from this object's entry points (the On* methods the
// QUIC callbacks call, posted flushes, Shutdown). Calls the handler makes into the engine
// (commit, resume, consume) only record work and request a flush. On the loop thread the flush
// runs once after the loop's current batch (EventLoop::RunAfterBatch): all the streams answered
// while a batch of datagrams was read are submitted to nghttp3 before the connection's write
// timer (due now) pulls them into packets. From another thread the flush is posted to `loop`.
// Body producers also run inside the write pass (nghttp3's read_data); what they ask for is
// flushed after it. Streams nghttp3 closed are released at the end of the entry point, never
// under a callback.
//
// Without a loop (tests drive the engine by hand) the flush runs at the end of the entry point,
// or at once, synchronously, when requested outside one.
//
// Ownership: the QuicConnection owns this object as its AppData and destroys it after
// on_connection_closed; `conn` is therefore valid for the whole life of this object. Loop
// (connection) thread only.
#ifndef PETREL_HTTP_H3_H3_CONNECTION_H_
#define PETREL_HTTP_H3_H3_CONNECTION_H_

#include <nghttp3/nghttp3.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/functional/any_invocable.h"
#include "absl/strings/string_view.h"
#include "common/small_block_pool.h"
#include "http/h3/h3_callbacks.h"
#include "http/h3/h3_stream.h"
#include "http/rate_counter.h"
#include "petrel/common/after_batch.h"
#include "petrel/common/clock.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/timer.h"
#include "petrel/http/request.h"
#include "petrel/http/request_observer.h"
#include "petrel/http/response.h"
#include "petrel/quic/quic_connection.h"
#include "quic/connection/stream_map.h"

namespace petrel::http {

// Runs each request (e.g. a Router's Handle). Const-callable: one dispatcher serves every
// connection of every worker thread, concurrently. It may commit the Response now or later.
using H3Dispatcher = absl::AnyInvocable<void(Request& request, Response& response) const>;

struct H3Options {
  // SETTINGS we announce (DESIGN §8).
  uint64_t max_field_section_size = 64 * 1024;  // bigger request heads get 431
  size_t qpack_max_dtable_capacity = 4096;      // decoder side: the peer's encoder may use this
  size_t qpack_encoder_max_dtable_capacity = 4096;
  size_t qpack_blocked_streams = 100;
  // Request body limit: a larger Content-Length gets 413, more DATA than this resets the stream
  // (H3_REQUEST_CANCELLED).
  uint64_t max_request_body = 10 << 20;
  // GOAWAY (Shutdown()) once this many requests arrived on a connection; those finish. 0: no
  // limit.
  uint64_t max_requests = 0;
  // Rapid reset (the HTTP/3 form of CVE-2023-44487): more than `max_resets` requests the
  // client cancels (RESET_STREAM or STOP_SENDING) before their response completed, within one
  // `reset_window`, close the connection with H3_EXCESSIVE_LOAD. Each such request costs a
  // handler run and gives the client its stream credit straight back. Browsers cancel a few
  // requests when the user navigates away.
  uint32_t max_resets = 100;
  Duration reset_window = std::chrono::seconds(1);
  // A request head not complete this long after its stream opened, and a request body the peer
  // stops sending for this long while it has flow-control credit (or once the response was
  // handed over), end the stream: H3_REQUEST_INCOMPLETE, H3_REQUEST_CANCELLED (the handler's
  // read fails with DeadlineExceeded), or STOP_SENDING(H3_NO_ERROR) after a complete response.
  // The QUIC idle timeout does not see these: the peer may keep the connection alive. Zero:
  // never. Enforced by a watchdog every half of the shorter one (needs an event loop).
  Duration header_timeout = std::chrono::seconds(10);
  Duration body_timeout = std::chrono::seconds(60);
  // Response bytes waiting for the peer of which it acknowledges nothing this long — it keeps
  // the stream's (or the connection's) flow-control window shut, or stops acknowledging while
  // it keeps the connection alive — end the stream: H3_REQUEST_CANCELLED. A response waiting
  // for its handler is not the peer's stall. Zero: never. Enforced by the same watchdog.
  Duration send_timeout = std::chrono::seconds(60);
  // Bytes pulled from a response producer per read.
  size_t body_chunk = 64 * 1024;
  // How long a connection with no stream open keeps the blocks nghttp3 used (up to 256 KiB)
  // before it gives back all but 32 KiB. Without an event loop: at once.
  Duration memory_trim_delay = std::chrono::seconds(1);
  // Told about every finished request (metrics, access log); not owned, shared by every
  // connection of every worker; null: none.
  RequestObserver* observer = nullptr;
};

// The field lines of one response head or trailer section for nghttp3, which copies them on
// submit. Reused by every response of a connection, so a steady stream of responses allocates
// nothing here.
struct H3FieldList {
  // Starts a section of at most `fields` plus two fields.
  void Clear(const HeaderMap& fields);
  // A lowercased copy of `name` (one of the fields passed to Clear), valid until Clear.
  absl::string_view Lower(absl::string_view name);
  void Add(absl::string_view name, absl::string_view value) {
    nva.push_back(MakeH3Nv(name, value));
  }
  void AddLowered(absl::string_view name, absl::string_view value) { Add(Lower(name), value); }

  std::vector<nghttp3_nv> nva;

 private:
  std::string lowered_;
  size_t used_ = 0;
};

class H3Connection final : public QuicConnection::AppData, private QuicStreamSource {
 public:
  // `conn` owns this object (see above); `dispatcher` and `loop` (may be null) are not owned
  // and must outlive it.
  H3Connection(QuicConnection* conn, const H3Dispatcher* dispatcher, EventLoop* loop,
               const H3Options& options = {});
  ~H3Connection() override;
  H3Connection(const H3Connection&) = delete;
  H3Connection& operator=(const H3Connection&) = delete;

  // Creates the nghttp3 session (idempotent; the first On* call does it too). False if
  // nghttp3 could not be created, after which the connection is closed.
  bool Start();

  // ---- Entry points: the QUIC callbacks of this connection, forwarded ----
  void OnHandshakeCompleted();
  void OnStreamData(int64_t stream, absl::string_view data, bool fin);
  void OnStreamReset(int64_t stream, uint64_t app_error);
  void OnStreamStopSending(int64_t stream, uint64_t app_error);
  void OnStreamClosed(int64_t stream);
  void OnConnectionClosed();

  // Graceful shutdown: GOAWAY (no new requests); in-flight streams finish. Idempotent.
  void Shutdown();

  // Observability / tests.
  size_t open_streams() const { return streams_.size(); }
  // The GOAWAY was submitted and has not yet gone into a packet whole.
  bool goaway_unsent() const { return goaway_unsent_; }
  uint64_t requests() const { return requests_; }
  bool shutting_down() const { return shutdown_started_; }

 private:
  friend class H3Stream;
  friend struct H3Callbacks;
  // Marks an entry point: the outermost one flushes output and frees closed streams on exit.
  class Entry {
   public:
    explicit Entry(H3Connection* c) : c_(c) { ++c_->depth_; }
    ~Entry() {
      if (c_->depth_ == 1) c_->AfterEntry();
      --c_->depth_;
    }
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;

   private:
    H3Connection* const c_;
  };

  // ---- nghttp3 callbacks (h3_callbacks.cc); return 0 or an nghttp3 error code ----
  int OnStreamClose(int64_t id, uint64_t app_error);
  // `s` is the stream's H3Stream, or null when the engine does not track it.
  int OnRecvData(int64_t id, H3Stream* s, absl::string_view data);
  int OnDeferredConsume(int64_t id, size_t consumed);
  int OnBeginHeaders(int64_t id);
  // Inlined into nghttp3's recv_header trampoline, its one caller (h3_callbacks.cc): it runs
  // for every field of every request.
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline int OnRecvHeader(H3Stream* s, int32_t token,
                                                       nghttp3_rcbuf* name, nghttp3_rcbuf* value);
  int OnEndHeaders(H3Stream* s, bool fin);
  int OnRecvTrailer(H3Stream* s, int32_t token, absl::string_view name, absl::string_view value);
  int OnEndTrailers(H3Stream* s);
  int OnEndStream(H3Stream* s);
  int OnStopSending(int64_t id, uint64_t app_error);
  int OnResetStream(int64_t id, uint64_t app_error);
  nghttp3_ssize ReadFileData(H3Stream& s, nghttp3_vec* vec, size_t veccnt, uint32_t* pflags);
  nghttp3_ssize ReadResponseData(H3Stream& s, nghttp3_vec* vec, size_t veccnt, uint32_t* pflags);
  // At the body's end: the response's trailers and the producer's, if any, are submitted by
  // the next flush, and the DATA stream stays open for them.
  void QueueTrailers(H3Stream& s, const HeaderMap& producer_trailers, uint32_t* pflags);

  // ---- Requests (h3_connection.cc) ----
  void Dispatch(H3Stream& s);
  // Ends the stream with a stream error (both directions).
  void StreamError(H3Stream& s, uint64_t app_error);
  // nghttp3 found request `stream` malformed while reading `bytes` of it: H3_MESSAGE_ERROR on
  // that stream alone.
  void MalformedRequest(int64_t stream, size_t bytes);
  // Sink / source calls from H3Stream.
  void StartResponse(H3Stream& s);
  void ConsumeBody(H3Stream& s, size_t bytes);
  void AbandonBody(H3Stream& s);
  // nghttp3 failed fatally: close the connection with its error and stop using nghttp3.
  void Fail(int liberr);

  // ---- Output: the QUIC write pass pulls (QuicStreamSource) ----
  Pulled PullStreamData(QuicStreamVec* vecs, size_t max) override;
  void OnStreamDataSent(int64_t stream, size_t bytes, bool all, bool fin) override;
  // QUIC acknowledged the next `bytes` written on `stream`: nghttp3 may free them.
  void OnStreamDataAcked(int64_t stream, uint64_t bytes) override;
  void OnStreamBlocked(int64_t stream) override;
  void OnStreamUnblocked(int64_t stream) override;

  void BindStreams();
  void RequestFlush();
  void PostFlush();  // one flush after the loop's current batch
  void RunFlush();   // that flush
  void Flush();
  void AfterEntry();
  void SettleOutput();  // Flush until handlers and producers ask for nothing more
  void ReleaseGraveyard();
  H3Stream* FindStream(int64_t id) const;
  void Bury(int64_t id);  // moves a stream to the graveyard, cancelling what is unfinished
  // Stream objects come from a per-thread pool and go back to it (bounded), so a steady
  // stream of requests allocates no H3Stream, field map or string.
  std::unique_ptr<H3Stream> NewStream(int64_t id);
  static void ReleaseStream(std::unique_ptr<H3Stream> s);
  static std::vector<std::unique_ptr<H3Stream>>& StreamPool();
  // Tells the observer (if any) that a dispatched stream ended; once per stream.
  void ReportDone(H3Stream& s);
  // The peer cancelled `s` (RESET_STREAM, or STOP_SENDING, seen as the stream closing) before
  // its response was handed over: counts it against H3Options::max_resets. True if that closed
  // the connection.
  bool CountCancel(const H3Stream& s);
  void ReportPeerLimit(PeerLimit limit);

  QuicConnection* const conn_;
  const H3Dispatcher* const dispatcher_;
  EventLoop* const loop_;
  const H3Options options_;
  // nghttp3's allocator: its per-stream objects (about 2.5 KiB in eight blocks per request)
  // come back from free lists instead of malloc. Sized for a hundred requests in flight; once
  // no stream is open the cache is trimmed to the default bound, so an idle connection keeps
  // little. Outlives h3_ (deleted in the destructor body).
  static constexpr size_t kMemPoolBusyBytes = 256 * 1024;
  SmallBlockPool mem_pool_{kMemPoolBusyBytes};
  // The trim waits until no stream has been open for options_.memory_trim_delay: trimming
  // whenever the last stream closes would free, between two bursts of requests, the blocks the
  // next burst allocates again (1.2-1.9 mallocs per request on a busy connection, measured).
  void StreamsIdle();
  void OnMemPoolTrimTimer();
  // The stall watchdog (H3Options::header_timeout, body_timeout, send_timeout);
  // WatchdogPeriod is Duration::max() when all are off.
  void OnWatchdog();
  // The watchdog's look at a response: true once the peer has acknowledged none of the bytes
  // waiting for it for send_timeout (its clock starts when the watchdog first sees bytes wait).
  bool SendStalled(H3Stream& s, TimePoint now);
  Duration WatchdogPeriod() const;
  TimePoint Now() const { return loop_ != nullptr ? loop_->now() : TimePoint(); }
  TimePoint idle_since_{};
  std::optional<Timer> mem_pool_trim_timer_;  // made with the first idle moment (needs loop_)
  std::optional<Timer> watchdog_timer_;       // made by Start (needs loop_)
  nghttp3_mem mem_{};
  nghttp3_conn* h3_ = nullptr;
  std::string alpn_;
  std::string sni_;

  quic::StreamMap<H3Stream> streams_;
  H3FieldList nv_;                                    // the head or trailers being submitted
  std::vector<std::unique_ptr<H3Stream>> graveyard_;  // closed, freed at the end of the entry
  std::vector<int64_t> resumes_;                      // streams whose producer asked to resume
  std::vector<int64_t> trailers_due_;  // streams whose body ended and whose trailers wait
  std::vector<std::pair<int64_t, uint64_t>> resets_due_;  // producer failures to reset
  int64_t control_stream_ = -1;
  int64_t qpack_streams_[2] = {-1, -1};
  uint64_t requests_ = 0;

  int depth_ = 0;              // nesting of entry points
  bool flush_wanted_ = false;  // a flush was requested inside an entry point
  bool flush_posted_ = false;  // a flush waits in flush_after_batch_ or in the loop's queue
  // The flush after the loop's batch (loop thread); absent without a loop. Declared after the
  // state its callback reads, destroyed before it.
  std::optional<AfterBatch> flush_after_batch_;
  bool shutdown_wanted_ = false;   // Shutdown() or max_requests: GOAWAY at the next flush
  bool server_stopping_ = false;   // Shutdown(): producers were told (OnServerStopping)
  bool shutdown_started_ = false;  // GOAWAY submitted
  bool goaway_unsent_ = false;     // submitted, and not yet written whole into a packet
  bool failed_ = false;            // nghttp3 failed; the connection is closing
  RateCounter cancels_;            // CountCancel
  bool closed_ = false;            // on_connection_closed ran
  // Posted tasks hold a copy; the destructor clears it so a late task does nothing. Shared
  // because the loop's task queue, not this object, decides when the last copy goes.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_H3_H3_CONNECTION_H_
