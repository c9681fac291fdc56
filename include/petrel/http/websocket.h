// Public: WebSocket (RFC 6455) on one handler for every protocol — HTTP/1.1 Upgrade, HTTP/2
// extended CONNECT (RFC 8441) and HTTP/3 extended CONNECT (RFC 9220).
//
//   class Echo : public petrel::WebSocketHandler {
//     void OnMessage(petrel::WebSocket& ws, petrel::WebSocketMessageType type,
//                    absl::string_view data) override {
//       type == petrel::WebSocketMessageType::kText ? ws.SendText(data) : ws.SendBinary(data);
//     }
//   };
//   router.WebSocket("/echo", [](petrel::Request&) { return std::make_unique<Echo>(); });
//
// Threading: a WebSocket and its handler belong to the loop thread of their connection; every
// call and callback happens there (work on other threads posts back first).
#ifndef PETREL_HTTP_WEBSOCKET_H_
#define PETREL_HTTP_WEBSOCKET_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/strings/string_view.h"
#include "petrel/common/clock.h"

namespace petrel {

class Request;

enum class WebSocketMessageType : uint8_t { kText, kBinary };

// Close codes (RFC 6455 §7.4.1) Petrel sends itself.
struct WebSocketClose {
  static constexpr uint16_t kNormal = 1000;
  static constexpr uint16_t kGoingAway = 1001;      // the server stops
  static constexpr uint16_t kProtocolError = 1002;  // a frame broke RFC 6455
  static constexpr uint16_t kUnsupportedData = 1003;
  static constexpr uint16_t kNoStatus = 1005;        // received: a close without a code
  static constexpr uint16_t kAbnormal = 1006;        // reported: the transport ended first
  static constexpr uint16_t kInvalidPayload = 1007;  // bad UTF-8 text, or bad DEFLATE data
  static constexpr uint16_t kPolicy = 1008;
  static constexpr uint16_t kTooBig = 1009;  // a message over max_message
  static constexpr uint16_t kInternalError = 1011;
};

// One open WebSocket, as its handler sees it. Valid from OnOpen until OnClose returns.
class WebSocket {
 public:
  virtual ~WebSocket() = default;

  // Queue a message. False when the send buffer already holds `send_buffer` bytes or more, or
  // the WebSocket is closing: the message is not queued; OnWritable tells when to try again.
  virtual bool SendText(absl::string_view text) = 0;
  virtual bool SendBinary(absl::string_view bytes) = 0;
  // A ping (payload up to 125 bytes); the peer's pong is not reported.
  virtual bool Ping(absl::string_view payload = {}) = 0;
  // Starts the closing handshake: queued messages go first, then the close frame; OnClose runs
  // when the peer's close arrives (or the transport ends). `reason` up to 123 bytes of UTF-8.
  virtual void Close(uint16_t code = WebSocketClose::kNormal, absl::string_view reason = {}) = 0;

  // Receive-side backpressure: while paused no OnMessage runs, and what arrives stays unread,
  // so the peer is held back by the transport's flow control (TCP, h2 or QUIC windows).
  virtual void PauseReading() = 0;
  virtual void ResumeReading() = 0;

