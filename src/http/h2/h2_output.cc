// H2Connection's output side: the response HEADERS, the DATA source nghttp2 pulls from, and the
// turn-end flush that moves every frame of the turn into the TcpStream in one write.
#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "http/ascii.h"
#include "http/date_cache.h"
#include "http/field_names.h"
#include "http/h2/h2_connection.h"
#include "http/h2/h2_session_callbacks.h"

namespace petrel::http {
namespace {

// One Write carries at most this many bytes of frames (four full DATA frames at the default
// frame size): it bounds the batch buffer, and TLS cuts it into full records anyway.
constexpr size_t kMaxWriteBatch = 64 * 1024;

constexpr uint8_t kNoCopy = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;

// The batch frames are gathered in before the one Write: one per loop thread, since flushes
// never nest (a flush only schedules other connections' flushes, through their producers'
// resume callbacks). `in_use` catches a nested flush anyway, which then gathers into a
// buffer of its own.
struct BatchBuffer {
  std::string bytes;
  bool in_use = false;
};
thread_local BatchBuffer tls_batch;

}  // namespace

// ---- Response HEADERS ----

void H2Connection::StartResponse(H2Stream& s) {
  if (s.response_submitted || s.closed || session_ == nullptr || closed_) return;
  s.response_submitted = true;
  Response& res = s.response();
  const int status = res.status();  // 200..599 (Response::Commit)
  const bool head = s.request().method().kind() == MethodKind::kHead;
  ResponseBody& body = res.body();
  const ResponseBody::Kind kind = body.kind();
  const std::optional<uint64_t> length = body.length();

  // The field list points into the Response's HeaderMap, the stream (lowercased names, length)
  // and static storage (status), NO_COPY: all stay put until the stream is recycled, after
  // nghttp2 has sent or dropped the HEADERS frame.
  // HTTP/2 wants lowercase names; handlers often set "ETag" or "Content-Type". Unless the map
  // knows its names are lowercase (StaticFiles' are), lowercase copies go to the stream's own
  // buffer, which is cheaper than rewriting the map in place, and whose bytes stay put as long
  // as the stream (NO_COPY).
  const HeaderMap& headers = res.headers();
  const bool copy_names = !headers.names_lowercase();
  if (copy_names && s.names.size() < headers.byte_size()) s.names.resize(headers.byte_size());
  char* names = s.names.data();
  // Written by index into a list that only grows: no per-field push_back bookkeeping.
  const size_t most = headers.size() + 3;  // + :status, content-length, date
  if (nva_.size() < most) nva_.resize(most);
  nghttp2_nv* const nva = nva_.data();
  size_t nvlen = 0;
  nva[nvlen++] = MakeNv(":status", http_internal::StatusDigits(status), kNoCopy);
  bool has_date = false;
  for (const HeaderField f : headers) {
    absl::string_view name = f.name;
    if (copy_names) {
      http_internal::CopyLowercase(names, f.name.data(), f.name.size());
      name = absl::string_view(names, f.name.size());
      names += f.name.size();
    }
    const http_internal::FieldRole role = http_internal::ResponseFieldRole(name);
    if (role == http_internal::FieldRole::kDrop) continue;
    has_date = has_date || role == http_internal::FieldRole::kDate;
    nva[nvlen++] = MakeNv(name, f.value, kNoCopy);
  }
  // RFC 9110 §6.6.1: an origin server with a clock sends Date; the handler's own wins. The view
  // into the thread's cache stays readable (see date_cache.h).
  if (!has_date) {
    nva[nvlen++] = MakeNv("date", http_internal::ThreadDateCache().Get(), kNoCopy);
  }
  if (length.has_value() && status != 204) {
    const std::to_chars_result r =
        std::to_chars(s.length_text, s.length_text + sizeof(s.length_text), *length);
    nva[nvlen++] = MakeNv(
        "content-length",
        absl::string_view(s.length_text, static_cast<size_t>(r.ptr - s.length_text)), kNoCopy);
  }

  const bool is_producer = kind == ResponseBody::Kind::kProducer;
  const bool no_body =
      (head && !is_producer) ||
      (length.has_value() && *length == 0 && res.trailers().empty() && !is_producer) ||
      status == 204 || status == 304;
  int rv = 0;
  if (no_body) {
    // A producer stays in the Response (a streaming handler may still write into it) and goes
    // when the stream is recycled.
    rv = nghttp2_submit_response(session_, s.id(), nva, nvlen, nullptr);
  } else {
    switch (kind) {
      case ResponseBody::Kind::kBuffer:
        s.source = H2Stream::Source::kBuffer;
        s.source_length = body.buffer()->size();
        break;
      case ResponseBody::Kind::kFile:
        s.source = H2Stream::Source::kFile;
        s.source_length = body.file()->length();
        break;
      case ResponseBody::Kind::kProducer: {
        s.source = H2Stream::Source::kProducer;
        s.producer = body.ReleaseAsProducer();
        s.discard_body = head;
        const int32_t id = s.id();
        s.producer->SetResumeCallback([this, id] {
          resumes_.push_back(id);
          RequestFlush();
        });
        if (shutdown_started_) s.producer->OnServerStopping();
        break;
      }
    }
    nghttp2_data_provider provider;
    provider.source.ptr = &s;
    provider.read_callback = &H2SessionCallbacks::ReadData;
    rv = nghttp2_submit_response(session_, s.id(), nva, nvlen, &provider);
  }
  if (rv != 0)
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id(), NGHTTP2_INTERNAL_ERROR);
  RequestFlush();
}

