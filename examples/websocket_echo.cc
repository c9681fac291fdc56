// websocket_echo: a WebSocket echo endpoint at /echo, one handler for every protocol — HTTP/1.1
// Upgrade (RFC 6455), HTTP/2 extended CONNECT (RFC 8441) and HTTP/3 extended CONNECT
// (RFC 9220). Each message comes back as it came (text as text, binary as binary). SIGINT or
// SIGTERM stops it gracefully: every open WebSocket is closed with 1001 ("going away").
//
//   websocket_echo [HTTP_PORT [HTTPS_PORT]]     defaults 8080 and 8443; 0 picks a free port
//
//   python3 -m websockets ws://127.0.0.1:8080/echo              # HTTP/1.1
//   petrel-client -k --websocket https://127.0.0.1:8443/echo    # HTTP/3: stdin lines in, echoes
//   out
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "petrel/http/http_server.h"
#include "petrel/http/request.h"
#include "petrel/http/websocket.h"

namespace {

// One per WebSocket, made by the route's factory; every callback runs on the loop thread of
// the connection that carries it, so it needs no locking.
class Echo : public petrel::WebSocketHandler {
 public:
  void OnMessage(petrel::WebSocket& ws, petrel::WebSocketMessageType type,
                 absl::string_view data) override {
    if (refused_.empty() && Send(ws, type, data)) return;
    // A client that sends faster than it reads has filled the send buffer: keep the echo, and
    // stop reading the client until the buffer drains, so that its own transport's flow
    // control holds it back.
    refused_.emplace_back(type, std::string(data));
    ws.PauseReading();
  }

  void OnWritable(petrel::WebSocket& ws) override {
    while (!refused_.empty()) {
      if (!Send(ws, refused_.front().first, refused_.front().second)) return;  // next time
      refused_.pop_front();
    }
    ws.ResumeReading();
  }

 private:
  static bool Send(petrel::WebSocket& ws, petrel::WebSocketMessageType type,
                   absl::string_view data) {
    return type == petrel::WebSocketMessageType::kText ? ws.SendText(data) : ws.SendBinary(data);
  }

  std::deque<std::pair<petrel::WebSocketMessageType, std::string>> refused_;
};

std::optional<uint16_t> ParsePort(const char* text) {
  uint32_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value > 65535) return std::nullopt;
  return static_cast<uint16_t>(value);
}

}  // namespace

int main(int argc, char** argv) {
  petrel::HttpServerConfig config;
  if (argc > 1) config.http_port = ParsePort(argv[1]);
  if (argc > 2) config.https_port = ParsePort(argv[2]);
  if (argc > 3 || !config.http_port || !config.https_port) {
    std::fprintf(stderr, "usage: %s [HTTP_PORT [HTTPS_PORT]]\n", argv[0]);
    return 2;
  }

  petrel::HttpServer server(config);
  petrel::WebSocketOptions options;
  options.max_message = 4 << 20;  // a larger message is refused with close 1009
  absl::Status routed = server.router().WebSocket(
      "/echo", [](petrel::Request&) { return std::make_unique<Echo>(); }, options);
  if (!routed.ok()) {
    std::fprintf(stderr, "websocket_echo: %s\n", routed.ToString().c_str());
    return 1;
  }

  // The stop signals go to sigwait() below, not to the server's threads (see hello_server).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (absl::Status s = server.Start(); !s.ok()) {
    std::fprintf(stderr, "websocket_echo: cannot start: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf(
      "websocket_echo: http %u (ws://, HTTP/1.1 and h2c), https %u (wss://, HTTP/1.1, "
      "HTTP/2, HTTP/3), path /echo\n",
      server.http_port(), server.https_port());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::printf("websocket_echo: signal %d, stopping\n", sig);
  std::fflush(stdout);
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  // Open WebSockets get close 1001 now; the server waits up to 5 s for the clients' answers.
  server.Stop(std::chrono::seconds(5));
  server.Wait();
  std::printf("websocket_echo: stopped\n");
  return 0;
}