  // Bytes queued and not yet handed to the transport.
  virtual size_t buffered_amount() const = 0;
  // The request that opened it (path, fields, peer address, context).
  virtual const Request& request() const = 0;
  // The subprotocol agreed on (Sec-WebSocket-Protocol), or empty.
  virtual absl::string_view subprotocol() const = 0;
};

// What a WebSocket route does with one connection; made for it by the route's factory.
class WebSocketHandler {
 public:
  virtual ~WebSocketHandler() = default;
  virtual void OnOpen(WebSocket& ws) { (void)ws; }
  // A whole message (fragments reassembled); text is valid UTF-8. `data` is valid during the
  // call only.
  virtual void OnMessage(WebSocket& ws, WebSocketMessageType type, absl::string_view data) = 0;
  // The send buffer drained to half of `send_buffer` after a Send* returned false.
  virtual void OnWritable(WebSocket& ws) { (void)ws; }
  // The WebSocket is over: the peer's close code and reason (1005 if it sent none), or 1006
  // when the transport ended without a closing handshake. Runs once; `ws` must not be used
  // after it returns.
  virtual void OnClose(WebSocket& ws, uint16_t code, absl::string_view reason) {
    (void)ws;
    (void)code;
    (void)reason;
  }
};

// Makes the handler of one WebSocket when the opening handshake is valid (after the route's
// middleware); null refuses it (403). Runs on the loop thread; may be called concurrently on
// several loop threads, hence const.
using WebSocketFactory = absl::AnyInvocable<std::unique_ptr<WebSocketHandler>(Request& req) const>;

// permessage-deflate (RFC 7692): messages compressed with DEFLATE, each on its own or, with
// context takeover, against the ones before it. Costs memory per WebSocket (docs/limits.md):
// the inflater (2^client_max_window_bits bytes plus ~7 KiB) from the first compressed message
// received, the compressor (2^(server_max_window_bits+2) + 2^(mem_level+9) bytes) from the
// first message sent compressed.
struct WebSocketDeflateOptions {
  // Off by default: when on, a client's permessage-deflate offer is accepted (the first
  // acceptable one, RFC 7692 §5.1) and the answer's Sec-WebSocket-Extensions names it.
  bool enabled = false;
  // Reset the compressor after each message sent: worse ratios, but no history kept between
  // messages (and nothing the client must keep for us either).
  bool server_no_context_takeover = false;
  // Ask the client to reset its compressor after each message (it must, once answered so); the
  // server then resets its inflater too. Also agreed when the client offers it.
  bool client_no_context_takeover = false;
  // The largest LZ77 window the server compresses with, 9..15 (lower: less memory, worse
  // ratios); the answer carries it when below 15 and lowers it to what the client allows. zlib
  // refuses an 8-bit window for raw deflate, so 8 is taken as 9 and an offer that allows the
  // server only 8 is declined rather than answered with a window the server would exceed.
  int server_max_window_bits = 15;
  // The largest window the server inflates with, 8..15. Below 15 it is asked of clients that
  // offer client_max_window_bits; offers without it (the client may use 15) are declined.
  int client_max_window_bits = 15;
  // Messages shorter than this go uncompressed: DEFLATE's few bytes of overhead and the CPU
  // are not worth it for them. Received messages are accepted either way.
  size_t min_size = 64;
  // zlib's compression level, 1 (fastest) to 9 (smallest).
  int level = 6;
  // zlib's memLevel, 1..9: the compressor's hash and match state, 2^(mem_level+9) bytes (128 KiB
  // at 8, zlib's default); lower saves memory per WebSocket for some ratio.
  int mem_level = 8;
};

struct WebSocketOptions {
  // Subprotocols the route speaks, best first; the first the client offers is chosen. Empty:
  // none (a client that offers some gets none, as RFC 6455 §4.2.2 allows).
  std::vector<std::string> subprotocols;
  // A reassembled message larger than this closes the WebSocket with 1009.
  size_t max_message = 1 << 20;
  // Bytes of queued output at which Send* starts to refuse (see WebSocket::SendText).
  size_t send_buffer = 1 << 20;
  // A ping goes out after this long without a frame from the peer, and the WebSocket ends
  // (OnClose 1006) if as long again passes without one. Zero: off.
  Duration idle_timeout = std::chrono::seconds(60);
  // permessage-deflate; max_message bounds a compressed message's inflated size too (the
  // WebSocket closes with 1009 as soon as inflating passes it).
  WebSocketDeflateOptions deflate;
};

}  // namespace petrel

#endif  // PETREL_HTTP_WEBSOCKET_H_
