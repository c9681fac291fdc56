#include "http/h2/h2_connection.h"

#include <openssl/ssl.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "http/h2/h2_session_callbacks.h"
#include "quic/tls/tls_context.h"

namespace petrel::http {
namespace {

// Response fields the engine owns or that HTTP/2 forbids (RFC 9113 §8.2.2).
bool IsEngineOwnedField(absl::string_view lower_name) {
  return lower_name == "connection" || lower_name == "keep-alive" ||
         lower_name == "proxy-connection" || lower_name == "transfer-encoding" ||
         lower_name == "upgrade" || lower_name == "te" || lower_name == "content-length" ||
         (!lower_name.empty() && lower_name[0] == ':');
}

}  // namespace

nghttp2_nv MakeNv(absl::string_view name, absl::string_view value) {
  nghttp2_nv nv;
  nv.name = reinterpret_cast<uint8_t*>(const_cast<char*>(name.data()));
  nv.namelen = name.size();
  nv.value = reinterpret_cast<uint8_t*>(const_cast<char*>(value.data()));
  nv.valuelen = value.size();
  nv.flags = NGHTTP2_NV_FLAG_NONE;
  return nv;
}

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
      shutdown_timer_(loop, [this] {
        Entry e(this);
        SendFinalGoaway();
      }) {}

H2Connection::~H2Connection() {
  *alive_ = false;
  shutdown_timer_.Cancel();
  // nghttp2_session_del runs no callbacks; the streams go after it, cancelling what is unsent.
  if (session_ != nullptr) nghttp2_session_del(session_);
  session_ = nullptr;
  for (auto& [id, s] : streams_) {
    s->request().body().set_source(nullptr);
    if (!s->response_done) s->response().Cancel();
    ReportDone(*s);
  }
  streams_.clear();
  graveyard_.clear();
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
  // nghttp2's own CONTINUATION limit (CVE-2024-28182 backport) is fatal to the session, so no
  // GOAWAY could follow: keep it well above the guard's, which answers ENHANCE_YOUR_CALM.
  nghttp2_option_set_max_continuations(opt, size_t{options_.floods.max_continuations} * 1024);
  const int rv = nghttp2_session_server_new2(&session_, cbs, this, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  if (rv != 0) return absl::ResourceExhaustedError("h2: nghttp2_session_server_new2 failed");

  if (SSL* ssl = stream_->ssl()) {
    alpn_ = std::string(quic::SelectedAlpn(ssl));
    sni_ = std::string(quic::ServerName(ssl));
  }
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, options_.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<uint32_t>(options_.initial_window_size)},
      {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, options_.max_frame_size},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, options_.max_header_list_size},
  };
  Entry e(this);
  if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings,
                              sizeof(settings) / sizeof(settings[0])) != 0 ||
      nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                            options_.connection_window_size) != 0) {
    return absl::InternalError("h2: cannot queue SETTINGS");
  }
  stream_->set_handler(this);
  if (!stream_->input().empty()) OnReadable(stream_->input());
  return absl::OkStatus();
}

// ---- StreamHandler ----

