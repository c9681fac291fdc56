// The nghttp3 callbacks of H3Connection: the trampolines, then the connection methods they call.
#include "http/h3/h3_callbacks.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "http/h3/body_blocks.h"
#include "http/h3/h3_connection.h"

namespace petrel::http {
namespace {

H3Connection* Self(void* user_data) { return static_cast<H3Connection*>(user_data); }

absl::string_view View(nghttp3_rcbuf* buf) {
  const nghttp3_vec v = nghttp3_rcbuf_get_buf(buf);
  return absl::string_view(reinterpret_cast<const char*>(v.base), v.len);
}

// Fields RFC 9114 §4.2 forbids in HTTP/3 messages (TE is allowed only as "trailers"), told by
// the QPACK token nghttp3 hands over with every field: every name here has one.
bool IsConnectionSpecific(int32_t token, absl::string_view value) {
  switch (token) {
    case NGHTTP3_QPACK_TOKEN_CONNECTION:
    case NGHTTP3_QPACK_TOKEN_KEEP_ALIVE:
    case NGHTTP3_QPACK_TOKEN_PROXY_CONNECTION:
    case NGHTTP3_QPACK_TOKEN_TRANSFER_ENCODING:
    case NGHTTP3_QPACK_TOKEN_UPGRADE:
      return true;
    case NGHTTP3_QPACK_TOKEN_TE:
      return value != "trailers";
    default:
      return false;
  }
}

// A request pseudo-header's H3Stream::PseudoHeader bit and name length; bit 0 for any other
// field.
struct RequestPseudoHeader {
  uint8_t bit = 0;
  uint8_t name_size = 0;
};
RequestPseudoHeader RequestPseudoHeaderOf(int32_t token) {
  switch (token) {
    case NGHTTP3_QPACK_TOKEN__METHOD:
      return {H3Stream::kMethod, sizeof(":method") - 1};
    case NGHTTP3_QPACK_TOKEN__SCHEME:
      return {H3Stream::kScheme, sizeof(":scheme") - 1};
    case NGHTTP3_QPACK_TOKEN__AUTHORITY:
      return {H3Stream::kAuthority, sizeof(":authority") - 1};
    case NGHTTP3_QPACK_TOKEN__PATH:
      return {H3Stream::kPath, sizeof(":path") - 1};
    case NGHTTP3_QPACK_TOKEN__PROTOCOL:
      return {H3Stream::kProtocol, sizeof(":protocol") - 1};
    default:
      return {};
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Trampolines
// ---------------------------------------------------------------------------------------------

H3Stream* H3Callbacks::StreamOf(H3Connection* c, int64_t id, void* stream_user_data) {
  return stream_user_data != nullptr ? static_cast<H3Stream*>(stream_user_data) : c->FindStream(id);
}

nghttp3_callbacks H3Callbacks::Table() {
  nghttp3_callbacks cb{};
  cb.acked_stream_data = [](nghttp3_conn*, int64_t id, uint64_t datalen, void* user,
                            void* stream_user) {
    H3Stream* s = H3Callbacks::StreamOf(Self(user), id, stream_user);
    if (s != nullptr) {
      s->out.Ack(datalen);
      s->acked += datalen;
    }
    return 0;
  };
  cb.stream_close = [](nghttp3_conn*, int64_t id, uint64_t app_error, void* user, void*) {
    return Self(user)->OnStreamClose(id, app_error);
  };
  cb.recv_data = [](nghttp3_conn*, int64_t id, const uint8_t* data, size_t datalen, void* user,
                    void* stream_user) {
    H3Connection* c = Self(user);
    return c->OnRecvData(id, H3Callbacks::StreamOf(c, id, stream_user),
                         absl::string_view(reinterpret_cast<const char*>(data), datalen));
  };
  cb.deferred_consume = [](nghttp3_conn*, int64_t id, size_t consumed, void* user, void*) {
    return Self(user)->OnDeferredConsume(id, consumed);
  };
  cb.begin_headers = [](nghttp3_conn*, int64_t id, void* user, void*) {
    return Self(user)->OnBeginHeaders(id);
  };
  cb.recv_header = [](nghttp3_conn*, int64_t id, int32_t token, nghttp3_rcbuf* name,
                      nghttp3_rcbuf* value, uint8_t, void* user, void* stream_user) {
    H3Connection* c = Self(user);
    return c->OnRecvHeader(H3Callbacks::StreamOf(c, id, stream_user), token, name, value);
  };
  cb.end_headers = [](nghttp3_conn*, int64_t id, int fin, void* user, void* stream_user) {
    H3Connection* c = Self(user);
    return c->OnEndHeaders(H3Callbacks::StreamOf(c, id, stream_user), fin != 0);
  };
  cb.begin_trailers = [](nghttp3_conn*, int64_t id, void* user, void* stream_user) {
    if (H3Stream* s = H3Callbacks::StreamOf(Self(user), id, stream_user)) s->in_trailers = true;
    return 0;
  };
  cb.recv_trailer = [](nghttp3_conn*, int64_t id, int32_t token, nghttp3_rcbuf* name,
                       nghttp3_rcbuf* value, uint8_t, void* user, void* stream_user) {
    H3Connection* c = Self(user);
    return c->OnRecvTrailer(H3Callbacks::StreamOf(c, id, stream_user), token, View(name),
                            View(value));
  };
  cb.end_trailers = [](nghttp3_conn*, int64_t id, int, void* user, void* stream_user) {
    H3Connection* c = Self(user);
    return c->OnEndTrailers(H3Callbacks::StreamOf(c, id, stream_user));
  };
  cb.stop_sending = [](nghttp3_conn*, int64_t id, uint64_t app_error, void* user, void*) {
    return Self(user)->OnStopSending(id, app_error);
  };
  cb.end_stream = [](nghttp3_conn*, int64_t id, void* user, void* stream_user) {
    H3Connection* c = Self(user);
    return c->OnEndStream(H3Callbacks::StreamOf(c, id, stream_user));
  };
  cb.reset_stream = [](nghttp3_conn*, int64_t id, uint64_t app_error, void* user, void*) {
    return Self(user)->OnResetStream(id, app_error);
  };
  cb.shutdown = nullptr;  // a client's GOAWAY changes nothing for a server without push
  return cb;
}

nghttp3_ssize H3Callbacks::ReadData(nghttp3_conn*, int64_t stream_id, nghttp3_vec* vec,
                                    size_t veccnt, uint32_t* pflags, void* conn_user_data,
                                    void* stream_user_data) {
  H3Connection* c = Self(conn_user_data);
  H3Stream* s = H3Callbacks::StreamOf(c, stream_id, stream_user_data);
  if (s == nullptr || (s->producer == nullptr && !s->file.has_value() && !s->buffer_pending)) {
    *pflags |= NGHTTP3_DATA_FLAG_EOF;
    return 0;
  }
  return c->ReadResponseData(*s, vec, veccnt, pflags);
}

// ---------------------------------------------------------------------------------------------
// Receiving
// ---------------------------------------------------------------------------------------------

int H3Connection::OnBeginHeaders(int64_t id) {
  if (streams_.Find(id) == nullptr) {
    nghttp3_conn_set_stream_user_data(h3_, id, streams_.Add(id, NewStream(id)));
  }
  return 0;
}

int H3Connection::OnRecvHeader(H3Stream* s, int32_t token, nghttp3_rcbuf* name_buf,
                               nghttp3_rcbuf* value_buf) {
  if (s == nullptr || s->dispatched) return 0;
  // The four request pseudo-headers are told by their QPACK token, which also gives the name's
  // length: their names are not fetched from nghttp3. Any other name is.
  const RequestPseudoHeader pseudo = RequestPseudoHeaderOf(token);
  const uint8_t bit = pseudo.bit;
  const absl::string_view name = bit != 0 ? absl::string_view() : View(name_buf);
  const size_t name_size = bit != 0 ? pseudo.name_size : name.size();
  const absl::string_view value = View(value_buf);
  // RFC 9114 §4.2.2 accounting; past the limit the fields are dropped and the request gets 431.
  s->head.field_bytes += name_size + value.size() + 32;
  if (s->head.field_bytes > options_.max_field_section_size) {
    s->head.too_large = true;
    return 0;
  }
  if (bit != 0 || (!name.empty() && name[0] == ':')) {
    // Pseudo-headers: each at most once, only the request ones (RFC 9114 §4.3.1) and
    // :protocol (extended CONNECT, RFC 9220). They go straight into the Request, reusing its
    // strings' capacity.
    if (bit == 0 || (s->pseudo_seen & bit) != 0 || value.empty() ||
        !s->request().headers().empty()) {  // also: a pseudo-header after a regular field
      s->malformed = true;
      return 0;
    }
    s->pseudo_seen |= bit;
    Request& req = s->request();
    switch (bit) {
      case H3Stream::kMethod:
        s->head.TakeMethod(value, req);
        break;
      case H3Stream::kScheme:
        req.AssignScheme(value);
        s->scheme_http = value == "https" || value == "http";
        break;
      case H3Stream::kAuthority:
        req.AssignAuthority(value);
        break;
      case H3Stream::kProtocol:
        req.AssignProtocol(value);
        break;
      case H3Stream::kPath:
        req.SetTarget(value);
        s->path_origin = value[0] == '/';
        s->path_asterisk = value == "*";
        break;
    }
    return 0;
  }
  // nghttp3 has validated the field already (RFC 9114 §4.2, §10.3): a name that is not a
  // lowercase token never reaches this callback, a value with CR, LF, NUL or surrounding
  // whitespace makes the message malformed there. What is left to the engine is §4.2's list.
  if (IsConnectionSpecific(token, value)) {
    s->malformed = true;
    return 0;
  }
  if (token == NGHTTP3_QPACK_TOKEN_CONTENT_LENGTH) s->head.TakeContentLength(value);
  s->request().headers().Add(name, value);
  return 0;
}

int H3Connection::OnEndHeaders(H3Stream* s, bool fin) {
  if (s == nullptr || s->dispatched) return 0;
  // Pseudo-header rules nghttp3 may leave to us (RFC 9114 §4.3.1, §4.4); a malformed request is
  // a stream error of type H3_MESSAGE_ERROR (§4.1.2).
  const uint8_t seen = s->pseudo_seen;
  const MethodKind method = s->request().method().kind();
  if ((seen & H3Stream::kProtocol) != 0) {
    // Extended CONNECT (RFC 9220, RFC 8441 §4): CONNECT with all four of the others.
    constexpr uint8_t kAll =
        H3Stream::kMethod | H3Stream::kScheme | H3Stream::kPath | H3Stream::kAuthority;
    if (!s->head.method_valid || method != MethodKind::kConnect || (seen & kAll) != kAll ||
        !s->path_origin) {
      s->malformed = true;
    }
  } else if (s->head.method_valid && method == MethodKind::kConnect) {
    if ((seen & H3Stream::kAuthority) == 0 || (seen & (H3Stream::kScheme | H3Stream::kPath)) != 0)
      s->malformed = true;
  } else {
    constexpr uint8_t kRequired = H3Stream::kMethod | H3Stream::kScheme | H3Stream::kPath;
    if ((seen & kRequired) != kRequired) s->malformed = true;
    const bool options_asterisk =
        s->path_asterisk && s->head.method_valid && method == MethodKind::kOptions;
    if ((seen & H3Stream::kPath) != 0 && !s->path_origin && !options_asterisk) s->malformed = true;
    if (s->scheme_http && (seen & H3Stream::kAuthority) == 0 &&
        !s->request().headers().Contains("host"))
      s->malformed = true;
  }
  if (s->malformed) {
    s->dispatched = true;  // no handler runs
    StreamError(*s, NGHTTP3_H3_MESSAGE_ERROR);
    return 0;
  }
  Dispatch(*s);
  if (fin) {
    s->peer_ended = true;
    s->request().body().Deliver({}, true);
  }
  return 0;
}

int H3Connection::OnRecvTrailer(H3Stream* s, int32_t token, absl::string_view name,
                                absl::string_view value) {
  if (s == nullptr || s->reset) return 0;
  s->head.field_bytes += name.size() + value.size() + 32;
  // Names and values were validated by nghttp3 (see OnRecvHeader).
  if ((!name.empty() && name[0] == ':') || IsConnectionSpecific(token, value) ||
      s->head.field_bytes > 2 * options_.max_field_section_size) {
    s->malformed = true;
    return 0;
  }
  s->trailers.Add(name, value);
  return 0;
}

int H3Connection::OnEndTrailers(H3Stream* s) {
  if (s == nullptr || s->reset) return 0;
  s->in_trailers = false;
  if (s->malformed) {
    StreamError(*s, NGHTTP3_H3_MESSAGE_ERROR);
    return 0;
  }
  if (!s->body_abandoned) s->request().body().DeliverTrailers(std::move(s->trailers));
  return 0;
}

int H3Connection::OnEndStream(H3Stream* s) {
  if (s == nullptr) return 0;
  s->peer_ended = true;
  if (!s->body_abandoned && !s->reset) s->request().body().Deliver({}, true);
  return 0;
}

int H3Connection::OnRecvData(int64_t id, H3Stream* s, absl::string_view data) {
  if (s != nullptr) s->peer_active = Now();
  if (s == nullptr || s->closed || s->reset || s->body_abandoned) {
    conn_->Consume(id, data.size());  // nobody reads it: give the credit straight back
    return 0;
  }
  s->body_received += data.size();
  if (s->body_received > s->request().body().limit()) {
    conn_->Consume(id, data.size());
    s->request().body().Fail(absl::ResourceExhaustedError("h3: request body over the limit"));
    s->body_abandoned = true;
    resets_due_.emplace_back(id, NGHTTP3_H3_REQUEST_CANCELLED);
    RequestFlush();
    return 0;
  }
  s->unconsumed += data.size();
  s->request().body().Deliver(data, false);
  return 0;
}

int H3Connection::OnDeferredConsume(int64_t id, size_t consumed) {
  conn_->Consume(id, consumed);
  return 0;
}

int H3Connection::OnStopSending(int64_t id, uint64_t app_error) {
  // QuicConnection cannot send STOP_SENDING alone. H3_NO_ERROR (the response is complete and the
  // rest of the request is not wanted) needs nothing; errors come with reset_stream, handled
  // there by resetting both directions.
  if (app_error != NGHTTP3_H3_NO_ERROR) {
    if (H3Stream* s = FindStream(id)) s->body_abandoned = true;
  }
  return 0;
}

int H3Connection::OnResetStream(int64_t id, uint64_t app_error) {
  conn_->ResetStream(id, app_error);
  if (H3Stream* s = FindStream(id); s != nullptr && !s->reset) {
    s->reset = true;
    s->body_abandoned = true;
    s->request().body().Fail(absl::CancelledError("h3: stream reset"));
    if (!s->response_done) s->response().Cancel();
  }
  return 0;
}

int H3Connection::OnStreamClose(int64_t id, uint64_t) {
  Bury(id);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Sending response bodies
// ---------------------------------------------------------------------------------------------

void H3Connection::QueueTrailers(H3Stream& s, const HeaderMap& producer_trailers,
                                 uint32_t* pflags) {
  if (s.response().trailers().empty() && producer_trailers.empty()) return;
  s.response_trailers = s.response().trailers();
  for (const HeaderField& f : producer_trailers) s.response_trailers.Add(f.name, f.value);
  // Submitted after this write round (Flush), not from inside nghttp3's read.
  *pflags |= NGHTTP3_DATA_FLAG_NO_END_STREAM;
  trailers_due_.push_back(s.id());
}

nghttp3_ssize H3Connection::ReadFileData(H3Stream& s, nghttp3_vec* vec, size_t veccnt,
                                         uint32_t* pflags) {
  const FileBody& file = *s.file;
  if (s.producer_ended || veccnt == 0) {
    if (s.producer_ended) *pflags |= NGHTTP3_DATA_FLAG_EOF;
    return 0;
  }
  const size_t capacity = options_.body_chunk;
  std::unique_ptr<char[]> block = BodyBlocks::Take(capacity);
  const absl::StatusOr<size_t> n = file.ReadInto(s.file_position, block.get(), capacity);
  if (!n.ok()) {
    // The file failed or shrank under us: reset the stream (H3_INTERNAL_ERROR) after this write
    // round so that the peer does not take a truncated body as whole.
    BodyBlocks::Give(std::move(block), capacity);
    s.producer_ended = true;
    resets_due_.emplace_back(s.id(), NGHTTP3_H3_INTERNAL_ERROR);
    return NGHTTP3_ERR_WOULDBLOCK;
  }
  s.file_position += *n;
  if (s.file_position >= file.length()) {
    s.producer_ended = true;
    *pflags |= NGHTTP3_DATA_FLAG_EOF;
    QueueTrailers(s, HeaderMap(), pflags);
  }
  if (*n == 0) {
    BodyBlocks::Give(std::move(block), capacity);
    return 0;
  }
  const absl::string_view kept = s.out.PushBlock(std::move(block), capacity, *n);
  s.body_sent += kept.size();
  vec[0].base = reinterpret_cast<uint8_t*>(const_cast<char*>(kept.data()));
  vec[0].len = kept.size();
  return 1;
}

nghttp3_ssize H3Connection::ReadResponseData(H3Stream& s, nghttp3_vec* vec, size_t veccnt,
                                             uint32_t* pflags) {
  if (s.reset) return NGHTTP3_ERR_WOULDBLOCK;  // its close is on the way
  if (s.buffer_pending) {
    if (veccnt == 0) return 0;
    s.buffer_pending = false;
    s.producer_ended = true;
    *pflags |= NGHTTP3_DATA_FLAG_EOF;
    QueueTrailers(s, HeaderMap(), pflags);
    // The bytes stay in the Response until the stream is recycled (StartResponse).
    const std::string& bytes = *s.response().body().buffer();
    if (bytes.empty()) return 0;
    s.body_sent += bytes.size();
    vec[0].base = reinterpret_cast<uint8_t*>(const_cast<char*>(bytes.data()));
    vec[0].len = bytes.size();
    return 1;
  }
  if (s.file.has_value()) return ReadFileData(s, vec, veccnt, pflags);
  if (s.discard_body) {
    // HEAD with a producer: pull it to its end so a streaming handler completes; send nothing.
    std::string scratch;
    while (!s.producer_ended) {
      scratch.clear();
      const BodyReadResult r = s.producer->Read(options_.body_chunk, &scratch);
      if (r.status == BodyReadStatus::kWouldBlock) return NGHTTP3_ERR_WOULDBLOCK;
      if (r.status == BodyReadStatus::kError) {
        resets_due_.emplace_back(s.id(), NGHTTP3_H3_INTERNAL_ERROR);
        return NGHTTP3_ERR_WOULDBLOCK;
      }
      if (r.status == BodyReadStatus::kEnd) s.producer_ended = true;
    }
    *pflags |= NGHTTP3_DATA_FLAG_EOF;
    return 0;
  }
  if (s.producer_ended || veccnt == 0) {
    if (s.producer_ended) *pflags |= NGHTTP3_DATA_FLAG_EOF;
    return 0;
  }
  std::string chunk;
  const BodyReadResult r = s.producer->Read(options_.body_chunk, &chunk);
  switch (r.status) {
    case BodyReadStatus::kWouldBlock:
      return NGHTTP3_ERR_WOULDBLOCK;
    case BodyReadStatus::kError:
      // The stream is reset (H3_INTERNAL_ERROR) after this write round: the peer must not take a
      // truncated body as whole. Parked meanwhile, so nghttp3 asks for nothing more.
      resets_due_.emplace_back(s.id(), NGHTTP3_H3_INTERNAL_ERROR);
      return NGHTTP3_ERR_WOULDBLOCK;
    case BodyReadStatus::kEnd:
      s.producer_ended = true;
      *pflags |= NGHTTP3_DATA_FLAG_EOF;
      QueueTrailers(s, s.producer->TakeTrailers(), pflags);
      break;
    case BodyReadStatus::kData:
      break;
  }
  if (chunk.empty()) return 0;
  const absl::string_view kept = s.out.Push(std::move(chunk));
  s.body_sent += kept.size();
  vec[0].base = reinterpret_cast<uint8_t*>(const_cast<char*>(kept.data()));
  vec[0].len = kept.size();
  return 1;
}

}  // namespace petrel::http