// ---- DATA ----

ssize_t H2Connection::ReadResponseData(H2Stream& s, uint8_t* buf, size_t length,
                                       uint32_t* data_flags) {
  size_t n = 0;
  bool end = false;
  switch (s.source) {
    case H2Stream::Source::kBuffer: {
      const std::string& bytes = *s.response().body().buffer();
      n = static_cast<size_t>(std::min<uint64_t>(length, s.source_length - s.source_offset));
      if (n > 0) std::memcpy(buf, bytes.data() + s.source_offset, n);
      s.source_offset += n;
      end = s.source_offset == s.source_length;
      break;
    }
    case H2Stream::Source::kFile: {
      // pread straight into nghttp2's frame buffer: no staging copy, no allocation.
      const FileBody& file = *s.response().body().file();
      const size_t want =
          static_cast<size_t>(std::min<uint64_t>(length, s.source_length - s.source_offset));
      while (n < want) {
        const ssize_t r = pread(file.fd(), buf + n, want - n,
                                static_cast<off_t>(file.offset() + s.source_offset + n));
        if (r < 0 && errno == EINTR) continue;
        // An error, or the file shrank under us: reset the stream (INTERNAL_ERROR) so that the
        // peer does not take a truncated body as whole.
        if (r <= 0) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        n += static_cast<size_t>(r);
      }
      s.source_offset += n;
      end = s.source_offset == s.source_length;
      break;
    }
    case H2Stream::Source::kProducer:
      if (s.discard_body) {
        // HEAD with a producer: pull it to its end so a streaming handler completes; send
        // nothing.
        while (!s.producer_ended) {
          s.out.clear();
          const BodyReadResult r = s.producer->Read(16 * 1024, &s.out);
          if (r.status == BodyReadStatus::kWouldBlock) return NGHTTP2_ERR_DEFERRED;
          if (r.status == BodyReadStatus::kError) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
          if (r.status == BodyReadStatus::kEnd) s.producer_ended = true;
        }
        s.out.clear();
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
        return 0;
      }
      while (s.out_offset == s.out.size() && !s.producer_ended) {
        s.out.clear();
        s.out_offset = 0;
        const BodyReadResult r = s.producer->Read(length, &s.out);
        if (r.status == BodyReadStatus::kWouldBlock) return NGHTTP2_ERR_DEFERRED;
        // The stream is reset (INTERNAL_ERROR): the peer must not take a truncated body as
        // whole.
        if (r.status == BodyReadStatus::kError) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        if (r.status == BodyReadStatus::kEnd) s.producer_ended = true;
      }
      n = std::min(length, s.out.size() - s.out_offset);
      if (n > 0) std::memcpy(buf, s.out.data() + s.out_offset, n);
      s.out_offset += n;
      end = s.producer_ended && s.out_offset == s.out.size();
      break;
    case H2Stream::Source::kNone:
      end = true;
      break;
  }
  s.body_sent += n;
  if (end) {
    *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    // Most responses have no trailers: checked here, without a call.
    if (s.producer != nullptr || !s.response().trailers().empty()) SubmitTrailers(s, data_flags);
  }
  return static_cast<ssize_t>(n);
}

void H2Connection::SubmitTrailers(H2Stream& s, uint32_t* data_flags) {
  HeaderMap from_producer;
  if (s.producer != nullptr) from_producer = s.producer->TakeTrailers();
  if (s.response().trailers().empty() && from_producer.empty()) return;
  // Rare: a copy, so both lists go in one frame; nghttp2 copies the fields on submit.
  HeaderMap trailers = s.response().trailers();
  for (const HeaderField& f : from_producer) trailers.Add(f.name, f.value);
  trailers.LowercaseNames();
  nva_.clear();
  for (const HeaderField f : trailers) nva_.push_back(MakeNv(f.name, f.value));
  *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
  nghttp2_submit_trailer(session_, s.id(), nva_.data(), nva_.size());
}

