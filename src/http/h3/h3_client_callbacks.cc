// The nghttp3 callbacks of Http3Client::Impl: the trampolines, then the methods they call.
// Handlers' on_head / on_data run from here; anything they ask for is deferred to the end of
// the entry point (see h3_client.h).
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "http/h3/h3_client.h"

namespace petrel {

using Impl = Http3Client::Impl;

namespace {

Impl* Self(void* user_data) { return static_cast<Impl*>(user_data); }

absl::string_view View(nghttp3_rcbuf* buf) {
  const nghttp3_vec v = nghttp3_rcbuf_get_buf(buf);
  return absl::string_view(reinterpret_cast<const char*>(v.base), v.len);
}

std::string ResetReason(uint64_t code) {
  switch (code) {
    case NGHTTP3_H3_REQUEST_REJECTED:
      return "H3_REQUEST_REJECTED: not processed, safe to retry";
    case NGHTTP3_H3_REQUEST_CANCELLED:
      return "H3_REQUEST_CANCELLED";
    case NGHTTP3_H3_MESSAGE_ERROR:
      return "H3_MESSAGE_ERROR";
    case NGHTTP3_H3_INTERNAL_ERROR:
      return "H3_INTERNAL_ERROR";
    case NGHTTP3_H3_EXCESSIVE_LOAD:
      return "H3_EXCESSIVE_LOAD";
    case NGHTTP3_H3_REQUEST_INCOMPLETE:
      return "H3_REQUEST_INCOMPLETE";
    default:
      return absl::StrFormat("error 0x%x", code);
  }
}

}  // namespace

nghttp3_callbacks Impl::Callbacks() {
  nghttp3_callbacks cb{};
  cb.acked_stream_data = [](nghttp3_conn*, int64_t id, uint64_t n, void* user, void*) {
    return Self(user)->OnAckedStreamData(id, n);
  };
  cb.stream_close = [](nghttp3_conn*, int64_t id, uint64_t app_error, void* user, void*) {
    return Self(user)->OnStreamClose(id, app_error);
  };
  cb.recv_data = [](nghttp3_conn*, int64_t id, const uint8_t* data, size_t len, void* user, void*) {
    return Self(user)->OnRecvData(id, absl::string_view(reinterpret_cast<const char*>(data), len));
  };
  cb.deferred_consume = [](nghttp3_conn*, int64_t id, size_t n, void* user, void*) {
    return Self(user)->OnDeferredConsume(id, n);
  };
  cb.begin_headers = [](nghttp3_conn*, int64_t id, void* user, void*) {
    return Self(user)->OnBeginHeaders(id, false);
  };
  cb.recv_header = [](nghttp3_conn*, int64_t id, int32_t, nghttp3_rcbuf* name, nghttp3_rcbuf* value,
                      uint8_t, void* user,
                      void*) { return Self(user)->OnRecvHeader(id, View(name), View(value)); };
  cb.end_headers = [](nghttp3_conn*, int64_t id, int, void* user, void*) {
    return Self(user)->OnEndHeaders(id, false);
  };
  cb.begin_trailers = [](nghttp3_conn*, int64_t id, void* user, void*) {
    return Self(user)->OnBeginHeaders(id, true);
  };
  cb.recv_trailer = [](nghttp3_conn*, int64_t id, int32_t, nghttp3_rcbuf* name,
                       nghttp3_rcbuf* value, uint8_t, void* user,
                       void*) { return Self(user)->OnRecvHeader(id, View(name), View(value)); };
  cb.end_trailers = [](nghttp3_conn*, int64_t id, int, void* user, void*) {
    return Self(user)->OnEndHeaders(id, true);
  };
  cb.stop_sending = [](nghttp3_conn*, int64_t id, uint64_t app_error, void* user, void*) {
    Self(user)->conn_->StopSending(id, app_error);
    return 0;
  };
  cb.end_stream = [](nghttp3_conn*, int64_t id, void* user, void*) {
    return Self(user)->OnEndStream(id);
  };
  cb.reset_stream = [](nghttp3_conn*, int64_t id, uint64_t app_error, void* user, void*) {
    return Self(user)->OnResetStream(id, app_error);
  };
  cb.shutdown = [](nghttp3_conn*, int64_t id, void* user) { return Self(user)->OnGoaway(id); };
  return cb;
}

int Impl::OnAckedStreamData(int64_t stream, uint64_t bytes) {
  if (Request* r = ByStream(stream)) r->out.Ack(bytes);
  return 0;
}

int Impl::OnStreamClose(int64_t stream, uint64_t app_error) {
  blocked_.erase(stream);
  Request* r = ByStream(stream);
  if (r == nullptr || r->done) return 0;
  if (app_error != NGHTTP3_H3_NO_ERROR || r->reset_error != 0) {
    const uint64_t code = r->reset_error != 0 ? r->reset_error : app_error;
    std::string why = absl::StrCat("h3: stream reset by the server (", ResetReason(code), ")");
    Finish(*r,
           code == NGHTTP3_H3_REQUEST_REJECTED ? RefusedError(why) : absl::UnavailableError(why));
    return 0;
  }
  if (!r->ended || !r->head_done) {
    Finish(*r, absl::DataLossError("h3: the response stream ended before the response did"));
    return 0;
  }
  active_.erase(stream);
  r->stream = -1;
  if (!r->held.empty()) return 0;  // complete once the paused reader took it (DeliverHeld)
  Finish(*r, absl::OkStatus());
  return 0;
}

int Impl::OnRecvData(int64_t stream, absl::string_view data) {
  Request* r = ByStream(stream);
  if (r == nullptr || r->done) {
    conn_->Consume(stream, data.size());  // nobody reads it: give the credit straight back
    return 0;
  }
  if (r->paused || !r->held.empty()) {
    r->held.append(data.data(), data.size());
    return 0;
  }
  if (r->handler.on_data) r->handler.on_data(data);
  conn_->Consume(stream, data.size());
  return 0;
}

int Impl::OnDeferredConsume(int64_t stream, size_t bytes) {
  conn_->Consume(stream, bytes);
  return 0;
}

int Impl::OnBeginHeaders(int64_t stream, bool trailers) {
  if (Request* r = ByStream(stream); r != nullptr && trailers) r->in_trailers = true;
  return 0;
}

int Impl::OnRecvHeader(int64_t stream, absl::string_view name, absl::string_view value) {
  Request* r = ByStream(stream);
  if (r == nullptr || r->done || !r->failure.ok()) return 0;
  r->field_bytes += name.size() + value.size() + 32;
  if (r->field_bytes > config_.max_field_section_size) {
    r->failure = absl::ResourceExhaustedError(
        absl::StrCat("h3: response field section over ", config_.max_field_section_size, " bytes"));
    cancels_.push_back(r->id);
    return 0;
  }
  const bool pseudo = !name.empty() && name[0] == ':';
  if (r->in_trailers) {
    if (pseudo) {
      r->failure = absl::DataLossError("h3: pseudo-header in the response trailers");
      cancels_.push_back(r->id);
      return 0;
    }
    r->trailers.Add(name, value);
    return 0;
  }
  if (pseudo) {
    int status = 0;
    if (name != ":status" || r->status != 0 || value.size() != 3 ||
        !absl::SimpleAtoi(value, &status) || status < 100) {
      r->failure = absl::DataLossError(absl::StrCat("h3: malformed response pseudo-header ", name));
      cancels_.push_back(r->id);
      return 0;
    }
    r->status = status;
    return 0;
  }
  r->headers.Add(name, value);
  return 0;
}

int Impl::OnEndHeaders(int64_t stream, bool trailers) {
  if (stream != reading_stream_) ++qpack_blocked_sections_;
  Request* r = ByStream(stream);
  if (r == nullptr || r->done || !r->failure.ok()) return 0;
  if (trailers) {
    r->in_trailers = false;
    return 0;
  }
  if (r->status == 0) {
    r->failure = absl::DataLossError("h3: response without :status");
    cancels_.push_back(r->id);
    return 0;
  }
  if (r->status < 200) {  // interim: the final head follows
    r->status = 0;
    r->headers.Clear();
    r->field_bytes = 0;
    return 0;
  }
  r->head_done = true;
  if (r->handler.on_head) r->handler.on_head(r->status, r->headers);
  return 0;
}

int Impl::OnEndStream(int64_t stream) {
  if (Request* r = ByStream(stream)) r->ended = true;
  return 0;
}

int Impl::OnResetStream(int64_t stream, uint64_t app_error) {
  // nghttp3 found the stream broken (e.g. a malformed response) and asks to end it.
  conn_->ResetStream(stream, app_error);
  if (Request* r = ByStream(stream); r != nullptr && !r->done) {
    Finish(*r, absl::DataLossError(
                   absl::StrCat("h3: response stream failed (", ResetReason(app_error), ")")));
  }
  return 0;
}

int Impl::OnGoaway(int64_t stream) {
  goaway_stream_ = stream;
  // Requests that have no stream yet cannot go out on this connection any more.
  for (uint64_t id : waiting_) {
    if (Request* r = ById(id); r != nullptr && !r->done) {
      Finish(*r, RefusedError("h3: the server sent GOAWAY before the request went out"));
    }
  }
  waiting_.clear();
  if (callbacks_.on_goaway) callbacks_.on_goaway(stream);
  return 0;
}

}  // namespace petrel
