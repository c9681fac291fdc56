#include "http/websocket/websocket_session.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "http/websocket/handshake.h"
#include "petrel/http/request_observer.h"

namespace petrel::http_internal {
namespace {

// The most handed to zlib per call (its counts are uInt).
constexpr size_t kZlibChunk = size_t{1} << 30;

bool IsDataOpcode(uint8_t opcode) {
  return opcode == WSLAY_TEXT_FRAME || opcode == WSLAY_BINARY_FRAME;
}

}  // namespace

WebSocketSession::WebSocketSession(Request& req, std::unique_ptr<WebSocketHandler> handler,
                                   const WebSocketOptions& options, std::string subprotocol,
                                   EventLoop* loop, std::optional<PermessageDeflateParams> deflate)
    : req_(req),
      handler_(std::move(handler)),
      options_(options),
      subprotocol_(std::move(subprotocol)),
      deflate_(std::move(deflate)) {
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
  if (ctx_ != nullptr && !deflate_.has_value()) {
    wslay_event_config_set_max_recv_msg_length(ctx_, options_.max_message);
  } else if (ctx_ != nullptr) {
    // wslay sees the compressed size, which for incompressible data is a little over the
    // inflated one (DEFLATE's stored blocks: 5 bytes per up to 64 KiB). It gets that slack;
    // OnMessageCallback holds uncompressed messages to max_message itself, and Inflate
    // compressed ones.
    wslay_event_config_set_max_recv_msg_length(
        ctx_, options_.max_message + options_.max_message / 1024 + 64);
    // RSV1 marks a compressed message (RFC 7692 §6). Without this wslay refuses it (1002), as
    // it must when the extension was not agreed; wslay also refuses RSV1 on control frames and
    // continuation frames itself.
    wslay_event_config_set_allowed_rsv_bits(ctx_, WSLAY_RSV1_BIT);
  }
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
    observer_->OnWebSocketClosed(protocol_, !sent ? WebSocketClose::kAbnormal
                                            : close_code_sent_ != 0
                                                ? close_code_sent_
                                                : wslay_event_get_status_code_sent(ctx_));
  }
  if (ctx_ != nullptr) wslay_event_context_free(ctx_);
  if (deflater_ready_) deflateEnd(&deflater_);
  if (inflater_ready_) inflateEnd(&inflater_);
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
  uint8_t rsv = WSLAY_RSV_NONE;
  if (deflate_.has_value() && IsDataOpcode(opcode) &&
      payload.size() >= std::max<size_t>(options_.deflate.min_size, 1)) {
    absl::string_view compressed;
    if (!Compress(payload, &compressed)) {
      // The compressor's state is unknown now: with context takeover later messages would not
      // inflate at the peer.
      Fail(WebSocketClose::kInternalError, "deflate failed");
      return false;
    }
    payload = compressed;
    rsv = WSLAY_RSV1_BIT;
  }
  wslay_event_msg msg = {opcode, reinterpret_cast<const uint8_t*>(payload.data()), payload.size()};
  if (wslay_event_queue_msg_ex(ctx_, &msg, rsv) != 0) {
    // A message the compressor took in and the peer never gets breaks its history.
    if (rsv != WSLAY_RSV_NONE) Fail(WebSocketClose::kInternalError, "could not queue");
    return false;
  }
  Flush();
  return true;
}

bool WebSocketSession::Compress(absl::string_view payload, absl::string_view* out) {
  if (!deflater_ready_) {
    if (deflateInit2(&deflater_, std::clamp(options_.deflate.level, 1, 9), Z_DEFLATED,
                     -deflate_->server_max_window_bits,
                     std::clamp(options_.deflate.mem_level, 1, 9), Z_DEFAULT_STRATEGY) != Z_OK) {
      return false;
    }
    deflater_ready_ = true;
  }
  // Room for the worst case up front (deflateBound, plus the sync flush's empty stored block),
  // so that one call normally suffices; the loop covers the rest.
  const size_t bound = deflateBound(&deflater_, payload.size()) + 16;
  if (deflated_.size() < bound) deflated_.resize(bound);
  size_t in_left = payload.size();
  size_t used = 0;
  deflater_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(payload.data()));
  for (;;) {
    if (used == deflated_.size()) deflated_.resize(deflated_.size() * 2);
    // zlib counts in uInt: a message over 4 GiB goes through in pieces.
    const uInt in_now = static_cast<uInt>(std::min<size_t>(in_left, kZlibChunk));
    const uInt room = static_cast<uInt>(std::min<size_t>(deflated_.size() - used, kZlibChunk));
    deflater_.avail_in = in_now;
    deflater_.next_out = reinterpret_cast<Bytef*>(deflated_.data() + used);
    deflater_.avail_out = room;
    const int rv = deflate(&deflater_, in_now == in_left ? Z_SYNC_FLUSH : Z_NO_FLUSH);
    in_left -= in_now - deflater_.avail_in;
    used += room - deflater_.avail_out;
    if (rv != Z_OK && rv != Z_BUF_ERROR) return false;
    // A sync flush is complete when it left output space unused.
    if (in_left == 0 && deflater_.avail_out != 0) break;
  }
  // RFC 7692 §7.2.1: the flush ends with an empty stored block, 00 00 FF FF, which is left off.
  constexpr absl::string_view kTail("\x00\x00\xff\xff", 4);
  if (used < 4 || absl::string_view(deflated_.data() + used - 4, 4) != kTail) return false;
  if (deflate_->server_no_context_takeover && deflateReset(&deflater_) != Z_OK) return false;
  *out = absl::string_view(deflated_.data(), used - 4);
  return true;
}

