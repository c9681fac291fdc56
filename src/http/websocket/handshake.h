// Internal: the opening handshake of a WebSocket — RFC 6455 §4.2 over HTTP/1.1 (GET + Upgrade,
// answered 101) and RFC 8441 / RFC 9220 over HTTP/2 and HTTP/3 (extended CONNECT with
// :protocol websocket, answered 200).
#ifndef PETREL_HTTP_WEBSOCKET_HANDSHAKE_H_
#define PETREL_HTTP_WEBSOCKET_HANDSHAKE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "petrel/http/request.h"

namespace petrel::http_internal {

// Sec-WebSocket-Accept for a Sec-WebSocket-Key: base64(SHA-1(key + the RFC's GUID)).
std::string WebSocketAccept(absl::string_view key);

// What a valid opening handshake asks for.
struct WebSocketOpening {
  bool upgrade = false;     // HTTP/1.1: answer 101 with Sec-WebSocket-Accept; else 200
  std::string accept;       // HTTP/1.1: the Sec-WebSocket-Accept value
  std::string subprotocol;  // chosen from `subprotocols`, or empty
};

// Checks the request against RFC 6455 §4.2.1 (HTTP/1.1: GET, Upgrade: websocket, Connection:
// upgrade, a Sec-WebSocket-Key of 16 base64-encoded bytes) or RFC 8441 §4 (CONNECT with
// :protocol websocket), Sec-WebSocket-Version 13 for both, and picks the subprotocol.
// Errors: InvalidArgument (answer 400), FailedPrecondition for a version other than 13
// (answer 426 with Sec-WebSocket-Version: 13), NotFound for a request that is no WebSocket
// opening at all (the route answers it like any other: 426 Upgrade Required).
absl::StatusOr<WebSocketOpening> CheckWebSocketOpening(
    const Request& req, const std::vector<std::string>& subprotocols);

// Whether `text` is well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, at most U+10FFFF).
bool IsValidUtf8(absl::string_view text);

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_WEBSOCKET_HANDSHAKE_H_
