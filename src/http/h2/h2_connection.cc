#include "http/h2/h2_connection.h"

#include <openssl/ssl.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "http/h2/h2_session_callbacks.h"
#include "quic/tls/tls_context.h"

namespace petrel::http {

// ---- H2Stream forwarding (sink and source calls may come from inside handler code) ----

void H2Stream::OnResponseStart(Response&) { connection_->StartResponse(*this); }
void H2Stream::OnConsumed(size_t bytes) { connection_->ConsumeBody(*this, bytes); }
void H2Stream::OnAbandoned() { connection_->AbandonBody(*this); }

// ---- Lifecycle ----

H2Connection::H2Connection(EventLoop* loop, TcpStream* stream, Dispatcher dispatcher,
                           const H2Options& options)
    : loop_(loop),
      stream_(stream),
      dispatcher_(std::move(dispatcher)),
      options_(options),
      guard_(options.floods),
      shutdown_timer_(loop,
                      [this] {
                        Entry e(this);
                        SendFinalGoaway();
                      }),
      watchdog_timer_(loop, [this] { OnWatchdog(); }) {}

H2Connection::~H2Connection() {
  *self_ = nullptr;
  shutdown_timer_.Cancel();
  watchdog_timer_.Cancel();
  // nghttp2_session_del runs no callbacks; the streams go after it, cancelling what is unsent.
  if (session_ != nullptr) nghttp2_session_del(session_);
  session_ = nullptr;
  for (auto& s : streams_) {
    s->request().body().set_source(nullptr);
    if (!s->response_done) s->response().Cancel();
    ReportDone(*s);
  }
  streams_.clear();
  last_found_ = nullptr;
  graveyard_.clear();
  free_streams_.clear();
  if (stream_ != nullptr && !closed_) stream_->set_handler(nullptr);
}

absl::Status H2Connection::Start() {
  nghttp2_session_callbacks* cbs = H2SessionCallbacks::Create();
  nghttp2_option* opt = nullptr;
  if (cbs == nullptr || nghttp2_option_new(&opt) != 0) {
    if (cbs != nullptr) nghttp2_session_callbacks_del(cbs);
    return absl::ResourceExhaustedError("h2: nghttp2 allocation failed");
  }
  // Credit goes back only as the handler consumes (ConsumeBody), not on receipt.
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_max_outbound_ack(opt, options_.max_outbound_ack);
  nghttp2_option_set_max_settings(opt, 32);  // entries per SETTINGS frame
  // Priorities are RFC 9218's, as on h3 (SETTINGS_NO_RFC7540_PRIORITIES below): urgency and
  // incremental from the request's `priority` field and from PRIORITY_UPDATE frames. RFC 9113
  // deprecated the RFC 7540 dependency tree, and keeping it costs nghttp2 work on every stream
  // and closed streams kept for it.
  nghttp2_option_set_builtin_recv_extension_type(opt, NGHTTP2_PRIORITY_UPDATE);
  nghttp2_option_set_no_closed_streams(opt, 1);
  // nghttp2's own CONTINUATION limit (CVE-2024-28182 backport) also counts the frames the
  // guard cannot see (OnReadable); one above the guard's, so that the guard answers first
  // where it can.
  nghttp2_option_set_max_continuations(opt, size_t{options_.floods.max_continuations} + 1);
  const int rv = nghttp2_session_server_new3(&session_, cbs, this, opt, mem_pool_.mem());
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  if (rv != 0) return absl::ResourceExhaustedError("h2: nghttp2_session_server_new3 failed");

  if (SSL* ssl = stream_->ssl()) {
    alpn_ = std::string(quic::SelectedAlpn(ssl));
    sni_ = std::string(quic::ServerName(ssl));
  }
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, options_.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<uint32_t>(options_.initial_window_size)},
      {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, options_.max_frame_size},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, options_.max_header_list_size},
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
      // Extended CONNECT (RFC 8441): WebSocket routes over HTTP/2.
      {NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1},
  };
  Entry e(this);
  if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings,
                              sizeof(settings) / sizeof(settings[0])) != 0 ||
      nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                            options_.connection_window_size) != 0) {
    return absl::InternalError("h2: cannot queue SETTINGS");
  }
  stream_->set_handler(this);
  if (const Duration period = WatchdogPeriod(); period != Duration::max()) {
    watchdog_timer_.StartAfter(period);
  }
  if (!stream_->input().empty()) OnReadable(stream_->input());
  return absl::OkStatus();
}

