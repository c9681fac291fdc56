// Public: the client side of a WebSocket over HTTP/3 (RFC 9220): an extended CONNECT on an
// Http3Client's connection, framed by libwslay in the client role (every frame masked with a
// key from BoringSSL's RAND_bytes).
//
//   petrel::WebSocketClientOptions options;
//   options.path = "/chat";
//   options.subprotocols = {"chat.v2"};
//   petrel::WebSocketClientCallbacks cb;
//   cb.on_open = [&](absl::Status s, absl::string_view subprotocol) { ... ws->SendText("hi"); };
//   cb.on_message = [&](petrel::WebSocketMessageType type, absl::string_view data) { ... };
//   cb.on_close = [&](uint16_t code, absl::string_view reason) { ... };
//   auto ws = petrel::WebSocketClient::Open(client, std::move(options), std::move(cb));
//
// Threading: a WebSocketClient belongs to the loop thread of its Http3Client; every call and
// callback happens there. Open may also be called before the client's Connect(). The
// Http3Client must outlive it.
#ifndef PETREL_HTTP_WEBSOCKET_CLIENT_H_
#define PETREL_HTTP_WEBSOCKET_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "petrel/http/header_map.h"
#include "petrel/http/http3_client.h"
#include "petrel/http/websocket.h"

namespace petrel {

struct WebSocketClientOptions {
  std::string path = "/";  // origin form, query included
  std::string authority;   // empty: the client's
  // Subprotocols to offer (Sec-WebSocket-Protocol), best first. An answer naming one not
  // offered fails the opening.
  std::vector<std::string> subprotocols;
  HeaderMap headers;  // more request fields (origin, authorization, ...)
  // A reassembled message larger than this closes the WebSocket with 1009.
  size_t max_message = 1 << 20;
  // Bytes of queued output at which Send* starts to refuse (see WebSocketClient::SendText).
  size_t send_buffer = 1 << 20;
};

// What the opener hears: on_open once; then, only if it said OK, on_message zero or more times,
// on_writable as needed and on_close once. A callback may call into the WebSocketClient, and may
// destroy it (nothing runs for it afterwards).
struct WebSocketClientCallbacks {
  // OK with the subprotocol the server chose (empty: none), or why there is no WebSocket: the
  // server answered other than 200 (PermissionDenied for 401/403, NotFound for 404,
  // FailedPrecondition otherwise; the message names the status), it chose a subprotocol that
  // was not offered (DataLoss), or the stream or connection failed first (Http3Client's status).
  absl::AnyInvocable<void(absl::Status status, absl::string_view subprotocol)> on_open;
  // A whole message (fragments reassembled); text is valid UTF-8. `data` is valid during the
  // call only.
  absl::AnyInvocable<void(WebSocketMessageType type, absl::string_view data)> on_message;
  // The send buffer drained to half of `send_buffer` after a Send* returned false.
  absl::AnyInvocable<void()> on_writable;
  // The WebSocket is over: the server's close code and reason (1005 if it sent no code), the
  // code Petrel closed with after a violation by the server (1002, 1007, 1009), or 1006 when
  // the stream ended or failed without a closing handshake (the reason then says why).
  absl::AnyInvocable<void(uint16_t code, absl::string_view reason)> on_close;
};

class WebSocketClient {
 public:
  // Submits the extended CONNECT. Errors are those of Http3Client::Submit and InvalidArgument
  // for a bad subprotocol token; later failures go to on_open.
  static absl::StatusOr<std::unique_ptr<WebSocketClient>> Open(Http3Client& client,
                                                               WebSocketClientOptions options,
                                                               WebSocketClientCallbacks callbacks);
  // Cancels the stream if the WebSocket is not over yet; no callback runs after this.
  ~WebSocketClient();
  WebSocketClient(const WebSocketClient&) = delete;
  WebSocketClient& operator=(const WebSocketClient&) = delete;

  // Queue a message. False before on_open said OK, when the send buffer already holds
  // `send_buffer` bytes or more (on_writable tells when to try again), or once closing.
  bool SendText(absl::string_view text);
  bool SendBinary(absl::string_view bytes);
  // A ping (payload up to 125 bytes); the server's pong is not reported.
  bool Ping(absl::string_view payload = {});
  // Starts the closing handshake: queued messages go first, then the close frame; on_close runs
  // when the server's close arrives. `reason` up to 123 bytes of UTF-8 (else none is sent).
  void Close(uint16_t code = WebSocketClose::kNormal, absl::string_view reason = {});

  // Bytes queued and not yet handed to the HTTP/3 stream.
  size_t buffered_amount() const;
  // The subprotocol agreed on, or empty.
  absl::string_view subprotocol() const;
  // on_open said OK and on_close has not run.
  bool is_open() const;

  class Session;

 private:
  explicit WebSocketClient(std::shared_ptr<Session> session);
  std::shared_ptr<Session> session_;
};

}  // namespace petrel

#endif  // PETREL_HTTP_WEBSOCKET_CLIENT_H_