void H2Connection::OnReadable(ByteBuffer& input) {
  if (session_ == nullptr || closed_) return;
  Entry e(this);
  if (calm_) {  // GOAWAY is queued: the rest of what a flooding peer sends is dropped unread
    input.ConsumeAll();
    return;
  }
  const absl::string_view bytes = input.Readable();
  const ssize_t n = nghttp2_session_mem_recv(
      session_, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  input.ConsumeAll();
  if (n < 0) {
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
}

void H2Connection::OnClosed(const absl::Status& reason) {
  if (closed_) return;
  closed_ = true;
  shutdown_timer_.Cancel();
  // The streams are cancelled now but freed at the end of the entry point (this may run inside
  // our own Write call).
  for (auto& [id, s] : streams_) {
    s->closed = true;
    s->request().body().set_source(nullptr);
    if (!s->request().body().eof()) s->request().body().Fail(absl::CancelledError("h2: closed"));
    if (!s->response_done) s->response().Cancel();
    ReportDone(*s);
    graveyard_.push_back(std::move(s));
  }
  streams_.clear();
  if (depth_ == 0) graveyard_.clear();
  if (on_closed_) on_closed_(reason);
}

// ---- Requests ----

void H2Connection::Dispatch(H2Stream& s) {
  if (s.dispatched || calm_) return;  // after GOAWAY ENHANCE_YOUR_CALM no handler runs
  s.dispatched = true;
  ++requests_;
  if (options_.observer != nullptr) s.started = MonotonicNow();
  Request& req = s.request();
  Response& res = s.response();
  req.set_version(HttpVersion::k2);
  req.set_peer_address(stream_->peer());
  req.set_local_address(stream_->local());
  req.set_alpn(alpn_);
  req.set_sni(sni_);
  req.set_scheme(std::move(s.scheme));
  if (s.authority.empty()) {
    if (auto host = req.headers().Get("host")) s.authority = std::string(*host);
  }
  req.set_authority(std::move(s.authority));
  req.SetTarget(s.path);
  req.body().set_source(&s);
  res.set_sink(&s);

  std::optional<Method> method = Method::Parse(s.method);
  if (!method.has_value()) {
    req.body().Discard();
    res.Send(400, "bad method\n", "text/plain");
    return;
  }
  req.set_method(*std::move(method));
  if (s.headers_too_large) {
    req.body().Discard();
    res.Send(431, "request header fields too large\n", "text/plain");
    return;
  }
  // nghttp2 has checked that content-length is a number and will check it against the DATA.
  if (auto cl = req.headers().Get("content-length")) {
    uint64_t length = 0;
    if (absl::SimpleAtoi(*cl, &length)) {
      req.body().set_expected_length(length);
      if (length > options_.max_request_body) {
        req.body().Discard();
        res.Send(413, "request body too large\n", "text/plain");
        return;
      }
    }
  }
  dispatcher_(req, res);
}

void H2Connection::StartResponse(H2Stream& s) {
  if (s.response_submitted || s.closed || session_ == nullptr || closed_) return;
  s.response_submitted = true;
  Response& res = s.response();
  const bool head = s.request().method().kind() == MethodKind::kHead;
  const std::string status = std::to_string(res.status());
  const std::optional<uint64_t> length = res.body().length();
  const std::string length_text = length.has_value() ? std::to_string(*length) : std::string();

  std::vector<std::string> names;
  names.reserve(res.headers().size());
  std::vector<nghttp2_nv> nva;
  nva.reserve(res.headers().size() + 2);
  nva.push_back(MakeNv(":status", status));
  for (const HeaderField& f : res.headers()) {
    std::string lower = absl::AsciiStrToLower(f.name);
    if (IsEngineOwnedField(lower)) continue;
    names.push_back(std::move(lower));
    nva.push_back(MakeNv(names.back(), f.value));
  }
  if (length.has_value() && res.status() != 204) {
    nva.push_back(MakeNv("content-length", length_text));
  }

  const bool is_producer = res.body().kind() == ResponseBody::Kind::kProducer;
  s.producer = res.body().ReleaseAsProducer();
  const bool no_body =
      (head && !is_producer) ||
      (length.has_value() && *length == 0 && res.trailers().empty() && !is_producer) ||
      res.status() == 204 || res.status() == 304;
  int rv = 0;
  if (no_body) {
    s.producer.reset();
    rv = nghttp2_submit_response(session_, s.id(), nva.data(), nva.size(), nullptr);
  } else {
    s.discard_body = head;
    const int32_t id = s.id();
    s.producer->SetResumeCallback([this, id] {
      resumes_.push_back(id);
      RequestFlush();
    });
    nghttp2_data_provider provider;
    provider.source.ptr = &s;
    provider.read_callback = &H2SessionCallbacks::ReadData;
    rv = nghttp2_submit_response(session_, s.id(), nva.data(), nva.size(), &provider);
  }
  if (rv != 0)
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id(), NGHTTP2_INTERNAL_ERROR);
  RequestFlush();
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

int H2Connection::Calm() {
  // Not NGHTTP2_ERR_CALLBACK_FAILURE: that is fatal and would forbid sending the GOAWAY. The
  // frames left in the current input chunk are still parsed (bounded by the read size);
  // nothing after it is (OnReadable).
  if (!calm_) nghttp2_session_terminate_session(session_, NGHTTP2_ENHANCE_YOUR_CALM);
  calm_ = true;
  return 0;
}

void H2Connection::ReportDone(H2Stream& s) {
  if (options_.observer == nullptr || !s.dispatched || s.reported) return;
  s.reported = true;
  RequestRecord r;
  r.protocol = HttpProtocol::kHttp2;
  r.request = &s.request();
  r.peer = &s.request().peer_address();
  r.status = s.response_submitted ? s.response().status() : 0;
  r.body_bytes = s.body_sent;
  r.start = s.started;
  r.completed = s.response_done;
  options_.observer->OnRequestDone(r);
}

H2Stream* H2Connection::FindStream(int32_t id) const {
  auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second.get();
}

// ---- Output ----

void H2Connection::RequestFlush() {
  if (depth_ > 0) {
    flush_wanted_ = true;
    return;
  }
  if (flush_posted_ || closed_) return;
  flush_posted_ = true;
  loop_->Post([this, alive = alive_] {
    if (!*alive) return;
    flush_posted_ = false;
    Entry e(this);
  });
}

void H2Connection::Flush() {
  if (session_ == nullptr || closed_) return;
  for (int32_t id : resumes_) {
    if (FindStream(id) != nullptr) nghttp2_session_resume_data(session_, id);
  }
  resumes_.clear();
  while (!write_blocked_ && !closed_) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) {
      stream_->Close(
          absl::InternalError(absl::StrCat("h2: ", nghttp2_strerror(static_cast<int>(n)))));
      return;
    }
    if (n == 0) break;
    if (!stream_->Write(
            absl::string_view(reinterpret_cast<const char*>(data), static_cast<size_t>(n)))) {
      write_blocked_ = true;
    }
  }
}

void H2Connection::AfterEntry() {
  // Flushing runs callbacks (producers, handlers) that may ask for more output; a few rounds
  // settle it, and anything left is picked up by the next entry point or a posted flush.
  for (int round = 0; round < 4; ++round) {
    flush_wanted_ = false;
    Flush();
    if (!(flush_wanted_ || !resumes_.empty()) || write_blocked_ || closed_) break;
  }
  flush_wanted_ = false;
  graveyard_.clear();
  MaybeFinish();
}

void H2Connection::MaybeFinish() {
  if (closed_ || finishing_ || session_ == nullptr) return;
  const bool done =
      (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) ||
      (peer_finished_ && streams_.empty());
  if (done) {
    finishing_ = true;
    stream_->ShutdownAfterFlush();
  }
}

}  // namespace petrel::http
