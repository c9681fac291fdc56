#include "http/websocket/websocket_session.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "http/websocket/handshake.h"
#include "petrel/http/request_observer.h"

namespace petrel::http_internal {
WebSocketSession::WebSocketSession(Request& req, std::unique_ptr<WebSocketHandler> handler,
                                   const WebSocketOptions& options, std::string subprotocol,
                                   EventLoop* loop)
    : req_(req),
      handler_(std::move(handler)),
      options_(options),
      subprotocol_(std::move(subprotocol)) {
  static const wslay_event_callbacks kCallbacks = {
      &WebSocketSession::RecvCallback,
      &WebSocketSession::SendCallback,
      nullptr,  // masking keys: servers do not mask
      &WebSocketSession::OnFrameStartCallback,
      nullptr,
      nullptr,
      &WebSocketSession::OnMessageCallback,
  };
  if (wslay_event_context_server_init(&ctx_, &kCallbacks, this) != 0) ctx_ = nullptr;
  if (ctx_ != nullptr) wslay_event_config_set_max_recv_msg_length(ctx_, options_.max_message);
  if (loop != nullptr && options_.idle_timeout > Duration::zero()) {
    idle_timer_ = std::make_unique<Timer>(loop, [this] { OnIdleTimer(); });
  }
}

namespace {

HttpProtocol ProtocolOf(HttpVersion version) {
  switch (version) {
    case HttpVersion::k2:
      return HttpProtocol::kHttp2;
    case HttpVersion::k3:
      return HttpProtocol::kHttp3;
    default:
      return HttpProtocol::kHttp1;
  }
}

}  // namespace

WebSocketSession::~WebSocketSession() {
  Finish(WebSocketClose::kAbnormal, {});
  if (observer_ != nullptr) {
    // Counted once the engine let go of it: a close frame still queued then never left.
    const bool sent = ctx_ != nullptr && wslay_event_get_close_sent(ctx_);
    observer_->OnWebSocketClosed(
        protocol_, sent ? wslay_event_get_status_code_sent(ctx_) : WebSocketClose::kAbnormal);
  }
  if (ctx_ != nullptr) wslay_event_context_free(ctx_);
}

void WebSocketSession::Start() {
  if (ctx_ == nullptr) {
    failed_ = true;
    Finish(WebSocketClose::kInternalError, "out of memory");
    NotifyResume();
    return;
  }
  if (idle_timer_ != nullptr) idle_timer_->StartAfter(options_.idle_timeout);
  // OnOpen first: bytes that came with the opening (h2/h3 DATA right behind the HEADERS) are
  // delivered as soon as reading starts, and their messages must not overtake it.
  handler_->OnOpen(*this);
  started_ = true;
  // Kept: by the time the engine destroys this producer it may have reset the request.
  observer_ = req_.observer();
  protocol_ = ProtocolOf(req_.version());
  if (observer_ != nullptr) observer_->OnWebSocketOpened(protocol_);
  if (stopping_) Close(WebSocketClose::kGoingAway, "server stopping");
  req_.body().Read(
      [this](absl::string_view chunk, bool last) {
        input_.append(chunk.data(), chunk.size());
        if (last) input_ended_ = true;
        Receive();
      },
      [this](const absl::Status&) {
        input_ended_ = true;
        failed_ = true;
        Finish(WebSocketClose::kAbnormal, {});
        NotifyResume();
      });
}

void WebSocketSession::Abort() { Finish(WebSocketClose::kAbnormal, {}); }

void WebSocketSession::OnServerStopping() {
  stopping_ = true;
  if (started_) Close(WebSocketClose::kGoingAway, "server stopping");
}

bool WebSocketSession::Queue(uint8_t opcode, absl::string_view payload) {
  if (closed_ || ctx_ == nullptr || wslay_event_get_close_sent(ctx_)) return false;
  if (buffered_amount() >= options_.send_buffer) {
    want_writable_ = true;
    return false;
  }
  wslay_event_msg msg = {opcode, reinterpret_cast<const uint8_t*>(payload.data()), payload.size()};
  if (wslay_event_queue_msg(ctx_, &msg) != 0) return false;
  Flush();
  return true;
}

bool WebSocketSession::Ping(absl::string_view payload) {
  if (payload.size() > 125) return false;
  return Queue(WSLAY_PING, payload);
}

void WebSocketSession::Close(uint16_t code, absl::string_view reason) {
  if (closed_ || ctx_ == nullptr || wslay_event_get_close_sent(ctx_)) return;
  if (reason.size() > 123 || !IsValidUtf8(reason)) reason = {};
  wslay_event_queue_close(ctx_, code, reinterpret_cast<const uint8_t*>(reason.data()),
                          reason.size());
  Flush();
}

void WebSocketSession::PauseReading() {
  paused_ = true;
  req_.body().Pause();
}

void WebSocketSession::ResumeReading() {
  if (!paused_) return;
  paused_ = false;
  req_.body().Resume();  // may deliver what waited, which runs Receive
  Receive();             // and what wslay was left holding
}

size_t WebSocketSession::buffered_amount() const {
  const size_t queued = ctx_ != nullptr ? wslay_event_get_queued_msg_length(ctx_) : 0;
  return queued + (output_.size() - output_head_);
}

void WebSocketSession::Receive() {
  if (ctx_ == nullptr || receiving_ || paused_) return;
  receiving_ = true;
  const int rv = wslay_event_get_read_enabled(ctx_) ? wslay_event_recv(ctx_) : 0;
  if (rv == WSLAY_ERR_NOMEM) {
    failed_ = true;
    Finish(WebSocketClose::kInternalError, "out of memory");
  } else if (rv != 0) {
    // wslay answers violations inside a frame's rules with a close of its own (1002, 1007,
    // 1009). A frame its parser refuses (a control frame fragmented or over 125 bytes) it
    // answers with a close without a code and WSLAY_ERR_CALLBACK_FAILURE — our callbacks never
    // fail, the receive callback only says "no more bytes now" — so the handler hears 1002.
    Fail(WebSocketClose::kProtocolError, "protocol error");
  }
  receiving_ = false;
  if (input_head_ == input_.size()) {
    input_.clear();
    input_head_ = 0;
  }
  if (input_ended_ && input_head_ == input_.size() && !wslay_event_get_close_received(ctx_)) {
    // The peer's side ended without a closing handshake (RFC 6455 §7.1.5: 1006).
    Finish(WebSocketClose::kAbnormal, {});
  }
  Flush();
}

void WebSocketSession::Flush() {
  if (ctx_ != nullptr && wslay_event_want_write(ctx_)) wslay_event_send(ctx_);
  NotifyResume();
}

void WebSocketSession::Fail(uint16_t code, absl::string_view reason) {
  if (ctx_ != nullptr && !wslay_event_get_close_sent(ctx_)) {
    wslay_event_queue_close(ctx_, code, reinterpret_cast<const uint8_t*>(reason.data()),
                            reason.size());
  }
  if (ctx_ != nullptr) wslay_event_shutdown_read(ctx_);
  Finish(code, reason);
}

void WebSocketSession::Finish(uint16_t code, absl::string_view reason) {
  if (closed_) return;
  closed_ = true;
  if (idle_timer_ != nullptr) idle_timer_->Cancel();
  handler_->OnClose(*this, code, reason);
}

void WebSocketSession::OnIdleTimer() {
  if (closed_) return;
  if (saw_frame_) {
    saw_frame_ = false;
    pinged_ = false;
  } else if (!pinged_) {
    pinged_ = true;
    wslay_event_msg ping = {WSLAY_PING, nullptr, 0};
    wslay_event_queue_msg(ctx_, &ping);
    Flush();
  } else {
    // Two idle periods and not even a pong: the peer is gone.
    failed_ = true;
    Finish(WebSocketClose::kAbnormal, "idle");
    NotifyResume();
    return;
  }
  idle_timer_->StartAfter(options_.idle_timeout);
}

BodyReadResult WebSocketSession::DoRead(size_t max_bytes, std::string* out) {
  if (output_head_ == output_.size()) {
    output_.clear();
    output_head_ = 0;
    if (ctx_ != nullptr && wslay_event_want_write(ctx_)) wslay_event_send(ctx_);
  }
  if (output_head_ < output_.size()) {
    const size_t n = std::min(max_bytes, output_.size() - output_head_);
    out->append(output_, output_head_, n);
    output_head_ += n;
    if (want_writable_ && !closed_ && buffered_amount() <= options_.send_buffer / 2) {
      want_writable_ = false;
      handler_->OnWritable(*this);
    }
    return BodyReadResult::Data();
  }
  if (failed_) return BodyReadResult::Error(absl::AbortedError("WebSocket failed"));
  // Done when our close went out and the peer closed (or its side ended): the engine then ends
  // the stream (h1: closes the connection, as the server should first, RFC 6455 §7.1.1). A
  // close sent after a violation wslay found (it stops reading then) ends it too: the
  // connection is failed (§7.1.7), the peer's answer not awaited.
  if (ctx_ == nullptr || (wslay_event_get_close_sent(ctx_) && !wslay_event_want_write(ctx_) &&
                          (wslay_event_get_close_received(ctx_) || input_ended_ ||
                           !wslay_event_get_read_enabled(ctx_)))) {
    if (ctx_ != nullptr) Finish(wslay_event_get_status_code_sent(ctx_), {});
    return BodyReadResult::End();
  }
  if (closed_ && input_ended_) return BodyReadResult::End();
  return BodyReadResult::WouldBlock();
}

ssize_t WebSocketSession::RecvCallback(wslay_event_context_ptr ctx, uint8_t* buf, size_t len, int,
                                       void* user) {
  auto* self = static_cast<WebSocketSession*>(user);
  const size_t available = self->input_.size() - self->input_head_;
  if (available == 0 || self->paused_) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  const size_t n = std::min(len, available);
  std::memcpy(buf, self->input_.data() + self->input_head_, n);
  self->input_head_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t WebSocketSession::SendCallback(wslay_event_context_ptr, const uint8_t* data, size_t len,
                                       int, void* user) {
  // Everything wslay frames moves here at once (it copied each message when it was queued, and
  // frees the copy now), so buffered_amount is exact and send_buffer bounds the memory.
  static_cast<WebSocketSession*>(user)->output_.append(reinterpret_cast<const char*>(data), len);
  return static_cast<ssize_t>(len);
}

void WebSocketSession::OnFrameStartCallback(wslay_event_context_ptr,
                                            const wslay_event_on_frame_recv_start_arg*,
                                            void* user) {
  static_cast<WebSocketSession*>(user)->saw_frame_ = true;
}

void WebSocketSession::OnMessageCallback(wslay_event_context_ptr,
                                         const wslay_event_on_msg_recv_arg* arg, void* user) {
  auto* self = static_cast<WebSocketSession*>(user);
  if (self->closed_) return;
  const absl::string_view data(reinterpret_cast<const char*>(arg->msg), arg->msg_length);
  switch (arg->opcode) {
    case WSLAY_TEXT_FRAME:  // wslay checked the UTF-8 (1007 otherwise), as it arrived
      return self->handler_->OnMessage(*self, WebSocketMessageType::kText, data);
    case WSLAY_BINARY_FRAME:
      return self->handler_->OnMessage(*self, WebSocketMessageType::kBinary, data);
    case WSLAY_CONNECTION_CLOSE: {
      // wslay answers the close itself; the payload is the code (2 bytes) then the reason.
      const uint16_t code = arg->status_code != 0 ? arg->status_code : WebSocketClose::kNoStatus;
      return self->Finish(code, data.size() > 2 ? data.substr(2) : absl::string_view());
    }
    default:
      return;  // ping (wslay sends the pong) and pong
  }
}

}  // namespace petrel::http_internal
