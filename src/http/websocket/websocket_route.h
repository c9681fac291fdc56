// Internal: the handler behind Router::WebSocket — the opening handshake's answer (101 on
// HTTP/1.1, 200 on HTTP/2 and HTTP/3, or the error) and the session that then runs on the
// stream.
#ifndef PETREL_HTTP_WEBSOCKET_WEBSOCKET_ROUTE_H_
#define PETREL_HTTP_WEBSOCKET_WEBSOCKET_ROUTE_H_

#include "petrel/http/router.h"
#include "petrel/http/websocket.h"

namespace petrel::http_internal {

Handler MakeWebSocketHandler(WebSocketFactory factory, WebSocketOptions options);

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_WEBSOCKET_WEBSOCKET_ROUTE_H_