// ---- Flushing ----

void H2Connection::RequestFlush() {
  flush_wanted_ = true;
  // Inside an entry point AfterEntry schedules it; inside the turn-end flush its rounds do.
  if (depth_ == 0) ScheduleFlush();
}

void H2Connection::ScheduleFlush() {
  if (flush_scheduled_ || closed_ || session_ == nullptr) return;
  flush_scheduled_ = true;
  // After the batch: every stream answered in this turn (by any connection's input) has queued
  // its frames by then.
  loop_->RunAfterBatch([self = self_] {
    if (H2Connection* c = *self) c->FlushAtTurnEnd();
  });
}

void H2Connection::FlushAtTurnEnd() {
  flush_scheduled_ = false;
  if (session_ == nullptr || closed_) return;
  flush_on_exit_ = true;
  Entry e(this);
}

void H2Connection::Flush() {
  if (session_ == nullptr || closed_) return;
  for (int32_t id : resumes_) {
    if (FindStream(id) != nullptr) nghttp2_session_resume_data(session_, id);
  }
  resumes_.clear();
  std::string own;
  std::string* batch = &own;
  // One access to the thread_local (each goes through its initialisation check).
  BatchBuffer& shared = tls_batch;
  if (!shared.in_use) {
    shared.in_use = true;
    batch = &shared.bytes;
  }
  // The batch string only grows; `used` bytes of it are this write's. Frames are copied in with
  // memcpy: append's bookkeeping cost more than the copy for the small frames of small requests.
  bool drained = false;
  while (!drained && !write_blocked_ && !closed_ && session_ != nullptr) {
    size_t used = 0;
    while (used < kMaxWriteBatch) {
      // Each call yields one frame (or part of one); the bytes are valid until the next call.
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) {
        if (batch == &shared.bytes) shared.in_use = false;
        stream_->Close(
            absl::InternalError(absl::StrCat("h2: ", nghttp2_strerror(static_cast<int>(n)))));
        return;
      }
      if (n == 0) {
        drained = true;
        break;
      }
      const size_t len = static_cast<size_t>(n);
      if (batch->size() - used < len) batch->resize(std::max(2 * batch->size(), used + len));
      std::memcpy(batch->data() + used, data, len);
      used += len;
    }
    if (used == 0) break;
    ++writes_;
    if (!stream_->Write(absl::string_view(batch->data(), used))) {
      write_blocked_ = true;
      write_blocked_since_ = loop_->now();
    }
  }
  if (batch == &shared.bytes) shared.in_use = false;
}

void H2Connection::AfterEntry() {
  // Output is wanted when a handler or producer asked for it, or nghttp2 queued frames of its
  // own (SETTINGS ACK, PING ACK, WINDOW_UPDATE, ...).
  const bool wanted = !write_blocked_ && session_ != nullptr && !closed_ &&
                      (flush_wanted_ || !resumes_.empty() || nghttp2_session_want_write(session_));
  if (std::exchange(flush_on_exit_, false) && wanted) {
    ++flushes_;
    // Flushing runs callbacks (producers, handlers) that may ask for more output; a few rounds
    // settle it, and what is left goes to the next drain point of the loop.
    for (int round = 0; round < 4; ++round) {
      flush_wanted_ = false;
      Flush();
      if (!(flush_wanted_ || !resumes_.empty()) || write_blocked_ || closed_) break;
    }
    if ((flush_wanted_ || !resumes_.empty()) && !write_blocked_) ScheduleFlush();
  } else if (wanted) {
    // Outside OnReadable (timers, OnWritable, Shutdown): what was queued leaves together at
    // the end of the turn.
    ScheduleFlush();
  }
  flush_wanted_ = false;
  RecycleClosedStreams();
  MaybeFinish();
  UpdateIdleSince();
}

bool H2Connection::AnyStreamCanSend() const {
  if (nghttp2_session_get_remote_window_size(session_) <= 0) return false;
  for (const auto& s : streams_) {
    if (!s->dispatched || s->response_done) continue;
    if (nghttp2_session_get_stream_remote_window_size(session_, s->id()) > 0) return true;
  }
  return false;
}

void H2Connection::UpdateIdleSince() {
  if (!streams_.empty() || closed_ || finishing_ || shutdown_started_) {
    idle_since_.reset();
  } else if (!idle_since_.has_value()) {
    idle_since_ = loop_->now();
  }
}

