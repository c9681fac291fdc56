// H1Connection: lifecycle, entry points, the pump and the input side (heads, bodies,
// pipelining). The output side is in h1_connection_output.cc.
#include "http/h1/h1_connection.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/strip.h"
#include "http/ascii.h"
#include "http/field_list.h"
#include "petrel/http/status.h"
#include "quic/tls/tls_context.h"

namespace petrel::http {
namespace {

using http_internal::IsOws;

// Pump rounds per entry point; the rest of the work continues from a posted task.
constexpr int kMaxPumpRounds = 64;

// Request fields the engine consumed (RFC 9110 §7.6.1 connection options and framing); they
// never reach the handler.
bool IsEngineRequestField(absl::string_view name) {
  switch (name.size()) {  // most names are rejected by their length alone
    case 2:
      return http_internal::EqualsIgnoreCase(name, "te");
    case 6:
      return http_internal::EqualsIgnoreCase(name, "expect");
    case 7:
      return http_internal::EqualsIgnoreCase(name, "upgrade");
    case 10:
      return http_internal::EqualsIgnoreCase(name, "connection") ||
             http_internal::EqualsIgnoreCase(name, "keep-alive");
    case 16:
      return http_internal::EqualsIgnoreCase(name, "proxy-connection");
    case 17:
      return http_internal::EqualsIgnoreCase(name, "transfer-encoding");
    default:
      return false;
  }
}

h1::RequestLimits EffectiveLimits(const H1Options& options) {
  h1::RequestLimits limits = options.limits;
  // Content-Length is checked once the request is routed: a route may allow more than the
  // server (RouteOptions::max_request_body).
  limits.max_content_length = UINT64_MAX;
  return limits;
}

}  // namespace

// ---- H1Exchange forwarding ----

void H1Exchange::OnResponseStart(Response&) { connection_->OnExchangeResponseStart(*this); }
void H1Exchange::OnFirstRead() { connection_->OnExchangeFirstRead(*this); }
void H1Exchange::OnConsumed(size_t bytes) { connection_->OnExchangeConsumed(*this, bytes); }
void H1Exchange::OnAbandoned() { connection_->OnExchangeAbandoned(*this); }

void H1Exchange::Reset() {
  // In the order a destructor would let go: the messages (and the handler's callbacks in them)
  // first, then what the engine kept for the response body.
  request_.body().set_source(nullptr);
  response_.Reset();
  request_.Reset();
  producer.reset();
  file.reset();
  fixed.reset();
  chunked.reset();
  body_done = false;
  body_abandoned = false;
  discarding = false;
  discarded = 0;
  unconsumed = 0;
  expect_continue = false;
  continue_wanted = false;
  continue_sent = false;
  keep_alive = true;
  te_trailers = false;
  head_request = false;
  upgrade_pending = false;
  upgrade_read = false;
  tunnel = false;
  response_started = false;
  head_written = false;
  chunked_out = false;
  send_trailers = false;
  discard_output = false;
  close_after = false;
  out_length.reset();
  out_sent = 0;
  buffer_out = false;
  file_in_flight = false;
  scratch.clear();
  response_done = false;
  started = TimePoint();
  engine_status = 0;
}

// ---- Lifecycle ----

H1Connection::H1Connection(EventLoop* loop, TcpStream* stream, Dispatcher dispatcher,
                           const H1Options& options)
    : loop_(loop),
      stream_(stream),
      dispatcher_(std::move(dispatcher)),
      options_(options),
      parser_(EffectiveLimits(options)),
      date_cache_(options.date_cache != nullptr ? options.date_cache : &own_date_cache_),
      header_timer_(loop,
                    [this] {
                      Entry e(this);
                      if (current_ == nullptr && !finishing_ && !closed_) {
                        ReportPeerLimit(PeerLimit::kHeaderTimeout);
                        SendErrorAndFinish(408, "request head not received in time");
                      }
                    }),
      idle_timer_(loop,
                  [this] {
                    Entry e(this);
                    OnIdleTimer();
                  }),
      body_timer_(loop,
                  [this] {
                    Entry e(this);
                    if (current_ != nullptr && !current_->body_done) {
                      ReportPeerLimit(PeerLimit::kBodyTimeout);
                      BodyError(*current_, 408, "request body not received in time");
                    }
                  }),
      send_timer_(loop, [this] {
        Entry e(this);
        if (closed_) return;
        ReportPeerLimit(PeerLimit::kSendTimeout);
        stream_->Close(absl::DeadlineExceededError("h1: send timeout"));
      }) {}

H1Connection::~H1Connection() {
  *alive_ = false;
  if (current_ != nullptr) {
    current_->request().body().set_source(nullptr);
    if (!current_->response_done) current_->response().Cancel();
    ReportDone(*current_);
  }
  current_.reset();
  graveyard_.clear();
  spare_.reset();
  if (stream_ != nullptr && !closed_) stream_->set_handler(nullptr);
}

absl::Status H1Connection::Start() {
  if (started_) return absl::FailedPreconditionError("h1: already started");
  started_ = true;
  if (SSL* ssl = stream_->ssl()) {
    alpn_ = std::string(quic::SelectedAlpn(ssl));
    sni_ = std::string(quic::ServerName(ssl));
  }
  stream_->set_handler(this);
  Entry e(this);  // the pump parses what is already buffered
  return absl::OkStatus();
}

void H1Connection::Shutdown() {
  if (shutdown_requested_ || closed_) return;
  Entry e(this);
  shutdown_requested_ = true;
  if (current_ == nullptr) {
    Finish();
  } else if (current_->producer != nullptr) {
    current_->producer->OnServerStopping();
  }
}

void H1Connection::Finish() {
  if (finishing_ || closed_) return;
  finishing_ = true;
  header_timer_.Cancel();
  idle_timer_.Cancel();
  body_timer_.Cancel();
  stream_->ShutdownAfterFlush();
}

// ---- StreamHandler ----

void H1Connection::OnReadable(ByteBuffer&) {
  if (closed_) return;
  Entry e(this);  // the pump looks at the input
}

void H1Connection::OnWritable() {
  if (closed_) return;
  Entry e(this);
  write_blocked_ = false;
  send_timer_.Cancel();
}

void H1Connection::OnPeerFinished() {
  if (closed_) return;
  Entry e(this);
  peer_finished_ = true;
}

void H1Connection::OnClosed(const absl::Status& reason) {
  if (closed_) return;
  closed_ = true;
  header_timer_.Cancel();
  idle_timer_.Cancel();
  body_timer_.Cancel();
  send_timer_.Cancel();
  if (current_ != nullptr) DropCurrent();
  if (depth_ == 0) RecycleRetired();
  if (on_closed_) on_closed_(reason);
}

void H1Connection::DropCurrent() {
  H1Exchange& ex = *current_;
  RequestBody& body = ex.request().body();
  body.set_source(nullptr);
  if (!body.eof()) body.Fail(absl::CancelledError("h1: connection closed"));
  if (!ex.response_done) ex.response().Cancel();
  ReportDone(ex);
  graveyard_.push_back(std::move(current_));
}

void H1Connection::ReportDoneNow(H1Exchange& ex) {
  RequestRecord r;
  r.protocol = HttpProtocol::kHttp1;
  r.request = &ex.request();
  r.peer = &stream_->peer();
  r.start = ex.started;
  if (ex.engine_status != 0) {  // SendErrorAndFinish wrote the response
    r.status = ex.engine_status;
    r.body_bytes = ex.out_sent;
    r.completed = true;
  } else {
    r.status = ex.head_written ? ex.response().status() : 0;
    r.body_bytes = ex.out_sent;
    r.completed = ex.response_done;
  }
  if (options_.observer != nullptr) options_.observer->OnRequestDone(r);
  ex.response().RunDone(r);
}

// ---- Exchange callbacks ----

void H1Connection::OnExchangeResponseStart(H1Exchange& ex) {
  ex.response_started = true;
  RequestPump();
}

void H1Connection::OnExchangeFirstRead(H1Exchange& ex) {
  if (ex.expect_continue && !ex.continue_sent) ex.continue_wanted = true;
  if (ex.upgrade_pending) ex.upgrade_read = true;
  RequestPump();
}

void H1Connection::OnExchangeConsumed(H1Exchange& ex, size_t bytes) {
  ex.unconsumed -= std::min(bytes, ex.unconsumed);
  RequestPump();
}

void H1Connection::OnExchangeAbandoned(H1Exchange& ex) {
  ex.body_abandoned = true;
  ex.unconsumed = 0;
  RequestPump();
}

// ---- The pump ----

void H1Connection::RequestPump() {
  if (depth_ > 0) {
    pump_wanted_ = true;
    return;
  }
  PostPump();
}

void H1Connection::PostPump() {
  if (pump_posted_ || closed_) return;
  pump_posted_ = true;
  loop_->Post([this, alive = alive_] {
    if (!*alive) return;
    pump_posted_ = false;
    Entry e(this);
  });
}

void H1Connection::Pump() {
  size_t produced = 0;
  int round = 0;
  for (; round < kMaxPumpRounds; ++round) {
    if (closed_) break;
    pump_wanted_ = false;
    bool progress = WriteOutput(&produced);
    if (closed_ || finishing_) break;
    progress |= MaybeRetire();
    if (closed_ || finishing_) break;
    progress |= ReadInput();
    if (closed_ || finishing_) break;
    const bool retired = MaybeRetire();
    progress |= retired;
    if (closed_ || finishing_) break;
    if (!progress && !pump_wanted_) break;
    if (produced >= options_.write_share_per_event) {
      PostPump();  // fair share: other connections get the loop first
      break;
    }
    // No exchange, no input, nothing asked for, and ReadInput has seen this state (nothing was
    // retired after it): another round would find nothing to do. Saves a round per request.
    if (current_ == nullptr && !retired && !pump_wanted_ && stream_->input().empty()) break;
  }
  if (round == kMaxPumpRounds) PostPump();
  UpdateReading();
  UpdateTimers();
  if (on_activity_) ReportActivity();
  RecycleRetired();
}

void H1Connection::ReportActivity() {
  if (closed_) return;
  ConnectionActivity now = ConnectionActivity::kIdle;
  if (finishing_ || shutdown_requested_) {
    now = ConnectionActivity::kClosing;
  } else if (current_ != nullptr || write_blocked_ || !stream_->input().empty()) {
    now = ConnectionActivity::kActive;  // a request (or its head, or its response's tail)
  }
  if (now == activity_) return;
  activity_ = now;
  on_activity_(now);
}

void H1Connection::UpdateReading() {
  // Once finishing, the stream's lingering close reads (and drops) until the peer's EOF.
  if (closed_ || finishing_) return;
  bool want = !peer_finished_;
  if (want && current_ != nullptr) {
    const H1Exchange& ex = *current_;
    if (ex.discarding) {
      want = true;
    } else if (ex.upgrade_pending || ex.body_done || ex.body_abandoned ||
               ex.unconsumed >= kBodyWindow) {
      want = false;  // bytes now would be the next request, or beyond the body window
    }
  } else if (want && write_blocked_) {
    want = false;  // do not start the next request while the last response is backed up
  }
  if (want == !reading_paused_) return;
  reading_paused_ = !want;
  if (want) {
    stream_->ResumeReading();  // may call OnReadable: a nested entry that only records
  } else {
    stream_->PauseReading();
  }
}

void H1Connection::OnIdleTimer() {
  if (!idle_ || closed_ || finishing_) return;  // busy since; UpdateTimers re-arms when idle
  const TimePoint deadline = idle_since_ + options_.idle_timeout;
  if (loop_->now() >= deadline) {
    Finish();
  } else {
    idle_timer_.StartAt(deadline);  // idle again since the timer was armed
  }
}

void H1Connection::UpdateTimers() {
  if (closed_ || finishing_) return;
  const bool idle = current_ == nullptr && !write_blocked_;
  const bool input = !stream_->input().empty();
  // The idle timer is not cancelled when a request arrives, only marked stale: on a keep-alive
  // connection it would otherwise be cancelled and restarted for every request. It fires at most
  // once per idle_timeout and then re-arms for the current idle period, if any.
  if (idle && !input) {
    if (!idle_) {
      idle_ = true;
      idle_since_ = loop_->now();
    }
    if (!idle_timer_.armed()) idle_timer_.StartAt(idle_since_ + options_.idle_timeout);
  } else {
    idle_ = false;
  }
  if (idle && input) {
    if (!header_timer_.armed()) header_timer_.StartAfter(options_.header_timeout);
  } else if (header_timer_.armed()) {  // armed() is inline, Cancel() a call: this runs per pump
    header_timer_.Cancel();
  }
  // Not while the client waits for a 100 the handler has not asked for.
  // Nor in a tunnel (101): silence is normal there, and its protocol keeps it alive.
  const bool wants_body = current_ != nullptr && !current_->body_done &&
                          !current_->body_abandoned && !reading_paused_ && !current_->tunnel &&
                          !current_->upgrade_pending &&
                          !(current_->expect_continue && !current_->continue_sent);
  if (wants_body && options_.body_read_timeout.has_value()) {
    if (!body_timer_.armed()) body_timer_.StartAfter(*options_.body_read_timeout);
  } else if (body_timer_.armed()) {
    body_timer_.Cancel();
  }
  const bool blocked = write_blocked_ || (current_ != nullptr && current_->file_in_flight);
  if (blocked && options_.send_timeout.has_value()) {
    if (!send_timer_.armed()) send_timer_.StartAfter(*options_.send_timeout);
  } else if (!blocked && send_timer_.armed()) {
    send_timer_.Cancel();
  }
}

// ---- Input ----

bool H1Connection::ReadInput() {
  if (current_ != nullptr) {
    if (current_->body_done) return false;
    return ReadBody(*current_);
  }
  if (shutdown_requested_) {
    Finish();
    return false;
  }
  if (write_blocked_) return false;
  ByteBuffer& in = stream_->input();
  if (in.empty()) {
    if (peer_finished_) Finish();
    return false;
  }
  switch (parser_.Parse(in.Readable())) {
    case h1::RequestParser::Result::kNeedMore:
      if (peer_finished_) Finish();  // an incomplete head will never complete
      return false;
    case h1::RequestParser::Result::kError:
      SendErrorAndFinish(parser_.error_status(), parser_.error_reason());
      return false;
    case h1::RequestParser::Result::kComplete:
      break;
  }
  if (header_timer_.armed()) header_timer_.Cancel();
  idle_ = false;
  StartExchange();
  return true;
}

std::unique_ptr<H1Exchange> H1Connection::TakeExchange() {
  std::unique_ptr<H1Exchange> ex = std::move(spare_);
  if (ex == nullptr && !graveyard_.empty()) {
    // Only the pump starts exchanges, and it runs outermost: nothing on the stack refers to a
    // retired one any more, so it can serve again now (pipelined requests in one turn).
    ex = std::move(graveyard_.back());
    graveyard_.pop_back();
    ex->Reset();
  }
  if (ex == nullptr) ex = std::make_unique<H1Exchange>(this);
  return ex;
}

void H1Connection::RecycleRetired() {
  if (spare_ == nullptr && !graveyard_.empty()) {
    spare_ = std::move(graveyard_.back());
    graveyard_.pop_back();
    spare_->Reset();
  }
  graveyard_.clear();
}

void H1Connection::StartExchange() {
  std::unique_ptr<H1Exchange> owned = TakeExchange();
  H1Exchange& ex = *owned;
  Request& req = ex.request();
  if (!(req.method() == parser_.method())) req.set_method(parser_.method());  // a reset is GET
  req.set_version(parser_.version());
  req.set_observer(options_.observer);
  absl::string_view target = parser_.target();
  absl::string_view authority = parser_.host();
  if (!target.empty() && target[0] != '/' && target != "*") {
    // absolute-form (RFC 9112 §3.2.2): the authority in the target wins over Host.
    if (const size_t scheme_end = target.find("://"); scheme_end != absl::string_view::npos) {
      absl::string_view rest = target.substr(scheme_end + 3);
      const size_t path_start = rest.find_first_of("/?");
      authority = rest.substr(0, path_start);
      target =
          path_start == absl::string_view::npos ? absl::string_view("/") : rest.substr(path_start);
    }
  }
  if (!target.empty() && target[0] == '?') {
    req.set_path("/");
    req.set_query(std::string(target.substr(1)));
  } else {
    req.SetTarget(target);
  }
  req.AssignAuthority(authority);
  req.set_scheme(stream_->tls() ? "https" : "http");
  req.set_peer_address(stream_->peer());
  req.set_local_address(stream_->local());
  req.set_alpn(alpn_);
  req.set_sni(sni_);
  // The handler sees every field but those the engine consumed.
  HeaderMap& headers = req.headers();
  if (parser_.field_count() > ex.fields_reserved) {  // once per size, not once per request
    ex.fields_reserved = parser_.field_count();
    headers.Reserve(ex.fields_reserved);
  }
  absl::string_view upgrade;
  bool connection_upgrade = false;
  for (size_t i = 0, n = parser_.field_count(); i < n; ++i) {
    const HeaderField f = parser_.field(i);
    if (!IsEngineRequestField(f.name)) {
      headers.Add(f.name, f.value);
    } else if (f.name.size() == 2) {
      if (!ex.te_trailers) {  // "te": RFC 9110 §10.1.4
        ex.te_trailers = http_internal::ListHasToken(f.value, "trailers");
      }
    } else if (f.name.size() == 7) {
      upgrade = f.value;  // "upgrade" (several lines: the last; RFC 9110 makes it a list)
    } else if (f.name.size() == 10 && !connection_upgrade) {
      connection_upgrade =
          http_internal::ListHasToken(f.value, "upgrade");  // "connection" or "keep-alive"
    }
  }
  ex.keep_alive = parser_.keep_alive();
  ex.head_request = parser_.method().kind() == MethodKind::kHead;
  req.set_head_bytes(parser_.head_bytes());
  const h1::BodyFraming framing = parser_.framing();
  RequestBody& body = req.body();
  body.set_limit(options_.max_request_body);
  switch (framing.kind) {
    case h1::BodyFraming::Kind::kNone:
      if (!upgrade.empty() && connection_upgrade && parser_.version() == HttpVersion::k11) {
        req.AssignUpgrade(upgrade);
        ex.upgrade_pending = true;  // the body ends, or becomes the tunnel, with the response
      } else {
        ex.body_done = true;
      }
      break;
    case h1::BodyFraming::Kind::kContentLength:
      body.set_expected_length(framing.content_length);
      ex.fixed.emplace(framing.content_length);
      ex.body_done = framing.content_length == 0;
      break;
    case h1::BodyFraming::Kind::kChunked: {
      h1::ChunkedLimits limits;
      limits.max_body = options_.max_request_body;
      ex.chunked.emplace(limits);
      break;
    }
  }
  ex.expect_continue = parser_.expect_continue() && !ex.body_done;
  stream_->input().Consume(parser_.head_bytes());
  parser_.Reset();
  ++requests_;
  if (ex.body_done) body.Deliver({}, true);
  body.set_source(&ex);
  if (options_.observer != nullptr) ex.started = MonotonicNow();
  current_ = std::move(owned);
  ex.response().set_sink(&ex);
  dispatcher_(req, ex.response());
  // The route may have changed the body's limit (the exchange outlives this entry point).
  if (ex.chunked.has_value()) ex.chunked->set_max_body(body.limit());
  // A dispatcher that does not check the limit (a Router does) still gets no more than it.
  if (body.KnownOverLimit() && !ex.body_done && !ex.body_abandoned && current_.get() == &ex) {
    BodyError(ex, HttpStatus::kContentTooLarge, "request body too large");
  }
}

bool H1Connection::ReadBody(H1Exchange& ex) {
  if (ex.upgrade_pending) {
    // The handler reads the body before any 101: it is the empty body of a request that did
    // not switch (WriteHead decides when the response comes first).
    if (!ex.upgrade_read || (ex.response_started && ex.response().status() == 101)) return false;
    EndUpgradeBody(ex);
    return true;
  }
  if (ex.tunnel) return ReadTunnel(ex);
  if (ex.body_abandoned && !ex.discarding) return false;  // decided once the response is out
  ByteBuffer& in = stream_->input();
  bool progress = false;
  // The chunked decoder wants more than what is buffered (it leaves an unfinished trailer line
  // unconsumed, so the buffer need not be empty).
  bool starved = false;
  RequestBody& body = ex.request().body();
  while (!ex.body_done && !closed_ && !finishing_ && !in.empty()) {
    if (!ex.discarding && ex.unconsumed >= kBodyWindow) break;
    if (ex.discarding && ex.discarded > kMaxDiscard) {
      Finish();  // the rest is too large to read for nothing
      return true;
    }
    if (ex.fixed.has_value()) {
      absl::string_view piece = in.Readable();
      if (!ex.discarding) piece = piece.substr(0, kBodyWindow - ex.unconsumed);
      piece = ex.fixed->Take(piece);
      const size_t n = piece.size();
      ex.body_done = ex.fixed->done();
      if (ex.discarding) {
        ex.discarded += n;
      } else {
        ex.unconsumed += n;
        body.Deliver(piece, ex.body_done);  // may call OnConsumed before it returns
      }
      in.Consume(n);
      progress = true;
      continue;
    }
    const h1::ChunkedDecoder::Result r = ex.chunked->Decode(in.Readable());
    switch (r.status) {
      case h1::ChunkedDecoder::Status::kData:
        if (ex.discarding) {
          ex.discarded += r.data.size();
        } else {
          ex.unconsumed += r.data.size();
          body.Deliver(r.data, false);
        }
        break;
      case h1::ChunkedDecoder::Status::kDone:
        ex.body_done = true;
        if (!ex.discarding) body.DeliverTrailers(std::move(ex.chunked->mutable_trailers()));
        break;
      case h1::ChunkedDecoder::Status::kError:
        in.Consume(r.consumed);
        BodyError(ex, ex.chunked->error_status(), ex.chunked->error_reason());
        return true;
      case h1::ChunkedDecoder::Status::kNeedMore:
        break;
    }
    in.Consume(r.consumed);
    if (r.consumed > 0) progress = true;
    if (r.status == h1::ChunkedDecoder::Status::kNeedMore) {
      starved = true;
      break;
    }
  }
  if (progress) body_timer_.Cancel();  // restarted by UpdateTimers: a deadline per wait
  if (!ex.body_done && (in.empty() || starved) && peer_finished_ && !closed_ && !finishing_) {
    BodyError(ex, 400, "peer closed inside the request body");
    return true;
  }
  return progress;
}

void H1Connection::EndUpgradeBody(H1Exchange& ex) {
  ex.upgrade_pending = false;
  ex.body_done = true;
  ex.request().body().Deliver({}, true);
}

bool H1Connection::ReadTunnel(H1Exchange& ex) {
  if (ex.body_done || ex.body_abandoned) return false;
  ByteBuffer& in = stream_->input();
  RequestBody& body = ex.request().body();
  bool progress = false;
  while (!in.empty() && ex.unconsumed < kBodyWindow && !closed_) {
    const absl::string_view piece = in.Readable().substr(0, kBodyWindow - ex.unconsumed);
    ex.unconsumed += piece.size();
    const size_t n = piece.size();
    body.Deliver(piece, false);  // may call OnConsumed before it returns
    in.Consume(n);
    progress = true;
  }
  if (in.empty() && peer_finished_ && !ex.body_done) {
    ex.body_done = true;  // the peer's end of the tunnel
    body.Deliver({}, true);
    progress = true;
  }
  return progress;
}

void H1Connection::ReportPeerLimit(PeerLimit limit) {
  if (options_.observer != nullptr) options_.observer->OnPeerLimit(HttpProtocol::kHttp1, limit);
}

void H1Connection::BodyError(H1Exchange& ex, int status, absl::string_view reason) {
  ex.body_done = true;
  ex.close_after = true;
  RequestBody& body = ex.request().body();
  body.set_source(nullptr);
  body.Fail(status == 413 ? absl::ResourceExhaustedError(reason)
                          : absl::InvalidArgumentError(reason));
  if (!ex.head_written) {
    SendErrorAndFinish(status, reason);
    return;
  }
  // The response is under way: it may still complete (then the connection closes), but no
  // further request byte is read.
  stream_->input().ConsumeAll();
}

}  // namespace petrel::http
