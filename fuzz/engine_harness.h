// Runs an h1 or h2 engine (the real H1Connection / H2Connection on a real TcpStream) over one end
// of a socketpair, with the fuzz input written to the other end as a peer would, and a router
// whose handlers answer at once, read and echo bodies, or stream. The loop is turned until
// nothing moves, then the peer goes away; the engine must notice and close within a bounded
// number of turns (a bad peer never keeps a connection alive after it left).
#ifndef PETREL_FUZZ_ENGINE_HARNESS_H_
#define PETREL_FUZZ_ENGINE_HARNESS_H_

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fuzz_check.h"
#include "http/tcp/tcp_stream.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/socket_address.h"
#include "petrel/http/body.h"
#include "petrel/http/request.h"
#include "petrel/http/response.h"
#include "petrel/http/router.h"

namespace petrel::fuzz {

// The routes every engine target serves.
inline const Router& FuzzRouter() {
  static const Router* router = [] {
    auto* r = new Router;
    (void)r->Get("/", [](Request&, Response& res) { res.Send(200, "hello\n", "text/plain"); });
    (void)r->Any("/echo", [](Request& req, Response& res) {
      req.body().ReadAll(64 * 1024, [&res](absl::StatusOr<std::string> body) {
        if (!body.ok()) return res.Send(413, "too large\n", "text/plain");
        res.Send(200, *std::move(body), "application/octet-stream");
      });
    });
    (void)r->Get("/stream", [](Request&, Response& res) {
      StreamingBody& out = res.Stream(200);
      out.Write(std::string(3000, 's'));
      out.Write("tail");
      out.Finish(HeaderMap{{"x-trailer", "1"}});
    });
    (void)r->Get("/big", [](Request&, Response& res) {
      res.Send(200, std::string(200 * 1024, 'b'), "application/octet-stream");
    });
    return r;
  }();
  return *router;
}

// `Engine` is H1Connection or H2Connection.
template <typename Engine, typename Options>
void RunEngine(absl::string_view peer_bytes, const Options& options) {
  int fds[2];
  PETREL_FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0);
  const int peer = fds[1];
  EventLoop loop;
  const SocketAddress address = *SocketAddress::Parse("127.0.0.1", 8080);
  absl::StatusOr<std::unique_ptr<http::TcpStream>> stream =
      http::TcpStream::Create(&loop, fds[0], address, address, nullptr);
  PETREL_FUZZ_CHECK(stream.ok());
  bool closed = false;
  auto engine = std::make_unique<Engine>(
      &loop, stream->get(), [](Request& req, Response& res) { FuzzRouter().Handle(req, res); },
      options);
  engine->set_on_closed([&closed](const absl::Status&) { closed = true; });
  if (!engine->Start().ok()) closed = true;

  // Feed the peer's bytes as the socket takes them; read and drop what the engine answers.
  size_t written = 0;
  char sink[64 * 1024];
  for (int idle = 0, turn = 0; idle < 3 && turn < 2000 && !closed; ++turn) {
    bool moved = false;
    if (written < peer_bytes.size()) {
      const ssize_t n =
          ::send(peer, peer_bytes.data() + written, peer_bytes.size() - written, MSG_NOSIGNAL);
      if (n > 0) {
        written += static_cast<size_t>(n);
        moved = true;
      }
    }
    while (::recv(peer, sink, sizeof(sink), 0) > 0) moved = true;
    loop.RunOnce(std::chrono::milliseconds(0));
    idle = moved ? 0 : idle + 1;
  }
  // The peer leaves. Nothing may keep the connection open: every handler above answers at once.
  ::close(peer);
  for (int turn = 0; turn < 50 && !closed; ++turn) loop.RunOnce(std::chrono::milliseconds(0));
  PETREL_FUZZ_CHECK(closed);
  engine.reset();
  stream->reset();
}

}  // namespace petrel::fuzz

#endif  // PETREL_FUZZ_ENGINE_HARNESS_H_
