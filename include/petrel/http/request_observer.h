// Public (engine-facing): RequestObserver, told once about every request an HTTP engine (h1, h2,
// h3) finished — for metrics and access logs. HttpServer installs one; handlers never see it.
#ifndef PETREL_HTTP_REQUEST_OBSERVER_H_
#define PETREL_HTTP_REQUEST_OBSERVER_H_

#include <cstdint>

#include "petrel/common/clock.h"
#include "petrel/common/socket_address.h"
#include "petrel/http/request.h"

namespace petrel {

enum class HttpProtocol : uint8_t { kHttp1, kHttp2, kHttp3 };

// A protection limit a peer ran into; the engine then closed or reset what it names.
enum class PeerLimit : uint8_t {
  kRapidReset,         // h2 RST_STREAM / h3 RESET_STREAM+STOP_SENDING of unanswered requests
                       // over the rate limit: the connection is closed
  kPingFlood,          // h2 PING frames over the rate limit: the connection is closed
  kSettingsFlood,      // h2 SETTINGS frames over the rate limit: the connection is closed
  kEmptyDataFlood,     // h2 empty DATA frames over the rate limit: the connection is closed
  kContinuationFlood,  // h2 header block over its frame or byte limit: the connection is closed
  kHeaderTimeout,      // a request head not complete in time (h1: 408; h2: GOAWAY)
  kBodyTimeout,        // a request body stalled (h1: 408 or close; h2: the stream is reset)
  kSendTimeout,        // the peer stopped reading our output: the connection is closed
  kProtocolError,      // the peer broke the protocol and the connection is closed with the
                       // error's code — h3: HTTP/3 or QPACK (a frame where none may be, more
                       // QPACK-blocked streams than allowed, a bad encoder instruction); h2: a
                       // GOAWAY for the peer's error (PROTOCOL_ERROR, FLOW_CONTROL_ERROR, ...)
};
inline constexpr int kPeerLimitCount = 9;
// The name metrics and logs use: "rapid_reset", "ping_flood", ...
inline constexpr const char* PeerLimitName(PeerLimit limit) {
  constexpr const char* kNames[kPeerLimitCount] = {
      "rapid_reset",    "ping_flood",   "settings_flood", "empty_data_flood", "continuation_flood",
      "header_timeout", "body_timeout", "send_timeout",   "protocol_error"};
  return kNames[static_cast<int>(limit)];
}

struct RequestRecord {
  HttpProtocol protocol = HttpProtocol::kHttp1;
  // Null when the engine answered bytes that never became a request (an h1 parse error or a
  // header timeout): there is no method or path then.
  const Request* request = nullptr;
  const SocketAddress* peer = nullptr;  // never null
  // The status of the response head that went out; 0 if none did (reset, connection lost).
  int status = 0;
  uint64_t body_bytes = 0;  // response body bytes handed to the transport (none for HEAD)
  TimePoint start;          // the request head was complete (MonotonicNow)
  // Every byte of the response was handed to the transport; false: cancelled or cut short.
  bool completed = false;
};

class RequestObserver {
 public:
  virtual ~RequestObserver() = default;
  // Once per request, on the loop thread of its connection (any of a server's threads, so an
  // implementation must be thread-safe), when the response completed or the request ended
  // without one. `record` and what it points to are valid only during the call. Must not call
  // back into the engine, and should be quick: it runs on the connection's event loop.
  virtual void OnRequestDone(const RequestRecord& record) = 0;
  // A peer of a `protocol` connection ran into `limit` (same threads and rules as above).
  virtual void OnPeerLimit(HttpProtocol protocol, PeerLimit limit) {
    (void)protocol;
    (void)limit;
  }
  // A WebSocket opened on a `protocol` connection, and later ended: `code` is the close code
  // Petrel sent — its answer to the peer's close, or its own (1001 at a server stop; 1002,
  // 1007, 1009 for bad input) — or 1006 if the transport ended before it sent one.
  virtual void OnWebSocketOpened(HttpProtocol protocol) { (void)protocol; }
  virtual void OnWebSocketClosed(HttpProtocol protocol, uint16_t code) {
    (void)protocol;
    (void)code;
  }
};

}  // namespace petrel

#endif  // PETREL_HTTP_REQUEST_OBSERVER_H_
