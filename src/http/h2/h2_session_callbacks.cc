// The nghttp2 callbacks of H2Connection: the trampolines, then the connection methods they call.
#include "http/h2/h2_session_callbacks.h"

#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "http/h2/h2_connection.h"

namespace petrel::http {
namespace {

H2Connection* Self(void* user_data) { return static_cast<H2Connection*>(user_data); }

absl::string_view View(const uint8_t* p, size_t n) {
  return absl::string_view(reinterpret_cast<const char*>(p), n);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Trampolines
// ---------------------------------------------------------------------------------------------

nghttp2_session_callbacks* H2SessionCallbacks::Create() {
  nghttp2_session_callbacks* cbs = nullptr;
  if (nghttp2_session_callbacks_new(&cbs) != 0) return nullptr;
  nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, &OnBeginFrame);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, &OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(cbs, &OnHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &OnFrameRecv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &OnDataChunkRecv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &OnStreamClose);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, &OnFrameSend);
  return cbs;
}

ssize_t H2SessionCallbacks::ReadData(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                                     uint32_t* data_flags, nghttp2_data_source* source,
                                     void* user_data) {
  return Self(user_data)->ReadResponseData(*static_cast<H2Stream*>(source->ptr), buf, length,
                                           data_flags);
}

int H2SessionCallbacks::OnBeginFrame(nghttp2_session*, const nghttp2_frame_hd* hd,
                                     void* user_data) {
  return Self(user_data)->OnBeginFrame(*hd);
}

int H2SessionCallbacks::OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame,
                                       void* user_data) {
  return Self(user_data)->OnBeginHeaders(*frame);
}

int H2SessionCallbacks::OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                                 size_t namelen, const uint8_t* value, size_t valuelen, uint8_t,
                                 void* user_data) {
  return Self(user_data)->OnHeader(*frame, View(name, namelen), View(value, valuelen));
}

int H2SessionCallbacks::OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  return Self(user_data)->OnFrameRecv(*frame);
}

int H2SessionCallbacks::OnDataChunkRecv(nghttp2_session*, uint8_t flags, int32_t stream_id,
                                        const uint8_t* data, size_t len, void* user_data) {
  return Self(user_data)->OnDataChunk(flags, stream_id, View(data, len));
}

int H2SessionCallbacks::OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t error_code,
                                      void* user_data) {
  return Self(user_data)->OnStreamClose(stream_id, error_code);
}

int H2SessionCallbacks::OnFrameSend(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  return Self(user_data)->OnFrameSend(*frame);
}

// ---------------------------------------------------------------------------------------------
// Receiving
// ---------------------------------------------------------------------------------------------

int H2Connection::OnBeginFrame(const nghttp2_frame_hd& hd) {
  // Flood accounting happens on the frame header, before nghttp2 does any work for the frame.
  const TimePoint now = loop_->now();
  switch (hd.type) {
    case NGHTTP2_HEADERS:
      guard_.OnHeaderBlockStart(hd.length);
      break;
    case NGHTTP2_CONTINUATION:
      if (guard_.OnContinuation(hd.length)) return Calm();
      break;
    case NGHTTP2_DATA:
      if (hd.length == 0 && (hd.flags & NGHTTP2_FLAG_END_STREAM) == 0 && guard_.OnEmptyData(now))
        return Calm();
      break;
    case NGHTTP2_PING:
      if ((hd.flags & NGHTTP2_FLAG_ACK) == 0 && guard_.OnPing(now)) return Calm();
      break;
    case NGHTTP2_SETTINGS:
      if ((hd.flags & NGHTTP2_FLAG_ACK) == 0 && guard_.OnSettings(now)) return Calm();
      break;
    default:
      break;
  }
  return 0;
}

