#include "server/websocket_echo.h"

#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "petrel/http/websocket.h"

namespace petrel::server {
namespace {

class Echo final : public WebSocketHandler {
 public:
  void OnMessage(WebSocket& ws, WebSocketMessageType type, absl::string_view data) override {
    if (refused_.empty() && Send(ws, type, data)) return;
    // The send buffer is full: keep this echo and stop reading the client until it drains, so
    // that the client's transport window holds it back.
    refused_.emplace_back(type, std::string(data));
    ws.PauseReading();
  }

  void OnWritable(WebSocket& ws) override {
    while (!refused_.empty()) {
      if (!Send(ws, refused_.front().first, refused_.front().second)) return;  // wait again
      refused_.pop_front();
    }
    ws.ResumeReading();
  }

 private:
  static bool Send(WebSocket& ws, WebSocketMessageType type, absl::string_view data) {
    return type == WebSocketMessageType::kText ? ws.SendText(data) : ws.SendBinary(data);
  }

  std::deque<std::pair<WebSocketMessageType, std::string>> refused_;
};

}  // namespace

absl::Status AddWebSocketEcho(Router& router, absl::string_view path) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("--websocket-echo: \"", path, "\" is no path (it must start with '/')"));
  }
  WebSocketOptions options;
  options.max_message = 16 << 20;
  options.deflate.enabled = true;  // what browsers offer; a client that does not gets none
  return router.WebSocket(
      path, [](Request&) { return std::make_unique<Echo>(); }, options);
}

}  // namespace petrel::server
