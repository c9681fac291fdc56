#include "http/h3/h3_connection.h"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "http/date_cache.h"
#include "http/field_names.h"
#include "http/h3/h3_callbacks.h"

namespace petrel::http {
void H3FieldList::Clear(const HeaderMap& fields) {
  nva.clear();
  nva.reserve(fields.size() + 2);
  size_t name_bytes = 0;
  for (const HeaderField& f : fields) name_bytes += f.name.size();
  // Sized once, so the views Lower hands out stay valid until the next Clear.
  lowered_.resize(name_bytes);
  used_ = 0;
}

absl::string_view H3FieldList::Lower(absl::string_view name) {
  char* out = lowered_.data() + used_;
  for (size_t i = 0; i < name.size(); ++i) out[i] = absl::ascii_tolower(name[i]);
  used_ += name.size();
  return absl::string_view(out, name.size());
}

// ---- H3Stream forwarding (sink and source calls may come from inside handler code) ----

void H3Stream::OnResponseStart(Response&) { connection_->StartResponse(*this); }
void H3Stream::OnConsumed(size_t bytes) { connection_->ConsumeBody(*this, bytes); }
void H3Stream::OnAbandoned() { connection_->AbandonBody(*this); }

// ---- Lifecycle ----

H3Connection::H3Connection(QuicConnection* conn, const H3Dispatcher* dispatcher, EventLoop* loop,
                           const H3Options& options)
    : conn_(conn),
      dispatcher_(dispatcher),
      loop_(loop),
      options_(options),
      cancels_(options.max_resets, options.reset_window) {}

H3Connection::~H3Connection() {
  *alive_ = false;
  // nghttp3_conn_del runs no callbacks; the streams go after it, cancelling what is unsent.
  if (h3_ != nullptr) nghttp3_conn_del(h3_);
  h3_ = nullptr;
  streams_.ForEach([this](int64_t, H3Stream& s) {
    s.request().body().set_source(nullptr);
    if (!s.response_done) s.response().Cancel();
    ReportDone(s);
  });
  streams_.Clear();
  graveyard_.clear();
}

bool H3Connection::Start() {
  if (h3_ != nullptr || failed_) return h3_ != nullptr;
  nghttp3_settings settings;
  nghttp3_settings_default(&settings);
  settings.max_field_section_size = options_.max_field_section_size;
  settings.qpack_max_dtable_capacity = options_.qpack_max_dtable_capacity;
  settings.qpack_encoder_max_dtable_capacity = options_.qpack_encoder_max_dtable_capacity;
  settings.qpack_blocked_streams = options_.qpack_blocked_streams;
  settings.enable_connect_protocol = 1;  // extended CONNECT (RFC 9220): WebSocket routes
  const nghttp3_callbacks callbacks = H3Callbacks::Table();
  mem_.user_data = &mem_pool_;
  mem_.malloc = &SmallBlockPool::MallocFn;
  mem_.free = &SmallBlockPool::FreeFn;
  mem_.calloc = &SmallBlockPool::CallocFn;
  mem_.realloc = &SmallBlockPool::ReallocFn;
  if (nghttp3_conn_server_new(&h3_, &callbacks, &settings, &mem_, this) != 0) {
    h3_ = nullptr;
    failed_ = true;
    conn_->Close(NGHTTP3_H3_INTERNAL_ERROR);
    return false;
  }
  // The GOAWAY id nghttp3 computes is bounded by this; the QUIC layer raises the client's
  // stream limit as streams close, so do not let a stale initial limit cut in-flight requests.
  nghttp3_conn_set_max_client_streams_bidi(h3_, uint64_t{1} << 58);
  conn_->SetStreamSource(this);
  alpn_ = conn_->alpn();
  sni_ = conn_->server_name();
  if (loop_ != nullptr && WatchdogPeriod() != Duration::max()) {
    watchdog_timer_.emplace(loop_, [this] { OnWatchdog(); });
    watchdog_timer_->StartAfter(WatchdogPeriod());
  }
  BindStreams();
  return true;
}

void H3Connection::BindStreams() {
  if (h3_ == nullptr || failed_) return;
  // Before the handshake the peer's stream limits may not be known yet: retried later.
  if (control_stream_ < 0) {
    const int64_t id = conn_->OpenUniStream();
    if (id < 0) return;
    control_stream_ = id;
    // The control and QPACK streams carry what request streams wait for (SETTINGS, GOAWAY,
    // dynamic table inserts a response refers to): written before any response's bytes.
    conn_->SetUrgent(id);
    if (const int rv = nghttp3_conn_bind_control_stream(h3_, id); rv != 0) return Fail(rv);
  }
  if (qpack_streams_[1] < 0) {
    if (qpack_streams_[0] < 0) qpack_streams_[0] = conn_->OpenUniStream();
    if (qpack_streams_[0] < 0) return;
    qpack_streams_[1] = conn_->OpenUniStream();
    if (qpack_streams_[1] < 0) return;
    conn_->SetUrgent(qpack_streams_[0]);
    conn_->SetUrgent(qpack_streams_[1]);
    if (const int rv = nghttp3_conn_bind_qpack_streams(h3_, qpack_streams_[0], qpack_streams_[1]);
        rv != 0) {
      return Fail(rv);
    }
  }
}

bool H3Connection::CountCancel(const H3Stream& s) {
  if (s.response_done || !cancels_.Add(MonotonicNow())) return false;
  failed_ = true;  // nothing more is read or answered; the streams go with the connection
  ReportPeerLimit(PeerLimit::kRapidReset);
  conn_->Close(NGHTTP3_H3_EXCESSIVE_LOAD);
  return true;
}

void H3Connection::Fail(int liberr) {
  if (failed_) return;
  failed_ = true;
  conn_->Close(nghttp3_err_infer_quic_app_error_code(liberr));
}

// ---- Entry points ----

void H3Connection::OnHandshakeCompleted() {
  if (closed_) return;
  Entry e(this);
  if (!Start()) return;
  BindStreams();
}

void H3Connection::OnStreamData(int64_t stream, absl::string_view data, bool fin) {
  if (closed_) return;
  Entry e(this);
  if (!Start() || failed_) {
    conn_->Consume(stream, data.size());
    return;
  }
  const nghttp3_ssize n = nghttp3_conn_read_stream(
      h3_, stream, reinterpret_cast<const uint8_t*>(data.data()), data.size(), fin ? 1 : 0);
  if (n < 0) {
    // A malformed request (a body that disagrees with its content-length, RFC 9114 §4.1.2) is
    // an error of its stream; nghttp3 leaves the connection usable.
    if ((n == NGHTTP3_ERR_MALFORMED_HTTP_MESSAGING || n == NGHTTP3_ERR_MALFORMED_HTTP_HEADER) &&
        (stream & 0x3) == 0) {
      return MalformedRequest(stream, data.size());
    }
    // Anything else nghttp3 refuses in the peer's bytes ends the connection (its own failures,
    // out of memory or a callback's, are not the peer's doing).
    if (n != NGHTTP3_ERR_NOMEM && n != NGHTTP3_ERR_CALLBACK_FAILURE && !failed_) {
      ReportPeerLimit(PeerLimit::kProtocolError);
    }
    return Fail(static_cast<int>(n));
  }
  // Framing, QPACK and control bytes: credited now; DATA payload as the handler consumes it.
  conn_->Consume(stream, static_cast<size_t>(n));
}

void H3Connection::MalformedRequest(int64_t stream, size_t bytes) {
  // What nghttp3 took of these bytes is not known; the stream's data is dropped from now on, so
  // crediting all of them costs at most this one chunk of window.
  conn_->Consume(stream, bytes);
  if (H3Stream* s = FindStream(stream)) {
    if (!s->reset) StreamError(*s, NGHTTP3_H3_MESSAGE_ERROR);
    return;
  }
  nghttp3_conn_shutdown_stream_read(h3_, stream);
  nghttp3_conn_shutdown_stream_write(h3_, stream);
  conn_->ResetStream(stream, NGHTTP3_H3_MESSAGE_ERROR);
}

void H3Connection::OnStreamReset(int64_t stream, uint64_t) {
  if (closed_ || h3_ == nullptr || failed_) return;
  Entry e(this);
  nghttp3_conn_shutdown_stream_read(h3_, stream);
  H3Stream* s = FindStream(stream);
  if (s == nullptr) return;
  if (!s->reset && CountCancel(*s)) return;
  // The client cancelled the request (RFC 9114 §4.1.1): stop answering it, too.
  s->reset = true;
  s->request().body().Fail(absl::CancelledError("h3: request stream reset by the peer"));
  if (!s->response_done) {
    nghttp3_conn_shutdown_stream_write(h3_, stream);
    conn_->ResetStream(stream, NGHTTP3_H3_REQUEST_CANCELLED);
    s->response().Cancel();
  }
}

void H3Connection::OnStreamStopSending(int64_t stream, uint64_t) {
  if (closed_ || h3_ == nullptr || failed_) return;
  Entry e(this);
  // The client no longer wants the response (RFC 9114 §4.1.1); the transport resets our side.
  // Without a response the request is moot: the handler is cancelled, the rest of the body
  // dropped as it arrives.
  nghttp3_conn_shutdown_stream_write(h3_, stream);
  H3Stream* s = FindStream(stream);
  if (s == nullptr || s->response_done || s->reset) return;
  s->reset = true;
  s->request().body().Fail(absl::CancelledError("h3: the peer stopped reading the response"));
  s->response().Cancel();
}

void H3Connection::OnStreamClosed(int64_t stream) {
  if (closed_ || h3_ == nullptr || failed_) return;
  Entry e(this);
  // A request stream closed before its response was handed over, and not by a reset of ours or
  // the peer's RESET_STREAM (counted there): the peer sent STOP_SENDING, which the transport
  // answers on its own.
  if (H3Stream* s = FindStream(stream); s != nullptr && !s->reset && CountCancel(*s)) return;
  const int rv = nghttp3_conn_close_stream(h3_, stream, NGHTTP3_H3_NO_ERROR);
  if (rv == NGHTTP3_ERR_STREAM_NOT_FOUND) {
    Bury(stream);  // nghttp3 never saw it (or forgot it): make sure the handler hears
  } else if (rv != 0) {
    Fail(rv);  // a critical stream closed: H3_CLOSED_CRITICAL_STREAM
  }
}

void H3Connection::OnConnectionClosed() {
  if (closed_) return;
  closed_ = true;
  conn_->SetStreamSource(nullptr);
  for (int64_t id : streams_.Ids()) Bury(id);
  if (depth_ == 0) graveyard_.clear();
}

void H3Connection::Shutdown() {
  if (closed_ || server_stopping_) return;  // (max_requests may have wanted a GOAWAY already)
  Entry e(this);
  shutdown_wanted_ = true;  // the flush at the end of this entry point sends GOAWAY
  server_stopping_ = true;
  streams_.ForEach([](int64_t, H3Stream& s) {
    if (s.producer != nullptr) s.producer->OnServerStopping();  // its resume only queues
  });
}

// ---- Requests ----

void H3Connection::Dispatch(H3Stream& s) {
  if (s.dispatched) return;
  s.dispatched = true;
  ++requests_;
  if (options_.observer != nullptr) s.started = MonotonicNow();
  if (options_.max_requests != 0 && requests_ >= options_.max_requests) {
    shutdown_wanted_ = true;  // from Flush: not from inside this nghttp3 callback
    flush_wanted_ = true;
  }
  Request& req = s.request();
  Response& res = s.response();
  req.set_version(HttpVersion::k3);
  req.set_observer(options_.observer);
  req.set_peer_address(conn_->peer_address());
  req.set_local_address(conn_->local_address());
  req.set_alpn(alpn_);
  req.set_sni(sni_);
  req.set_early_data(conn_->stream_early_data(s.id()));
  // Method, scheme, authority and target were filled in as the fields arrived (OnRecvHeader).
  if (req.authority().empty()) {
    if (auto host = req.headers().Get("host")) req.AssignAuthority(*host);
  }
  req.body().set_source(&s);
  res.set_sink(&s);

  bool rejected = http_internal::RejectUnservableHead(s.head, options_.max_request_body, req, res);
  if (!rejected && req.early_data() && !req.method().IsSafe()) {
    // RFC 8470: a request that may not be replayed safely waits for the handshake.
    req.body().Discard();
    res.Reject(425, "early data that may not be replayed");
    rejected = true;
  }
  (*dispatcher_)(req, res);
  // A dispatcher that is no Router leaves a rejection unanswered: the built-in page.
  if (rejected && res.rejected_status() != 0) {
    res.SendError(res.rejected_status(), res.rejection_reason());
  }
}

void H3Connection::StreamError(H3Stream& s, uint64_t app_error) {
  s.reset = true;
  s.body_abandoned = true;
  if (h3_ != nullptr) {
    nghttp3_conn_shutdown_stream_read(h3_, s.id());
    nghttp3_conn_shutdown_stream_write(h3_, s.id());
  }
  conn_->ResetStream(s.id(), app_error);
  s.request().body().Fail(absl::InvalidArgumentError("h3: stream error"));
  if (!s.response_done) s.response().Cancel();
}

void H3Connection::StartResponse(H3Stream& s) {
  if (s.response_submitted || s.closed || s.reset || h3_ == nullptr || failed_ || closed_) return;
  s.response_submitted = true;
  Response& res = s.response();
  const bool head = s.request().method().kind() == MethodKind::kHead;
  const std::optional<uint64_t> length = res.body().length();
  const int status = res.status();  // 200..599 (Response::Commit)

  // The field list points into the Response's HeaderMap and into the stream (NO_COPY): both stay
  // put until the stream is recycled, after nghttp3 has closed it, so nghttp3 neither copies nor
  // lowercases them. Names are lowercased in place, as HTTP/3 requires.
  constexpr uint8_t kNoCopy = NGHTTP3_NV_FLAG_NO_COPY_NAME | NGHTTP3_NV_FLAG_NO_COPY_VALUE;
  HeaderMap& headers = res.headers();
  headers.LowercaseNames();
  // Written by index into a list that only grows: no per-field push_back bookkeeping.
  std::vector<nghttp3_nv>& list = nv_.nva;
  if (list.size() < headers.size() + 3) list.resize(headers.size() + 3);  // + :status, date, length
  nghttp3_nv* const nva = list.data();
  size_t nvlen = 0;
  nva[nvlen++] = MakeH3Nv(":status", http_internal::StatusDigits(status), kNoCopy);
  bool has_date = false;
  for (const HeaderField f : headers) {
    const http_internal::FieldRole role = http_internal::ResponseFieldRole(f.name);
    if (role == http_internal::FieldRole::kDrop) continue;
    has_date = has_date || role == http_internal::FieldRole::kDate;
    nva[nvlen++] = MakeH3Nv(f.name, f.value, kNoCopy);
  }
  // RFC 9110 §6.6.1: an origin server with a clock sends Date; the handler's own wins.
  if (!has_date) {
    nva[nvlen++] = MakeH3Nv("date", http_internal::ThreadDateCache().Get(), kNoCopy);
  }
  if (length.has_value() && status != 204 && status != 304) {
    const std::to_chars_result r =
        std::to_chars(s.length_text, s.length_text + sizeof(s.length_text), *length);
    nva[nvlen++] = MakeH3Nv(
        "content-length",
        absl::string_view(s.length_text, static_cast<size_t>(r.ptr - s.length_text)), kNoCopy);
  }

  const bool is_producer = res.body().kind() == ResponseBody::Kind::kProducer;
  // A small buffer body goes to nghttp3 where it is, in one read: it stays in the Response,
  // which outlives every reference nghttp3 and ngtcp2 keep (the stream is recycled after both
  // closed it). Wrapping it in a producer would cost an allocation per response. Larger ones are
  // pulled in body_chunk pieces.
  const std::string* buffer = res.body().buffer();
  if (buffer != nullptr && buffer->size() <= options_.body_chunk && !head) {
    s.buffer_pending = true;
  } else if (FileBody* file = res.body().file(); file != nullptr && !head) {
    s.file.emplace(std::move(*file));
    s.file_position = 0;
  } else {
    s.producer = res.body().ReleaseAsProducer();
  }
  const bool no_body =
      (head && !is_producer) ||
      (length.has_value() && *length == 0 && res.trailers().empty() && !is_producer) ||
      status == 204 || status == 304;
  int rv = 0;
  if (no_body) {
    s.producer.reset();
    s.file.reset();
    s.buffer_pending = false;
    rv = nghttp3_conn_submit_response(h3_, s.id(), nva, nvlen, nullptr);
  } else {
    s.discard_body = head;
    const int64_t id = s.id();
    if (s.producer != nullptr) {
      s.producer->SetResumeCallback([this, id] {
        resumes_.push_back(id);
        RequestFlush();
      });
      if (server_stopping_) s.producer->OnServerStopping();
    }
    nghttp3_data_reader reader{&H3Callbacks::ReadData};
    rv = nghttp3_conn_submit_response(h3_, s.id(), nva, nvlen, &reader);
  }
  if (rv != 0) resets_due_.emplace_back(s.id(), NGHTTP3_H3_INTERNAL_ERROR);
  RequestFlush();
}

void H3Connection::ConsumeBody(H3Stream& s, size_t bytes) {
  if (s.closed || closed_) return;
  bytes = std::min(bytes, s.unconsumed);
  s.unconsumed -= bytes;
  conn_->Consume(s.id(), bytes);
}

void H3Connection::AbandonBody(H3Stream& s) {
  if (s.closed || closed_) return;
  s.body_abandoned = true;
  // Nobody reads the rest: credit what is held and, from now on, what arrives. (STOP_SENDING
  // alone would be better, but QuicConnection offers only a reset of both directions.)
  conn_->Consume(s.id(), s.unconsumed);
  s.unconsumed = 0;
}

H3Stream* H3Connection::FindStream(int64_t id) const { return streams_.Find(id); }

void H3Connection::Bury(int64_t id) {
  std::unique_ptr<H3Stream> s = streams_.Take(id);
  if (s == nullptr) return;
  s->closed = true;
  // Credit for bytes the handler will never consume now.
  if (s->unconsumed > 0 && !closed_) conn_->Consume(id, s->unconsumed);
  s->unconsumed = 0;
  RequestBody& body = s->request().body();
  body.set_source(nullptr);
  if (!body.eof()) body.Fail(absl::CancelledError("h3: stream closed"));
  if (!s->response_done) s->response().Cancel();
  ReportDone(*s);
  graveyard_.push_back(std::move(s));
}

void H3Connection::ReportDone(H3Stream& s) {
  if (!s.dispatched || s.reported) return;
  if (options_.observer == nullptr && !s.response().wants_done()) return;
  s.reported = true;
  RequestRecord r;
  r.protocol = HttpProtocol::kHttp3;
  r.request = &s.request();
  r.peer = &s.request().peer_address();
  r.status = s.response_submitted ? s.response().status() : 0;
  r.body_bytes = s.body_sent;
  r.start = s.started;
  r.completed = s.response_done && !s.reset;
  if (options_.observer != nullptr) options_.observer->OnRequestDone(r);
  s.response().RunDone(r);
}

// ---- Output ----

void H3Connection::RequestFlush() {
  if (depth_ > 0) {
    flush_wanted_ = true;
    return;
  }
  if (closed_) return;
  if (loop_ == nullptr) {
    Entry e(this);  // no loop to post to: flush now (see the file comment)
    return;
  }
  PostFlush();
}

void H3Connection::PostFlush() {
  if (flush_posted_) return;
  flush_posted_ = true;
  // Later in this turn (after the batch of datagrams being read, or after the timer or task
  // that answered), not through the loop's queue: no wake-up, no extra turn between the answer
  // and its packet, and the connection's write (a timer due now) still follows.
  if (loop_->IsInLoopThread()) {
    if (!flush_after_batch_.has_value()) flush_after_batch_.emplace(loop_, [this] { RunFlush(); });
    flush_after_batch_->Schedule();
  } else {
    loop_->Post([this, alive = alive_] {
      if (*alive) RunFlush();
    });
  }
}

void H3Connection::RunFlush() {
  flush_posted_ = false;
  ++depth_;  // what handlers ask for during the flush is picked up by its rounds
  SettleOutput();
  ReleaseGraveyard();
  --depth_;
}

void H3Connection::Flush() {
  if (h3_ == nullptr || failed_ || closed_) return;
  if (shutdown_wanted_ && !shutdown_started_) {
    shutdown_started_ = true;
    if (const int rv = nghttp3_conn_shutdown(h3_); rv != 0) return Fail(rv);
    goaway_unsent_ = true;
  }
  for (int64_t id : std::exchange(resumes_, {})) {
    if (FindStream(id) != nullptr) nghttp3_conn_resume_stream(h3_, id);
  }
  for (int64_t id : std::exchange(trailers_due_, {})) {
    H3Stream* s = FindStream(id);
    if (s == nullptr || s->reset) continue;
    const HeaderMap trailers = std::move(s->response_trailers);
    nv_.Clear(trailers);
    for (const HeaderField& f : trailers) nv_.AddLowered(f.name, f.value);
    if (nghttp3_conn_submit_trailers(h3_, id, nv_.nva.data(), nv_.nva.size()) != 0) {
      resets_due_.emplace_back(id, NGHTTP3_H3_INTERNAL_ERROR);
    }
  }
  for (auto [id, error] : std::exchange(resets_due_, {})) {
    if (H3Stream* s = FindStream(id); s != nullptr && !s->reset) StreamError(*s, error);
  }
  conn_->WantWrite();  // its write pass pulls what nghttp3 has
}

QuicStreamSource::Pulled H3Connection::PullStreamData(QuicStreamVec* vecs, size_t max) {
  if (closed_ || h3_ == nullptr || failed_) return {};
  // Body producers run in here (nghttp3's read_data): what they ask for is recorded and
  // flushed after the write pass, not inside nghttp3.
  ++depth_;
  int64_t stream = -1;
  int fin = 0;
  static_assert(sizeof(QuicStreamVec) == sizeof(nghttp3_vec) &&
                offsetof(QuicStreamVec, base) == offsetof(nghttp3_vec, base) &&
                offsetof(QuicStreamVec, len) == offsetof(nghttp3_vec, len));
  const nghttp3_ssize n =
      nghttp3_conn_writev_stream(h3_, &stream, &fin, reinterpret_cast<nghttp3_vec*>(vecs), max);
  --depth_;
  if (depth_ == 0 &&
      (flush_wanted_ || !resumes_.empty() || !trailers_due_.empty() || !resets_due_.empty())) {
    flush_wanted_ = false;
    if (loop_ != nullptr) PostFlush();
  }
  if (n < 0) {
    Fail(static_cast<int>(n));
    return {};
  }
  if (stream < 0) return {};
  return Pulled{stream, static_cast<size_t>(n), fin != 0};
}

void H3Connection::OnStreamDataSent(int64_t stream, size_t bytes, bool all, bool fin) {
  if (closed_ || h3_ == nullptr || failed_) return;
  if (const int rv = nghttp3_conn_add_write_offset(h3_, stream, bytes); rv != 0) return Fail(rv);
  if (fin) {
    if (H3Stream* s = FindStream(stream)) s->response_done = true;
  } else if (all && stream == control_stream_) {
    goaway_unsent_ = false;  // everything the control stream had, a GOAWAY included, is out
  }
}

void H3Connection::OnStreamDataAcked(int64_t stream, uint64_t bytes) {
  // nghttp3 only releases buffers here (and calls acked_stream_data, which frees body chunks),
  // so there is nothing to flush. After a failure nghttp3 is left alone; its buffers go with it.
  if (closed_ || h3_ == nullptr || failed_) return;
  if (const int rv = nghttp3_conn_add_ack_offset(h3_, stream, bytes); rv != 0) Fail(rv);
}

void H3Connection::OnStreamBlocked(int64_t stream) {
  if (closed_ || h3_ == nullptr || failed_) return;
  nghttp3_conn_block_stream(h3_, stream);
}

void H3Connection::OnStreamUnblocked(int64_t stream) {
  if (closed_ || h3_ == nullptr || failed_) return;
  nghttp3_conn_unblock_stream(h3_, stream);
}

void H3Connection::AfterEntry() {
  // On the loop thread output waits for the end of the batch: every stream answered while the
  // batch's datagrams were read leaves in one nghttp3 pass, and entry points that produce
  // nothing (acknowledgements, stream closes) cost no pass of their own.
  if (loop_ != nullptr && loop_->IsInLoopThread()) {
    if (!closed_) PostFlush();
  } else {
    SettleOutput();
  }
  ReleaseGraveyard();
}

void H3Connection::SettleOutput() {
  // Flushing runs callbacks (producers, handlers) that may ask for more output; a few rounds
  // settle it, and anything left goes to a posted flush.
  bool pending = false;
  for (int round = 0; round < 4; ++round) {
    flush_wanted_ = false;
    Flush();
    pending = flush_wanted_ || !resumes_.empty() || !trailers_due_.empty() || !resets_due_.empty();
    if (!pending || failed_ || closed_) break;
  }
  flush_wanted_ = false;
  if (pending && loop_ != nullptr && !failed_ && !closed_) PostFlush();
}

void H3Connection::ReleaseGraveyard() {
  if (graveyard_.empty()) return;
  for (std::unique_ptr<H3Stream>& s : graveyard_) ReleaseStream(std::move(s));
  graveyard_.clear();
  if (streams_.empty()) StreamsIdle();
}

void H3Connection::StreamsIdle() {
  if (loop_ == nullptr) {
    mem_pool_.Trim(SmallBlockPool::kDefaultMaxCachedBytes);
    return;
  }
  // One timer start per delay at most, however many requests come and go in between: the
  // callback looks at how long the connection has really been idle.
  idle_since_ = loop_->now();
  if (!mem_pool_trim_timer_.has_value()) {
    mem_pool_trim_timer_.emplace(loop_, [this] { OnMemPoolTrimTimer(); });
  }
  if (!mem_pool_trim_timer_->armed())
    mem_pool_trim_timer_->StartAt(idle_since_ + options_.memory_trim_delay);
}

Duration H3Connection::WatchdogPeriod() const {
  Duration shortest = Duration::max();
  for (Duration d : {options_.header_timeout, options_.body_timeout, options_.send_timeout}) {
    if (d > Duration::zero()) shortest = std::min(shortest, d);
  }
  if (shortest == Duration::max()) return shortest;
  return std::max<Duration>(shortest / 2, std::chrono::milliseconds(10));
}

void H3Connection::OnWatchdog() {
  if (closed_ || h3_ == nullptr || failed_) return;
  Entry e(this);
  const TimePoint now = loop_->now();
  // Ids first: resetting a stream may close it at once (ngtcp2 calls back), which erases it from
  // streams_.
  for (int64_t id : streams_.Ids()) {
    H3Stream* found = FindStream(id);
    if (found == nullptr) continue;
    H3Stream& s = *found;
    if (s.closed || s.reset) continue;
    if (SendStalled(s, now)) {
      ReportPeerLimit(PeerLimit::kSendTimeout);
      s.peer_ended = true;
      StreamError(s, NGHTTP3_H3_REQUEST_CANCELLED);
      continue;
    }
    if (s.peer_ended) continue;
    if (s.peer_active == TimePoint()) {
      // First seen by the watchdog: the stall clock starts now (stamping every new stream
      // would cost each request a clock read).
      s.peer_active = now;
      continue;
    }
    if (!s.dispatched) {
      if (options_.header_timeout > Duration::zero() &&
          now - s.peer_active >= options_.header_timeout) {
        ReportPeerLimit(PeerLimit::kHeaderTimeout);
        s.dispatched = true;  // no handler runs
        StreamError(s, NGHTTP3_H3_REQUEST_INCOMPLETE);
      }
      continue;
    }
    // Bytes the handler has not consumed hold back the peer's credit: then the wait is the
    // handler's, not the peer's.
    // An extended CONNECT (a WebSocket) is a tunnel: silence is normal there.
    if (options_.body_timeout <= Duration::zero() || (s.unconsumed > 0 && !s.response_done) ||
        !s.request().protocol().empty() || now - s.peer_active < options_.body_timeout) {
      continue;
    }
    ReportPeerLimit(PeerLimit::kBodyTimeout);
    s.peer_ended = true;
    RequestBody& body = s.request().body();
    if (!body.eof()) {
      body.set_source(nullptr);
      body.Fail(absl::DeadlineExceededError("h3: request body timed out"));
    }
    if (s.response_done) {
      // The response is out: only the rest of the request is unwanted (RFC 9114 §4.1).
      s.body_abandoned = true;
      nghttp3_conn_shutdown_stream_read(h3_, id);
      conn_->StopSending(id, NGHTTP3_H3_NO_ERROR);
    } else {
      StreamError(s, NGHTTP3_H3_REQUEST_CANCELLED);
    }
  }
  watchdog_timer_->StartAfter(WatchdogPeriod());
}

bool H3Connection::SendStalled(H3Stream& s, TimePoint now) {
  if (options_.send_timeout <= Duration::zero() || s.out.empty()) {
    s.send_active = TimePoint();  // nothing waits for the peer (perhaps for the handler)
    return false;
  }
  if (s.send_active == TimePoint() || s.acked != s.acked_seen) {
    s.send_active = now;
    s.acked_seen = s.acked;
    return false;
  }
  return now - s.send_active >= options_.send_timeout;
}

void H3Connection::ReportPeerLimit(PeerLimit limit) {
  if (options_.observer != nullptr) options_.observer->OnPeerLimit(HttpProtocol::kHttp3, limit);
}

void H3Connection::OnMemPoolTrimTimer() {
  if (!streams_.empty()) return;  // busy again: the next idle moment starts the wait anew
  const TimePoint due = idle_since_ + options_.memory_trim_delay;
  if (loop_->now() < due) {
    mem_pool_trim_timer_->StartAt(due);
    return;
  }
  mem_pool_.Trim(SmallBlockPool::kDefaultMaxCachedBytes);
}

std::vector<std::unique_ptr<H3Stream>>& H3Connection::StreamPool() {
  // Per loop thread, shared by its connections: the pool follows the thread's load, not one
  // connection's peak, and needs no lock (a connection lives on one thread).
  thread_local std::vector<std::unique_ptr<H3Stream>> pool;
  return pool;
}

std::unique_ptr<H3Stream> H3Connection::NewStream(int64_t id) {
  std::vector<std::unique_ptr<H3Stream>>& pool = StreamPool();
  if (pool.empty()) return std::make_unique<H3Stream>(this, id);
  std::unique_ptr<H3Stream> s = std::move(pool.back());
  pool.pop_back();
  s->Bind(this, id);
  return s;
}

void H3Connection::ReleaseStream(std::unique_ptr<H3Stream> s) {
  // About 2 KiB each: up to 2 MiB per thread, enough for ten clients with 100 requests in flight.
  constexpr size_t kMaxPooledStreams = 1024;
  // A stream whose request head was large keeps large buffers: let it go.
  constexpr size_t kMaxPooledFieldBytes = 4096;
  std::vector<std::unique_ptr<H3Stream>>& pool = StreamPool();
  if (pool.size() >= kMaxPooledStreams ||
      s->request().headers().arena_size() > kMaxPooledFieldBytes ||
      s->response().headers().arena_size() > kMaxPooledFieldBytes) {
    return;
  }
  s->Clear();
  pool.push_back(std::move(s));
}

void H3Stream::Clear() {
  request_.Reset();
  response_.Reset();
  pseudo_seen = 0;
  scheme_http = false;
  path_origin = false;
  path_asterisk = false;
  malformed = false;
  head.Reset();
  in_trailers = false;
  trailers.Clear();
  dispatched = false;
  body_received = 0;
  unconsumed = 0;
  body_abandoned = false;
  peer_ended = false;
  peer_active = TimePoint();
  producer.reset();
  file.reset();
  file_position = 0;
  buffer_pending = false;
  out.Clear();
  acked = 0;
  acked_seen = 0;
  send_active = TimePoint();
  producer_ended = false;
  response_trailers.Clear();
  discard_body = false;
  response_submitted = false;
  response_done = false;
  reset = false;
  closed = false;
  started = TimePoint();
  body_sent = 0;
  reported = false;
}

}  // namespace petrel::http
