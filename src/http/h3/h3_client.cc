// Http3Client: the public class, and the client engine's connection, request and output logic
// (the nghttp3 callbacks are in h3_client_callbacks.cc).
#include "http/h3/h3_client.h"

#include <ngtcp2/ngtcp2.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "http/h3/h3_callbacks.h"

namespace petrel {

using Impl = Http3Client::Impl;

namespace {

// Fields the engine owns or that RFC 9114 §4.2 forbids in HTTP/3.
bool IsDroppedRequestField(absl::string_view lower) {
  return lower == "connection" || lower == "keep-alive" || lower == "proxy-connection" ||
         lower == "transfer-encoding" || lower == "upgrade" || lower == "host" ||
         lower == "content-length";
}

}  // namespace

Impl::Impl(Http3ClientConfig config, Http3ClientCallbacks callbacks)
    : config_(std::move(config)), callbacks_(std::move(callbacks)) {}

Impl::~Impl() {
  *alive_ = false;
  quic_.reset();  // closes the connection; its callbacks see alive_ cleared
  DeleteSession();
}

absl::Status Impl::Init() {
  authority_ = config_.authority;
  if (authority_.empty()) {
    authority_ = config_.server_name;
    if (config_.server.port() != 443) absl::StrAppend(&authority_, ":", config_.server.port());
  }
  QuicClientConfig qc;
  qc.server = config_.server;
  qc.server_name = config_.server_name;
  qc.alpn = {"h3"};
  qc.verify_peer = config_.verify_peer;
  qc.ca_file = config_.ca_file;
  qc.session = config_.session;
  qc.transport_params = config_.transport_params;
  qc.early_data = config_.early_data;
  qc.limits = config_.limits;
  qc.version = config_.version;
  qc.other_versions = config_.other_versions;
  qc.cc = config_.cc;
  qc.preferred_address_move = config_.preferred_address_move;
  qc.qlog_dir = config_.qlog_dir;
  qc.key_log_file = config_.key_log_file;
  qc.loop = config_.loop;
  qc.test_loss = config_.test_loss;

  // The QUIC callbacks hold `alive` so that work the transport runs while the client is being
  // destroyed does nothing.
  QuicClientCallbacks cb;
  std::shared_ptr<bool> alive = alive_;
  cb.on_connected = [this, alive](QuicConnection&) {
    if (*alive) OnConnected();
  };
  cb.on_stream_data = [this, alive](QuicConnection& c, int64_t s, absl::string_view d, bool fin) {
    if (*alive) {
      OnStreamData(s, d, fin);
    } else {
      c.Consume(s, d.size());
    }
  };
  cb.on_stream_reset = [this, alive](QuicConnection&, int64_t s, uint64_t e) {
    if (*alive) OnStreamReset(s, e);
  };
  cb.on_stream_writable = [this, alive](QuicConnection&, int64_t s) {
    if (*alive) OnStreamWritable(s);
  };
  cb.on_stream_closed = [this, alive](QuicConnection&, int64_t s) {
    if (*alive) OnStreamClosed(s);
  };
  cb.on_streams_available = [this, alive](QuicConnection&) {
    if (*alive) {
      Entry e(this);
      Pump();
    }
  };
  cb.on_early_data_rejected = [this, alive](QuicConnection&) {
    if (*alive) OnEarlyDataRejected();
  };
  cb.on_session = [this, alive](std::string session, std::string params) {
    if (*alive && callbacks_.on_session) {
      callbacks_.on_session(std::move(session), std::move(params));
    }
  };
  cb.on_closed = [this, alive] {
    if (*alive) OnClosed();
  };
  absl::StatusOr<std::unique_ptr<QuicClient>> quic = QuicClient::Create(qc, std::move(cb));
  if (!quic.ok()) return quic.status();
  quic_ = *std::move(quic);
  return absl::OkStatus();
}

absl::Status Impl::Connect() {
  // Resuming with 0-RTT: the session and the requests waiting so far start before the first
  // flight, so that they travel with the ClientHello.
  return quic_->Connect([this](QuicConnection& conn) {
    conn_ = &conn;
    if (config_.session.empty() || !config_.early_data) return;
    Entry e(this);
    Pump();
  });
}

void Impl::Run() { quic_->Run(); }

void Impl::Stop() { quic_->Stop(); }

void Impl::CloseWhenDone() {
  Entry e(this);
  close_when_done_ = true;
}

absl::StatusOr<uint64_t> Impl::Submit(Http3Request request, Http3ResponseHandler handler) {
  if (close_when_done_ || quic_closed_ || failed_) {
    return absl::FailedPreconditionError("the HTTP/3 client is closing");
  }
  if (goaway_stream_ >= 0) return RefusedError("the server sent GOAWAY: open a new connection");
  if (request.method.empty() || request.path.empty()) {
    return absl::InvalidArgumentError("a request needs a method and a path");
  }
  Entry e(this);
  auto r = std::make_unique<Request>();
  r->id = next_id_++;
  r->request = std::move(request);
  r->handler = std::move(handler);
  if (r->request.body.length() != uint64_t{0}) {
    r->producer = r->request.body.ReleaseAsProducer();
    const uint64_t id = r->id;
    r->producer->SetResumeCallback([this, id] {
      resumes_.push_back(id);
      RequestFlush();
    });
  }
  const uint64_t id = r->id;
  waiting_.push_back(id);
  requests_.emplace(id, std::move(r));
  return id;
}

void Impl::Cancel(uint64_t id) {
  Entry e(this);
  cancels_.push_back(id);
}

void Impl::SetReadingPaused(uint64_t id, bool paused) {
  Request* r = ById(id);
  if (r == nullptr || r->done || r->paused == paused) return;
  Entry e(this);
  r->paused = paused;
  if (!paused && !r->held.empty()) unpaused_.push_back(id);
}

Impl::Request* Impl::ByStream(int64_t stream) {
  auto it = active_.find(stream);
  return it == active_.end() ? nullptr : it->second;
}

Impl::Request* Impl::ById(uint64_t id) {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

// ---------------------------------------------------------------------------------------------
// Session and streams
// ---------------------------------------------------------------------------------------------

bool Impl::StartSession() {
  if (h3_ != nullptr) return true;
  if (conn_ == nullptr || failed_) return false;
  // The three unidirectional streams first: before the handshake (without 0-RTT) the transport
  // cannot open any, and the session is tried again once connected.
  const int64_t control = conn_->OpenUniStream();
  if (control < 0) return false;
  const int64_t qpack_encoder = conn_->OpenUniStream();
  const int64_t qpack_decoder = conn_->OpenUniStream();
  if (qpack_encoder < 0 || qpack_decoder < 0) {
    Fail(NGHTTP3_ERR_STREAM_NOT_FOUND);
    return false;
  }
  // What the request streams wait for (SETTINGS, QPACK inserts) goes before their bytes.
  for (const int64_t id : {control, qpack_encoder, qpack_decoder}) conn_->SetUrgent(id);
  nghttp3_settings settings;
  nghttp3_settings_default(&settings);
  settings.max_field_section_size = config_.max_field_section_size;
  settings.qpack_max_dtable_capacity = 4096;
  settings.qpack_encoder_max_dtable_capacity = 4096;
  settings.qpack_blocked_streams = 100;
  const nghttp3_callbacks callbacks = Callbacks();
  if (nghttp3_conn_client_new(&h3_, &callbacks, &settings, nullptr, this) != 0) {
    h3_ = nullptr;
    Fail(NGHTTP3_ERR_NOMEM);
    return false;
  }
  if (int rv = nghttp3_conn_bind_control_stream(h3_, control); rv != 0) {
    Fail(rv);
    return false;
  }
  if (int rv = nghttp3_conn_bind_qpack_streams(h3_, qpack_encoder, qpack_decoder); rv != 0) {
    Fail(rv);
    return false;
  }
  return true;
}

void Impl::DeleteSession() {
  if (h3_ != nullptr) nghttp3_conn_del(h3_);
  h3_ = nullptr;
  blocked_.clear();
}

void Impl::Pump() {
  if (quic_closed_ || failed_ || !StartSession()) return;
  while (!waiting_.empty()) {
    Request* r = ById(waiting_.front());
    if (r == nullptr || r->done) {
      waiting_.pop_front();
      continue;
    }
    const int64_t stream = conn_->OpenBidiStream();
    if (stream < 0) return;  // at the stream limit: on_streams_available pumps again
    waiting_.pop_front();
    if (!SubmitOnStream(*r, stream)) return;
  }
}

bool Impl::SubmitOnStream(Request& r, int64_t stream) {
  r.stream = stream;
  active_[stream] = &r;
  const Http3Request& q = r.request;
  std::vector<std::string> lowered;
  lowered.reserve(q.headers.size());
  std::vector<nghttp3_nv> nva;
  nva.reserve(q.headers.size() + 6);
  nva.push_back(http::MakeH3Nv(":method", q.method));
  nva.push_back(http::MakeH3Nv(":scheme", q.scheme));
  nva.push_back(http::MakeH3Nv(":authority", q.authority.empty() ? authority_ : q.authority));
  nva.push_back(http::MakeH3Nv(":path", q.path));
  if (!q.protocol.empty()) nva.push_back(http::MakeH3Nv(":protocol", q.protocol));
  std::string length;
  if (r.producer != nullptr) {
    if (std::optional<uint64_t> n = r.producer->Length(); n.has_value()) {
      length = absl::StrCat(*n);
      nva.push_back(http::MakeH3Nv("content-length", length));
    }
  }
  for (const HeaderField& f : q.headers) {
    lowered.push_back(absl::AsciiStrToLower(f.name));
    if (IsDroppedRequestField(lowered.back())) continue;
    nva.push_back(http::MakeH3Nv(lowered.back(), f.value));
  }
  nghttp3_data_reader reader{[](nghttp3_conn*, int64_t id, nghttp3_vec* vec, size_t veccnt,
                                uint32_t* flags, void* user, void*) -> nghttp3_ssize {
    auto* self = static_cast<Impl*>(user);
    Request* req = self->ByStream(id);
    if (req == nullptr) return NGHTTP3_ERR_WOULDBLOCK;  // finished early: its close is coming
    return self->ReadBody(*req, vec, veccnt, flags);
  }};
  const bool has_body = r.producer != nullptr || !q.trailers.empty();
  const int rv = nghttp3_conn_submit_request(h3_, stream, nva.data(), nva.size(),
                                             has_body ? &reader : nullptr, nullptr);
  if (rv != 0) {
    active_.erase(stream);
    r.stream = -1;
    conn_->ResetStream(stream, NGHTTP3_H3_REQUEST_CANCELLED);
    Finish(r, absl::UnavailableError(absl::StrCat("h3: request not sent: ", nghttp3_strerror(rv))));
    if (rv == NGHTTP3_ERR_CONN_CLOSING) return false;
  }
  return true;
}

nghttp3_ssize Impl::ReadBody(Request& r, nghttp3_vec* vec, size_t veccnt, uint32_t* pflags) {
  if (r.done) return NGHTTP3_ERR_WOULDBLOCK;
  if (r.producer == nullptr || r.producer_ended || veccnt == 0) {
    if (r.producer == nullptr || r.producer_ended) {
      *pflags |= NGHTTP3_DATA_FLAG_EOF;
      if (!r.request.trailers.empty() && !r.trailers_due) {
        *pflags |= NGHTTP3_DATA_FLAG_NO_END_STREAM;
        r.trailers_due = true;
        RequestFlush();
      }
    }
    return 0;
  }
  std::string chunk;
  r.producer_read = true;
  const BodyReadResult result = r.producer->Read(config_.body_chunk, &chunk);
  switch (result.status) {
    case BodyReadStatus::kWouldBlock:
      return NGHTTP3_ERR_WOULDBLOCK;
    case BodyReadStatus::kError:
      // Reset after this write round: the server must not take a truncated body as whole.
      cancels_.push_back(r.id);
      r.failure =
          absl::AbortedError(absl::StrCat("h3: request body failed: ", result.error.message()));
      RequestFlush();
      return NGHTTP3_ERR_WOULDBLOCK;
    case BodyReadStatus::kEnd:
      r.producer_ended = true;
      *pflags |= NGHTTP3_DATA_FLAG_EOF;
      for (const HeaderField& f : r.producer->TakeTrailers()) {
        r.request.trailers.Add(f.name, f.value);
      }
      if (!r.request.trailers.empty()) {
        *pflags |= NGHTTP3_DATA_FLAG_NO_END_STREAM;
        r.trailers_due = true;
        RequestFlush();
      }
      break;
    case BodyReadStatus::kData:
      break;
  }
  if (chunk.empty()) return 0;
  const absl::string_view kept = r.out.Push(std::move(chunk));
  vec[0].base = reinterpret_cast<uint8_t*>(const_cast<char*>(kept.data()));
  vec[0].len = kept.size();
  return 1;
}

// ---------------------------------------------------------------------------------------------
// QUIC events
// ---------------------------------------------------------------------------------------------

void Impl::OnConnected() {
  Entry e(this);
  // The session starts with the connection (RFC 9114 §6.2.1), not with the first request: the
  // server opens its control and QPACK streams as soon as its handshake completes, and their
  // first bytes (stream types, SETTINGS, encoder instructions) are never sent again.
  Pump();
  if (callbacks_.on_connected) callbacks_.on_connected();
}

void Impl::OnStreamData(int64_t stream, absl::string_view data, bool fin) {
  Entry e(this);
  // Bytes the session could never see again: reading on would misparse the stream.
  if (h3_ == nullptr && !failed_ && !StartSession()) Fail(NGHTTP3_ERR_H3_INTERNAL_ERROR);
  if (h3_ == nullptr || failed_) {
    conn_->Consume(stream, data.size());
    return;
  }
  reading_stream_ = stream;
  const nghttp3_ssize n = nghttp3_conn_read_stream(
      h3_, stream, reinterpret_cast<const uint8_t*>(data.data()), data.size(), fin ? 1 : 0);
  reading_stream_ = -1;
  if (n < 0) return Fail(static_cast<int>(n));
  // Framing, QPACK and control bytes: credited now; body bytes as the handler takes them.
  conn_->Consume(stream, static_cast<size_t>(n));
}

void Impl::OnStreamReset(int64_t stream, uint64_t app_error) {
  Entry e(this);
  if (h3_ != nullptr && !failed_) nghttp3_conn_shutdown_stream_read(h3_, stream);
  if (Request* r = ByStream(stream); r != nullptr && !r->done) r->reset_error = app_error;
}

void Impl::OnStreamWritable(int64_t stream) {
  Entry e(this);
  if (h3_ != nullptr && blocked_.erase(stream) > 0) nghttp3_conn_unblock_stream(h3_, stream);
}

void Impl::OnStreamClosed(int64_t stream) {
  Entry e(this);
  blocked_.erase(stream);
  Request* r = ByStream(stream);
  const uint64_t error = r != nullptr && r->reset_error != 0 ? r->reset_error : NGHTTP3_H3_NO_ERROR;
  if (h3_ != nullptr && !failed_) {
    const int rv = nghttp3_conn_close_stream(h3_, stream, error);
    // 0: nghttp3's stream_close callback ends the request, now or, for a response head still
    // waiting for QPACK encoder stream inserts, once it is decoded (with the buffered rest).
    if (rv == 0) return;
    if (rv != NGHTTP3_ERR_STREAM_NOT_FOUND) return Fail(rv);  // a critical stream
  }
  // nghttp3 did not know it (or no session): finish it here.
  if (ByStream(stream) != nullptr) OnStreamClose(stream, error);
}

void Impl::OnEarlyDataRejected() {
  Entry e(this);
  // The transport dropped every stream: start the session again after the handshake and send
  // the requests again, in their order, if their bodies can be.
  DeleteSession();
  std::vector<Request*> resend;
  for (auto& [stream, r] : active_) resend.push_back(r);
  active_.clear();
  std::sort(resend.begin(), resend.end(),
            [](const Request* a, const Request* b) { return a->id < b->id; });
  for (auto it = resend.rbegin(); it != resend.rend(); ++it) {
    Request& r = **it;
    r.stream = -1;
    r.out.Clear();
    r.trailers_due = false;
    if (r.producer_read) {
      Finish(r, absl::UnavailableError(
                    "h3: the server declined 0-RTT and the request body cannot be sent again"));
      continue;
    }
    waiting_.push_front(r.id);
  }
}

void Impl::OnClosed() {
  quic_closed_ = true;
  {
    Entry e(this);
    DeleteSession();
    const absl::Status why = absl::UnavailableError(absl::StrCat(
        "h3: connection closed before the response completed",
        quic_->close_error() != 0 ? absl::StrCat(" (", ngtcp2_strerror(quic_->close_error()), ")")
                                  : std::string()));
    for (auto& [id, r] : requests_) {
      if (r->done) continue;
      if (r->stream < 0 && r->ended && r->head_done) {
        // The response arrived whole and waits only for a paused reader: the connection's
        // end cannot take it away, and no later moment to hand it over will come.
        r->paused = false;
        DeliverHeld(*r);
        continue;
      }
      // Never sent, or on a stream at or past the server's GOAWAY: not processed.
      if (goaway_stream_ >= 0 && (r->stream < 0 || r->stream >= goaway_stream_)) {
        Finish(*r, RefusedError("h3: the connection closed after the server's GOAWAY, before "
                                "the request was processed"));
        continue;
      }
      Finish(*r, why);
    }
  }
  if (callbacks_.on_closed) callbacks_.on_closed();
}

// ---------------------------------------------------------------------------------------------
// Ending requests
// ---------------------------------------------------------------------------------------------

void Impl::Abort(Request& r, uint64_t app_error, absl::Status why) {
  if (r.done) return;
  if (r.stream >= 0) {
    if (h3_ != nullptr && !failed_) {
      nghttp3_conn_shutdown_stream_write(h3_, r.stream);
      nghttp3_conn_shutdown_stream_read(h3_, r.stream);
    }
    conn_->ResetStream(r.stream, app_error);
  }
  Finish(r, std::move(why));
}

void Impl::Finish(Request& r, absl::Status status) {
  if (r.done) return;
  r.done = true;
  if (!r.failure.ok()) status = r.failure;
  r.failure = std::move(status);
  if (r.stream >= 0) active_.erase(r.stream);
  // Nothing more will be read: what was held is no longer owed to the handler, but its
  // credit still lets the server finish (or notice the reset).
  if (!r.held.empty() && conn_ != nullptr && r.stream >= 0) conn_->Consume(r.stream, r.held.size());
  r.held.clear();
  finished_.push_back(r.id);
}

void Impl::DeliverHeld(Request& r) {
  while (!r.done && !r.paused && !r.held.empty()) {
    std::string data = std::move(r.held);
    r.held.clear();
    if (r.handler.on_data) r.handler.on_data(data);
    if (r.stream >= 0) conn_->Consume(r.stream, data.size());
  }
  // The stream already closed cleanly while the reader was paused: this was the rest.
  if (!r.done && r.stream < 0 && r.ended && r.head_done && r.held.empty()) {
    Finish(r, absl::OkStatus());
  }
}

void Impl::Fail(int liberr) {
  if (failed_) return;
  failed_ = true;
  const uint64_t code = nghttp3_err_infer_quic_app_error_code(liberr);
  for (auto& [id, r] : requests_) {
    if (!r->done) {
      Finish(*r, absl::InternalError(absl::StrCat("h3: ", nghttp3_strerror(liberr))));
    }
  }
  if (conn_ != nullptr) conn_->Close(code);
}

// ---------------------------------------------------------------------------------------------
// Output and deferred work
// ---------------------------------------------------------------------------------------------

void Impl::RequestFlush() {
  if (depth_ > 0 || flush_posted_) return;
  flush_posted_ = true;
  quic_->loop()->Post([this, alive = alive_] {
    if (!*alive) return;
    flush_posted_ = false;
    Entry e(this);
  });
}

void Impl::Flush() {
  if (h3_ == nullptr || failed_ || conn_ == nullptr) return;
  for (uint64_t id : std::exchange(resumes_, {})) {
    if (Request* r = ById(id); r != nullptr && !r->done && r->stream >= 0) {
      nghttp3_conn_resume_stream(h3_, r->stream);
    }
  }
  for (auto& [stream, r] : active_) {
    if (!r->trailers_due || r->done) continue;
    r->trailers_due = false;
    std::vector<std::string> lowered;
    std::vector<nghttp3_nv> nva;
    lowered.reserve(r->request.trailers.size());
    for (const HeaderField& f : r->request.trailers) {
      lowered.push_back(absl::AsciiStrToLower(f.name));
      nva.push_back(http::MakeH3Nv(lowered.back(), f.value));
    }
    if (nghttp3_conn_submit_trailers(h3_, stream, nva.data(), nva.size()) != 0) {
      cancels_.push_back(r->id);
    }
  }
  const int rv = http::WriteH3Output(h3_, *conn_, blocked_, [](int64_t) {});
  if (rv != 0) Fail(rv);
}

void Impl::AfterEntry() {
  // Each round may add work (a completion submits, a resume asks to flush); a few rounds
  // settle it, the rest goes to a posted flush.
  for (int round = 0; round < 8; ++round) {
    for (uint64_t id : std::exchange(cancels_, {})) {
      if (Request* r = ById(id); r != nullptr && !r->done) {
        Abort(*r, NGHTTP3_H3_REQUEST_CANCELLED,
              r->failure.ok() ? absl::CancelledError("h3: request cancelled") : r->failure);
      }
    }
    for (uint64_t id : std::exchange(unpaused_, {})) {
      if (Request* r = ById(id)) DeliverHeld(*r);
    }
    Pump();
    Flush();
    std::vector<uint64_t> finished = std::exchange(finished_, {});
    for (uint64_t id : finished) {
      auto it = requests_.find(id);
      if (it == requests_.end()) continue;
      std::unique_ptr<Request> r = std::move(it->second);
      requests_.erase(it);
      if (r->handler.on_complete) r->handler.on_complete(r->failure, r->trailers);
    }
    if (close_when_done_ && !close_sent_ && requests_.empty() && conn_ != nullptr &&
        !quic_closed_) {
      close_sent_ = true;
      conn_->Close(NGHTTP3_H3_NO_ERROR);
    }
    if (cancels_.empty() && unpaused_.empty() && finished_.empty() && resumes_.empty() &&
        (waiting_.empty() || conn_ == nullptr)) {
      bool trailers = false;
      for (auto& [stream, r] : active_) trailers = trailers || r->trailers_due;
      if (!trailers) return;
    }
  }
  RequestFlush();
}

// ---------------------------------------------------------------------------------------------
// Http3Client
// ---------------------------------------------------------------------------------------------

Http3Client::Http3Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Http3Client::~Http3Client() = default;

namespace {
constexpr absl::string_view kRefusedPayload = "petrel/http3-client/refused";
}  // namespace

absl::Status RefusedError(absl::string_view message) {
  absl::Status status = absl::UnavailableError(message);
  status.SetPayload(kRefusedPayload, absl::Cord("1"));
  return status;
}

bool Http3Client::IsRefused(const absl::Status& status) {
  return absl::IsUnavailable(status) && status.GetPayload(kRefusedPayload).has_value();
}

absl::StatusOr<std::unique_ptr<Http3Client>> Http3Client::Create(Http3ClientConfig config,
                                                                 Http3ClientCallbacks callbacks) {
  auto impl = std::make_unique<Impl>(std::move(config), std::move(callbacks));
  if (absl::Status s = impl->Init(); !s.ok()) return s;
  return std::unique_ptr<Http3Client>(new Http3Client(std::move(impl)));
}

absl::Status Http3Client::Connect() { return impl_->Connect(); }
void Http3Client::Run() { impl_->Run(); }
void Http3Client::Stop() { impl_->Stop(); }
void Http3Client::CloseWhenDone() { impl_->CloseWhenDone(); }

absl::StatusOr<uint64_t> Http3Client::Submit(Http3Request request, Http3ResponseHandler handler) {
  return impl_->Submit(std::move(request), std::move(handler));
}

absl::StatusOr<uint64_t> Http3Client::Fetch(
    Http3Request request, absl::AnyInvocable<void(absl::StatusOr<Http3Response>)> done,
    size_t max_body) {
  // on_complete owns the collected response; the other two callbacks, destroyed with it and
  // never called after it, point at it.
  struct Collected {
    Http3Response response;
    bool too_big = false;
    size_t max_body = 0;
    absl::AnyInvocable<void(absl::StatusOr<Http3Response>)> done;
  };
  auto collected = std::make_unique<Collected>();
  collected->max_body = max_body;
  collected->done = std::move(done);
  Collected* c = collected.get();
  Http3ResponseHandler handler;
  handler.on_head = [c](int status, const HeaderMap& headers) {
    c->response.status = status;
    c->response.headers = headers;
  };
  // An oversize body is remembered and reported at completion (the rest is read and dropped).
  handler.on_data = [c](absl::string_view data) {
    if (c->too_big) return;
    if (c->response.body.size() + data.size() > c->max_body) {
      c->too_big = true;
      c->response.body.clear();
      return;
    }
    c->response.body.append(data.data(), data.size());
  };
  handler.on_complete = [collected = std::move(collected)](absl::Status status,
                                                           const HeaderMap& trailers) {
    if (!status.ok()) return collected->done(std::move(status));
    if (collected->too_big) {
      return collected->done(absl::ResourceExhaustedError(
          absl::StrCat("h3: response body over ", collected->max_body, " bytes")));
    }
    collected->response.trailers = trailers;
    collected->done(std::move(collected->response));
  };
  return impl_->Submit(std::move(request), std::move(handler));
}

void Http3Client::Cancel(uint64_t request) { impl_->Cancel(request); }
void Http3Client::SetReadingPaused(uint64_t request, bool paused) {
  impl_->SetReadingPaused(request, paused);
}
size_t Http3Client::pending_requests() const { return impl_->pending_requests(); }
bool Http3Client::connected() const { return impl_->connected(); }
bool Http3Client::closed() const { return impl_->closed(); }
bool Http3Client::session_reused() const { return impl_->quic().session_reused(); }
bool Http3Client::early_data_accepted() const { return impl_->quic().early_data_accepted(); }
size_t Http3Client::qpack_blocked_sections() const { return impl_->qpack_blocked_sections(); }
bool Http3Client::InitiateKeyUpdate() { return impl_->quic().InitiateKeyUpdate(); }
uint32_t Http3Client::version() const {
  QuicConnection* c = impl_->quic().connection();
  return c == nullptr ? 0 : c->version();
}
std::string Http3Client::cipher() const {
  QuicConnection* c = impl_->quic().connection();
  return c == nullptr ? std::string() : c->cipher();
}
SocketAddress Http3Client::local_address() const { return impl_->quic().local_address(); }
EventLoop* Http3Client::loop() { return impl_->quic().loop(); }

}  // namespace petrel