Duration H2Connection::WatchdogPeriod() const {
  // Half the shortest timeout: the idle and send timeouts act within 1.5 times their length,
  // stalled streams (whose clock starts when the watchdog first sees them) within twice.
  Duration shortest = Duration::max();
  for (Duration d : {options_.idle_timeout, options_.header_timeout, options_.body_timeout,
                     options_.send_timeout}) {
    if (d > Duration::zero()) shortest = std::min(shortest, d);
  }
  if (shortest == Duration::max()) return shortest;
  return std::max<Duration>(shortest / 2, std::chrono::milliseconds(10));
}

bool H2Connection::WindowStalled(H2Stream& s, TimePoint now) {
  if (options_.send_timeout <= Duration::zero() || !s.response_submitted || s.response_done) {
    return false;
  }
  const bool shut = nghttp2_session_get_stream_remote_window_size(session_, s.id()) <= 0 ||
                    nghttp2_session_get_remote_window_size(session_) <= 0;
  if (!shut) {
    s.window_shut_since = TimePoint();
    return false;
  }
  if (s.window_shut_since == TimePoint() || s.body_sent != s.window_shut_sent) {
    s.window_shut_since = now;  // shut from now on, or DATA left since the last look
    s.window_shut_sent = s.body_sent;
    return false;
  }
  return now - s.window_shut_since >= options_.send_timeout;
}

void H2Connection::OnWatchdog() {
  if (closed_ || finishing_ || session_ == nullptr) return;
  Entry e(this);
  const TimePoint now = loop_->now();
  if (write_blocked_ && options_.send_timeout > Duration::zero() &&
      now - write_blocked_since_ >= options_.send_timeout) {
    ReportPeerLimit(PeerLimit::kSendTimeout);
    stream_->Close(absl::DeadlineExceededError("h2: send timeout"));
    return;
  }
  if (idle_since_.has_value() && options_.idle_timeout > Duration::zero() &&
      now - *idle_since_ >= options_.idle_timeout) {
    // The GOAWAY names the last stream processed; once it is out, nghttp2 wants neither to
    // read nor to write and MaybeFinish closes the connection.
    shutdown_started_ = true;
    SendFinalGoaway();
    return;
  }
  // By index: failing a body runs the handler's callback, which only records work.
  for (size_t i = 0; i < streams_.size(); ++i) {
    H2Stream& s = *streams_[i];
    if (s.closed) continue;
    if (WindowStalled(s, now)) {
      // The peer keeps the window shut on a response that waits to be sent; TCP is not blocked,
      // so the connection's send timeout does not see it.
      ReportPeerLimit(PeerLimit::kSendTimeout);
      s.window_shut_since = TimePoint();
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id(), NGHTTP2_CANCEL);
      continue;
    }
    if (s.peer_ended) continue;
    if (s.peer_active == TimePoint()) {
      // First seen by the watchdog: the stall clock starts now (stamping every new stream
      // would cost each request a clock read; this way a stall is caught one period later).
      s.peer_active = now;
      continue;
    }
    if (!s.dispatched) {
      if (options_.header_timeout > Duration::zero() &&
          now - s.peer_active >= options_.header_timeout) {
        ReportPeerLimit(PeerLimit::kHeaderTimeout);
        final_goaway_sent_ = true;
        shutdown_started_ = true;
        nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
        return;
      }
      continue;
    }
    // Bytes the handler has not consumed hold back the peer's credit: then the wait is the
    // handler's, not the peer's.
    // An extended CONNECT (a WebSocket) is a tunnel: silence is normal there, and its own
    // protocol keeps it alive.
    if (options_.body_timeout > Duration::zero() && (s.unconsumed == 0 || s.response_done) &&
        s.request().protocol().empty() && now - s.peer_active >= options_.body_timeout) {
      ReportPeerLimit(PeerLimit::kBodyTimeout);
      s.peer_ended = true;
      RequestBody& body = s.request().body();
      body.set_source(nullptr);
      if (!body.eof()) body.Fail(absl::DeadlineExceededError("h2: request body timed out"));
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id(),
                                s.response_done ? NGHTTP2_NO_ERROR : NGHTTP2_CANCEL);
    }
  }
  watchdog_timer_.StartAfter(WatchdogPeriod());
}

void H2Connection::MaybeFinish() {
  // A scheduled flush still has frames to hand to the TcpStream; it checks again afterwards.
  if (closed_ || finishing_ || session_ == nullptr || flush_scheduled_) return;
  const bool done = (goaway_seen_ && !nghttp2_session_want_read(session_) &&
                     !nghttp2_session_want_write(session_)) ||
                    (peer_finished_ && (streams_.empty() || !AnyStreamCanSend()));
  if (done) {
    finishing_ = true;
    stream_->ShutdownAfterFlush();
  }
}

}  // namespace petrel::http