WebSocketSession::InflateResult WebSocketSession::InflateSome(const uint8_t* in, size_t len) {
  // The output buffer never grows past one byte over max_message: a message that expands
  // further is refused having produced no more than that, whatever its ratio.
  const size_t limit = options_.max_message + 1;
  size_t in_left = len;
  inflater_.next_in = const_cast<Bytef*>(in);
  for (;;) {
    if (inflated_size_ == inflated_.size()) {
      if (inflated_.size() >= limit) return InflateResult::kTooBig;
      inflated_.resize(std::min(limit, std::max<size_t>(inflated_.size() * 2, 16 * 1024)));
    }
    const uInt in_now = static_cast<uInt>(std::min<size_t>(in_left, kZlibChunk));
    const uInt room =
        static_cast<uInt>(std::min<size_t>(inflated_.size() - inflated_size_, kZlibChunk));
    inflater_.avail_in = in_now;
    inflater_.next_out = reinterpret_cast<Bytef*>(inflated_.data() + inflated_size_);
    inflater_.avail_out = room;
    const int rv = inflate(&inflater_, Z_SYNC_FLUSH);
    in_left -= in_now - inflater_.avail_in;
    inflated_size_ += room - inflater_.avail_out;
    if (inflated_size_ > options_.max_message) return InflateResult::kTooBig;
    if (rv == Z_STREAM_END) {  // a final block: anything after it is not DEFLATE data
      return in_left == 0 ? InflateResult::kStreamEnd : InflateResult::kBad;
    }
    if (rv == Z_BUF_ERROR && in_left == 0) return InflateResult::kDone;
    if (rv != Z_OK) return InflateResult::kBad;
    // Output space left over means inflate has nothing pending; a full buffer may hide more.
    if (in_left == 0 && inflater_.avail_out != 0) return InflateResult::kDone;
  }
}

