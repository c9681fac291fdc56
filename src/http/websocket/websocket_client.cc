// WebSocketClient: the request body of an extended CONNECT carries what wslay frames for the
// server, the response body what the server frames for us. The Session is shared by the handle
// and the request's callbacks, so a handle destroyed inside a callback leaves the callback's
// session alive until it returns.
#include "petrel/http/websocket_client.h"

#include <openssl/rand.h>
#include <wslay/wslay.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "http/websocket/handshake.h"

namespace petrel {
namespace {

// RFC 9110 §5.6.2: a subprotocol is a token.
bool IsToken(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c))) continue;
    if (std::strchr("!#$%&'*+-.^_`|~", c) == nullptr || c == '\0') return false;
  }
  return true;
}

absl::Status RefusedOpening(int status) {
  const std::string message =
      absl::StrCat("the server answered ", status, " to the WebSocket opening (200 expected)");
  if (status == 401 || status == 403) return absl::PermissionDeniedError(message);
  if (status == 404) return absl::NotFoundError(message);
  return absl::FailedPreconditionError(message);
}

}  // namespace

class WebSocketClient::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Http3Client& client, WebSocketClientOptions options, WebSocketClientCallbacks callbacks)
      : client_(client), options_(std::move(options)), callbacks_(std::move(callbacks)) {}
  ~Session() {
    if (ctx_ != nullptr) wslay_event_context_free(ctx_);
  }

  absl::Status Start();
  // The handle is gone: no more callbacks, and the stream goes too unless it ended.
  void Detach();

  bool Queue(uint8_t opcode, absl::string_view payload);
  void Close(uint16_t code, absl::string_view reason);
  size_t buffered_amount() const {
    const size_t queued = ctx_ != nullptr ? wslay_event_get_queued_msg_length(ctx_) : 0;
    return queued + (to_server_ != nullptr ? to_server_->buffered() : 0);
  }
  absl::string_view subprotocol() const { return subprotocol_; }
  bool is_open() const { return state_ == State::kOpen; }

 private:
  enum class State : uint8_t { kOpening, kOpen, kOver };

  void OnHead(int status, const HeaderMap& headers);
  void OnData(absl::string_view data);
  void OnComplete(const absl::Status& status);
  void OnWritable();
  // on_open with an error; the WebSocket never opened.
  void FailOpening(absl::Status status);
  // Runs wslay over what arrived, then hands what it framed to the stream.
  void Receive();
  void Flush();
  // Closes with `code` after a violation by the server: the close goes out, its answer is not
  // awaited (RFC 6455 §7.1.7).
  void Fail(uint16_t code, absl::string_view reason);
  // on_close, once.
  void Finish(uint16_t code, absl::string_view reason);

  static ssize_t RecvCallback(wslay_event_context_ptr ctx, uint8_t* buf, size_t len, int flags,
                              void* user);
  static ssize_t SendCallback(wslay_event_context_ptr ctx, const uint8_t* data, size_t len,
                              int flags, void* user);
  static int GenMaskCallback(wslay_event_context_ptr ctx, uint8_t* buf, size_t len, void* user);
  static void OnMessageCallback(wslay_event_context_ptr ctx, const wslay_event_on_msg_recv_arg* arg,
                                void* user);

  Http3Client& client_;
  const WebSocketClientOptions options_;
  WebSocketClientCallbacks callbacks_;
  wslay_event_context_ptr ctx_ = nullptr;
  uint64_t request_id_ = 0;
  // The request body, owned by the client's stream; null once the stream is over or our side
  // of it ended.
  StreamingBody* to_server_ = nullptr;
  std::string subprotocol_;
  std::string input_;  // arrived, not yet taken by wslay
  size_t input_head_ = 0;
  State state_ = State::kOpening;
  bool detached_ = false;
  bool stream_done_ = false;    // on_complete ran
  bool input_ended_ = false;    // the response body ended: no more bytes will come
  bool receiving_ = false;      // inside Receive (wslay callbacks may call back in)
  bool want_writable_ = false;  // a Send* refused since the last on_writable
};

