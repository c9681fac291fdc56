// A Petrel server with WebSocket routes for the petrel-client --websocket test: it listens for
// HTTP/3 on a free loopback port, prints "port N" once it serves, and runs until killed.
//   /echo     echoes every message; the text "bye" makes it close with 1001 "bye" instead
//   /chat     the same, speaking the subprotocols "chat.v2" and "chat"
//   /refuse   refuses every opening (403)
#include <cstdio>
#include <memory>
#include <string>

#include "petrel/http/http_server.h"
#include "petrel/http/websocket.h"

namespace {

class Echo : public petrel::WebSocketHandler {
 public:
  void OnMessage(petrel::WebSocket& ws, petrel::WebSocketMessageType type,
                 absl::string_view data) override {
    if (type == petrel::WebSocketMessageType::kText) {
      if (data == "bye") return ws.Close(petrel::WebSocketClose::kGoingAway, "bye");
      ws.SendText(data);
    } else {
      ws.SendBinary(data);
    }
  }
};

}  // namespace

int main() {
  petrel::HttpServerConfig config;
  config.listen = {"127.0.0.1"};
  config.http_port = std::nullopt;
  config.https_port = 0;
  petrel::HttpServer server(config);
  petrel::Router& router = server.router();
  auto echo = [](petrel::Request&) { return std::make_unique<Echo>(); };
  petrel::WebSocketOptions chat;
  chat.subprotocols = {"chat.v2", "chat"};
  if (!router.WebSocket("/echo", echo).ok() || !router.WebSocket("/chat", echo, chat).ok() ||
      !router.WebSocket("/refuse", [](petrel::Request&) { return nullptr; }).ok()) {
    std::fprintf(stderr, "ws_echo_server: cannot add the routes\n");
    return 1;
  }
  if (absl::Status s = server.Start(); !s.ok()) {
    std::fprintf(stderr, "ws_echo_server: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::printf("port %u\n", static_cast<unsigned>(server.https_port()));
  std::fflush(stdout);
  server.Wait();
  return 0;
}
