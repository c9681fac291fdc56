// websocket_broadcast: a chat room at /room. Every text message a client sends reaches every
// client in the room (the sender too), whichever protocol carries each one — HTTP/1.1 Upgrade,
// HTTP/2 or HTTP/3 extended CONNECT — and whichever of the server's threads owns its connection.
// Clients that read slower than the room talks are closed with 1008 rather than buffered
// without bound. SIGINT or SIGTERM stops it gracefully (close 1001 to everyone).
//
//   websocket_broadcast [HTTP_PORT [HTTPS_PORT]]     defaults 8080 and 8443; 0 picks a free port
//
//   python3 -m websockets ws://127.0.0.1:8080/room             # in two terminals
//   petrel-client -k --websocket https://127.0.0.1:8443/room   # HTTP/3
//
// Threading is the point of this example: a WebSocket may only be used on the loop thread of its
// connection, and the members of one room live on several loops. So the room keeps one member
// list per loop, touched only on that loop, and a message fans out by posting one task to each
// loop, which sends it to that loop's members.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "petrel/common/event_loop.h"
#include "petrel/http/http_server.h"
#include "petrel/http/request.h"
#include "petrel/http/websocket.h"

namespace {

// The members one loop thread owns. Only that thread reads or changes `members`.
struct LoopMembers {
  petrel::EventLoop* loop = nullptr;
  std::vector<petrel::WebSocket*> members;
};

class Room {
 public:
  // The calling loop's member list, made on first use (factories run on the loop thread).
  LoopMembers* ForCurrentLoop() {
    petrel::EventLoop* loop = petrel::EventLoop::Current();
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::unique_ptr<LoopMembers>& l : loops_) {
      if (l->loop == loop) return l.get();
    }
    loops_.push_back(std::make_unique<LoopMembers>());
    loops_.back()->loop = loop;
    return loops_.back().get();
  }

  // Sends `text` to every member on every loop. One copy of the text is shared by the tasks;
  // the lock only guards the list of loops, never a send.
  void Broadcast(std::string text) {
    auto shared = std::make_shared<const std::string>(std::move(text));
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    for (const std::unique_ptr<LoopMembers>& l : loops_) {
      l->loop->RunInLoop([l = l.get(), shared] {
        // Sending may close a member (see below), which removes it from the list: iterate a copy.
        const std::vector<petrel::WebSocket*> members = l->members;
        for (petrel::WebSocket* ws : members) {
          // A full send buffer means this reader is a message buffer behind the room.
          if (!ws->SendText(*shared)) ws->Close(1008, "too slow for the room");
        }
      });
    }
  }

  // The server stops: no more fan-out, so that no task is posted to a loop that is shutting
  // down (everyone is leaving; the server closes each member with 1001).
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }

 private:
  std::mutex mu_;
  bool stopping_ = false;
  // Never shrinks: the loops live as long as the server, and a list may be empty.
  std::vector<std::unique_ptr<LoopMembers>> loops_;
};

class Member : public petrel::WebSocketHandler {
 public:
  Member(Room* room, LoopMembers* here, std::string name)
      : room_(room), here_(here), name_(std::move(name)) {}

  void OnOpen(petrel::WebSocket& ws) override {
    here_->members.push_back(&ws);
    room_->Broadcast(absl::StrCat("* ", name_, " joined"));
  }
  void OnMessage(petrel::WebSocket&, petrel::WebSocketMessageType type,
                 absl::string_view data) override {
    if (type != petrel::WebSocketMessageType::kText) return;  // the room speaks text
    room_->Broadcast(absl::StrCat(name_, ": ", data));
  }
  void OnClose(petrel::WebSocket& ws, uint16_t, absl::string_view) override {
    std::vector<petrel::WebSocket*>& m = here_->members;
    m.erase(std::remove(m.begin(), m.end(), &ws), m.end());
    room_->Broadcast(absl::StrCat("* ", name_, " left"));
  }

 private:
  Room* room_;
  LoopMembers* here_;
  std::string name_;
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

  Room room;  // before the server: its handlers use the room until the server is gone
  petrel::HttpServer server(config);
  petrel::WebSocketOptions options;
  options.max_message = 64 * 1024;
  options.send_buffer = 256 * 1024;  // how far a member may fall behind before it is closed
  // A member's name: the letters and digits of ?name=... (up to 32), else its address.
  absl::Status routed = server.router().WebSocket(
      "/room",
      [&room](petrel::Request& req) {
        absl::string_view query = req.query();
        std::string name;
        if (absl::ConsumePrefix(&query, "name=")) {
          for (char c : query) {
            if (c == '&' || name.size() == 32) break;
            if (absl::ascii_isalnum(static_cast<unsigned char>(c))) name += c;
          }
        }
        if (name.empty()) name = req.peer_address().ToString();
        return std::make_unique<Member>(&room, room.ForCurrentLoop(), std::move(name));
      },
      options);
  if (!routed.ok()) {
    std::fprintf(stderr, "websocket_broadcast: %s\n", routed.ToString().c_str());
    return 1;
  }

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (absl::Status s = server.Start(); !s.ok()) {
    std::fprintf(stderr, "websocket_broadcast: cannot start: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf(
      "websocket_broadcast: http %u (ws://, HTTP/1.1 and h2c), https %u (wss://, "
      "HTTP/1.1, HTTP/2, HTTP/3), path /room\n",
      server.http_port(), server.https_port());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::printf("websocket_broadcast: signal %d, stopping\n", sig);
  std::fflush(stdout);
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  room.Stop();
  server.Stop(std::chrono::seconds(5));
  server.Wait();  // every loop is down: no task of the room runs any more
  std::printf("websocket_broadcast: stopped\n");
  return 0;
}