int H2Connection::OnBeginHeaders(const nghttp2_frame& frame) {
  if (frame.hd.type != NGHTTP2_HEADERS || frame.headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  OpenStream(frame.hd.stream_id);
  return 0;
}

int H2Connection::OnHeader(const nghttp2_frame& frame, absl::string_view name,
                           absl::string_view value) {
  if (frame.hd.type != NGHTTP2_HEADERS) return 0;
  H2Stream* s = FindStream(frame.hd.stream_id);
  if (s == nullptr) return 0;
  // RFC 9113 §6.5.2 accounting; past the limit the fields are dropped and the request gets 431
  // (trailers past it reset the stream).
  s->head.field_bytes += name.size() + value.size() + 32;
  if (s->head.field_bytes > options_.max_header_list_size) {
    s->head.too_large = true;
    if (frame.headers.cat != NGHTTP2_HCAT_REQUEST) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return 0;
  }
  if (frame.headers.cat != NGHTTP2_HCAT_REQUEST) {  // trailers (nghttp2 rejects pseudo ones)
    s->trailers.Add(name, value);
    return 0;
  }
  // nghttp2 has already checked names (lowercase tokens), pseudo-header placement, duplicates
  // and connection-specific fields (RFC 9113 §8.2, §8.3). Pseudo-headers go straight into the
  // Request, reusing its strings' capacity.
  Request& req = s->request();
  if (!name.empty() && name[0] == ':') {
    // nghttp2 lets no other pseudo-header through, so the length and one letter tell them
    // apart.
    switch (name.size()) {
      case 5:  // :path
        req.SetTarget(value);
        break;
      case 7:
        if (name[1] == 'm') {
          s->head.TakeMethod(value, req);
        } else if (name[1] == 's') {
          req.AssignScheme(value);
        }
        break;
      case 10:  // :authority
        req.AssignAuthority(value);
        break;
      case 9:  // :protocol (extended CONNECT, which our SETTINGS enable; nghttp2 checks it)
        req.AssignProtocol(value);
        break;
      default:
        break;
    }
    return 0;
  }
  if (name == "content-length") s->head.TakeContentLength(value);
  req.headers().Add(name, value);
  return 0;
}

int H2Connection::OnFrameRecv(const nghttp2_frame& frame) {
  switch (frame.hd.type) {
    case NGHTTP2_HEADERS: {
      H2Stream* s = FindStream(frame.hd.stream_id);
      if (s == nullptr) return 0;
      const bool end_stream = (frame.hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
      s->peer_ended |= end_stream;
      if (frame.headers.cat == NGHTTP2_HCAT_REQUEST) {
        Dispatch(*s);
        if (end_stream) s->request().body().Deliver({}, true);
      } else if (end_stream && !s->body_abandoned) {
        s->request().body().DeliverTrailers(std::move(s->trailers));
      }
      return 0;
    }
    case NGHTTP2_DATA: {
      H2Stream* s = FindStream(frame.hd.stream_id);
      if (s == nullptr || (frame.hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) return 0;
      s->peer_ended = true;
      if (!s->body_abandoned) s->request().body().Deliver({}, true);
      return 0;
    }
    case NGHTTP2_RST_STREAM: {
      // Rapid reset (CVE-2023-44487): streams the client opens and cancels before we answered
      // cost us work for free; count them.
      H2Stream* s = FindStream(frame.hd.stream_id);
      if (s != nullptr && !s->response_done && guard_.OnReset(loop_->now())) return Calm();
      return 0;
    }
    case NGHTTP2_GOAWAY:
      goaway_seen_ = true;
      return 0;
    case NGHTTP2_PING:
      if ((frame.hd.flags & NGHTTP2_FLAG_ACK) != 0 && shutdown_started_ && !final_goaway_sent_ &&
          std::memcmp(frame.ping.opaque_data, kShutdownPingOpaque, 8) == 0) {
        SendFinalGoaway();
      }
      return 0;
    default:
      return 0;
  }
}

int H2Connection::OnDataChunk(uint8_t, int32_t stream_id, absl::string_view data) {
  H2Stream* s = FindStream(stream_id);
  if (s == nullptr || s->closed) {
    nghttp2_session_consume_connection(session_, data.size());
    return 0;
  }
  s->body_received += data.size();
  s->peer_active = loop_->now();
  if (s->body_abandoned) {  // nobody reads it: give the credit straight back
    nghttp2_session_consume(session_, stream_id, data.size());
    return 0;
  }
  if (s->body_received > s->request().body().limit()) {
    s->body_abandoned = true;
    nghttp2_session_consume_connection(session_, data.size());
    s->request().body().Fail(absl::ResourceExhaustedError("h2: request body over the limit"));
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_CANCEL);
    return 0;
  }
  s->unconsumed += data.size();
  s->request().body().Deliver(data, false);
  return 0;
}

int H2Connection::OnStreamClose(int32_t stream_id, uint32_t) {
  // nghttp2's stream user data is still there inside this callback.
  H2Stream* open = FindStream(stream_id);
  if (open == nullptr) return 0;
  std::unique_ptr<H2Stream> s = TakeStream(*open);
  if (last_found_ == s.get()) last_found_ = nullptr;
  s->closed = true;
  // Credit for bytes the handler will never consume now: the connection window only.
  if (s->unconsumed > 0) nghttp2_session_consume_connection(session_, s->unconsumed);
  s->unconsumed = 0;
  RequestBody& body = s->request().body();
  body.set_source(nullptr);
  if (!body.eof()) body.Fail(absl::CancelledError("h2: stream closed"));
  if (!s->response_done) s->response().Cancel();
  ReportDone(*s);
  graveyard_.push_back(std::move(s));
  return 0;
}

int H2Connection::OnFrameSend(const nghttp2_frame& frame) {
  if (frame.hd.type == NGHTTP2_GOAWAY) {
    goaway_seen_ = true;
    // nghttp2 ends the connection for the peer's errors itself; counted once. Not our own
    // failures (INTERNAL_ERROR) and not the flood guard's ENHANCE_YOUR_CALM, counted as its limit.
    const uint32_t code = frame.goaway.error_code;
    if (!protocol_error_reported_ && code != NGHTTP2_NO_ERROR && code != NGHTTP2_INTERNAL_ERROR &&
        code != NGHTTP2_ENHANCE_YOUR_CALM) {
      protocol_error_reported_ = true;
      ReportPeerLimit(PeerLimit::kProtocolError);
    }
  }
  if ((frame.hd.type == NGHTTP2_HEADERS || frame.hd.type == NGHTTP2_DATA) &&
      (frame.hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
    if (H2Stream* s = FindStream(frame.hd.stream_id)) s->response_done = true;
  }
  return 0;
}

}  // namespace petrel::http
