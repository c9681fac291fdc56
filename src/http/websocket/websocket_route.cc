#include "http/websocket/websocket_route.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "http/websocket/handshake.h"
#include "http/websocket/permessage_deflate.h"
#include "http/websocket/websocket_session.h"
#include "petrel/common/event_loop.h"
#include "petrel/http/status.h"

namespace petrel::http_internal {
namespace {

struct Route {
  WebSocketFactory factory;
  WebSocketOptions options;

  void Handle(Request& req, Response& res) const {
    absl::StatusOr<WebSocketOpening> opening = CheckWebSocketOpening(req, options.subprotocols);
    if (!opening.ok()) {
      if (absl::IsNotFound(opening.status())) {
        // Not a WebSocket opening at all: this path speaks nothing else (RFC 9110 §15.5.22).
        res.SetHeader("upgrade", "websocket");
        return res.SendError(426, opening.status().message());
      }
      if (absl::IsFailedPrecondition(opening.status())) {
        res.SetHeader("sec-websocket-version", "13");  // RFC 6455 §4.4
        return res.SendError(426, opening.status().message());
      }
      return res.SendError(HttpStatus::kBadRequest, opening.status().message());
    }
    std::unique_ptr<WebSocketHandler> handler = factory(req);
    if (handler == nullptr) return res.SendError(HttpStatus::kForbidden, "WebSocket refused");
    // On h2 and h3 the WebSocket's bytes arrive as the CONNECT's request body, which the engine
    // holds to the body limit (max_request_body): they are no body but a stream of messages,
    // each bounded by max_message, and a WebSocket may carry any number of them.
    req.body().set_limit(std::numeric_limits<uint64_t>::max());
    std::optional<PermessageDeflateParams> deflate;
    if (options.deflate.enabled) {
      deflate = NegotiatePermessageDeflate(req.headers().GetAll("sec-websocket-extensions"),
                                           options.deflate);
    }
    auto owned = std::make_unique<WebSocketSession>(
        req, std::move(handler), options, opening->subprotocol, EventLoop::Current(), deflate);
    WebSocketSession* session = owned.get();
    if (opening->upgrade) {
      res.SetHeader("upgrade", "websocket");
      res.SetHeader("connection", "upgrade");
      res.SetHeader("sec-websocket-accept", opening->accept);
    }
    if (!opening->subprotocol.empty()) {
      res.SetHeader("sec-websocket-protocol", opening->subprotocol);
    }
    // RFC 6455 §9.1: no field at all declines every extension offered.
    if (deflate.has_value()) res.SetHeader("sec-websocket-extensions", deflate->ResponseValue());
    res.SetOnCancel([session] { session->Abort(); });
    res.SendBody(opening->upgrade ? 101 : HttpStatus::kOk, ResponseBody(std::move(owned)));
    if (res.committed()) session->Start();
  }
};

}  // namespace

Handler MakeWebSocketHandler(WebSocketFactory factory, WebSocketOptions options) {
  auto route = std::make_unique<const Route>(Route{std::move(factory), std::move(options)});
  return [route = std::move(route)](Request& req, Response& res) { route->Handle(req, res); };
}

}  // namespace petrel::http_internal