absl::Status WebSocketClient::Session::Start() {
  for (const std::string& p : options_.subprotocols) {
    if (!IsToken(p)) return absl::InvalidArgumentError(absl::StrCat("bad subprotocol '", p, "'"));
  }
  static const wslay_event_callbacks kCallbacks = {
      &Session::RecvCallback,
      &Session::SendCallback,
      &Session::GenMaskCallback,  // RFC 6455 §5.3: an unpredictable key for every frame
      nullptr,
      nullptr,
      nullptr,
      &Session::OnMessageCallback,
  };
  if (wslay_event_context_client_init(&ctx_, &kCallbacks, this) != 0) {
    ctx_ = nullptr;
    return absl::ResourceExhaustedError("out of memory for the WebSocket framing");
  }
  wslay_event_config_set_max_recv_msg_length(ctx_, options_.max_message);

  Http3Request request;
  request.method = "CONNECT";
  request.protocol = "websocket";
  request.path = options_.path;
  request.authority = options_.authority;
  request.headers.AddAll(options_.headers);
  request.headers.Add("sec-websocket-version", "13");
  if (!options_.subprotocols.empty()) {
    request.headers.Add("sec-websocket-protocol", absl::StrJoin(options_.subprotocols, ", "));
  }
  // Its capacity is the send buffer: Send* refuses once it is full, and it reports the drain.
  auto body = std::make_unique<StreamingBody>(std::max<size_t>(options_.send_buffer, 1));
  StreamingBody* to_server = body.get();
  std::shared_ptr<Session> self = shared_from_this();
  to_server->SetOnWritable([self] { self->OnWritable(); });
  request.body = ResponseBody(std::move(body));

  Http3ResponseHandler handler;
  handler.on_head = [self](int status, const HeaderMap& headers) { self->OnHead(status, headers); };
  handler.on_data = [self](absl::string_view data) { self->OnData(data); };
  handler.on_complete = [self](absl::Status status, const HeaderMap&) { self->OnComplete(status); };
  absl::StatusOr<uint64_t> id = client_.Submit(std::move(request), std::move(handler));
  if (!id.ok()) return id.status();
  request_id_ = *id;
  to_server_ = to_server;
  return absl::OkStatus();
}

void WebSocketClient::Session::Detach() {
  detached_ = true;
  state_ = State::kOver;
  if (stream_done_) return;
  if (ctx_ != nullptr && wslay_event_get_close_received(ctx_)) {
    // Dropped in (or after) on_close for the server's close: our answer still goes out (now,
    // or when the Receive we are inside flushes) and the stream ends in order.
    Flush();
    return;
  }
  to_server_ = nullptr;
  client_.Cancel(request_id_);
}

void WebSocketClient::Session::FailOpening(absl::Status status) {
  if (state_ != State::kOpening) return;
  state_ = State::kOver;
  if (!detached_ && callbacks_.on_open) callbacks_.on_open(std::move(status), {});
}

void WebSocketClient::Session::OnHead(int status, const HeaderMap& headers) {
  if (state_ != State::kOpening) return;
  if (status != 200) {
    // Our side ends too, so the refused stream completes rather than waiting for a body.
    if (to_server_ != nullptr) to_server_->Finish();
    to_server_ = nullptr;
    return FailOpening(RefusedOpening(status));
  }
  if (std::optional<absl::string_view> chosen = headers.Get("sec-websocket-protocol")) {
    const std::string name(absl::StripAsciiWhitespace(*chosen));
    if (std::find(options_.subprotocols.begin(), options_.subprotocols.end(), name) ==
        options_.subprotocols.end()) {
      if (to_server_ != nullptr) {
        to_server_->Fail(absl::DataLossError("subprotocol not offered"));
      }
      to_server_ = nullptr;
      return FailOpening(absl::DataLossError(
          absl::StrCat("the server chose the subprotocol '", name, "', which was not offered")));
    }
    subprotocol_ = name;
  }
  state_ = State::kOpen;
  if (callbacks_.on_open) callbacks_.on_open(absl::OkStatus(), subprotocol_);
}

void WebSocketClient::Session::OnData(absl::string_view data) {
  if (state_ != State::kOpen) return;  // a refusal's body, or after the end
  input_.append(data.data(), data.size());
  Receive();
}