// ---- StreamHandler ----

void H2Connection::OnReadable(ByteBuffer& input) {
  if (session_ == nullptr || closed_) return;
  // What this input makes nghttp2 and the handlers queue leaves when the entry point ends.
  flush_on_exit_ = true;
  Entry e(this);
  if (calm_) {  // GOAWAY is queued: the rest of what a flooding peer sends is dropped unread
    input.ConsumeAll();
    return;
  }
  const absl::string_view bytes = input.Readable();
  const ssize_t n = nghttp2_session_mem_recv(
      session_, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  input.ConsumeAll();
  if (n == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS) {
    // A header block went on past the CONTINUATION limit where the guard could not see it:
    // after a stream error inside the block (a bad field, say) nghttp2 skips the block's
    // remaining CONTINUATION frames without on_begin_frame, still decoding them to keep its
    // HPACK table in step. nghttp2 stops at its own limit and reports it as fatal; only its
    // reading stops there (nothing more is given to it: calm_), its sending still works, so
    // the guard's answer follows as for any flood: GOAWAY ENHANCE_YOUR_CALM, then close.
    (void)guard_.OnTooManyContinuations();
    Calm();
  } else if (n < 0) {
    // Fatal (bad preface, out of memory, ...): nghttp2 allows nothing but deleting the session,
    // so there is no GOAWAY to send.
    nghttp2_session_del(session_);
    session_ = nullptr;
    stream_->Close(
        absl::InvalidArgumentError(absl::StrCat("h2: ", nghttp2_strerror(static_cast<int>(n)))));
    return;
  }
  if (calm_ && !finishing_) {
    Flush();
    finishing_ = true;
    stream_->ShutdownAfterFlush();
  }
}

void H2Connection::OnWritable() {
  if (session_ == nullptr || closed_) return;
  Entry e(this);
  write_blocked_ = false;
}

void H2Connection::OnPeerFinished() {
  if (session_ == nullptr || closed_) return;
  Entry e(this);
  peer_finished_ = true;
  // Nothing more will arrive: a request body still open can never end. Its handler learns so
  // now (and may still answer) instead of waiting for bytes that will not come.
  for (auto& s : streams_) {
    RequestBody& body = s->request().body();
    if (!s->dispatched || body.eof()) continue;
    body.set_source(nullptr);
    body.Fail(absl::InvalidArgumentError("h2: peer closed inside the request body"));
  }
}

void H2Connection::OnClosed(const absl::Status& reason) {
  if (closed_) return;
  closed_ = true;
  shutdown_timer_.Cancel();
  watchdog_timer_.Cancel();
  // The streams are cancelled now but freed at the end of the entry point (this may run inside
  // our own Write call).
  for (auto& s : streams_) {
    s->closed = true;
    s->request().body().set_source(nullptr);
    if (!s->request().body().eof()) s->request().body().Fail(absl::CancelledError("h2: closed"));
    if (!s->response_done) s->response().Cancel();
    ReportDone(*s);
    graveyard_.push_back(std::move(s));
  }
  streams_.clear();
  last_found_ = nullptr;
  free_streams_.clear();
  if (depth_ == 0) graveyard_.clear();
  if (on_closed_) on_closed_(reason);
}

// ---- Requests ----

H2Stream& H2Connection::OpenStream(int32_t id) {
  std::unique_ptr<H2Stream> stream;
  if (!free_streams_.empty()) {
    stream = std::move(free_streams_.back());
    free_streams_.pop_back();
    stream->set_id(id);
  } else {
    stream = std::make_unique<H2Stream>(this, id);
  }
  H2Stream& s = *stream;
  nghttp2_session_set_stream_user_data(session_, id, &s);
  s.slot = streams_.size();
  streams_.push_back(std::move(stream));
  last_found_ = &s;
  return s;
}

void H2Connection::RecycleClosedStreams() {
  // Enough for the streams that turn over in one loop turn at typical concurrency; a burst
  // beyond it allocates again rather than pinning memory for good.
  constexpr size_t kMaxFreeStreams = 16;
  for (std::unique_ptr<H2Stream>& s : graveyard_) {
    if (closed_ || free_streams_.size() >= kMaxFreeStreams || !s->Recyclable()) continue;
    s->Reset();
    free_streams_.push_back(std::move(s));
  }
  graveyard_.clear();
}

void H2Connection::Dispatch(H2Stream& s) {
  if (s.dispatched || calm_) return;  // after GOAWAY ENHANCE_YOUR_CALM no handler runs
  s.dispatched = true;
  ++requests_;
  if (options_.observer != nullptr) s.started = MonotonicNow();
  Request& req = s.request();
  Response& res = s.response();
  // Method, scheme, authority and target were filled in as the fields arrived (OnHeader).
  req.set_version(HttpVersion::k2);
  req.set_observer(options_.observer);
  req.set_peer_address(stream_->peer());
  req.set_local_address(stream_->local());
  req.set_alpn(alpn_);
  req.set_sni(sni_);
  if (req.authority().empty()) {
    if (auto host = req.headers().Get("host")) req.AssignAuthority(*host);
  }
  req.body().set_source(&s);
  res.set_sink(&s);

  const bool rejected =
      http_internal::RejectUnservableHead(s.head, options_.max_request_body, req, res);
  dispatcher_(req, res);
  // A dispatcher that is no Router leaves a rejection unanswered: the built-in page.
  if (rejected && res.rejected_status() != 0) {
    res.SendError(res.rejected_status(), res.rejection_reason());
  }
}

void H2Connection::ConsumeBody(H2Stream& s, size_t bytes) {
  if (s.closed || session_ == nullptr || closed_) return;
  bytes = std::min(bytes, s.unconsumed);
  s.unconsumed -= bytes;
  nghttp2_session_consume(session_, s.id(), bytes);
  RequestFlush();
}

void H2Connection::AbandonBody(H2Stream& s) {
  if (s.closed || session_ == nullptr || closed_) return;
  s.body_abandoned = true;
  if (s.unconsumed > 0) nghttp2_session_consume(session_, s.id(), s.unconsumed);
  s.unconsumed = 0;
  RequestFlush();
}

void H2Connection::ReportActivity() {
  if (closed_) return;
  ConnectionActivity now = ConnectionActivity::kIdle;
  if (shutdown_started_ || goaway_seen_ || calm_ || finishing_) {
    now = ConnectionActivity::kClosing;
  } else if (!streams_.empty()) {
    now = ConnectionActivity::kActive;
  }
  if (now == activity_) return;
  activity_ = now;
  on_activity_(now);
}

int H2Connection::Calm() {
  // Not NGHTTP2_ERR_CALLBACK_FAILURE: that is fatal and would forbid sending the GOAWAY. The
  // frames left in the current input chunk are still parsed (bounded by the read size);
  // nothing after it is (OnReadable).
  if (!calm_) {
    nghttp2_session_terminate_session(session_, NGHTTP2_ENHANCE_YOUR_CALM);
    ReportPeerLimit(guard_.limit());
  }
  calm_ = true;
  return 0;
}

void H2Connection::ReportPeerLimit(PeerLimit limit) {
  if (options_.observer != nullptr) options_.observer->OnPeerLimit(HttpProtocol::kHttp2, limit);
}

void H2Connection::ReportDone(H2Stream& s) {
  if (!s.dispatched || s.reported) return;
  if (options_.observer == nullptr && !s.response().wants_done()) return;
  s.reported = true;
  RequestRecord r;
  r.protocol = HttpProtocol::kHttp2;
  r.request = &s.request();
  r.peer = &s.request().peer_address();
  r.status = s.response_submitted ? s.response().status() : 0;
  r.body_bytes = s.body_sent;
  r.start = s.started;
  r.completed = s.response_done;
  if (options_.observer != nullptr) options_.observer->OnRequestDone(r);
  s.response().RunDone(r);
}

H2Stream* H2Connection::FindStreamSlow(int32_t id) const {
  // After OnClosed nghttp2's user data points at streams that are no longer open.
  if (closed_ || session_ == nullptr) return nullptr;
  return static_cast<H2Stream*>(nghttp2_session_get_stream_user_data(session_, id));
}

std::unique_ptr<H2Stream> H2Connection::TakeStream(H2Stream& s) {
  const size_t i = s.slot;
  std::unique_ptr<H2Stream> taken = std::move(streams_[i]);
  if (i + 1 != streams_.size()) {
    streams_[i] = std::move(streams_.back());
    streams_[i]->slot = i;
  }
  streams_.pop_back();
  return taken;
}

}  // namespace petrel::http
