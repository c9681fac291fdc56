// Internal (petrel-server): --websocket-echo PATH, a WebSocket route that sends every message
// back as it came — for trying WebSocket clients (browsers, tools) against the server on each
// protocol (HTTP/1.1 Upgrade, HTTP/2 and HTTP/3 extended CONNECT).
#ifndef PETREL_SERVER_WEBSOCKET_ECHO_H_
#define PETREL_SERVER_WEBSOCKET_ECHO_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "petrel/http/router.h"

namespace petrel::server {

// Adds the echo at `path` (which must start with '/'). Messages up to 16 MiB; permessage-deflate
// for clients that offer it; a client that sends faster than it reads is paused, never buffered
// without bound.
absl::Status AddWebSocketEcho(Router& router, absl::string_view path);

}  // namespace petrel::server

#endif  // PETREL_SERVER_WEBSOCKET_ECHO_H_