void WebSocketClient::Session::OnComplete(const absl::Status& status) {
  stream_done_ = true;
  to_server_ = nullptr;
  if (state_ == State::kOpening) {
    return FailOpening(status.ok() ? absl::UnavailableError(
                                         "the stream ended before the WebSocket opening's answer")
                                   : status);
  }
  input_ended_ = true;
  Receive();
  if (state_ == State::kOpen) {
    // The server's side ended (or failed) without a closing handshake (RFC 6455 §7.1.5).
    Finish(WebSocketClose::kAbnormal,
           status.ok() ? "the stream ended without a closing handshake" : status.message());
  }
}

void WebSocketClient::Session::OnWritable() {
  if (!want_writable_ || state_ != State::kOpen || detached_) return;
  want_writable_ = false;
  if (callbacks_.on_writable) callbacks_.on_writable();
}

bool WebSocketClient::Session::Queue(uint8_t opcode, absl::string_view payload) {
  if (state_ != State::kOpen || to_server_ == nullptr || wslay_event_get_close_sent(ctx_)) {
    return false;
  }
  if (buffered_amount() >= options_.send_buffer) {
    want_writable_ = true;
    return false;
  }
  wslay_event_msg msg = {opcode, reinterpret_cast<const uint8_t*>(payload.data()), payload.size()};
  if (wslay_event_queue_msg(ctx_, &msg) != 0) return false;
  Flush();
  return true;
}

void WebSocketClient::Session::Close(uint16_t code, absl::string_view reason) {
  if (state_ != State::kOpen || to_server_ == nullptr || wslay_event_get_close_sent(ctx_)) return;
  if (reason.size() > 123 || !http_internal::IsValidUtf8(reason)) reason = {};
  wslay_event_queue_close(ctx_, code, reinterpret_cast<const uint8_t*>(reason.data()),
                          reason.size());
  Flush();
}

void WebSocketClient::Session::Receive() {
  if (ctx_ == nullptr || receiving_) return;
  // A callback may drop the last handle; the session stays until this returns.
  std::shared_ptr<Session> keep = shared_from_this();
  receiving_ = true;
  const int rv = wslay_event_get_read_enabled(ctx_) ? wslay_event_recv(ctx_) : 0;
  receiving_ = false;
  if (rv == WSLAY_ERR_NOMEM) {
    Fail(WebSocketClose::kInternalError, "out of memory");
  } else if (rv != 0) {
    // As on the server: wslay closes with 1002/1007/1009 itself for violations inside a frame's
    // rules, and reports the ones its parser refuses outright as a callback failure.
    Fail(WebSocketClose::kProtocolError, "protocol error");
  }
  if (input_head_ == input_.size()) {
    input_.clear();
    input_head_ = 0;
  }
  Flush();
  if (state_ == State::kOpen && !wslay_event_get_read_enabled(ctx_)) {
    // wslay found a violation inside a frame's rules (a message over max_message, text that is
    // not UTF-8), sent its close and stopped reading: the server's answer will not be heard.
    const uint16_t code = wslay_event_get_status_code_sent(ctx_);
    Finish(code != 0 ? code : WebSocketClose::kProtocolError, {});
  }
}

void WebSocketClient::Session::Flush() {
  if (ctx_ != nullptr && wslay_event_want_write(ctx_)) wslay_event_send(ctx_);
  // Our side of the stream ends once our close is out and the server's came (or will not: it
  // broke the protocol or its side ended); the server then ends its side.
  if (to_server_ != nullptr && ctx_ != nullptr && wslay_event_get_close_sent(ctx_) &&
      !wslay_event_want_write(ctx_) &&
      (wslay_event_get_close_received(ctx_) || !wslay_event_get_read_enabled(ctx_) ||
       input_ended_)) {
    to_server_->Finish();
    to_server_ = nullptr;
  }
}

void WebSocketClient::Session::Fail(uint16_t code, absl::string_view reason) {
  if (!wslay_event_get_close_sent(ctx_)) {
    wslay_event_queue_close(ctx_, code, reinterpret_cast<const uint8_t*>(reason.data()),
                            reason.size());
  }
  wslay_event_shutdown_read(ctx_);
  Finish(code, reason);
}

