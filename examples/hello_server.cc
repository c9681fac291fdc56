// hello_server: the smallest complete Petrel server. One handler answers GET /hello over
// HTTP/1.1 and HTTP/2 (cleartext and TLS) and HTTP/3, and says which protocol carried the
// request. SIGINT or SIGTERM stops it gracefully.
//
//   hello_server [HTTP_PORT [HTTPS_PORT]]     defaults 8080 and 8443; 0 picks a free port
//
//   curl http://127.0.0.1:8080/hello                       # HTTP/1.1
//   curl --http2-prior-knowledge http://127.0.0.1:8080/hello
//   curl -k --http2 https://127.0.0.1:8443/hello           # -k: the certificate is self-signed
//   h3_client -k 127.0.0.1 8443 /hello                     # HTTP/3, UDP port 8443
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "petrel/http/http_server.h"
#include "petrel/http/request.h"
#include "petrel/http/response.h"

namespace {

// A port number in 0..65535, or nullopt.
std::optional<uint16_t> ParsePort(const char* text) {
  uint32_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value > 65535) return std::nullopt;
  return static_cast<uint16_t>(value);
}

}  // namespace

int main(int argc, char** argv) {
  // The defaults: bind 127.0.0.1, HTTP/3 on (on the HTTPS port number, over UDP), and a
  // self-signed certificate for "localhost" and "127.0.0.1" since no certificate_file is given.
  petrel::HttpServerConfig config;
  if (argc > 1) config.http_port = ParsePort(argv[1]);
  if (argc > 2) config.https_port = ParsePort(argv[2]);
  if (argc > 3 || !config.http_port || !config.https_port) {
    std::fprintf(stderr, "usage: %s [HTTP_PORT [HTTPS_PORT]]\n", argv[0]);
    return 2;
  }

  petrel::HttpServer server(config);
  // A handler sees the same Request and Response whichever engine (h1, h2, h3) carried the
  // exchange; it runs on the loop thread that owns the connection.
  absl::Status routed =
      server.router().Get("/hello", [](petrel::Request& req, petrel::Response& res) {
        res.Send(200, absl::StrCat("hello over ", petrel::HttpVersionName(req.version()), "\n"),
                 "text/plain");
      });
  if (!routed.ok()) {
    std::fprintf(stderr, "hello_server: %s\n", routed.ToString().c_str());
    return 1;
  }

  // Block the stop signals before Start(): the server's threads inherit this mask, so the
  // signals reach only the sigwait() below, and Stop() runs as ordinary code rather than in a
  // signal handler (where almost nothing is safe to call).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a peer that goes away must not kill the process

  if (absl::Status s = server.Start(); !s.ok()) {
    std::fprintf(stderr, "hello_server: cannot start: %s\n", s.ToString().c_str());
    return 1;
  }
  // Start() returns once every listener accepts; with port 0 these are the ports it picked.
  std::printf("hello_server: http %u (HTTP/1.1, h2c), https %u (HTTP/1.1, HTTP/2, HTTP/3), on",
              server.http_port(), server.https_port());
  for (const petrel::SocketAddress& a : server.local_addresses()) {
    std::printf(" %s", a.ToString().c_str());
  }
  std::printf("\n");
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::printf("hello_server: signal %d, stopping\n", sig);
  std::fflush(stdout);
  // Unblocked on this thread only: a second signal now takes its default action (exit at once)
  // instead of waiting for the grace period.
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  // Graceful: listeners close, requests in flight finish (h2 and h3 send GOAWAY), and whatever
  // is still open after 5 s is closed. Wait() returns when every thread is down.
  server.Stop(std::chrono::seconds(5));
  server.Wait();
  std::printf("hello_server: stopped\n");
  return 0;
}
