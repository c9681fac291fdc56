// A program built outside the Petrel tree against an installed Petrel. It serves GET /hello
// over HTTP/1.1, HTTP/2 and HTTP/3 on ports the system picks, prints them, and exits after
// answering GET /quit. Petrel's install test (examples/tests/install_test.sh) drives it.
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "petrel/http/http_server.h"
#include "petrel/http/request.h"
#include "petrel/http/response.h"
#include "petrel/version.h"

int main() {
  petrel::HttpServerConfig config;
  config.http_port = 0;
  config.https_port = 0;
  petrel::HttpServer server(config);
  petrel::Router& router = server.router();
  absl::Status routed = router.Get("/hello", [](petrel::Request& req, petrel::Response& res) {
    res.Send(200, absl::StrCat("hello from an installed Petrel over ",
                               petrel::HttpVersionName(req.version()), "\n"));
  });
  if (routed.ok()) {
    // Stop() is safe from a handler: the server finishes this response, then shuts down.
    routed = router.Get("/quit", [&server](petrel::Request&, petrel::Response& res) {
      res.Send(200, "bye\n");
      server.Stop();
    });
  }
  if (!routed.ok()) {
    std::fprintf(stderr, "consumer: %s\n", routed.ToString().c_str());
    return 1;
  }
  if (absl::Status s = server.Start(); !s.ok()) {
    std::fprintf(stderr, "consumer: cannot start: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("consumer: %s\n", petrel::VersionLine().c_str());
  std::printf("consumer: listening: http %u https %u\n", server.http_port(), server.https_port());
  std::fflush(stdout);
  server.Wait();
  std::printf("consumer: stopped\n");
  return 0;
}