void WebSocketClient::Session::Finish(uint16_t code, absl::string_view reason) {
  if (state_ != State::kOpen) return;
  state_ = State::kOver;
  if (!detached_ && callbacks_.on_close) callbacks_.on_close(code, reason);
}

ssize_t WebSocketClient::Session::RecvCallback(wslay_event_context_ptr ctx, uint8_t* buf,
                                               size_t len, int, void* user) {
  auto* self = static_cast<Session*>(user);
  const size_t available = self->input_.size() - self->input_head_;
  if (available == 0) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  const size_t n = std::min(len, available);
  std::memcpy(buf, self->input_.data() + self->input_head_, n);
  self->input_head_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t WebSocketClient::Session::SendCallback(wslay_event_context_ptr, const uint8_t* data,
                                               size_t len, int, void* user) {
  // Everything wslay frames moves to the stream's buffer at once, so buffered_amount is exact.
  // With the stream gone there is nowhere to send: the bytes are dropped.
  auto* self = static_cast<Session*>(user);
  if (self->to_server_ != nullptr) {
    self->to_server_->Write(absl::string_view(reinterpret_cast<const char*>(data), len));
  }
  return static_cast<ssize_t>(len);
}

int WebSocketClient::Session::GenMaskCallback(wslay_event_context_ptr ctx, uint8_t* buf, size_t len,
                                              void*) {
  if (RAND_bytes(buf, len) != 1) {
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
  }
  return 0;
}

void WebSocketClient::Session::OnMessageCallback(wslay_event_context_ptr,
                                                 const wslay_event_on_msg_recv_arg* arg,
                                                 void* user) {
  auto* self = static_cast<Session*>(user);
  if (self->state_ != State::kOpen || self->detached_) return;
  const absl::string_view data(reinterpret_cast<const char*>(arg->msg), arg->msg_length);
  switch (arg->opcode) {
    case WSLAY_TEXT_FRAME:  // wslay checked the UTF-8 (1007 otherwise), as it arrived
      if (self->callbacks_.on_message) {
        self->callbacks_.on_message(WebSocketMessageType::kText, data);
      }
      return;
    case WSLAY_BINARY_FRAME:
      if (self->callbacks_.on_message) {
        self->callbacks_.on_message(WebSocketMessageType::kBinary, data);
      }
      return;
    case WSLAY_CONNECTION_CLOSE: {
      // wslay answers the close itself; the payload is the code (2 bytes) then the reason.
      const uint16_t code = arg->status_code != 0 ? arg->status_code : WebSocketClose::kNoStatus;
      return self->Finish(code, data.size() > 2 ? data.substr(2) : absl::string_view());
    }
    default:
      return;  // ping (wslay sends the pong) and pong
  }
}

absl::StatusOr<std::unique_ptr<WebSocketClient>> WebSocketClient::Open(
    Http3Client& client, WebSocketClientOptions options, WebSocketClientCallbacks callbacks) {
  auto session = std::make_shared<Session>(client, std::move(options), std::move(callbacks));
  if (absl::Status s = session->Start(); !s.ok()) return s;
  return std::unique_ptr<WebSocketClient>(new WebSocketClient(std::move(session)));
}

WebSocketClient::WebSocketClient(std::shared_ptr<Session> session) : session_(std::move(session)) {}

WebSocketClient::~WebSocketClient() { session_->Detach(); }

bool WebSocketClient::SendText(absl::string_view text) {
  return session_->Queue(WSLAY_TEXT_FRAME, text);
}

bool WebSocketClient::SendBinary(absl::string_view bytes) {
  return session_->Queue(WSLAY_BINARY_FRAME, bytes);
}

bool WebSocketClient::Ping(absl::string_view payload) {
  if (payload.size() > 125) return false;
  return session_->Queue(WSLAY_PING, payload);
}

void WebSocketClient::Close(uint16_t code, absl::string_view reason) {
  session_->Close(code, reason);
}

size_t WebSocketClient::buffered_amount() const { return session_->buffered_amount(); }

absl::string_view WebSocketClient::subprotocol() const { return session_->subprotocol(); }

bool WebSocketClient::is_open() const { return session_->is_open(); }

}  // namespace petrel