bool WebSocketSession::Inflate(absl::string_view message) {
  if (!inflater_ready_) {
    if (inflateInit2(&inflater_, -deflate_->client_max_window_bits) != Z_OK) {
      Fail(WebSocketClose::kInternalError, "out of memory");
      return false;
    }
    inflater_ready_ = true;
  }
  inflated_size_ = 0;
  InflateResult r = InflateSome(reinterpret_cast<const uint8_t*>(message.data()), message.size());
  if (r == InflateResult::kDone) {
    // RFC 7692 §7.2.2: the sender left off the flush's 00 00 FF FF; it goes back in here.
    static constexpr uint8_t kTail[4] = {0x00, 0x00, 0xff, 0xff};
    r = InflateSome(kTail, sizeof(kTail));
  }
  if (r == InflateResult::kDone && deflate_->client_no_context_takeover) {
    inflateReset(&inflater_);  // the client promised to start every message afresh
  } else if (r == InflateResult::kStreamEnd) {
    // A final block (BFINAL) ends zlib's stream, so the next message starts a new one; but with
    // context takeover that message may still refer back into this one's bytes (RFC 7692
    // §7.2.3.4): the window goes over to the new stream as its dictionary.
    uInt window_size = 0;
    if (!deflate_->client_no_context_takeover) {
      window_.resize(size_t{1} << deflate_->client_max_window_bits);
      window_size = static_cast<uInt>(window_.size());
      if (inflateGetDictionary(&inflater_, reinterpret_cast<Bytef*>(window_.data()),
                               &window_size) != Z_OK) {
        window_size = 0;
      }
    }
    inflateReset(&inflater_);
    if (window_size != 0) {
      inflateSetDictionary(&inflater_, reinterpret_cast<const Bytef*>(window_.data()), window_size);
    }
  }
  if (r == InflateResult::kTooBig) {
    Fail(WebSocketClose::kTooBig, "message too big");
    return false;
  }
  if (r == InflateResult::kBad) {
    // RFC 7692 §8.1 says only "fail the WebSocket connection"; 1007 is RFC 6455's code for
    // data inconsistent with the message type, which a corrupt compressed payload is (the
    // frames themselves were well-formed, so 1002 would misplace the fault).
    Fail(WebSocketClose::kInvalidPayload, "bad DEFLATE data");
    return false;
  }
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
  while (!held_.empty() && !paused_ && !closed_) {
    HeldMessage m = std::move(held_.front());
    held_.pop_front();
    Deliver(m.opcode, m.data, m.status_code);
  }
  if (paused_) return;   // paused again by one of them: the rest (and the body) wait
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
    // answers with WSLAY_ERR_CALLBACK_FAILURE — our callbacks never fail, the receive callback
    // only says "no more bytes now" — and a close without a code, which goes out as 1002.
    empty_close_code_ = WebSocketClose::kProtocolError;
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
  auto* self = static_cast<WebSocketSession*>(user);
  if (self->empty_close_code_ != 0 && len == 2 && data[0] == 0x88 && data[1] == 0x00) {
    // wslay's close without a code for a frame Petrel found to break RFC 6455 (see Receive and
    // OnMessageCallback): RFC 6455 §7.1.7 fails the connection with the code, so it goes out
    // with one. A server's frames are never masked, so this is the whole frame.
    const char frame[4] = {'\x88', 2, static_cast<char>(self->empty_close_code_ >> 8),
                           static_cast<char>(self->empty_close_code_ & 0xff)};
    self->output_.append(frame, sizeof(frame));
    self->close_code_sent_ = self->empty_close_code_;
    self->empty_close_code_ = 0;
    return static_cast<ssize_t>(len);
  }
  // Everything wslay frames moves here at once (it copied each message when it was queued, and
  // frees the copy now), so buffered_amount is exact and send_buffer bounds the memory.
  self->output_.append(reinterpret_cast<const char*>(data), len);
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
  absl::string_view data(reinterpret_cast<const char*>(arg->msg), arg->msg_length);
  if (IsDataOpcode(arg->opcode) && self->deflate_.has_value()) {
    if (wslay_get_rsv1(arg->rsv)) {
      if (!self->Inflate(data)) return;
      data = absl::string_view(self->inflated_.data(), self->inflated_size_);
      // wslay checks UTF-8 as frames arrive only for messages without RSV1: the inflated text
      // is checked here.
      if (arg->opcode == WSLAY_TEXT_FRAME && !IsValidUtf8(data)) {
        return self->Fail(WebSocketClose::kInvalidPayload, "invalid UTF-8");
      }
    } else if (data.size() > self->options_.max_message) {
      // wslay's limit has the slack for compressed messages (see the constructor).
      return self->Fail(WebSocketClose::kTooBig, "message too big");
    }
  }
  if (arg->opcode == WSLAY_PING) {
    // wslay queued the pong; out with it now, before a close later in this same read is taken
    // (wslay stops sending control frames once its answering close is queued), as §5.5.2 owes
    // a pong to every ping that came before the close.
    wslay_event_send(self->ctx_);
    return;
  }
  if (!IsDataOpcode(arg->opcode) && arg->opcode != WSLAY_CONNECTION_CLOSE) return;  // a pong
  uint16_t status_code = arg->status_code;
  if (arg->opcode == WSLAY_CONNECTION_CLOSE && arg->msg_length == 1) {
    // A close body starts with a two-byte code (§5.5.1): one byte is no close but a protocol
    // error. wslay took it as a close without a code and queued an empty answer: 1002 instead.
    self->empty_close_code_ = WebSocketClose::kProtocolError;
    status_code = WebSocketClose::kProtocolError;
    data = {};
  }
  if (self->paused_ || !self->held_.empty()) {
    // The handler paused inside an earlier message of this same read: wslay parses on through
    // what it already took from the body (up to its 4 KiB read buffer, and the message that
    // completes in it), so these wait here, in order, for ResumeReading.
    self->held_.push_back({arg->opcode, std::string(data), status_code});
    return;
  }
  self->Deliver(arg->opcode, data, status_code);
}

void WebSocketSession::Deliver(uint8_t opcode, absl::string_view data, uint16_t status_code) {
  switch (opcode) {
    case WSLAY_TEXT_FRAME:  // UTF-8 checked: by wslay as it arrived, or after inflating
      return handler_->OnMessage(*this, WebSocketMessageType::kText, data);
    case WSLAY_BINARY_FRAME:
      return handler_->OnMessage(*this, WebSocketMessageType::kBinary, data);
    default: {
      // A close: wslay answers it itself; the payload is the code (2 bytes) then the reason.
      const uint16_t code = status_code != 0 ? status_code : WebSocketClose::kNoStatus;
      return Finish(code, data.size() > 2 ? data.substr(2) : absl::string_view());
    }
  }
}

}  // namespace petrel::http_internal
